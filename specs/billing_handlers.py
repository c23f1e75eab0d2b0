"""Handlers of the billing MCP server: an in-memory back office with seeded data.

The seed deliberately carries what an agent must never see (hidden fields such as `internal_notes`,
`cost_basis` and `ssn`) and data that needs casting (`amount_cents` stored as text), so the demo and
the tests show the generated server stripping and converting it.
"""

from __future__ import annotations

import datetime
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from billing_server import ToolError

if TYPE_CHECKING:
    from billing_server.inputs import (
        BillingRemindInput,
        CustomerGetInput,
        InvoiceApproveInput,
        InvoiceCreateInput,
        InvoiceDischargeInput,
        InvoiceGetInput,
        InvoiceListInput,
        InvoiceRejectInput,
        InvoiceResourceInput,
        InvoiceSubmitInput,
        InvoiceUpdateInput,
    )


@dataclass
class Customer:
    id: str
    name: str
    email: str
    ssn: str
    credit_score: int


CUSTOMERS = {
    "c-1": Customer("c-1", "Ada Lovelace", "ada@example.com", "078-05-1120", 790),
    "c-2": Customer("c-2", "Alan Turing", "alan@example.com", "219-09-9999", 640),
}


def _line(sku: str, description: str, quantity: int, unit_price_cents: Any, card: str) -> dict[str, Any]:
    return {
        "sku": sku,
        "description": description,
        "quantity": quantity,
        "unit_price_cents": unit_price_cents,
        "card_number": card,
        "warehouse_bin": "B-17",
    }


INVOICES: dict[str, dict[str, Any]] = {
    "inv-1": {
        "id": "inv-1",
        "customer_id": "c-1",
        "amount_cents": "123400",
        "status": "overdue",
        "due_date": datetime.date(2026, 10, 1),
        "created_at": datetime.datetime(2026, 9, 1, 9, 30),
        "internal_notes": "Customer disputes the fee; legal says hold.",
        "cost_basis": 800.5,
        "lines": [
            _line("SKU-1", "Analytical engine rental", 1, "100000", "4111111111111111"),
            _line("SKU-2", "Punch cards", 234, 100, "4111111111111111"),
        ],
    },
    "inv-2": {
        "id": "inv-2",
        "customer_id": "c-2",
        "amount_cents": 5000,
        "status": "draft",
        "due_date": "2026-12-15",
        "created_at": "2026-11-20T14:00:00",
        "internal_notes": None,
        "cost_basis": 10.0,
        "lines": [_line("SKU-3", "Bombe maintenance", 1, 5000, "5500000000000004")],
    },
}
for number, status, amount in ((3, "approved", 72000), (4, "draft", 1500), (5, "paid", 99900)):
    INVOICES[f"inv-{number}"] = {
        "id": f"inv-{number}",
        "customer_id": "c-1",
        "amount_cents": amount,
        "status": status,
        "due_date": datetime.date(2026, 12, number),
        "created_at": datetime.datetime(2026, 11, number, 8, 0),
        "internal_notes": f"batch {number}",
        "cost_basis": 1.5,
        "lines": [_line(f"SKU-{number}0", "Consulting", number, 1000, "4000056655665556")],
    }
_ids = itertools.count(6)


def _with_customer(invoice: dict[str, Any]) -> dict[str, Any]:
    return {**invoice, "customer": CUSTOMERS.get(invoice["customer_id"])}


def get_invoice(args: InvoiceGetInput) -> Any:
    """invoice.get: Fetch one invoice by id."""
    invoice = INVOICES.get(args.id)
    if invoice is None:  # a domain error: the agent is told what happened and what to do (spec: errors)
        raise ToolError(
            "NOT_FOUND",
            f"No invoice {args.id}.",
            recovery="List the invoices to find the right id.",
            suggest=["invoice.list"],
        )
    return _with_customer(invoice)


def read_invoice(args: InvoiceResourceInput) -> Any:
    """Resource invoice://{id}: one invoice, or None when there is none (the client gets a not-found error)."""
    invoice = INVOICES.get(args.id)
    return _with_customer(invoice) if invoice is not None else None


def list_invoices(args: InvoiceListInput) -> Any:
    """invoice.list: List invoices, optionally only those with a given status."""
    found = [_with_customer(i) for i in INVOICES.values() if args.status in (None, i["status"])]
    return found[: args.limit]


async def create_invoice(args: InvoiceCreateInput) -> Any:
    """invoice.create: Create a draft invoice."""
    invoice_id = f"inv-{next(_ids)}"
    INVOICES[invoice_id] = {
        "id": invoice_id,
        "customer_id": args.customer_id,
        "amount_cents": args.amount_cents,
        "status": "draft",
        "due_date": args.due_date,
        "created_at": datetime.datetime(2026, 11, 30, 12, 0),
        "internal_notes": "created by an agent",
        "cost_basis": 0.0,
        "lines": [],
    }
    return _with_customer(INVOICES[invoice_id])


async def update_invoice(args: InvoiceUpdateInput, ctx: Any) -> Any:
    """invoice.update: Change an invoice's status or due date (only the fields the agent sent)."""
    invoice = INVOICES[args.id]
    if "status" in args.fields_set:
        invoice["status"] = args.status
    if "due_date" in args.fields_set:
        invoice["due_date"] = args.due_date
    return _with_customer(invoice)


def get_customer(args: CustomerGetInput) -> Any:
    """customer.get: Fetch one customer by id."""
    return CUSTOMERS[args.id]


REMINDERS: list[str] = []


def send_reminder(args: BillingRemindInput) -> Any:
    """billing.remind: Send a payment reminder for an overdue invoice."""
    if args.invoice_id not in INVOICES:
        raise KeyError(args.invoice_id)
    REMINDERS.append(args.invoice_id)
    return None


def _set_status(invoice_id: str, status: str) -> None:
    INVOICES[invoice_id]["status"] = status  # KeyError for an unknown invoice: the call fails, no transition


def submit_invoice(args: InvoiceSubmitInput) -> Any:
    """invoice.submit: Submit a draft invoice for review."""
    _set_status(args.invoice_id, "review")


def approve_invoice(args: InvoiceApproveInput) -> Any:
    """invoice.approve: Approve an invoice under review."""
    _set_status(args.invoice_id, "approved")


def reject_invoice(args: InvoiceRejectInput) -> Any:
    """invoice.reject: Send an invoice under review back to draft."""
    _set_status(args.invoice_id, "draft")


DISCHARGED: list[str] = []


async def discharge_invoice(args: InvoiceDischargeInput) -> Any:
    """invoice.discharge: Discharge an approved invoice."""
    _set_status(args.invoice_id, "paid")
    DISCHARGED.append(args.invoice_id)
