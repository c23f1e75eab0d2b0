"""The serving fast path, behind a fence: the one runtime module that reaches into the SDK beyond its public API.

On the SDK versions it was tested on (`TESTED_SDK`) and when every hook it needs is there (`unavailable`), a
served generated server answers handshake-era `tools/call` here: on stdio, in a lane beside the SDK's own serving
pieces (`serve_session`); on any transport, with results serialized once (`FastToolCalls`). Anywhere else, the
server serves through the SDK's public API (`Server.run`, no middleware of ours): slower, the same answers
(tests/test_wire_fast_path.py and tests/test_stdio_transport.py run both paths), and its start-up says so once
(`_serving.fast_path_problem`). Nothing else imports this module: `_serving.py` imports it when it serves, inside a
guard, so an SDK that moved a module this one imports still serves. What it relies on beyond the documented
surface: `mcp.server.runner` (`ServerRunner`, `aclose_shielded`), `mcp.server.connection.Connection.for_loop`,
`mcp.shared.jsonrpc_dispatcher` (`JSONRPCDispatcher` and its private `_related_request_id=` keyword, three
helpers), the registered `HandlerEntry`'s `params_type` and `handler`, and copies of four private SDK routines
(`_serve_legacy_stream`, `ServerRunner._make_context`, `_settle_unanswered`, `_dump_result`). Over HTTP, one
more extension lives here for the same reason: `fair_sessions`, which bounds each client's sessions by
subclassing the SDK's session manager (on any other SDK it is off, and the start-up says so).

One stdio session: the SDK's own serving pieces, with handshake-era `tools/call` answered beside them.

`Server.run` passes every message through a stack of stages before a handler sees it: a relay task that replays
the first request (to choose the protocol era), the dispatcher's receive loop, a task per request started in its
task group, the ServerRunner's request context and its middleware chain, then a `JSONRPCResponse` built and sent.
Each stage costs a task switch or an allocation per call; for a tools/call they were most of the server's time
(measured over stdio). This module drives the same public pieces itself (`JSONRPCDispatcher`, `Connection`,
`ServerRunner`), so it holds the connection, and it takes one kind of request off the dispatcher's read loop:
`tools/call` on an initialized handshake-era connection, when the runtime's FastToolCalls is the only middleware.

Such a call is answered as the SDK answers it: in a task of its own (a slow call blocks no other; the transport's
`--max-in-flight` bound counts it like any request), through the SDK's request check, params model, request context
and `ServerSession` (so `ctx.session` notifications, progress, logging and server-to-client requests behave as on
the SDK's path), with the same result (`answer_tool_call`) and the same JSON-RPC errors. `notifications/cancelled`
stops it and it is not answered (the transport is told, as by the SDK); a call still running when the session ends
is answered CONNECTION_CLOSED, as the SDK answers its own. Everything else goes to the SDK untouched: the
handshake, every other method, a request before `initialize`, a 2026-07-28 connection (`Server.run` serves it), a
server with other middleware (`--otel`), cache hints. `tests/test_wire_fast_path.py` holds both paths to the same
bytes.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.models import InitializationOptions
from mcp.server.runner import ServerRunner, aclose_shielded
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import CallOptions, DispatchContext, coerce_request_id
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp.shared.message import MessageMetadata, ServerMessageMetadata, SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, PROTOCOL_VERSION_META_KEY
from mcp_types import methods as wire_methods
from mcp_types.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND
from pydantic import BaseModel, ValidationError

from ._stdio import Bypass

logger = logging.getLogger(__name__.rpartition(".")[0])

Inbound = SessionMessage | Exception
OPENING_LEAD_LIMIT = 8  # frames kept from before the first request, as the SDK keeps them
SHUTDOWN_WRITE_TIMEOUT = 1.0  # seconds the CONNECTION_CLOSED answer of a call cut off at the end may take


async def serve_session(
    server: Server[Any],
    read_stream: Any,
    write_stream: Any,
    options: InitializationOptions,
    bypass: Bypass | None = None,
) -> None:
    """Serve one connection over the (read, write) stream pair until the read side ends, as `server.run` would.
    With the transport's `bypass`, the lane takes its calls there, ahead of the read stream (one task switch less
    a call); without, from the read stream, in the dispatcher's order.

    The client's first request decides the era, as in the SDK: a request carrying the 2026-07-28 envelope opens a
    modern connection, served by `server.run` itself (it reads the first request again from the replay); anything
    else a handshake-era one, served here. Off asyncio (the lane's tasks are asyncio tasks) `server.run` serves."""
    opening, lead = await _opening_request(read_stream)
    if opening is None or _opens_modern(opening) or not _on_asyncio() or not sdk_has_lane_hooks():
        await server.run(Replayed(lead, read_stream), write_stream, options)
        return
    try:
        async with server.lifespan(server) as lifespan_state:
            read = Replayed(lead, read_stream)
            await _serve_handshake_era(server, read, write_stream, options, lifespan_state, bypass)
    finally:
        await write_stream.aclose()


async def _serve_handshake_era(
    server: Server[Any],
    read: Replayed,
    write_stream: Any,
    options: InitializationOptions,
    lifespan_state: Any,
    bypass: Bypass | None,
) -> None:
    """The SDK's handshake-era loop (its `_serve_legacy_stream`), with the lane reading in front of it."""
    # `initialize` inline, as the SDK has it: a request pipelined behind it sees the initialized state.
    dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
        read, write_stream, inline_methods=frozenset({"initialize"})
    )
    connection = Connection.for_loop(dispatcher)
    runner = ServerRunner(server, connection, lifespan_state, init_options=options)
    read.lane = lane = ToolCallLane(server, connection, lifespan_state, dispatcher, write_stream)
    if bypass is not None:
        bypass.took, read.routes = lane.took, False

    async def on_request(
        dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method != "initialize" and _has_modern_envelope(params):
            raise MCPError(
                code=INVALID_REQUEST,
                message="this connection serves the handshake protocol era; "
                "requests carrying the 2026-07-28 envelope are not accepted on it",
            )
        return await runner.on_request(dctx, method, params)

    try:
        await dispatcher.run(on_request, runner.on_notify)
    finally:
        if bypass is not None:
            bypass.took = None
        await aclose_shielded(connection)


async def _opening_request(read_stream: Any) -> tuple[types.JSONRPCRequest | None, list[Inbound]]:
    """The client's first request (None at EOF before one), and what to replay: up to OPENING_LEAD_LIMIT frames
    read before it, then the request itself."""
    lead: list[Inbound] = []
    try:
        async for item in read_stream:
            if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
                lead.append(item)
                return item.message, lead
            if len(lead) < OPENING_LEAD_LIMIT:
                lead.append(item)
            else:
                logger.debug("dropped a frame received before the first request: %r", item)
    except anyio.ClosedResourceError:  # the transport closed the stream: the same as EOF
        pass
    return None, lead


def _opens_modern(opening: types.JSONRPCRequest) -> bool:
    return opening.method != "initialize" and _has_modern_envelope(opening.params)


def _has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether `params._meta` holds the 2026-07-28 protocol-version key (the SDK's own test of the envelope)."""
    meta = params.get("_meta") if params else None
    return meta is not None and isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


# The mcp releases this module was tested on (tests/test_wire_fast_path.py holds it to the SDK's own path there).
TESTED_SDK: Final = frozenset({"2.3.0"})


def unavailable() -> str | None:
    """Why the fast path must not serve with the installed SDK (None: it may): a version it was not tested on, or
    a hook it needs that is gone."""
    problem = _untested()
    if problem is not None:
        return problem
    if not sdk_has_lane_hooks():
        return "the SDK's dispatcher no longer takes the _related_request_id keyword"
    return None


def _untested() -> str | None:
    """Why the installed SDK is not one this module was tested on (None: it is)."""
    try:
        installed = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return "the installed mcp has no version metadata"
    if installed not in TESTED_SDK:
        return f"mcp {installed} is not a version it was tested on ({', '.join(sorted(TESTED_SDK))})"
    return None


def sdk_has_lane_hooks() -> bool:
    """Whether the installed SDK still has what the lane relies on beyond its documented surface: the dispatcher's
    `_related_request_id` keyword (so a call's notifications and requests are tied to it, as the SDK ties them).
    The lane is held byte for byte to the SDK's path on the SDK this runtime was built against
    (tests/test_wire_fast_path.py); on an SDK that changed those, `server.run` serves, slower and certainly right."""
    needed = "_related_request_id"
    return all(
        needed in inspect.signature(method).parameters
        for method in (JSONRPCDispatcher.notify, JSONRPCDispatcher.send_raw_request)
    )


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True


class Replayed:
    """The read stream the dispatcher reads: the frames read to choose the era, then the transport's stream, with
    every message shown to the lane first (`lane.took`, unless the transport's bypass shows it them: `routes`);
    what the lane answers, the dispatcher never sees. When the transport's stream ends (or this read is
    cancelled), the lane's calls still running are ended first, while the write stream is open for their answers."""

    def __init__(self, lead: list[Inbound], source: Any) -> None:
        self._lead = lead
        self._source = source
        self.lane: ToolCallLane | None = None
        self.routes = True

    async def receive(self) -> Inbound:
        if self._lead:
            return self._lead.pop(0)
        lane = self.lane
        while True:
            try:
                item: Inbound = await self._source.receive()
            except BaseException:  # EOF, the stream closed, or this read cancelled: the session is ending
                if lane is not None:
                    with anyio.CancelScope(shield=True):
                        await lane.close()
                raise
            if lane is None or not self.routes or not lane.took(item):
                return item

    def __aiter__(self) -> Replayed:
        return self

    async def __anext__(self) -> Inbound:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._source.aclose()

    async def __aenter__(self) -> Replayed:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# A message's transport facts, as the SDK's default builder makes them (frozen: one of each serves every call).
_DUPLEX = TransportContext(kind="jsonrpc", can_send_request=True)
_NO_REQUESTS = TransportContext(kind="jsonrpc", can_send_request=False)


class LaneContext:
    """The dispatch context of one lane call (the SDK's `DispatchContext`): its back-channel is the dispatcher's,
    for notifications, progress and server-to-client requests related to this request, until the call is done."""

    def __init__(
        self,
        dispatcher: JSONRPCDispatcher[TransportContext],
        request_id: types.RequestId,
        metadata: MessageMetadata,
        progress_token: types.ProgressToken | None,
    ) -> None:
        can_send = metadata.can_send_request if isinstance(metadata, ServerMessageMetadata) else True
        self.transport = _DUPLEX if can_send else _NO_REQUESTS
        self.cancelled = False  # the client sent notifications/cancelled for it
        self._cancel_requested: anyio.Event | None = None  # made when asked for (anyio.Event() costs a call's 3%)
        self._dispatcher = dispatcher
        self._request_id = request_id
        self._metadata = metadata
        self._progress_token = progress_token
        self._closed = False

    @property
    def cancel_requested(self) -> anyio.Event:
        """Set once the client cancels this request (the SDK's `DispatchContext.cancel_requested`)."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
            if self.cancelled:
                self._cancel_requested.set()
        return self._cancel_requested

    def cancel(self) -> None:
        self.cancelled = True
        if self._cancel_requested is not None:
            self._cancel_requested.set()

    @property
    def request_id(self) -> types.RequestId:
        return self._request_id

    @property
    def message_metadata(self) -> MessageMetadata:
        return self._metadata

    @property
    def can_send_request(self) -> bool:
        return self.transport.can_send_request and not self._closed

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if self._closed:
            logger.debug("dropped %s: its call is done", method)
            return
        await self._dispatcher.notify(method, params, opts, _related_request_id=self._request_id)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if not self.can_send_request:
            raise NoBackChannelError(method)
        return await self._dispatcher.send_raw_request(method, params, opts, _related_request_id=self._request_id)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    def close(self) -> None:
        self._closed = True


class LaneCall:
    """One call in the lane: its context and its task, which the client's cancellation interrupts.

    The SDK runs a request in a cancel scope and cancels the scope; the lane cancels the call's task instead
    (entering and leaving an anyio scope cost a call 3%), with the same effect on the handler: it is interrupted
    where it waits, or at its first wait if it had not begun, and the call is not answered. One difference: the
    task is interrupted once, where a cancelled scope interrupts every later wait too, so a handler that catches
    the cancellation and waits again (a clean-up) finishes that wait; it is not answered either way. Only a
    cancellation the lane delivered itself (`interrupted`) is taken back; the session's end cancels the task too,
    and that one goes on (the call is answered CONNECTION_CLOSED, unless the client had cancelled it)."""

    __slots__ = ("context", "interrupted", "running", "task")

    def __init__(self, context: LaneContext) -> None:
        self.context = context
        self.task: asyncio.Task[None] | None = None
        self.running = False  # its task began the call
        self.interrupted = False  # the client's cancellation was delivered to its task

    def interrupt(self) -> None:
        """Deliver the client's cancellation (once): at once if the call runs, else as it begins. Cancelling
        the running task itself interrupts it at its next wait, as entering a cancelled scope does."""
        task = self.task
        if self.running and not self.interrupted and task is not None and not task.done():
            self.interrupted = True
            task.cancel()


class ToolCallLane:
    """Handshake-era `tools/call` answered without the SDK's per-request stages (see the module docstring)."""

    def __init__(
        self,
        server: Server[Any],
        connection: Connection,
        lifespan_state: Any,
        dispatcher: JSONRPCDispatcher[TransportContext],
        write_stream: Any,
    ) -> None:
        self._server = server
        self._connection = connection
        self._lifespan_state = lifespan_state
        self._dispatcher = dispatcher
        self._write_stream = write_stream
        self._fast = next((m for m in server.middleware if isinstance(m, FastToolCalls)), None)
        self._calls: dict[types.RequestId, LaneCall] = {}  # running, by correlated id (the SDK's: "7" is 7)
        self._tasks: set[asyncio.Task[None]] = set()
        self._off = False
        self._closing = False  # the session is over: the calls' tasks are cancelled for good

    def took(self, item: Inbound) -> bool:
        """Whether the lane answers `item` (then nobody else may). A `notifications/cancelled` for a lane call
        cancels it, and still goes on to the SDK, which also passes it to the server's notification handling."""
        if not isinstance(item, SessionMessage):
            return False
        message = item.message
        if type(message) is types.JSONRPCNotification:
            if message.method == "notifications/cancelled":
                self._cancelled(cancelled_request_id_from_params(message.params))
            return False
        if type(message) is not types.JSONRPCRequest:
            return False
        if message.method == "initialize" and self._connection.client_params is not None:
            self._off = True  # initialized again: the version may change under calls read before the SDK sees it
        if message.method != "tools/call" or self._off or not self._serves(message):
            return False
        self._start(message, item.metadata)
        return True

    def _serves(self, request: types.JSONRPCRequest) -> bool:
        """Whether the SDK would run this tools/call exactly as the lane does: after `initialize`, at a version
        whose result FastToolCalls writes, with FastToolCalls the only middleware, no cache hint, a handler."""
        server, connection = self._server, self._connection
        middleware = server.middleware
        return (
            connection.client_params is not None
            and connection.protocol_version in FAST_RESULT_VERSIONS
            and len(middleware) == 1
            and middleware[0] is self._fast
            and server.cache_hints.get("tools/call") is None
            and not _has_modern_envelope(request.params)
            and server.get_request_handler("tools/call") is not None
        )

    def _start(self, request: types.JSONRPCRequest, metadata: MessageMetadata) -> None:
        context = LaneContext(self._dispatcher, request.id, metadata, progress_token_from_params(request.params))
        call = LaneCall(context)
        self._calls[coerce_request_id(request.id)] = call  # a reused id: the newest call is the one cancelled
        call.task = task = asyncio.get_running_loop().create_task(self._answer(request, call))
        self._tasks.add(task)  # it leaves the set itself as it ends (a done callback would cost a loop turn)

    def _cancelled(self, request_id: types.RequestId | None) -> None:
        call = self._calls.get(coerce_request_id(request_id)) if request_id is not None else None
        if call is not None:
            call.context.cancel()
            call.interrupt()

    async def close(self) -> None:
        """End the calls still running (the session is over): each is answered CONNECTION_CLOSED."""
        self._closing = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _answer(self, request: types.JSONRPCRequest, call: LaneCall) -> None:
        """Run the call and write its answer, as the SDK's dispatcher does for a request (`_handle_request`)."""
        try:
            await self._answered(request, call)
        finally:
            if call.task is not None:
                self._tasks.discard(call.task)

    async def _answered(self, request: types.JSONRPCRequest, call: LaneCall) -> None:
        context = call.context
        answering = False
        call.running = True
        if context.cancelled:  # the client cancelled it before its task began
            call.interrupt()
        try:
            try:
                result = await self._result(request, context)
            except asyncio.CancelledError:
                if not call.interrupted or self._closing:
                    raise
                _uncancel()  # the client's cancellation, delivered: done with
                result = {}  # not sent: the client cancelled the call
            finally:
                context.close()
                self._forget(request.id, call)  # from here on, the client's cancellation has no effect
            if not context.cancelled:
                answering = True
                await self._write(types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result))
        except asyncio.CancelledError:  # the session ended under the call
            if not answering and not context.cancelled:
                closed = types.ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
                with anyio.move_on_after(SHUTDOWN_WRITE_TIMEOUT, shield=True):
                    await self._write(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=closed))
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:  # as the SDK answers an exception it does not map (code 0, its text)
                logger.exception("handler for %r raised", request.method)
                error = types.ErrorData(code=0, message=str(exc))
            if not context.cancelled:
                answering = True
                await self._write(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error))
        if not answering:  # the client cancelled it: no answer, and the transport frees its slot
            await _settle_unanswered(context.message_metadata)

    async def _result(self, request: types.JSONRPCRequest, context: LaneContext) -> dict[str, Any]:
        """The request context the SDK's ServerRunner builds (`_make_context`), and the call answered in it."""
        params = request.params
        meta = _request_meta(params)
        metadata = context.message_metadata
        served = metadata if isinstance(metadata, ServerMessageMetadata) else ServerMessageMetadata()
        version = self._connection.protocol_version
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(context, self._connection, request_meta=meta),
            lifespan_context=self._lifespan_state,
            method=request.method,
            params=params,
            request_id=request.id,
            meta=meta,
            protocol_version=version,
            request=served.request_context,
            close_sse_stream=served.close_sse_stream,
            close_standalone_sse_stream=served.close_standalone_sse_stream,
        )
        entry = self._server.get_request_handler(request.method)
        return await answer_tool_call(entry, ctx, version)

    def _forget(self, request_id: types.RequestId, call: LaneCall) -> None:
        key = coerce_request_id(request_id)
        if self._calls.get(key) is call:  # not a newer call that reused the id
            del self._calls[key]

    async def _write(self, message: types.JSONRPCMessage) -> None:
        try:
            await self._write_stream.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped the answer to a tools/call: the write stream is closed")


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _request_meta(params: Mapping[str, Any] | None) -> types.RequestParamsMeta | None:
    """The request's `_meta` as the SDK reads it for the context: None when absent or malformed."""
    if not params or "_meta" not in params:
        return None
    try:
        return types.RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return None


