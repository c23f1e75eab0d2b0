"""Who is calling, as handlers and the gate see it: the identity a bearer token authenticated (`_auth`).

Apart from `_auth`, so that `_runtime` (which hands every handler its ctx) can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.auth.provider import AccessToken
from pydantic import Field

# The signature algorithms `--auth jwt` accepts. Asymmetric only: a JWKS publishes public keys, and an HMAC
# "signed" with one would be forgeable. Here rather than in `_auth`, which verifies them: the option parser lists
# them at every start, and a server without --auth never needs the verifiers (nor tomllib, PyJWT).
JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True, slots=True)
class Identity:
    """The authenticated caller: who (`subject`, unique per issuer), what they are (`roles`), what their token
    lets them do (`scopes`) and whose data they belong to (`tenant`, None without a tenant claim)."""

    subject: str
    roles: frozenset[str]
    scopes: frozenset[str]
    tenant: str | None = None


class IdentifiedToken(AccessToken):
    """The SDK's AccessToken with what it lacks for authorization decisions: the caller's roles and tenant."""

    roles: list[str] = Field(default_factory=list)
    tenant: str | None = None


def identity_of(ctx: Any) -> Identity | None:
    """The identity the current request authenticated as, or None (stdio, or HTTP without --auth)."""
    request = getattr(ctx, "request", None)
    if request is None:  # stdio and in-process calls: no HTTP request, so no token
        return None
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    token = getattr(user, "access_token", None)
    if not isinstance(token, IdentifiedToken):
        return None
    return Identity(token.subject or "", frozenset(token.roles), frozenset(token.scopes), token.tenant)


class Caller:
    """The ctx a handler gets: the SDK's request context (every attribute of it, such as `session` and
    `request`, or a workflow's `state` and `idempotency_key`), plus `identity`: the authenticated caller, or None
    on stdio, in-process and over HTTP without --auth. A handler filters its data by `ctx.identity.tenant`."""

    __slots__ = ("_context", "identity")

    def __init__(self, context: Any, identity: Identity | None) -> None:
        self._context = context
        self.identity = identity

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def with_identity(ctx: Any) -> Caller:
    return ctx if isinstance(ctx, Caller) else Caller(ctx, identity_of(ctx))


# The caller of the call being presented: what `by_role` picks a presenter by and `ctx.*` expressions read.
# A context variable (set by run_tool around presenting), so presenters keep their (raw) -> result signature
# and concurrent calls (each its own task, each its own context) never see each other's caller.
_Presented = TypeVar("_Presented")
_PRESENTING_FOR: ContextVar[Identity | None] = ContextVar("fusiongen_presenting_for", default=None)


@contextmanager
def presenting_for(identity: Identity | None) -> Iterator[None]:
    token = _PRESENTING_FOR.set(identity)
    try:
        yield
    finally:
        _PRESENTING_FOR.reset(token)


def presented_as(identity: Identity | None, present: Callable[[object], _Presented], raw: object) -> _Presented:
    """`present(raw)` with `identity` as the caller being presented: `presenting_for` without its generator, for
    the hot path (run_tool, once a call). Without identity in a context that has none (stdio, in-process, HTTP
    without --auth: the usual call) there is nothing to set: `presented_identity()` reads None either way."""
    if identity is None and _PRESENTING_FOR.get() is None:
        return present(raw)
    token = _PRESENTING_FOR.set(identity)
    try:
        return present(raw)
    finally:
        _PRESENTING_FOR.reset(token)


def presented_identity() -> Identity | None:
    """The caller whose result is being presented; None without identity (stdio, in-process, HTTP without
    --auth), and outside a call."""
    return _PRESENTING_FOR.get()


def caller_value(attribute: str) -> Any:
    """What a presenter expression's `ctx.subject`, `ctx.tenant` (a string, or None), `ctx.roles`, `ctx.scopes`
    (sorted lists, so that `in` and text see a list) or `ctx` (all four, as an object) reads: the caller of the
    call being presented. Without identity: None, or an empty list. Here, not in `_expressions` (which uses only
    the standard library), and total like its helpers."""
    identity = presented_identity()
    if attribute == "*":  # `ctx` itself
        return {name: caller_value(name) for name in ("subject", "roles", "scopes", "tenant")}
    if attribute in ("roles", "scopes"):
        return sorted(getattr(identity, attribute)) if identity is not None else []
    return getattr(identity, attribute) if identity is not None else None
