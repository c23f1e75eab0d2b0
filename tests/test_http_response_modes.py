"""`--http-response`: an SSE stream per request or one JSON body, over a real server process; `auto` (the
default) picks JSON when no handler takes `ctx`, SSE when one does.

What must hold in every mode: the same results, in both protocol eras, and the handshake era's
`notifications/tools/list_changed` after a workflow step still reaches the client (it goes on the session's GET
stream, not on the call's response, so JSON bodies lose nothing this server sends). Under `auto` a handler that
takes `ctx` gets SSE, so what it sends during its call (here a progress notification) arrives.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.server import Server

from fusiongen.runtime import _http, _runtime, _serving
from tests.support.build import SPECS, build, importable
from tests.support.client import LEGACY, MODERN, MODES, connect
from tests.support.processes import http_server

pytestmark = pytest.mark.anyio

NOTIFIED_TIMEOUT = 20.0  # seconds the list_changed notification may take on a loaded machine
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
BILLING_HANDLERS = (SPECS / "billing_handlers.py").read_text(encoding="utf-8")
UPDATE_TAKES_CTX = "async def update_invoice(args: InvoiceUpdateInput, ctx: Any) -> Any:"
# billing.remind reports progress during its call: only an SSE response can carry that.
REMIND_REPORTS_PROGRESS = """

async def send_reminder(args: BillingRemindInput, ctx: Any) -> Any:
    await ctx.session.report_progress(1, 2, "half way")
    REMINDERS.append(args.invoice_id)
"""
# The billing spec, served with one of three handler modules: as it is (invoice.update takes ctx and sends
# nothing), with no handler taking ctx, and with billing.remind reporting progress.
HANDLERS = {
    "update takes ctx": BILLING_HANDLERS,
    "no ctx": BILLING_HANDLERS.replace(UPDATE_TAKES_CTX, UPDATE_TAKES_CTX.replace(", ctx: Any", "")),
    "remind reports progress": BILLING_HANDLERS + REMIND_REPORTS_PROGRESS,
}
# (handler module, options, the response content type expected)
SERVED = [
    ("update takes ctx", ("--http-response", "sse"), "text/event-stream"),
    ("update takes ctx", ("--http-response", "json"), "application/json"),  # forced: no longer SSE
    ("no ctx", (), "application/json"),  # auto
    ("no ctx", ("--http-response", "sse"), "text/event-stream"),  # forced: no longer JSON
    ("remind reports progress", (), "text/event-stream"),  # auto
]


def test_the_billing_handlers_have_the_ctx_parameter_these_variants_remove() -> None:
    assert UPDATE_TAKES_CTX in BILLING_HANDLERS and UPDATE_TAKES_CTX not in HANDLERS["no ctx"]


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    built = {}
    for index, (variant, source) in enumerate(HANDLERS.items()):
        out = tmp_path_factory.mktemp(f"modes{index}") / "out"
        build((SPECS / "billing.toml").read_text(encoding="utf-8"), out, handlers=source)
        built[variant] = out
    return built


@pytest.fixture(scope="module", params=SERVED, ids=lambda s: f"{s[0]} {' '.join(s[1]) or 'default'}")
def served(
    request: pytest.FixtureRequest, builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    variant, options, expected = request.param
    log = tmp_path_factory.mktemp("log") / "server.log"
    with http_server(builds[variant], *options, log=log) as url:
        yield expected, url, log


def test_each_request_is_answered_in_the_resolved_content_type(served: tuple[str, str, Path]) -> None:
    expected, url, log = served
    with httpx.Client(timeout=NOTIFIED_TIMEOUT) as http:
        opened = http.post(url, json=INITIALIZE, headers=HEADERS)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **session})
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "invoice_get", "arguments": {"id": "inv-1"}}
        answer = http.post(url, json=call, headers={**HEADERS, **session})
    assert opened.headers["content-type"].startswith(expected)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith(expected)
    body = answer.text if expected == "application/json" else answer.text.split("data:", 1)[1].strip()
    assert '"amount_cents":123400' in body.replace(" ", "") and "legal says hold" not in body
    banner = log.read_text().splitlines()[0]
    assert ("responses: JSON bodies" if expected == "application/json" else "responses: SSE streams") in banner


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_tools_answer_the_same_in_both_modes_and_eras(served: tuple[str, str, Path], era: str) -> None:
    _, url, _ = served
    async with connect(url, era) as client:
        result = await client.call_tool("invoice_list", {"status": "overdue"})
        bad = await client.call_tool("invoice_get", {"id": 1})
    assert [i["id"] for i in result.structured_content["data"]] == ["inv-1"]
    assert bad.is_error


async def test_a_workflow_step_still_notifies_tools_list_changed(served: tuple[str, str, Path]) -> None:
    _, url, _ = served
    messages: list[Any] = []

    async def record(message: Any) -> None:
        messages.append(message)

    def changed() -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in messages)

    async with connect(url, LEGACY, message_handler=record) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        submitted = await client.call_tool("invoice_submit", {"invoice_id": "inv-1"})  # draft -> review
        with anyio.fail_after(NOTIFIED_TIMEOUT):
            while changed() < 1:
                await anyio.sleep(0.02)
        after = [t.name for t in (await client.list_tools()).tools]
    assert not submitted.is_error
    assert changed() == 1
    assert before != after


@pytest.fixture(scope="module")
def reporting(builds: dict[str, Path]) -> Iterator[str]:
    with http_server(builds["remind reports progress"]) as url:  # the default: auto
        yield url


@pytest.mark.parametrize("era", MODES)
async def test_under_auto_the_progress_a_handler_reports_arrives(reporting: str, era: str) -> None:
    reported: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reported.append((done, total, message))

    async with connect(reporting, era) as client:
        result = await client.call_tool("billing_remind", {"invoice_id": "inv-1"}, progress_callback=progress)
    assert not result.is_error
    assert reported == [(1, 2, "half way")]


@pytest.mark.parametrize("http", [False, True])
def test_uvloop_only_for_http_and_only_when_installed(http: bool) -> None:
    options = _serving.event_loop_options(argparse.Namespace(http=http))
    installed = importlib.util.find_spec("uvloop") is not None
    assert options == ({"use_uvloop": True} if http and installed else {})


READ_TAKES_CTX = """

