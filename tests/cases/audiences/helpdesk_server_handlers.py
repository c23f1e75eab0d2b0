"""Handlers of the helpdesk MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helpdesk_server.inputs import TicketGetInput, TicketListInput

TICKETS = {
    "t-1": {"id": "t-1", "subject": "Printer", "requester_email": "a@example.com", "priority": 3, "internal_notes": "x"}
}


def ticket_get(args: TicketGetInput) -> Any:
    return TICKETS[args.id]


def ticket_list(args: TicketListInput) -> Any:
    return list(TICKETS.values())
