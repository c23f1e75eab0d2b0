"""What the generated httpx handler module raises, by upstream status: one table for both of its readers.

`http_handlers` writes the module's `error_for` from it and `mapping` declares each tool's `errors` from it,
so a tool declares exactly the codes its handler can raise (tests/test_import_openapi.py reads the written
module to hold both to it).
"""

from __future__ import annotations

# code → the upstream statuses that become it (None: the upstream cannot be reached at all).
RAISES: dict[str, tuple[int | None, ...]] = {
    "NOT_FOUND": (404,),
    "CONFLICT": (409,),
    "INVALID_REQUEST": (400, 422),
    "RATE_LIMITED": (429,),
    "UNAVAILABLE": (503, None),
}
# What each means when the operation documents none of its statuses.
GENERIC = {
    "NOT_FOUND": "the upstream has nothing there",
    "CONFLICT": "the request conflicts with the upstream's current state",
    "INVALID_REQUEST": "the upstream rejected the arguments; the message says why",
    "RATE_LIMITED": "too many requests; retry after retry_after seconds",
    "UNAVAILABLE": "the upstream cannot be reached or is unavailable; retry later",
}
MAPPED_STATUSES = frozenset(s for statuses in RAISES.values() for s in statuses if s is not None)
DESCRIPTION_LIMIT = 160  # characters of a response's description in an `errors` meaning


def code_for(status: int) -> str | None:
    return next((code for code, statuses in RAISES.items() if status in statuses), None)
