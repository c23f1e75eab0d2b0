"""Hypothesis strategies for spec documents: names, a TOML writer, the spec grammar, and damage.

`spec_documents()` draws a spec (as a dict, with the XState machine files it reads) from the grammar: servers,
models with fields of every type and key, hidden/guarded/fillable/casts, presenters with rules, UI blocks,
suggestions, redactions and embeds, inline and XState workflows, tools with input/input_from/returns/bind_state.
`write_toml` writes one in varied TOML syntax (header tables, inline tables, dotted keys, arrays of tables, every
string style, comments). `damaged_documents()` and `damaged_texts()` then break them: wrong value types, unknown
keys, dropped keys, dangling references, bad names, broken expressions, huge and deeply nested values, duplicated
tables, truncated text, random bytes, non-UTF-8 encodings.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import keyword
import math
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import strategies as st

from fusiongen.names import snake_case
from tests.support.build import ROOT

# --- names ----------------------------------------------------------------------------------------------

RESERVED = frozenset(keyword.kwlist) | {"match", "case", "type", "_", "fields_set"}
SCALARS = ("string", "text", "integer", "number", "boolean", "date", "datetime", "uuid")
CAST_TARGETS = ("string", "integer", "number", "boolean", "date", "datetime")
UI_TYPES = ("table", "markdown", "list", "mermaid", "json", "code", "summary")


def _ident(regex: str, pool: tuple[str, ...]) -> st.SearchStrategy[str]:
    generated = st.from_regex(regex, fullmatch=True).filter(lambda s: s not in RESERVED)
    return st.one_of(st.sampled_from(pool), generated)


FIELD_NAMES = _ident(
    r"[a-z][a-z0-9_]{0,7}",
    (
        "id",
        "name",
        "email",
        "status",
        "amount",
        "due",
        "tags",
        "note",
        "count",
        "total",
        "a",
        "b",
        "x1",
        "created_at",
        "customer",
        "lines",
        "sku",
        "price",
        "flag",
        "kind",
        "level",
        "when_",
        "limit",
    ),
)
MODEL_NAMES = _ident(
    r"[A-Z][A-Za-z0-9]{0,6}", ("Invoice", "Customer", "LineItem", "Address", "Order", "Card", "Tag", "Item", "M", "N")
)
PRESENTER_NAMES = _ident(
    r"[A-Z][A-Za-z0-9]{0,6}", ("Invoice", "Customer", "CustomerCard", "OrderView", "Brief", "P", "Q")
)
WORKFLOW_NAMES = _ident(r"[a-z][a-z0-9_]{0,6}", ("flow", "invoice", "order", "review", "w"))
OPERATION_NAMES = _ident(r"[a-z][a-z0-9_]{0,6}", ("create", "update", "patch", "edit"))
TOOL_NAMES = st.one_of(
    st.sampled_from(
        (
            "invoice.get",
            "invoice.list",
            "customer.get",
            "order.create",
            "ping",
            "a.b",
            "report-run",
            "x",
            "Tool_1",
            "flow.go",
            "invoice.submit",
        )
    ),
    st.from_regex(r"[a-z][a-z0-9]{0,5}(\.[a-z][a-z0-9_-]{0,5}){0,2}", fullmatch=True),
).filter(lambda s: snake_case(s) not in RESERVED)
SERVER_NAMES = st.one_of(
    st.sampled_from(("billing", "shop", "a", "x-y", "fuzz_1")), st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
)
STATE_NAMES = st.one_of(
    st.sampled_from(("draft", "review", "approved", "done", "in progress", "état", "s1", "S2")),
    st.text(st.characters(blacklist_characters=".#", blacklist_categories=("Cs",)), min_size=1, max_size=6),
)
EVENT_NAMES = st.one_of(
    st.sampled_from(("SUBMIT", "APPROVE", "REJECT", "GO", "NEXT", "done", "a b")),
    st.from_regex(r"[A-Z][A-Z_]{0,6}", fullmatch=True),
)
# Free text: descriptions, rules, enum values, censor... (any character a TOML string can hold).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)
PLAIN_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="{}"), max_size=10)
BAD_NAMES = st.one_of(
    st.sampled_from(
        (
            "",
            " ",
            "1abc",
            "class",
            "None",
            "match",
            "_",
            "type",
            "fields_set",
            "a.b",
            "a-b",
            "a b",
            "é",
            "x" * 200,
            "mcp",
            "pydantic",
            "a\nb",
            "$",
            "Ⅸ",
            "__init__",
            "a" * 129,
            "Invoice",
            "invoice.get",
            "billing_server",
            "workflow_id",
            "#",
            "[]",
            "a\\b",
            '"',
            "\x00",
        )
    ),
    TEXT,
)


# --- TOML writing ---------------------------------------------------------------------------------------

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _escape(text: str, *, multiline: bool = False) -> str:
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n" and multiline:
            out.append("\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def toml_string(text: str, style: int) -> str:
    """0: basic, 1: literal (when possible), 2: multi-line basic, 3: basic with \\u escapes for non-ASCII,
    4: basic with TOML 1.1 escapes."""
    if style == 1 and "'" not in text and not any((ord(c) < 0x20 and c != "\t") or c == "\x7f" for c in text):
        return "'" + text + "'"
    if style == 2:
        body = _escape(text, multiline=True)
        if body.startswith("\n"):
            body = "\\n" + body[1:]  # a newline right after the opening quotes would be trimmed
        return '"""' + body + '"""'
    if style == 3:
        return (
            '"'
            + "".join(
                c if ord(c) < 0x80 else (f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
                for c in _escape(text)
            )
            + '"'
        )
    if style == 4:  # TOML 1.1 escapes, which tomli accepts: \xHH and \e
        parts = [
            "\\e" if c == "\x1b" else f"\\x{ord(c):02x}" if c.isalnum() and ord(c) < 0x80 else _escape(c) for c in text
        ]
        return '"' + "".join(parts) + '"'
    return '"' + _escape(text) + '"'


class Writer:
    """Writes a document as TOML; every stylistic choice comes from a seeded random generator (one hypothesis
    draw, not one per choice: per-choice draws cost more than validating the spec)."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.lines: list[str] = []

    def choice(self, *options: Any) -> Any:
        return self.random.choice(options)

    def key(self, key: str) -> str:
        if BARE_KEY.match(key) and self.choice(True, True, True, False):
            return key
        return toml_string(key, self.choice(0, 0, 1, 3, 4))

    def value(self, value: Any) -> str:
        if value is True or value is False:
            return "true" if value else "false"
        if isinstance(value, int):
            if value >= 0 and self.choice(False, False, False, True):
                return self.choice(hex(value), f"{value:_}", "+" + str(value))
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return self.choice("nan", "+nan", "-nan")
            if math.isinf(value):
                return "inf" if value > 0 else "-inf"
            return repr(value)
        if isinstance(value, str):
            return toml_string(value, self.choice(0, 0, 1, 2, 3, 4))
        if isinstance(value, datetime.datetime):
            if value.second == value.microsecond == 0 and value.tzinfo is None and self.choice(True, False):
                return value.isoformat(timespec="minutes")  # TOML 1.1: seconds may be left out
            return value.isoformat(sep=self.choice("T", "T", " "))
        if isinstance(value, datetime.date | datetime.time):
            return value.isoformat()
        if isinstance(value, list):
            items = [self.value(v) for v in value]
            if items and self.choice(False, False, True):
                return "[\n" + "".join(f"  {item},\n" for item in items) + "]"
            return "[" + ", ".join(items) + (self.choice("", ",") if items else "") + "]"
        if isinstance(value, dict):
            pairs = [f"{self.key(str(k))} = {self.value(v)}" for k, v in value.items()]
            if pairs and self.choice(False, False, False, True):  # TOML 1.1: newlines and a trailing comma
                return "{\n" + "".join(f"    {pair},\n" for pair in pairs) + "}"
            return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
        raise TypeError(type(value))

    def comment(self) -> None:
        if self.choice(False, False, False, False, True):
            self.lines.append(self.choice("", "# a comment", "#", "   # [not.a.table]", "\t"))

    def table(self, path: tuple[str, ...], table: dict[str, Any]) -> None:
        later_tables: list[tuple[str, dict[str, Any]]] = []
        later_arrays: list[tuple[str, list[dict[str, Any]]]] = []
        for key, value in table.items():
            self.comment()
            if isinstance(value, dict) and value:
                style = self.choice("header", "header", "inline", "dotted") if path or value else "header"
                if not path:
                    style = self.choice("header", "header", "header", "inline")
                if style == "header":
                    later_tables.append((key, value))
                    continue
                if style == "dotted" and not any(isinstance(v, dict) for v in value.values()):
                    for sub, item in value.items():
                        self.lines.append(f"{self.key(key)}.{self.key(str(sub))} = {self.value(item)}")
                    continue
            elif (
                isinstance(value, list)
                and value
                and all(isinstance(v, dict) for v in value)
                and self.choice(True, True, False)
            ):
                later_arrays.append((key, value))
                continue
            trailer = self.choice("", "", "", "  # trailing")
            self.lines.append(f"{self.key(key)} = {self.value(value)}{trailer}")
        for key, value in later_tables:
            self.lines.append("")
            self.lines.append("[" + ".".join(self.key(p) for p in (*path, key)) + "]")
            self.table((*path, key), value)
        for key, items in later_arrays:
            for item in items:
                self.lines.append("")
                self.lines.append("[[" + ".".join(self.key(p) for p in (*path, key)) + "]]")
                self.table((*path, key), item)

    def document(self, doc: dict[str, Any]) -> str:
        self.table((), doc)
        return "\n".join(self.lines) + self.choice("\n", "", "\n\n")


