"""Handlers of the tickets MCP server, with in-memory data."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickets_server.inputs import (
        TicketGetInput,
        TicketRawInput,
        TicketSearchInput,
    )


TICKETS = [
    {
        "id": "t-1",
        "title": "Printer on fire",
        "priority": 1,
        "status": "open",
        "assignee": None,
        "opened": datetime.date(2024, 3, 1),
        "internal": "not presented",
    },
    {
        "id": "t-2",
        "title": "Password reset",
        "priority": 3,
        "status": "pending",
        "assignee": "sam",
        "opened": "2024-03-02",
    },
]


def ticket_get(args: TicketGetInput) -> Any:
    """ticket.get: One ticket, as a card."""
    return next(t for t in TICKETS if t["id"] == args.id)


def ticket_search(args: TicketSearchInput) -> Any:
    """ticket.search: Tickets matching a text."""
    return [t for t in TICKETS if args.text.lower() in t["title"].lower()]


def ticket_raw(args: TicketRawInput) -> Any:
    """ticket.raw: One ticket, through the model's implicit presenter."""
    return next(t for t in TICKETS if t["id"] == args.id)
