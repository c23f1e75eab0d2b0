"""Lower `[auth]` and each tool's `requires`: which scopes exist, and what a caller needs per tool.

Scopes are declared once in `[auth] scopes` (they are advertised in the protected resource metadata), so a
`requires` naming one that is not declared is a typo caught at build time, never a tool nobody can call.
Roles are the identity provider's vocabulary and are not declared; only their spelling is checked.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace

from fusiongen.ir import AuthIR, RequiresIR, ToolIR
from fusiongen.load.loader import Loc
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
    spec = ctx.spec.tools[tool.name].requires
    if spec is None:
        return tool
    loc: Loc = ("tools", tool.name, "requires")
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
    return replace(tool, requires=requires if requires.scopes or requires.roles else None)


def check_name(
    ctx: LowerContext, name: str, loc: Loc, what: str, pattern: re.Pattern[str], *, value: bool = True
) -> None:
    if not pattern.fullmatch(name):
        extra = ' (printable ASCII, no space, " or \\)' if what == "scope" else " (no whitespace)"
        ctx.error("FG191", f'{what} "{name}" is not usable{extra}', loc, value=value)
