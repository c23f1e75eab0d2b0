"""Handlers of the crm MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crm_server.inputs import (
        ClientGetInput,
        ClientPeopleInput,
    )


CARD = {"number": "4111111111111111", "holder": "Ada Lovelace"}
CLIENT = {
    "id": "c-1",
    "name": "Ada Lovelace",
    "ssn": "078-05-1120",
    "contact": {"email": "ada@example.com", "phone": "+44 20 7946 0000"},
    "billing": {"email": "billing@example.com", "phone": None},
    "backup": {"email": "backup@example.com"},
    "tags": ["vip", "early"],
    "cards": [CARD],
    "orders": [{"id": "o-1", "card": CARD, "notes": ["leave at the door"]}],
    "address": None,
}


def client_get(args: ClientGetInput) -> Any:
    """client.get: One client."""
    return CLIENT


def client_people(args: ClientPeopleInput) -> Any:
    """client.people: Clients as people."""
    return [CLIENT]
