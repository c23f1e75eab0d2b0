"""Handlers of the accounts MCP server, keeping accounts in memory."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accounts_server.inputs import (
        AccountCreateInput,
        AccountRenameInput,
        AccountUpdateInput,
    )

ACCOUNTS: dict[str, dict[str, Any]] = {}


def account_create(args: AccountCreateInput) -> Any:
    """account.create: Open an account."""
    account_id = f"acc-{len(ACCOUNTS) + 1}"
    ACCOUNTS[account_id] = {
        "id": account_id,
        "email": args.email,
        "display_name": args.display_name,
        "plan": args.plan,
        "owner": "server",
        "created_at": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
        "password_hash": "never shown",
        "recovery_code": args.recovery_code,
    }
    return ACCOUNTS[account_id]


def account_update(args: AccountUpdateInput) -> Any:
    """account.update: Change an account; only the fields sent change."""
    account = ACCOUNTS[args.id]
    for name in args.fields_set - {"id"}:
        account[name] = getattr(args, name)
    return account


def rename(args: AccountRenameInput) -> Any:
    """account.rename: Rename an account."""
    ACCOUNTS[args.id]["display_name"] = args.display_name
