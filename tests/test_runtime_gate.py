"""Unit tests of fusiongen/runtime/_gate.py over a real `state_store.MemoryStore`, imported directly.

A small expense workflow (draft → pending → approved/rejected → paid) is gated without any server: the
route stands in for `run_tool`, and the request context is a plain object with the attributes the gate
reads (`protocol_version`, `request.headers`, `session.send_tool_list_changed`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest

from fusiongen.runtime import _gate, _results, _values, state_store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

Binding = _gate.Binding
Machine = _gate.Machine
HANDLE_KEY = "workflow_id"
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"

MACHINE = Machine(
    name="expense",
    initial="draft",
    finals=frozenset({"paid"}),
    transitions={
        ("draft", "SUBMIT"): "pending",
        ("pending", "APPROVE"): "approved",
        ("pending", "REJECT"): "rejected",
        ("approved", "PAY"): "paid",
        ("rejected", "REVISE"): "draft",
        ("pending", "NOTE"): "pending",  # a self-loop: no transition
    },
    tools_by_state={
        "draft": ("expense.submit",),
        "pending": ("expense.approve", "expense.reject", "expense.note"),
        "approved": ("expense.pay",),
        "rejected": ("expense.revise",),
        "paid": (),
    },
)
OTHER = Machine("trip", "planned", frozenset({"done"}), {("planned", "GO"): "done"}, {"planned": ("trip.go",)})
MACHINES = {"expense": MACHINE, "trip": OTHER}
BINDINGS = {
    "expense.submit": Binding("expense", frozenset({"draft"}), "SUBMIT"),
    "expense.approve": Binding("expense", frozenset({"pending"}), "APPROVE"),
    "expense.reject": Binding("expense", frozenset({"pending"}), "REJECT"),
    "expense.revise": Binding("expense", frozenset({"rejected"}), "REVISE"),
    "expense.pay": Binding("expense", frozenset({"approved"}), "PAY"),
    "expense.note": Binding("expense", frozenset({"pending"}), "NOTE"),
    "expense.peek": Binding("expense", frozenset({"draft", "pending"}), None),
    "expense.stuck": Binding("expense", frozenset({"limbo"}), "SUBMIT"),
    "trip.go": Binding("trip", frozenset({"planned"}), "GO"),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Session:
    list_changed: int = 0

    async def send_tool_list_changed(self) -> None:
        self.list_changed += 1


@dataclass
class Ctx:
    protocol_version: str | None = MODERN
    session_id: str | None = None
    session: Session = field(default_factory=Session)

    @property
    def request(self) -> Any:
        headers = {} if self.session_id is None else {"mcp-session-id": self.session_id}
        return SimpleNamespace(headers=headers)


@dataclass
class Route:
    """Stands in for `run_tool`: records its calls and returns `result` (or raises `raises`)."""

    result: types.CallToolResult = field(default_factory=lambda: _results.done_result("t"))
    raises: BaseException | None = None
    calls: list[tuple[dict[str, Any], Any]] = field(default_factory=list)

    async def __call__(self, arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        self.calls.append((dict(arguments), ctx))
        if self.raises is not None:
            raise self.raises
        return self.result


@pytest.fixture
async def store() -> AsyncIterator[state_store.MemoryStore]:
    s = state_store.MemoryStore()
    yield s
    await s.close()


@pytest.fixture
def gate(store: state_store.MemoryStore) -> _gate.Gate:
    return _gate.Gate(store, MACHINES, BINDINGS, HANDLE_KEY)


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


async def start(gate: _gate.Gate, machine: Machine = MACHINE) -> str:
    result = await gate.start(machine, {}, Ctx())
    assert result.structured_content is not None
    handle = result.structured_content[HANDLE_KEY]
    assert isinstance(handle, str)
    return handle


async def walk(gate: _gate.Gate, handle: str, *tools: str) -> None:
    for tool in tools:
        result = await gate.call(tool, {HANDLE_KEY: handle}, Ctx(), Route())
        assert result.is_error is False, text_of(result)


def forbidden_text(tool: str, message: str, recovery: str, actions: list[str], details: dict[str, str]) -> str:
    return (
        f'<tool_error tool="{tool}" code="FORBIDDEN" severity="error"><message>{message}</message>'
        f"<recovery>{recovery}</recovery><available_actions>"
        + "".join(f"<action>{a}</action>" for a in actions)
        + "</available_actions><details>"
        + "".join(f'<detail key="{k}">{v}</detail>' for k, v in details.items())
        + "</details></tool_error>"
    )


# --- is_modern ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ctx", "expected"),
    [
        (SimpleNamespace(protocol_version="2026-07-28"), True),
        (SimpleNamespace(protocol_version="2025-11-25"), False),
        (SimpleNamespace(protocol_version="2025-06-18"), False),
        (SimpleNamespace(protocol_version=None), False),
        (SimpleNamespace(protocol_version="2099-01-01"), False),
        (object(), False),
        (None, False),
    ],
)
def test_is_modern(ctx: object, expected: bool) -> None:
    assert _gate.is_modern(ctx) is expected


# --- start and status --------------------------------------------------------------------------------


async def test_start_mints_a_fresh_handle(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    result = await gate.start(MACHINE, {}, Ctx())
    assert result.is_error is False
    data = result.structured_content
    assert data is not None
    handle = data[HANDLE_KEY]
    assert isinstance(handle, str) and len(handle) >= 32 and ":" not in handle
    assert data == {HANDLE_KEY: handle, "workflow": "expense", "state": "draft", "allowed_tools": ["expense.submit"],
                    "final": False, "pending": None}  # fmt: skip
    assert await store.load(handle) == state_store.Record("expense", "draft", 1)
    assert await start(gate) != handle


async def test_start_takes_no_arguments(gate: _gate.Gate) -> None:
    result = await gate.start(MACHINE, {"b": 1, "a": 2}, Ctx())
    assert result.is_error is True
    assert text_of(result) == (
        '<validation_error tool="expense.start"><field name="a, b">unknown field; this tool takes no arguments.'
        "</field><recovery>Fix the fields above and call the tool again.</recovery></validation_error>"
    )


async def test_status_with_a_handle(gate: _gate.Gate) -> None:
    handle = await start(gate)
    await walk(gate, handle, "expense.submit", "expense.approve", "expense.pay")
    result = await gate.status(MACHINE, {HANDLE_KEY: handle}, Ctx())
    assert result.structured_content == {HANDLE_KEY: handle, "workflow": "expense", "state": "paid",
                                         "allowed_tools": [], "final": True, "pending": None}  # fmt: skip


UNKNOWN_HANDLE = forbidden_text(
    "{tool}",
    'Unknown or expired workflow_id for workflow "expense".',
    "Call expense.start for a new one; handles are never created implicitly.",
    ["expense.start"],
    {"workflow": "expense"},
)


async def test_status_refuses_unknown_forged_and_foreign_handles(gate: _gate.Gate) -> None:
    trip = await start(gate, OTHER)
    await gate.call("expense.submit", {}, Ctx(HANDSHAKE, "s1"), Route())  # the session state exists now
    for handle in ["nope", trip, session_key("s1"), ""]:
        result = await gate.status(MACHINE, {HANDLE_KEY: handle}, Ctx())
        assert result.is_error is True
        assert text_of(result) == UNKNOWN_HANDLE.format(tool="expense.status"), handle


async def test_status_refuses_bad_arguments(gate: _gate.Gate) -> None:
    result = await gate.status(MACHINE, {"x": 1, HANDLE_KEY: 7}, Ctx())
    assert text_of(result) == (
        '<validation_error tool="expense.status">'
        '<field name="x">unknown field; the only argument is "workflow_id".</field>'
        '<field name="workflow_id">expected a string handle.</field>'
        "<recovery>Fix the fields above and call the tool again.</recovery></validation_error>"
    )


async def test_status_of_the_session_state(gate: _gate.Gate) -> None:
    ctx = Ctx(HANDSHAKE, "s1")
    result = await gate.status(MACHINE, {}, ctx)  # before any call: the initial state, no handle shown
    assert result.structured_content == {HANDLE_KEY: None, "workflow": "expense", "state": "draft",
                                         "allowed_tools": ["expense.submit"], "final": False,
                                         "pending": None}  # fmt: skip
    await gate.call("expense.submit", {}, ctx, Route())
    result = await gate.status(MACHINE, {}, ctx)
    assert result.structured_content is not None
    assert (result.structured_content[HANDLE_KEY], result.structured_content["state"]) == (None, "pending")


async def test_status_needs_a_handle_in_the_modern_era(gate: _gate.Gate) -> None:
    result = await gate.status(MACHINE, {}, Ctx(MODERN))
    assert text_of(result) == forbidden_text(
        "expense.status",
        'Tool "expense.status" needs a workflow handle: pass "workflow_id".',
        "Call expense.start to get a workflow_id, then call this tool with it.",
        ["expense.start"],
        {"workflow": "expense"},
    )


# --- the call path: explicit handles -------------------------------------------------------------------


async def test_bound_tool_runs_and_transitions(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    route = Route()
    ctx = Ctx()
    result = await gate.call("expense.submit", {HANDLE_KEY: handle, "amount": 5}, ctx, route)
    assert result is route.result
    [(arguments, call)] = route.calls
    assert arguments == {"amount": 5}  # the handle is the gate's, not the handler's arguments
    # ... but the handler's context carries it, with the state the call runs in and the idempotency key
    assert isinstance(call, _gate.WorkflowCall) and call.session is ctx.session
    assert (call.workflow, call.handle, call.state, call.attempt) == ("expense", handle, "draft", 1)
    assert call.idempotency_key == _gate.idempotency_key(handle, "expense", "SUBMIT", "draft", 1)
    assert await store.load(handle) == state_store.Record("expense", "pending", 2)
    assert ctx.session.list_changed == 0  # an explicit handle's state is not the session's


async def test_bound_tool_refused_outside_its_states(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    route = Route()
    result = await gate.call("expense.approve", {HANDLE_KEY: handle}, Ctx(), route)
    assert route.calls == []
    assert result.is_error is True
    assert text_of(result) == forbidden_text(
        "expense.approve",
        'Tool "expense.approve" is not available in the current state ("draft") of workflow "expense".',
        "Call one of the available actions first.",
        ["expense.submit"],
        {"workflow": "expense", "currentState": "draft", "requiredStates": "pending"},
    )
    assert await store.load(handle) == state_store.Record("expense", "draft", 1)


async def test_refusal_in_the_final_state(gate: _gate.Gate) -> None:
    handle = await start(gate)
    await walk(gate, handle, "expense.submit", "expense.approve", "expense.pay")
    result = await gate.call("expense.peek", {HANDLE_KEY: handle}, Ctx(), Route())
    assert text_of(result) == forbidden_text(
        "expense.peek",
        'Tool "expense.peek" is not available in the current state ("paid") of workflow "expense".',
        'Workflow "expense" is in its final state: nothing more can be done with it. For another one, call '
        f"expense.start and pass the {HANDLE_KEY} it returns.",
        ["expense.start"],
        {"workflow": "expense", "currentState": "paid", "requiredStates": "draft, pending"},
    )


async def test_refusal_in_a_state_without_tools(store: state_store.MemoryStore) -> None:
    machine = Machine("expense", "draft", frozenset(), MACHINE.transitions, {"draft": ()})
    gate = _gate.Gate(store, {"expense": machine}, BINDINGS, HANDLE_KEY)
    handle = await start(gate, machine)
    result = await gate.call("expense.stuck", {HANDLE_KEY: handle}, Ctx(), Route())
    assert text_of(result) == forbidden_text(
        "expense.stuck",
        'Tool "expense.stuck" is not available in the current state ("draft") of workflow "expense".',
        'No tool of workflow "expense" can run in state "draft".',
        [],
        {"workflow": "expense", "currentState": "draft", "requiredStates": "limbo"},
    )


async def test_transition_not_fired_when_the_handler_fails(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    failed = _results.handler_failed("expense.submit", RuntimeError("x"))
    route = Route(result=failed)
    result = await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), route)
    assert result is failed
    assert len(route.calls) == 1
    # The handler raised: whether it had its effect is unknown, so the transition stays pending
    record = await store.load(handle)
    assert record is not None and (record.state, record.version) == ("draft", 1)
    assert record.pending == state_store.Pending("expense.submit", route.calls[0][1].idempotency_key, 1, True)


async def test_transition_not_fired_when_the_route_raises(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    with pytest.raises(ZeroDivisionError):
        await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), Route(raises=ZeroDivisionError()))
    record = await store.load(handle)
    assert record is not None and (record.state, record.version, record.pending is not None) == ("draft", 1, True)
    # and the lock was released: the next call runs (again, as its tool is safe to run again) and commits
    await walk(gate, handle, "expense.submit")
    assert await store.load(handle) == state_store.Record("expense", "pending", 2)


async def test_validation_error_of_the_route_fires_nothing(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    refused = _results.validation_error("expense.submit", [_values.FieldError("amount", "m")])
    assert await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), Route(result=refused)) is refused
    assert await store.load(handle) == state_store.Record("expense", "draft", 1)


async def test_tools_without_event_or_with_a_self_loop_keep_the_state(
    gate: _gate.Gate, store: state_store.MemoryStore
) -> None:
    handle = await start(gate)
    await walk(gate, handle, "expense.peek")
    assert await store.load(handle) == state_store.Record("expense", "draft", 1)
    await walk(gate, handle, "expense.submit", "expense.note", "expense.peek")
    assert await store.load(handle) == state_store.Record("expense", "pending", 2)


async def test_a_full_walk(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    await walk(gate, handle, "expense.submit", "expense.reject", "expense.revise", "expense.submit", "expense.approve")
    assert await store.load(handle) == state_store.Record("expense", "approved", 6)


@pytest.mark.parametrize("era", [MODERN, HANDSHAKE])
async def test_unknown_and_forged_handles_are_refused(
    gate: _gate.Gate, store: state_store.MemoryStore, era: str
) -> None:
    trip = await start(gate, OTHER)
    session_ctx = Ctx(HANDSHAKE, "victim")
    await gate.call("expense.submit", {}, session_ctx, Route())  # creates the victim session's state
    assert await store.load(session_key("victim")) is not None
    forged = ["session:victim:expense", session_key("victim"), f"session:{gate.process_session}:expense"]
    for handle in ["not-minted", trip, *forged, session_key(gate.process_session), ""]:
        route = Route()
        result = await gate.call("expense.approve", {HANDLE_KEY: handle}, Ctx(era), route)
        assert route.calls == [], handle
        assert text_of(result) == UNKNOWN_HANDLE.format(tool="expense.approve"), handle
    assert await store.load("not-minted") is None  # handles are never created implicitly
    assert await store.load("") is None


@pytest.mark.parametrize("handle", [7, ["h"], {"h": 1}, True])
async def test_non_string_handle_is_a_validation_error(gate: _gate.Gate, handle: object) -> None:
    route = Route()
    result = await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), route)
    assert route.calls == []
    assert text_of(result) == (
        '<validation_error tool="expense.submit"><field name="workflow_id">expected a string handle from '
        "expense.start.</field><recovery>Fix the fields above and call the tool again.</recovery></validation_error>"
    )


async def test_modern_call_without_handle_needs_one(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    route = Route()
    result = await gate.call("expense.submit", {"amount": 1}, Ctx(MODERN, "s1"), route)
    assert route.calls == []
    assert text_of(result) == forbidden_text(
        "expense.submit",
        'Tool "expense.submit" needs a workflow handle: pass "workflow_id".',
        "Call expense.start to get a workflow_id, then call this tool with it.",
        ["expense.start"],
        {"workflow": "expense"},
    )
    assert await store.load(session_key("s1")) is None


async def test_busy_handle() -> None:
    store = state_store.MemoryStore(lock_wait=0)
    gate = _gate.Gate(store, MACHINES, BINDINGS, HANDLE_KEY)
    handle = await start(gate)
    route = Route()
    async with store.lock(handle):
        result = await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), route)
    assert route.calls == []
    assert text_of(result) == (
        '<tool_error tool="expense.submit" code="BUSY" severity="error"><message>Another call on this workflow is '
        "still running.</message><recovery>Retry in a moment.</recovery></tool_error>"
    )
    assert await store.load(handle) == state_store.Record("expense", "draft", 1)
    await store.close()


async def test_concurrent_calls_run_one_transition(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    handle = await start(gate)
    ran: list[int] = []
    results: list[types.CallToolResult] = []

    async def slow(arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        ran.append(1)
        await anyio.sleep(0.05)
        return _results.done_result("expense.submit")

    async def one() -> None:
        results.append(await gate.call("expense.submit", {HANDLE_KEY: handle}, Ctx(), slow))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert ran == [1]
    assert sorted(bool(r.is_error) for r in results) == [False, True, True]
    assert await store.load(handle) == state_store.Record("expense", "pending", 2)


async def test_lost_transition_is_logged(
    gate: _gate.Gate, store: state_store.MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    handle = session_key("s9")  # the session's own state

    async def meddling(arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        # as if the lock had expired and another replica moved the workflow meanwhile
        assert await store.compare_and_set(handle, 1, "rejected") is not None
        return _results.done_result("expense.submit")

    ctx = Ctx(HANDSHAKE, "s9")
    result = await gate.call("expense.submit", {}, ctx, meddling)
    # The caller is told the truth: the transition was lost, so the call is an error, not "done.".
    assert result.is_error is True
    assert text_of(result) == (
        '<tool_error tool="expense.submit" code="CONFLICT" severity="error"><message>Tool "expense.submit" ran, '
        'but workflow "expense" changed or was taken over by another call meanwhile, so its move to state '
        '"pending" was not saved.</message><recovery>Call expense.status to see the current state; the tool\'s '
        "effects may have happened, so check them before calling it again.</recovery></tool_error>"
    )
    assert await store.load(handle) == state_store.Record("expense", "rejected", 2)
    assert [r.getMessage() for r in caplog.records] == [
        "tool expense.submit: workflow expense changed while its handler ran; transition to pending lost"
    ]
    # The transition is lost, but the session holds the workflow's state since this call: its list changed.
    assert ctx.session.list_changed == 1


def session_key(session_id: str, workflow: str = "expense") -> str:
    """The store key of a session's own state, computed here independently of the gate's code."""
    return f"session:{hashlib.sha256(session_id.encode()).hexdigest()[:32]}:{workflow}"


async def test_session_ids_never_reach_the_store_in_clear(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    """An HTTP session id is a credential: the store keeps a digest of it, so whoever reads the store
    (a Redis or SQLite file) cannot replay a live session; the same session always maps to the same key."""
    sid = "0123456789abcdef0123456789abcdef"
    ctx = Ctx(HANDSHAKE, sid)
    await gate.call("expense.submit", {}, ctx, Route())
    key = gate.session_handle(ctx, "expense")
    assert key is not None and sid not in key
    assert key == gate.session_handle(Ctx(HANDSHAKE, sid), "expense") == session_key(sid)
    assert await store.load(key) == state_store.Record("expense", "pending", 2)
    assert gate.session_handle(Ctx(HANDSHAKE, sid + "x"), "expense") != key


# --- the call path: the session's own state (handshake era) -----------------------------------------------


async def test_session_state_is_created_and_moves(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    ctx = Ctx(HANDSHAKE, "s1")
    assert await gate.session_states(ctx) == {"expense": "draft", "trip": "planned"}
    result = await gate.call("expense.submit", {"amount": 1}, ctx, Route())
    assert result.is_error is False
    assert await store.load(session_key("s1")) == state_store.Record("expense", "pending", 2)
    assert ctx.session.list_changed == 1
    assert await gate.session_states(ctx) == {"expense": "pending", "trip": "planned"}
    # another session has its own state
    other = Ctx(HANDSHAKE, "s2")
    assert await gate.session_states(other) == {"expense": "draft", "trip": "planned"}
    result = await gate.call("expense.approve", {}, other, Route())
    assert result.is_error is True and "currentState" in text_of(result)
    assert other.session.list_changed == 0


async def test_session_refusal_and_no_change_send_no_list_changed(gate: _gate.Gate) -> None:
    ctx = Ctx(HANDSHAKE, "s1")
    await gate.call("expense.approve", {}, ctx, Route())  # refused: creates nothing, the list stays stable
    assert ctx.session.list_changed == 0 and await gate.held_states(ctx) == {}
    # The first call that passes the gate (here one without a transition) makes the session hold the
    # workflow's state: its list turns from the stable one to the state's, announced once (docs/spec.md §10.5).
    await gate.call("expense.peek", {}, ctx, Route())
    assert ctx.session.list_changed == 1 and await gate.held_states(ctx) == {"expense": "draft"}
    await gate.call("expense.approve", {}, ctx, Route())  # refused
    await gate.call("expense.peek", {}, ctx, Route())  # no event
    failed = _results.error_result("x")
    await gate.call("expense.submit", {}, ctx, Route(result=failed))  # handler failed
    assert ctx.session.list_changed == 1
    await gate.call("expense.submit", {}, ctx, Route())
    await gate.call("expense.note", {}, ctx, Route())  # self-loop
    assert ctx.session.list_changed == 2


async def test_stdio_session_uses_the_process_state(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    ctx = Ctx(HANDSHAKE, None)
    await gate.call("expense.submit", {}, ctx, Route())
    key = session_key(gate.process_session)
    assert await store.load(key) == state_store.Record("expense", "pending", 2)
    assert await gate.session_states(Ctx(HANDSHAKE, None)) == {"expense": "pending", "trip": "planned"}
    assert gate.session_handle(SimpleNamespace(protocol_version=HANDSHAKE), "trip") == (
        session_key(gate.process_session, "trip")
    )
    other = _gate.Gate(store, MACHINES, BINDINGS, HANDLE_KEY)
    assert other.process_session != gate.process_session


async def test_explicit_handle_in_the_handshake_era(gate: _gate.Gate, store: state_store.MemoryStore) -> None:
    ctx = Ctx(HANDSHAKE, "s1")
    handle = await start(gate)
    await gate.call("expense.submit", {HANDLE_KEY: handle}, ctx, Route())
    assert await store.load(handle) == state_store.Record("expense", "pending", 2)
    assert await store.load(session_key("s1")) is None
    assert ctx.session.list_changed == 0
    assert await gate.held_states(ctx) == {}  # walking by handle: the session is listed stable


async def test_a_session_holds_state_from_its_first_session_mode_call(gate: _gate.Gate) -> None:
    """The first bound call without a handle makes the session hold that workflow's state (and only that
    one's); a null handle is the same as none, and a successful transition announces the change once."""
    ctx = Ctx(HANDSHAKE, "s1")
    await gate.status(MACHINES["expense"], {}, ctx)  # reading the session's state holds nothing
    assert await gate.held_states(ctx) == {}
    await gate.call("expense.submit", {HANDLE_KEY: None}, ctx, Route())
    assert await gate.held_states(ctx) == {"expense": "pending"}
    assert ctx.session.list_changed == 1
    assert await gate.session_states(ctx) == {"expense": "pending", "trip": "planned"}


