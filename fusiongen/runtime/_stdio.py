"""stdio without threads: the MCP wire on the process's stdin and stdout, read and written by the event loop, with
at most `--max-in-flight` requests read and not yet answered.

Why not the SDK's `stdio_server` alone: it hops every line read and every write through a worker thread (the loop
spent most of its time waking threads), nothing can interrupt its blocking read of stdin (a signal could only end
the process with `os._exit`), and it reads ahead without bound (10k pipelined requests were all parsed and queued:
RSS 67 → 244 MB). This transport yields the same (read_stream, write_stream) pair `Server.run` takes and frames
lines as the SDK does: UTF-8 with undecodable bytes replaced, `\\n`, `\\r\\n` and `\\r` all end a line, a line that
is not JSON-RPC is handed on as the exception (the server logs it at debug and answers nothing). Unlike the SDK,
a line longer than `max_line` bytes is skipped with a warning (the SDK has no bound), and at EOF the requests
already read are answered before the session ends (the SDK cancels those still running).

The event loop can only watch pipes and sockets; when stdin or stdout is anything else (a regular file, a tty,
/dev/null) the SDK's threaded transport is used, with the same bound on requests in flight.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata, SessionMessage

if sys.platform != "win32":  # Windows always gets the SDK's transport (stdio_is_pipes)
    import fcntl

try:
    import orjson
except ImportError:  # orjson is optional (the `fast` extra): pydantic writes the same JSON, slower
    orjson = None  # type: ignore[assignment]

logger = logging.getLogger(__name__.rpartition(".")[0])

READ_AHEAD = 64 * 1024  # bytes of stdin held beyond the line being parsed: past that, reading pauses
EOF_DRAIN_TIMEOUT = 30.0  # seconds at most to finish the requests read before EOF (one may wait on the client)

Inbound = SessionMessage | Exception
StreamPair = tuple[MemoryObjectReceiveStream[Inbound], "PipeWriteStream | MemoryObjectSendStream[SessionMessage]"]


class InFlight:
    """The requests read and not yet answered, at most `limit` of them. A request leaves when its response or
    error is written (same id) or when the SDK settles it unanswered (the client cancelled it: the SDK then sends
    nothing, and calls the `on_request_unanswered` hook attached here). Notifications and the client's responses
    to the server's own requests never count."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._ids: dict[types.RequestId, int] = {}  # a client may reuse an id: each request counts
        self._settled = anyio.Event()
        self._waiting = 0  # tasks waiting for a settlement (setting the event costs a call's 0.5%: only then)

    async def admit(self, item: SessionMessage, request_id: types.RequestId) -> SessionMessage:
        """The request `item` once a slot is free, with the hook that frees the slot if it goes unanswered."""
        while self.count >= self.limit:
            await self._next_settlement()
        return self.admitted(item, request_id)

    def admitted(self, item: SessionMessage, request_id: types.RequestId) -> SessionMessage:
        """`item` holding a slot, which must be free (`count < limit`)."""
        self.count += 1
        self._ids[request_id] = self._ids.get(request_id, 0) + 1
        return SessionMessage(
            item.message, metadata=ServerMessageMetadata(on_request_unanswered=partial(self._unanswered, request_id))
        )

    def unadmitted(self, request_id: types.RequestId) -> None:
        """Give back the slot `admitted` just took, as if it had not been taken (nothing waits on it yet)."""
        self.count -= 1
        _decrement(self._ids, request_id)

    def answered(self, message: types.JSONRPCMessage) -> None:
        """Called for every message written: a response or error frees its request's slot."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._settle(message.id)

    async def drained(self) -> None:
        while self.count:
            await self._next_settlement()

    async def _unanswered(self, request_id: types.RequestId) -> None:
        self._settle(request_id)

    def _settle(self, request_id: types.RequestId) -> None:
        left = self._ids.get(request_id)
        if left is None:  # not a request of the client's (or already settled)
            return
        if left == 1:
            del self._ids[request_id]
        else:
            self._ids[request_id] = left - 1
        self.count -= 1
        if self._waiting:
            self._settled.set()

    async def _next_settlement(self) -> None:
        self._settled = anyio.Event()
        self._waiting += 1
        try:
            await self._settled.wait()
        finally:
            self._waiting -= 1


class Bypass:
    """Who answers some requests before they reach the server's read stream: `took(item)` is shown every request
    once it holds a slot, and every `notifications/cancelled`, and says whether it answers that request itself (it
    is then not passed on; its answer or its settling frees the slot as for any request). The stdio session's
    tool-call lane installs itself here (`_session.py`), saving each call the hop through the read stream."""

    def __init__(self) -> None:
        self.took: Callable[[SessionMessage], bool] | None = None

    def passes(self, item: SessionMessage) -> bool:
        took = self.took
        return took is None or not took(item)


async def admit_all(
    items: AsyncIterator[Inbound],
    send: MemoryObjectSendStream[Inbound],
    gate: InFlight,
    bypass: Bypass | None = None,
    early: EarlyRoute | None = None,
) -> None:
    """What the client sends, to the server, with at most `gate.limit` requests in flight.

    A request waits for a slot; behind it, up to `gate.limit` more messages are read and queued, in order; once the
    queue is full nothing more is read (so the pipe fills and the client's writes block). Two kinds of message
    skip the queue, because a handler may be waiting for them: the client's responses to the server's requests,
    and `notifications/cancelled` (for a queued request it removes that request, which then gets no answer, as a
    cancelled request gets none; for a running one it goes to the SDK, which stops the handler and frees the slot).
    At the end of `items` (EOF), the requests already read are answered before the read stream closes (bounded:
    one may be waiting for the client, who can no longer answer), since closing it cancels them. A request that
    holds its slot goes to `bypass` first, which may answer it instead.

    While this runs, `early.taken` says, for a request, whether the bypass took it at once, as this loop would
    take it were it the next item read (the pipe reader asks it before waking the reading task, see LineReader)."""
    bypass = bypass if bypass is not None else Bypass()
    queue_send, queue_receive = anyio.create_memory_object_stream[Inbound](gate.limit)
    queued: dict[types.RequestId, int] = {}  # requests in the queue, by correlated id
    withdrawn: dict[types.RequestId, int] = {}  # of those, how many the client cancelled
    forwarding = False  # the forwarder took an item off the queue and has not passed it on yet
    in_queue = 0  # items sent to the queue and not yet taken off it (its statistics() cost a call's 0.5%)

    async def forward_queued(send: MemoryObjectSendStream[Inbound]) -> None:
        nonlocal forwarding, in_queue
        async with queue_receive, send:
            async for item in queue_receive:
                forwarding = True
                in_queue -= 1
                try:
                    if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
                        key = correlated_id(item.message.id)
                        _decrement(queued, key)
                        if withdrawn.get(key):
                            _decrement(withdrawn, key)
                            continue
                        item = await gate.admit(item, item.message.id)
                        if not bypass.passes(item):
                            continue
                    await send.send(item)
                finally:
                    forwarding = False
            with anyio.move_on_after(EOF_DRAIN_TIMEOUT):
                await gate.drained()

    def nothing_waits() -> bool:
        """Whether an item can skip the queue without passing anything read before it: the usual case, where
        the queue is empty, so the hop through it (a task switch per request) would only cost time."""
        return not forwarding and in_queue == 0

    async def enqueue(item: Inbound) -> None:
        nonlocal in_queue
        in_queue += 1  # counted before it is in: only the reading task sends, and it waits here meanwhile
        try:
            await queue_send.send(item)
        except BaseException:
            in_queue -= 1
            raise

    def taken_at_once(item: Inbound) -> bool:
        """Whether the request `item` could hold a slot now, without waiting or passing anything read before it,
        and the bypass took it (then it is done with); else nothing changed."""
        if not isinstance(item, SessionMessage) or not isinstance(item.message, types.JSONRPCRequest):
            return False
        if bypass.took is None or not nothing_waits() or gate.count >= gate.limit:
            return False
        request_id = item.message.id
        if bypass.passes(gate.admitted(item, request_id)):
            gate.unadmitted(request_id)
            return False
        return True

    async with anyio.create_task_group() as group:
        group.start_soon(forward_queued, send.clone())
        async with queue_send, send:
            if early is not None:
                early.taken = taken_at_once
            try:
                async for item in items:
                    message = item.message if isinstance(item, SessionMessage) else None
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        await send.send(item)
                    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                        params = message.params if isinstance(message.params, dict) else {}
                        key = correlated(params.get("requestId"))
                        if key is not None and queued.get(key, 0) > withdrawn.get(key, 0):
                            withdrawn[key] = withdrawn.get(key, 0) + 1
                        elif bypass.passes(cast(SessionMessage, item)):
                            await send.send(item)
                    elif isinstance(message, types.JSONRPCRequest):
                        if nothing_waits() and gate.count < gate.limit:
                            admitted = gate.admitted(cast(SessionMessage, item), message.id)
                            if bypass.passes(admitted):
                                await send.send(admitted)
                            continue
                        key = correlated_id(message.id)
                        queued[key] = queued.get(key, 0) + 1
                        await enqueue(item)
                    elif nothing_waits():
                        await send.send(item)
                    else:
                        await enqueue(item)
            finally:
                if early is not None:
                    early.taken = None


def correlated(value: object) -> types.RequestId | None:
    """A `requestId` as the SDK correlates ids; anything but a string or an integer is none."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return correlated_id(value)


def correlated_id(request_id: types.RequestId) -> types.RequestId:
    """As the SDK correlates ids: "7" and 7 are one."""
    if isinstance(request_id, str):
        with suppress(ValueError):
            return int(request_id)
    return request_id


def _decrement(counts: dict[types.RequestId, int], key: types.RequestId) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


# --- framing ------------------------------------------------------------------------------------------


def parsed_lines(line: bytes | bytearray) -> list[Inbound]:
    """What one `\\n`-terminated line of stdin holds for the server, framed as the SDK frames it: decoded with
    undecodable bytes replaced; a lone `\\r` also ends a line (universal newlines); each piece is a message or,
    if it is not JSON-RPC, the validation error."""
    text = line.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-1]
    if "\r" not in text:
        return [_parsed(text)]
    if text.endswith("\r"):
        text = text[:-1]
    return [_parsed(piece) for piece in text.split("\r")]