def read_invoice(args: InvoiceResourceInput, ctx: Any) -> Any:
    return get_invoice(args)
"""


@pytest.mark.parametrize(
    ("source", "takes_ctx"),
    [
        (HANDLERS["no ctx"], False),
        (HANDLERS["update takes ctx"], True),  # a tool handler
        (HANDLERS["no ctx"] + READ_TAKES_CTX, True),  # the invoice:// resource's read handler
    ],
)
def test_the_server_knows_whether_a_tool_or_resource_handler_takes_ctx(
    builds: dict[str, Path], tmp_path: Path, source: str, takes_ctx: bool
) -> None:
    module = tmp_path / "variant_handlers.py"
    module.write_text(source, encoding="utf-8")
    with importable(builds["no ctx"], tmp_path, modules=("billing_server", "variant_handlers")):
        server = importlib.import_module("billing_server").create_server(importlib.import_module("variant_handlers"))
        generated_http = importlib.import_module("billing_server._http")  # the server's own copy
    assert server.handlers_take_ctx is takes_ctx
    assert generated_http.json_responses(server, "auto") is not takes_ctx


def quiet_server(handlers_take_ctx: bool) -> Any:
    server = _runtime.HandlerServer("s")
    server.handlers_take_ctx = handlers_take_ctx
    return server


@pytest.mark.parametrize(
    ("server", "mode", "json_bodies"),
    [
        (quiet_server(False), "auto", True),
        (quiet_server(True), "auto", False),
        (Server("plain"), "auto", False),  # a server that does not say whether a handler takes ctx: SSE
        (quiet_server(False), "sse", False),
        (quiet_server(True), "json", True),
    ],
)
def test_auto_resolves_to_json_only_when_no_handler_takes_ctx(server: Any, mode: str, json_bodies: bool) -> None:
    assert _http.json_responses(server, mode) is json_bodies
