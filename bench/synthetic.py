"""Synthetic specs for the build/check benchmark: N models and N tools, written as TOML.

Each model has 9-11 fields of mixed types (uuid, text, enum, integer, boolean, date, datetime, a list
of strings, a hidden nullable string) and, except for the first model of each block of 10, a reference to the
block's first model and a list of the previous model (a DAG at most 10 deep: a realistic depth; a
200-deep chain measures something else), plus casts, hidden, guarded and fillable (create / update).
Tools cycle through get (input id, returns a model), list (an optional enum and a defaulted limit,
returns Model[]), create (input_from Model.create) and update (id + input_from Model.update).
The handler module beside the spec defines every handler, so `check` reports no problem.
"""

from __future__ import annotations

import json
from pathlib import Path

STATUSES = ["new", "active", "paused", "closed"]
BLOCK = 10  # models reference earlier models of their block of 10 only (see _model)


def _q(value: object) -> str:
    return json.dumps(value)  # a TOML basic string / array of strings is valid JSON here


def model_name(i: int) -> str:
    return f"Thing{i:03d}"


def _model(i: int) -> str:
    name = model_name(i)
    fields = [
        'id = "uuid"',
        f'title = {{ type = "text", description = {_q(f"Title of {name}")} }}',
        f'status = {{ type = "enum", values = {_q(STATUSES)} }}',
        'amount = { type = "integer", description = "CENTS" }',
        'active = "boolean"',
        'due = "date"',
        'created_at = "datetime"',
        'tags = { type = "list", items = "string" }',
        'secret = { type = "string", required = false, nullable = true }',
    ]
    root = i - i % BLOCK
    if i > root:  # references stay inside a block of BLOCK models: a DAG at most BLOCK deep
        fields.append(f'parent = {{ type = "{model_name(root)}", required = false }}')
        fields.append(f'children = {{ type = "list", items = "{model_name(i - 1)}" }}')
    return "\n".join(
        [
            f"[models.{name}]",
            f"description = {_q(f'Synthetic model {i}.')}",
            'casts = { amount = "number", due = "date" }',
            'hidden = ["secret"]',
            'guarded = ["id", "created_at"]',
            'fillable = { create = ["title", "status", "amount", "due", "tags"], '
            'update = ["status", "due", "active"] }',
            f"[models.{name}.fields]",
            *fields,
            "",
        ]
    )


def tool_name(i: int) -> tuple[str, str]:
    """(tool name, handler name) of tool i."""
    verb = ("get", "list", "create", "update")[i % 4]
    return f"thing{i:03d}.{verb}", f"thing{i:03d}_{verb}"


def _tool(i: int, models: int) -> str:
    name, handler = tool_name(i)
    model = model_name(i % models)
    verb = name.rsplit(".", 1)[1]
    head = [
        f'[tools."{name}"]',
        f'kind = "{"query" if verb in ("get", "list") else "mutation"}"',
        f"description = {_q(f'{verb} {model} (synthetic tool {i}).')}",
        f'handler = "{handler}"',
    ]
    if verb == "get":
        return "\n".join(
            [
                *head,
                f'returns = "{model}"',
                f'[tools."{name}".input]',
                'id = { type = "string", description = "Which one" }',
                "",
            ]
        )
    if verb == "list":
        return "\n".join(
            [
                *head,
                f'returns = "{model}[]"',
                f'[tools."{name}".input]',
                f'status = {{ type = "enum", values = {_q(STATUSES)}, required = false }}',
                'limit = { type = "integer", default = 20 }',
                "",
            ]
        )
    if verb == "create":
        return "\n".join([*head, f'input_from = "{model}.create"', f'returns = "{model}"', ""])
    return "\n".join(
        [
            *head,
            f'input_from = "{model}.update"',
            f'returns = "{model}"',
            f'[tools."{name}".input]',
            'id = "string"',
            "",
        ]
    )


def spec_text(count: int, server: str) -> str:
    parts = [
        "[server]",
        f'name = "{server}"',
        'version = "1.0.0"',
        f'package = "{server}_server"',
        f'handlers = "{server}_handlers"',
        "",
        *(_model(i) for i in range(count)),
        *(_tool(i, count) for i in range(count)),
    ]
    return "\n".join(parts)


def handlers_text(count: int) -> str:
    functions = [f"def {tool_name(i)[1]}(args: Any) -> Any:\n    raise NotImplementedError\n" for i in range(count)]
    return '"""Synthetic handlers."""\n\nfrom typing import Any\n\n\n' + "\n\n".join(functions)


def write_spec(directory: Path, count: int) -> Path:
    """Write `synth<count>.toml` and its handler module into `directory`; return the spec's path."""
    server = f"synth{count}"
    directory.mkdir(parents=True, exist_ok=True)
    spec = directory / f"{server}.toml"
    spec.write_text(spec_text(count, server), encoding="utf-8")
    (directory / f"{server}_handlers.py").write_text(handlers_text(count), encoding="utf-8")
    return spec
