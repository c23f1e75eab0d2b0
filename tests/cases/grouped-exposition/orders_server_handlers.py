"""Handlers of the orders MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orders_server.inputs import (
        OrderAddInput,
        OrderCancelInput,
        OrderCheckoutInput,
        OrderNoteInput,
        OrderPayInput,
        OrderShipInput,
        OrderViewInput,
    )


ORDER: dict[str, Any] = {"id": "o-1", "state": "cart", "items": [], "notes": []}


def order_view(args: OrderViewInput) -> Any:
    """order.view: Look at the order (always allowed)."""
    return ORDER


def order_add(args: OrderAddInput) -> Any:
    """order.add: Add an item to the cart."""
    ORDER["items"].append(args.sku)


def order_checkout(args: OrderCheckoutInput) -> Any:
    """order.checkout: Go to payment."""
    ORDER["state"] = "payment"


def order_pay(args: OrderPayInput) -> Any:
    """order.pay: Pay."""
    ORDER["state"] = "paid"
    return ORDER


def order_cancel(args: OrderCancelInput) -> Any:
    """order.cancel: Back to the cart."""
    ORDER["state"] = "cart"


def order_ship(args: OrderShipInput) -> Any:
    """order.ship: Ship a paid order."""
    ORDER["state"] = "shipped"


def order_note(args: OrderNoteInput) -> Any:
    """order.note: Add a note while paying or paid (gated only)."""
    ORDER["notes"].append(args.text)


def ping(args: Any) -> Any:
    """ping: Is the server alive?"""
    return "pong"