async def test_session_handle_is_none_in_the_modern_era(gate: _gate.Gate) -> None:
    assert gate.session_handle(Ctx(MODERN, "s1"), "expense") is None
    assert gate.session_handle(Ctx(HANDSHAKE, "s1"), "expense") == session_key("s1")
    assert await gate.session_states(Ctx(MODERN, "s1")) == {"expense": "draft", "trip": "planned"}


async def test_session_state_of_another_workflow_reads_as_initial(
    gate: _gate.Gate, store: state_store.MemoryStore
) -> None:
    await store.create(session_key("s1"), "trip", "done")
    assert await gate.session_states(Ctx(HANDSHAKE, "s1")) == {"expense": "draft", "trip": "planned"}


# --- forbidden ---------------------------------------------------------------------------------------


def test_forbidden_escapes_everything() -> None:
    result = _gate.forbidden('t"<', "m<&", "r<", ["a<b"], {'k"': "v</detail>"})
    assert result.is_error is True
    assert text_of(result) == (
        '<tool_error tool="t&quot;&lt;" code="FORBIDDEN" severity="error"><message>m&lt;&amp;</message>'
        "<recovery>r&lt;</recovery><available_actions><action>a&lt;b</action></available_actions>"
        '<details><detail key="k&quot;">v&lt;/detail></detail></details></tool_error>'
    )


