"""`[server] exposition = "grouped"` (docs/spec.md §4.3): the names the grouped server serves, checked.

Grouped, every spec tool whose name has a "." is an action of the tool named by the part before it
(`invoice.get` is action `get` of `invoice`), and so are a workflow's generated tools (`invoice.start`). What
is served is one tool per group and every tool without a ".". Two of those with one name, or two actions of
one group with one action name, could not be told apart by a call: FG107. With `tool_names = "snake"` a served
name must be one LLM APIs accept as a function name (FG104), as flat wire names must.
"""

from __future__ import annotations

from fusiongen.ir import ToolIR
from fusiongen.load.loader import Loc
from fusiongen.lower.context import LowerContext
from fusiongen.names import WIRE_TOOL_NAME, group_and_action, wire_tool_name

__all__ = ["check_groups"]


def check_groups(ctx: LowerContext, tools: tuple[ToolIR, ...]) -> None:
    server = ctx.spec.server
    if server.exposition != "grouped":
        return
    style = server.tool_names
    entries: list[tuple[str, Loc]] = [(tool.name, ("tools", tool.name)) for tool in tools]
    entries += [(f"{w}.{s}", ("workflows", w)) for w in ctx.spec.workflows for s in ("start", "status", "resolve")]
    actions: dict[tuple[str, str], str] = {}
    groups: dict[str, str] = {}  # served group name -> the first spec name that made it
    ungrouped: dict[str, str] = {}  # served name of a tool without "." -> its spec name
    for name, loc in entries:
        grouped = group_and_action(name, style)
        if grouped is None:
            ungrouped[wire_tool_name(name, style)] = name
            continue
        group, action = grouped
        groups.setdefault(group, name)
        first = actions.setdefault((group, action), name)
        if first != name:
            ctx.error(
                "FG107",
                f'tools "{first}" and "{name}" are both action "{action}" of the grouped tool "{group}"',
                loc,
                hint='rename one of them (exposition = "grouped")',
            )
    for served, name in ungrouped.items():
        if served in groups:
            ctx.error(
                "FG107",
                f'tool "{name}" has the name of the grouped tool "{served}" (of "{groups[served]}" and the other '
                f'"{served}." tools)',
                ("tools", name),
                hint='rename it, or make it an action of the group: "' + served + '.<action>" (exposition = "grouped")',
            )
    if style == "snake":
        for served, name in [*((g, n) for g, n in groups.items()), *ungrouped.items()]:
            if not WIRE_TOOL_NAME.match(served):
                loc = ("tools", name) if name in ctx.spec.tools else ("workflows", name.split(".", 1)[0])
                ctx.error(
                    "FG104",
                    f'the grouped tool "{served}" has a name longer than the 64 characters LLM APIs accept',
                    loc,
                    hint='shorten the tool name (tool_names = "snake")',
                )
