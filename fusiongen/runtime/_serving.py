"""Running a generated server as a program: its options, who may connect over HTTP, logging, serving.

The same for every spec, so it lives here rather than in a template: `__main__.py` adds only what depends
on the spec (its name, its handler module, its workflow state store) and calls these functions.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import ipaddress
import logging
import math
import os
import re
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

import anyio
from mcp.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings

from ._dependencies import EXTRAS, outside
from ._identity import JWT_ALGORITHMS
from ._runtime import (
    DEFAULT_LIVE_STARTS,
    DEFAULT_STARTS_PER_MINUTE,
    USER_BLOCK_MODES,
    AuditLog,
    HandlerServer,
    audit_to,
)
from ._stdio import Bypass, stdio_is_pipes, stdio_streams

if TYPE_CHECKING:  # the SDK is the optional `otel` extra: imported only by --otel
    from mcp.server.auth.provider import TokenVerifier
    from opentelemetry.sdk.trace import TracerProvider
    from starlette.applications import Starlette

logger = logging.getLogger(__name__.rpartition(".")[0])

LOG_LEVELS = ["debug", "info", "warning", "error"]
# The Host names a loopback or every-interface bind accepts by default (at its port). The wildcard address
# itself (0.0.0.0, ::) is never one: browsers that treat it as "this machine" must not get in by naming it.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
STORE_CHECK_TIMEOUT = 5.0  # seconds one reachability check of the state store may take
STORE_RETRY_MAX = 5.0  # seconds at most between two checks while the store is unreachable
# The distribution whose `otel` extra holds the tracing SDK: the package's name with `-`, as fusiongen names it.
_DISTRIBUTION = __name__.rpartition(".")[0].replace("_", "-")
TRACE_FLUSH_TIMEOUT_MS = 5000  # at exit, how long the spans not yet exported may take to send
HTTP_RESPONSE_MODES = ["auto", "sse", "json"]  # --http-response
# Set to `off` to serve through the SDK's public API even where the fast path (_fast_path.py) would serve.
FAST_PATH_VARIABLE = "MCP_SERVER_FAST_PATH"


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every generated server: transport, who may connect, HTTP limits, logging."""
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_argument, default=8000, help="HTTP port, 1-65535 (default 8000)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        type=allowed_host_argument,
        metavar="HOST[:PORT]",
        help="also accept requests whose Host header is this (repeatable; HOST:* for any port). "
        "By default only 127.0.0.1, localhost and [::1] at --port for a loopback or "
        "every-interface bind (0.0.0.0, ::), and the bound address at --port for any other",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        type=allowed_origin_argument,
        metavar="SCHEME://HOST[:PORT]",
        help="also accept requests whose Origin header is this (repeatable). By default only "
        "http:// and an accepted default Host; requests without Origin are accepted",
    )
    parser.add_argument(
        "--max-sessions",
        type=count_argument,
        default=10_000,
        help="HTTP: open sessions at most; a request that would open another gets 503 (default 10000)",
    )
    parser.add_argument(
        "--max-sessions-per-client",
        type=count_argument,
        default=DEFAULT_SESSIONS_PER_CLIENT,
        metavar="N",
        help="HTTP: open sessions one client (an authenticated subject, else a peer address) may hold; opening "
        "another closes its least recently used one (default %(default)s)",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=positive_argument,
        default=1800.0,
        help="HTTP: seconds after which an idle session is closed, freeing its slot (default 1800)",
    )
    parser.add_argument(
        "--max-header-size",
        type=count_argument,
        default=DEFAULT_MAX_HEADER_SIZE,
        metavar="BYTES",
        help="HTTP: a request's line and headers at most this many bytes, checked as they arrive, before any "
        f"authentication; more get 431 and the connection is closed (default {DEFAULT_MAX_HEADER_SIZE})",
    )
    parser.add_argument(
        "--max-request-body",
        type=count_argument,
        default=DEFAULT_MAX_REQUEST_BODY_SIZE,
        metavar="BYTES",
        help="largest request accepted: an HTTP body (a larger one gets 413) or a stdio line (a longer one is "
        f"skipped with a warning on stderr) (default {DEFAULT_MAX_REQUEST_BODY_SIZE})",
    )
    parser.add_argument(
        "--http-response",
        choices=HTTP_RESPONSE_MODES,
        default="auto",
        help="HTTP: answer each request with an SSE stream (sse: it also carries what a handler sends during its "
        "call through ctx.session: progress, log messages, requests to the client) or with one JSON body (json: "
        "about half the server CPU per call; those are then dropped). auto (default): json when no handler takes "
        "ctx (none can send anything during its call), else sse. tools/list_changed goes on the session's GET "
        "stream in all",
    )
    parser.add_argument(
        "--max-in-flight",
        type=count_argument,
        default=64,
        metavar="N",
        help="stdio: requests read and not yet answered at most; while N are, stdin is not read further, so "
        "a client that keeps writing blocks (default 64)",
    )
    parser.add_argument(
        "--otel",
        action=TracingOption,
        help="export OpenTelemetry traces (a span per request, tool calls with fusiongen.* attributes) over "
        "OTLP/HTTP, configured by the standard OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT, "
        "OTEL_SERVICE_NAME defaulting to the server's name, ...); needs the [otel] extra",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=LOG_LEVELS,
        help="log level of this server and its handler module (default warning); logs go to "
        "stderr (stdout carries the protocol on stdio)",
    )
    parser.add_argument(
        "--dependency-log-level",
        default="warning",
        choices=LOG_LEVELS,
        help="log level of every other logger: mcp, uvicorn, sse_starlette, ... (default "
        "warning); at debug they dump whole messages, data meant only for the user included",
    )
    parser.add_argument(
        "--audit-log",
        metavar="FILE",
        type=audit_log_argument,
        help="append one JSON line per tool call to FILE: time, subject, tenant, tool, outcome code and a SHA-256 "
        "of the arguments (never a value)",
    )
    add_auth_arguments(parser)


