"""Two replicas of the generated billing server sharing workflow state through a real Redis.

Both replicas are `python -m billing_server --http --port N --state-store redis://127.0.0.1:PORT/0`
processes on 127.0.0.1, driven by `mcp.Client` over streamable HTTP. Their handler module is a shim
around specs/billing_handlers.py whose `discharge_invoice` is slow (so that two discharges really
overlap) and appends a line to a file each time it runs (so that handler runs can be counted across
processes).

A missing redis-server fails the module (tests/support/redis_server.py): it never skips.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.build import SPECS, build
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import http_server, server_env
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

# Over HTTP without --auth: invoice.update requires invoices:write, which no caller has, so it is not listed.
UNBOUND = ["invoice_get", "invoice_list", "invoice_create", "customer_get", "billing_remind"]
GENERATED = ["invoice_start", "invoice_status", "invoice_resolve"]
ALLOWED = {
    "draft": ["invoice_submit"],
    "review": ["invoice_approve", "invoice_reject"],
    "approved": ["invoice_discharge"],
    "discharged": [],
}
# A session that holds no workflow state yet: every tool, as on 2026-07-28 (docs/spec.md §10.6).
STABLE = [*UNBOUND, "invoice_submit", "invoice_approve", "invoice_reject", "invoice_discharge", *GENERATED]
WALK = [("invoice_submit", "review"), ("invoice_approve", "approved"), ("invoice_discharge", "discharged")]
DISCHARGE_DELAY = 0.3
SETTLE_TIMEOUT = 30.0  # seconds to wait for an expected notification, however loaded the machine

SHIM = '''\
"""Test shim: the real billing handlers, with a slow discharge that logs every run."""
import asyncio
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location("_real_billing_handlers", os.environ["FG_REAL_HANDLERS"])
_real = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _real
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


async def discharge_invoice(args):
    await asyncio.sleep(float(os.environ["FG_DISCHARGE_DELAY"]))
    with open(os.environ["FG_DISCHARGE_LOG"], "a") as log:
        log.write(f"{os.getpid()} {args.invoice_id}\\n")
    return await _real.discharge_invoice(args)
'''


@dataclass(frozen=True)
class Replicas:
    a: str
    b: str
    log: Path

    def discharges(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))  # pytest.fail if redis-server is missing
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Replicas]:
    root = tmp_path_factory.mktemp("replicas")
    out, shim = root / "out", root / "shim"
    build(SPECS / "billing.toml", out)
    shim.mkdir()
    (shim / "billing_handlers.py").write_text(SHIM, encoding="utf-8")
    log = root / "discharges.log"
    env = server_env(
        out,
        shim,
        FG_DISCHARGE_LOG=str(log),
        FG_REAL_HANDLERS=str(SPECS / "billing_handlers.py"),
        FG_DISCHARGE_DELAY=str(DISCHARGE_DELAY),
    )
    with contextlib.ExitStack() as stack:
        a, b = (stack.enter_context(http_server(out, "--state-store", redis_url, env=env)) for _ in range(2))
        yield Replicas(a, b, log)


# --- helpers ---------------------------------------------------------------------------------------


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def modern(url: str) -> Client:
    return connect(url, MODERN)


async def start(c: Client) -> str:
    result = await c.call_tool("invoice_start", {})
    assert not result.is_error, text(result)
    handle: str = result.structured_content["workflow_id"]
    return handle


async def status(c: Client, handle: str | None = None) -> dict[str, Any]:
    result = await c.call_tool("invoice_status", {} if handle is None else {"workflow_id": handle})
    assert not result.is_error, text(result)
    return dict(result.structured_content)


async def call(c: Client, tool: str, handle: str | None, invoice: str = "inv-2") -> types.CallToolResult:
    arguments: dict[str, Any] = {"invoice_id": invoice}
    if tool == "invoice_reject":
        arguments["reason"] = "needs work"
    if handle is not None:
        arguments["workflow_id"] = handle
    return await c.call_tool(tool, arguments)


async def ok(c: Client, tool: str, handle: str | None, invoice: str = "inv-2") -> None:
    result = await call(c, tool, handle, invoice)
    assert not result.is_error, text(result)


def wrong_state(tool: str, state: str, required: str) -> str:
    # In the final state (nothing allowed), the way on is another workflow: invoice.start is offered.
    allowed = "".join(f"<action>{t}</action>" for t in ALLOWED[state] or ["invoice_start"])
    recovery = (
        "Call one of the available actions first."
        if ALLOWED[state]
        else 'Workflow "invoice" is in its final state: nothing more can be done with it. For another one, call '
        "invoice_start and pass the workflow_id it returns."
    )
    return (
        f'<tool_error tool="{tool}" code="FORBIDDEN" severity="error"><message>Tool "{tool}" is not '
        f'available in the current state ("{state}") of workflow "invoice".</message>'
        f"<recovery>{recovery}</recovery><available_actions>{allowed}</available_actions>"
        f'<details><detail key="workflow">invoice</detail><detail key="currentState">{state}</detail>'
        f'<detail key="requiredStates">{required}</detail></details></tool_error>'
    )


# --- 2026-07-28: explicit handles shared by the replicas ------------------------------------------------


async def test_a_handle_moves_across_replicas(replicas: Replicas) -> None:
    async with modern(replicas.a) as a, modern(replicas.b) as b:
        handle = await start(a)
        assert (await status(b, handle))["state"] == "draft"  # B sees what A created
        await ok(b, "invoice_submit", handle)  # advanced on B
        again = await call(a, "invoice_submit", handle)  # so refused on A, with what is allowed now
        assert again.is_error and text(again) == wrong_state("invoice_submit", "review", "draft")
        assert await status(a, handle) == {
            "workflow_id": handle,
            "workflow": "invoice",
            "state": "review",
            "allowed_tools": ALLOWED["review"],
            "final": False,
            "pending": None,
        }
        await ok(a, "invoice_approve", handle)
        assert (await status(b, handle))["state"] == "approved"
        unknown = await call(b, "invoice_discharge", handle[::-1])
        assert unknown.is_error and "Unknown or expired workflow_id" in text(unknown)
        no_handle = await call(a, "invoice_discharge", None)
        assert no_handle.is_error and "needs a workflow handle" in text(no_handle)
        assert (await status(a, handle))["state"] == "approved"


async def test_fifty_concurrent_clients_walk_their_own_workflows(replicas: Replicas) -> None:
    before = len(replicas.discharges())
    finals: dict[str, dict[str, Any]] = {}
    failures: list[str] = []

    async def walk(index: int) -> None:
        url, other = (replicas.a, replicas.b) if index % 2 == 0 else (replicas.b, replicas.a)
        async with modern(url) as c:
            handle = await start(c)
            for tool, state in WALK:
                result = await call(c, tool, handle)
                if result.is_error:
                    failures.append(f"client {index} {tool}: {text(result)}")
                    return
                current = await status(c, handle)
                if current["state"] != state:
                    failures.append(f"client {index} after {tool}: {current}")
                    return
        async with modern(other) as c:  # the other replica agrees
            finals[handle] = await status(c, handle)

    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(walk, index)
    assert failures == []
    assert len(finals) == 50  # 50 distinct handles
    for handle, final in finals.items():
        assert final == {
            "workflow_id": handle,
            "workflow": "invoice",
            "state": "discharged",
            "allowed_tools": [],
            "final": True,
            "pending": None,
        }
    assert len(replicas.discharges()) - before == 50  # one handler run per workflow


async def test_concurrent_double_discharge_across_replicas_runs_once(replicas: Replicas) -> None:
    handles: list[str] = []
    async with modern(replicas.a) as a, modern(replicas.b) as b:
        for _ in range(5):
            handle = await start(a)
            await ok(a, "invoice_submit", handle, "inv-3")
            await ok(b, "invoice_approve", handle, "inv-3")
            handles.append(handle)
        before = len(replicas.discharges())
        results: dict[str, list[types.CallToolResult]] = {h: [] for h in handles}

        async def discharge(c: Client, handle: str) -> None:
            results[handle].append(await call(c, "invoice_discharge", handle, "inv-3"))

        async with anyio.create_task_group() as group:
            for handle in handles:
                group.start_soon(discharge, a, handle)
                group.start_soon(discharge, b, handle)
        for handle in handles:
            outcome = results[handle]
            assert len(outcome) == 2
            assert sorted(r.is_error for r in outcome) == [False, True], [text(r) for r in outcome]
            [refused] = [r for r in outcome if r.is_error]
            assert text(refused) == wrong_state("invoice_discharge", "discharged", "approved")
            assert (await status(b, handle))["final"] is True
    assert len(replicas.discharges()) - before == len(handles)  # the handler ran once per handle


# --- handshake era: session state per Mcp-Session-Id ------------------------------------------------


class Session:
    """A legacy client over HTTP that also records its Mcp-Session-Id and its notifications."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session_ids: set[str] = set()
        self.messages: list[Any] = []

    async def _response(self, response: httpx2.Response) -> None:
        if session_id := response.headers.get("mcp-session-id"):
            self.session_ids.add(session_id)

    async def _message(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def list_changed(self) -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in self.messages)

    async def settled(self, expected: int) -> int:
        """The list_changed count, after waiting (bounded) for `expected` and a little for any extra one."""
        with anyio.move_on_after(SETTLE_TIMEOUT):
            while self.list_changed < expected:
                await anyio.sleep(0.02)
        await anyio.sleep(0.2)
        return self.list_changed

    def client(self, http: httpx2.AsyncClient) -> Client:
        return connect(streamable_http_client(self.url, http_client=http), LEGACY, message_handler=self._message)

    def http(self) -> httpx2.AsyncClient:
        timeout = httpx2.Timeout(30, read=300)
        return httpx2.AsyncClient(timeout=timeout, event_hooks={"response": [self._response]})


