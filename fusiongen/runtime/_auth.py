"""Who is calling, over HTTP: bearer tokens checked by the SDK's resource-server machinery.

The generated server is an OAuth 2.1 resource server (the MCP authorization spec): it never issues tokens, it
verifies them. Two verifiers plug into the SDK's `TokenVerifier` protocol, so the SDK's own bearer middleware
answers 401 (with `WWW-Authenticate: Bearer ... resource_metadata=...`) and 403 (insufficient scope), and binds
each HTTP session to the principal that opened it:

* `JwtVerifier` (`--auth jwt`): signed JWTs checked with PyJWT (a dependency of mcp) against the issuer's JWKS
  (`JwksKeys`: fetched once, refreshed when a token names an unknown key, at most once per cooldown); the
  algorithms are an explicit asymmetric list, so `none` and HMAC-with-the-public-key are impossible; `iss`,
  `aud`, `exp` (required) and `nbf` are checked.
* `StaticTokens` (`--auth tokens`): a TOML file of SHA-256 digests of opaque tokens, each with its subject,
  roles, scopes and tenant, for deployments without an authorization server. The file never holds a token.

Either yields an `IdentifiedToken` (the SDK's AccessToken plus roles and tenant); `identity_of(ctx)` turns the
one of the current request into the `Identity` handlers and the tool gate see. stdio has no tokens: it is the
local user's own process, and `identity_of` gives None there.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._identity import JWT_ALGORITHMS, IdentifiedToken, Identity, identity_of
from ._results import tool_error

if TYPE_CHECKING:  # PyJWT (and the cryptography it loads, ~50 ms) is imported only by --auth jwt
    import jwt

logger = logging.getLogger(__name__.rpartition(".")[0])

JWT_LEEWAY = 30  # seconds of clock skew tolerated on exp and nbf
JWKS_LIFESPAN = 300  # seconds a fetched JWKS is trusted before it is fetched again
JWKS_TIMEOUT = 10  # seconds one JWKS fetch may take
JWKS_COOLDOWN = 30  # seconds at least between two fetches forced by tokens naming a key id not in the JWKS
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_TOKEN_KEYS = frozenset({"sha256", "subject", "roles", "scopes", "tenant"})


# --- what a tool requires ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """A tool's `requires`: every one of `scopes`, and at least one of `roles` (none listed: any role)."""

    scopes: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()


def is_local(ctx: Any) -> bool:
    """stdio or in-process: no HTTP request, so the caller is whoever started the process, and holds everything."""
    return getattr(ctx, "request", None) is None


def shortfall(requirement: Requirement, ctx: Any) -> str | None:
    """What the caller lacks for `requirement`, as a sentence naming it, or None if nothing. An HTTP caller
    without an identity (a server run without --auth) lacks every requirement: fail closed."""
    if is_local(ctx):
        return None
    identity = identity_of(ctx)
    if identity is None:
        return "this server runs without authentication (--auth), so no caller has the scopes or roles it requires"
    lacking = sorted(requirement.scopes - identity.scopes)
    if lacking:
        names = ", ".join(f'"{s}"' for s in lacking)
        return f"it needs the scope{'s' if len(lacking) > 1 else ''} {names}, which your token does not grant"
    if requirement.roles and not requirement.roles & identity.roles:
        names = ", ".join(f'"{r}"' for r in sorted(requirement.roles))
        return f"it needs the role {names}" if len(requirement.roles) == 1 else f"it needs one of the roles {names}"
    return None


def refusal_by(requires: Mapping[str, Requirement]) -> Callable[[str, Any], str | None]:
    """The `_surface.Refusal` of resources or prompts: what the caller lacks for the named one's `requires`."""

    def refusal(name: str, ctx: Any) -> str | None:
        requirement = requires.get(name)
        return shortfall(requirement, ctx) if requirement is not None else None

    return refusal


def forbidden_call(tool: str, reason: str) -> types.CallToolResult:
    """The refusal of a call the caller may not make: FORBIDDEN, naming what is missing, never any data."""
    return tool_error(
        tool,
        "FORBIDDEN",
        f'You may not call "{tool}": {reason}.',
        "Do not retry with the same credentials; tell the user which permission is missing.",
    )


async def refused(tool: str, reason: str) -> types.CallToolResult:
    """`forbidden_call` as a call, for the call log (outcome FORBIDDEN) like any other."""
    return forbidden_call(tool, reason)


def stable_listing(ctx: Any) -> bool:
    """2026-07-28: tools/list must not vary per caller, so every tool is listed and a refusal comes on call."""
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def visible_tools(tools: list[types.Tool], requires: Mapping[str, Requirement], ctx: Any) -> list[types.Tool]:
    """Handshake era: the tools this caller may call (a tool it lacks the requirement of is not listed)."""
    return [t for t in tools if t.name not in requires or shortfall(requires[t.name], ctx) is None]


