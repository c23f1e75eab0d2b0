"""The serving fast path (FastToolCalls, `encoded` with orjson) sends exactly what the SDK's own path sends.

A served generated server answers `tools/call` on a handshake-era connection without the SDK's `model_dump` and
per-version result check (`tool_result_wire` writes the wire dict itself) and writes responses with orjson. These
tests drive the same generated server over raw JSON-RPC twice, once as the SDK serves it and once with the serving
middleware installed, and require the same response bytes for every call: results of every kind the runtime
builds (presented item and collection, text, errors, validation errors), invalid params, unknown tools, calls
before `initialize`, at every handshake-era version. Runs in-process over memory streams: no timing, no sockets.

The stdio session's tool-call lane (`_fast_path.py`) answers handshake-era tools/call without the SDK's per-request
stages; `Wire` drives a session as the stdio transport does (its admission gate and bypass, then `serve_session`)
and the same scripts run on the SDK's path, requiring the same bytes in the same order: every call kind at every
handshake-era version, calls the lane must leave to the SDK, a slow call beside fast ones, a cancelled call (no
answer, its slot freed), progress and log notifications from a handler, a server-to-client request (ping) and
its answer, a workflow transition's list_changed, the drain at EOF and the CONNECTION_CLOSED answer when the
session ends under a call.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.models import InitializationOptions
from mcp.shared.message import SessionMessage
from mcp_types import methods as wire_methods

from tests.support.build import SPECS, GeneratedServer, built_server

pytestmark = pytest.mark.anyio

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# (tool, arguments) or a raw params object: every outcome the billing spec's tools can have.
CALLS: list[dict[str, Any]] = [
    {"name": "invoice_get", "arguments": {"id": "inv-1"}},  # presented item: UI blocks, rules, suggestions
    {"name": "invoice_get", "arguments": {"id": "nope"}},  # the handler's ToolError
    {"name": "invoice_get", "arguments": {"id": 7}},  # a validation error result
    {"name": "invoice_get", "arguments": {}},  # a required argument missing
    {"name": "invoice_list", "arguments": {"limit": 1}},  # presented collection, truncated
    {"name": "invoice_list", "arguments": {"status": "paid"}},  # a collection, maybe empty
    {"name": "customer_get", "arguments": {"id": "c-1"}},
    {"name": "invoice_submit", "arguments": {"id": "inv-1"}},  # workflow-gated
    {"name": "no_such_tool", "arguments": {}},  # an MCPError
    {"name": "invoice_get"},  # no arguments at all
    {"name": "invoice_get", "arguments": "not an object"},  # invalid params: the SDK's INVALID_PARAMS
    {"arguments": {}},  # no name
]


@pytest.fixture(scope="module")
def billing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with built_server(SPECS / "billing.toml", tmp_path_factory.mktemp("fast-path") / "out") as server:
        yield server


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(version: str) -> list[dict[str, Any]]:
    client = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return [request(0, "initialize", client), {"jsonrpc": "2.0", "method": "notifications/initialized"}]


async def exchange(server: Any, messages: list[dict[str, Any]], encode: Any) -> list[bytes]:
    """Send `messages` to `server` (its `run` over memory streams), one at a time, each request answered before
    the next is sent; what the server sent (answers and notifications) as the stdio transport writes it
    (`encode`)."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](len(messages))
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    options: InitializationOptions = server.create_initialization_options()
    answers: list[bytes] = []
    async with anyio.create_task_group() as group:
        group.start_soon(server.run, server_reads, server_writes, options)
        async with to_server, from_server:
            for message in messages:
                parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
                await to_server.send(SessionMessage(parsed))
                while "id" in message:  # until its answer; notifications sent before it are kept too
                    with anyio.fail_after(10):
                        sent = await from_server.receive()
                    answers.append(encode(sent))
                    if getattr(sent.message, "id", None) == message["id"]:
                        break
    return answers


