"""Faults between a handler and its commit, with real processes: a generated HTTP server on a real redis-server that
is stopped (and restarted from its append-only file) or frozen (SIGSTOP) while a transition's handler runs.

What must hold (issue: reliability): the caller is never told "done." for a transition that was not saved; a retry
runs the handler again only with the same idempotency key (`invoice.approve`, safe to run again) or is refused as
IN_DOUBT until `invoice.resolve` (`invoice.discharge`, a mutation); and the server recovers without a restart.
Each handler run appends `start|end <tool> <key> <attempt>` to a log the assertions count. Nothing asserts on the
wall clock: the test waits for files and conditions with generous timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.support.build import SPECS, build
from tests.support.client import MODERN, connect
from tests.support.processes import http_server, server_env
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]
WAIT = 60.0  # seconds to wait for a condition on a loaded machine (never a pass/fail threshold)
LEASE = "2"  # --lock-ttl: a short lease, so that a retry after a fault does not wait long
INVOICE = {"invoice_id": "inv-2"}

SHIM = '''\
"""Test shim: the real billing handlers; approve and discharge log each run and wait while a hold file exists."""
import asyncio
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location("_real_billing_handlers", os.environ["FG_REAL_HANDLERS"])
_real = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _real
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


def _log(event, tool, ctx):
    with open(os.environ["FG_RUNS"], "a") as log:
        log.write(f"{event} {tool} {ctx.idempotency_key} {ctx.attempt}\\n")


async def _held(tool, real, args, ctx):
    _log("start", tool, ctx)
    while os.path.exists(os.environ["FG_HOLD"]):
        await asyncio.sleep(0.02)
    result = await real(args) if asyncio.iscoroutinefunction(real) else real(args)
    _log("end", tool, ctx)
    return result


async def approve_invoice(args, ctx):
    return await _held("invoice_approve", _real.approve_invoice, args, ctx)


async def discharge_invoice(args, ctx):
    return await _held("invoice_discharge", _real.discharge_invoice, args, ctx)
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Rig:
    """One generated billing server over HTTP on a real Redis that the test can stop, restart and freeze."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.runs, self.hold = tmp_path / "runs.log", tmp_path / "hold"
        self.redis_dir = tmp_path / "redis"
        self.redis_dir.mkdir()
        self.port, self._stop = self._redis()
        self.pid = _redis_pid(self.port)

    def _redis(self, port: int | None = None) -> tuple[int, Callable[[], None]]:
        # Every write is in the append-only file before Redis answers, so a restart keeps every record.
        return start_redis(self.redis_dir, "--appendonly", "yes", "--appendfsync", "always", port=port)

    def stop_redis(self) -> None:
        self._stop()

    def restart_redis(self) -> None:
        self.port, self._stop = self._redis(self.port)
        self.pid = _redis_pid(self.port)

    def runs_of(self, tool: str) -> list[tuple[str, str, str]]:
        """(event, key, attempt) of every logged run of `tool`."""
        lines = self.runs.read_text().splitlines() if self.runs.exists() else []
        return [(e, k, a) for e, t, k, a in (line.split() for line in lines) if t == tool]


def _redis_pid(port: int) -> int:
    """The process id of the redis-server on `port`, as it reports it (INFO server: process_id)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        reply = b""
        while b"process_id:" not in reply or not reply.split(b"process_id:", 1)[1].count(b"\r\n"):
            chunk = sock.recv(65536)
            assert chunk, "redis-server closed the connection"
            reply += chunk
    return int(reply.split(b"process_id:", 1)[1].split(b"\r\n", 1)[0])


@contextlib.asynccontextmanager
async def serving(rig: Rig) -> AsyncIterator[Any]:
    out, shim = rig.tmp_path / "out", rig.tmp_path / "shim"
    build(SPECS / "billing.toml", out)
    shim.mkdir()
    (shim / "billing_handlers.py").write_text(SHIM, encoding="utf-8")
    env = server_env(
        out, shim, FG_REAL_HANDLERS=str(SPECS / "billing_handlers.py"), FG_RUNS=str(rig.runs), FG_HOLD=str(rig.hold)
    )
    args = ("--state-store", f"redis://127.0.0.1:{rig.port}/0", "--lock-ttl", LEASE)
    with http_server(out, *args, env=env, log=rig.tmp_path / "server.log") as url:
        async with connect(url, MODERN) as client:
            yield client


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def code(result: types.CallToolResult) -> str | None:
    shown = text(result)
    return shown.split('code="', 1)[1].split('"', 1)[0] if result.is_error and 'code="' in shown else None


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def call_until_settled(client: Any, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Call as an agent following the errors' advice would: again while the store is coming back or the dead lease
    still holds the lock (STORE_UNAVAILABLE, BUSY); any other answer is returned."""
    deadline = time.monotonic() + WAIT
    while True:
        result = await client.call_tool(tool, arguments)
        if code(result) not in ("STORE_UNAVAILABLE", "BUSY") or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.2)


