"""Serving over streamable HTTP: who may connect (Host, Origin), the app with its probes, per-client session
fairness, HTTP limits. Only `--http` imports it: a stdio server never loads it, nor the web stack under it."""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings

from ._observability import fingerprint, store_problem
from ._runtime import HandlerServer

if TYPE_CHECKING:  # for annotations only: the app is made by the SDK's streamable HTTP transport
    from starlette.applications import Starlette

logger = logging.getLogger(__name__.rpartition(".")[0])
# The Host names a loopback or every-interface bind accepts by default (at its port). The wildcard address
# itself (0.0.0.0, ::) is never one: browsers that treat it as "this machine" must not get in by naming it.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


# --- HTTP: who may connect --------------------------------------------------------------------------------


def bind_scope(host: str) -> str:
    """`loopback` (this machine only), `all` (every interface: "", 0.0.0.0, ::) or `address` (one address or
    host name, reachable from wherever it routes)."""
    if not host:
        return "all"
    if host.lower() == "localhost":
        return "loopback"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "address"
    if address.is_loopback:
        return "loopback"
    return "all" if address.is_unspecified else "address"


def default_hosts(host: str, port: int) -> list[str]:
    """The Host headers accepted without --allowed-host: the bound address at the bound port; for a loopback or
    every-interface bind, the loopback names at the port instead (and never the wildcard address)."""
    scope = bind_scope(host)
    names = list(LOOPBACK_HOSTS) if scope != "address" else []
    if scope != "all":
        name = host.lower().strip("[]")
        name = f"[{name}]" if ":" in name else name
        if name not in names:
            names.append(name)
    return [f"{name}:{port}" for name in names] + (names if port == 80 else [])


def transport_security(arguments: argparse.Namespace) -> TransportSecuritySettings:
    """Host and Origin checks, on for every bind (the SDK only turns them on for three loopback spellings)."""
    hosts = default_hosts(arguments.host, arguments.port)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys([*hosts, *arguments.allowed_host])),
        allowed_origins=list(dict.fromkeys([*(f"http://{h}" for h in hosts), *arguments.allowed_origin])),
    )


def http_banner(name: str, arguments: argparse.Namespace, server: Server[Any] | None = None) -> str:
    """The line an HTTP server writes to stderr as it starts (`_serving.serving_banner` on stdio): where, and in
    which responses (as `--http-response` resolves for `server`)."""
    host = f"[{arguments.host}]" if ":" in arguments.host else arguments.host
    return (
        f"{name}: serving MCP over streamable HTTP at http://{host}:{arguments.port}/mcp (probes: /healthz, "
        f"/readyz); responses: {response_mode(server, arguments.http_response)}"
    )


def json_responses(server: Server[Any] | None, mode: str) -> bool:
    """Whether HTTP answers each request with one JSON body rather than an SSE stream (the SDK's `json_response`).
    `--http-response auto` (the default) picks JSON when no handler takes `ctx`: then nothing is sent during a
    call but its result, and a JSON body costs about half the server CPU per call. A server that does not say
    (not a HandlerServer) gets SSE, which drops nothing."""
    if mode == "auto":
        return isinstance(server, HandlerServer) and not server.handlers_take_ctx
    return mode == "json"


def response_mode(server: Server[Any] | None, mode: str) -> str:
    """How `--http-response` resolved, for the banner: `json`/`sse`, and why when it was `auto`."""
    resolved = "JSON bodies" if json_responses(server, mode) else "SSE streams"
    if mode != "auto":
        return f"{resolved} (--http-response {mode})"
    because = "no handler takes ctx" if resolved == "JSON bodies" else "a handler takes ctx"
    return f"{resolved} (--http-response auto: {because})"


def exposure_notice(name: str, arguments: argparse.Namespace, security: TransportSecuritySettings) -> str | None:
    """What a bind beyond loopback exposes, for stderr at start-up; None on loopback."""
    scope = bind_scope(arguments.host)
    if scope == "loopback":
        return None
    where = "every network interface" if scope == "all" else arguments.host
    verifier = getattr(arguments, "verifier", None)
    who = (
        f"with bearer authentication (--auth {arguments.auth}): only callers with a valid token get past /mcp"
        if verifier is not None
        else "without authentication (see --auth): the server is open, whoever can reach it and send an accepted "
        "Host can call every tool"
    )
    return (
        f"{name}: serving MCP over streamable HTTP beyond loopback, on {where} port {arguments.port} (path "
        f"/mcp), {who}.\n"
        f"{name}: accepted Host headers: {', '.join(security.allowed_hosts)} (more with --allowed-host); "
        "any other Host is refused (421).\n"
        f"{name}: accepted Origin headers: {', '.join(security.allowed_origins)} (more with --allowed-origin); "
        "any other Origin is refused (403), a request without Origin is accepted."
    )