def same(a: Any, b: Any) -> bool:
    """Equal as documents (NaN equals NaN; table order does not matter)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def write_toml(draw: Callable[[st.SearchStrategy[Any]], Any], doc: dict[str, Any]) -> str:
    return Writer(draw(st.integers(0, 2**32 - 1))).document(doc)


# --- the spec grammar, as hypothesis strategies ---------------------------------------------------------

Files = dict[str, bytes]  # files beside the spec (XState machines)


def decl_type(decl: Any) -> tuple[str, str | None]:
    """(type, items) of a field declaration in short or table form."""
    if isinstance(decl, str):
        return decl, None
    items = decl.get("items")
    if isinstance(items, dict):  # an inline object's table (or `{ type = "T" }`)
        items = items.get("type", "object")
    return decl.get("type", "string"), items


def expr_kind(decl: Any, models: dict[str, Any], cast: str | None = None) -> str:
    kind, _ = decl_type(cast or decl)
    if kind in ("string", "text", "date", "datetime", "uuid", "enum"):
        return "str"
    if kind in ("integer", "number"):
        return "num"
    if kind == "boolean":
        return "bool"
    if kind == "list":
        return "list"
    return "obj" if kind in models or kind == "object" else "str"


def default_strategy(decl: dict[str, Any], models: list[str], clean: bool) -> st.SearchStrategy[Any]:
    kind, items = decl.get("type"), decl.get("items")
    plain = st.one_of(st.text(max_size=6), st.integers(-1000, 1000), st.booleans())
    if kind in ("string", "text"):
        return TEXT
    if kind == "integer":
        return st.integers(-(2**63), 2**63 - 1)
    if kind == "number":
        return st.one_of(st.integers(-(2**53), 2**53), st.floats(allow_nan=not clean, allow_infinity=not clean))
    if kind == "boolean":
        return st.booleans()
    if kind == "date":
        return st.one_of(st.dates(), st.dates().map(datetime.date.isoformat))
    if kind == "datetime":
        moments = st.datetimes(timezones=st.sampled_from([None, datetime.UTC]))
        return st.one_of(moments, moments.map(datetime.datetime.isoformat))
    if kind == "uuid":
        return st.uuids().map(str)
    if kind == "enum":
        return st.sampled_from(decl["values"])
    if kind == "list":  # list items are JSON values: dates and date-times as text
        item = default_strategy({"type": items}, models, clean) if items in SCALARS else st.just({})
        return st.lists(item.map(lambda v: v.isoformat() if isinstance(v, datetime.date) else v), max_size=3)
    # a model: any table fits (the build only checks that it is one)
    values = plain if clean else st.one_of(plain, plain, plain, plain, st.dates(), st.datetimes(), st.floats())
    return st.dictionaries(FIELD_NAMES, values, max_size=3)


MAX_OBJECT_DEPTH = 2  # inline objects inside inline objects: deep enough to reach every nested code path


@st.composite
def inline_object(draw: Any, models: list[str], clean: bool, depth: int) -> dict[str, Any]:
    """`{ type = "object", fields = {...} }`, whose fields may say hidden, guarded and cast themselves."""
    names = draw(st.lists(FIELD_NAMES, min_size=1, max_size=3, unique=True))
    fields: dict[str, Any] = {}
    for name in names:
        decl = draw(field_decl(models, clean, depth + 1))
        if draw(st.integers(0, 3)) == 0:
            decl = {"type": decl} if isinstance(decl, str) else decl
            member = draw(st.sampled_from(("hidden", "guarded", "cast")))
            scalar = decl.get("type") in SCALARS
            decl[member] = draw(st.sampled_from(CAST_TARGETS)) if member == "cast" and scalar else True
            if member == "cast" and not scalar:
                del decl[member]
        fields[name] = decl
    return {"type": "object", "fields": fields}


@st.composite
def field_decl(draw: Any, models: list[str], clean: bool, depth: int = 0) -> Any:
    kinds = [*SCALARS, "enum", "list"] + (["model"] * 2 if models else [])
    kinds += ["object"] if depth < MAX_OBJECT_DEPTH else []
    kind = draw(st.sampled_from(kinds))
    decl: dict[str, Any] = {}
    if kind == "enum":
        decl["type"] = "enum"
        decl["values"] = draw(
            st.lists(
                st.one_of(st.sampled_from(("draft", "paid", "gold", "a")), TEXT), min_size=1, max_size=4, unique=True
            )
        )
    elif kind == "list":
        decl["type"] = "list"
        objects = depth < MAX_OBJECT_DEPTH and draw(st.integers(0, 4)) == 0
        decl["items"] = (
            draw(inline_object(models, clean, depth)) if objects else draw(st.sampled_from([*SCALARS, *models]))
        )
    elif kind == "object":
        decl = draw(inline_object(models, clean, depth))
    elif kind == "model":
        decl["type"] = draw(st.sampled_from(models))
    else:
        decl["type"] = kind
    if draw(st.booleans()):
        decl["description"] = draw(TEXT)
    if draw(st.booleans()):
        decl["required"] = draw(st.booleans())
    if draw(st.booleans()):
        decl["nullable"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        decl["default"] = draw(default_strategy(decl, models, clean))
    if list(decl) == ["type"] and kind not in ("enum", "list", "object") and draw(st.booleans()):
        return decl["type"]  # the short form
    return decl


def names(draw: Any, strategy: st.SearchStrategy[str], low: int, high: int) -> list[str]:
    """Unique names whose snake_case forms do not collide (collisions are tested by the mutations)."""
    return draw(st.lists(strategy, min_size=low, max_size=high, unique_by=snake_case))


@st.composite
def model_def(draw: Any, models: list[str], clean: bool) -> dict[str, Any]:
    field_names = draw(st.lists(FIELD_NAMES, min_size=1, max_size=5, unique=True))
    fields = {name: draw(field_decl(models, clean)) for name in field_names}
    model: dict[str, Any] = {}
    if draw(st.booleans()):
        model["description"] = draw(st.one_of(TEXT, st.sampled_from(('ends with "', '"""', "C:\\x\\y", "\x00"))))
    model["fields"] = fields
    if draw(st.booleans()):
        model["hidden"] = draw(st.lists(st.sampled_from(field_names), max_size=2, unique=True))
    guarded = draw(st.lists(st.sampled_from(field_names), max_size=2, unique=True))
    if guarded or draw(st.booleans()):
        model["guarded"] = guarded
    writable = [n for n in field_names if n not in guarded]
    if writable and draw(st.booleans()):
        ops = draw(st.lists(OPERATION_NAMES, min_size=1, max_size=2, unique=True))
        model["fillable"] = {op: draw(st.lists(st.sampled_from(writable), max_size=3, unique=True)) for op in ops}
    scalars = [n for n, d in fields.items() if decl_type(d)[0] in SCALARS]
    if scalars and draw(st.booleans()):
        cast_fields = draw(st.lists(st.sampled_from(scalars), min_size=1, max_size=2, unique=True))
        model["casts"] = {n: draw(st.sampled_from(CAST_TARGETS)) for n in cast_fields}
    return model


