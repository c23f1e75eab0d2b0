"""A generated server's command line: the options every server shares, each checked as it is parsed, and the
extras they need (`__main__.py` adds those that depend on the spec: its state store, its user blocks)."""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from ._dependencies import EXTRAS, outside
from ._identity import JWT_ALGORITHMS
from ._observability import tracing_missing
from ._presenting import USER_BLOCK_MODES
from ._runtime import DEFAULT_LIVE_STARTS, DEFAULT_STARTS_PER_MINUTE, AuditLog

if TYPE_CHECKING:  # --auth's verifier type, for annotations only
    from mcp.server.auth.provider import TokenVerifier

LOG_LEVELS = ["debug", "info", "warning", "error"]
# The distribution whose `otel` extra holds the tracing SDK: the package's name with `-`, as fusiongen names it.
_DISTRIBUTION = __name__.rpartition(".")[0].replace("_", "-")
HTTP_RESPONSE_MODES = ["auto", "sse", "json"]  # --http-response


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every generated server, whatever it serves: request limits, tracing, logging, the audit
    log. `--http` is off unless `add_http_arguments` adds it (a server built without the http transport)."""
    parser.set_defaults(http=False)
    parser.add_argument(
        "--max-request-body",
        type=count_argument,
        default=DEFAULT_MAX_REQUEST_BODY_SIZE,
        metavar="BYTES",
        help="largest request accepted: an HTTP body (a larger one gets 413) or a stdio line (a longer one is "
        f"skipped with a warning on stderr) (default {DEFAULT_MAX_REQUEST_BODY_SIZE})",
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


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a server with the http transport (the default): `--http`, who may connect, HTTP limits,
    and `--auth`."""
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
        "--http-response",
        choices=HTTP_RESPONSE_MODES,
        default="auto",
        help="HTTP: answer each request with an SSE stream (sse: it also carries what a handler sends during its "
        "call through ctx.session: progress, log messages, requests to the client) or with one JSON body (json: "
        "about half the server CPU per call; those are then dropped). auto (default): json when no handler takes "
        "ctx (none can send anything during its call), else sse. tools/list_changed goes on the session's GET "
        "stream in all",
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


# Open sessions one client may hold (handshake era): far more than the agents of one user open at once.
DEFAULT_SESSIONS_PER_CLIENT = 1_000


# A request's line and headers: 64 KiB holds the largest bearer JWTs issuers mint, many times over.
DEFAULT_MAX_HEADER_SIZE = 65_536
