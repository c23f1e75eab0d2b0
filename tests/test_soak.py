"""Soak: an HTTP server on a real Redis store under sustained mixed load from a few concurrent clients.

Run by `make soak` (`pytest -m soak`); a plain `pytest` deselects it (pyproject's addopts). Asserts no
unexpected error, every transition's handler run exactly once per workflow (also when two calls race for it)
and bounded memory growth of the server process. The clients walk workflows for SOAK_SECONDS (default 60: some
thousands of walks, seven calls each; how many is reported, never asserted); SOAK_CLIENTS (default 4) of them.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from tests.support.build import build
from tests.support.client import MODERN, connect
from tests.support.processes import free_port, server_env, stop, wait_for_port
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.soak, pytest.mark.anyio, pytest.mark.timeout(1800)]

SECONDS = float(os.environ.get("SOAK_SECONDS", "60"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "4"))
RSS_GROWTH_LIMIT_KB = 64 * 1024  # after warm-up; a leak per call or per walk would exceed it many times over

SPEC = """\
[server]
name = "soak"

[models.Echo]
description = "What was sent."
[models.Echo.fields]
text = "string"

[workflows.order]
initial = "open"
[workflows.order.states]
open = { on = { PAY = "paid" } }
paid = { on = { SHIP = "shipped" } }
shipped = { type = "final" }

[tools."order.pay"]
description = "Pay the order."
bind_state = { workflow = "order", states = ["open"], transition = "PAY" }
input = { walk = "string" }

[tools."order.ship"]
description = "Ship the order."
bind_state = { workflow = "order", states = ["paid"], transition = "SHIP" }
input = { walk = "string" }

[tools.echo]
kind = "query"
description = "Send the text back."
returns = "Echo"
input = { text = "string" }
"""

# Every run of a transition's handler appends "tool walk" to SOAK_RUNS: one short O_APPEND write, whole.
HANDLERS = """\
import os


def _ran(tool, walk):
    fd = os.open(os.environ["SOAK_RUNS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{tool} {walk}\\n".encode())
    finally:
        os.close(fd)


def order_pay(args):
    _ran("order.pay", args.walk)


def order_ship(args):
    _ran("order.ship", args.walk)


def echo(args):
    return {"text": args.text}
"""


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@contextmanager
def soak_server(out: Path, log: Path, redis_port: int, runs: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    command = [sys.executable, "-m", "soak_server", "--http", "--port", str(port)]
    command += ["--state-store", f"redis://127.0.0.1:{redis_port}/0"]
    with log.open("w+b") as sink:
        process = subprocess.Popen(
            command, cwd=out, env=server_env(out, SOAK_RUNS=str(runs)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
        try:
            wait_for_port(process, port, log=sink, what="soak_server --http")
            yield f"http://127.0.0.1:{port}/mcp", process
        finally:
            stop(process)


def code_of(result: types.CallToolResult) -> str:
    if not result.is_error:
        return "ok"
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
    for code in ("FORBIDDEN", "BUSY", "VALIDATION_ERROR", "STORE_UNAVAILABLE", "CONFLICT", "INTERNAL_ERROR"):
        if f'code="{code}"' in text or (code == "VALIDATION_ERROR" and text.startswith("<validation_error")):
            return code
    return "ERROR"


class Load:
    """The walks the clients run until the deadline, and what went wrong (each entry a walk and what it saw)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.started = 0
        self.done = 0
        self.errors: list[str] = []
        self.races: collections.Counter[str] = collections.Counter()  # how the losing PAY of each walk was refused

    def take(self) -> int | None:
        if time.monotonic() >= self.deadline:
            return None
        self.started += 1
        return self.started

    async def client(self, url: str) -> None:
        async with connect(url, MODERN) as client:
            while (number := self.take()) is not None:
                await self.walk(client, f"w{number}")
                self.done += 1

    async def walk(self, client: object, walk: str) -> None:
        """start, two racing PAYs (exactly one may run), SHIP, status, an echo and an invalid echo."""
        call = client.call_tool  # type: ignore[attr-defined]
        started = await call("order_start", {})
        if started.is_error:
            self.errors.append(f"{walk}: order_start {code_of(started)}")
            return
        handle = started.structured_content["workflow_id"]
        outcomes: list[str] = []

        async def pay() -> None:
            outcomes.append(code_of(await call("order_pay", {"workflow_id": handle, "walk": walk})))

        async with anyio.create_task_group() as group:
            group.start_soon(pay)
            group.start_soon(pay)
        if sorted(outcomes) not in (["FORBIDDEN", "ok"], ["BUSY", "ok"]):
            self.errors.append(f"{walk}: the two racing order_pay got {outcomes}")
        self.races.update(o for o in outcomes if o != "ok")
        shipped = await call("order_ship", {"workflow_id": handle, "walk": walk})
        status = await call("order_status", {"workflow_id": handle})
        echoed = await call("echo", {"text": walk * 20})
        invalid = await call("echo", {"text": 7})
        seen = (
            code_of(shipped),
            status.structured_content and status.structured_content.get("state"),
            echoed.structured_content and echoed.structured_content.get("data"),
            code_of(invalid),
        )
        if seen != ("ok", "shipped", {"text": walk * 20}, "VALIDATION_ERROR"):
            self.errors.append(f"{walk}: {seen}")


async def test_soak_http_redis_mixed_load(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build(SPEC, out, handlers=HANDLERS)
    redis_port, stop_redis = start_redis(tmp_path)
    runs = tmp_path / "runs.txt"
    try:
        with soak_server(out, tmp_path / "server.log", redis_port, runs) as (url, process):
            began = time.monotonic()
            load = Load(SECONDS)
            async with anyio.create_task_group() as group:
                for _ in range(CLIENTS):
                    group.start_soon(load.client, url)
                await anyio.sleep(SECONDS / 10)  # warm-up: sessions, caches and pools are filled by then
                warm_rss = rss_kb(process.pid)
            end_rss = rss_kb(process.pid)
            elapsed = time.monotonic() - began
            assert process.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
    finally:
        stop_redis()
    print(
        f"\nsoak: {load.done} walks ({load.done * 7} calls) from {CLIENTS} clients in {elapsed:.1f} s; "
        f"server RSS {warm_rss} kB after warm-up, {end_rss} kB at the end; the losing racer: {dict(load.races)}"
    )
    assert load.errors == [], load.errors[:20]
    assert load.done == load.started > 0
    counts = collections.Counter(runs.read_text().splitlines())
    expected = {f"{tool} w{n}" for n in range(1, load.done + 1) for tool in ("order_pay", "order_ship")}
    assert set(counts) == expected
    assert [entry for entry, count in counts.items() if count != 1] == []  # no transition's handler ran twice
    assert end_rss - warm_rss < RSS_GROWTH_LIMIT_KB, (warm_rss, end_rss)