def served(billing: GeneratedServer, middleware: bool) -> Any:
    """A fresh server on freshly loaded handlers (their seeded data may change during a run)."""
    server = billing.create_server(importlib.reload(billing.handlers))
    if middleware:
        billing.module("_serving").serving_middleware(server, traced=False)
    return server


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_served_calls_send_the_same_bytes_as_the_sdk_path(billing: GeneratedServer, version: str) -> None:
    encoded = billing.module("_stdio").encoded
    messages = initialize(version) + [request(n, "tools/call", call) for n, call in enumerate(CALLS, start=1)]
    sdk = await exchange(served(billing, False), messages, sdk_encoded)
    fast = await exchange(served(billing, True), messages, encoded)
    assert len(sdk) == len(fast)
    for expected, got in zip(sdk, fast, strict=True):
        assert got == expected
    sent = [json.loads(line) for line in fast[1:]]
    results = {message["id"]: message for message in sent if "id" in message}
    assert sorted(results) == list(range(1, len(CALLS) + 1))  # every call answered
    assert "structuredContent" in results[1]["result"] and results[1]["result"]["isError"] is False
    assert results[2]["result"]["isError"] is True  # the fast path covered error results too
    assert results[8]["result"]["isError"] is True  # invoice_submit: listed (stable list), its arguments refused
    assert all("error" in results[n] for n in (9, 11, 12))  # and the SDK's errors
    # the gate-passing invoice_submit made the session hold its state (§10.5): its list changed, once
    assert [m["method"] for m in sent if "id" not in m] == ["notifications/tools/list_changed"]


async def test_a_call_before_initialize_is_refused_as_the_sdk_refuses_it(billing: GeneratedServer) -> None:
    encoded = billing.module("_stdio").encoded
    messages = [request(1, "tools/call", CALLS[0])]
    sdk = await exchange(served(billing, False), messages, sdk_encoded)
    fast = await exchange(served(billing, True), messages, encoded)
    assert fast == sdk and b'"error"' in fast[0]