class Presenting:
    """What the presenter generator needs to know about the spec drawn so far."""

    def __init__(self, models: dict[str, Any], tools: list[str]) -> None:
        self.models = models
        self.tools = tools
        self.schemas: dict[str, dict[str, Any]] = {}  # presenter → its fields (name → decl)
        self.model_of: dict[str, str | None] = {}  # presenter → its model (None: inline schema)
        self.redacts: dict[str, bool] = {}  # presenter → masks something (itself or an embed)

    def visible(self, model: str) -> dict[str, Any]:
        spec = self.models[model]
        hidden = set(spec.get("hidden", ()))
        casts = spec.get("casts", {})
        return {n: ({"type": casts[n]} if n in casts else d) for n, d in spec["fields"].items() if n not in hidden}


def placeholder(draw: Any, readable: dict[str, str], count_ok: bool) -> str:
    options = ["{'x'}", "{1 + 2}", "{null}", "{{literal}}"]
    if count_ok:
        options += ["{count()}", "{count() * 2}"]
    for name, kind in readable.items():
        options.append("{" + name + "}")
        options += {
            "str": ["{upper(" + name + ")}", "{len(" + name + ")}", "{lower(" + name + ") + '!'}"],
            "num": ["{" + name + " / 100}", "{round(" + name + ", 2)}", "{abs(" + name + ")}"],
            "bool": ["{str(" + name + ")}"],
            "list": ["{len(" + name + ")}"],
            "obj": ["{len(" + name + ")}"],
        }[kind]
    return draw(st.sampled_from(options))


