"""Freshness (docs/spec.md §6.9): which earlier results a successful mutation makes stale, and which are
reference data that never go stale.

`invalidates` names tools by name or glob (`fnmatch`: `invoice.*`), resolved here against the spec's tools, so
the generated server only ever deals in concrete names. Nothing here needs a clock: staleness is an event (a
mutation succeeded), which the result of that mutation reports, not an age.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import replace

from fusiongen.ir import ToolIR
from fusiongen.lower.context import LowerContext

GLOB_CHARS = frozenset("*?[")


def with_freshness(ctx: LowerContext, tools: tuple[ToolIR, ...]) -> tuple[ToolIR, ...]:
    """The tools with `invalidates` resolved and `stale_after` filled in; FG200 for a name or glob that matches no
    tool, FG201 for `invalidates` on a query, `immutable` on something else, a named tool that is not a query or is
    immutable."""
    by_name = {t.name: t for t in tools}
    resolved: dict[str, tuple[str, ...]] = {}
    for name, spec in ctx.spec.tools.items():
        tool = by_name.get(name)
        if tool is None:
            continue
        loc = ("tools", name)
        if spec.immutable and tool.kind != "query":
            ctx.error(
                "FG201",
                f'tool "{name}" is a {tool.kind}: only a query\'s results can be immutable',
                (*loc, "immutable"),
                value=True,
                hint="remove immutable, or make the tool a query",
            )
        if spec.invalidates and tool.kind == "query":
            ctx.error(
                "FG201",
                f'tool "{name}" is a query: it changes nothing, so it makes no result stale',
                (*loc, "invalidates"),
                hint="declare invalidates on the mutation or action that changes the data",
            )
            continue
        found: list[str] = []
        for index, pattern in enumerate(spec.invalidates):
            matched = _matches(pattern, by_name, name)
            if not matched:
                close = difflib.get_close_matches(pattern, list(by_name), n=1)
                ctx.error(
                    "FG200",
                    f'invalidates "{pattern}" of tool "{name}" matches no tool',
                    (*loc, "invalidates", index),
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close else "name a tool of this spec, or a glob such as x.*",
                )
                continue
            if not set(pattern) & GLOB_CHARS and by_name[pattern].kind != "query":
                ctx.error(
                    "FG201",
                    f'tool "{name}" invalidates "{pattern}", a {by_name[pattern].kind}: only a query\'s results are '
                    "read again",
                    (*loc, "invalidates", index),
                    value=True,
                    hint="name the queries whose results this changes",
                )
                continue
            immutable = [m for m in matched if ctx.spec.tools[m].immutable]
            if immutable and not set(pattern) & GLOB_CHARS:
                ctx.error(
                    "FG201",
                    f'tool "{name}" invalidates "{pattern}", which is immutable (its results never go stale)',
                    (*loc, "invalidates", index),
                    value=True,
                    hint=f'remove it from invalidates, or drop immutable from "{pattern}"',
                )
            found += [m for m in matched if m not in immutable and m not in found]
        resolved[name] = tuple(found)
    stale_after: dict[str, list[str]] = {}
    for name, targets in resolved.items():
        for target in targets:
            stale_after.setdefault(target, []).append(by_name[name].wire)
    return tuple(
        replace(
            t,
            invalidates=resolved.get(t.name, ()),
            stale_after=tuple(stale_after.get(t.name, ())),
            immutable=ctx.spec.tools[t.name].immutable if t.name in ctx.spec.tools else False,
        )
        for t in tools
    )


def _matches(pattern: str, tools: dict[str, ToolIR], owner: str) -> list[str]:
    """The tools a name or glob names, in spec order; a glob matches queries only (a mutation's result is not read
    again to refresh it)."""
    if not set(pattern) & GLOB_CHARS:
        return [pattern] if pattern in tools else []
    return [n for n, t in tools.items() if n != owner and t.kind == "query" and fnmatch.fnmatchcase(n, pattern)]
