"""The serving fast path (FastToolCalls, `encoded` with orjson) sends exactly what the SDK's own path sends.

A served generated server answers `tools/call` on a handshake-era connection without the SDK's `model_dump` and
per-version result check (`tool_result_wire` writes the wire dict itself) and writes responses with orjson. These
tests drive the same generated server over raw JSON-RPC twice, once as the SDK serves it and once with the serving
middleware installed, and require the same response bytes for every call: results of every kind the runtime
builds (presented item and collection, text, errors, validation errors), invalid params, unknown tools, calls
before `initialize`, at every handshake-era version. Runs in-process over memory streams: no timing, no sockets.
"""

from __future__ import annotations

import importlib
import json
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
    {"name": "invoice.get", "arguments": {"id": "inv-1"}},  # presented item: UI blocks, rules, suggestions
    {"name": "invoice.get", "arguments": {"id": "nope"}},  # the handler's ToolError
    {"name": "invoice.get", "arguments": {"id": 7}},  # a validation error result
    {"name": "invoice.get", "arguments": {}},  # a required argument missing
    {"name": "invoice.list", "arguments": {"limit": 1}},  # presented collection, truncated
    {"name": "invoice.list", "arguments": {"status": "paid"}},  # a collection, maybe empty
    {"name": "customer.get", "arguments": {"id": "c-1"}},
    {"name": "invoice.submit", "arguments": {"id": "inv-1"}},  # workflow-gated
    {"name": "no.such.tool", "arguments": {}},  # an MCPError
    {"name": "invoice.get"},  # no arguments at all
    {"name": "invoice.get", "arguments": "not an object"},  # invalid params: the SDK's INVALID_PARAMS
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
    the next is sent; the answers as the stdio transport writes them (`encode`)."""
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
                if "id" in message:
                    with anyio.fail_after(10):
                        answers.append(encode(await from_server.receive()))
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
    assert len(fast) == len(CALLS) + 1
    for sent, (expected, got) in zip([None, *CALLS], zip(sdk, fast, strict=True), strict=True):
        assert got == expected, sent
    results = [json.loads(line) for line in fast[1:]]
    assert "structuredContent" in results[0]["result"] and results[0]["result"]["isError"] is False
    assert results[1]["result"]["isError"] is True  # the fast path covered error results too
    assert "error" in results[-1] and "error" in results[-4]  # and the SDK's errors


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
    runtime = billing.module("_runtime")
    notes = runtime.Notes()
    notes.rules.append("a rule with <markup> & more")
    notes.suggestions.append(("invoice.get", "look"))
    notes.blocks.append(runtime.Block("table", "| a |", False))
    notes.blocks.append(runtime.Block("markdown", "for the user", True))
    data = {"id": "x", "nested": {"none": None, "list": [1, 2.5, "é\u2028"]}}
    return [
        runtime.presented_result(dict(data), notes),
        runtime.presented_collection([dict(data)], 3, runtime.Notes()),
        runtime.data_result(data, {"value": data}),
        runtime.error_result("failed"),
        runtime.validation_error("t", [runtime.FieldError("id", "a string")]),
        runtime.tool_error("t", "NOT_FOUND", "no such thing", "try another"),
        runtime.handler_failed("t", RuntimeError("secret")),
        runtime.no_result("t"),
        runtime.done_result("t", {"ok": True}),
        runtime.text_result("plain"),
        types.CallToolResult(content=[types.TextContent(type="text", text="validated")]),
    ]


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_every_runtime_result_is_written_as_the_sdk_writes_it(billing: GeneratedServer, version: str) -> None:
    tool_result_wire = billing.module("_runtime").tool_result_wire
    for result in runtime_results(billing):
        sdk = wire_methods.serialize_server_result(
            "tools/call", version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        fast = tool_result_wire(result)
        assert fast is not None, result
        assert json.dumps(fast) == json.dumps(sdk)  # same values, same key order


def test_results_it_does_not_know_are_left_to_the_sdk(billing: GeneratedServer) -> None:
    tool_result_wire = billing.module("_runtime").tool_result_wire
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
    middleware = billing.module("_runtime").FastToolCalls(billing.create_server())
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
    fast = billing.module("_runtime").FastToolCalls
    untraced, traced = billing.create_server(), billing.create_server()
    serving_middleware(untraced, traced=False)
    serving_middleware(traced, traced=True)
    serving_middleware(traced, traced=True)  # idempotent
    assert [type(m) for m in untraced.middleware] == [fast]
    assert [type(m).__name__ for m in traced.middleware] == ["OpenTelemetryMiddleware", "FastToolCalls"]
