"""Handlers of the teams MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teams_server.inputs import (
        PersonCardInput,
        TeamGetInput,
    )


ADA = {"id": "p-1", "name": "Ada", "role": "lead engineer", "salary": 1.0}
ALAN = {"id": "p-2", "name": "Alan", "role": "engineer", "salary": 2.0}
TEAMS = {"t-1": {"id": "t-1", "name": "Core", "lead": ADA, "members": [ADA, ALAN]}}
PEOPLE = {person["id"]: person for person in (ADA, ALAN)}


def team_get(args: TeamGetInput) -> Any:
    """team.get: One team with its lead and members."""
    return TEAMS[args.id]


def person_card(args: PersonCardInput) -> Any:
    """person.card: A person as a card (inline schema)."""
    return PEOPLE[args.id]
