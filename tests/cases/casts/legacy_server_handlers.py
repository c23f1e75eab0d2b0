"""Handlers of the legacy MCP server: rows as a legacy table stores them, before the casts."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from legacy_server.inputs import (
        RowAllInput,
        RowGetInput,
    )

ROWS = [
    {
        "id": 1,
        "quantity": " 42 ",
        "price": "9.5",
        "enabled": "yes",
        "shipped_on": datetime.datetime(2024, 5, 1, 12, 30),
        "seen_at": 1_700_000_000,
    },
    {
        "id": 2,
        "quantity": 7.0,
        "price": 12,
        "enabled": 0,
        "shipped_on": "2024-06-01T08:00:00",
        "seen_at": datetime.date(2024, 6, 2),
        "untouched": 1.25,
    },
]


def row_get(args: RowGetInput) -> Any:
    """row.get: Read one row."""
    return next(row for row in ROWS if row["id"] == args.id)


def row_all(args: RowAllInput) -> Any:
    """row.all: Read every row."""
    return ROWS
