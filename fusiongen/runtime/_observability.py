"""What a running server tells its operators: logging with credentials redacted, tracing (`--otel`), and
whether its state store answers (the readiness probe, and the warning while it does not)."""

from __future__ import annotations

import argparse
import hashlib
import logging
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio

if TYPE_CHECKING:  # the SDK is the optional `otel` extra: imported only by --otel
    from opentelemetry.sdk.trace import TracerProvider

logger = logging.getLogger(__name__.rpartition(".")[0])

STORE_CHECK_TIMEOUT = 5.0  # seconds one reachability check of the state store may take
STORE_RETRY_MAX = 5.0  # seconds at most between two checks while the store is unreachable
TRACE_FLUSH_TIMEOUT_MS = 5000  # at exit, how long the spans not yet exported may take to send


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