# --- handshake_listing -----------------------------------------------------------------------------------


def tool(name: str, description: str = "full") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


def test_handshake_listing() -> None:
    tools = [tool(n) for n in ["invoice.get", "expense.submit", "expense.approve", "expense.peek", "trip.go"]]
    compact = {"expense.submit": tool("expense.submit", "short"), "expense.approve": tool("expense.approve", "short")}

    def listing(expense: str, trip: str) -> list[tuple[str, str | None]]:
        states = {"expense": expense, "trip": trip}
        return [(t.name, t.description) for t in _gate.handshake_listing(tools, compact, BINDINGS, MACHINES, states)]

    assert listing("draft", "planned") == [
        ("invoice.get", "full"),
        ("expense.submit", "short"),  # in the initial state, the compact form
        ("expense.peek", "full"),
        ("trip.go", "full"),
    ]
    assert listing("pending", "done") == [
        ("invoice.get", "full"),
        ("expense.approve", "full"),  # compact only in the initial state
        ("expense.peek", "full"),
    ]
    assert listing("paid", "done") == [("invoice.get", "full")]


def test_handshake_listing_of_a_session_without_state_is_stable() -> None:
    """A workflow the session holds no state of: every bound tool, compact where it runs in the initial state,
    else its stable form; a workflow it holds follows its state."""
    tools = [tool(n) for n in ["invoice.get", "expense.submit", "expense.approve", "expense.peek", "trip.go"]]
    compact = {"expense.submit": tool("expense.submit", "short"), "expense.approve": tool("expense.approve", "short")}
    stable = {t.name: tool(t.name, "stable") for t in tools}
    shown = _gate.handshake_listing(tools, compact, BINDINGS, MACHINES, {}, stable)
    assert [(t.name, t.description) for t in shown] == [
        ("invoice.get", "full"),
        ("expense.submit", "short"),
        ("expense.approve", "stable"),  # compact, but it does not run in the initial state
        ("expense.peek", "stable"),
        ("trip.go", "stable"),
    ]
    held = _gate.handshake_listing(tools, compact, BINDINGS, MACHINES, {"expense": "pending"}, stable)
    assert [(t.name, t.description) for t in held] == [
        ("invoice.get", "full"),
        ("expense.approve", "full"),
        ("expense.peek", "full"),
        ("trip.go", "stable"),  # trip: no state held, still stable
    ]


def test_omissible_handle_marks_only_the_handle() -> None:
    schema = {"type": "object", "properties": {HANDLE_KEY: {"type": "string"}, "x": {"type": "integer"}}}
    bound = types.Tool(name="expense.submit", input_schema=schema)
    [marked, plain] = _gate.handshake_forms([bound, tool("invoice.get")], {"expense.submit"}, HANDLE_KEY)
    assert marked.input_schema["properties"] == {
        HANDLE_KEY: {"type": "string", "nullable": True},
        "x": schema["properties"]["x"],
    }
    assert schema["properties"][HANDLE_KEY] == {"type": "string"}  # the original is left as it was
    assert plain.name == "invoice.get" and plain.input_schema == {"type": "object"}


def test_handshake_listing_keeps_the_tool_objects() -> None:
    tools = [tool("invoice.get"), tool("expense.submit")]
    visible = _gate.handshake_listing(tools, {}, BINDINGS, MACHINES, {"expense": "draft", "trip": "planned"})
    assert visible == tools and all(a is b for a, b in zip(visible, tools, strict=True))