def sdk_encoded(message: SessionMessage) -> bytes:
    """How the transport wrote every message before orjson: pydantic's JSON of the message."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


def runtime_results(billing: GeneratedServer) -> list[types.CallToolResult]:
    """One result of each builder the runtime has."""
    presenting, results = billing.module("_presenting"), billing.module("_results")
    notes = presenting.Notes()
    notes.rules.append("a rule with <markup> & more")
    notes.suggestions.append(("invoice_get", "look"))
    notes.blocks.append(presenting.Block("table", "| a |", False))
    notes.blocks.append(presenting.Block("markdown", "for the user", True))
    data = {"id": "x", "nested": {"none": None, "list": [1, 2.5, "é\u2028"]}}
    return [
        presenting.presented_result(dict(data), notes),
        presenting.presented_collection([dict(data)], 3, presenting.Notes()),
        results.data_result(data, {"value": data}),
        results.error_result("failed"),
        results.validation_error("t", [billing.module("_values").FieldError("id", "a string")]),
        results.tool_error("t", "NOT_FOUND", "no such thing", "try another"),
        results.handler_failed("t", RuntimeError("secret")),
        results.no_result("t"),
        results.done_result("t", {"ok": True}),
        results.text_result("plain"),
        types.CallToolResult(content=[types.TextContent(type="text", text="validated")]),
    ]


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_every_runtime_result_is_written_as_the_sdk_writes_it(billing: GeneratedServer, version: str) -> None:
    tool_result_wire = billing.module("_fast_path").tool_result_wire
    for result in runtime_results(billing):
        sdk = wire_methods.serialize_server_result(
            "tools/call", version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        fast = tool_result_wire(result)
        assert fast is not None, result
        assert json.dumps(fast) == json.dumps(sdk)  # same values, same key order


def test_results_it_does_not_know_are_left_to_the_sdk(billing: GeneratedServer) -> None:
    tool_result_wire = billing.module("_fast_path").tool_result_wire
    image = types.ImageContent(type="image", data="AAAA", mime_type="image/png")
    unknown = [
        types.CallToolResult(content=[image]),
        types.CallToolResult(content=[], meta={"k": 1}),
        types.CallToolResult(content=[types.TextContent(type="text", text="x", meta={"k": 1})]),
        types.CallToolResult(
            content=[types.TextContent(type="text", text="x", annotations=types.Annotations(priority=0.5))]
        ),
    ]
    assert [tool_result_wire(result) for result in unknown] == [None] * len(unknown)


async def test_other_methods_and_the_2026_era_take_the_sdk_path(billing: GeneratedServer) -> None:
    middleware = billing.module("_fast_path").FastToolCalls(billing.create_server())
    passed: list[str] = []

    class Session:
        client_params = object()

    class Context:
        def __init__(self, method: str, version: str) -> None:
            self.method, self.protocol_version, self.session, self.params = method, version, Session(), {}

    async def call_next(ctx: Any) -> dict[str, Any]:
        passed.append(f"{ctx.method}@{ctx.protocol_version}")
        return {}

    await middleware(Context("tools/list", "2025-11-25"), call_next)
    await middleware(Context("tools/call", "2026-07-28"), call_next)
    Session.client_params = None  # type: ignore[assignment]
    await middleware(Context("tools/call", "2025-11-25"), call_next)
    assert passed == ["tools/list@2025-11-25", "tools/call@2026-07-28", "tools/call@2025-11-25"]


def test_serving_drops_the_untraced_span_middleware_and_keeps_it_with_otel(billing: GeneratedServer) -> None:
    serving_middleware = billing.module("_serving").serving_middleware
    fast = billing.module("_fast_path").FastToolCalls
    untraced, traced = billing.create_server(), billing.create_server()
    serving_middleware(untraced, traced=False)
    serving_middleware(traced, traced=True)
    serving_middleware(traced, traced=True)  # idempotent
    assert [type(m) for m in untraced.middleware] == [fast]
    assert [type(m).__name__ for m in traced.middleware] == ["OpenTelemetryMiddleware", "FastToolCalls"]


# --- the fence -------------------------------------------------------------------------------------------------


def test_the_fast_path_serves_on_the_sdk_it_was_tested_on(billing: GeneratedServer) -> None:
    fast_path = billing.module("_fast_path")
    assert importlib.metadata.version("mcp") in fast_path.TESTED_SDK
    assert fast_path.unavailable() is None
    assert billing.module("_serving").fast_path_problem() is None


def test_elsewhere_the_public_api_serves_and_says_why(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another mcp release (within the declared range, so the package imports), an SDK without the lane's hook, an
    SDK that moved a module the fast path imports, or the variable set: the public path, with its reason; and then
    no middleware of ours is installed (the SDK serializes every result itself)."""
    serving, fast_path = billing.module("_serving"), billing.module("_fast_path")
    installed = importlib.metadata.version

    monkeypatch.setenv("MCP_SERVER_FAST_PATH", "off")
    assert serving.fast_path_problem() == "MCP_SERVER_FAST_PATH=off"
    monkeypatch.delenv("MCP_SERVER_FAST_PATH")

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.3.9" if name == "mcp" else installed(name))
    assert serving.fast_path_problem() == "mcp 2.3.9 is not a version it was tested on (2.3.0)"
    monkeypatch.setattr(importlib.metadata, "version", installed)

    monkeypatch.setattr(fast_path, "sdk_has_lane_hooks", lambda: False)
    assert "_related_request_id" in serving.fast_path_problem()
    monkeypatch.undo()

    # Its import fails, as it would on an SDK that moved a module it imports.
    monkeypatch.setitem(sys.modules, f"{billing.package_name}._fast_path", None)
    assert serving.fast_path_problem().startswith("the SDK lacks what the fast path imports")
    monkeypatch.undo()

    server = billing.create_server()
    serving.serving_middleware(server, traced=False, fast=False)
    assert server.middleware == []


