"""`Imported` → spec TOML, and the re-import rule: the importer owns one marked region, the user the rest.

A written spec has three parts: the header and `[server]` (written once, then yours), the region between
`BEGIN` and `END` (replaced by every import), and everything after `END` (yours: presenters, workflows,
models and tools of your own). Inside the region, some keys are yours too and survive a re-import: every key
of a model other than `description` and `fields` (`hidden` and `guarded` are the union of yours and the
document's: a field the document newly marks writeOnly is hidden even if you edited the list; `fillable`
operations the document's bodies generate follow the document, minus the guarded fields, yours are kept),
and every key of a tool other than `kind`, `description`, `input`, `input_from`, `returns`, `tags` and, with
`--handlers http`, the `errors` codes its handler raises (`handler`, `bind_state`, `compact_description`,
your own `errors` codes, ...). Comments you write inside the region are not kept.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fusiongen.importers.openapi.mapping import Field, Imported, Model, Tool
from fusiongen.pyliteral import comment_text, toml_string

BEGIN = "# >>> fusiongen import openapi"
END = "# <<< fusiongen import openapi"
OWNED_MODEL_KEYS = frozenset({"description", "fields"})
OWNED_TOOL_KEYS = frozenset({"kind", "description", "input", "input_from", "returns", "tags"})
COMPACT_SERVER = 'output_schemas = "none"  # --compact: results keep their envelope; tools/list has no schemas'
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


class NotOurs(Exception):
    """The output exists but has no import region: it is not a file this command wrote."""


@dataclass(frozen=True)
class Kept:
    """What the user owns in an existing spec: the text around the region and the keys inside it."""

    prefix: str
    suffix: str
    models: Mapping[str, Mapping[str, Any]]
    tools: Mapping[str, Mapping[str, Any]]


def key(name: str) -> str:
    return name if BARE_KEY.match(name) else toml_string(name)


def value(item: Any) -> str:
    """A TOML literal for the values a spec holds: strings, numbers, booleans, lists, inline tables."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return multiline_string(item) if "\n" in item else toml_string(item)
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, Mapping):
        return "{ " + ", ".join(f"{key(str(k))} = {value(v)}" for k, v in item.items()) + " }" if item else "{}"
    return toml_string(str(item))


def multiline_string(text: str) -> str:
    """A TOML multi-line basic string, one source line per line of text (each escaped as a basic string is)."""
    return '"""\n' + "\n".join(toml_string(line)[1:-1] for line in text.split("\n")) + '"""'


def comments(lines: list[str], indent: str = "") -> list[str]:
    return [f"{indent}# {comment_text(line)}" for line in lines]


def field_line(item: Field) -> list[str]:
    table: dict[str, Any] = {"type": item.type}
    if item.values is not None:
        table["values"] = item.values
    if item.items is not None:
        table["items"] = item.items
    if not item.required:
        table["required"] = False
    if item.nullable:
        table["nullable"] = True
    if item.default is not None and not item.required and _default_fits(item):
        table["default"] = item.default
    table.update(item.constraints)
    if item.examples:
        table["examples"] = item.examples
    if item.description:
        table["description"] = item.description
    text = value(table) if len(table) > 1 else toml_string(item.type)
    return [*comments(item.comments), f"{key(item.name)} = {text}"]


def _default_fits(item: Field) -> bool:
    expected = {"string": str, "integer": int, "number": int | float, "boolean": bool, "enum": str}
    kind = expected.get(item.type)
    return kind is not None and isinstance(item.default, kind) and not (item.type == "integer" and item.default is True)


def model_block(model: Model, user: Mapping[str, Any]) -> list[str]:
    names = {f.name for f in model.fields}
    table: dict[str, Any] = {}
    if model.description:
        table["description"] = model.description
    for list_key, ours in (("hidden", model.hidden), ("guarded", model.guarded)):
        theirs = [n for n in user.get(list_key, []) if isinstance(n, str)]
        merged = [n for n in dict.fromkeys([*theirs, *ours]) if n in names]
        if merged:
            table[list_key] = merged
    guarded = set(table.get("guarded", []))
    fillable = {op: [n for n in fields if n not in guarded] for op, fields in model.fillable.items()}
    for op, fields in (user.get("fillable") or {}).items():
        if op not in fillable:  # the document's body decides the operations it generates; yours are kept
            fillable[op] = [n for n in fields if isinstance(n, str) and n in names and n not in guarded]
    if fillable:
        table["fillable"] = fillable
    for other, item in user.items():
        if other not in OWNED_MODEL_KEYS and other not in table:
            table[other] = item
    lines = [f"# from {model.pointer}", *comments(model.comments), f"[models.{key(model.name)}]"]
    lines += [f"{key(k)} = {value(v)}" for k, v in table.items()]
    lines.append(f"[models.{key(model.name)}.fields]")
    for item in model.fields:
        lines += field_line(item)
    return lines


