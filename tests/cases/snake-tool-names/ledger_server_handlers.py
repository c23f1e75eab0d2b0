"""Handlers of the ledger MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger_server.inputs import InvoiceApproveInput, InvoiceGetInput, InvoiceSubmitInput


INVOICE: dict[str, Any] = {"id": "i-1", "status": "draft"}


def invoice_get(args: InvoiceGetInput) -> Any:
    """invoice.get: Read an invoice."""
    return INVOICE


def invoice_submit(args: InvoiceSubmitInput) -> Any:
    """invoice.submit: Submit the draft for review."""
    INVOICE["status"] = "review"
    return None


def invoice_approve(args: InvoiceApproveInput) -> Any:
    """invoice.approve: Approve the invoice."""
    INVOICE["status"] = "approved"
    return INVOICE
