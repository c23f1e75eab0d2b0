"""Token budgets: how large each tool's `tools/list` entry is, from the same schemas the server will list.

An agent pays for every listed tool on every turn, so a spec can cap an entry (`[server] max_list_tokens`).
Tokens are estimated as UTF-8 bytes / 4 (rounded up) of the entry as compact JSON: tokenizers differ, and a
fixed, documented rule is what a budget in a spec can be checked against. The entry is the larger of the two
protocol eras' (the 2026-07-28 description of a bound tool is the longer one, §10.6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fusiongen.codegen.jsonschema import input_schema, output_schema
from fusiongen.codegen.result_budget import ResultBudget
from fusiongen.codegen.view_workflows import handle_property, modern_description
from fusiongen.ir import ServerIR, ToolIR
from fusiongen.names import group_and_action

BYTES_PER_TOKEN = 4
_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "query": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    "mutation": {"readOnlyHint": False, "destructiveHint": True},
    "action": {"readOnlyHint": False, "destructiveHint": False},
}


@dataclass(frozen=True)
class ToolBudget:
    tool: str  # the wire name
    spec_name: str
    list_bytes: int

    @property
    def list_tokens(self) -> int:
        return tokens(self.list_bytes)


def tokens(size: int) -> int:
    return -(-size // BYTES_PER_TOKEN)


def list_entry(server: ServerIR, tool: ToolIR) -> dict[str, Any]:
    """The tool's `tools/list` entry as a client receives it (camelCase keys, as on the wire)."""
    arguments = input_schema(server, tool)
    if tool.binding is not None:  # as view.py lists it: a bound tool also takes the workflow handle
        arguments["properties"][server.state_handle_key] = handle_property(server, tool)
    entry: dict[str, Any] = {
        "name": tool.wire,
        "description": modern_description(server, tool),
        "inputSchema": arguments,
    }
    output = output_schema(server, tool)
    if output is not None:
        entry["outputSchema"] = output
    entry["annotations"] = _ANNOTATIONS[tool.kind]
    return entry


def tool_budgets(server: ServerIR) -> list[ToolBudget]:
    """Every spec tool's entry size, in spec order."""
    return [
        ToolBudget(
            tool.wire,
            tool.name,
            len(json.dumps(list_entry(server, tool), separators=(",", ":"), ensure_ascii=False).encode("utf-8")),
        )
        for tool in server.tools
    ]


def entry_bytes(entry: dict[str, Any]) -> int:
    return len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def grouped_entries(server: ServerIR) -> list[dict[str, Any]]:
    """The spec tools' `tools/list` entries as `exposition = "grouped"` lists them on 2026-07-28 (every action):
    one entry per group, folded as runtime/_grouping.py folds the flat list (tests hold the two to the same
    entries); a tool without "." stays as it is. The workflows' generated tools are not among them, as they
    are not in the flat table."""
    order: list[dict[str, Any] | str] = []
    members: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for tool in server.tools:
        entry = list_entry(server, tool)
        grouped = group_and_action(tool.name, server.tool_names)
        if grouped is None:
            order.append(entry)
            continue
        group, action = grouped
        if group not in members:
            members[group] = []
            order.append(group)
        members[group].append((action, entry))
    return [item if isinstance(item, dict) else group_entry(item, members[item]) for item in order]