def health_routes(store: Any) -> list[Any]:
    """HTTP: GET /healthz (200 while the process serves) and GET /readyz (200 when the state store answers,
    else 503), for load balancers and orchestrators. Outside the Host and Origin checks, which guard /mcp:
    a prober sends its own Host, and these answers hold no data."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        if store is None or await store_problem(store) is None:  # no workflows: no store to wait for
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "unavailable", "reason": "the state store is unreachable"}, status_code=503)

    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]


def resource_url(arguments: argparse.Namespace) -> str:
    """The MCP URL tokens are for: --auth-resource-url, else the bound address (loopback for a wildcard bind)."""
    if arguments.auth_resource_url:
        return str(arguments.auth_resource_url)
    host = "127.0.0.1" if bind_scope(arguments.host) == "all" else arguments.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{arguments.port}/mcp"


def authorization_servers(arguments: argparse.Namespace) -> list[str]:
    """The authorization servers the metadata names: --auth-server, else (jwt) the issuer; none for static
    tokens without --auth-server (there is no server to get one from)."""
    servers = list(arguments.auth_server)
    if not servers and arguments.auth == "jwt":
        servers = [arguments.auth_issuer]
    return list(dict.fromkeys(servers))


def http_app(
    name: str,
    server: Server[Any],
    arguments: argparse.Namespace,
    security: TransportSecuritySettings,
    store: Any,
    scopes: Sequence[str],
) -> Starlette:
    """The SDK's streamable HTTP app; with --auth, its resource-server setup: the bearer middleware (401 with
    `WWW-Authenticate`, 403 insufficient_scope for --auth-required-scope, sessions bound to their principal) and
    the RFC 9728 metadata, at the path-inserted URL the 401 names and at the bare well-known path."""
    verifier = getattr(arguments, "verifier", None)
    settings = None
    servers = authorization_servers(arguments) if verifier is not None else []
    if verifier is not None:
        from mcp.server.auth.settings import AuthSettings
        from pydantic import AnyHttpUrl

        resource = AnyHttpUrl(resource_url(arguments))
        settings = AuthSettings(
            issuer_url=AnyHttpUrl(servers[0]) if servers else resource,  # used only by the metadata, replaced below
            resource_server_url=resource if servers else None,  # no metadata without a server to name
            required_scopes=list(arguments.auth_required_scope) or None,
            validate_token_resource=False,  # JwtVerifier checks aud itself; static tokens have no audience
        )
    app = server.streamable_http_app(
        host=arguments.host,
        transport_security=security,
        custom_starlette_routes=health_routes(store),
        max_sessions=arguments.max_sessions,
        session_idle_timeout=arguments.session_idle_timeout,
        max_request_body_size=arguments.max_request_body,
        json_response=json_responses(server, arguments.http_response),
        auth=settings,
        token_verifier=verifier,
    )
    unfair = session_fairness_problem(server, arguments.max_sessions_per_client)  # the manager the app just made
    if unfair is not None:
        print(
            f"{name}: --max-sessions-per-client is not enforced, and at --max-sessions the SDK refuses new sessions "
            f"instead of closing the heaviest client's: {unfair}",
            file=sys.stderr,
        )
    if settings is not None and settings.resource_server_url is not None:
        replace_metadata_routes(app, name, settings.resource_server_url, servers, scopes, arguments.auth_required_scope)
    return app


def replace_metadata_routes(
    app: Starlette, name: str, resource: Any, servers: list[str], scopes: Sequence[str], required: Sequence[str]
) -> None:
    """The SDK's metadata names one authorization server and, as scopes_supported, only the required scopes:
    serve every --auth-server and the spec's scopes instead, at both well-known paths."""
    from mcp.server.auth.routes import create_protected_resource_routes
    from pydantic import AnyHttpUrl
    from starlette.routing import Route

    routes = create_protected_resource_routes(
        resource_url=resource,
        # Strings, validated by the metadata model, which keeps an empty path empty: RFC 8414 compares issuers
        # exactly, and AnyHttpUrl("https://login.example") would add a slash.
        authorization_servers=cast("list[AnyHttpUrl]", servers),
        scopes_supported=list(dict.fromkeys([*scopes, *required])) or None,
        resource_name=name,
    )
    paths = {route.path for route in routes} | {"/.well-known/oauth-protected-resource"}
    kept = [r for r in app.router.routes if not (isinstance(r, Route) and r.path in paths)]
    bare = Route("/.well-known/oauth-protected-resource", routes[0].endpoint, methods=["GET", "OPTIONS"])
    app.router.routes[:] = [*routes, bare, *kept]


def session_fairness_problem(server: Server[Any], per_client: int) -> str | None:
    """Bound each client's HTTP sessions (`_fast_path.fair_sessions`, inside the fence: it extends the SDK's
    session manager); why it cannot on this SDK, or None when it does."""
    try:
        from ._fast_path import fair_sessions
    except ImportError as exc:  # the SDK moved or renamed something the fenced module imports
        return f"the SDK lacks what it relies on ({exc})"
    return fair_sessions(server, per_client, session_client, evicted)


