"""Pending transitions, idempotency keys and IN_DOUBT (fusiongen/runtime/_gate.py, state_store.py).

Before a transition's handler runs, the store records it as pending; the save of the new state clears it. These
tests drive `Gate.call` / `Gate.resolve` directly over all three bundled stores (a real redis-server), with a route
that stands in for `run_tool` and records the context each run got. What they pin: a run whose outcome is unknown
(the handler raised, the store failed before the save, the process vanished) is either run again with the *same*
idempotency key (tools that are safe to run again) or refused as IN_DOUBT until `<workflow>.resolve` settles it
(tools that are not: mutations by default); a caller is told "done." only for a committed transition.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fusiongen.runtime import _gate, _results, _values, state_store
from tests.support.redis_server import start_redis
from tests.test_runtime_gate import HANDLE_KEY, HANDSHAKE, MACHINE, Ctx, Route, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

Binding = _gate.Binding
# expense.pay is the one that must not run twice (a payment): refused when in doubt.
BINDINGS = {
    "expense.submit": Binding("expense", frozenset({"draft"}), "SUBMIT"),
    "expense.approve": Binding("expense", frozenset({"pending"}), "APPROVE"),
    "expense.reject": Binding("expense", frozenset({"pending"}), "REJECT"),
    "expense.pay": Binding("expense", frozenset({"approved"}), "PAY", retry_in_doubt=False),
    "expense.revise": Binding("expense", frozenset({"rejected"}), "REVISE"),
    "expense.peek": Binding("expense", frozenset({"draft", "pending", "approved"}), None),
}
MACHINES = {"expense": MACHINE}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        made: Any = state_store.MemoryStore()
    elif request.param == "sqlite":
        made = state_store.SQLiteStore(str(tmp_path / "state.db"), namespace="t")
    else:
        made = state_store.open_store(request.getfixturevalue("redis_url") + f"?prefix=test:{uuid.uuid4().hex}:")
    yield made
    await made.close()


@pytest.fixture
def gate(store: Any) -> _gate.Gate:
    return _gate.Gate(store, MACHINES, BINDINGS, HANDLE_KEY)


async def started(gate: _gate.Gate) -> str:
    result = await gate.start(MACHINE, {}, Ctx())
    assert result.structured_content is not None
    handle = result.structured_content[HANDLE_KEY]
    assert isinstance(handle, str)
    return handle


async def call(gate: _gate.Gate, tool: str, handle: str, route: Route | None = None) -> types.CallToolResult:
    return await gate.call(tool, {HANDLE_KEY: handle}, Ctx(), route or Route())


async def state_of(gate: _gate.Gate, handle: str) -> dict[str, Any]:
    result = await gate.status(MACHINE, {HANDLE_KEY: handle}, Ctx())
    assert result.structured_content is not None
    return result.structured_content


def crashed() -> Route:
    """A handler that raised: its effects may or may not have happened."""
    return Route(result=_results.handler_failed("t", RuntimeError("boom")))


async def to_approved(gate: _gate.Gate, handle: str) -> None:
    for tool in ("expense.submit", "expense.approve"):
        assert not (await call(gate, tool, handle)).is_error


# --- tools safe to run again: same key, next attempt ------------------------------------------------------


async def test_a_run_again_after_an_unknown_outcome_gets_the_same_key(gate: _gate.Gate) -> None:
    handle = await started(gate)
    first, second = crashed(), Route()
    await call(gate, "expense.submit", handle, first)
    assert (await state_of(gate, handle))["pending"] == {
        "tool": "expense.submit",
        "attempts": 1,
        "next": "call expense.submit again",
    }
    result = await call(gate, "expense.submit", handle, second)
    assert result is second.result  # done: committed this time
    [(_, one)], [(_, two)] = first.calls, second.calls
    assert one.idempotency_key == two.idempotency_key and one.idempotency_key is not None
    assert (one.attempt, two.attempt) == (1, 2)
    assert (two.state, two.handle, two.workflow) == ("draft", handle, "expense")
    status = await state_of(gate, handle)
    assert (status["state"], status["pending"]) == ("pending", None)


async def test_keys_differ_per_transition_and_per_visit_of_a_state(gate: _gate.Gate) -> None:
    handle = await started(gate)
    routes = [Route() for _ in range(4)]
    for tool, route in zip(
        ["expense.submit", "expense.reject", "expense.revise", "expense.submit"], routes, strict=True
    ):
        assert not (await call(gate, tool, handle, route)).is_error
    keys = [route.calls[0][1].idempotency_key for route in routes]
    assert len(set(keys)) == 4  # the second submit from draft is a new transition: a new key


async def test_a_call_that_fires_no_transition_gets_no_key_and_leaves_a_pending_alone(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await call(gate, "expense.submit", handle, crashed())
    peek = Route()
    assert not (await call(gate, "expense.peek", handle, peek)).is_error
    assert peek.calls[0][1].idempotency_key is None
    assert (await state_of(gate, handle))["pending"] is not None


async def test_invalid_arguments_leave_nothing_pending(gate: _gate.Gate) -> None:
    handle = await started(gate)
    refused = _results.validation_error("expense.submit", [_values.FieldError("amount", "m")])
    assert await call(gate, "expense.submit", handle, Route(result=refused)) is refused
    assert (await state_of(gate, handle))["pending"] is None
    again = Route()
    await call(gate, "expense.submit", handle, again)
    assert again.calls[0][1].attempt == 1


async def test_another_tool_supersedes_a_pending_that_is_safe_to_run_again(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await call(gate, "expense.submit", handle)
    await call(gate, "expense.approve", handle, crashed())
    reject = Route()
    assert await call(gate, "expense.reject", handle, reject) is reject.result
    assert reject.calls[0][1].attempt == 1
    assert (await state_of(gate, handle))["state"] == "rejected"


# --- tools that must not simply run again: IN_DOUBT until resolved -----------------------------------------


async def test_a_refusing_tool_in_doubt_blocks_every_transition_until_resolved(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await to_approved(gate, handle)
    pay = crashed()
    await call(gate, "expense.pay", handle, pay)
    again = Route()
    refused = await call(gate, "expense.pay", handle, again)
    assert refused.is_error and again.calls == []  # the handler did not run a second time
    assert text_of(refused) == (
        '<tool_error tool="expense.pay" code="IN_DOUBT" severity="error"><message>An earlier call of expense.pay '
        'on workflow "expense" started but its outcome is unknown (the server stopped, the state store failed or '
        "the handler failed while it ran): its effects may or may not have happened.</message><recovery>Do not "
        "simply retry: check whether expense.pay took effect (ask the user, or look it up), then call "
        'expense.resolve with outcome "completed" if it did, or "not_completed" if it did not.</recovery>'
        "<available_actions><action>expense.resolve</action></available_actions><details>"
        '<detail key="workflow">expense</detail><detail key="pendingTool">expense.pay</detail>'
        '<detail key="attempts">1</detail></details></tool_error>'
    )
    assert (await state_of(gate, handle))["pending"] == {
        "tool": "expense.pay",
        "attempts": 1,
        "next": "check whether it took effect, then call expense.resolve",
    }


async def test_resolve_not_completed_lets_the_tool_run_again_with_the_same_key(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await to_approved(gate, handle)
    first, second = crashed(), Route()
    await call(gate, "expense.pay", handle, first)
    resolved = await gate.resolve(MACHINE, {HANDLE_KEY: handle, "outcome": "not_completed"}, Ctx())
    assert not resolved.is_error and resolved.structured_content is not None
    assert resolved.structured_content["state"] == "approved"
    assert resolved.structured_content["pending"]["next"] == "call expense.pay again"
    assert await call(gate, "expense.pay", handle, second) is second.result
    assert second.calls[0][1].idempotency_key == first.calls[0][1].idempotency_key
    assert second.calls[0][1].attempt == 2
    assert (await state_of(gate, handle))["state"] == "paid"


async def test_resolve_completed_moves_on_without_running_the_handler(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await to_approved(gate, handle)
    await call(gate, "expense.pay", handle, crashed())
    resolved = await gate.resolve(MACHINE, {HANDLE_KEY: handle, "outcome": "completed"}, Ctx())
    assert resolved.structured_content is not None
    assert (resolved.structured_content["state"], resolved.structured_content["pending"]) == ("paid", None)


async def test_resolve_refuses_when_nothing_is_in_doubt(gate: _gate.Gate) -> None:
    handle = await started(gate)
    await to_approved(gate, handle)
    result = await gate.resolve(MACHINE, {HANDLE_KEY: handle, "outcome": "completed"}, Ctx())
    assert result.is_error and 'code="FORBIDDEN"' in text_of(result)
    assert "Nothing is in doubt" in text_of(result)
    assert (await state_of(gate, handle))["state"] == "approved"  # resolve never skips a handler nobody ran


async def test_resolve_validates_its_arguments(gate: _gate.Gate) -> None:
    result = await gate.resolve(MACHINE, {HANDLE_KEY: 7, "outcome": "maybe", "extra": 1}, Ctx())
    assert result.is_error
    shown = text_of(result)
    assert shown.startswith('<validation_error tool="expense.resolve">')
    assert all(f'<field name="{name}">' in shown for name in (HANDLE_KEY, "outcome", "extra"))


async def test_resolve_of_a_session_state_sends_list_changed(gate: _gate.Gate) -> None:
    ctx = Ctx(protocol_version=HANDSHAKE, session_id="s-1")
    for tool in ("expense.submit", "expense.approve"):
        assert not (await gate.call(tool, {}, ctx, Route())).is_error
    await gate.call("expense.pay", {}, ctx, crashed())
    changes = ctx.session.list_changed
    resolved = await gate.resolve(MACHINE, {"outcome": "completed"}, ctx)
    assert resolved.structured_content is not None and resolved.structured_content["state"] == "paid"
    assert ctx.session.list_changed == changes + 1


# --- store failures around the handler ----------------------------------------------------------------------


class FailingSaves:
    """Forwards to a real store, but every compare_and_set raises (Redis went away just after the handler)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def compare_and_set(self, handle: str, expected_version: int, state: str, *, fence: int | None = None) -> Any:
        raise ConnectionError("Redis connection lost")

    async def set_pending(self, *args: Any, **kwargs: Any) -> Any:
        return await self.real.set_pending(*args, **kwargs)


