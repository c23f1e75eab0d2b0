"""Workflow gating of generated servers, driven by a real `mcp.Client` in both protocol eras.

The billing spec binds four tools to the states of `[workflows.invoice]`
(draft --SUBMIT--> review --APPROVE--> approved --DISCHARGE--> discharged, review --REJECT--> draft).
Most tests run the server in-process; the last one runs it as a stdio subprocess over SQLite and
SIGKILLs it.

Handshake era (mode="legacy"): tools/list is every tool until the session holds a state of its own (its
first bound call without a handle that passes the gate); from then on it shows what the session's state
allows, and a transition of the session's own state sends exactly one notifications/tools/list_changed.
2026-07-28: the list is every tool and never changes; bound tools need an explicit handle from `invoice.start`.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from fusiongen.api import Generation
from tests.support.build import SPECS, GeneratedServer, build

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LEGACY, MODERN = "legacy", "2026-07-28"
MODES = [LEGACY, MODERN]
UNBOUND = ["invoice_get", "invoice_list", "invoice_create", "invoice_update", "customer_get", "billing_remind"]
BOUND = ["invoice_submit", "invoice_approve", "invoice_reject", "invoice_discharge"]
GENERATED = ["invoice_start", "invoice_status", "invoice_resolve"]  # resolve: invoice.discharge is a mutation
ALLOWED = {
    "draft": ["invoice_submit"],
    "review": ["invoice_approve", "invoice_reject"],
    "approved": ["invoice_discharge"],
    "discharged": [],
}
# The call that moves the invoice workflow on from each state, and the state it leads to.
WALK = [("invoice_submit", "review"), ("invoice_approve", "approved"), ("invoice_discharge", "discharged")]


@pytest.fixture(scope="module")
def billing_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, Path]:
    out = tmp_path_factory.mktemp("billing") / "out"
    return build(SPECS / "billing.toml", out), out


@pytest.fixture
def billing(billing_build: tuple[Generation, Path]) -> Iterator[GeneratedServer]:
    """Like conftest's `billing` (fresh imports, fresh seeded handler data), built once per module."""
    with GeneratedServer(*billing_build) as server:
        yield server


# --- helpers ---------------------------------------------------------------------------------------


class Notifications:
    """A message_handler that keeps what the server sent; counts tools/list_changed."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def list_changed(self) -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in self.messages)

    async def settled(self) -> int:
        """The list_changed count once anything in flight has arrived."""
        await anyio.sleep(0.05)
        return self.list_changed


def make_server(billing: GeneratedServer, store: Any = "memory") -> Any:
    return billing.package.create_server(billing.handlers, state_store=store)


def client(server: Any, mode: str, notifications: Notifications | None = None) -> Client:
    return Client(server, mode=mode, cache=None, message_handler=notifications)


async def names(c: Client) -> list[str]:
    return [t.name for t in (await c.list_tools()).tools]


def legacy_list(state: str) -> list[str]:
    """The handshake-era list of a session that holds the workflow's state (docs/spec.md §10.5)."""
    return [*UNBOUND, *ALLOWED[state], *GENERATED]


# The handshake-era list of a session that holds no state of the workflow: every tool, as on 2026-07-28.
STABLE = [*UNBOUND, *BOUND, *GENERATED]


