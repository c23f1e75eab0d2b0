"""Handlers of the approval MCP server: expense claims kept in memory.

The workflow (draft → pending → approved/rejected → paid) is enforced by the generated server before
these run; the handlers only record what happened.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from approval_server.inputs import (
        ExpenseApproveInput,
        ExpenseCreateInput,
        ExpensePayInput,
        ExpenseRejectInput,
        ExpenseReviseInput,
        ExpenseSubmitInput,
    )

EXPENSES: dict[str, dict[str, Any]] = {}
EVENTS: list[tuple[str, str]] = []
_ids = itertools.count(1)


def expense_create(args: ExpenseCreateInput) -> Any:
    """expense.create: Create an expense claim."""
    expense_id = f"exp-{next(_ids)}"
    EXPENSES[expense_id] = {
        "id": expense_id,
        "amount": args.amount,
        "purpose": args.purpose,
        "approver_notes": "not yet reviewed",
    }
    return EXPENSES[expense_id]


def _record(event: str, expense_id: str) -> None:
    if expense_id not in EXPENSES:
        raise KeyError(expense_id)  # the call fails and the workflow does not move
    EVENTS.append((event, expense_id))


def expense_submit(args: ExpenseSubmitInput) -> Any:
    """expense.submit: Submit the claim for approval."""
    _record("submit", args.expense_id)


def expense_approve(args: ExpenseApproveInput) -> Any:
    """expense.approve: Approve a pending claim."""
    _record("approve", args.expense_id)


def expense_reject(args: ExpenseRejectInput) -> Any:
    """expense.reject: Reject a pending claim."""
    _record("reject", args.expense_id)


def expense_revise(args: ExpenseReviseInput) -> Any:
    """expense.revise: Take a rejected claim back to draft."""
    _record("revise", args.expense_id)


def expense_pay(args: ExpensePayInput) -> Any:
    """expense.pay: Pay an approved claim."""
    _record("pay", args.expense_id)
