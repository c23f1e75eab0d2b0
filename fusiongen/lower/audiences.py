"""Lower each tool's `returns_for_role`: one entity, several audiences.

A tool returns one model; which presenter shows it depends on who asks. Every presenter of a tool must present
that same model, so the handler's data fits each of them and a hidden field (hidden on the model) stays hidden
under all of them. Roles are the identity provider's vocabulary: only their spelling is checked (as in requires).
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from fusiongen.ir import PresenterIR, ToolIR
from fusiongen.load.loader import Loc
from fusiongen.lower.auth import NAME_TOKEN, check_name
from fusiongen.lower.context import LowerContext


def with_audiences(ctx: LowerContext, tool: ToolIR) -> ToolIR:
    """The tool with its returns_for_role resolved: known presenters (or models), well-spelled roles."""
    table = ctx.spec.tools[tool.name].returns_for_role
    if not table:
        return tool
    loc: Loc = ("tools", tool.name, "returns_for_role")
    if tool.returns is None:
        what = 'returns = "text"' if tool.returns_text else "no returns"
        ctx.error(
            "FG194",
            f"returns_for_role chooses a presenter per role, but the tool has {what}",
            loc,
            hint='set returns = "<presenter or model>": the presenter for callers matching no role',
        )
        return tool
    known = [*ctx.spec.presenters, *ctx.spec.models]
    chosen: list[tuple[str, str]] = []
    for role, name in table.items():
        check_name(ctx, role, (*loc, role), "role", NAME_TOKEN, value=False)
        if name in known:
            chosen.append((role, name))
        elif not (ctx.withdrawn("presenters", name) or ctx.withdrawn("models", name)):
            close = difflib.get_close_matches(name, known, n=1)
            ctx.error(
                "FG192",
                f'returns_for_role gives role "{role}" unknown presenter or model "{name}"',
                (*loc, role),
                value=True,
                hint=f'did you mean "{close[0]}"?' if close else "name a presenter or a model (without [])",
            )
    return replace(tool, returns_for_role=tuple(chosen))


def check_audience_models(ctx: LowerContext, tools: tuple[ToolIR, ...], presenters: tuple[PresenterIR, ...]) -> None:
    """FG193: every presenter of a tool presents the model its `returns` presents (a schema-only presenter
    presents none, so it cannot share an entity with another audience)."""
    by_name = {p.name: p for p in presenters}
    for tool in tools:
        if tool.returns is None or not tool.returns_for_role or tool.returns.presenter not in by_name:
            continue
        model = by_name[tool.returns.presenter].model
        for role, name in tool.returns_for_role:
            presenter = by_name.get(name)
            if presenter is None or (presenter.model == model and model is not None):
                continue
            if model is None:
                why = f'returns presenter "{tool.returns.presenter}" has a schema of its own, no model'
            else:
                why = (
                    f'"{name}" presents {f"model {presenter.model}" if presenter.model else "a schema of its own"},'
                    f" returns presents model {model}"
                )
            ctx.error(
                "FG193",
                f'returns_for_role gives role "{role}" presenter "{name}" of another entity: {why}',
                ("tools", tool.name, "returns_for_role", role),
                value=True,
                hint="every presenter of one tool presents the same model",
            )
