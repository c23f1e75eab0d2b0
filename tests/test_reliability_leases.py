"""Leases and fences: a live holder keeps its lock however slow it is, a dead one loses it within its lease,
and a holder whose lease was lost can never commit (fusiongen/runtime/state_store.py and _gate.py).

Store-contract tests run on all three stores (a real redis-server); gate tests drive `Gate.call` directly; the
last test kills a real generated server with SIGKILL in the middle of a handler. Nothing asserts on the wall
clock: tests wait for conditions (a number of lease renewals, a file, a task) with generous timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fusiongen.runtime import _gate, _results, _store_base, redis_store, state_store
from tests.support.build import SPECS, build
from tests.support.client import MODERN, connect
from tests.support.processes import free_port, http_server, logged, server_env, wait_for_port
from tests.support.redis_server import start_redis
from tests.test_runtime_gate import BINDINGS, HANDLE_KEY, MACHINES, Ctx, start, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
WAIT = 30.0  # seconds to wait for a condition, however loaded the machine
LEASE = 0.3  # a short lease, so that "several lease periods" pass quickly


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Build stores of one backend; two built by one test share state and locks (memory: the same store)."""
    stores: list[Any] = []
    prefix = f"test:{uuid.uuid4().hex}:"
    url = request.getfixturevalue("redis_url") if request.param == "redis" else ""

    def make(**timing: float) -> Any:
        if request.param == "memory":
            if stores:
                return stores[0]
            store: Any = state_store.MemoryStore(**timing)
        elif request.param == "sqlite":
            store = state_store.SQLiteStore(str(tmp_path / "state.db"), **timing)
        else:
            store = redis_store.RedisStore(url, prefix=prefix, **timing)
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()


def count_renewals(store: Any) -> Callable[[int], Any]:
    """Wrap `store._renew`; the result waits until `n` renewals have succeeded since it was installed."""
    renewed = [0]
    changed = asyncio.Event()
    real = store._renew

    async def renew(handle: str, token: str) -> bool:
        ok: bool = await real(handle, token)
        renewed[0] += ok
        changed.set()
        return ok

    store._renew = renew

    async def at_least(n: int) -> None:
        async with asyncio.timeout(WAIT):
            while renewed[0] < n:
                changed.clear()
                await changed.wait()

    return at_least


def stall_renewals(store: Any) -> None:
    """Make `store` renew nothing from now on, as a stalled process (a GC pause, SIGSTOP) would."""

    async def renew(handle: str, token: str) -> bool:
        await asyncio.Event().wait()
        return False

    store._renew = renew


async def vanish(store: Any, h: str) -> tuple[Any, int]:
    """Take h's lock in a task that ends without releasing it (a crashed holder): its context and fence."""

    async def crash() -> tuple[Any, int]:
        held = store.lock(h)
        return held, await held.__aenter__()

    return await asyncio.create_task(crash())


# --- the store contract ----------------------------------------------------------------------------


async def test_a_live_holder_keeps_its_lease_for_many_periods(make_store: Callable[..., Any]) -> None:
    a, b = make_store(lock_ttl=LEASE, lock_wait=WAIT), make_store(lock_ttl=LEASE, lock_wait=WAIT)
    h = uuid.uuid4().hex
    await a.create(h, "wf", "s0")
    renewals = count_renewals(a)
    holding, second_in = asyncio.Event(), asyncio.Event()

    async def second() -> None:
        await holding.wait()
        async with b.lock(h):
            second_in.set()

    waiter = asyncio.create_task(second())
    async with a.lock(h) as fence:
        holding.set()
        await renewals(12)  # four lease periods: a fixed 0.3 s lock would have expired long ago
        assert not second_in.is_set(), "a second holder entered while the lease was being renewed"
        assert await a.compare_and_set(h, 1, "s1", fence=fence) == state_store.Record("wf", "s1", 2)
    await asyncio.wait_for(waiter, WAIT)  # released: the waiter gets in
    assert second_in.is_set()


async def test_a_vanished_holders_lease_expires_and_its_fence_is_refused(make_store: Callable[..., Any]) -> None:
    a, b = make_store(lock_ttl=LEASE, lock_wait=WAIT), make_store(lock_ttl=LEASE, lock_wait=WAIT)
    h = uuid.uuid4().hex
    await a.create(h, "wf", "s0")
    stale, stale_fence = await vanish(a, h)
    async with b.lock(h) as fence:  # waits for the lease to run out, then takes over
        assert fence > stale_fence
        assert await a.compare_and_set(h, 1, "stale", fence=stale_fence) is None
        assert await b.compare_and_set(h, 1, "s1", fence=fence) == state_store.Record("wf", "s1", 2)
        await stale.__aexit__(None, None, None)  # a late release frees nothing
        assert await b.compare_and_set(h, 2, "s2", fence=fence) == state_store.Record("wf", "s2", 3)
    assert await a.compare_and_set(h, 3, "stale", fence=stale_fence) is None
    assert await b.compare_and_set(h, 3, "late", fence=fence) is None  # a released lease commits nothing
    assert await a.load(h) == state_store.Record("wf", "s2", 3)