def add_auth_arguments(parser: argparse.ArgumentParser) -> None:
    """HTTP: who may call. The server is an OAuth 2.1 resource server: it verifies bearer tokens, never issues
    them. stdio is the local user's own process and is never authenticated."""
    parser.add_argument(
        "--auth",
        choices=["none", "jwt", "tokens"],
        default="none",
        help="HTTP: require a bearer token on /mcp: jwt (signed by --auth-issuer, keys from --auth-jwks-url) or "
        "tokens (listed hashed in --auth-tokens-file); none (default) leaves the server open",
    )
    parser.add_argument(
        "--auth-issuer", metavar="URL", type=url_argument, help="--auth jwt: the iss every token must carry"
    )
    parser.add_argument("--auth-audience", metavar="AUD", help="--auth jwt: the aud every token must include")
    parser.add_argument(
        "--auth-jwks-url", metavar="URL", type=url_argument, help="--auth jwt: the issuer's JSON Web Key Set"
    )
    parser.add_argument(
        "--auth-jwks-cooldown",
        type=seconds_argument,
        default=None,
        metavar="SECONDS",
        help="--auth jwt: at least this long between two JWKS fetches, failed or not (default 30; 0: a fetch "
        "whenever a token names an unknown key, one at a time)",
    )
    parser.add_argument(
        "--auth-algorithm",
        action="append",
        default=[],
        choices=JWT_ALGORITHMS,
        metavar="ALG",
        help=f"--auth jwt: a signature algorithm accepted (repeatable; default all of {', '.join(JWT_ALGORITHMS)})",
    )
    parser.add_argument(
        "--auth-tokens-file",
        metavar="FILE",
        help="--auth tokens: TOML file of [[token]] entries: sha256 (of the token), subject, roles, scopes, tenant",
    )
    parser.add_argument(
        "--auth-server",
        action="append",
        default=[],
        type=url_argument,
        metavar="URL",
        help="an authorization server issuing tokens for this server, named in /.well-known/oauth-protected-"
        "resource (repeatable; default --auth-issuer)",
    )
    parser.add_argument(
        "--auth-resource-url",
        type=url_argument,
        metavar="URL",
        help="this server's public MCP URL, the resource the metadata describes (default http://HOST:PORT/mcp; "
        "set it behind a proxy or on a public name)",
    )
    parser.add_argument(
        "--auth-required-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope every token must have to reach /mcp at all; without it, 403 insufficient_scope (repeatable)",
    )