def _parsed(text: str) -> Inbound:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except Exception as exc:
        return exc


def encoded(message: SessionMessage) -> bytes:
    """One line of the wire. A response (the hot path: its `result` is already the SDK's wire dict, plain JSON
    values) is written by orjson when installed, the same text as pydantic's; anything orjson refuses (an
    integer beyond 64 bits, a lone surrogate) and every other message goes through pydantic, as before."""
    wire = message.message
    if orjson is not None and type(wire) is types.JSONRPCResponse:
        try:
            return orjson.dumps(
                {"jsonrpc": wire.jsonrpc, "id": wire.id, "result": wire.result}, option=orjson.OPT_APPEND_NEWLINE
            )
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return wire.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


# --- the transport ------------------------------------------------------------------------------------


def stdio_is_pipes() -> bool:
    """Whether the event loop can watch stdin and stdout: both pipes or sockets, on asyncio outside Windows."""
    if sys.platform == "win32":
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return all(_watchable(fd) for fd in (0, 1))


def _watchable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def stdio_streams(max_in_flight: int, max_line: int, bypass: Bypass | None = None) -> AsyncIterator[StreamPair]:
    """The (read_stream, write_stream) pair for `Server.run` on this process's stdin and stdout; requests that
    `bypass` takes never reach the read stream."""
    gate = InFlight(max_in_flight)
    bypass = bypass if bypass is not None else Bypass()
    if stdio_is_pipes():
        async with _pipe_streams(gate, max_line, bypass) as streams:
            yield streams
        return
    logger.info("stdio: stdin or stdout is not a pipe or socket; using the SDK's threaded transport")
    async with stdio_server() as (read, write), _relayed(read, write, gate, bypass) as streams:
        yield streams


