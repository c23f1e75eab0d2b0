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


def budget_table(
    budgets: list[ToolBudget], results: list[ResultBudget], list_limit: int | None, result_limit: int | None
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
    for r in results:
        if r.unbounded is not None:
            audience = f" (as {r.audience})" if r.audience else ""
            lines.append(f"unbounded: {r.tool}{audience} → {r.unbounded.path} ({r.unbounded.reason})")
    return "\n".join(lines) + "\n"


def _result_over(result: ResultBudget, limit: int | None) -> bool:
    return limit is not None and result.result_tokens is not None and result.result_tokens > limit