def token_verifier(
    parser: argparse.ArgumentParser,
    arguments: argparse.Namespace,
    *,
    roles_claim: str = "roles",
    tenant_claim: str | None = None,
) -> TokenVerifier | None:
    """The verifier --auth asks for, checked now: a missing or unusable option is a usage error (exit 2), not a
    server that starts and refuses everyone. None for --auth none."""
    if arguments.auth == "none":
        given = ("auth_issuer", "auth_audience", "auth_jwks_url", "auth_jwks_cooldown", "auth_tokens_file")
        stray = [o for o in given if getattr(arguments, o) is not None]
        if stray:
            parser.error(f"--{stray[0].replace('_', '-')} needs --auth jwt or --auth tokens")
        return None
    from ._auth import JWKS_COOLDOWN, JwtVerifier, StaticTokens  # only for --auth: else never imported

    if arguments.auth == "jwt":
        missing = [o for o in ("auth_issuer", "auth_audience", "auth_jwks_url") if not getattr(arguments, o)]
        if missing:
            parser.error(f"--auth jwt needs --{missing[0].replace('_', '-')}")
        return JwtVerifier(
            issuer=arguments.auth_issuer,
            audience=arguments.auth_audience,
            jwks_url=arguments.auth_jwks_url,
            algorithms=arguments.auth_algorithm or JWT_ALGORITHMS,
            roles_claim=roles_claim,
            tenant_claim=tenant_claim,
            cooldown=JWKS_COOLDOWN if arguments.auth_jwks_cooldown is None else arguments.auth_jwks_cooldown,
        )
    if not arguments.auth_tokens_file:
        parser.error("--auth tokens needs --auth-tokens-file")
    try:
        mode = os.stat(arguments.auth_tokens_file).st_mode
    except OSError as exc:
        parser.error(f"--auth-tokens-file {arguments.auth_tokens_file}: {exc.strerror}")
    if mode & 0o022:  # whoever may write it may add a token of their own, with any roles and scopes
        parser.error(
            f"--auth-tokens-file {arguments.auth_tokens_file}: writable by its group or by others "
            f"(mode {stat.S_IMODE(mode):04o}): anyone who can write it can add a token; chmod go-w it"
        )
    try:
        return StaticTokens.load(arguments.auth_tokens_file, tenants=tenant_claim is not None)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        parser.error(f"--auth-tokens-file {arguments.auth_tokens_file}: {exc}")