def tool_block(tool: Tool, user: Mapping[str, Any], *, http: bool) -> list[str]:
    """`http`: the tools' handlers are the httpx module's, so `errors` is the import's (the codes it raises,
    merged over codes of your own); otherwise `errors` is yours alone."""
    head = f"{tool.method.upper()} {tool.path}" + (f" · tags: {', '.join(tool.tags)}" if tool.tags else "")
    lines = [f"# {comment_text(head)} · from {tool.pointer}", *comments(tool.comments), f"[tools.{key(tool.name)}]"]
    table: dict[str, Any] = {"kind": tool.kind}
    if tool.description:
        table["description"] = tool.description
    if tool.returns:
        table["returns"] = tool.returns
    if tool.input_from:
        table["input_from"] = tool.input_from
    if tool.tags:
        table["tags"] = tool.tags
    if http:
        users_errors = user.get("errors")
        theirs = users_errors if isinstance(users_errors, Mapping) else {}
        table["errors"] = {**{c: m for c, m in theirs.items() if c not in tool.errors}, **tool.errors}
    for other, item in user.items():
        if other not in OWNED_TOOL_KEYS and other not in table:
            table[other] = item
    errors = table.pop("errors") if isinstance(table.get("errors"), Mapping) and table["errors"] else None
    lines += [f"{key(k)} = {value(v)}" for k, v in table.items()]
    if tool.input:
        lines.append(f"[tools.{key(tool.name)}.input]")
        for item in tool.input:
            lines += field_line(item)
    if errors is not None:
        lines.append(f"[tools.{key(tool.name)}.errors]")
        lines += [f"{key(str(code))} = {value(meaning)}" for code, meaning in errors.items()]
    return lines


def server_block(imported: Imported, source: str, name: str) -> str:
    instructions = f"Tools for {imported.title}, imported from its OpenAPI document."
    return "\n".join(
        [
            f"# Imported by `fusiongen import openapi` from {comment_text(source)}.",
            "# This header, [server] and everything after the closing marker are yours: a re-import keeps them",
            "# as written. The region between the markers is the import's (see docs/openapi.md for what of it",
            "# you may edit and keep).",
            "[server]",
            f"name = {toml_string(name)}",
            f"instructions = {toml_string(instructions)}",
            *([COMPACT_SERVER] if imported.compact else []),
            "",
        ]
    )


def region(imported: Imported, source: str, kept: Kept | None, *, http: bool) -> str:
    users_models = kept.models if kept else {}
    users_tools = kept.tools if kept else {}
    lines = [
        f"{BEGIN}: generated from {comment_text(source)}; a re-import replaces this region.",
        "# Yours and kept on re-import: a model's hidden, guarded (both merged with the document's), casts,",
        "# fillable operations of your own; a tool's handler, bind_state, compact_description (and errors",
        "# codes of your own). What the document says that the spec cannot is a comment where it was left out.",
    ]
    for model in imported.models.values():
        lines += ["", *model_block(model, users_models.get(model.name, {}))]
    for tool in imported.tools.values():
        lines += ["", *tool_block(tool, users_tools.get(tool.name, {}), http=http)]
    lines += ["", END, ""]
    return "\n".join(lines)


def kept_from(existing: str) -> Kept:
    """Split an existing spec into what the user owns; `NotOurs` if it has no region."""
    start, end = existing.find(f"\n{BEGIN}"), existing.find(f"\n{END}")
    if start < 0 or end < start:
        raise NotOurs
    after = existing.find("\n", end + 1)
    data = tomllib.loads(existing)
    return Kept(
        prefix=existing[: start + 1],
        suffix=existing[after + 1 :] if after >= 0 else "",
        models=data.get("models", {}),
        tools=data.get("tools", {}),
    )


def emit_spec(
    imported: Imported, source: str, server_name: str, existing: str | None = None, *, http: bool = False
) -> str:
    """The spec text: a first import (`existing` None) or a re-import into the user's spec; `http`: with
    `--handlers http` (the tools declare the errors its handlers raise)."""
    kept = kept_from(existing) if existing is not None else None
    text = region(imported, source, kept, http=http)
    if kept is None:
        return server_block(imported, source, server_name) + "\n" + text + _USER_SECTION
    return kept.prefix + text + kept.suffix


_USER_SECTION = """
# --- yours: presenters, workflows, your own models and tools (kept as written on a re-import) ---
"""