@asynccontextmanager
async def _pipe_streams(gate: InFlight, max_line: int, bypass: Bypass) -> AsyncIterator[StreamPair]:
    # Like the SDK: while serving, fd 0 reads /dev/null and fd 1 writes to stderr, so a handler's print() or a
    # child process cannot corrupt the wire; the wire is served from private duplicates and restored after.
    wire_in = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
    try:
        wire_out = _claim(1, lambda: os.dup(2))
    except BaseException:
        _restore(0, wire_in)
        os.close(wire_in)
        raise
    loop = asyncio.get_running_loop()
    early = EarlyRoute()
    reader, writer = LineReader(max_line, early), PipeWriter()
    transports: list[asyncio.BaseTransport] = []
    try:
        # The transports close their own duplicates (the read one at EOF); wire_in and wire_out restore fd 0 and 1.
        read_pipe, write_pipe = _duplicate(wire_in, "r"), _duplicate(wire_out, "w")
        transports.append((await loop.connect_read_pipe(lambda: reader, read_pipe))[0])
        write_transport = (await loop.connect_write_pipe(lambda: writer, write_pipe))[0]
        transports.append(write_transport)
        read_send, read_receive = anyio.create_memory_object_stream[Inbound](0)
        reading = anyio.CancelScope()
        write_stream = PipeWriteStream(writer, write_transport, gate, reading)
        async with anyio.create_task_group() as group:
            group.start_soon(_read_stdin, reader, read_send, gate, reading, bypass, early)
            try:
                yield read_receive, write_stream
            finally:
                # The session is over: read no more, accept no more messages to write.
                reading.cancel()
                write_stream.close()
                read_receive.close()
    finally:
        _restore(0, wire_in)
        _restore(1, wire_out)
        os.close(wire_in)
        os.close(wire_out)
        for transport in transports:
            transport.close()
        for fd in (0, 1):  # the loop made the shared open file descriptions non-blocking
            _set_blocking(fd)


