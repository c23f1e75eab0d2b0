"""Handlers of the orders MCP server.

Scaffolded by fusiongen: this file is yours. fusiongen never overwrites it; when tools are added
to the spec, `fusiongen build` appends a stub for each at the end.
A handler gets the validated arguments (and, if it takes a second parameter, the request context).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orders_server.inputs import (
        OrderGetInput,
    )


def get_order(args: OrderGetInput) -> Any:
    """order.get: order.get

    Return one Order (a dict, a pydantic model, a dataclass or an object).
    """
    raise NotImplementedError("order.get")