def template(draw: Any, readable: dict[str, str], count_ok: bool = False) -> str:
    parts = draw(st.lists(st.one_of(PLAIN_TEXT, st.builds(lambda: None)), max_size=3))
    return "".join(p if p is not None else placeholder(draw, readable, count_ok) for p in parts)


def condition(draw: Any, readable: dict[str, str], count_ok: bool = False) -> str:
    options = ["true", "1 < 2", "not false"]
    if count_ok:
        options += ["count() > 1", "count() == 0"]
    for name, kind in readable.items():
        options += [f"{name} == null", f"{name} != null", f"len(str({name})) > 0"]
        options += {
            "str": [f"{name} == 'x'", f"{name} in ['a', 'b']", f"'a' in {name}", f"{name} < 'm'"],
            "num": [f"{name} > 3", f"{name} % 2 == 0", f"-{name} <= 1.5"],
            "bool": [f"{name}", f"not {name}", f"{name} and true"],
            "list": [f"len({name}) >= 1"],
            "obj": [f"len({name}) > 0"],
        }[kind]
    first = draw(st.sampled_from(options))
    if draw(st.integers(0, 3)) == 0:
        return f"{first} {draw(st.sampled_from(('and', 'or')))} ({draw(st.sampled_from(options))})"
    return first


@st.composite
def presenter_def(draw: Any, name: str, ctx: Presenting, earlier: list[str], clean: bool) -> dict[str, Any]:
    presenter: dict[str, Any] = {}
    if ctx.models and draw(st.integers(0, 3)) > 0:
        model = draw(st.sampled_from(sorted(ctx.models)))
        presenter["model"] = model
        visible = ctx.visible(model)
        schema = visible
        if visible and draw(st.booleans()):
            chosen = draw(st.lists(st.sampled_from(list(visible)), min_size=1, max_size=len(visible), unique=True))
            presenter["fields"] = chosen
            schema = {n: visible[n] for n in chosen}
        ctx.model_of[name] = model
    else:
        schema = {
            n: draw(field_decl(sorted(ctx.models), True))
            for n in draw(st.lists(FIELD_NAMES, min_size=1, max_size=4, unique=True))
        }
        presenter["schema"] = schema
        ctx.model_of[name] = None
    ctx.schemas[name] = schema
    # embeds: a model field (or list of models) shaped by an earlier presenter of that model
    embeds: dict[str, str] = {}
    for field_name, decl in schema.items():
        kind, items = decl_type(decl)
        target = items if kind == "list" else kind
        if target in ctx.models:
            fits = [p for p in earlier if ctx.model_of[p] in (target, None)]
            if fits and draw(st.booleans()):
                embeds[field_name] = draw(st.sampled_from(fits))
    if embeds:
        presenter["embed"] = embeds
    # redactions: top-level fields, and paths into models and lists of models
    paths: list[str] = []
    tainted: set[str] = {f for f, child in embeds.items() if ctx.redacts.get(child)}
    for field_name, decl in schema.items():
        if draw(st.integers(0, 4)) != 0 or (clean and field_name in embeds):
            continue  # (a parent mask inside an embed is FG158 when the child's expressions read that value)
        kind, items = decl_type(decl)
        target = items if kind == "list" else kind
        inner: dict[str, Any] = {}
        if target in ctx.models:
            inner = ctx.schemas[embeds[field_name]] if field_name in embeds else ctx.visible(target)
        stem = f"{field_name}[*]" if kind == "list" else field_name
        choices = [stem] if kind == "list" and items in SCALARS else []
        if kind != "list":
            choices.append(field_name)
        choices += [f"{stem}.{sub}" for sub in inner] + ([f"{stem}.*"] if inner else [])
        if choices:
            paths.append(draw(st.sampled_from(choices)))
            tainted.add(field_name)
    if not clean and draw(st.integers(0, 12)) == 0:  # paths that match nothing or do not parse: FG155
        paths.append(draw(st.sampled_from(["*.email", "*[*].name", "nope", "a..b"])))
        tainted.update(schema)
    if paths:
        presenter["redact_pii"] = paths
        if draw(st.booleans()):
            presenter["censor"] = draw(TEXT)
    ctx.redacts[name] = bool(paths) or bool(tainted)
    models = set(ctx.models)
    kinds = {n: expr_kind(d, {m: None for m in models}) for n, d in schema.items()}
    model_readable = {n: k for n, k in kinds.items() if n not in tainted}
    user_readable = kinds
    whole_item_clean = not tainted
    if draw(st.booleans()):
        presenter["rules"] = [template(draw, model_readable) for _ in range(draw(st.integers(1, 2)))]
    if draw(st.integers(0, 2)) == 0:
        presenter["collection_rules"] = [template(draw, {}, count_ok=True)]
    if draw(st.integers(0, 2)) == 0:
        presenter["rules_when"] = [{"when": condition(draw, model_readable), "rule": template(draw, model_readable)}]
    if ctx.tools and draw(st.integers(0, 2)) == 0:
        suggestion = {"tool": draw(st.sampled_from(ctx.tools)), "reason": template(draw, model_readable)}
        if draw(st.booleans()):
            suggestion["when"] = condition(draw, model_readable)
        presenter["suggest"] = [suggestion]
    for key, collection in (("ui", False), ("collection_ui", True)):
        if draw(st.integers(0, 2)) == 0:
            blocks = [
                ui_block(draw, model_readable, user_readable, collection, whole_item_clean)
                for _ in range(draw(st.integers(1, 3)))
            ]
            presenter[key] = blocks
    if draw(st.integers(0, 3)) == 0:
        presenter["limit"] = draw(st.integers(1, 5))
    return presenter


