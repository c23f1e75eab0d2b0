"""Running a generated server: over stdio, signals, the fast path's switch, and what every transport does as it
starts. The same for every spec: `__main__.py` adds what depends on it and calls these, handing in streamable
HTTP's serving (`_http.py`, imported only with `--http`) when the server has that transport; the command line is
`_cli.py`, logging, tracing and the store's readiness `_observability.py`."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from mcp.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from ._observability import Tracing, start_tracing
from ._runtime import audit_to
from ._stdio import Bypass, stdio_is_pipes, stdio_streams

logger = logging.getLogger(__name__.rpartition(".")[0])
# Set to `off` to serve through the SDK's public API even where the fast path (_fast_path.py) would serve.
FAST_PATH_VARIABLE = "MCP_SERVER_FAST_PATH"
# Streamable HTTP's serving, `_http.serve_http(name, server, arguments, store, on_shutdown, scopes)`: a parameter
# rather than an import, since a server built without the http transport has no `_http.py`.
HttpServing = Callable[
    [str, Server[Any], argparse.Namespace, Any, Callable[[], None] | None, Sequence[str]], Awaitable[None]
]


def serving_banner(name: str) -> str:
    """The line a stdio server writes to stderr as it starts (over HTTP, `_http.http_banner` says where and how).
    stderr, because stdout carries the protocol; MCP hosts show a server's stderr in their logs."""
    return f"{name}: serving MCP over stdio (JSON-RPC on stdin/stdout; logs on stderr)"


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


async def serve(
    name: str,
    server: Server[Any],
    arguments: argparse.Namespace,
    store: Any = None,
    *,
    tools_changed: bool = False,
    scopes: Sequence[str] = (),
    http: HttpServing | None = None,
) -> None:
    """Serve over stdio or, given `http` (--http), streamable HTTP, until the process ends; with --otel, traced.
    `scopes` are the spec's, advertised in the protected resource metadata under --auth."""
    tracing = start_tracing(name) if arguments.otel else None
    audit_to(getattr(arguments, "audit_log", None))
    problem = fast_path_problem()
    serving_middleware(server, traced=tracing is not None, fast=problem is None)
    if http is None:
        print(serving_banner(name), file=sys.stderr, flush=True)
    if problem is not None:
        print(f"{name}: serving through the SDK's public API (slower, the same answers): {problem}", file=sys.stderr)
    try:
        if http is not None:
            await http(name, server, arguments, store, tracing.stop if tracing is not None else None, scopes)
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
