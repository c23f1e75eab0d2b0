"""`--http-response`: an SSE stream per request (default) or one JSON body, over a real server process.

What must hold in both modes: the same results, in both protocol eras, and the handshake era's
`notifications/tools/list_changed` after a workflow step still reaches the client (it goes on the session's GET
stream, not on the call's response, so JSON bodies lose nothing this server sends).
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from fusiongen.runtime import _serving
from tests.support.build import SPECS, build
from tests.support.client import LEGACY, MODERN, connect
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


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("modes") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture(scope="module", params=["sse", "json"])
def served(request: pytest.FixtureRequest, built: Path) -> Iterator[tuple[str, str]]:
    mode: str = request.param
    with http_server(built, "--http-response", mode) as url:
        yield mode, url


def test_each_request_is_answered_in_the_chosen_content_type(served: tuple[str, str]) -> None:
    mode, url = served
    with httpx.Client(timeout=NOTIFIED_TIMEOUT) as http:
        opened = http.post(url, json=INITIALIZE, headers=HEADERS)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **session})
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "invoice.get", "arguments": {"id": "inv-1"}}
        answer = http.post(url, json=call, headers={**HEADERS, **session})
    expected = "application/json" if mode == "json" else "text/event-stream"
    assert opened.headers["content-type"].startswith(expected)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith(expected)
    body = answer.text if mode == "json" else answer.text.split("data:", 1)[1].strip()
    assert '"amount_cents":123400' in body.replace(" ", "") and "legal says hold" not in body


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_tools_answer_the_same_in_both_modes_and_eras(served: tuple[str, str], era: str) -> None:
    _, url = served
    async with connect(url, era) as client:
        result = await client.call_tool("invoice.list", {"status": "overdue"})
        bad = await client.call_tool("invoice.get", {"id": 1})
    assert [i["id"] for i in result.structured_content["data"]] == ["inv-1"]
    assert bad.is_error


async def test_a_workflow_step_still_notifies_tools_list_changed(served: tuple[str, str]) -> None:
    _, url = served
    messages: list[Any] = []

    async def record(message: Any) -> None:
        messages.append(message)

    def changed() -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in messages)

    async with connect(url, LEGACY, message_handler=record) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        submitted = await client.call_tool("invoice.submit", {"invoice_id": "inv-1"})  # draft -> review
        with anyio.fail_after(NOTIFIED_TIMEOUT):
            while changed() < 1:
                await anyio.sleep(0.02)
        after = [t.name for t in (await client.list_tools()).tools]
    assert not submitted.is_error
    assert changed() == 1
    assert before != after


@pytest.mark.parametrize("http", [False, True])
def test_uvloop_only_for_http_and_only_when_installed(http: bool) -> None:
    options = _serving.event_loop_options(argparse.Namespace(http=http))
    installed = importlib.util.find_spec("uvloop") is not None
    assert options == ({"use_uvloop": True} if http and installed else {})