async def test_a_stalled_holder_cannot_commit_after_a_take_over(make_store: Callable[..., Any]) -> None:
    """The holder is alive but stopped renewing; the version did not change, only the fence can refuse it."""
    a, b = make_store(lock_ttl=LEASE, lock_wait=WAIT), make_store(lock_ttl=LEASE, lock_wait=WAIT)
    h = uuid.uuid4().hex
    await a.create(h, "wf", "s0")
    taken, done = asyncio.Event(), asyncio.Event()

    async def take_over() -> None:
        async with b.lock(h):
            taken.set()
            await done.wait()

    async with a.lock(h) as fence:
        stall_renewals(a)
        thief = asyncio.create_task(take_over())
        await asyncio.wait_for(taken.wait(), WAIT)
        assert await a.compare_and_set(h, 1, "stale", fence=fence) is None
        assert await a.load(h) == state_store.Record("wf", "s0", 1)
        done.set()
        await asyncio.wait_for(thief, WAIT)


async def test_fences_grow_with_every_acquisition(make_store: Callable[..., Any]) -> None:
    a, b = make_store(lock_ttl=LEASE), make_store(lock_ttl=LEASE)
    h = uuid.uuid4().hex
    fences = []
    for store in (a, b, a, b):
        async with store.lock(h) as fence:
            fences.append(fence)
    assert fences == sorted(set(fences)) and all(isinstance(f, int) and f > 0 for f in fences)
    async with a.lock(uuid.uuid4().hex):  # other handles do not disturb h's sequence
        pass
    async with b.lock(h) as fence:
        assert fence > fences[-1]


# --- the gate ----------------------------------------------------------------------------------


async def test_a_handler_slower_than_the_lease_commits_exactly_once(make_store: Callable[..., Any]) -> None:
    a, b = make_store(lock_ttl=LEASE, lock_wait=WAIT), make_store(lock_ttl=LEASE, lock_wait=WAIT)
    gate_a = _gate.Gate(a, MACHINES, BINDINGS, HANDLE_KEY)
    gate_b = _gate.Gate(b, MACHINES, BINDINGS, HANDLE_KEY)
    handle = await start(gate_a)
    renewals = count_renewals(a)
    ran: list[str] = []
    first_running = asyncio.Event()

    async def slow(arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        ran.append("slow")
        first_running.set()
        await renewals(12)  # outlives four lease periods
        return _results.done_result("expense.submit")

    async def fast(arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        ran.append("fast")
        return _results.done_result("expense.submit")

    first = asyncio.create_task(gate_a.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), slow))
    await asyncio.wait_for(first_running.wait(), WAIT)
    second = asyncio.create_task(gate_b.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), fast))
    done = await asyncio.wait_for(first, WAIT)
    refused = await asyncio.wait_for(second, WAIT)
    assert not done.is_error, text_of(done)
    assert refused.is_error and 'code="FORBIDDEN"' in text_of(refused)  # waited, then saw the new state
    assert ran == ["slow"]
    assert await a.load(handle) == state_store.Record("expense", "pending", 2)


async def test_a_caller_whose_lease_was_taken_over_gets_an_error(make_store: Callable[..., Any]) -> None:
    a, b = make_store(lock_ttl=LEASE, lock_wait=WAIT), make_store(lock_ttl=LEASE, lock_wait=WAIT)
    gate_a = _gate.Gate(a, MACHINES, BINDINGS, HANDLE_KEY)
    handle = await start(gate_a)
    taken, finish = asyncio.Event(), asyncio.Event()

    async def take_over() -> None:
        async with b.lock(handle):
            taken.set()
            await finish.wait()

    async def stalled(arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        stall_renewals(a)  # this process stops renewing while the handler runs
        thief = asyncio.create_task(take_over())
        await asyncio.wait_for(taken.wait(), WAIT)
        finish.set()
        await thief
        return _results.done_result("expense.submit")

    result = await gate_a.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), stalled)
    assert result.is_error, "a caller whose transition was lost was told it succeeded"
    assert 'code="CONFLICT"' in text_of(result) and "was not saved" in text_of(result)
    assert "done." not in text_of(result)
    record = await a.load(handle)  # not moved; the lost run stays pending: its outcome is unknown to everyone
    assert record is not None and (record.state, record.version) == ("draft", 1) and record.pending is not None


# --- a real server killed with SIGKILL in the middle of a handler ----------------------------------

SHIM = '''\
"""Test shim: the real billing handlers, with a discharge that says it started and waits for a file."""
import asyncio
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location("_real_billing_handlers", os.environ["FG_REAL_HANDLERS"])
_real = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _real
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


async def discharge_invoice(args, ctx):
    with open(os.path.join(os.environ["FG_STARTED"], str(os.getpid())), "w") as started:
        started.write(f"{ctx.idempotency_key} {ctx.attempt}")
    while not os.path.exists(os.environ["FG_RELEASE"]):
        await asyncio.sleep(0.02)
    with open(os.environ["FG_DISCHARGE_LOG"], "a") as log:
        log.write(f"{os.getpid()} {ctx.idempotency_key} {ctx.attempt}\\n")
    return await _real.discharge_invoice(args)
'''
KILL_LEASE = 2.0  # --lock-ttl of both servers