def _claim(fd: int, diversion: Callable[[], int]) -> int:
    """A private duplicate of `fd` (above the standard range), with `fd` itself pointed at `diversion()`."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        replacement = diversion()
        try:
            os.dup2(replacement, fd)
        finally:
            os.close(replacement)
    except BaseException:
        os.close(private)
        raise
    return private


def _duplicate(fd: int, mode: str) -> io.FileIO:
    return io.FileIO(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3), mode)


def _restore(fd: int, private: int) -> None:
    try:
        os.dup2(private, fd)
    except OSError:
        logger.warning("stdio: could not restore fd %d", fd)


def _set_blocking(fd: int) -> None:
    with suppress(OSError):
        os.set_blocking(fd, True)


async def _read_stdin(
    reader: LineReader,
    send: MemoryObjectSendStream[Inbound],
    gate: InFlight,
    reading: anyio.CancelScope,
    bypass: Bypass,
    early: EarlyRoute,
) -> None:
    with reading, suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await admit_all(_stdin_items(reader), send, gate, bypass, early)


async def _stdin_items(reader: LineReader) -> AsyncIterator[Inbound]:
    while (items := await reader.next_items()) is not None:
        for item in items:
            yield item


class PipeWriteStream:
    """The write stream `Server.run` sends to: each message is encoded and handed to the pipe transport by the
    task that sends it, with no writer task and no memory stream between (each hop cost a task switch per
    response). While the pipe is full, senders wait before adding more; one task's messages stay in order
    (it awaits each send), and a line is never interleaved with another (the transport's write is one call).
    If the client closed its end, serving ends (reading stops, so the read stream closes) and what is left is
    dropped. After `aclose`, `send` raises `ClosedResourceError`, as a closed memory stream does."""

    def __init__(
        self, writer: PipeWriter, transport: asyncio.WriteTransport, gate: InFlight, reading: anyio.CancelScope
    ) -> None:
        self._writer = writer
        self._transport = transport
        self._gate = gate
        self._reading = reading
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        self._gate.answered(item.message)
        if self._writer.must_wait:  # the usual case is not: no coroutine to make and await
            try:
                await self._writer.drain()
            except ConnectionError:
                self._stdout_closed()
                return
        self._transport.write(encoded(item))
        if self._writer.lost:
            self._stdout_closed()

    def _stdout_closed(self) -> None:
        if not self._reading.cancel_called:
            logger.warning("stdio: stdout is closed; ending the session")
            self._reading.cancel()

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> PipeWriteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class EarlyRoute:
    """How the pipe reader hands a request straight to the bypass: `taken(item)`, set by `admit_all` while it
    reads, says whether the bypass took the request at once, exactly as `admit_all` would were it the next item
    it read; when not, nothing changed and the item goes to `admit_all` as usual."""

    def __init__(self) -> None:
        self.taken: Callable[[Inbound], bool] | None = None


class LineReader(asyncio.Protocol):
    """stdin as lines. Holds at most READ_AHEAD bytes beyond the line being assembled, then pauses reading (the
    pipe fills, the client blocks), and at most `max_line` bytes of one line: a longer line is dropped as it
    arrives, up to its newline, with a warning (it cannot be answered: its id is in the part not parsed).

    When bytes arrive while the reading task waits for them (it has handled everything read before), the whole
    lines among them are parsed here and offered to `early` in order, up to the first one it does not take; that
    one and the rest are left to the reading task, in order. The usual call (one line, a tool call the lane
    answers) then costs no wake-up of the reading task: it is the same work, done one task step sooner."""

    def __init__(self, max_line: int, early: EarlyRoute | None = None) -> None:
        self.max_line = max_line
        self.early = early
        self._buffer = bytearray()
        self._scanned = 0  # bytes at the start of the buffer known to hold no newline
        self._skipping = False  # inside a line longer than max_line
        self._eof = False
        self._paused = False
        self._held: list[Inbound] = []  # parsed early and not taken: the reading task's next items
        self._failure: BaseException | None = None  # raised by `early`: the reading task raises it
        self._transport: asyncio.ReadTransport | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        taken = self.early.taken if self.early is not None else None
        if taken is not None and self._routable() and not self._routed_early(taken):
            return  # every whole line was taken; the reading task has nothing new to look at
        if len(self._buffer) > READ_AHEAD and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def _routed_early(self, taken: Callable[[Inbound], bool]) -> bool:
        """Offer the whole lines in the buffer to `taken`; whether anything is left for the reading task."""
        buffer, start, left = self._buffer, 0, True
        try:
            while True:
                end = buffer.find(b"\n", start)
                if end < 0:
                    left = len(buffer) - start > self.max_line or len(buffer) - start > READ_AHEAD
                    break
                if end - start > self.max_line:  # the reading task skips it, with the warning
                    break
                items = parsed_lines(buffer[start : end + 1])
                start = end + 1
                for index, item in enumerate(items):
                    if not taken(item):
                        self._held = items[index:]
                        return True
        except BaseException as exc:  # the reading task raises it, as when it had parsed this line itself
            self._failure = exc
            return True
        finally:
            del buffer[:start]
            self._scanned = 0
        return left

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._wake()

    async def next_items(self) -> list[Inbound] | None:
        """What the next line holds for the server (`parsed_lines`), the items left by the early route first;
        None after the last line."""
        while True:
            if self._failure is not None:
                raise self._failure
            if self._held:
                held, self._held = self._held, []
                return held
            line = self._next_line()
            if line is None:
                return None
            if line:
                return parsed_lines(line)
            self._resume()
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _next_line(self) -> bytes | None:
        """The next line with its newline; at EOF the last one without it if it has none, then None; b"" while
        the buffer holds no whole line."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._scanned = 0
                if len(self._buffer) <= READ_AHEAD:
                    self._resume()
                if self._skipping:
                    self._skipping = False
                elif end > self.max_line:
                    self._too_long()
                else:
                    return line
                continue
            self._scanned = len(self._buffer)
            if self._scanned > self.max_line:
                if not self._skipping:
                    self._too_long()
                self._skipping = True
                self._buffer.clear()
                self._scanned = 0
            if self._eof:
                rest = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                if self._skipping or not rest:
                    return None
                return rest
            return b""

    def _too_long(self) -> None:
        logger.warning(
            "stdio: skipped a line longer than %d bytes (--max-request-body); it gets no answer", self.max_line
        )

    def _resume(self) -> None:
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def _routable(self) -> bool:
        """Whether new lines may take the early route: the reading task waits for bytes (so it has handled
        everything read before) and is not inside a line too long to keep."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._skipping and self._failure is None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class PipeWriter(asyncio.Protocol):
    """stdout's flow control: `drain` waits while the transport's buffer is above its high-water mark."""

    def __init__(self) -> None:
        self.lost = False
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []  # every task waiting to write

    @property
    def must_wait(self) -> bool:
        """Whether `drain` has anything to do: the pipe is full or closed."""
        return self._paused or self.lost

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()

    async def drain(self) -> None:
        """Return once the pipe takes more (at once when it is not full); BrokenPipeError once it is closed."""
        while self._paused and not self.lost:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        if self.lost:
            raise BrokenPipeError("stdout is closed")

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)


@asynccontextmanager
async def _relayed(read: Any, write: Any, gate: InFlight, bypass: Bypass) -> AsyncIterator[StreamPair]:
    """The SDK transport's streams behind the same gate: a request is passed on once a slot is free; until then
    the SDK's reader thread waits to hand its line over, so it reads no further."""
    read_send, read_receive = anyio.create_memory_object_stream[Inbound](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    reading = anyio.CancelScope()

    async def inbound() -> None:
        with reading, suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await admit_all(read, read_send, gate, bypass)

    async def outbound() -> None:
        async with write_receive, write:
            async for message in write_receive:
                gate.answered(message.message)
                await write.send(message)

    async with anyio.create_task_group() as group:
        group.start_soon(inbound)
        group.start_soon(outbound)
        try:
            yield read_receive, write_send
        finally:
            reading.cancel()
            write_send.close()
            read_receive.close()
