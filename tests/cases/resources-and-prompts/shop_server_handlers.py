"""Handlers of the shop case: one item, read by a tool and by three resources."""

from __future__ import annotations

import datetime
from typing import Any

ITEM = {"sku": "s-1", "version": 2, "color": "red", "cost": 9.5}


def item_get(args: Any) -> Any:
    return ITEM if args.sku == ITEM["sku"] else None


def item_restock(args: Any) -> Any:
    return None


def read_catalog(args: Any) -> Any:
    return {"items": 1, "updated": datetime.date(2026, 11, 30)}


def read_item(args: Any) -> Any:
    return ITEM if (args.sku, args.version) == (ITEM["sku"], ITEM["version"]) else None


def first_of_color(args: Any) -> Any:
    return ITEM if args.color == ITEM["color"] else None
