"""Values: reading handler data, checking arguments and results, read-time casts, constraints.

What the generated `inputs.py` and `shapes.py` call for each field: plain Python over the standard library,
with no SDK import, so a value's check is the same whatever serves it. Everything here fails closed: data
that does not have the declared shape raises `OutputError`, and messages name declared fields and expected
types only, never a value the handler returned, so nothing hidden can leak through an error.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

MISSING: Final = object()
_NOT_OBJECTS: Final = (str, bytes, int, float, list, tuple, set, frozenset)
_NUMBERS: Final = (int, float)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")  # ASCII digits, as RFC 3339
# An RFC 3339 date-time as `isoformat` writes it (or with `Z`); whether the fields are in range is left to
# `fromisoformat`. A string of this form is sent unchanged; any other accepted form is re-formatted.
_RFC3339_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})\Z"
)


class OutputError(Exception):
    """Handler data does not fit the declared shape. `path` names only declared, visible fields."""

    def __init__(self, at: str, name: str, expected: str) -> None:
        self.path = f"{at}.{name}" if name else at
        self.expected = expected
        super().__init__(f"{self.path}: expected {expected}")


@dataclasses.dataclass(frozen=True)
class FieldError:
    """One bad argument, described so that a model can fix its call."""

    name: str
    message: str


class InvalidArguments(Exception):
    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__(f"{len(errors)} invalid argument(s)")


# Each argument class: its docstring, then each field's name and annotation (as written, a string).
ArgumentFields = tuple[str, tuple[tuple[str, str], ...]]


class ArgumentClasses:
    """The argument classes of inputs.py, each made the first time something needs it: the frozen, slotted
    dataclass its declaration in inputs.py (read by type checkers only) describes, the same fields and
    annotations, docstring, module and name, then the same class every time.

    Made at import, they were most of the start-up of a server with hundreds of tools (dataclass() compiles
    six methods per class: 0.85 s of 2 s for 621 tools, measured), and a call needs only its tool's. The parse
    functions take theirs from here, and the module's `__getattr__` serves the rest (a handler module's
    `from <package>.inputs import XInput`)."""

    def __init__(self, module: str, declared: Mapping[str, ArgumentFields]) -> None:
        self._module = module
        self._declared = declared
        self._made: dict[str, type] = {}

    def __getitem__(self, name: str) -> Any:
        made = self._made.get(name)
        if made is None:
            doc, fields = self._declared[name]
            annotations = {**dict(fields), "fields_set": "frozenset[str]"}
            namespace = {
                "__module__": self._module,
                "__qualname__": name,
                "__doc__": doc,
                "__annotations__": annotations,
                "fields_set": dataclasses.field(default=frozenset()),
            }
            made = dataclasses.dataclass(frozen=True, slots=True)(type(name, (), namespace))
            made = self._made.setdefault(name, made)  # two threads making it at once: both use the first
        return made

    def module_attribute(self, name: str) -> type:
        """The module's `__getattr__`: a declared class, made now if it was not yet."""
        if name not in self._declared:
            raise AttributeError(f"module {self._module!r} has no attribute {name!r}")
        made: type = self[name]
        return made


# --- reading handler data --------------------------------------------------------------------------

Getter = Callable[[str, object], object]


def reader(src: object, at: str) -> Getter:
    """A `get(name, default)` over whatever the handler returned: a mapping or an object's attributes."""
    if type(src) is dict or isinstance(src, Mapping):
        return src.get
    if src is None or isinstance(src, _NOT_OBJECTS):
        raise OutputError(at, "", "an object")

    def attribute(name: str, default: object) -> object:
        return getattr(src, name, default)

    return attribute


def items_of(value: object, at: str, name: str) -> list[Any] | tuple[Any, ...]:
    if isinstance(value, list | tuple):
        return value
    raise OutputError(at, name, "a list")


def map_items(value: object, at: str, name: str) -> list[tuple[str, Any]]:
    """The entries of a `map` field's value: a mapping whose keys are all strings (JSON object keys)."""
    if isinstance(value, Mapping) and not isinstance(value, _NOT_OBJECTS):
        entries = list(value.items())
        if all(type(key) is str for key, _ in entries):
            return entries
        raise OutputError(at, name, "an object with string keys")
    raise OutputError(at, name, "an object")