async def test_a_save_that_fails_after_the_handler_is_never_done_and_retries_with_the_same_key(
    gate: _gate.Gate, store: Any
) -> None:
    handle = await started(gate)
    failing = _gate.Gate(FailingSaves(store), MACHINES, BINDINGS, HANDLE_KEY)
    first = Route()
    result = await call(failing, "expense.submit", handle, first)
    assert result.is_error and 'code="STORE_UNAVAILABLE"' in text_of(result)  # not "done."
    second = Route()
    assert await call(gate, "expense.submit", handle, second) is second.result
    assert second.calls[0][1].idempotency_key == first.calls[0][1].idempotency_key
    assert second.calls[0][1].attempt == 2


async def test_a_pending_that_cannot_be_recorded_runs_no_handler(gate: _gate.Gate, store: Any) -> None:
    class NoPending(FailingSaves):
        async def set_pending(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("Redis connection lost")

    handle = await started(gate)
    route = Route()
    result = await call(_gate.Gate(NoPending(store), MACHINES, BINDINGS, HANDLE_KEY), "expense.submit", handle, route)
    assert 'code="STORE_UNAVAILABLE"' in text_of(result) and route.calls == []


async def test_a_vanished_process_leaves_its_transition_pending(gate: _gate.Gate, store: Any) -> None:
    """The handler's task is cancelled mid-run (as when the process dies): the next call knows it is in doubt."""
    handle = await started(gate)
    await to_approved(gate, handle)
    running = asyncio.Event()

    class Hangs(Route):
        async def __call__(self, arguments: Any, ctx: Any) -> types.CallToolResult:
            running.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    task = asyncio.create_task(call(gate, "expense.pay", handle, Hangs()))
    await asyncio.wait_for(running.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 'code="IN_DOUBT"' in text_of(await call(gate, "expense.pay", handle))


# --- stores ---------------------------------------------------------------------------------------------


async def test_a_pending_survives_reopening_the_sqlite_file(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    first = state_store.SQLiteStore(path, namespace="t")
    gate = _gate.Gate(first, MACHINES, BINDINGS, HANDLE_KEY)
    handle = await started(gate)
    await to_approved(gate, handle)
    await call(gate, "expense.pay", handle, crashed())
    await first.close()
    second = state_store.SQLiteStore(path, namespace="t")
    try:
        record = await second.load(handle)
        assert record is not None and record.pending is not None
        assert (record.state, record.pending.tool, record.pending.retry) == ("approved", "expense.pay", False)
    finally:
        await second.close()


async def test_a_sqlite_file_from_before_pendings_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE workflow_records (handle TEXT PRIMARY KEY, workflow TEXT NOT NULL, state TEXT NOT NULL,"
            " version INTEGER NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID"
        )
        db.execute("INSERT INTO workflow_records VALUES ('t:h1', 'expense', 'draft', 3, 1e12)")
    db.close()
    store = state_store.SQLiteStore(str(path), namespace="t")
    try:
        assert await store.load("h1") == state_store.Record("expense", "draft", 3)
        async with store.lock("h1") as fence:
            pending = state_store.Pending("expense.submit", "k", 1, True)
            assert await store.set_pending("h1", 3, pending, fence=fence) is not None
        assert (await store.load("h1")) == state_store.Record("expense", "draft", 3, pending)
    finally:
        await store.close()


async def test_set_pending_is_fenced_and_versioned(store: Any) -> None:
    await store.create("h", "expense", "draft")
    pending = state_store.Pending("expense.submit", "k", 1, True)
    async with store.lock("h") as fence:
        assert await store.set_pending("h", 2, pending, fence=fence) is None  # a stale version
        assert await store.set_pending("h", 1, pending, fence=fence + 1) is None  # somebody else's fence
        assert await store.set_pending("h", 1, pending, fence=fence) == state_store.Record(
            "expense", "draft", 1, pending
        )
        saved = await store.compare_and_set("h", 1, "pending", fence=fence)
    assert saved == state_store.Record("expense", "pending", 2)  # a save clears the pending
    assert await store.load("h") == saved


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '["t", "k", "1", true]', '["t", "k", 1, 1]'])
def test_an_unreadable_pending_reads_as_none(text: str) -> None:
    assert state_store.Pending.decode(text) is None


# --- the start limit --------------------------------------------------------------------------------------


async def test_starts_are_limited_per_client(store: Any) -> None:
    gate = _gate.Gate(store, MACHINES, BINDINGS, HANDLE_KEY, starts_per_minute=3)
    one, two = Ctx(protocol_version=HANDSHAKE, session_id="a"), Ctx(protocol_version=HANDSHAKE, session_id="b")
    for _ in range(3):
        assert not (await gate.start(MACHINE, {}, one)).is_error
    limited = await gate.start(MACHINE, {}, one)
    assert limited.is_error
    shown = text_of(limited)
    assert 'code="RATE_LIMITED"' in shown and '<detail key="retry_after">20</detail>' in shown
    assert not (await gate.start(MACHINE, {}, two)).is_error  # another client has its own budget


def test_the_limiter_refills_and_forgets_old_clients() -> None:
    limiter = _gate.StartLimiter(60, max_clients=2)
    assert limiter.wait("a") == 0.0
    _, at = limiter.buckets["a"]
    limiter.buckets["a"] = (0.0, at - 0.5)  # half a second after the bucket ran dry: half a token back
    assert limiter.wait("a") == pytest.approx(0.5, abs=0.05)
    limiter.wait("b")
    limiter.wait("c")
    assert list(limiter.buckets) == ["b", "c"]