def check_extras(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """The extras this command line uses (`--http`, `--auth`, `--otel`, a Redis `--state-store`), their installed
    versions checked against the ranges the generated pyproject.toml declares (`_dependencies.py`): one outside
    is a usage error (exit 2) that names it, before anything is served."""
    store = str(getattr(arguments, "state_store", ""))
    used = {
        "http": arguments.http,
        "fast": arguments.http,  # httptools and uvloop serve only HTTP
        "auth": getattr(arguments, "auth", "none") != "none",
        "otel": arguments.otel,
        "redis": store.startswith(("redis://", "rediss://")),
    }
    problems = [problem for extra, wanted in used.items() if wanted for problem in outside(EXTRAS[extra])]
    if problems:
        parser.error(
            f"{_DISTRIBUTION} was generated and tested for {'; '.join(problems)}: install versions in these ranges"
        )


def add_presenter_arguments(parser: argparse.ArgumentParser) -> None:
    """The option of servers whose spec declares audience = "user" UI blocks."""
    parser.add_argument(
        "--user-blocks",
        choices=USER_BLOCK_MODES,
        default="spec",
        help='UI blocks meant only for the user (audience = "user"): send them, omit them, or do what the spec '
        "says (default spec). Audience is a hint: clients that ignore it, such as langchain, show them to the model",
    )


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of servers with workflows: where their state lives, handle expiry, lock leases."""
    parser.add_argument(
        "--state-store",
        default="memory",
        help="workflow state: memory (default), sqlite:///path/state.db or redis://host:port/db",
    )
    parser.add_argument(
        "--handle-idle-ttl",
        type=positive_argument,
        default=86400.0,
        help="seconds without activity after which a workflow handle expires (default 86400)",
    )
    parser.add_argument(
        "--lock-ttl",
        type=positive_argument,
        default=5.0,
        help="lease of a workflow handle's lock, renewed while its call runs: seconds after "
        "which a crashed replica's lock frees itself (default 5)",
    )
    parser.add_argument(
        "--max-starts-per-minute",
        type=count_argument,
        default=DEFAULT_STARTS_PER_MINUTE,
        metavar="N",
        help="<workflow>.start calls one client (an authenticated subject, else an HTTP session) may make per "
        f"minute, in bursts of as many; more get RATE_LIMITED (default {DEFAULT_STARTS_PER_MINUTE})",
    )
    parser.add_argument(
        "--max-live-starts",
        type=count_argument,
        default=DEFAULT_LIVE_STARTS,
        metavar="N",
        help="<workflow>.start calls one client may make per --handle-idle-ttl (each creates a record that lives "
        f"that long): the records one client can pile up in the store (default {DEFAULT_LIVE_STARTS})",
    )
    parser.add_argument(
        "--start-limit-by-address",
        action="store_true",
        help="count unauthenticated 2026-07-28 clients by their peer address for the start limits (only when "
        "nothing such as a proxy or a NAT puts several clients behind one address); without it they are not "
        "limited per client",
    )


def positive_argument(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def seconds_argument(text: str) -> float:
    """A duration that may be 0: a finite number of seconds, not negative."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
    return value


def count_argument(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def audit_log_argument(text: str) -> AuditLog:
    """--audit-log FILE, opened (append, created if missing) while the options are read: a file the server
    cannot write is a usage error at start-up, never a server that serves calls it does not audit. A new file
    is created private to the server's user (0600): it says who called what, and when."""
    try:
        descriptor = os.open(text, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        stream = os.fdopen(descriptor, "a", encoding="utf-8")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot append to {text}: {exc.strerror}") from exc
    return AuditLog(stream)


def port_argument(text: str) -> int:
    # Port 0 (any free port) is refused: the Host check needs the port clients will name.
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port from 1 to 65535: {text!r}")
    return int(text)


def url_argument(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {text!r}")
    return text


def allowed_host_argument(text: str) -> str:
    if not text or text == "*" or any(c.isspace() or c in "/@,?#" for c in text):
        raise argparse.ArgumentTypeError(
            f"not a Host header value (a name or address, optionally :PORT or :*, no scheme or path): {text!r}"
        )
    return text


def allowed_origin_argument(text: str) -> str:
    scheme, separator, rest = text.partition("://")
    if scheme not in ("http", "https") or not separator or not rest or any(c.isspace() or c in "/@,?#" for c in rest):
        raise argparse.ArgumentTypeError(f"not an origin (http:// or https://, a host, optionally :PORT): {text!r}")
    return text


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


def serving_banner(name: str, arguments: argparse.Namespace, server: Server[Any] | None = None) -> str:
    """The one line every server writes to stderr as it starts: what it serves, how and where (over HTTP, in
    which responses, as `--http-response` resolves for `server`). stderr, because stdout carries the protocol on
    stdio; MCP hosts show a server's stderr in their logs."""
    if not arguments.http:
        return f"{name}: serving MCP over stdio (JSON-RPC on stdin/stdout; logs on stderr)"
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


# --- logging ------------------------------------------------------------------------------------------


# Session ids (32 hex digits) and workflow handles (32 URL-safe characters) are credentials: any run of 32 or
# more such characters in a log line, whoever logged it, is replaced by a short hash that still correlates.
_CREDENTIAL = re.compile(r"[A-Za-z0-9_-]{32,}")


def fingerprint(secret: str) -> str:
    """How a session id or handle appears in logs: `sha256:` and the first 8 hex digits of its SHA-256."""
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:8]


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _CREDENTIAL.sub(lambda m: fingerprint(m.group()), super().format(record))


def serving_logging(arguments: argparse.Namespace, own: Sequence[str]) -> None:
    """One stderr handler on the root, redacting. The root (every dependency) logs at --dependency-log-level;
    only this package and the handler module follow --log-level, so it never opens the SDK's or uvicorn's
    message dumps and session-id lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=arguments.dependency_log_level.upper(), handlers=[handler], force=True)
    for name in own:
        logging.getLogger(name).setLevel(arguments.log_level.upper())


# --- tracing (--otel) ------------------------------------------------------------------------------------


class TracingOption(argparse.Action):
    """`--otel`, a flag refused as a usage error (exit 2) when the OpenTelemetry SDK and its OTLP/HTTP exporter
    (the server's `otel` extra) are not importable, rather than failing once the server runs."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, help=help)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        missing = tracing_missing()
        if missing is not None:
            parser.error(
                f"{option}: the OpenTelemetry SDK or its OTLP/HTTP exporter is not installed ({missing}); install "
                f"this server's otel extra: pip install '{_DISTRIBUTION}[otel]'"
            )
        setattr(namespace, self.dest, True)


def tracing_missing() -> str | None:
    """Why --otel cannot work here (the import that fails), or None. Only the API comes with mcp."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


class Tracing:
    """The TracerProvider --otel installed, flushed and stopped once, by whichever exit path comes first."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.stopped = False

    def stop(self) -> None:
        """Export the spans still queued and stop: at every exit (stdio's end, a signal, uvicorn's shutdown),
        since a batch is otherwise sent only every few seconds and the last calls' spans would be lost."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.provider.force_flush(TRACE_FLUSH_TIMEOUT_MS)
            self.provider.shutdown()
        except Exception as exc:  # an exporter that fails must not turn a clean exit into a crash
            logger.warning("--otel: sending the last spans failed: %s: %s", type(exc).__name__, exc)


def start_tracing(name: str) -> Tracing:
    """Install a TracerProvider exporting over OTLP/HTTP in batches.

    Everything comes from the standard OTEL_* variables, read by the SDK itself: the endpoint, headers and
    timeout (OTEL_EXPORTER_OTLP_*), the sampler (OTEL_TRACES_SAMPLER), batching (OTEL_BSP_*), the resource
    (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME); only the service name defaults to the server's name rather
    than the SDK's `unknown_service`. The SDK's own middleware makes the spans (one per request); the runtime
    adds `fusiongen.*` attributes to a tool call's span."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: name}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # Tracing.stop flushes it
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return Tracing(provider)


# --- the state store: reachability --------------------------------------------------------------------


def shown_url(url: str) -> str:
    """The --state-store URL as stderr shows it: a password in it replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, address = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}:***@{address}"))


async def store_problem(store: Any) -> str | None:
    """None if the store answers now (or cannot be asked: a custom store without `ping`), else why not."""
    ping = getattr(store, "ping", None)
    if ping is None:
        return None
    try:
        with anyio.fail_after(STORE_CHECK_TIMEOUT):
            await ping()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


async def watch_store(name: str, store: Any, url: str) -> None:
    """At start-up: one line on stderr if the store is unreachable, then checks until it answers and one line
    when it does. Serving goes on meanwhile (workflow calls get STORE_UNAVAILABLE); every call tries the store
    again by itself, so it is used as soon as it is back."""
    problem = await store_problem(store)
    if problem is None:
        return
    print(
        f"{name}: the state store {shown_url(url)} is unreachable ({problem}); serving anyway: workflow calls "
        "get STORE_UNAVAILABLE until it answers",
        file=sys.stderr,
        flush=True,
    )
    delay = 0.25
    while problem is not None:
        await anyio.sleep(delay)
        delay = min(delay * 2, STORE_RETRY_MAX)
        problem = await store_problem(store)
    print(f"{name}: the state store {shown_url(url)} is reachable again", file=sys.stderr, flush=True)


# --- serving ------------------------------------------------------------------------------------------


async def stop_on_signal(serving: anyio.CancelScope, store: Any, graceful: bool, tracing: Tracing | None) -> None:
    """stdio: on SIGTERM or SIGINT end serving, exit 0. Gracefully on pipes: cancelling `serving` stops the running
    handlers (their locks are released as they unwind, and the SDK answers their requests "Connection closed"),
    the transport writes what is left, and the caller closes the store and flushes the spans (--otel). A second
    signal gets the default action (the receiver is gone), which ends a shutdown that hangs. Otherwise (the SDK's
    threaded transport, whose read of stdin nothing interrupts) close the store, which frees the locks this
    process holds, send the spans not yet exported, and `os._exit(0)`: cancelling would wait for the client's
    next line."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("%s: closing and exiting", signal.Signals(signum).name)
            if graceful:
                serving.cancel()
                return
            try:
                if store is not None:
                    with anyio.move_on_after(10):
                        await store.close()
            finally:
                if tracing is not None:
                    tracing.stop()
                sys.stderr.flush()
                os._exit(0)


async def serve_stdio(
    server: Server[Any],
    options: InitializationOptions,
    arguments: argparse.Namespace,
    store: Any,
    tracing: Tracing | None = None,
    *,
    fast: bool = True,
) -> None:
    """Serve one session on stdin/stdout until EOF or a signal: with `fast`, in the fast path's session (its
    tool-call lane takes calls from the transport's bypass); without, by the SDK's `Server.run`."""
    graceful = stdio_is_pipes()
    bypass = Bypass()  # where the session's tool-call lane takes its calls from the transport
    streams = stdio_streams(arguments.max_in_flight, arguments.max_request_body, bypass)
    async with streams as (read_stream, write_stream), anyio.create_task_group() as group:
        serving = anyio.CancelScope()
        group.start_soon(stop_on_signal, serving, store, graceful, tracing)
        with serving:
            if fast:
                from ._fast_path import serve_session

                await serve_session(server, read_stream, write_stream, options, bypass)
            else:
                await server.run(read_stream, write_stream, options)
        group.cancel_scope.cancel()


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


async def serve(
    name: str,
    server: Server[Any],
    arguments: argparse.Namespace,
    store: Any = None,
    *,
    tools_changed: bool = False,
    scopes: Sequence[str] = (),
) -> None:
    """Serve over stdio or, with --http, streamable HTTP, until the process ends; with --otel, traced. `scopes`
    are the spec's, advertised in the protected resource metadata under --auth."""
    tracing = start_tracing(name) if arguments.otel else None
    audit_to(getattr(arguments, "audit_log", None))
    problem = fast_path_problem()
    serving_middleware(server, traced=tracing is not None, fast=problem is None)
    print(serving_banner(name, arguments, server), file=sys.stderr, flush=True)
    if problem is not None:
        print(f"{name}: serving through the SDK's public API (slower, the same answers): {problem}", file=sys.stderr)
    try:
        if arguments.http:
            await serve_http(name, server, arguments, store, tracing.stop if tracing is not None else None, scopes)
        else:
            options = server.create_initialization_options(
                NotificationOptions(tools_changed=True) if tools_changed else None
            )
            await serve_stdio(server, options, arguments, store, tracing, fast=problem is None)
    finally:
        if tracing is not None:
            tracing.stop()


def event_loop_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """`anyio.run`'s backend options: with --http, uvloop when it is installed (the server's `fast` extra), whose
    socket transports and scheduling cost less per request than the standard loop's; stdio keeps the standard
    loop, which its transport (`_stdio.py`) is written for."""
    if arguments.http and importlib.util.find_spec("uvloop") is not None:
        return {"use_uvloop": True}
    return {}


def fast_path_problem() -> str | None:
    """Why the fast path (`_fast_path.py`) does not serve here, or None when it does: turned off by the
    environment, an SDK without a module or name it imports, or one it was not tested on (`unavailable`)."""
    if os.environ.get(FAST_PATH_VARIABLE, "").strip().lower() == "off":
        return f"{FAST_PATH_VARIABLE}=off"
    try:
        from ._fast_path import unavailable
    except ImportError as exc:  # the SDK moved or renamed something the fast path imports
        return f"the SDK lacks what the fast path imports ({exc})"
    return unavailable()


def serving_middleware(server: Server[Any], *, traced: bool, fast: bool = True) -> None:
    """What runs around each request when serving: the runtime's tools/call fast path (FastToolCalls: results
    serialized once), innermost; the SDK's OpenTelemetry middleware only with --otel. Without a tracer provider
    its span per message records nothing, yet cost about a tenth of a call's time (measured over stdio); the
    SDK documents dropping it from `Server.middleware` as the way to opt out."""
    if not traced:
        server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    if not fast:
        return
    from ._fast_path import FastToolCalls

    if not any(isinstance(m, FastToolCalls) for m in server.middleware):
        server.middleware.append(FastToolCalls(server))


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


# Open sessions one client may hold (handshake era): far more than the agents of one user open at once.
DEFAULT_SESSIONS_PER_CLIENT = 1_000


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


# A request's line and headers: 64 KiB holds the largest bearer JWTs issuers mint, many times over.
DEFAULT_MAX_HEADER_SIZE = 65_536
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
