"""Reliability of the server process: SIGTERM/SIGINT on stdio close the store (freeing its locks) and exit 0, and
every tool call logs one structured line.

Each test runs `python -m <package>` as a real subprocess, spoken to with JSON-RPC lines on its stdin and stdout.
A handler that must be "running" when the signal comes waits for a file to appear, and the test waits for the file
it creates when it starts: no sleeps, no wall-clock races.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from fusiongen.api import Generation
from tests.support.build import build
from tests.support.processes import server_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT = 60.0  # seconds to wait for a reply or an exit on a loaded machine (never a pass/fail threshold)
SECRET = "s3cr3t-argument-4d1e"

SPEC = """\
[server]
name = "steady"

[workflows.flow]
initial = "a"
[workflows.flow.states]
a = { on = { GO = "b" } }
b = { type = "final" }

[tools."flow.go"]
description = "Move the flow on."
bind_state = { workflow = "flow", states = ["a"], transition = "GO" }

[tools.note]
description = "Takes a note."
input = { text = "string" }
"""

HANDLERS = """\
import asyncio
import os
from pathlib import Path


async def flow_go(args):
    # Says that it runs, then waits for the test's go-ahead (a file), so a signal can reach it mid-call.
    Path(os.environ["STEADY_STARTED"]).touch()
    while not Path(os.environ["STEADY_RELEASE"]).exists():
        await asyncio.sleep(0.02)


def note(args):
    return None
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, Path]:
    out = tmp_path_factory.mktemp("steady") / "out"
    return build(SPEC, out, handlers=HANDLERS), out