def text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def spy(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> list[Any]:
    """Replace a one-argument handler by a wrapper recording its calls (before create_server binds it)."""
    calls: list[Any] = []
    original = getattr(module, name)
    if inspect.iscoroutinefunction(original):

        async def wrapper(args: Any) -> Any:
            calls.append(args)
            return await original(args)
    else:

        def wrapper(args: Any) -> Any:  # type: ignore[misc]
            calls.append(args)
            return original(args)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def arguments_for(tool: str, invoice: str) -> dict[str, Any]:
    return {"invoice_id": invoice, "reason": "r"} if tool == "invoice_reject" else {"invoice_id": invoice}


async def start(c: Client, workflow: str = "invoice") -> str:
    result = await c.call_tool(f"{workflow}_start", {})
    assert not result.is_error, text(result)
    handle = result.structured_content["workflow_id"]
    assert isinstance(handle, str) and re.fullmatch(r"[A-Za-z0-9_-]{32}", handle)  # token_urlsafe(24)
    return handle


async def status(c: Client, handle: str | None = None, workflow: str = "invoice") -> dict[str, Any]:
    result = await c.call_tool(f"{workflow}_status", {} if handle is None else {"workflow_id": handle})
    assert not result.is_error, text(result)
    return dict(result.structured_content)


def with_handle(arguments: dict[str, Any], handle: str | None) -> dict[str, Any]:
    return arguments if handle is None else {**arguments, "workflow_id": handle}


async def ok(c: Client, tool: str, arguments: dict[str, Any], handle: str | None = None) -> None:
    result = await c.call_tool(tool, with_handle(arguments, handle))
    assert not result.is_error, text(result)
    assert text(result) == f"{tool}: done."


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


def to_start(tool: str, message: str, recovery: str) -> str:
    """A refusal whose one way forward is invoice.start."""
    return (
        f'<tool_error tool="{tool}" code="FORBIDDEN" severity="error"><message>{message}</message>'
        f"<recovery>{recovery}</recovery><available_actions><action>invoice_start</action>"
        '</available_actions><details><detail key="workflow">invoice</detail></details></tool_error>'
    )


def unknown_handle(tool: str) -> str:
    return to_start(
        tool,
        'Unknown or expired workflow_id for workflow "invoice".',
        "Call invoice_start for a new one; handles are never created implicitly.",
    )


def needs_handle(tool: str) -> str:
    return to_start(
        tool,
        f'Tool "{tool}" needs a workflow handle: pass "workflow_id".',
        "Call invoice_start to get a workflow_id, then call this tool with it.",
    )


async def session_or_handle(c: Client, mode: str) -> str | None:
    """The handle a test walks: the session's own state (None) in the handshake era, a fresh one otherwise."""
    return None if mode == LEGACY else await start(c)


class RecordingStore:
    """A StateStore that delegates to a real one and remembers every handle created through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.created: list[str] = []

    async def create(self, handle: str, workflow: str, state: str) -> Any:
        self.created.append(handle)
        return await self.inner.create(handle, workflow, state)

    async def load(self, handle: str) -> Any:
        return await self.inner.load(handle)

    async def compare_and_set(self, handle: str, expected_version: int, state: str) -> Any:
        return await self.inner.compare_and_set(handle, expected_version, state)

    def lock(self, handle: str) -> AbstractAsyncContextManager[None]:
        return self.inner.lock(handle)

    async def close(self) -> None:
        await self.inner.close()


# --- tools/list ------------------------------------------------------------------------------------


async def test_handshake_list_shows_what_the_session_state_allows(billing: GeneratedServer) -> None:
    notes = Notifications()
    async with client(make_server(billing), LEGACY, notes) as c:
        assert c.server_capabilities.tools is not None and c.server_capabilities.tools.list_changed is True
        listing = await c.list_tools()
        assert not listing.ttl_ms  # never a cache hint in the handshake era
        # No state of its own yet: the stable list; from its first session-mode call on, the state's list.
        assert [t.name for t in listing.tools] == STABLE
        for expected, (tool, state) in enumerate(WALK, start=1):
            await ok(c, tool, {"invoice_id": "inv-2"})
            assert await notes.settled() == expected
            listing = await c.list_tools()
            assert not listing.ttl_ms
            assert [t.name for t in listing.tools] == legacy_list(state)
            assert (await status(c))["state"] == state
        # In the final state only the unbound and the generated tools are left.
        assert await names(c) == [*UNBOUND, *GENERATED]


async def test_the_handle_is_marked_nullable_in_the_handshake_era_only(billing: GeneratedServer) -> None:
    """smolagents refuses a call that leaves out an input not marked `nullable`: the handshake era, where a
    bound call may leave the handle out, marks it; 2026-07-28 keeps plain JSON Schema (docs/spec.md §10.6)."""
    for mode, marked in ((LEGACY, True), (MODERN, False)):
        async with client(make_server(billing), mode) as c:
            listed = {t.name: t.input_schema for t in (await c.list_tools()).tools}
        for tool in [*BOUND, "invoice_status"]:
            handle = listed[tool]["properties"]["workflow_id"]
            assert handle.get("nullable", False) is marked and handle["type"] == "string", (mode, tool)
            assert "workflow_id" not in listed[tool].get("required", [])
        assert "nullable" not in json.dumps(listed["invoice_get"])


async def test_handshake_reject_goes_back_to_the_draft_list(billing: GeneratedServer) -> None:
    notes = Notifications()
    async with client(make_server(billing), LEGACY, notes) as c:
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"})
        assert await names(c) == legacy_list("review")
        await ok(c, "invoice_reject", {"invoice_id": "inv-2", "reason": "wrong amount"})
        assert await names(c) == legacy_list("draft")
        assert await notes.settled() == 2
    assert billing.handlers.INVOICES["inv-2"]["status"] == "draft"


async def test_2026_list_is_every_tool_and_never_changes(billing: GeneratedServer) -> None:
    notes = Notifications()
    async with client(make_server(billing), MODERN, notes) as c:
        before = await c.list_tools()
        assert [t.name for t in before.tools] == [*UNBOUND, *BOUND, *GENERATED]
        snapshot = before.model_dump(by_alias=True, exclude_none=True)
        handle = await start(c)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("invoice_approve", {"invoice_id": "inv-2"}),  # refused
            ("invoice_submit", {"invoice_id": "inv-2"}),
            ("invoice_approve", {"invoice_id": "no-such-invoice"}),  # the handler fails
            ("invoice_reject", {"invoice_id": "inv-2", "reason": "typo"}),
            ("invoice_submit", {"invoice_id": "inv-2"}),
            ("invoice_approve", {"invoice_id": "inv-2"}),
            ("invoice_discharge", {"invoice_id": "inv-2"}),
            ("invoice_discharge", {"invoice_id": "inv-2"}),  # refused: final
            ("invoice_get", {"id": "inv-2"}),
        ]
        for tool, arguments in calls:
            await c.call_tool(tool, with_handle(arguments, handle))
            assert (await c.list_tools()).model_dump(by_alias=True, exclude_none=True) == snapshot
        assert (await status(c, handle))["state"] == "discharged"
        assert await notes.settled() == 0  # transitions of explicit handles are not list changes
    tools = {t.name: t for t in before.tools}
    for tool in BOUND:  # the stable list says where a bound tool runs and that it needs a handle
        assert "pass workflow_id from invoice_start" in (tools[tool].description or "")
        assert "workflow_id" in tools[tool].input_schema["properties"]


# --- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_out_of_state_call_is_forbidden_and_changes_nothing(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    approvals = spy(monkeypatch, billing.handlers, "approve_invoice")
    discharges = spy(monkeypatch, billing.handlers, "discharge_invoice")
    notes = Notifications()
    async with client(make_server(billing), mode, notes) as c:
        handle = await session_or_handle(c, mode)
        approve = await c.call_tool("invoice_approve", with_handle({"invoice_id": "inv-2"}, handle))
        discharge = await c.call_tool("invoice_discharge", with_handle({"invoice_id": "inv-3"}, handle))
        # The gate comes before argument validation: wrong state and wrong arguments is FORBIDDEN.
        both_wrong = await c.call_tool("invoice_approve", with_handle({"invoice_id": 7, "x": 1}, handle))
        after = await status(c, handle)
        listing = await names(c)
    assert approve.is_error and approve.structured_content is None
    assert text(approve) == (
        '<tool_error tool="invoice_approve" code="FORBIDDEN" severity="error"><message>Tool '
        '"invoice_approve" is not available in the current state ("draft") of workflow "invoice".</message>'
        "<recovery>Call one of the available actions first.</recovery><available_actions>"
        "<action>invoice_submit</action>"
        '</available_actions><details><detail key="workflow">invoice</detail><detail key="currentState">draft'
        '</detail><detail key="requiredStates">review</detail></details></tool_error>'
    )
    assert discharge.is_error and text(discharge) == wrong_state("invoice_discharge", "draft", "approved")
    assert both_wrong.is_error and text(both_wrong) == text(approve)
    assert approvals == [] and discharges == [] and billing.handlers.DISCHARGED == []
    assert billing.handlers.INVOICES["inv-2"]["status"] == "draft"
    assert after == {
        "workflow_id": handle,
        "workflow": "invoice",
        "state": "draft",
        "allowed_tools": ["invoice_submit"],
        "final": False,
        "pending": None,
    }
    # A refusal creates nothing: the session holds no state of its own, so both eras list every tool.
    assert listing == STABLE
    assert await notes.settled() == 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_handler_leaves_the_state(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    approvals = spy(monkeypatch, billing.handlers, "approve_invoice")
    notes = Notifications()
    async with client(make_server(billing), mode, notes) as c:
        handle = await session_or_handle(c, mode)
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"}, handle)
        # The handler raises KeyError for an unknown invoice; invalid arguments never reach it.
        failed = await c.call_tool("invoice_approve", with_handle({"invoice_id": "inv-404"}, handle))
        invalid = await c.call_tool("invoice_approve", with_handle({"invoice_id": 404}, handle))
        after = await status(c, handle)
        listing = await names(c)
        changes = await notes.settled()
        await ok(c, "invoice_approve", {"invoice_id": "inv-2"}, handle)  # still allowed: the state is review
        final = await status(c, handle)
    assert failed.is_error and 'code="INTERNAL_ERROR"' in text(failed)
    assert invalid.is_error and text(invalid).startswith('<validation_error tool="invoice_approve">')
    assert [a.invoice_id for a in approvals] == ["inv-404", "inv-2"]
    assert after["state"] == "review" and after["allowed_tools"] == ["invoice_approve", "invoice_reject"]
    if mode == LEGACY:
        assert listing == legacy_list("review")
        assert changes == 1  # the submit only
    else:
        assert changes == 0
    assert final["state"] == "approved"


@pytest.mark.parametrize("mode", MODES)
async def test_final_state_has_no_way_out(billing: GeneratedServer, mode: str) -> None:
    async with client(make_server(billing), mode) as c:
        handle = await session_or_handle(c, mode)
        for tool, _ in WALK:
            await ok(c, tool, {"invoice_id": "inv-3"}, handle)
        final = await status(c, handle)
        refused = {tool: await c.call_tool(tool, with_handle(arguments_for(tool, "inv-3"), handle)) for tool in BOUND}
        listing = await names(c)
    assert final == {
        "workflow_id": handle,
        "workflow": "invoice",
        "state": "discharged",
        "allowed_tools": [],
        "final": True,
        "pending": None,
    }
    assert text(refused["invoice_discharge"]) == (
        '<tool_error tool="invoice_discharge" code="FORBIDDEN" severity="error"><message>Tool '
        '"invoice_discharge" is not available in the current state ("discharged") of workflow "invoice".'
        '</message><recovery>Workflow "invoice" is in its final state: nothing more can be done with it. For'
        " another one, call invoice_start and pass the workflow_id it returns.</recovery><available_actions>"
        '<action>invoice_start</action></available_actions><details><detail key="workflow">invoice</detail>'
        '<detail key="currentState">discharged</detail><detail key="requiredStates">approved</detail>'
        "</details></tool_error>"
    )
    for tool, required in zip(BOUND, ["draft", "review", "review", "approved"], strict=True):
        assert refused[tool].is_error and text(refused[tool]) == wrong_state(tool, "discharged", required)
    assert billing.handlers.DISCHARGED == ["inv-3"]
    if mode == LEGACY:
        assert listing == [*UNBOUND, *GENERATED]


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_handle_is_refused_and_never_created(billing: GeneratedServer, mode: str) -> None:
    submits: list[Any] = []
    async with client(make_server(billing), mode) as c:
        for bogus in ["no-such-handle", "", "x" * 32]:
            submit = await c.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": bogus})
            state = await c.call_tool("invoice_status", {"workflow_id": bogus})
            again = await c.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": bogus})
            submits.append(bogus)
            assert submit.is_error and text(submit) == unknown_handle("invoice_submit")
            assert state.is_error and text(state) == unknown_handle("invoice_status")
            # The first call did not create it.
            assert again.is_error and text(again) == unknown_handle("invoice_submit")
        wrong_type = await c.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": 7})
        if mode == LEGACY:
            assert (await status(c))["state"] == "draft"  # the session's own state did not move either
    assert wrong_type.is_error and text(wrong_type).startswith(
        '<validation_error tool="invoice_submit"><field name="workflow_id">expected a string handle'
    )
    assert billing.handlers.INVOICES["inv-2"]["status"] == "draft"


async def test_2026_bound_tool_without_handle_names_start(billing: GeneratedServer) -> None:
    async with client(make_server(billing), MODERN) as c:
        submit = await c.call_tool("invoice_submit", {"invoice_id": "inv-2"})
        state = await c.call_tool("invoice_status", {})
        unbound = await c.call_tool("invoice_get", {"id": "inv-2"})  # never gated
    assert submit.is_error and text(submit) == needs_handle("invoice_submit")
    assert state.is_error and text(state) == needs_handle("invoice_status")
    assert not unbound.is_error
    assert billing.handlers.INVOICES["inv-2"]["status"] == "draft"


@pytest.mark.parametrize("mode", MODES)
async def test_session_style_handles_are_refused(billing: GeneratedServer, mode: str) -> None:
    store = RecordingStore(billing.module("state_store").MemoryStore())
    server = make_server(billing, store)
    async with client(server, LEGACY) as owner:
        await ok(owner, "invoice_submit", {"invoice_id": "inv-2"})  # creates the session's own record
        [session_key] = [h for h in store.created if h.startswith("session:")]
        async with client(server, mode) as attacker:
            forged = [session_key, "session:x:invoice", "session::invoice", "a:b"]
            for handle in forged:
                for tool in ("invoice_approve", "invoice_reject"):
                    result = await attacker.call_tool(tool, with_handle(arguments_for(tool, "inv-2"), handle))
                    assert result.is_error and text(result) == unknown_handle(tool)
                peek = await attacker.call_tool("invoice_status", {"workflow_id": handle})
                assert peek.is_error and text(peek) == unknown_handle("invoice_status")
        assert (await status(owner))["state"] == "review"
    assert billing.handlers.INVOICES["inv-2"]["status"] == "review"
    assert not any(h in store.created for h in forged[1:])


# --- handles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_start_mints_a_fresh_handle_in_the_initial_state(billing: GeneratedServer, mode: str) -> None:
    async with client(make_server(billing), mode) as c:
        handles = [await start(c) for _ in range(5)]
        refused = await c.call_tool("invoice_start", {"workflow_id": handles[0]})
        for handle in handles:
            assert await status(c, handle) == {
                "workflow_id": handle,
                "workflow": "invoice",
                "state": "draft",
                "allowed_tools": ["invoice_submit"],
                "final": False,
                "pending": None,
            }
    assert len(set(handles)) == 5
    assert refused.is_error and text(refused) == (
        '<validation_error tool="invoice_start"><field name="workflow_id">unknown field; this tool takes '
        "no arguments.</field><recovery>Fix the fields above and call the tool again.</recovery>"
        "</validation_error>"
    )


async def test_handles_are_isolated(billing: GeneratedServer) -> None:
    async with client(make_server(billing), MODERN) as c:
        first, second = await start(c), await start(c)
        assert first != second
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"}, first)
        await ok(c, "invoice_approve", {"invoice_id": "inv-2"}, first)
        refused = await c.call_tool("invoice_approve", {"invoice_id": "inv-4", "workflow_id": second})
        assert (await status(c, first))["state"] == "approved"
        assert (await status(c, second))["state"] == "draft"
        await ok(c, "invoice_submit", {"invoice_id": "inv-4"}, second)
        assert (await status(c, first))["state"] == "approved"
        assert (await status(c, second))["state"] == "review"
    assert refused.is_error and text(refused) == wrong_state("invoice_approve", "draft", "review")


async def test_explicit_handle_in_the_handshake_era(billing: GeneratedServer) -> None:
    notes = Notifications()
    async with client(make_server(billing), LEGACY, notes) as c:
        handle = await start(c)
        assert await status(c, handle) == {
            "workflow_id": handle,
            "workflow": "invoice",
            "state": "draft",
            "allowed_tools": ["invoice_submit"],
            "final": False,
            "pending": None,
        }
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"}, handle)
        await ok(c, "invoice_approve", {"invoice_id": "inv-2"}, handle)
        assert (await status(c, handle))["state"] == "approved"
        # The session holds no state of its own (it walks by handle): its list stays the stable one, every
        # step offered, and nothing was announced.
        assert await status(c) == {
            "workflow_id": None,
            "workflow": "invoice",
            "state": "draft",
            "allowed_tools": ["invoice_submit"],
            "final": False,
            "pending": None,
        }
        assert await names(c) == STABLE
        assert await notes.settled() == 0
        # The handle's state gates a call even where the session's list would not show the tool.
        refused = await c.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": handle})
        assert refused.is_error and text(refused) == wrong_state("invoice_submit", "approved", "draft")
        await ok(c, "invoice_discharge", {"invoice_id": "inv-2"}, handle)
        assert (await status(c, handle))["final"] is True
        # And the session's own workflow still starts from draft.
        await ok(c, "invoice_submit", {"invoice_id": "inv-4"})
        assert await notes.settled() == 1
        assert (await status(c))["state"] == "review"
        assert (await status(c, handle))["state"] == "discharged"


async def test_notification_once_per_real_change(billing: GeneratedServer) -> None:
    notes = Notifications()
    async with client(make_server(billing), LEGACY, notes) as c:
        steps: list[tuple[str, dict[str, Any], int]] = [
            ("invoice_get", {"id": "inv-2"}, 0),  # unbound
            ("invoice_status", {}, 0),
            ("invoice_approve", {"invoice_id": "inv-2"}, 0),  # refused
            ("invoice_submit", {"invoice_id": "inv-2"}, 1),
            ("invoice_submit", {"invoice_id": "inv-2"}, 1),  # refused now
            ("invoice_approve", {"invoice_id": "inv-404"}, 1),  # the handler fails
            ("invoice_reject", {"invoice_id": "inv-2"}, 1),  # invalid arguments: no reason
            ("invoice_reject", {"invoice_id": "inv-2", "reason": "r"}, 2),
            ("invoice_start", {}, 2),
            ("invoice_submit", {"invoice_id": "inv-2"}, 3),
            ("invoice_approve", {"invoice_id": "inv-2"}, 4),
            ("invoice_discharge", {"invoice_id": "inv-2"}, 5),
            ("invoice_discharge", {"invoice_id": "inv-2"}, 5),  # final
        ]
        for tool, arguments, expected in steps:
            await c.call_tool(tool, arguments)
            assert await notes.settled() == expected, f"after {tool} {arguments}"
        handle = await start(c)
        await ok(c, "invoice_submit", {"invoice_id": "inv-4"}, handle)  # an explicit handle: not this list
        assert await notes.settled() == 5
    assert all(isinstance(m, types.ToolListChangedNotification) for m in notes.messages)


# --- compact descriptions, self-loops and bindings without a transition -------------------------------

TICKET_SPEC = """\
[server]
name = "ticket"
instructions = "Tickets."
state_handle_key = "ticket_id"

[workflows.ticket]
initial = "open"
[workflows.ticket.states]
open = { on = { TAKE = "working", NOTE = "open" } }
working = { on = { CLOSE = "closed" } }
closed = { type = "final" }

[tools."ticket.note"]
description = "Add a note to the ticket; it stays where it is."
compact_description = "Note."
bind_state = { states = ["open", "working"], transition = "NOTE" }
[tools."ticket.note".input]
text = "string"

[tools."ticket.take"]
description = "Take the ticket and start working on it."
bind_state = { states = ["open"], transition = "TAKE" }

[tools."ticket.peek"]
description = "Look at the work in progress."
compact_description = "Peek."
bind_state = { states = ["working"] }

[tools."ticket.close"]
description = "Close the ticket."
bind_state = { states = ["working"], transition = "CLOSE" }
"""

TICKET_HANDLERS = """\
from typing import Any

CALLS: list[str] = []


def ticket_note(args: Any) -> None:
    CALLS.append("note")


def ticket_take(args: Any) -> None:
    CALLS.append("take")


def ticket_peek(args: Any) -> None:
    CALLS.append("peek")


def ticket_close(args: Any) -> None:
    CALLS.append("close")
"""


@pytest.fixture
def ticket(tmp_path: Path) -> Iterator[GeneratedServer]:
    spec = tmp_path / "spec" / "ticket.toml"
    spec.parent.mkdir()
    spec.write_text(TICKET_SPEC, encoding="utf-8")
    (spec.parent / "ticket_server_handlers.py").write_text(TICKET_HANDLERS, encoding="utf-8")
    out = tmp_path / "out"
    with GeneratedServer(build(spec, out), out) as server:
        yield server


async def test_compact_description_only_in_the_initial_state(ticket: GeneratedServer) -> None:
    notes = Notifications()
    async with Client(ticket.create_server(), mode=LEGACY, cache=None, message_handler=notes) as c:
        fresh = {t.name: t.description for t in (await c.list_tools()).tools}
        # self-loop open --NOTE--> open: the state stays, but the session holds it now, so its list changes
        await ok(c, "ticket_note", {"text": "a"})
        assert await notes.settled() == 1
        in_open = {t.name: t.description for t in (await c.list_tools()).tools}
        await ok(c, "ticket_note", {"text": "a2"})  # the same self-loop again: nothing changes
        assert await notes.settled() == 1
        await ok(c, "ticket_take", {})
        assert await notes.settled() == 2
        in_working = {t.name: t.description for t in (await c.list_tools()).tools}
        await ok(c, "ticket_note", {"text": "b"})  # NOTE has no transition in working
        await ok(c, "ticket_peek", {})  # bound without a transition
        assert await notes.settled() == 2
        working = await c.call_tool("ticket_status", {})
        assert working.structured_content == {
            "ticket_id": None,
            "workflow": "ticket",
            "state": "working",
            "allowed_tools": ["ticket_note", "ticket_peek", "ticket_close"],
            "final": False,
            "pending": None,
        }
        await ok(c, "ticket_close", {})
        assert await notes.settled() == 3
        in_closed = [t.name for t in (await c.list_tools()).tools]
    async with Client(ticket.create_server(), mode=MODERN, cache=None) as c:
        modern = {t.name: t.description for t in (await c.list_tools()).tools}
        handle = (await c.call_tool("ticket_start", {})).structured_content["ticket_id"]
        await ok(c, "ticket_take", {"ticket_id": handle})
        taken = await c.call_tool("ticket_status", {"ticket_id": handle})
        anonymous = await c.call_tool("ticket_take", {})
    assert taken.structured_content["ticket_id"] == handle and taken.structured_content["state"] == "working"
    assert (
        anonymous.is_error
        and '<message>Tool "ticket_take" needs a workflow handle: pass "ticket_id".</message>' in text(anonymous)
    )
    # Before its first session-mode call, every tool: its compact form where it has one and runs in the
    # initial state, else the stable form, which says where it runs.
    assert list(fresh) == ["ticket_note", "ticket_take", "ticket_peek", "ticket_close", "ticket_start", "ticket_status"]
    assert fresh["ticket_note"] == "Note." and fresh["ticket_take"] == modern["ticket_take"]
    assert fresh["ticket_peek"] == modern["ticket_peek"] and "runs only in state working" in fresh["ticket_peek"]
    assert list(in_open) == ["ticket_note", "ticket_take", "ticket_start", "ticket_status"]
    assert in_open["ticket_note"] == "Note."
    assert in_open["ticket_take"] == "Take the ticket and start working on it."
    assert list(in_working) == ["ticket_note", "ticket_peek", "ticket_close", "ticket_start", "ticket_status"]
    assert in_working["ticket_note"] == "Add a note to the ticket; it stays where it is."
    # A compact form is for the initial state only.
    assert in_working["ticket_peek"] == "Look at the work in progress."
    assert in_closed == ["ticket_start", "ticket_status"]
    assert modern["ticket_note"] == (
        'Add a note to the ticket; it stays where it is. (Workflow "ticket": '
        "runs only in state open, working; pass ticket_id from ticket_start.)"
    )
    assert ticket.handlers.CALLS == ["note", "note", "take", "note", "peek", "close", "take"]


async def test_billing_compact_description_is_not_shown_outside_the_initial_state(billing: GeneratedServer) -> None:
    async with client(make_server(billing), LEGACY) as c:
        for tool, _ in WALK[:2]:
            await ok(c, tool, {"invoice_id": "inv-2"})
        tools = {t.name: t.description for t in (await c.list_tools()).tools}
    assert tools["invoice_discharge"] == "Discharge an approved invoice: it is settled and closed for good."


DESK_SPEC = """\
[server]
name = "desk"

[workflows.ticket]
initial = "open"
[workflows.ticket.states]
open = { on = { TAKE = "taken" } }
taken = { type = "final" }

[workflows.refund]
initial = "asked"
[workflows.refund.states]
asked = { on = { GRANT = "granted" } }
granted = { type = "final" }

[tools."ticket.take"]
description = "Take the ticket."
bind_state = { workflow = "ticket", states = ["open"], transition = "TAKE" }

[tools."refund.grant"]
description = "Grant the refund."
bind_state = { workflow = "refund", states = ["asked"], transition = "GRANT" }
"""

DESK_HANDLERS = """\
from typing import Any


def ticket_take(args: Any) -> None:
    pass


def refund_grant(args: Any) -> None:
    pass
"""


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[GeneratedServer]:
    spec = tmp_path / "spec" / "desk.toml"
    spec.parent.mkdir()
    spec.write_text(DESK_SPEC, encoding="utf-8")
    (spec.parent / "desk_server_handlers.py").write_text(DESK_HANDLERS, encoding="utf-8")
    out = tmp_path / "out"
    with GeneratedServer(build(spec, out), out) as server:
        yield server


async def test_two_workflows_keep_their_states_and_handles_apart(desk: GeneratedServer) -> None:
    notes = Notifications()
    async with Client(desk.create_server(), mode=LEGACY, cache=None, message_handler=notes) as c:
        assert await names(c) == [
            "ticket_take",
            "refund_grant",
            "ticket_start",
            "ticket_status",
            "refund_start",
            "refund_status",
        ]
        await ok(c, "ticket_take", {})
        assert await notes.settled() == 1
        generated = ["ticket_start", "ticket_status", "refund_start", "refund_status"]
        assert await names(c) == ["refund_grant", *generated]
        assert (await status(c, workflow="ticket"))["final"] is True
        assert (await status(c, workflow="refund"))["state"] == "asked"
    async with Client(desk.create_server(), mode=MODERN, cache=None) as c:
        ticket = await start(c, "ticket")
        refund = await start(c, "refund")
        crossed = [
            await c.call_tool("refund_grant", {"workflow_id": ticket}),
            await c.call_tool("ticket_take", {"workflow_id": refund}),
            await c.call_tool("ticket_status", {"workflow_id": refund}),
        ]
        await ok(c, "refund_grant", {}, refund)
        assert (await status(c, ticket, "ticket"))["state"] == "open"
        assert (await status(c, refund, "refund"))["state"] == "granted"
    for result, tool, workflow in zip(
        crossed, ["refund_grant", "ticket_take", "ticket_status"], ["refund", "ticket", "ticket"], strict=True
    ):
        assert result.is_error
        assert text(result) == (
            f'<tool_error tool="{tool}" code="FORBIDDEN" severity="error"><message>Unknown or expired '
            f'workflow_id for workflow "{workflow}".</message><recovery>Call {workflow}_start for a new one; '
            f"handles are never created implicitly.</recovery><available_actions><action>{workflow}_start"
            f'</action></available_actions><details><detail key="workflow">{workflow}</detail></details>'
            "</tool_error>"
        )


# --- concurrency -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_double_discharge_runs_the_handler_once(
    billing: GeneratedServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    original = billing.handlers.discharge_invoice
    started: list[float] = []

    async def slow_discharge(args: Any) -> Any:
        started.append(time.monotonic())
        await anyio.sleep(0.3)  # long enough for the second call to arrive while the first one runs
        return await original(args)

    monkeypatch.setattr(billing.handlers, "discharge_invoice", slow_discharge)
    server = make_server(billing)
    results: list[types.CallToolResult] = []
    async with client(server, mode) as first, client(server, mode) as second:
        handle = await session_or_handle(first, mode)  # the session of an in-process server is shared
        await ok(first, "invoice_submit", {"invoice_id": "inv-3"}, handle)
        await ok(first, "invoice_approve", {"invoice_id": "inv-3"}, handle)

        async def discharge(c: Client) -> None:
            arguments = with_handle({"invoice_id": "inv-3"}, handle)
            results.append(await c.call_tool("invoice_discharge", arguments))

        async with anyio.create_task_group() as group:
            group.start_soon(discharge, first)
            group.start_soon(discharge, second)
        assert (await status(second, handle))["state"] == "discharged"
    assert billing.handlers.DISCHARGED == ["inv-3"] and len(started) == 1
    assert sorted(r.is_error for r in results) == [False, True]
    [refused] = [r for r in results if r.is_error]
    assert text(refused) == wrong_state("invoice_discharge", "discharged", "approved")


async def test_many_concurrent_handles_do_not_interfere(billing: GeneratedServer) -> None:
    server = make_server(billing)
    finals: list[dict[str, Any]] = []

    async def walk(c: Client) -> None:
        handle = await start(c)
        for tool, state in WALK:
            await ok(c, tool, {"invoice_id": "inv-2"}, handle)
            assert (await status(c, handle))["state"] == state
        finals.append(await status(c, handle))

    async with client(server, MODERN) as c, anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(walk, c)
    assert len(finals) == 20 and len({f["workflow_id"] for f in finals}) == 20
    assert all(f["state"] == "discharged" and f["final"] for f in finals)
    assert billing.handlers.DISCHARGED == ["inv-2"] * 20


# --- the approval spec: a workflow imported from XState JSON -------------------------------------------

APPROVAL_UNBOUND = ["expense_create"]
APPROVAL_GENERATED = ["expense_start", "expense_status", "expense_resolve"]  # expense.pay is a mutation
APPROVAL_ALLOWED = {
    "draft": ["expense_submit"],
    "pending": ["expense_approve", "expense_reject"],
    "rejected": ["expense_revise"],
    "approved": ["expense_pay"],
    "paid": [],
}


@pytest.fixture
def approval(tmp_path: Path) -> Iterator[GeneratedServer]:
    out = tmp_path / "out"
    with GeneratedServer(build(SPECS / "approval.toml", out), out) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
async def test_approval_machine_from_xstate_json(approval: GeneratedServer, mode: str) -> None:
    notes = Notifications()
    async with Client(approval.create_server(), mode=mode, cache=None, message_handler=notes) as c:
        created = await c.call_tool("expense_create", {"amount": 42.5, "purpose": "train to Lyon"})
        assert not created.is_error, text(created)
        expense = created.structured_content["data"]["id"]
        handle = None
        if mode == MODERN:
            result = await c.call_tool("expense_start", {})
            handle = result.structured_content["workflow_id"]
        walk = [
            ("expense_submit", "pending"),
            ("expense_reject", "rejected"),
            ("expense_revise", "draft"),
            ("expense_submit", "pending"),
            ("expense_approve", "approved"),
            ("expense_pay", "paid"),
        ]
        early = await c.call_tool("expense_pay", with_handle({"expense_id": expense}, handle))
        assert early.is_error and 'code="FORBIDDEN"' in text(early)
        assert "<available_actions><action>expense_submit</action></available_actions>" in text(early)
        for tool, state in walk:
            await ok(c, tool, {"expense_id": expense}, handle)
            current = await status(c, handle, workflow="expense")
            assert current["state"] == state and current["allowed_tools"] == APPROVAL_ALLOWED[state]
            if mode == LEGACY:
                assert await names(c) == [*APPROVAL_UNBOUND, *APPROVAL_ALLOWED[state], *APPROVAL_GENERATED]
        assert current["final"] is True
        late = await c.call_tool("expense_revise", with_handle({"expense_id": expense}, handle))
        # Done for good: the only way on is another workflow.
        assert late.is_error and "<available_actions><action>expense_start</action></available_actions>" in text(late)
        changes = await notes.settled()
    assert changes == (len(walk) if mode == LEGACY else 0)
    events = ["submit", "reject", "revise", "submit", "approve", "pay"]
    recorded = approval.handlers.EVENTS
    assert recorded == [(event, expense) for event in events]


# --- SQLite: state survives the server -------------------------------------------------------------


async def test_sqlite_store_is_seen_by_a_new_server(billing: GeneratedServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state' / 'x.db'}"
    async with client(make_server(billing, url), MODERN) as c:
        handle = await start(c)
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"}, handle)
        await ok(c, "invoice_approve", {"invoice_id": "inv-2"}, handle)
    async with client(make_server(billing, url), MODERN) as c:
        assert await status(c, handle) == {
            "workflow_id": handle,
            "workflow": "invoice",
            "state": "approved",
            "allowed_tools": ["invoice_discharge"],
            "final": False,
            "pending": None,
        }
        refused = await c.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": handle})
        assert refused.is_error and text(refused) == wrong_state("invoice_submit", "approved", "draft")
        await ok(c, "invoice_discharge", {"invoice_id": "inv-2"}, handle)
        unknown = await c.call_tool("invoice_status", {"workflow_id": handle[::-1]})
        assert unknown.is_error and text(unknown) == unknown_handle("invoice_status")
    async with client(make_server(billing, url), LEGACY) as c:
        assert (await status(c, handle))["final"] is True


# Runs `python -m billing_server ARGS...` after writing its pid to a file, so the test can SIGKILL it.
BOOT = (
    "import os, runpy, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
    "sys.argv = ['billing_server', *sys.argv[2:]]; "
    "runpy.run_module('billing_server', run_name='__main__')"
)


def stdio_params(out: Path, pidfile: Path, url: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(out)
    arguments = ["-c", BOOT, str(pidfile), "--state-store", url]
    return StdioServerParameters(command=sys.executable, args=arguments, cwd=str(out), env=env)


def wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} survived SIGKILL")


async def test_sqlite_stdio_server_sigkilled_loses_no_committed_transition(
    billing_build: tuple[Generation, Path], tmp_path: Path
) -> None:
    out = billing_build[1]
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first_pid = tmp_path / "first.pid"
    notes = Notifications()
    async with Client(stdio_params(out, first_pid, url), mode=LEGACY, cache=None, message_handler=notes) as c:
        assert c.server_capabilities.tools is not None and c.server_capabilities.tools.list_changed is True
        handle = await start(c)
        await ok(c, "invoice_submit", {"invoice_id": "inv-2"}, handle)
        await ok(c, "invoice_approve", {"invoice_id": "inv-2"}, handle)
        await ok(c, "invoice_submit", {"invoice_id": "inv-4"})  # the process's own session: one list change
        assert await names(c) == legacy_list("review")
        assert await notes.settled() == 1
        pid = int(first_pid.read_text())
        os.kill(pid, signal.SIGKILL)  # no shutdown, no close(): only what was committed survives
        await anyio.to_thread.run_sync(wait_dead, pid)
    second_pid = tmp_path / "second.pid"
    async with Client(stdio_params(out, second_pid, url), mode=MODERN, cache=None) as c:
        assert await status(c, handle) == {
            "workflow_id": handle,
            "workflow": "invoice",
            "state": "approved",
            "allowed_tools": ["invoice_discharge"],
            "final": False,
            "pending": None,
        }
        await ok(c, "invoice_discharge", {"invoice_id": "inv-2"}, handle)
        assert (await status(c, handle))["final"] is True
    assert int(second_pid.read_text()) != pid


def test_approval_json_is_the_machine_the_spec_imports() -> None:
    # Guards the walk above against the fixture drifting: these are the states and events it relies on.
    machine = (SPECS / "approval.machine.json").read_text(encoding="utf-8")
    for name in [*APPROVAL_ALLOWED, "SUBMIT", "APPROVE", "REJECT", "REVISE", "PAY"]:
        assert f'"{name}"' in machine


# --- the W.start limit and W.resolve through a real client ---------------------------------------------------


async def test_start_limit_through_a_client(billing: GeneratedServer) -> None:
    server = billing.package.create_server(billing.handlers, starts_per_minute=2)
    async with client(server, MODERN) as c:
        await start(c)
        await start(c)
        limited = await c.call_tool("invoice_start", {})
        assert limited.is_error and 'code="RATE_LIMITED"' in text(limited)


async def test_resolve_is_listed_with_its_schema_and_refuses_without_a_doubt(billing: GeneratedServer) -> None:
    async with client(make_server(billing), MODERN) as c:
        [tool] = [t for t in (await c.list_tools()).tools if t.name == "invoice_resolve"]
        assert tool.input_schema["required"] == ["outcome"]
        assert tool.annotations is not None and tool.annotations.destructive_hint is True
        handle = await start(c)
        refused = await c.call_tool("invoice_resolve", {"workflow_id": handle, "outcome": "completed"})
        assert refused.is_error and "Nothing is in doubt" in text(refused)
        assert (await status(c, handle))["state"] == "draft"
