"""`<package>.testing`, the helper a server's users test with: what the agent perceives, taken apart.

It drives the generated billing server through a real in-process `mcp.Client`, in both protocol eras.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.build import GeneratedServer
from tests.support.client import LEGACY, MODERN, MODES


def helper(billing: GeneratedServer) -> Any:
    return billing.module("testing")


@pytest.mark.parametrize("mode", MODES)
def test_one_item_with_its_rules_suggestions_and_blocks(billing: GeneratedServer, mode: str) -> None:
    testing = helper(billing)
    outcome = testing.call_tool("invoice.get", {"id": "inv-1"}, mode=mode)
    assert outcome.ok and outcome.error is None and outcome.truncated is False
    assert outcome.data["id"] == "inv-1" and outcome.data["amount_cents"] == 123400.0
    assert "internal_notes" not in outcome.data and outcome.data["customer"]["email"] != "ada@example.com"
    assert outcome.rules == (
        "amount_cents: CENTS, divide by 100",
        "name: Full name",
        "CRITICAL: amount_cents is in CENTS. Divide by 100.",
        "Address customers by name; never ask them for their email here.",
        "Invoice inv-1 is overdue: offer a reminder before anything else.",
    )
    assert outcome.suggestions == (testing.Suggestion("billing_remind", "Send a payment reminder for inv-1"),)
    assert [(b.type, b.audience) for b in outcome.ui_blocks] == [
        ("table", "model"),
        ("summary", "model"),
        ("mermaid", "model"),
    ]
    assert outcome.ui_blocks[1].text == "📊 **Summary**: Ada Lovelace owes 1234 (due 2026-10-01)."


def test_user_only_blocks_are_marked_for_the_user(billing: GeneratedServer) -> None:
    testing = helper(billing)
    outcome = testing.call_tool("invoice.get", {"id": "inv-1"}, user_blocks="send")
    assert [b.type for b in outcome.ui_blocks if b.audience == "user"] == ["list"]


def test_a_collection_says_it_was_truncated(billing: GeneratedServer) -> None:
    outcome = helper(billing).call_tool("invoice.list", {})
    assert outcome.truncated is True and [i["id"] for i in outcome.data] == ["inv-1", "inv-2", "inv-3"]
    assert "Sorted by due date, oldest first." in outcome.rules
    assert helper(billing).call_tool("invoice.list", {"limit": 2, "status": "draft"}).truncated is False


@pytest.mark.parametrize("mode", MODES)
def test_a_domain_error_as_code_message_recovery_and_actions(billing: GeneratedServer, mode: str) -> None:
    outcome = helper(billing).call_tool("invoice.get", {"id": "inv-<9>"}, mode=mode)
    assert not outcome.ok and outcome.data is None and outcome.rules == () and outcome.ui_blocks == ()
    error = outcome.error
    assert (error.code, error.message, error.recovery, error.actions) == (
        "NOT_FOUND",
        "No invoice inv-<9>.",
        "List the invoices to find the right id.",
        ("invoice_list",),
    )


def test_invalid_arguments_name_each_field(billing: GeneratedServer) -> None:
    error = helper(billing).call_tool("invoice.create", {"customer_id": 7, "id": "mine"}).error
    assert error.code == "VALIDATION_ERROR" and error.recovery == "Fix the fields above and call the tool again."
    assert set(error.fields) == {"customer_id", "id", "amount_cents", "due_date"}
    assert "guarded" in error.fields["id"] and "customer_id: expected a string" in error.message


def test_a_refused_workflow_call_keeps_its_details(billing: GeneratedServer) -> None:
    error = helper(billing).call_tool("invoice.discharge", {"invoice_id": "inv-4"}).error
    assert error.code == "FORBIDDEN" and error.actions == ("invoice_submit",)
    assert error.details == {"workflow": "invoice", "currentState": "draft", "requiredStates": "approved"}


def test_a_tool_without_a_result_reads_as_its_text(billing: GeneratedServer) -> None:
    outcome = helper(billing).call_tool("billing.remind", {"invoice_id": "inv-1"})
    assert (outcome.ok, outcome.data, outcome.rules) == (True, "billing_remind: done.", ())


def test_a_tool_is_named_by_its_spec_name_or_its_wire_name(billing: GeneratedServer) -> None:
    testing = helper(billing)
    wire = billing.wire("invoice.get")
    assert wire != "invoice.get"  # the default wire names are not the spec's
    by_spec, by_wire = (testing.call_tool(name, {"id": "inv-1"}) for name in ("invoice.get", wire))
    assert by_spec.ok and by_spec.data == by_wire.data and by_spec.suggestions == by_wire.suggestions


@pytest.mark.parametrize("mode", MODES)
def test_a_session_keeps_a_workflow_across_calls(billing: GeneratedServer, mode: str) -> None:
    testing = helper(billing)
    with testing.tool_session(mode=mode) as session:
        handle = {}
        if mode == MODERN:
            handle = {"workflow_id": session.call("invoice.start").data["workflow_id"]}
        assert session.call("invoice.submit", {"invoice_id": "inv-4", **handle}).data == "invoice_submit: done."
        status = session.call("invoice.status", handle).data
        assert status["state"] == "review"
        assert ("invoice_approve" in session.tool_names()) is True
        assert ("invoice_submit" in session.tool_names()) is (mode == MODERN)  # handshake lists follow the state


@pytest.mark.anyio
async def test_the_async_session_with_replaced_handlers(billing: GeneratedServer) -> None:
    testing = helper(billing)
    billing.handlers.INVOICES.clear()
    async with testing.ToolSession(billing.handlers, mode=LEGACY) as session:
        listed = await session.call("invoice.list")
        missing = await session.call("invoice.get", {"id": "inv-1"})
    assert (listed.data, listed.truncated, missing.error.code) == ([], False, "NOT_FOUND")