class Stdio:
    """One `python -m steady_server` process on stdio; stderr goes to a file."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 1
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            future = self.pending.pop(message.get("id"), None) if "id" in message else None
            if future is not None:
                future.set_result(message)

    def send(self, method: str, params: dict[str, Any] | None = None) -> asyncio.Future[dict[str, Any]]:
        assert self.process.stdin is not None
        request_id, self.next_id = self.next_id, self.next_id + 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        return future

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await asyncio.wait_for(self.send(method, params), WAIT)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = await self.request("tools/call", {"name": tool, "arguments": arguments})
        return dict(reply["result"])

    async def initialize(self) -> None:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        await self.request("initialize", hello)
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.process.wait(), WAIT)


@asynccontextmanager
async def stdio_process(out: Path, log: Path, *args: str, **env: str) -> AsyncIterator[Stdio]:
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steady_server", *args, cwd=out, env=server_env(out, **env),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=sink,
        )  # fmt: skip
        server = Stdio(process)
        try:
            yield server
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            server.reader.cancel()


def files(tmp_path: Path) -> dict[str, str]:
    return {"STEADY_STARTED": str(tmp_path / "started"), "STEADY_RELEASE": str(tmp_path / "release")}


async def appeared(path: Path) -> None:
    async with asyncio.timeout(WAIT):
        while not path.exists():
            await asyncio.sleep(0.02)


def live_locks(database: Path) -> int:
    """Lock rows still held (a released row may stay behind, expired, keeping its fence counter)."""
    with sqlite3.connect(database) as db:
        query = "SELECT count(*) FROM workflow_locks WHERE expires_at > ?"
        return int(db.execute(query, (time.time(),)).fetchone()[0])


# --- 4. SIGTERM / SIGINT on stdio ------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_while_idle_exits_0(tmp_path: Path, steady: tuple[Generation, Path], signum: int) -> None:
    """An idle stdio server (the transport waits on stdin) closes its store and exits 0 on SIGTERM and SIGINT."""
    database = tmp_path / "state.db"
    args = ("--state-store", f"sqlite:///{database}", "--log-level", "info")
    async with stdio_process(steady[1], tmp_path / "server.log", *args, **files(tmp_path)) as server:
        await server.initialize()
        assert (await server.call("flow_start", {}))["isError"] is False
        server.process.send_signal(signum)
        assert await server.exit_code() == 0, (tmp_path / "server.log").read_text()
    assert f"{signal.Signals(signum).name}: closing and exiting" in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_mid_call_frees_the_lock_for_the_next_process(
    tmp_path: Path, steady: tuple[Generation, Path], signum: int
) -> None:
    """A signal while a bound handler runs (holding its handle's SQLite lock row): the handler is cancelled, its
    request answered with an error, exit 0, the lock row is released, and a new process takes the same handle's
    lock at once. The first process holds the lock for an hour (`--lock-ttl 3600`), so an unreleased row would
    make the second call BUSY after its 10 s lock wait."""
    out, database = steady[1], tmp_path / "state.db"
    args = ("--state-store", f"sqlite:///{database}", "--lock-ttl", "3600")
    async with stdio_process(out, tmp_path / "first.log", *args, **files(tmp_path)) as first:
        await first.initialize()
        started = await first.call("flow_start", {})
        handle = started["structuredContent"]["workflow_id"]
        pending = first.send("tools/call", {"name": "flow_go", "arguments": {"workflow_id": handle}})
        await appeared(tmp_path / "started")
        assert live_locks(database) == 1  # the handler runs under the lock
        first.process.send_signal(signum)
        assert await first.exit_code() == 0, (tmp_path / "first.log").read_text()
        await asyncio.wait_for(first.reader, WAIT)  # stdout read to its end
        # The call was stopped, not finished: the SDK answers a request cancelled at shutdown "Connection closed".
        assert pending.result()["error"] == {"code": -32000, "message": "Connection closed"}, pending.result()
    assert live_locks(database) == 0
    (tmp_path / "release").touch()
    async with stdio_process(out, tmp_path / "second.log", *args, **files(tmp_path)) as second:
        await second.initialize()
        moved = await second.call("flow_go", {"workflow_id": handle})
        assert moved["isError"] is False, moved
        assert moved["content"][0]["text"] == "flow_go: done."
        status = await second.call("flow_status", {"workflow_id": handle})
        assert status["structuredContent"]["state"] == "b"
        second.process.stdin.close()  # type: ignore[union-attr]
        assert await second.exit_code() == 0


# --- 5. one structured log line per tool call ------------------------------------------------------------

CALL_LINE = re.compile(r" INFO steady_server: call tool=(\S+) outcome=(\S+) duration_ms=(\d+\.\d) handle=(\S+)$")


def digest(handle: str) -> str:
    return "sha256:" + hashlib.sha256(handle.encode()).hexdigest()[:8]


async def test_every_tool_call_logs_one_line(tmp_path: Path, steady: tuple[Generation, Path]) -> None:
    """At --log-level info each call logs one line on the server's logger: tool, outcome (ok or the error code),
    duration in ms and the handle's short hash (the one passed or minted), never an argument or result value."""
    (tmp_path / "release").touch()
    log = tmp_path / "server.log"
    async with stdio_process(steady[1], log, "--log-level", "info", **files(tmp_path)) as server:
        await server.initialize()
        started = await server.call("flow_start", {})
        handle = started["structuredContent"]["workflow_id"]
        results = [
            await server.call("note", {"text": SECRET}),
            await server.call("note", {"text": 7}),
            await server.call("flow_go", {"workflow_id": handle}),
            await server.call("flow_go", {"workflow_id": handle}),
            await server.call("flow_status", {"workflow_id": handle}),
            await server.call("flow_go", {}),
        ]
        unknown = await server.request("tools/call", {"name": "nope", "arguments": {"text": SECRET}})
        assert "error" in unknown
        server.process.stdin.close()  # type: ignore[union-attr]
        assert await server.exit_code() == 0
    assert [r["isError"] for r in results] == [False, True, False, True, False, False]
    logged = log.read_text()
    calls = [m.groups() for line in logged.splitlines() if (m := CALL_LINE.search(line))]
    assert [(tool, outcome, hashed) for tool, outcome, _, hashed in calls] == [
        ("flow_start", "ok", digest(handle)),
        ("note", "ok", "-"),
        ("note", "VALIDATION_ERROR", "-"),
        ("flow_go", "ok", digest(handle)),
        ("flow_go", "FORBIDDEN", digest(handle)),
        ("flow_status", "ok", digest(handle)),
        ("flow_go", "ok", "-"),  # the session's own state: no handle to show
    ], logged
    assert logged.count(" call tool=") == len(calls)  # one line per call, the unknown tool's JSON-RPC error none
    for value in (SECRET, handle, '"7"', "done."):
        assert value not in logged


async def test_no_call_lines_at_the_default_level(tmp_path: Path, steady: tuple[Generation, Path]) -> None:
    """The call log is at info: the default --log-level warning shows none of it."""
    log = tmp_path / "server.log"
    async with stdio_process(steady[1], log, **files(tmp_path)) as server:
        await server.initialize()
        assert (await server.call("note", {"text": "x"}))["isError"] is False
        server.process.stdin.close()  # type: ignore[union-attr]
        assert await server.exit_code() == 0
    assert " call tool=" not in log.read_text()
