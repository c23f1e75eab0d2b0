"""Handlers of the desk MCP server: they read the caller's identity from ctx."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desk_server.inputs import TicketCloseInput, WhoamiInput

CLOSED_BY: list[tuple[str | None, str | None]] = []  # (tenant, subject) of each close, for tests


def whoami(args: WhoamiInput, ctx: Any) -> dict[str, Any]:
    identity = ctx.identity
    if identity is None:  # stdio or in-process: the local user
        return {"subject": "local", "tenant": "-", "roles": [], "scopes": []}
    return {
        "subject": identity.subject,
        "tenant": identity.tenant or "-",
        "roles": sorted(identity.roles),
        "scopes": sorted(identity.scopes),
    }


def ticket_close(args: TicketCloseInput, ctx: Any) -> None:
    identity = ctx.identity
    CLOSED_BY.append((identity.tenant, identity.subject) if identity is not None else (None, None))
