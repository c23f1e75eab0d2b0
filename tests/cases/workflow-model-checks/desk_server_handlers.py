"""Handlers of the desk MCP server.

Scaffolded by fusiongen: this file is yours. fusiongen never overwrites it; when tools are added
to the spec, `fusiongen build` appends a stub for each at the end.
A handler gets the validated arguments (and, if it takes a second parameter, the request context).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desk_server.inputs import (
        TicketBeginInput,
        TicketCloseInput,
        TicketPauseInput,
        TicketResumeInput,
    )


def ticket_begin(args: TicketBeginInput) -> Any:
    """ticket.begin: ticket.begin

    Return one Ticket (a dict, a pydantic model, a dataclass or an object).
    """
    raise NotImplementedError("ticket.begin")


def ticket_pause(args: TicketPauseInput) -> Any:
    """ticket.pause: ticket.pause

    Its return value is not shown to the agent.
    """
    raise NotImplementedError("ticket.pause")


def ticket_resume(args: TicketResumeInput) -> Any:
    """ticket.resume: ticket.resume

    Its return value is not shown to the agent.
    """
    raise NotImplementedError("ticket.resume")


def ticket_close(args: TicketCloseInput) -> Any:
    """ticket.close: ticket.close

    Its return value is not shown to the agent.
    """
    raise NotImplementedError("ticket.close")
