"""Lower `[auth]` and each tool's, resource's and prompt's `requires`: which scopes exist, what a caller needs.

Scopes are declared once in `[auth] scopes` (they are advertised in the protected resource metadata), so a
`requires` naming one that is not declared is a typo caught at build time, never a tool nobody can call.
Roles are the identity provider's vocabulary and are not declared; only their spelling is checked.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import replace

from fusiongen.ir import AuthIR, ModelIR, PresenterIR, PromptIR, RequiresIR, ResourceIR, ToolIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import RequiresSpec
from fusiongen.lower.context import LowerContext

# RFC 6749 §3.3: a scope token is printable ASCII without space, `"` or `\`.
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# A role or claim name: no whitespace (a roles claim may be one space-separated string), nothing invisible.
NAME_TOKEN = re.compile(r"[^\s\x00-\x1f\x7f]+")


def lower_auth(ctx: LowerContext) -> AuthIR | None:
    auth = ctx.spec.auth
    if auth is None:
        return None
    check_name(ctx, auth.roles_claim, ("auth", "roles_claim"), "claim name", NAME_TOKEN)
    if auth.tenant_claim is not None:
        check_name(ctx, auth.tenant_claim, ("auth", "tenant_claim"), "claim name", NAME_TOKEN)
    for scope in auth.scopes:
        check_name(ctx, scope, ("auth", "scopes", scope), "scope", SCOPE_TOKEN, value=False)
    return AuthIR(auth.roles_claim, auth.tenant_claim, tuple(auth.scopes.items()))


def with_requires(ctx: LowerContext, tool: ToolIR, auth: AuthIR | None) -> ToolIR:
    """The tool with its `requires` lowered: every scope declared in [auth], every role well spelled."""
    requires = lower_requires(ctx, ctx.spec.tools[tool.name].requires, ("tools", tool.name, "requires"), auth)
    return replace(tool, requires=requires)


def with_surface_requires(
    ctx: LowerContext, resources: tuple[ResourceIR, ...], prompts: tuple[PromptIR, ...], auth: AuthIR | None
) -> tuple[tuple[ResourceIR, ...], tuple[PromptIR, ...]]:
    """Resources and prompts with their `requires`, lowered as a tool's: a resource's is its read's (the same
    check runs before the handler), a prompt's decides who may list and get it."""
    lowered_resources = tuple(
        replace(
            r,
            tool=replace(
                r.tool,
                requires=lower_requires(
                    ctx, ctx.spec.resources[r.name].requires, ("resources", r.name, "requires"), auth
                ),
            ),
        )
        for r in resources
    )
    lowered_prompts = tuple(
        replace(
            p, requires=lower_requires(ctx, ctx.spec.prompts[p.name].requires, ("prompts", p.name, "requires"), auth)
        )
        for p in prompts
    )
    return lowered_resources, lowered_prompts


def lower_requires(ctx: LowerContext, spec: RequiresSpec | None, loc: Loc, auth: AuthIR | None) -> RequiresIR | None:
    if spec is None:
        return None
    declared = [scope for scope, _ in auth.scopes] if auth is not None else []
    for i, scope in enumerate(spec.scopes):
        if scope not in declared:
            close = difflib.get_close_matches(scope, declared, n=1)
            ctx.error(
                "FG190",
                f'requires names scope "{scope}", which [auth] scopes does not declare',
                (*loc, "scopes", i),
                value=True,
                hint=f'did you mean "{close[0]}"?' if close else f'declare it: [auth] scopes = {{ "{scope}" = "..." }}',
            )
    for i, role in enumerate(spec.roles):
        check_name(ctx, role, (*loc, "roles", i), "role", NAME_TOKEN)
    requires = RequiresIR(tuple(dict.fromkeys(spec.scopes)), tuple(dict.fromkeys(spec.roles)))
    return requires if requires.scopes or requires.roles else None


def check_resource_guards(
    ctx: LowerContext,
    tools: tuple[ToolIR, ...],
    resources: tuple[ResourceIR, ...],
    presenters: Sequence[PresenterIR],
    models: Sequence[ModelIR],
) -> None:
    """FG168: a resource without `requires` may not read what only tools with `requires` show.

    A resource read is a way in beside tools/call: if `secret.get` needs `vault:read`, a `secret://{id}`
    resource presenting the same model with no `requires` would hand the secret to any caller. The build refuses
    rather than inheriting the tool's requirement, because several tools may guard one model differently (read
    and write scopes), and which of them a read should copy is the author's decision, said in the spec.
    What a tool without `requires` shows is already open, so a resource reading it needs nothing; a resource
    that is open on purpose says `requires = {}`.
    """
    by_presenter = {p.name: p for p in presenters}
    by_model = {m.name: m for m in models}

    def reach(tool: ToolIR) -> set[str]:
        """Every model a result of `tool` shows data of: its presenters' models and, through their visible
        fields, every model nested in them."""
        found: set[str] = set()
        pending: list[str] = []
        for name in tool.presenters:
            presenter = by_presenter.get(name)
            if presenter is None:
                continue
            pending += [presenter.model] if presenter.model else []
            pending += [m for f in presenter.fields for m in f.type.models]
        while pending:
            model = pending.pop()
            if model in found or model not in by_model:
                continue
            found.add(model)
            pending += [m for f in by_model[model].fields if not f.hidden for m in f.type.models]
        return found

    guarded: dict[str, ToolIR] = {}
    for tool in tools:
        if tool.requires is not None:
            for model in sorted(reach(tool)):
                guarded.setdefault(model, tool)
    open_models = set().union(*(reach(t) for t in tools if t.requires is None))
    for resource in resources:
        if ctx.spec.resources[resource.name].requires is not None:
            continue  # declared, even empty: the author decided
        exposed = sorted(m for m in reach(resource.tool) if m in guarded and m not in open_models)
        if not exposed:
            continue
        tool = guarded[exposed[0]]
        assert tool.requires is not None
        needs = ", ".join(
            part
            for part in (
                f"scopes = [{', '.join(json.dumps(s) for s in tool.requires.scopes)}]" if tool.requires.scopes else "",
                f"roles = [{', '.join(json.dumps(r) for r in tool.requires.roles)}]" if tool.requires.roles else "",
            )
            if part
        )
        ctx.error(
            "FG168",
            f'resource "{resource.name}" has no requires, but reads model {exposed[0]}, which only tool "{tool.name}" '
            "with requires shows: any caller could read it here",
            ("resources", resource.name),
            hint=f"add requires = {{ {needs} }} as the tool has, or requires = {{}} if every caller may read it",
        )


def check_name(
    ctx: LowerContext, name: str, loc: Loc, what: str, pattern: re.Pattern[str], *, value: bool = True
) -> None:
    if not pattern.fullmatch(name):
        extra = ' (printable ASCII, no space, " or \\)' if what == "scope" else " (no whitespace)"
        ctx.error("FG191", f'{what} "{name}" is not usable{extra}', loc, value=value)