def ui_block(
    draw: Any, model_readable: dict[str, str], user_readable: dict[str, str], collection: bool, whole_item_clean: bool
) -> dict[str, Any]:
    kind = draw(st.sampled_from(UI_TYPES))
    audience = draw(st.sampled_from((None, "model", "user")))
    readable = user_readable if audience == "user" else model_readable
    block: dict[str, Any] = {"type": kind}
    if audience is not None:
        block["audience"] = audience
    if kind == "table":
        columns = draw(st.lists(PLAIN_TEXT, min_size=1, max_size=3))
        block["columns"] = columns
        if collection:
            block["row"] = [template(draw, readable, count_ok=True) for _ in columns]
        else:
            block["rows"] = [[template(draw, readable) for _ in columns] for _ in range(draw(st.integers(0, 2)))]
    elif kind == "list":
        if collection:
            block["item"] = template(draw, readable, count_ok=True)
        else:
            block["items"] = [template(draw, readable) for _ in range(draw(st.integers(1, 2)))]
    elif kind == "json":
        fields = list(readable)
        if not collection and fields and (draw(st.booleans()) or not (whole_item_clean or audience == "user")):
            block["path"] = draw(st.sampled_from(fields))
        elif not (whole_item_clean or audience == "user"):
            block["audience"] = "user"  # the whole item (or list) holds redacted values: only the user sees it
    else:
        block["text"] = template(draw, {} if collection else readable, count_ok=collection)
        if kind == "code" and draw(st.booleans()):
            block["language"] = draw(st.sampled_from(("python", "text", "")))
    if draw(st.integers(0, 3)) == 0:
        block["when"] = condition(draw, {} if collection else model_readable, count_ok=collection)
    return block


@st.composite
def workflow_def(draw: Any, name: str, files: Files) -> dict[str, Any]:
    states = draw(st.lists(STATE_NAMES, min_size=1, max_size=4, unique=True))
    initial = draw(st.sampled_from(states))
    finals = set(draw(st.lists(st.sampled_from(states), max_size=2, unique=True))) - {initial}
    table: dict[str, Any] = {}
    for state in states:
        spec: dict[str, Any] = {}
        if state in finals:
            spec["type"] = "final"
        else:
            events = draw(st.lists(EVENT_NAMES, max_size=3, unique=True))
            spec["on"] = {}
            for event in events:
                target = draw(st.sampled_from(states))
                spec["on"][event] = target if draw(st.booleans()) else {"target": target, "description": draw(TEXT)}
        if draw(st.integers(0, 4)) == 0:
            spec["description"] = draw(TEXT)
        if draw(st.integers(0, 5)) == 0:
            spec["tags"] = ["t"]
        table[state] = spec
    if draw(st.integers(0, 3)) == 0:  # an XState machine exported as JSON, beside the spec
        machine = {"id": name, "initial": initial, "states": table}
        if draw(st.integers(0, 3)) == 0:
            machine["context"] = {"n": 1}
        file_name = f"{name}.machine.json"
        files[file_name] = json.dumps(
            machine, indent=draw(st.sampled_from((None, 2))), ensure_ascii=draw(st.booleans())
        ).encode("utf-8")
        return {"machine": file_name}
    return {"initial": initial, "states": table}


