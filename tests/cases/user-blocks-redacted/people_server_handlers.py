"""Handlers of the people MCP server.

Scaffolded by fusiongen: this file is yours. fusiongen never overwrites it; when tools are added
to the spec, `fusiongen build` appends a stub for each at the end.
A handler gets the validated arguments (and, if it takes a second parameter, the request context).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from people_server.inputs import (
        PersonGetInput,
        TeamGetInput,
        TeamListInput,
    )


def get_person(args: PersonGetInput) -> Any:
    """person.get: person.get

    Return one Person (a dict, a pydantic model, a dataclass or an object).
    """
    raise NotImplementedError("person.get")


def list_teams(args: TeamListInput) -> Any:
    """team.list: team.list

    Return a list of Team items (dicts, pydantic models, dataclasses or objects).
    """
    raise NotImplementedError("team.list")


def get_team(args: TeamGetInput) -> Any:
    """team.get: team.get

    Return one Team (a dict, a pydantic model, a dataclass or an object).
    """
    raise NotImplementedError("team.get")