async def _settle_unanswered(metadata: MessageMetadata) -> None:
    """The transport's hook for a request that settled with no answer (the SDK's `_settle_unanswered`)."""
    if not isinstance(metadata, ServerMessageMetadata) or metadata.on_request_unanswered is None:
        return
    try:
        await metadata.on_request_unanswered()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        logger.debug("on_request_unanswered dropped: connection closing")
    except Exception:
        logger.exception("on_request_unanswered hook raised")


# --- the wire: tools/call results serialized once ----------------------------------------------------------

# The protocol versions whose tools/call result surface keeps every field `tool_result_wire` writes, exactly:
# the handshake era. 2026-07-28 results carry `resultType` and the `serverInfo` stamp, which the SDK adds.
FAST_RESULT_VERSIONS: Final = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})


def tool_result_wire(result: types.CallToolResult) -> dict[str, Any] | None:
    """The wire dict the SDK would send for `result` at a handshake-era version (its `model_dump`, then the
    per-version result check and its dump: keys in the surface's order, nothing None), written directly, or None
    when `result` holds anything this does not know (another content type, `_meta`, other annotations): then
    the SDK's own serialization runs. Every result the runtime builds is text blocks, structuredContent and
    isError; tests hold this to the SDK's output for each of them and each version."""
    if type(result) is not types.CallToolResult or result.meta is not None:
        return None
    content: list[dict[str, Any]] = []
    for block in result.content:
        if type(block) is not types.TextContent or block.meta is not None or type(block.text) is not str:
            return None
        annotations = block.annotations
        if annotations is None:
            content.append({"text": block.text, "type": "text"})
        elif annotations.priority is None and annotations.last_modified is None and annotations.audience:
            audience = {"audience": list(annotations.audience)}
            content.append({"annotations": audience, "text": block.text, "type": "text"})
        else:
            return None
    if type(result.is_error) is not bool:
        return None
    wire: dict[str, Any] = {"content": content, "isError": result.is_error}
    structured = result.structured_content
    if structured is not None:
        if type(structured) is not dict:
            return None
        wire["structuredContent"] = structured
    return wire