def workflow_events(workflow: dict[str, Any], files: Files) -> tuple[list[str], dict[str, list[str]]]:
    """States of a drawn workflow, and the events each state accepts."""
    table = workflow.get("states")
    if table is None:
        table = json.loads(files[workflow["machine"]])["states"]
    return list(table), {s: list(spec.get("on", {})) for s, spec in table.items()}


@st.composite
def spec_documents(draw: Any, clean: bool = False) -> tuple[dict[str, Any], Files]:
    """A spec meant to be valid (most are), and the machine files it refers to.

    `clean`: only valid specs (no deliberately unmatched redaction paths, no defaults JSON cannot hold), for the
    property that builds and imports servers.
    """
    files: Files = {}
    server_name = draw(SERVER_NAMES)
    server: dict[str, Any] = {"name": server_name}
    if draw(st.booleans()):
        server["version"] = draw(st.one_of(st.sampled_from(("1.0.0", "0.1.0a1")), TEXT))
    if draw(st.integers(0, 3)) == 0:
        server["package"] = snake_case(server_name).replace("-", "_") + "_pkg"
    if draw(st.integers(0, 3)) == 0:
        server["handlers"] = "h_" + snake_case(server_name).replace("-", "_")
    if draw(st.booleans()):
        server["instructions"] = draw(TEXT)
    if draw(st.integers(0, 3)) == 0:
        server["state_handle_key"] = draw(st.sampled_from(("handle", "wid", "workflow_id")))
    model_names = names(draw, MODEL_NAMES, 0, 3)
    workflow_names = names(draw, WORKFLOW_NAMES, 0, 2)
    at_least = 1 if draw(st.integers(0, 9)) else 0  # a spec without tools is valid too
    tool_names = [
        t
        for t in names(draw, TOOL_NAMES, at_least, 4)
        if not any(t in (f"{w}.start", f"{w}.status", f"{w}.resolve") for w in workflow_names)
    ]
    models: dict[str, Any] = {}
    for name in model_names:
        models[name] = draw(model_def(model_names, clean))
    doc: dict[str, Any] = {"server": server}
    if models:
        doc["models"] = models
    ctx = Presenting(models, tool_names)
    presenter_names = names(draw, PRESENTER_NAMES, 0, 3)
    presenters: dict[str, Any] = {}
    for index, name in enumerate(presenter_names):
        presenters[name] = draw(presenter_def(name, ctx, presenter_names[:index], clean))
    if presenters:
        doc["presenters"] = presenters
    workflows = {name: draw(workflow_def(name, files)) for name in workflow_names}
    if workflows:
        doc["workflows"] = workflows
    handle_key = server.get("state_handle_key", "workflow_id")
    fillable = [(m, op) for m, spec in models.items() for op in spec.get("fillable", {})]
    returnable = [*presenters, *models]
    tools: dict[str, Any] = {}
    for name in tool_names:
        tool: dict[str, Any] = {}
        if draw(st.booleans()):
            tool["kind"] = draw(st.sampled_from(("query", "mutation", "action")))
        if draw(st.booleans()):
            tricky = st.sampled_from(("a \\N{x}", "C:\\x", "nul \x00", '"""', "two\nlines", "\r"))
            tool["description"] = draw(st.one_of(TEXT, TEXT, TEXT, tricky))
        inputs = {
            n: draw(field_decl(model_names, clean))
            for n in draw(st.lists(FIELD_NAMES.filter(lambda n: n != handle_key), max_size=3, unique=True))
        }
        if fillable and draw(st.integers(0, 2)) == 0:
            model, op = draw(st.sampled_from(fillable))
            tool["input_from"] = f"{model}.{op}"
            for taken in models[model]["fillable"][op]:
                inputs.pop(taken, None)
        if inputs:
            tool["input"] = inputs
        if returnable and draw(st.booleans()):
            tool["returns"] = draw(st.sampled_from(returnable)) + draw(st.sampled_from(("", "[]")))
        if draw(st.integers(0, 3)) == 0:
            tool["handler"] = "h_" + snake_case(name)
        if workflows and draw(st.booleans()):
            workflow = draw(st.sampled_from(sorted(workflows)))
            states, accepts = workflow_events(workflows[workflow], files)
            bound_states = draw(st.lists(st.sampled_from(states), min_size=1, max_size=2, unique=True))
            binding: dict[str, Any] = {"states": bound_states}
            if len(workflows) > 1 or draw(st.booleans()):
                binding["workflow"] = workflow
            events = sorted({e for s in bound_states for e in accepts.get(s, [])})
            if events and draw(st.booleans()):
                binding["transition"] = draw(st.sampled_from(events))
            tool["bind_state"] = binding
            if draw(st.integers(0, 2)) == 0:
                tool["compact_description"] = draw(TEXT)
        tools[name] = tool
    if tools or draw(st.booleans()):
        doc["tools"] = tools
    return doc, files


# --- damage ---------------------------------------------------------------------------------------------

