"""Helpers for the presenters' compiled expressions: small total functions that never raise on data."""

from __future__ import annotations

import decimal
import functools
import json
import math
import operator
import typing

_x_Any = typing.Any
_x_DEC = decimal.Context(prec=5000)


def _x_get(value: _x_Any, path: tuple[str, ...]) -> _x_Any:
    """Read a path through nested dicts; anything missing on the way is None."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _x_isnum(v: _x_Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _x_ok(v: _x_Any) -> _x_Any:
    """Keep numbers printable and JSON-safe: inf, nan and giant integers become None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return None if isinstance(v, int) and v.bit_length() > 3000 else v


def _x_num2(f: _x_Any, a: _x_Any, b: _x_Any) -> _x_Any:
    """f on two numbers; None for anything else and for any arithmetic error."""
    try:
        return _x_ok(f(a, b)) if _x_isnum(a) and _x_isnum(b) else None
    except (ArithmeticError, ValueError):
        return None


def _x_add(a: _x_Any, b: _x_Any) -> _x_Any:
    both_str = isinstance(a, str) and isinstance(b, str)
    return a + b if both_str else _x_num2(operator.add, a, b)


_x_sub = functools.partial(_x_num2, operator.sub)
_x_mul = functools.partial(_x_num2, operator.mul)
_x_div = functools.partial(_x_num2, operator.truediv)
_x_floordiv = functools.partial(_x_num2, operator.floordiv)
_x_mod = functools.partial(_x_num2, operator.mod)
_x_neg = functools.partial(_x_num2, operator.sub, 0)


def _x_order(f: _x_Any, a: _x_Any, b: _x_Any) -> bool:
    """Only two numbers or two strings are ordered; anything else compares False."""
    both_str = isinstance(a, str) and isinstance(b, str)
    return (both_str or (_x_isnum(a) and _x_isnum(b))) and bool(f(a, b))


_x_lt = functools.partial(_x_order, operator.lt)
_x_le = functools.partial(_x_order, operator.le)
_x_gt = functools.partial(_x_order, operator.gt)
_x_ge = functools.partial(_x_order, operator.ge)


def _x_in(a: _x_Any, b: _x_Any) -> bool:
    if isinstance(b, str):
        return isinstance(a, str) and a in b
    return isinstance(b, (list, tuple)) and a in b


def _x_len(v: _x_Any) -> int:
    return len(v) if isinstance(v, (str, list, tuple, dict)) else 0


def _x_abs(v: _x_Any) -> _x_Any:
    return abs(v) if _x_isnum(v) else None


def _x_text(f: _x_Any, v: _x_Any) -> _x_Any:
    return f(v) if isinstance(v, str) else None


_x_upper = functools.partial(_x_text, str.upper)
_x_lower = functools.partial(_x_text, str.lower)


def _x_float(v: _x_Any) -> _x_Any:
    try:
        return _x_ok(float(v)) if _x_isnum(v) or isinstance(v, str) else None
    except (ValueError, OverflowError):
        return None


def _x_int(v: _x_Any) -> _x_Any:
    """Numbers truncate toward zero; a string may hold an integer or a decimal."""
    try:
        if isinstance(v, str) and v.strip().lstrip("+-").isdigit():
            return _x_ok(int(v))
        v = _x_float(v)
        return None if v is None else int(v)
    except ValueError:
        return None


def _x_round(x: _x_Any, n: _x_Any = None) -> _x_Any:
    """Half away from zero on the printed value (2.675 -> 2.68); round(x) is an int."""
    if not _x_isnum(x) or not (n is None or type(n) is int):
        return None
    step = decimal.Decimal(1).scaleb(-max(-330, min(330, n or 0)))
    try:
        q = decimal.Decimal(repr(x)).quantize(step, decimal.ROUND_HALF_UP, _x_DEC)
        return _x_ok(int(q) if n is None or isinstance(x, int) else float(q))
    except (ArithmeticError, ValueError):
        return None


def _x_pick(f: _x_Any, xs: _x_Any) -> _x_Any:
    """min/max of a list's numbers or strings, skipping None; None if empty or mixed."""
    if not isinstance(xs, (list, tuple)):
        return None
    nums = [x for x in xs if _x_isnum(x)]
    strs = [x for x in xs if isinstance(x, str)]
    return f(nums or strs) if bool(nums) != bool(strs) else None


_x_min = functools.partial(_x_pick, min)
_x_max = functools.partial(_x_pick, max)


def _x_fmt(v: _x_Any) -> str:
    """Text of a value as presented (rules in fusiongen.expr's docstring)."""
    if type(v) is str:  # the common case, first
        return v
    try:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            if not v.is_integer() or abs(v) >= 1e16:
                v = float(format(v, ".10g"))
            return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
        if isinstance(v, (list, tuple)):
            return ", ".join(_x_fmt(i) for i in v)
        if isinstance(v, dict):
            return json.dumps(v, ensure_ascii=False, default=str, skipkeys=True)
        return str(v)
    except (ValueError, TypeError, RecursionError):
        return ""