class FastToolCalls:
    """Server middleware (`Server.middleware`, the SDK's extension point) that answers `tools/call` on a
    handshake-era connection without the work the SDK repeats on a result the runtime built itself: its
    `model_dump`, then the per-version result check, which validates that dump again and dumps it again.

    Everything else the SDK does for the call is done here the same way, with the SDK's own functions: the
    per-version request check, the params model, the handler, an ErrorData raised as an error. Whatever is not
    certain takes the SDK's path untouched (`call_next`): another method, a 2026-07-28 connection (its results
    carry more), a connection not initialized (the SDK's gate answers), cache hints. A result
    `tool_result_wire` does not know is serialized as the SDK serializes it."""

    def __init__(self, server: Any) -> None:
        self._server = server

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        method, version, session = ctx.method, ctx.protocol_version, ctx.session
        if (
            method != "tools/call"
            or version not in FAST_RESULT_VERSIONS
            or session is None
            or session.client_params is None
            or self._server.cache_hints.get(method) is not None
            or (entry := self._server.get_request_handler(method)) is None
        ):
            return await call_next(ctx)
        return await answer_tool_call(entry, ctx, version)


async def answer_tool_call(entry: Any, ctx: Any, version: str) -> dict[str, Any]:
    """The wire result of a handshake-era `tools/call` on an initialized connection (`entry`: the server's
    registered handler): what the SDK's ServerRunner does for it, with the SDK's own functions (the per-version
    request check, the params model, the handler, an ErrorData raised as an error), and the result written once
    by `tool_result_wire` when it knows it, else serialized as the SDK serializes it. FastToolCalls and the stdio
    session's tool-call lane (`_session.py`) both answer through this."""
    method, params = ctx.method, ctx.params
    try:
        wire_methods.validate_client_request(method, version, params)
    except KeyError:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method) from None
    typed = entry.params_type.model_validate({} if params is None else params, by_name=False)
    result = await entry.handler(ctx, typed)
    if isinstance(result, types.ErrorData):
        raise MCPError.from_error_data(result)
    if isinstance(result, types.CallToolResult) and (wire := tool_result_wire(result)) is not None:
        return wire
    return sdk_result_wire(method, version, result)


