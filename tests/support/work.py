"""Counting work instead of timing it: a count does not depend on how loaded the machine is."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def calls_made(function: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | BaseException, int]:
    """Run `function`, counting the Python function calls it makes (a deterministic measure of its work).

    Returns (its result or the exception it raised, the count); the exception is returned, not raised, so the
    caller can check it as it would any other outcome.
    """
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result: T | BaseException = function(*args, **kwargs)
    except Exception as exc:
        result = exc
    finally:
        sys.setprofile(previous)
    return result, count


def work_at(function: Callable[[int], object], size: int) -> tuple[int, int]:
    """The calls `function(size)` and `function(2 * size)` make: a linear function does about twice the work for
    twice the input, where a quadratic one does four times as much (and an exponential one far more)."""
    return calls_made(function, size)[1], calls_made(function, 2 * size)[1]