def _names(value: object) -> list[str] | None:
    """A claim holding names: a list of strings, or one space-separated string (OAuth's `scope`); else None."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


# --- --auth jwt -------------------------------------------------------------------------------------------


class JwksKeys:
    """The issuer's signing keys by key id, fetched from its JWKS with PyJWT's client (its fetch: http and https
    only, no redirects, the timeout) and parsed by PyJWT (`PyJWKSet`), cached here.

    Why not PyJWKClient's own cache: it counts its cooldown only from a successful fetch, so while the JWKS fails
    every token fetches again, and it holds one lock across the fetch, so while the JWKS hangs every token, a
    valid one with a cached key too, waits behind the tokens that made it fetch. Here:

    * a key id in the cached set is answered at once, without waiting for anything (also while a fetch runs, and
      from a set older than `lifespan`: it is then refreshed in a thread of its own, so no caller waits for it);
    * a fetch is attempted at most once per `cooldown` seconds, counted from the last attempt, failed or not, so
      tokens naming unknown keys cannot make it hammer the issuer, whatever the JWKS answers;
    * a token naming an unknown key while a fetch runs waits for that fetch (never starts another); one that
      comes within the cooldown is refused without a fetch;
    * a failed fetch (unreachable, an HTTP error, not JSON, no usable keys) keeps the keys it had and is logged.
    """

    def __init__(
        self,
        url: str,
        *,
        lifespan: float = JWKS_LIFESPAN,
        timeout: float = JWKS_TIMEOUT,
        cooldown: float = JWKS_COOLDOWN,
    ) -> None:
        import jwt

        self.client = jwt.PyJWKClient(url, cache_jwk_set=False, timeout=timeout)
        self.lifespan, self.timeout, self.cooldown = lifespan, timeout, cooldown
        self.keys: dict[str, jwt.PyJWK] = {}
        self.fetched_at: float | None = None  # the last successful fetch
        self.attempted_at: float | None = None  # the last fetch started, whatever became of it
        self.running: threading.Event | None = None  # set when the fetch that runs ends
        self.lock = threading.Lock()  # guards the fields above; never held while fetching

    def key(self, kid: str) -> jwt.PyJWK | None:
        now = time.monotonic()
        with self.lock:
            key = self.keys.get(kid)
            stale = self.fetched_at is None or now - self.fetched_at >= self.lifespan
            if key is not None and not stale:
                return key
            running = self.running
            may_fetch = running is None and (self.attempted_at is None or now - self.attempted_at >= self.cooldown)
            if may_fetch:
                running = self.running = threading.Event()
                self.attempted_at = now
        if key is not None:  # a known key of an old set: answered now, the set refreshed beside
            if may_fetch:
                threading.Thread(target=self.fetch, args=(running,), name="jwks-refresh", daemon=True).start()
            return key
        if may_fetch:
            assert running is not None
            self.fetch(running)
        elif running is not None:
            running.wait(self.timeout + 1)
        with self.lock:
            return self.keys.get(kid)

    def fetch(self, running: threading.Event) -> None:
        import jwt

        keys: dict[str, jwt.PyJWK] | None = None
        try:
            found = jwt.PyJWKSet.from_dict(self.client.fetch_data())
            keys = {k.key_id: k for k in found.keys if k.key_id and k.public_key_use in ("sig", None)}
            if not keys:
                raise jwt.PyJWKSetError("no signing key with a kid")
        except Exception as exc:  # unreachable, HTTP error, not JSON, no usable key: keep what we had
            keys = None
            logger.warning("--auth jwt: the JWKS could not be fetched: %s: %r", type(exc).__name__, str(exc))
        with self.lock:
            if keys is not None:
                self.keys, self.fetched_at = keys, time.monotonic()
            self.running = None
        running.set()


class JwtVerifier:
    """Verifies bearer JWTs signed by a key of the issuer's JWKS (a `TokenVerifier` for the SDK)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        algorithms: Sequence[str] = JWT_ALGORITHMS,
        roles_claim: str = "roles",
        tenant_claim: str | None = None,
        cooldown: float = JWKS_COOLDOWN,
    ) -> None:
        refused = [a for a in algorithms if a not in JWT_ALGORITHMS]
        if refused or not algorithms:
            raise ValueError(f"not an allowed JWT algorithm: {', '.join(refused) or '(none given)'}")
        self.issuer = issuer
        self.audience = audience
        self.algorithms = list(algorithms)
        self.roles_claim = roles_claim
        self.tenant_claim = tenant_claim
        self.keys = JwksKeys(jwks_url, cooldown=cooldown)

    async def verify_token(self, token: str) -> AccessToken | None:
        # The JWKS fetch is blocking (urllib): in a worker thread, so a slow issuer never stalls the event loop.
        return await anyio.to_thread.run_sync(self.verify_blocking, token)

    def verify_blocking(self, token: str) -> IdentifiedToken | None:
        import jwt  # loaded by __init__ already: a dictionary lookup

        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = self.keys.key(kid) if isinstance(kid, str) else None
            if key is None:
                # %r: the kid is the caller's text, and a line break in it must not start a log line of its own
                logger.info("--auth jwt: token refused: no key of the JWKS has its kid %r", kid)
                return None
            claims = jwt.decode(
                token,
                key=key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=JWT_LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:  # bad signature, wrong iss/aud, expired, not yet valid, malformed, ...
            logger.info("--auth jwt: token refused: %s: %r", type(exc).__name__, str(exc))
            return None
        return self.identified(token, claims)

    def identified(self, token: str, claims: dict[str, Any]) -> IdentifiedToken | None:
        """The token's identity, or None when its claims do not say who it is (fail closed)."""
        subject = claims.get("sub")
        scopes = _names(claims.get("scope", claims.get("scp", [])))
        roles = _names(claims.get(self.roles_claim, []))
        tenant = claims.get(self.tenant_claim) if self.tenant_claim else None
        if not isinstance(subject, str) or not subject or scopes is None or roles is None:
            logger.info("--auth jwt: token refused: no string sub, or a malformed scope or %s claim", self.roles_claim)
            return None
        if self.tenant_claim and not (isinstance(tenant, str) and tenant):
            logger.info(
                "--auth jwt: token refused: no %s claim, and this server scopes data per tenant", self.tenant_claim
            )
            return None
        client = claims.get("client_id", claims.get("azp", subject))
        return IdentifiedToken(
            token=token,
            client_id=client if isinstance(client, str) else subject,
            scopes=scopes,
            expires_at=int(claims["exp"]),
            subject=subject,
            claims=claims,
            roles=roles,
            tenant=tenant if isinstance(tenant, str) else None,
        )


# --- --auth tokens ----------------------------------------------------------------------------------------


def token_digest(token: str) -> str:
    """What a static tokens file holds instead of a token: its SHA-256, in lowercase hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class StaticTokens:
    """Opaque bearer tokens listed, hashed, in a TOML file (a `TokenVerifier` for the SDK):

    [[token]]
    sha256 = "<64 hex digits: sha256 of the token>"
    subject = "alice"
    roles = ["admin"]
    scopes = ["invoices:read"]
    tenant = "acme"        # optional; required when the spec has a tenant_claim
    """

    def __init__(self, entries: Mapping[str, Identity]) -> None:
        self.entries = dict(entries)

    @classmethod
    def load(cls, path: str | Path, *, tenants: bool = False) -> StaticTokens:
        """Read and check the file; ValueError (naming the entry) for anything that is not as documented."""
        import tomllib  # only --auth tokens reads TOML: not imported at every start

        with open(path, "rb") as file:
            document = tomllib.load(file)
        unknown = set(document) - {"token"}
        if unknown:
            raise ValueError(f"unknown table or key: {', '.join(sorted(unknown))} (only [[token]] entries)")
        listed = document.get("token", [])
        if not isinstance(listed, list) or not listed:
            raise ValueError("no [[token]] entries")
        entries: dict[str, Identity] = {}
        for number, entry in enumerate(listed, 1):
            digest, identity = _static_entry(entry, number, tenants)
            if digest in entries:
                raise ValueError(f"token {number}: the same sha256 as an earlier token")
            entries[digest] = identity
        return cls(entries)

    async def verify_token(self, token: str) -> AccessToken | None:
        # A lookup by digest: the token itself is never compared, so its bytes leak nothing through timing.
        identity = self.entries.get(token_digest(token))
        if identity is None:
            return None
        return IdentifiedToken(
            token=token,
            client_id=identity.subject,
            scopes=sorted(identity.scopes),
            subject=identity.subject,
            roles=sorted(identity.roles),
            tenant=identity.tenant,
        )


def _static_entry(entry: object, number: int, tenants: bool) -> tuple[str, Identity]:
    where = f"token {number}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: not a table")
    unknown = set(entry) - _TOKEN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(sorted(unknown))}")
    digest, subject, tenant = entry.get("sha256"), entry.get("subject"), entry.get("tenant")
    if not (isinstance(digest, str) and _SHA256_HEX.fullmatch(digest)):
        raise ValueError(f"{where}: sha256 must be the token's SHA-256 as 64 lowercase hex digits")
    if not (isinstance(subject, str) and subject):
        raise ValueError(f"{where}: subject must be a non-empty string")
    if tenant is not None and not (isinstance(tenant, str) and tenant):
        raise ValueError(f"{where}: tenant must be a non-empty string")
    if tenants and tenant is None:
        raise ValueError(f"{where}: no tenant, and this server scopes data per tenant")
    roles, scopes = _string_list(entry, "roles", where), _string_list(entry, "scopes", where)
    return digest, Identity(subject, frozenset(roles), frozenset(scopes), tenant)


def _string_list(entry: Mapping[str, object], key: str, where: str) -> Iterable[str]:
    value = entry.get(key, [])
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ValueError(f"{where}: {key} must be a list of non-empty strings")
    return value