def lock_row(db: Path) -> tuple[str, str, int, float]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT handle, token, fence, expires_at FROM workflow_locks").fetchall()
    assert len(rows) == 1, rows
    return rows[0]


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_a_killed_replicas_lease_expires_and_its_fence_cannot_commit(tmp_path: Path) -> None:
    out, shim, started = tmp_path / "out", tmp_path / "shim", tmp_path / "started"
    build(SPECS / "billing.toml", out)
    shim.mkdir()
    started.mkdir()
    (shim / "billing_handlers.py").write_text(SHIM, encoding="utf-8")
    db, release, log = tmp_path / "state.db", tmp_path / "release", tmp_path / "discharges.log"
    env = server_env(
        out,
        shim,
        FG_REAL_HANDLERS=str(SPECS / "billing_handlers.py"),
        FG_STARTED=str(started),
        FG_RELEASE=str(release),
        FG_DISCHARGE_LOG=str(log),
    )
    args = ["--state-store", f"sqlite:///{db}", "--lock-ttl", str(KILL_LEASE)]
    port = free_port()
    with (tmp_path / "a.log").open("w+b") as a_log:
        victim = subprocess.Popen(
            [sys.executable, "-m", "billing_server", "--http", "--port", str(port), *args],
            cwd=out,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=a_log,
        )
        try:
            wait_for_port(victim, port, log=a_log, what="replica A")
            client = connect(f"http://127.0.0.1:{port}/mcp", MODERN)
            a = await client.__aenter__()
            try:
                handle = (await a.call_tool("invoice_start", {})).structured_content["workflow_id"]
                for tool in ("invoice_submit", "invoice_approve"):
                    result = await a.call_tool(tool, {"invoice_id": "inv-2", "workflow_id": handle})
                    assert not result.is_error, text(result)
                call = asyncio.create_task(
                    a.call_tool("invoice_discharge", {"invoice_id": "inv-2", "workflow_id": handle})
                )
                await until(lambda: (started / str(victim.pid)).exists(), "A's handler to start")
                _, dead_token, dead_fence, _ = lock_row(db)
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=WAIT)
                call.cancel()
                with contextlib.suppress(BaseException):
                    await call
            finally:
                with contextlib.suppress(Exception):  # its server is dead: closing fails
                    await client.__aexit__(None, None, None)
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
        assert victim.returncode == -signal.SIGKILL, logged(a_log)
    release.touch()  # from now on, handlers finish at once
    with http_server(out, *args, env=env) as url_b:
        async with connect(url_b, MODERN) as b:
            asked = time.monotonic()
            retry = await b.call_tool("invoice_discharge", {"invoice_id": "inv-2", "workflow_id": handle})
            waited = time.monotonic() - asked
            # Not BUSY: the dead holder's lease ran out first. Not run again either: a discharge whose first run
            # may have happened is in doubt until someone says whether it did.
            assert 'code="IN_DOUBT"' in text(retry), text(retry)
            status = (await b.call_tool("invoice_status", {"workflow_id": handle})).structured_content
            assert (status["state"], status["pending"]["tool"]) == ("approved", "invoice_discharge")
            arguments = {"workflow_id": handle, "outcome": "not_completed"}
            assert not (await b.call_tool("invoice_resolve", arguments)).is_error
            retry = await b.call_tool("invoice_discharge", {"invoice_id": "inv-2", "workflow_id": handle})
            assert not retry.is_error, text(retry)
            assert (await b.call_tool("invoice_status", {"workflow_id": handle})).structured_content["state"] == (
                "discharged"
            )
    print(f"retry after SIGKILL waited {waited:.2f} s (lease {KILL_LEASE} s)")
    # The killed handler never finished; the run again did, once, with the key of the first run.
    first_key, first_attempt = (started / str(victim.pid)).read_text().split()
    [(_, key, attempt)] = [line.split() for line in log.read_text().splitlines()]
    assert (key, first_attempt, attempt) == (first_key, "1", "2")
    _, token, fence, _ = lock_row(db)
    assert (token, fence) != (dead_token, dead_fence) and fence > dead_fence
    # Were the killed process to come back with its token, its save would be refused atomically by the database.
    store = state_store.SQLiteStore(str(db), namespace="billing", lock_ttl=KILL_LEASE)
    try:
        loop = asyncio.get_running_loop()
        bare = handle  # the namespace prefix is added by the store
        store._gate[bare] = _store_base._Holder(dead_token, loop.time() + 60, asyncio.Event(), fence=dead_fence)
        record = await store.load(bare)
        assert record is not None and record.state == "discharged"
        assert await store.compare_and_set(bare, record.version, "approved", fence=dead_fence) is None
        assert await store.load(bare) == record
    finally:
        store._gate.clear()
        await store.close()