def evicted(session: str, why: str) -> None:
    logger.info("closed session %s to open another: %s", fingerprint(session), why)


def session_client(scope: Any) -> str:
    """Who opens a session: the authenticated subject (and tenant), else the peer address."""
    token = getattr(scope.get("user"), "access_token", None)
    subject = getattr(token, "subject", None)
    if isinstance(subject, str) and subject:
        tenant = getattr(token, "tenant", None)
        return "subject:" + hashlib.sha256(f"{tenant or ''}\0{subject}".encode("utf-8", "surrogatepass")).hexdigest()
    peer = scope.get("client")
    return f"peer:{peer[0]}" if peer else "peer:unknown"


_HEAD_END = b"\r\n\r\n"


def http_protocol(limit: int) -> Any:
    """uvicorn's HTTP protocol with the request head bounded by `limit` bytes, before anything reads it.

    h11 has the bound (`h11_max_incomplete_event_size`, set by serve_http); httptools (the `fast` extra) has
    none: llhttp keeps a header value however long it grows, so one unauthenticated request with a 32 MB header
    cost 64 MB. Its protocol gets the bound here, counted as bytes arrive: a head over it is answered 431 and the
    connection closed, and nothing of it reaches the parser past the bound."""
    try:
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
    except ImportError:
        return "h11"

    class BoundedHead(HttpToolsProtocol):
        head = 0  # bytes of the current request's head seen so far
        in_head = True
        tail = b""  # the last bytes seen, for a head end split across reads
        refused = False

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            if self.in_head:
                seen = self.tail + data
                end = seen.find(_HEAD_END)
                if end < 0:
                    self.head += len(data)
                    self.tail = seen[-3:]
                else:
                    self.head += end + len(_HEAD_END) - len(self.tail)
                    self.in_head, self.tail = False, b""
                if self.head > limit:
                    self.refuse()
                    return
            super().data_received(data)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self.head, self.in_head, self.tail = 0, True, b""  # a next request on the connection has its own head

        def refuse(self) -> None:
            self.logger.warning("Refused a request whose head exceeds %d bytes", limit)
            message = b"Request header fields too large."
            self.transport.write(
                STATUS_LINE[431]
                + b"content-type: text/plain; charset=utf-8\r\ncontent-length: "
                + str(len(message)).encode("ascii")
                + b"\r\nconnection: close\r\n\r\n"
                + message
            )
            self.transport.close()
            self.refused = True  # nothing more of it is read

    return BoundedHead


class HeaderValuesTrimmed:
    """An ASGI wrapper that removes the optional whitespace around each request header value, as RFC 9110 §5.5
    says a field value is parsed. uvicorn's h11 parser does it; its httptools parser (the `fast` extra) hands
    `Mcp-Name:  invoice.get ` on as is, and the SDK's header check would then refuse a valid request (the
    conformance suite's SEP-2243 whitespace check)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = dict(scope, headers=[(key, value.strip(b" \t")) for key, value in scope["headers"]])
        await self.app(scope, receive, send)


async def serve_http(
    name: str,
    server: Server[Any],
    arguments: argparse.Namespace,
    store: Any,
    on_shutdown: Callable[[], None] | None = None,
    scopes: Sequence[str] = (),
) -> None:
    """Streamable HTTP under uvicorn. `on_shutdown` runs at the end of uvicorn's graceful shutdown: after a
    SIGTERM or SIGINT uvicorn raises the signal again once it is done, which ends the process before any code
    after `serve()` would run."""
    import uvicorn

    print(http_banner(name, arguments, server), file=sys.stderr, flush=True)
    security = transport_security(arguments)
    notice = exposure_notice(name, arguments, security)
    if notice is not None:
        print(notice, file=sys.stderr, flush=True)
    app = http_app(name, server, arguments, security, store, scopes)
    # log_config=None: uvicorn's loggers go through the redacting root handler, not handlers of its own. Its
    # access log (INFO lines) only when --dependency-log-level would show them: otherwise each request would still
    # build the log call that the level then drops.
    config = uvicorn.Config(
        HeaderValuesTrimmed(app),
        host=arguments.host,
        port=arguments.port,
        http=http_protocol(arguments.max_header_size),
        h11_max_incomplete_event_size=arguments.max_header_size,
        log_level=arguments.dependency_log_level,
        log_config=None,
        access_log=arguments.dependency_log_level in ("debug", "info"),
    )

    class Uvicorn(uvicorn.Server):
        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            try:
                await super().shutdown(sockets=sockets)
            finally:
                if on_shutdown is not None:
                    on_shutdown()

    await Uvicorn(config).serve()