def shape_items(
    items: list[Any] | tuple[Any, ...], shape: Callable[[object, str], dict[str, Any]], at: str
) -> list[dict[str, Any]]:
    """Shape every item of a list; the path of a failing item (`at[3]`) is built only when one fails."""
    try:
        return [shape(item, at) for item in items]
    except OutputError:
        for index, item in enumerate(items):
            shape(item, f"{at}[{index}]")  # raises again, now with the item's index in the path
        raise


# --- output checks: return the JSON value or raise OutputError ---------------------------------------


def out_string(value: object, at: str, name: str) -> str:
    if type(value) is str:
        return value
    if isinstance(value, enum.Enum) and isinstance(value.value, str):
        return value.value
    if isinstance(value, str):
        return str(value)
    raise OutputError(at, name, "a string")


def out_integer(value: object, at: str, name: str) -> int:
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise OutputError(at, name, "an integer")


def out_number(value: object, at: str, name: str) -> int | float:
    if type(value) is int:
        return value
    if isinstance(value, _NUMBERS) and not isinstance(value, bool) and math.isfinite(value):
        return value if type(value) is float else float(value)
    raise OutputError(at, name, "a finite number")


def out_boolean(value: object, at: str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise OutputError(at, name, "true or false")


def out_date(value: object, at: str, name: str) -> str:
    """An RFC 3339 full-date (`format: date`). A `datetime` is refused: its calendar day depends on a zone."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return datetime.date.isoformat(value)  # the base method: a subclass cannot change the format
    if isinstance(value, str) and _DATE.match(value):
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            pass
        else:
            return value
    raise OutputError(at, name, "a date (YYYY-MM-DD)")


def out_datetime(value: object, at: str, name: str) -> str:
    """An RFC 3339 date-time with an offset (`format: date-time`), whatever form the handler used.

    A string is parsed as input is (`fromisoformat`, with a `T`); one already in RFC 3339 form is sent
    unchanged, any other is sent re-formatted, so what the schema advertises holds by construction. A
    naive value (object or string) is taken as UTC (spec §5.8).
    """
    if isinstance(value, datetime.datetime):
        return _rfc3339(value, at, name)
    if isinstance(value, str) and "T" in value:
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if _RFC3339_DATETIME.match(value):
                return str(value)  # `str()`: a subclass is sent as plain text
            return _rfc3339(parsed, at, name)
    raise OutputError(at, name, "an ISO 8601 date-time")


def _rfc3339(value: datetime.datetime, at: str, name: str) -> str:
    """`value` as RFC 3339: naive → UTC; an offset that is not whole minutes (RFC 3339 has none) → UTC."""
    if value.tzinfo is datetime.UTC:  # the common case, and the cheapest
        return datetime.datetime.isoformat(value)
    offset = value.utcoffset()
    if offset is None:
        return datetime.datetime.isoformat(value) + "+00:00"
    if offset.seconds % 60 or offset.microseconds:  # isoformat would write it (`+00:09:21`, a local mean time)
        try:
            value = value.astimezone(datetime.UTC)
        except OverflowError:
            raise OutputError(at, name, "a date-time whose UTC time is within years 1 to 9999") from None
    return datetime.datetime.isoformat(value)


def out_uuid(value: object, at: str, name: str) -> str:
    """The canonical lowercase hyphenated form (`format: uuid`), whichever form `uuid.UUID` was given."""
    if isinstance(value, uuid.UUID):
        return uuid.UUID.__str__(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise OutputError(at, name, "a UUID")


def out_enum(value: object, allowed: frozenset[str], at: str, name: str) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str) and value in allowed:
        return value
    raise OutputError(at, name, "one of " + ", ".join(sorted(allowed)))


def out_json(value: object, at: str, name: str) -> Any:
    """A `json` field's value, copied, if it is plain JSON: dicts with string keys, lists (or tuples), strings,
    integers, finite floats, booleans, null. Anything else (a dataclass, a pydantic model, an ORM row) is
    refused rather than serialized: its attributes are not declared, so hidden ones could ride along."""
    try:
        copied = _plain_json(value)
    except RecursionError:
        raise OutputError(at, name, "plain JSON nested less deeply") from None
    if value is None:  # a nullable field never gets here with None
        raise OutputError(at, name, "a JSON value other than null")
    if copied is _NOT_JSON:
        raise OutputError(at, name, "plain JSON (objects with string keys, arrays, strings, numbers, booleans, null)")
    return copied


_NOT_JSON: Final = object()


def _plain_json(value: object) -> Any:
    """A fresh copy of `value` if it is plain JSON, else `_NOT_JSON`."""
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else _NOT_JSON
    if isinstance(value, list | tuple) and type(value) in (list, tuple):  # exactly these, not subclasses
        items = [_plain_json(v) for v in value]
        return _NOT_JSON if any(i is _NOT_JSON for i in items) else items
    if isinstance(value, dict) and type(value) is dict:
        members = {k: _plain_json(v) for k, v in value.items()}
        if any(type(k) is not str for k in members) or any(v is _NOT_JSON for v in members.values()):
            return _NOT_JSON
        return members
    return _NOT_JSON


# --- casts: read-time conversions declared in the spec ------------------------------------------------


def cast_number(value: object, at: str, name: str) -> float:
    if isinstance(value, _NUMBERS) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            raise OutputError(at, name, "a number within float range") from None
        if math.isfinite(number):
            return number
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    raise OutputError(at, name, "a value that can be cast to a number")


def cast_integer(value: object, at: str, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise OutputError(at, name, "a value that can be cast to an integer")


def cast_string(value: object, at: str, name: str) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (str, int, float, uuid.UUID)) and not isinstance(value, bool):
        try:
            return str(value)
        except ValueError:  # an integer over sys.get_int_max_str_digits() digits
            pass
    raise OutputError(at, name, "a value that can be cast to a string")


def cast_boolean(value: object, at: str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise OutputError(at, name, "a value that can be cast to true or false")


def cast_date(value: object, at: str, name: str) -> str:
    if isinstance(value, datetime.datetime):
        return value.date().isoformat()
    if isinstance(value, str) and "T" in value:
        try:
            return datetime.datetime.fromisoformat(value).date().isoformat()
        except ValueError:
            pass
    return out_date(value, at, name)


def cast_datetime(value: object, at: str, name: str) -> str:
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return datetime.datetime.combine(value, datetime.time(), datetime.UTC).isoformat()  # midnight UTC
    if isinstance(value, _NUMBERS) and not isinstance(value, bool):
        try:
            return datetime.datetime.fromtimestamp(value, datetime.UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            raise OutputError(at, name, "a timestamp within the supported range") from None
    return out_datetime(value, at, name)


# --- input checks: append a FieldError and return None when the value is wrong --------------------------


def _shown(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str) if value is not None else "null"
    except (RecursionError, ValueError):  # nested too deeply to echo: say what it is instead
        return _kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__
    )


def bad(errors: list[FieldError], name: str, expected: str, value: object, *, secret: bool = False) -> None:
    """Record a wrong value; a hidden field's value is never echoed back."""
    sent = f"you sent {_kind(value)}" if secret else f"you sent {_shown(value)}"
    errors.append(FieldError(name, f"expected {expected}; {sent}."))


def in_string(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is str:
        return value
    bad(errors, name, "a string", value, secret=secret)
    return None


def in_integer(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    bad(errors, name, "an integer", value, secret=secret)
    return None


def in_number(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return value  # NaN and ±Infinity are not JSON numbers, though the transports' JSON parser lets them in
    bad(errors, name, "a number", value, secret=secret)
    return None


def in_boolean(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is bool:
        return value
    bad(errors, name, "true or false", value, secret=secret)
    return None


def in_date(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is str and _DATE.match(value):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    bad(errors, name, "a date as YYYY-MM-DD", value, secret=secret)
    return None


def in_datetime(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is str and "T" in value:
        try:
            return datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
    bad(errors, name, "an ISO 8601 date-time like 2026-01-31T09:30:00Z", value, secret=secret)
    return None


def in_uuid(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is str:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    bad(errors, name, "a UUID", value, secret=secret)
    return None


def in_enum(value: object, allowed: tuple[str, ...], name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is str and value in allowed:
        return value
    bad(errors, name, "one of " + ", ".join(repr(v) for v in allowed), value, secret=secret)
    return None


def in_list(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is list:
        return value
    bad(errors, name, "an array", value, secret=secret)
    return None


def in_object(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    if type(value) is dict:
        return value
    bad(errors, name, "an object", value, secret=secret)
    return None


def in_json(value: object, name: str, errors: list[FieldError], secret: bool = False) -> Any:
    """Any JSON value but null (which needs `nullable`, as for every type); NaN and ±Infinity are not JSON."""
    try:
        plain = value is not None and _plain_json(value) is not _NOT_JSON
    except RecursionError:
        plain = False
    if plain:
        return value
    bad(errors, name, "a JSON value other than null, NaN or Infinity", value, secret=secret)
    return None


# --- constraints: run after the type check, on its result (None when that check failed already) ----------


def in_range(
    value: Any,
    name: str,
    errors: list[FieldError],
    expected: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: float | None = None,
    exclusive_maximum: float | None = None,
    secret: bool = False,
) -> Any:
    """A number within its declared bounds; `expected` says them all, in words (written at build time)."""
    if value is None:
        return None
    if (
        (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
        or (exclusive_minimum is not None and value <= exclusive_minimum)
        or (exclusive_maximum is not None and value >= exclusive_maximum)
    ):
        bad(errors, name, expected, value, secret=secret)
        return None
    return value


def in_text(
    value: Any,
    name: str,
    errors: list[FieldError],
    expected: str,
    *,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: re.Pattern[str] | None = None,
    secret: bool = False,
) -> Any:
    """A string of the declared length (in code points, as JSON Schema counts) containing a match of `pattern`
    (translated from ECMA-262 at build time, so it accepts what the schema advertises)."""
    if value is None:
        return None
    if (min_length is not None and len(value) < min_length) or (max_length is not None and len(value) > max_length):
        sent = "a string" if secret else f"{len(value)} characters"
        errors.append(FieldError(name, f"expected {expected}; you sent {sent}."))
        return None
    if pattern is not None and pattern.search(value) is None:
        bad(errors, name, expected, value, secret=secret)
        return None
    return value


def in_items(
    value: Any,
    name: str,
    errors: list[FieldError],
    expected: str,
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    unique: bool = False,
    secret: bool = False,
) -> Any:
    """An array of the declared size, its items pairwise distinct as JSON values when `unique`
    (1 and 1.0 are equal, true and 1 are not, objects compare by their members)."""
    if value is None:
        return None
    if (min_items is not None and len(value) < min_items) or (max_items is not None and len(value) > max_items):
        errors.append(FieldError(name, f"expected {expected}; you sent {len(value)} items."))
        return None
    if unique:
        repeated = _first_repeat(value)
        if repeated is not None:
            earlier, later = repeated
            said = (
                "repeated items"
                if secret
                else f"item {later} equal to item {earlier}"
                if earlier != later
                else f"item {later}, nested too deeply to compare"
            )
            errors.append(FieldError(name, f"expected {expected}; you sent {said}."))
            return None
    return value


def _first_repeat(items: list[Any]) -> tuple[int, int] | None:
    """The first pair (earlier, later) of equal items; a list too deeply nested to compare counts as repeating."""
    seen: dict[object, int] = {}
    for index, item in enumerate(items):
        try:
            identity = _json_identity(item)
        except RecursionError:
            return (index, index)
        if identity in seen:
            return (seen[identity], index)
        seen[identity] = index
    return None


def _json_identity(value: object) -> object:
    """A hashable value equal for equal JSON values and only for them."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, float) and value.is_integer():
        return ("number", int(value))
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_json_identity(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _json_identity(v)) for k, v in value.items()))
    return ("other", repr(value))


def missing(errors: list[FieldError], name: str, expected: str) -> Any:
    """Record a missing required field; returns None, typed Any like the checks' results."""
    errors.append(FieldError(name, f"this required field is missing; expected {expected}."))
    return None


def check_keys(
    arguments: Mapping[str, Any],
    allowed: frozenset[str],
    guarded: frozenset[str],
    at: str,
    errors: list[FieldError],
    secret: bool = False,
) -> None:
    """Refuse keys that are not declared; a guarded key gets a message saying it can never be written.

    Inside a hidden field (`secret`) the keys sent are part of its value, so an unknown one is not named:
    one error at `at` says that the object holds unknown fields.
    """
    accepted = "Accepted fields: " + (", ".join(sorted(allowed)) or "none") + "."
    unnamed = False
    for key in arguments:
        if key in allowed:
            continue
        name = f"{at}.{key}" if at else str(key)
        if key in guarded:
            errors.append(FieldError(name, "this field is guarded: it is set by the server and cannot be written."))
        elif secret:
            unnamed = True
        else:
            errors.append(FieldError(name, "unknown field. " + accepted))
    if unnamed:
        errors.append(FieldError(at, "this object holds unknown fields. " + accepted))