ANY_VALUE = st.one_of(
    st.integers(),
    st.floats(),
    st.booleans(),
    TEXT,
    st.dates(),
    st.datetimes(),
    st.times(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.just([]),
    st.just({}),
    st.just([{"a": 1}, 2]),
)
DANGLING = st.one_of(
    st.sampled_from(
        (
            "Nope",
            "invoice.get",
            "Model.op",
            "X[]",
            "",
            "[]",
            "M.",
            ".op",
            "M.op.x",
            "Invoice[][]",
            "enum",
            "list",
            "string",
            "Customer",
            "integr",
            "draft",
            "SUBMIT",
            "nowhere",
            "#id",
            "a.b",
            "flow",
            "Invoice.update",
            "approval.machine.json",
            "missing.json",
            ".",
            "..",
            "/",
            "spec.toml",
            "a\x00b.json",
        )
    ),
    BAD_NAMES,
)
EXPRESSION_BITS = (
    "{",
    "}",
    "{{",
    "}}",
    "{x[0]}",
    "{a.upper()}",
    "{1/0}",
    "{a ** 2}",
    "{a = 1}",
    "{a is None}",
    "{!a}",
    "{a && b}",
    "{a if b else c}",
    "{x:.2f}",
    "{count()}",
    "{'unterminated}",
    '{"q\\z"}',
    "{1 < 2 < 3}",
    "{" + "(" * 45 + "1" + ")" * 45 + "}",
    "{" + "-" * 80 + "1}",
    "{" + "not " * 70 + "true}",
    "{" + "[" * 45 + "]" * 45 + "}",
    "{1e999999}",
    "{99999999999999999999999999999999999999999}",
    "{min()}",
    "{max(1, 'a')}",
    "{len()}",
    "{round(1, 2, 3)}",
    "{nope(1)}",
    "{a.b.c.d.e}",
    "{ }",
    "{\t}",
    "{a in}",
    "{not}",
    "{-}",
    "{'a' + 1}",
    "{True and None}",
    "{\\}",
    "{é}",
    "{a..b}",
    "{.5}",
    "{0x10}",
)


def _containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, Any, tuple[Any, ...]]]:
    """(container, key, path) for every value under `node`."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        yield node, key, (*path, key)
        yield from _containers(value, (*path, key))


def _deep_array(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def mutate_string(draw: Any, text: str) -> str:
    op = draw(st.sampled_from(("insert", "delete", "bits", "replace")))
    at = draw(st.integers(0, len(text)))
    if op == "insert":
        return text[:at] + draw(st.text("{}()[]'\"\\.+-*/%<>=!&|:,; \n\t#", min_size=1, max_size=3)) + text[at:]
    if op == "delete":
        return text[:at] + text[at + draw(st.integers(1, 4)) :]
    if op == "bits":
        return text[:at] + draw(st.sampled_from(EXPRESSION_BITS)) + text[at:]
    return draw(st.sampled_from(EXPRESSION_BITS))


@st.composite
def damaged_documents(draw: Any) -> tuple[dict[str, Any], Files]:
    doc, files = draw(spec_documents())
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_containers(doc))
        dicts = [doc] + [v for _, _, v in ((c, k, c[k]) for c, k, _ in slots) if isinstance(v, dict)]
        strings = [(c, k) for c, k, _ in slots if isinstance(c[k], str)]
        op = draw(
            st.sampled_from(
                (
                    "wrong_type",
                    "unknown_key",
                    "drop_key",
                    "rename_key",
                    "dangling",
                    "expression",
                    "huge",
                    "deep",
                    "swap",
                    "machine",
                )
            )
        )
        if op == "wrong_type" and slots:
            container, key, _ = draw(st.sampled_from(slots))
            container[key] = draw(ANY_VALUE)
        elif op == "unknown_key":
            target = draw(st.sampled_from(dicts))
            known = list(target) or ["name"]
            typo = draw(st.sampled_from(known)) + draw(st.sampled_from(("d", "s", "_", "")))
            target[draw(st.one_of(st.just(typo), BAD_NAMES, st.sampled_from(("machine", "schema", "kindd", "on"))))] = (
                draw(ANY_VALUE)
            )
        elif op == "drop_key" and slots:
            container, key, _ = draw(st.sampled_from(slots))
            del container[key]
        elif op == "rename_key":
            target = draw(st.sampled_from(dicts))
            if target:
                old = draw(st.sampled_from(list(target)))
                new = draw(st.one_of(BAD_NAMES, DANGLING, st.sampled_from(list(target))))
                target[new] = target.pop(old)
        elif op == "dangling" and strings:
            container, key = draw(st.sampled_from(strings))
            container[key] = draw(DANGLING)
        elif op == "expression" and strings:
            container, key = draw(st.sampled_from(strings))
            container[key] = mutate_string(draw, container[key])
        elif op == "huge" and slots:  # kept small for time; linear since string decoding is cached
            container, key, _ = draw(st.sampled_from(slots))
            container[key] = draw(
                st.sampled_from(
                    (
                        "x" * 100_000,
                        "{a}" * 300,
                        2**63 - 1,
                        -(2**63),
                        [1] * 5_000,
                        {f"k{i}": i for i in range(2_000)},
                        "é" * 50_000,
                    )
                )
            )
        elif op == "deep" and slots:
            container, key, _ = draw(st.sampled_from(slots))
            container[key] = _deep_array(draw(st.sampled_from((3, 40, 99, 100, 101, 300))))
        elif op == "swap" and len(slots) >= 2:
            (c1, k1, _), (c2, k2, _) = draw(st.lists(st.sampled_from(slots), min_size=2, max_size=2))
            with contextlib.suppress(KeyError, IndexError):
                c1[k1], c2[k2] = c2[k2], c1[k1]
        elif op == "machine":
            damage_machine(draw, doc, files)
    return doc, files


def damage_machine(draw: Any, doc: dict[str, Any], files: Files) -> None:
    """Point a workflow at a machine file whose content is hostile."""
    workflows = doc.setdefault("workflows", {}) if isinstance(doc.get("workflows", {}), dict) else {}
    name = draw(st.sampled_from([*workflows, "flow"]))
    file_name = draw(st.sampled_from(("m.json", "sub/m.json", "missing.json", "")))
    workflows[name] = {"machine": file_name} if draw(st.integers(0, 5)) else {"machine": file_name, "initial": "a"}
    if not file_name or file_name == "missing.json":
        return
    content = draw(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                (
                    b"",
                    b"{",
                    b"[]",
                    b"null",
                    b'{"states": []}',
                    b'{"states": {"a": 1}}',
                    b'{"states": {}}',
                    b'{"initial": 1, "states": {"a": {"on": {"GO": ["a", "b"]}}}}',
                    b'{"states": {"a": {"on": {"*": "a", "GO": "#x", "B": ".y", "C": "a.b"}}}}',
                    b'{"states": {"a": {"states": {}, "always": "b", "invoke": {}}}, "on": {}, "entry": 1}',
                    b'{"states": {"a": {"type": "parallel", "on": {"GO": {"target": "a", "guard": "g"}}}}}',
                    b'{"initial": "a", "context": {}, "states": {"a": {"type": "final", "on": {"X": "a"}}}}',
                    b'\xef\xbb\xbf{"states": {"a": {}}}',
                    b'{"states": {"a": {}}, "states": {"b": {}}}',
                    b'{"states": {"a": {"on": {"GO": {"target": 1}}}}}',
                    b"NaN",
                    b'{"states": {"\\ud800": {}}}',
                    b"[" * 50 + b"]" * 50,
                    b'{"states": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                )
            ),
            st.builds(
                lambda s: json.dumps(s).encode(),
                st.recursive(
                    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: (
                        st.lists(inner, max_size=3)
                        | st.dictionaries(
                            st.sampled_from(("states", "initial", "on", "a", "b", "type", "target", "id")),
                            inner,
                            max_size=3,
                        )
                    ),
                    max_leaves=10,
                ),
            ),
        )
    )
    files[file_name] = content


def mutate_bytes(draw: Any, raw: bytes) -> bytes:
    op = draw(
        st.sampled_from(
            (
                "truncate",
                "dup_line",
                "dup_header",
                "drop_line",
                "insert",
                "garbage",
                "bom",
                "crlf",
                "cr",
                "latin1",
                "utf16",
                "random_bytes",
                "random_text",
                "nul",
                "swap_lines",
            )
        )
    )
    lines = raw.split(b"\n")
    if op == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    if op == "dup_line" and lines:
        at = draw(st.integers(0, len(lines) - 1))
        return b"\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]])
    if op == "dup_header":
        headers = [i for i, line in enumerate(lines) if line.startswith(b"[")]
        if headers:
            at = draw(st.sampled_from(headers))
            block = lines[at : at + draw(st.integers(1, 4))]
            return b"\n".join([*lines, *block])
    if op == "drop_line" and lines:
        at = draw(st.integers(0, len(lines) - 1))
        return b"\n".join(lines[:at] + lines[at + 1 :])
    if op == "swap_lines" and len(lines) >= 2:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if op == "insert":
        at = draw(st.integers(0, len(raw)))
        bit = draw(
            st.one_of(
                st.text("[]{}=\"'.,#\n\\ abc-_:0123456789tfTZ", min_size=1, max_size=6),
                st.sampled_from(
                    (
                        "[server]",
                        "[[tools]]",
                        "[models.M.fields]",
                        "= =",
                        '"""',
                        "'''",
                        "\\u00",
                        "\\uD800",
                        "\\x",
                        "1979-05-27T",
                        "[a.b]\n[a]\n",
                        "x = [",
                        "{ a = 1,\n b = 2 }",
                        "key = 'v' key2 = 1",
                        "0x",
                        "+inf",
                        "-nan",
                        "[" * 101,
                        "{a=" * 101,
                        "\ufeff",
                        "\r",
                        "\x7f",
                    )
                ),
            )
        ).encode("utf-8")
        return raw[:at] + bit + raw[at:]
    if op == "garbage":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at + draw(st.integers(0, 8)) :]
    if op == "bom":
        return b"\xef\xbb\xbf" + raw
    if op == "crlf":
        return raw.replace(b"\n", b"\r\n")
    if op == "cr":
        return raw.replace(b"\n", b"\r")
    if op == "latin1":
        return raw.decode("utf-8", "replace").encode("latin-1", "replace") + "é".encode("latin-1")
    if op == "utf16":
        return raw.decode("utf-8", "replace").encode(draw(st.sampled_from(("utf-16", "utf-16-le", "utf-32"))))
    if op == "random_bytes":
        return draw(st.binary(max_size=200))
    if op == "random_text":
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    if op == "nul":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + b"\x00" + raw[at:]
    return raw + b"\n"


def _seed_texts() -> list[bytes]:
    corpus = [
        ROOT / "specs" / "billing.toml",
        ROOT / "specs" / "approval.toml",
        *sorted((ROOT / "tests" / "invalid_specs").glob("*.toml")),
    ]
    return [path.read_bytes() for path in corpus if path.is_file()]


SEEDS = _seed_texts()
MACHINE_SEED = (ROOT / "specs" / "approval.machine.json").read_bytes()


@st.composite
def damaged_texts(draw: Any) -> tuple[bytes, Files]:
    if SEEDS and draw(st.integers(0, 2)) == 0:
        raw = draw(st.sampled_from(SEEDS))
        files: Files = {"approval.machine.json": MACHINE_SEED}
    else:
        doc, files = draw(spec_documents())
        raw = write_toml(draw, doc).encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        raw = mutate_bytes(draw, raw)
    return raw, files