def group_entry(group: str, actions: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One group's entry from its actions' flat entries: what `_grouping.group_tool` builds, on the wire."""
    definitions: dict[str, Any] = {}
    branches = []
    for action, entry in actions:
        schema = dict(entry["inputSchema"])
        definitions.update(schema.pop("$defs", None) or {})
        branches.append(
            {
                "type": "object",
                "properties": {"action": {"type": "string", "enum": [action]}, **schema.get("properties", {})},
                "required": ["action", *schema.get("required", [])],
                "additionalProperties": False,
            }
        )
    arguments: dict[str, Any] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": [a for a, _ in actions], "description": "The operation to run."}
        },
        "required": ["action"],
        "anyOf": branches,
    }
    if definitions:
        arguments["$defs"] = definitions
    description = f'Actions on "{group}": pass "action" to choose one; each takes its own arguments.' + "".join(
        f'\n\naction "{action}": {entry["description"]}' for action, entry in actions
    )
    grouped: dict[str, Any] = {"name": group, "description": description, "inputSchema": arguments}
    outputs = [entry.get("outputSchema") for _, entry in actions]
    if all(o is not None for o in outputs):
        output_definitions: dict[str, Any] = {}
        distinct: dict[str, dict[str, Any]] = {}
        for output in outputs:
            schema = dict(output or {})
            output_definitions.update(schema.pop("$defs", None) or {})
            distinct.setdefault(json.dumps(schema, sort_keys=True), schema)
        schemas = list(distinct.values())
        merged = schemas[0] if len(schemas) == 1 else {"type": "object", "anyOf": schemas}
        grouped["outputSchema"] = {**merged, "$defs": output_definitions} if output_definitions else merged
    hints = [entry["annotations"] for _, entry in actions]
    grouped["annotations"] = {
        "readOnlyHint": all(h.get("readOnlyHint") is True for h in hints),
        "destructiveHint": any(
            h.get("destructiveHint") is not False for h in hints if h.get("readOnlyHint") is not True
        ),
        "idempotentHint": all(h.get("idempotentHint") is True for h in hints),
    }
    return grouped


def exposition_line(server: ServerIR) -> str:
    """Both expositions' `tools/list` of the spec tools, in tokens: what `[server] exposition` would cost."""
    flat = sum(entry_bytes(list_entry(server, t)) for t in server.tools)
    grouped = grouped_entries(server)
    size = sum(entry_bytes(e) for e in grouped)
    chosen = {"flat": "flat", "grouped": "grouped"}[server.exposition]
    return (
        f"exposition (spec tools' tools/list, {chosen} is served): flat {tokens(flat)} tokens in "
        f"{len(server.tools)} tools, grouped {tokens(size)} tokens in {len(grouped)} tools"
    )


def budget_table(
    budgets: list[ToolBudget],
    results: list[ResultBudget],
    list_limit: int | None,
    result_limit: int | None,
    exposition: str | None = None,
) -> str:
    """The `build --budget` table: one line per tool (its tools/list entry, its worst-case result), widest first
    column aligned, the total of the entries (what every turn pays), then what makes each unbounded result so."""
    width = max([len("tool"), *(len(b.tool) for b in budgets)])
    limits = list_limit is not None or result_limit is not None
    header = f"{'tool':<{width}}  list bytes  list tokens  result bytes  result tokens"
    lines = [header + ("  over budget" if limits else "")]
    for b, r in zip(budgets, results, strict=True):
        over = [
            *(["list"] if list_limit is not None and b.list_tokens > list_limit else []),
            *(["result"] if _result_over(r, result_limit) else []),
        ]
        size = (str(r.result_bytes), str(r.result_tokens)) if r.result_bytes is not None else ("unbounded",) * 2
        row = f"{b.tool:<{width}}  {b.list_bytes:>10}  {b.list_tokens:>11}  {size[0]:>12}  {size[1]:>13}"
        lines.append(row + (f"  {', '.join(over)}" if over else ""))
    total = sum(b.list_bytes for b in budgets)
    lines.append(f"{'total':<{width}}  {total:>10}  {tokens(total):>11}")
    if exposition is not None:
        lines.append(exposition)
    for r in results:
        if r.unbounded is not None:
            audience = f" (as {r.audience})" if r.audience else ""
            lines.append(f"unbounded: {r.tool}{audience} → {r.unbounded.path} ({r.unbounded.reason})")
    return "\n".join(lines) + "\n"


def _result_over(result: ResultBudget, limit: int | None) -> bool:
    return limit is not None and result.result_tokens is not None and result.result_tokens > limit