def sdk_result_wire(method: str, version: str, result: object) -> dict[str, Any]:
    """A handshake-era result as the SDK's ServerRunner serializes it (its `_dump_result`, then the per-version
    result check; an invalid result is the SDK's INTERNAL_ERROR)."""
    if result is None:
        dumped: dict[str, Any] = {}
    elif isinstance(result, BaseModel):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif isinstance(result, dict):
        dumped = dict(result)
    else:
        raise TypeError(f"handler returned {type(result).__name__}; expected BaseModel, dict, or None")
    try:
        return wire_methods.serialize_server_result(method, version, dumped)
    except ValidationError:
        logger.exception("handler for %r returned an invalid result", method)
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None


def fair_sessions(
    server: Server[Any], per_client: int, client_of: Callable[[Any], str], evicted: Callable[[str, str], None]
) -> str | None:
    """Bound the sessions of each client, and keep new clients served while one floods.

    The SDK's session manager refuses every new session (`503 Too many open sessions`) once `max_sessions` are
    open, whoever holds them: 10,050 `initialize` requests that never end their sessions locked every other client
    out for the idle timeout. Here (the manager's class replaced by a subclass: its admission is the SDK's own):

    * a client is its authenticated subject (with --auth), else its peer address;
    * a client at `per_client` sessions that opens another closes its own least recently used one;
    * at `max_sessions`, a new session closes the least recently used session of the client holding the most,
      instead of being refused: a flood only ever evicts the flooder's sessions while others hold fewer.

    A closed session's id then gets 404, as after its idle timeout, and its client opens a new one (the MCP
    spec's answer to 404). Sessions are ordered by their last request. `client_of(scope)` names a request's
    client; `evicted(session, why)` is told each session closed to make room.

    It extends the SDK's session manager beyond its documented surface (`Server._session_manager`, the manager's
    `_handle_stateful_request`, `_admit_session`, `_discard_session` and `_server_instances`), so it runs only on
    the SDK versions this module was tested on with those there; else it changes nothing and says why (the SDK's
    own admission then applies: `max_sessions`, then 503)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager: Any = getattr(server, "_session_manager", None)
    problem = _untested() or _session_hooks_missing(manager, StreamableHTTPSessionManager)
    if problem is not None:
        return problem

    opening: ContextVar[str] = ContextVar("fusiongen_opening_client", default="")

    class FairSessions(StreamableHTTPSessionManager):
        def setup(self) -> None:
            self.per_client = per_client
            self.client_of: dict[str, str] = {}  # session id → its client
            self.by_client: dict[str, OrderedDict[str, None]] = {}  # client → its sessions, least recent first

        async def _handle_stateful_request(self, scope: Any, receive: Any, send: Any) -> None:
            session = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"mcp-session-id"), None)
            if session is not None:
                client = self.client_of.get(session)
                if client is not None:
                    self.by_client[client].move_to_end(session)
                await super()._handle_stateful_request(scope, receive, send)
                return
            client = client_of(scope)
            await self.make_room(client)
            token = opening.set(client)
            try:
                await super()._handle_stateful_request(scope, receive, send)
            finally:
                opening.reset(token)

        def _admit_session(self, requestor: Any) -> Any:
            transport = super()._admit_session(requestor)
            session = getattr(transport, "mcp_session_id", None)
            if isinstance(session, str):
                client = opening.get()
                self.client_of[session] = client
                self.by_client.setdefault(client, OrderedDict())[session] = None
            return transport

        async def _discard_session(self, session_id: str, transport: Any) -> None:
            self.forget(session_id)
            await super()._discard_session(session_id, transport)

        def forget(self, session: str) -> None:
            client = self.client_of.pop(session, None)
            sessions = self.by_client.get(client) if client is not None else None
            if sessions is not None:
                sessions.pop(session, None)
                if not sessions:
                    del self.by_client[client]  # type: ignore[arg-type]

        async def make_room(self, client: str) -> None:
            mine = self.by_client.get(client)
            if mine is not None and len(mine) >= self.per_client:
                await self.evict(next(iter(mine)), "its client holds --max-sessions-per-client sessions")
            if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions and self.by_client:
                heaviest = max(self.by_client.values(), key=len)
                await self.evict(next(iter(heaviest)), "--max-sessions are open; its client holds the most")

        async def evict(self, session: str, why: str) -> None:
            transport = self._server_instances.get(session)
            self.forget(session)
            if transport is not None:
                evicted(session, why)
                await self._discard_session(session, transport)

    manager.__class__ = FairSessions
    manager.setup()
    return None


_SESSION_HOOKS: Final = ("_handle_stateful_request", "_admit_session", "_discard_session")


def _session_hooks_missing(manager: Any, manager_class: type) -> str | None:
    """What `fair_sessions` needs of the SDK's session manager that is not there (None: all of it)."""
    if not isinstance(manager, manager_class):
        return "the server holds no streamable HTTP session manager where the SDK kept it (_session_manager)"
    for hook in _SESSION_HOOKS:
        if not callable(getattr(manager_class, hook, None)):
            return f"the SDK's session manager has no {hook}"
    if not isinstance(getattr(manager, "_server_instances", None), dict):
        return "the SDK's session manager keeps no _server_instances"
    return None