async def names(c: Client) -> list[str]:
    listing = await c.list_tools()
    assert not listing.ttl_ms  # no cache hint in the handshake era
    return [t.name for t in listing.tools]


def legacy_list(state: str) -> list[str]:
    return [*UNBOUND, *ALLOWED[state], *GENERATED]


async def test_handshake_sessions_have_their_own_state_and_list(replicas: Replicas) -> None:
    one, two, three = Session(replicas.a), Session(replicas.a), Session(replicas.b)
    async with (
        one.http() as h1,
        two.http() as h2,
        three.http() as h3,
        one.client(h1) as c1,
        two.client(h2) as c2,
        three.client(h3) as c3,
    ):
        for c in (c1, c2, c3):
            tools = c.server_capabilities.tools
            assert tools is not None and tools.list_changed is True
            assert await names(c) == STABLE
        await ok(c1, "invoice_submit", None)
        assert await one.settled(1) == 1
        assert await names(c1) == legacy_list("review")
        assert await names(c2) == STABLE  # the other session on the same replica holds no state
        assert await names(c3) == STABLE  # nor one on the other replica
        assert (await status(c2))["state"] == "draft"
        refused = await call(c2, "invoice_approve", None)
        assert refused.is_error and text(refused) == wrong_state("invoice_approve", "draft", "review")
        await ok(c2, "invoice_submit", None)
        await ok(c2, "invoice_reject", None)  # two real changes for session two
        await ok(c1, "invoice_approve", None)
        assert await one.settled(2) == 2
        assert await two.settled(2) == 2
        assert await three.settled(0) == 0
        assert (await status(c1))["state"] == "approved"
        assert (await status(c2))["state"] == "draft"
        assert (await status(c3))["state"] == "draft"
        assert await names(c1) == legacy_list("approved")
        assert await names(c2) == legacy_list("draft")  # it holds its state since its submit
        assert await names(c3) == STABLE
        # Another session's key cannot be passed as a handle, even by someone who knows its session id.
        [session_one] = one.session_ids
        forged = f"session:{session_one}:invoice"
        for c in (c2, c3):
            stolen = await call(c, "invoice_discharge", forged)
            assert stolen.is_error and "Unknown or expired workflow_id" in text(stolen)
            peek = await c.call_tool("invoice_status", {"workflow_id": forged})
            assert peek.is_error and "Unknown or expired workflow_id" in text(peek)
        assert (await status(c1))["state"] == "approved"
        # An explicit handle works in this era too, on either replica, and is no list change.
        handle = await start(c2)
        await ok(c2, "invoice_submit", handle)
        await ok(c3, "invoice_approve", handle)
        assert (await status(c1, handle))["state"] == "approved"
        assert await two.settled(2) == 2 and await three.settled(0) == 0
