"""Handlers of the desk MCP server: a domain error, a text result, a string from a tool without `returns`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from desk_server import ToolError

if TYPE_CHECKING:
    from desk_server.inputs import TicketCloseInput, TicketSummaryInput

TICKETS = {"t-1": "The printer on floor 2 is out of toner."}


def ticket_summary(args: TicketSummaryInput) -> Any:
    """ticket.summary: Summarise a ticket in one paragraph."""
    if args.id not in TICKETS:
        raise ToolError("NOT_FOUND", f"No ticket {args.id}.", suggest=["ticket.status"])
    return TICKETS[args.id]


def ticket_close(args: TicketCloseInput) -> Any:
    """ticket.close: Close the ticket."""
    return f"Ticket {args.id} closed."