def test_session_fairness_extends_the_sdk_only_inside_the_fence(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--max-sessions-per-client` subclasses the SDK's session manager (tests/test_reliability_sessions.py floods
    it over real HTTP): on the SDK it was tested on it does; on another release, without a hook it overrides, or
    when the fenced module cannot be imported, the manager stays the SDK's and the reason is returned (the
    start-up prints it)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    http = billing.module("_http")  # where --http installs session fairness
    installed = importlib.metadata.version

    def served() -> Any:
        server = billing.create_server()
        server.streamable_http_app()  # makes the session manager, as serving over HTTP does
        return server

    fair = served()
    assert http.session_fairness_problem(fair, 4) is None
    assert type(fair._session_manager).__name__ == "FairSessions" and fair._session_manager.per_client == 4

    assert http.session_fairness_problem(billing.create_server(), 4).startswith(
        "the server holds no streamable HTTP session manager"
    )
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.3.9" if name == "mcp" else installed(name))
    untested = served()
    assert http.session_fairness_problem(untested, 4) == "mcp 2.3.9 is not a version it was tested on (2.3.0)"
    assert type(untested._session_manager) is StreamableHTTPSessionManager
    monkeypatch.undo()

    monkeypatch.delattr(StreamableHTTPSessionManager, "_admit_session")
    assert http.session_fairness_problem(served(), 4) == "the SDK's session manager has no _admit_session"
    monkeypatch.undo()

    monkeypatch.setitem(sys.modules, f"{billing.package_name}._fast_path", None)
    assert http.session_fairness_problem(served(), 4).startswith("the SDK lacks what it relies on")


# --- the stdio session's tool-call lane (_fast_path.py) ---------------------------------------------------------


class Wire:
    """One session of a generated server driven as the stdio transport drives it, in-process: messages go through
    the transport's admission (`admit_all`, its `--max-in-flight` gate and `Bypass`) to `serve_session` (`lane`)
    or to `Server.run` (the SDK's path: no middleware, pydantic's JSON); every message written is a line of bytes.
    `taken` counts the requests the lane took from the bypass, so a test knows which path answered."""

    def __init__(self, billing: GeneratedServer, server: Any, *, lane: bool) -> None:
        self.stdio = billing.module("_stdio")
        self.session = billing.module("_fast_path")
        self.server, self.lane = server, lane
        self.encode = self.stdio.encoded if lane else sdk_encoded
        self.gate = self.stdio.InFlight(16)
        self.taken = 0
        self.bypass = self._counting_bypass()
        self.to_server, self._items = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        self._written, self._from_server = anyio.create_memory_object_stream[SessionMessage](64)

    def _counting_bypass(self) -> Any:
        wire = self

        class Counting(self.stdio.Bypass):  # type: ignore[name-defined,misc]
            def passes(self, item: SessionMessage) -> bool:
                passed: bool = super().passes(item)
                wire.taken += not passed
                return passed

        return Counting()

    async def __aenter__(self) -> Wire:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        reads, self._reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self._group.start_soon(self._admit, reads)
        self._group.start_soon(self._serve)
        return self

    async def _admit(self, reads: Any) -> None:
        async with self._items:
            await self.stdio.admit_all(self._items, reads, self.gate, self.bypass)

    async def _serve(self) -> None:
        options: InitializationOptions = self.server.create_initialization_options()
        writes = Answered(self._written, self.gate)
        if self.lane:
            await self.session.serve_session(self.server, self._reads, writes, options, self.bypass)
        else:
            await self.server.run(self._reads, writes, options)

    async def send(self, message: dict[str, Any]) -> None:
        await self.to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False)))

    async def line(self) -> bytes:
        with anyio.fail_after(10):
            return bytes(self.encode(await self._from_server.receive()))

    async def answer(self, request_id: int) -> list[bytes]:
        """Every line up to and including the answer to `request_id` (notifications sent before it, too)."""
        lines = [await self.line()]
        while json.loads(lines[-1]).get("id") != request_id:
            lines.append(await self.line())
        return lines

    async def end(self) -> list[bytes]:
        """Close the client's side (EOF); what is written until the session ends."""
        await self.to_server.aclose()
        rest = []
        with anyio.fail_after(10):
            async for message in self._from_server:
                rest.append(bytes(self.encode(message)))
        return rest

    async def __aexit__(self, *exc_info: Any) -> None:
        self.to_server.close()
        await self._group.__aexit__(*exc_info)


class Answered:
    """The write stream as the pipe transport has it: every message written frees its request's slot."""

    def __init__(self, send: Any, gate: Any) -> None:
        self._send, self._gate = send, gate

    async def send(self, item: SessionMessage) -> None:
        self._gate.answered(item.message)
        await self._send.send(item)

    async def aclose(self) -> None:
        await self._send.aclose()

    async def __aenter__(self) -> Answered:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


def call(request_id: int, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return request(request_id, "tools/call", params)


def cancel(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


async def both(billing: GeneratedServer, script: Any, handlers: Any = None, traced: bool = False) -> tuple[Any, Any]:
    """Run `script(wire)` on the SDK's path and on the lane; what each returned, and the lane's Wire."""
    results = []
    for lane in (False, True):
        module = handlers() if handlers is not None else importlib.reload(billing.handlers)
        server = billing.create_server(module)
        if lane:
            billing.module("_serving").serving_middleware(server, traced=traced)
        async with Wire(billing, server, lane=lane) as wire:
            results.append(await script(wire))
    return results[0], (results[1], wire)


async def handshake(wire: Wire, version: str) -> None:
    for message in initialize(version):
        await wire.send(message)
    await wire.answer(0)


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_the_lane_sends_the_same_bytes_as_the_sdk_for_every_call(billing: GeneratedServer, version: str) -> None:
    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, version)
        lines = []
        for n, params in enumerate(CALLS, start=1):
            await wire.send(request(n, "tools/call", params))
            lines += await wire.answer(n)
        return lines

    sdk, (lane, wire) = await both(billing, script)
    assert lane == sdk
    assert wire.taken == len(CALLS)  # the lane answered every one of them, errors too
    assert wire.gate.count == 0


async def test_the_lane_leaves_calls_before_initialize_and_the_2026_era_to_the_sdk(billing: GeneratedServer) -> None:
    modern = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    async def early(wire: Wire) -> list[bytes]:
        await wire.send(call(1, "invoice_get", {"id": "inv-1"}))
        return await wire.answer(1)

    async def era_2026(wire: Wire) -> list[bytes]:
        await wire.send(call(1, "invoice_get", {"id": "inv-1"}, meta=modern))
        return await wire.answer(1)

    for script in (early, era_2026):
        sdk, (lane, wire) = await both(billing, script)
        assert lane == sdk and wire.taken == 0, script.__name__


async def test_with_other_middleware_the_sdk_answers(billing: GeneratedServer) -> None:
    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(call(1, "invoice_get", {"id": "inv-1"}))
        return await wire.answer(1)

    sdk, (lane, wire) = await both(billing, script, traced=True)  # --otel: the SDK's span middleware first
    assert lane == sdk and wire.taken == 0


async def test_on_an_sdk_without_the_lanes_hooks_the_sdk_answers(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The installed SDK has the dispatcher keyword the lane needs (so the lane is what serves, above); an SDK that
    dropped it gets `server.run`, with the same bytes."""
    session = billing.module("_fast_path")
    assert session.sdk_has_lane_hooks()
    monkeypatch.setattr(session, "sdk_has_lane_hooks", lambda: False)

    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(call(1, "invoice_get", {"id": "inv-1"}))
        return await wire.answer(1)

    sdk, (lane, wire) = await both(billing, script)
    assert lane == sdk and wire.taken == 0


class Slow:
    """Handlers whose customer.get waits until released and records a cancellation; billing.remind reports
    progress, logs, and says whether it saw an identity (stdio has none); invoice.create pings the client first."""

    def __init__(self, billing: GeneratedServer) -> None:
        self.billing = billing
        self.release = anyio.Event()
        self.cancelled = 0

    def __call__(self) -> Any:
        module = importlib.reload(self.billing.handlers)
        self.release = anyio.Event()
        fetch = module.get_customer

        async def slow_customer(args: Any, ctx: Any) -> Any:
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
            return fetch(args)

        async def remind(args: Any, ctx: Any) -> str:
            await ctx.session.report_progress(1, 2, "half way")
            notification = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(level="info", data={"reminded": args.invoice_id})
            )
            await ctx.session.send_notification(notification)
            return f"identity: {ctx.identity}"

        async def create(args: Any, ctx: Any) -> Any:  # asks the client first: a server-to-client request
            await ctx.session.send_ping()
            return await created(args)

        created = module.create_invoice
        module.get_customer, module.send_reminder, module.create_invoice = slow_customer, remind, create
        return module


async def test_a_slow_call_blocks_no_other_and_a_cancelled_one_is_not_answered(billing: GeneratedServer) -> None:
    slow = Slow(billing)

    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-06-18")
        await wire.send(call(1, "customer_get", {"id": "c-1"}))  # waits
        await wire.send(call(2, "invoice_get", {"id": "inv-1"}))
        lines = await wire.answer(2)  # answered while call 1 still waits
        await wire.send(call(3, "customer_get", {"id": "c-1"}))  # waits too
        await wire.send(cancel(3))
        await wire.send(call(4, "invoice_list", {"limit": 1}))
        lines += await wire.answer(4)  # call 3 was never answered: the next line is call 4's
        slow.release.set()
        lines += await wire.answer(1)
        assert wire.gate.count == 0  # the cancelled call freed its slot
        return lines

    sdk, (lane, wire) = await both(billing, script, handlers=slow)
    assert lane == sdk
    assert [json.loads(line)["id"] for line in lane] == [2, 4, 1]
    assert slow.cancelled == 2  # call 3, once on each path
    assert wire.taken == 4


def read_back_to_back(wire: Wire, *messages: dict[str, Any]) -> None:
    """Hand `messages` to the transport's admission as one read does: in one step, before any call's task begins
    (the lane's way in; the SDK's dispatcher always lets a request's task begin before it reads on)."""
    for message in messages:
        item = SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False))
        if isinstance(item.message, types.JSONRPCRequest):
            item = wire.gate.admitted(item, item.message.id)
        assert wire.bypass.passes(item) == (not isinstance(item.message, types.JSONRPCRequest))


async def test_a_call_cancelled_before_its_task_begins_runs_to_its_first_wait_and_is_not_answered(
    billing: GeneratedServer,
) -> None:
    """As in a cancelled scope: the handler begins, is interrupted where it first waits, and nothing is answered;
    a call that never waits runs to its end, unanswered. Neither cancellation reaches the calls after them."""
    slow = Slow(billing)
    server = billing.create_server(slow())
    billing.module("_serving").serving_middleware(server, traced=False)
    async with Wire(billing, server, lane=True) as wire:
        await handshake(wire, "2025-11-25")
        read_back_to_back(wire, call(1, "customer_get", {"id": "c-1"}), cancel(1))
        read_back_to_back(wire, call(2, "invoice_get", {"id": "inv-1"}), cancel(2))
        await wire.send(call(3, "invoice_get", {"id": "inv-1"}))
        lines = await wire.answer(3)
        slow.release.set()
        await wire.send(call(4, "customer_get", {"id": "c-1"}))
        lines += await wire.answer(4)
        assert wire.gate.count == 0  # both cancelled calls freed their slots
    assert [json.loads(line)["id"] for line in lines] == [3, 4]
    assert all(b'"result"' in line for line in lines)
    assert slow.cancelled == 1  # call 1, in its wait; call 2 never waited


async def test_a_handler_that_swallows_the_cancellation_is_still_not_answered(billing: GeneratedServer) -> None:
    slow = Slow(billing)
    stubborn = slow()
    waiting = stubborn.get_customer

    async def swallowing(args: Any, ctx: Any) -> Any:
        try:
            return await waiting(args, ctx)
        except anyio.get_cancelled_exc_class():
            return None  # carries on as if it had not been cancelled

    stubborn.get_customer = swallowing

    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(call(1, "customer_get", {"id": "c-1"}))
        await anyio.wait_all_tasks_blocked()
        await wire.send(cancel(1))
        await wire.send(call(2, "invoice_get", {"id": "inv-1"}))
        lines = await wire.answer(2)
        assert wire.gate.count == 0
        return lines

    sdk, (lane, wire) = await both(billing, script, handlers=lambda: stubborn)
    assert lane == sdk and wire.taken == 2
    assert [json.loads(line)["id"] for line in lane] == [2]


async def test_progress_notifications_and_the_callers_identity_through_the_lane(billing: GeneratedServer) -> None:
    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(call(1, "billing_remind", {"invoice_id": "inv-1"}, meta={"progressToken": "p-1"}))
        return await wire.answer(1)

    sdk, (lane, wire) = await both(billing, script, handlers=Slow(billing))
    assert lane == sdk and wire.taken == 1
    methods = [json.loads(line).get("method") for line in lane]
    assert methods == ["notifications/progress", "notifications/message", None]
    assert b"identity: None" in lane[-1]


async def test_a_workflow_transition_through_the_lane_sends_list_changed(billing: GeneratedServer) -> None:
    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(request(1, "tools/list"))
        lines = await wire.answer(1)
        await wire.send(call(2, "invoice_submit", {"invoice_id": "inv-1"}))
        lines += await wire.answer(2)
        await wire.send(request(3, "tools/list"))
        return lines + await wire.answer(3)

    sdk, (lane, wire) = await both(billing, script)
    assert lane == sdk and wire.taken == 1
    assert json.loads(lane[1]) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert lane[0] != lane[-1]  # the listing changed with the state


async def test_at_eof_the_calls_read_are_answered_before_the_session_ends(billing: GeneratedServer) -> None:
    slow = Slow(billing)

    async def release_after_eof(wire: Wire) -> list[bytes]:
        async with anyio.create_task_group() as group:
            ending: list[bytes] = []

            async def end() -> None:
                ending.extend(await wire.end())

            await handshake(wire, "2025-11-25")
            await wire.send(call(1, "customer_get", {"id": "c-1"}))
            group.start_soon(end)
            await anyio.wait_all_tasks_blocked()
            slow.release.set()
        return ending

    sdk, (lane, wire) = await both(billing, release_after_eof, handlers=slow)
    assert lane == sdk and wire.taken == 1
    assert [json.loads(line)["id"] for line in lane] == [1] and b'"result"' in lane[0]


async def test_a_call_still_running_when_the_session_ends_is_answered_connection_closed(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(billing.module("_stdio"), "EOF_DRAIN_TIMEOUT", 0.0)  # the drain after EOF gives up at once
    slow = Slow(billing)

    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        await wire.send(call(1, "customer_get", {"id": "c-1"}))  # never released
        await anyio.wait_all_tasks_blocked()
        return await wire.end()

    sdk, (lane, wire) = await both(billing, script, handlers=slow)
    assert lane == sdk and wire.taken == 1
    assert json.loads(lane[0]) == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Connection closed"}}
    assert slow.cancelled == 2


async def test_a_server_to_client_request_from_a_lane_call_gets_its_answer(billing: GeneratedServer) -> None:
    async def script(wire: Wire) -> list[bytes]:
        await handshake(wire, "2025-11-25")
        arguments = {"customer_id": "c-1", "amount_cents": 100, "due_date": "2026-01-31"}
        await wire.send(call(1, "invoice_create", arguments))
        ping = await wire.line()
        asked = json.loads(ping)
        assert asked["method"] == "ping"
        await wire.send({"jsonrpc": "2.0", "id": asked["id"], "result": {}})  # the client answers the server
        return [ping, *await wire.answer(1)]

    sdk, (lane, wire) = await both(billing, script, handlers=Slow(billing))
    assert lane == sdk and wire.taken == 1
    assert b'"result"' in lane[-1]
