"""Handlers of the helpdesk MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helpdesk_server.inputs import TicketGetInput, TicketResolveInput, TicketTriageInput

TICKETS: dict[str, dict[str, Any]] = {"t-1": {"id": "t-1", "status": "open"}}


def ticket_get(args: TicketGetInput) -> Any:
    """ticket.get: Read a ticket."""
    return TICKETS[args.id]


def ticket_triage(args: TicketTriageInput) -> str:
    """ticket.triage: Triage a ticket."""
    TICKETS[args.id]["status"] = "triaged"
    return f"Ticket {args.id} triaged."


def ticket_resolve(args: TicketResolveInput) -> str:
    """ticket.resolve: the spec's own tool, not a generated one."""
    TICKETS[args.id]["status"] = "resolved"
    return f"Ticket {args.id} resolved."