async def walk_to(client: Any, *tools: str) -> str:
    started = await client.call_tool("invoice_start", {})
    handle: str = started.structured_content["workflow_id"]
    for tool in tools:
        result = await client.call_tool(tool, {**INVOICE, "workflow_id": handle})
        assert not result.is_error, text(result)
    return handle


async def held_call(client: Any, rig: Rig, tool: str, handle: str) -> asyncio.Task[types.CallToolResult]:
    """Start `tool` with its handler held, and return once the handler is running."""
    rig.hold.touch()
    before = len(rig.runs_of(tool))
    task = asyncio.create_task(client.call_tool(tool, {**INVOICE, "workflow_id": handle}))
    await until(lambda: len(rig.runs_of(tool)) > before, f"{tool}'s handler to start")
    return task


async def state_of(client: Any, handle: str) -> dict[str, Any]:
    status = await call_until_settled(client, "invoice_status", {"workflow_id": handle})
    assert not status.is_error, text(status)
    data: dict[str, Any] = status.structured_content
    return data


async def test_redis_stopped_between_handler_and_commit(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    try:
        async with serving(rig) as client:
            # A tool that is safe to run again: the retry runs it with the same key, and commits once.
            handle = await walk_to(client, "invoice_submit")
            approve = await held_call(client, rig, "invoice_approve", handle)
            rig.stop_redis()
            rig.hold.unlink()
            failed = await approve
            assert code(failed) in ("STORE_UNAVAILABLE", "CONFLICT"), text(failed)  # never "done."
            rig.restart_redis()
            retried = await call_until_settled(client, "invoice_approve", {**INVOICE, "workflow_id": handle})
            assert not retried.is_error, text(retried)
            assert (await state_of(client, handle))["state"] == "approved"
            runs = rig.runs_of("invoice_approve")[-4:]
            assert [(e, a) for e, _, a in runs] == [("start", "1"), ("end", "1"), ("start", "2"), ("end", "2")]
            assert len({k for _, k, _ in runs}) == 1  # one key for both runs of the one transition

            # A mutation: the retry is refused until someone says whether the first run took effect.
            discharge = await held_call(client, rig, "invoice_discharge", handle)
            rig.stop_redis()
            rig.hold.unlink()
            failed = await discharge
            assert code(failed) in ("STORE_UNAVAILABLE", "CONFLICT"), text(failed)
            rig.restart_redis()
            refused = await call_until_settled(client, "invoice_discharge", {**INVOICE, "workflow_id": handle})
            assert code(refused) == "IN_DOUBT", text(refused)
            assert (await state_of(client, handle))["pending"]["tool"] == "invoice_discharge"
            assert len(rig.runs_of("invoice_discharge")) == 2  # start and end of the first run only
            resolved = await client.call_tool("invoice_resolve", {"workflow_id": handle, "outcome": "completed"})
            assert not resolved.is_error, text(resolved)
            assert (await state_of(client, handle))["state"] == "discharged"
            assert len(rig.runs_of("invoice_discharge")) == 2  # "completed": no second run
    finally:
        rig.stop_redis()


async def test_redis_frozen_while_the_handler_runs(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    try:
        async with serving(rig) as client:
            handle = await walk_to(client, "invoice_submit")
            approve = await held_call(client, rig, "invoice_approve", handle)
            os.kill(rig.pid, signal.SIGSTOP)
            try:
                # Frozen for longer than the lease: its renewals cannot get through.
                await asyncio.sleep(float(LEASE) * 2)
                rig.hold.unlink()
                await asyncio.sleep(float(LEASE))
            finally:
                os.kill(rig.pid, signal.SIGCONT)
            failed = await approve
            assert code(failed) in ("STORE_UNAVAILABLE", "CONFLICT"), text(failed)  # the lease was lost: not done
            assert (await state_of(client, handle))["state"] == "review"
            retried = await call_until_settled(client, "invoice_approve", {**INVOICE, "workflow_id": handle})
            assert not retried.is_error, text(retried)
            assert (await state_of(client, handle))["state"] == "approved"
            runs = rig.runs_of("invoice_approve")
            assert [a for e, _, a in runs if e == "start"] == ["1", "2"] and len({k for _, k, _ in runs}) == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(rig.pid, signal.SIGCONT)
        rig.stop_redis()
