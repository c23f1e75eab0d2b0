"""Presenter expressions: parsed and type-checked at build time, emitted as plain Python.

Presenters carry ``{...}`` interpolations and ``when`` conditions.  The generated server
must not ship a template engine or call ``eval``, so each expression is compiled once,
here, into a short Python expression calling a few total ``_x_`` helpers
(``fusiongen/runtime/_expressions.py``, copied into the generated server).  Mistakes come back as
``ExprError`` values whose offsets point into the string the spec author wrote.

Run-time semantics (all in ``fusiongen/runtime/_expressions.py``; no data can make them raise):

* a missing or None value anywhere along a path reads as None;
* arithmetic with a None or non-number operand, division or modulo by zero, and results
  that are not finite (or integers over 3000 bits) are None;
* ``< <= > >=`` are False unless both sides are numbers or both are strings (so with
  None they are False, and ``not`` of them True); ``==``/``!=`` are Python's, None
  equals only None (``x == null`` is emitted as ``x is None``);
* ``in`` is False unless the right side is a list, or a string and the left a string;
* ``and``/``or``/``not`` and conditions count only the boolean true as true (a None or
  non-boolean value is false), so a condition's source always yields a real bool;
* ``len`` of None (or of a non-collection) is 0; ``upper lower abs round int float`` of
  None or of a wrong-typed value are None; ``min``/``max`` skip None and are None for an
  empty list or one mixing numbers and strings;
* ``round`` rounds half away from zero on the value as printed (2.675 -> 2.68), since
  Python's banker's rounding surprises readers of presented numbers;
* text (interpolation and ``str()``): None -> "", booleans -> true/false, integral
  floats without ".0", other floats rounded to 10 significant digits (0.1 + 0.2 ->
  0.3), inf/nan -> "", lists -> items joined with ", ", objects -> compact JSON.
"""

from __future__ import annotations

import ast
import difflib
import enum
import keyword
import math
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace


class ExprType(enum.Enum):
    """Static types; INTEGER is also a NUMBER and ANY is compatible with everything."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    NULL = "null"
    LIST = "list"
    OBJECT = "object"
    ANY = "any"


_T = ExprType


@dataclass(frozen=True)
class FieldInfo:
    """What the caller's schema says about a path (nullable: may be None or missing)."""

    type: ExprType
    nullable: bool
    item: ExprType | None = None
    values: tuple[str, ...] = ()  # an enum's values: comparing with another string literal is a mistake


@dataclass(frozen=True)
class ExprError:
    """A mistake in an expression; 0-based, end-exclusive offsets into the given text."""

    start: int
    end: int
    message: str


Resolver = Callable[[tuple[str, ...]], FieldInfo | None]
Access = Callable[[tuple[str, ...]], str]


@dataclass(frozen=True)
class Compiled:
    """Python source computing the value, its static type, and the field paths it reads."""

    python: str
    type: ExprType
    paths: tuple[tuple[str, ...], ...]
    helpers: frozenset[str] = frozenset()  # the `_x_` run-time helpers `python` calls


_FUNCS = ("len", "round", "str", "int", "float", "abs", "min", "max", "upper", "lower")
_CONSTS: dict[str, object] = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
# Binary operators by precedence; the Python we emit uses the same levels for or/and/==.
_BINARY = {
    "or": 1,
    "and": 2,
    "in": 4,
    "not in": 4,
    "==": 4,
    "!=": 4,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "//": 6,
    "%": 6,
}
_OR, _AND, _NOT, _CMP, _ATOM = 1, 2, 3, 4, 9
_HELPERS = {
    "<": "_x_lt",
    "<=": "_x_le",
    ">": "_x_gt",
    ">=": "_x_ge",
    "+": "_x_add",
    "-": "_x_sub",
    "*": "_x_mul",
    "/": "_x_div",
    "//": "_x_floordiv",
    "%": "_x_mod",
}
_HINTS = {
    "=": "; use '==' to compare",
    "is": "; use '==' or '!='",
    "!": "; use 'not'",
    "&&": "; use 'and'",
    "&": "; use 'and'",
    "||": "; use 'or'",
    "|": "; use 'or'",
    "**": " (there is no power operator)",
    ":": " (no format specs; use round(x, 2))",
}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_TOKEN = re.compile(
    r"""\s*(?:(?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\w*)
    |(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<name>[^\W\d]\w*)
    |(?P<op>\*\*|//|==|!=|<=|>=|&&|\|\||\S))""",
    re.X | re.S,
)
_MAX_NESTING = 40  # bounds parser recursion (parentheses, calls, lists, prefix chains)
_MAX_DEPTH = 60  # bounds tree depth: our recursion and CPython's 200-parenthesis limit
_NUMS = frozenset({_T.INTEGER, _T.NUMBER, _T.ANY})
_TEXT = frozenset({_T.STRING, _T.ANY})
# function -> (helper, accepted types of each argument (all but the first optional), what it needs)
_SIGS: dict[str, tuple[str, tuple[frozenset[ExprType], ...], str]] = {
    "len": ("_x_len", (_TEXT | {_T.LIST, _T.OBJECT},), "a string, list or object"),
    "round": ("_x_round", (_NUMS, frozenset({_T.INTEGER, _T.ANY})), "a number, then an integer"),
    "str": ("_x_fmt", (frozenset(_T),), "any value"),
    "int": ("_x_int", (_NUMS | _TEXT,), "a number or a string"),
    "float": ("_x_float", (_NUMS | _TEXT,), "a number or a string"),
    "abs": ("_x_abs", (_NUMS,), "a number"),
    "upper": ("_x_upper", (_TEXT,), "a string"),
    "lower": ("_x_lower", (_TEXT,), "a string"),
}


class _Syntax(Exception):
    """Internal: the first syntax error, as (message, start, end); never escapes the module."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # num | str | name | op | end
    text: str
    start: int
    end: int
    value: object = None


@dataclass(frozen=True)
class _Node:
    kind: str  # lit | path | list | call | unary | binary
    start: int
    end: int
    op: str = ""  # operator or function name
    value: object = None  # literal value
    kids: tuple[_Node, ...] = ()
    names: tuple[str, ...] = ()  # path segments
    spans: tuple[tuple[int, int], ...] = ()  # offsets of path segments / function name
    depth: int = 1


def _mk(
    kind: str,
    start: int,
    end: int,
    *,
    op: str = "",
    value: object = None,
    kids: tuple[_Node, ...] = (),
    names: tuple[str, ...] = (),
    spans: tuple[tuple[int, int], ...] = (),
) -> _Node:
    """Build a node, refusing trees too deep to check or to emit safely."""
    depth = 1 + max((k.depth for k in kids), default=0)
    if depth > _MAX_DEPTH:
        raise _Syntax(f"expression is too complex (over {_MAX_DEPTH} levels)", start, end)
    return _Node(kind, start, end, op, value, kids, names, spans, depth)


def _lex(text: str) -> list[_Tok]:
    """Tokens; a lexical error becomes a last "bad" token, so that earlier syntax errors win."""
    toks: list[_Tok] = []
    try:
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup or "op"
            tok, start, end = m[kind], m.start(kind), m.end(kind)
            if kind == "op" and tok in "'\"":
                raise _Syntax("unterminated string", start, len(text))
            value = (
                _number(tok, start, end)
                if kind == "num"
                else _unescape(tok[1:-1], start + 1)
                if kind == "str"
                else None
            )
            toks.append(_Tok(kind, tok, start, end, value))
    except _Syntax as exc:
        toks.append(_Tok("bad", *exc.args))
    return [*toks, _Tok("end", "", len(text), len(text))]


def _number(tok: str, start: int, end: int) -> int | float:
    m = _NUMBER.fullmatch(tok)
    if m is None:
        raise _Syntax(f"invalid number {tok!r}", start, end)
    try:
        value = float(tok) if m[1] or m[2] else int(tok)
    except ValueError:  # more digits than int() accepts
        value = math.inf
    if value == math.inf:
        raise _Syntax("number too large", start, end)
    return value


def _unescape(body: str, start: int) -> str:
    for e in re.finditer(r"\\(.)", body, re.S):
        if e[1] not in _ESCAPES:
            message = f"unknown escape '{e[0]}' (write '\\\\' for \\)"
            raise _Syntax(message, start + e.start(), start + e.end())
    return re.sub(r"\\(.)", lambda e: _ESCAPES[e[1]], body, flags=re.S)


class _Parser:
    """Precedence climbing over _BINARY, with prefix 'not' (level 3) and '-' (level 7)."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks, self.i, self.nesting = toks, 0, 0

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def is_(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind in ("op", "name") and tok.text == text

    def take(self) -> _Tok:
        self.i += 1
        return self.peek(-1)

    def error(self, tok: _Tok, message: str = "") -> _Syntax:
        if not message and tok.kind in ("end", "bad"):
            message = tok.text or "unexpected end of expression"
        return _Syntax(message or f"unexpected {tok.text!r}{_HINTS.get(tok.text, '')}", tok.start, tok.end)

    def nest(self, tok: _Tok) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise self.error(tok, "expression is nested too deeply")

    def close(self, opener: _Tok, closer: str) -> int:
        tok = self.take()
        if tok.kind == "end":
            raise self.error(opener, f"'{opener.text}' is never closed")
        if tok.kind != "op" or tok.text != closer:
            raise self.error(tok)
        self.nesting -= 1
        return tok.end

    def parse(self) -> _Node:
        if self.peek().kind == "end":
            raise _Syntax("empty expression", 0, 0)
        node = self.expr(1)
        if self.peek().kind != "end":
            raise self.error(self.peek())
        return node

    def operator(self) -> str:
        if self.is_("not") and self.is_("in", 1):
            return "not in"
        tok = self.peek()
        return tok.text if tok.kind in ("op", "name") and tok.text in _BINARY else ""

    def expr(self, least: int) -> _Node:
        tok = self.peek()
        if (self.is_("not") and least <= _NOT) or self.is_("-"):
            self.take()
            self.nest(tok)
            operand = self.expr(_NOT if tok.text == "not" else 7)
            self.nesting -= 1
            v = operand.value
            if operand.kind == "lit" and isinstance(v, (int, float)) and not isinstance(v, bool):
                node = _mk("lit", tok.start, operand.end, value=-v)  # a negative literal
            else:
                node = _mk("unary", tok.start, operand.end, op=tok.text, kids=(operand,))
        else:
            node = self.primary()
            if self.is_("["):
                raise self.error(self.peek(), "indexing is not supported")
        chained = False
        while _BINARY.get(op := self.operator(), 0) >= least:
            if chained and _BINARY[op] == _CMP:
                raise self.error(self.peek(), "comparisons can't be chained; join them with 'and'")
            self.i += 2 if op == "not in" else 1
            right = self.expr(_BINARY[op] + 1)
            node = _mk("binary", node.start, right.end, op=op, kids=(node, right))
            chained = _BINARY[op] == _CMP
        return node

    def items(self, opener: _Tok, closer: str) -> tuple[tuple[_Node, ...], int]:
        self.nest(opener)
        items: list[_Node] = []
        while not self.is_(closer) and self.peek().kind != "end":
            items.append(self.expr(1))
            if not self.is_(","):
                break
            self.take()
        return tuple(items), self.close(opener, closer)

    def primary(self) -> _Node:
        tok = self.take()
        if tok.kind in ("num", "str"):
            return _mk("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "op" and tok.text == "(":
            self.nest(tok)
            inner = self.expr(1)
            return replace(inner, start=tok.start, end=self.close(tok, ")"))
        if tok.kind == "op" and tok.text == "[":
            kids, end = self.items(tok, "]")
            return _mk("list", tok.start, end, kids=kids)
        if tok.kind != "name" or tok.text in ("and", "or", "not", "in"):
            raise self.error(tok)
        if tok.text in _CONSTS:
            return _mk("lit", tok.start, tok.end, value=_CONSTS[tok.text])
        if keyword.iskeyword(tok.text):
            raise self.error(tok, f"'{tok.text}' is not supported{_HINTS.get(tok.text, '')}")
        if self.is_("("):
            kids, end = self.items(self.take(), ")")
            return _mk("call", tok.start, end, op=tok.text, kids=kids, spans=((tok.start, tok.end),))
        names, spans = [tok.text], [(tok.start, tok.end)]
        while self.is_("."):
            dot, seg = self.take(), self.take()
            if seg.kind != "name":
                raise self.error(dot, "expected a field name after '.'")
            names.append(seg.text)
            spans.append((seg.start, seg.end))
        if self.is_("("):
            fix = f"; write {names[-1]}({'.'.join(names[:-1])})" if names[-1] in _FUNCS else ""
            raise _Syntax(f"method calls are not supported{fix}", spans[-1][0], self.peek().end)
        return _mk("path", tok.start, spans[-1][1], names=tuple(names), spans=tuple(spans))


@dataclass(frozen=True)
class _Out:
    src: str
    type: ExprType
    prec: int = _ATOM  # Python precedence of src, to parenthesize only where needed
    item: ExprType | None = None
    strict: bool = False  # src always evaluates to a real bool
    values: tuple[str, ...] = ()  # the enum values a field path can hold


def _wrap(out: _Out, least: int) -> str:
    return out.src if out.prec >= least else f"({out.src})"


def _atomic(src: str) -> str:
    """Parenthesize the caller's access source unless it is already a primary."""
    try:
        body = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError):
        return f"({src})"
    primary = (ast.Name, ast.Call, ast.Attribute, ast.Subscript, ast.Constant)
    return src if isinstance(body, primary) else f"({src})"


def _comparable(a: ExprType, b: ExprType) -> bool:
    numeric = {a, b} <= {_T.INTEGER, _T.NUMBER}
    return _T.ANY in (a, b) or _T.NULL in (a, b) or a == b or numeric


def _orderable(*types: ExprType) -> bool:
    kinds = set(types) - {_T.ANY}
    return kinds <= {_T.INTEGER, _T.NUMBER} or kinds == {_T.STRING}


def _near(name: str) -> set[str]:
    """Names one edit away, plus case variants: a Resolver can't list its fields."""
    if len(name) > 64:
        return set()
    letters = set(string.ascii_lowercase + string.digits + "_" + name)
    splits = [(name[:i], name[i:]) for i in range(len(name) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in letters}
    out |= {a + c + b for a, b in splits for c in letters}
    out |= {
        name.lower(),
        re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower(),
        re.sub(r"_([a-z])", lambda m: m[1].upper(), name),
    }
    return out - {name, ""}


@dataclass
class _Checker:
    """Type-checks trees and emits their Python source, gathering every error it can."""

    resolve: Resolver
    access: Access
    collection: bool
    errors: list[ExprError] = field(default_factory=list)
    paths: dict[tuple[str, ...], str] = field(default_factory=dict)  # path -> its source
    base: int = 0  # offset of the current expression inside the caller's text

    def fail(self, at: _Node | tuple[int, int], message: str) -> _Out | None:
        """Record an error; returns None so that checks can `return self.fail(...)`."""
        start, end = (at.start, at.end) if isinstance(at, _Node) else at
        self.errors.append(ExprError(start + self.base, end + self.base, message))
        return None

    def run(self, text: str, base: int) -> _Out | None:
        self.base = base
        try:
            return self.emit(_Parser(_lex(text)).parse())
        except _Syntax as exc:
            return self.fail(exc.args[1:], exc.args[0])
        finally:
            self.base = 0

    @staticmethod
    def truth(out: _Out) -> _Out:
        """A real bool: only the boolean true counts as true (None or junk is False)."""
        return out if out.strict else _Out(f"{out.src} is True", _T.BOOLEAN, _CMP, strict=True)

    def boolish(self, out: _Out, node: _Node, what: str) -> bool:
        if out.type in (_T.BOOLEAN, _T.ANY):
            return True
        self.fail(node, f"'{what}' needs true/false, got {out.type.name}")
        return False

    def emit(self, node: _Node) -> _Out | None:
        if node.kind == "lit":
            v = node.value
            lit = {bool: _T.BOOLEAN, type(None): _T.NULL, int: _T.INTEGER, float: _T.NUMBER}
            return _Out(repr(v), lit.get(type(v), _T.STRING), strict=isinstance(v, bool))
        if node.kind == "path":
            return self.path(node)
        outs = [self.emit(k) for k in node.kids]  # all children first: report every error
        kids = [o for o in outs if o is not None]
        if len(kids) < len(outs):
            return None
        if node.kind == "list":
            kinds = {o.type for o in kids} - {_T.NULL}
            item = (
                kinds.pop() if len(kinds) == 1 else _T.NUMBER if kinds and kinds <= {_T.INTEGER, _T.NUMBER} else _T.ANY
            )
            return _Out("[" + ", ".join(o.src for o in kids) + "]", _T.LIST, item=item)
        if node.kind == "call":
            return self.call(node, kids)
        if node.kind == "binary":
            return self.binary(node, kids[0], kids[1])
        x = kids[0]  # unary
        if node.op == "not":
            if not self.boolish(x, node.kids[0], "not"):
                return None
            if not x.strict:
                return _Out(f"{x.src} is not True", _T.BOOLEAN, _CMP, strict=True)
            return _Out(f"not {_wrap(x, _NOT)}", _T.BOOLEAN, _NOT, strict=True)
        if x.type not in _NUMS:
            return self.fail(node, f"unary '-' needs a number, got {x.type.name}")
        return _Out(f"_x_neg({x.src})", _T.NUMBER if x.type is _T.ANY else x.type)

    def path(self, node: _Node) -> _Out | None:
        path = node.names
        info = self.resolve(path)
        if info is not None:
            if path not in self.paths:
                self.paths[path] = _atomic(self.access(path))
            return _Out(self.paths[path], info.type, item=info.item, values=info.values)
        for k in range(1, len(path) + 1):  # find the first segment that does not exist
            known = self.resolve(path[:k]) if k < len(path) else None
            if known is None:
                return self.fail(node.spans[k - 1], f'unknown field "{".".join(path[:k])}"{self.suggest(path[:k])}')
            if known.type not in (_T.OBJECT, _T.ANY):
                return self.fail(
                    node.spans[k], f'"{".".join(path[:k])}" is {known.type.name}; it has no field "{path[k]}"'
                )
        return None

    def suggest(self, path: tuple[str, ...]) -> str:
        *prefix, name = path
        if self.collection and path == ("count",):
            return ' (did you mean "count()"?)'
        found = sorted(c for c in _near(name) if self.resolve((*prefix, c)) is not None)
        best = max(found, key=lambda c: difflib.SequenceMatcher(None, name, c).ratio(), default="")
        return f' (did you mean "{".".join((*prefix, best))}"?)' if best else ""

    def not_a_value(self, field: _Node, out: _Out, other: _Node) -> bool:
        """Whether `other` is a string literal that the enum field `field` never holds (reported: a typo such as
        `status == 'Open'` would otherwise make the condition silently never true)."""
        if not out.values or other.kind != "lit" or not isinstance(other.value, str) or other.value in out.values:
            return False
        name = ".".join(field.names)
        close = difflib.get_close_matches(other.value, out.values, n=1)
        folded = [v for v in out.values if v.casefold() == other.value.casefold()]
        hint = f" (did you mean '{(folded or close)[0]}'?)" if folded or close else ""
        self.fail(other, f"'{other.value}' is not a value of {name} ({', '.join(out.values)}){hint}")
        return True

    def binary(self, node: _Node, a: _Out, b: _Out) -> _Out | None:
        op, (left, right), before = node.op, node.kids, len(self.errors)
        got = f"got {a.type.name} and {b.type.name}"
        if op in ("and", "or"):
            if not self.boolish(a, left, op) & self.boolish(b, right, op):
                return None
            a, b = self.truth(a), self.truth(b)
            return _Out(f"{_wrap(a, _BINARY[op])} {op} {_wrap(b, _BINARY[op])}", _T.BOOLEAN, _BINARY[op], strict=True)
        if op in ("==", "!="):
            if not _comparable(a.type, b.type):
                return self.fail(node, f"'{op}' compares {a.type.name} with {b.type.name}: they are never equal")
            if self.not_a_value(left, a, right) | self.not_a_value(right, b, left):
                return None
            if right.kind == "lit" and right.value is None:  # exact, and reads better
                return _Out(f"{_wrap(a, _ATOM)} is{' not' * (op == '!=')} None", _T.BOOLEAN, _CMP, strict=True)
            return _Out(f"{_wrap(a, _ATOM)} {op} {_wrap(b, _ATOM)}", _T.BOOLEAN, _CMP, strict=True)
        if op in ("in", "not in"):
            if right.kind == "list" and any([self.not_a_value(left, a, item) for item in right.kids]):
                return None
            if b.type is _T.LIST and b.item is not None and not _comparable(a.type, b.item):
                self.fail(node, f"'{op}' looks for {a.type.name} in a list of {b.item.name}: it is never there")
            elif b.type is _T.STRING and a.type not in _TEXT:
                self.fail(left, f"'{op}' a string needs a string on the left, got {a.type.name}")
            elif b.type not in (_T.LIST, _T.STRING, _T.ANY):
                self.fail(right, f"'{op}' needs a list or a string on the right, got {b.type.name}")
            if len(self.errors) > before:
                return None
            if op == "in":
                return _Out(f"_x_in({a.src}, {b.src})", _T.BOOLEAN, strict=True)
            return _Out(f"not _x_in({a.src}, {b.src})", _T.BOOLEAN, _NOT, strict=True)
        if _BINARY[op] == _CMP:
            if not _orderable(a.type, b.type):
                return self.fail(node, f"'{op}' needs two numbers or two strings, {got}")
            return _Out(f"{_HELPERS[op]}({a.src}, {b.src})", _T.BOOLEAN, strict=True)
        kinds = {a.type, b.type}
        if op == "+" and kinds <= _TEXT:
            result = _T.STRING if _T.STRING in kinds else _T.ANY
        elif kinds <= _NUMS:
            result = _T.INTEGER if kinds == {_T.INTEGER} and op != "/" else _T.NUMBER
        else:
            need = "two numbers or two strings" if op == "+" else "numbers"
            return self.fail(node, f"'{op}' needs {need}, {got}")
        return _Out(f"{_HELPERS[op]}({a.src}, {b.src})", result)

    def call(self, node: _Node, args: list[_Out]) -> _Out | None:
        name, at = node.op, node.spans[0]
        if name == "count" and self.collection:
            return self.fail(node, "count() takes no arguments") if args else _Out("count", _T.INTEGER)
        if name == "count":
            return self.fail(at, "count() is only available in collection presenters")
        if name in ("min", "max"):
            return self.minmax(node, args)
        if name not in _SIGS:
            close = difflib.get_close_matches(name, _FUNCS + ("count",) * self.collection, 1)
            hint = f"did you mean '{close[0]}'?" if close else "allowed: " + ", ".join(_FUNCS)
            return self.fail(at, f"unknown function '{name}' ({hint})")
        helper, accepted, need = _SIGS[name]
        if not 1 <= len(args) <= len(accepted):
            want = "1" if len(accepted) == 1 else f"1 or {len(accepted)}"
            return self.fail(node, f"{name}() takes {want} argument(s), got {len(args)}")
        bad = [(k, o) for k, o, ok in zip(node.kids, args, accepted, strict=False) if o.type not in ok]
        for kid, out in bad:
            self.fail(kid, f"{name}() needs {need}, got {out.type.name}")
        if bad:
            return None
        result = {
            "len": _T.INTEGER,
            "str": _T.STRING,
            "int": _T.INTEGER,
            "float": _T.NUMBER,
            "upper": _T.STRING,
            "lower": _T.STRING,
        }.get(name)
        if result is None:  # round and abs keep integers integral; round(x) is one
            whole = args[0].type is _T.INTEGER or (name == "round" and len(args) == 1)
            result = _T.INTEGER if whole else _T.NUMBER
        return _Out(f"{helper}({', '.join(o.src for o in args)})", result)

    def minmax(self, node: _Node, args: list[_Out]) -> _Out | None:
        name, kinds = node.op, {o.type for o in args}
        if len(args) == 1:  # min(list)
            out, item = args[0], args[0].item or _T.ANY
            if out.type not in (_T.LIST, _T.ANY) or not _orderable(item):
                got = f"a list of {item.name}" if out.type is _T.LIST else out.type.name
                return self.fail(node.kids[0], f"{name}() needs a list of numbers or strings, got {got}")
            return _Out(f"_x_{name}({out.src})", _T.ANY if out.type is _T.ANY else item)
        if not args or not _orderable(*kinds):
            got = ", ".join(o.type.name for o in args) or "nothing"
            return self.fail(node, f"{name}() needs a list, or two or more numbers or strings; got {got}")
        result = _T.ANY if _T.ANY in kinds else kinds.pop() if len(kinds) == 1 else _T.NUMBER
        return _Out(f"_x_{name}([{', '.join(o.src for o in args)}])", result)


def _result(chk: _Checker, out: _Out | None) -> Compiled | list[ExprError]:
    if chk.errors or out is None:
        return sorted(chk.errors, key=lambda e: (e.start, e.end))
    return Compiled(out.src, out.type, tuple(chk.paths), _helpers(out.src))


def _helpers(src: str) -> frozenset[str]:
    """The run-time helpers an emitted expression calls, read from its syntax tree."""
    tree = ast.parse(src, mode="eval")
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id.startswith("_x_"))


def compile_expression(
    text: str, resolve: Resolver, *, access: Access, collection: bool = False
) -> Compiled | list[ExprError]:
    """Compile a value expression such as ``amount_cents / 100``."""
    chk = _Checker(resolve, access, collection)
    return _result(chk, chk.run(text, 0))


def compile_condition(
    text: str, resolve: Resolver, *, access: Access, collection: bool = False
) -> Compiled | list[ExprError]:
    """Compile a ``when`` condition; its source always evaluates to a real bool."""
    chk = _Checker(resolve, access, collection)
    out = chk.run(text, 0)
    if out is not None and out.type not in (_T.BOOLEAN, _T.ANY):
        chk.fail(
            (len(text) - len(text.lstrip()), len(text.rstrip())),
            f"a condition must be true or false, got {out.type.name} (compare it, e.g. status == 'paid')",
        )
    return _result(chk, out and chk.truth(out))


def _closing(text: str, i: int) -> int:
    """Index of the '}' that ends a placeholder: the lexer skips braces inside strings."""
    return next((m.start("op") for m in _TOKEN.finditer(text, i) if m["op"] == "}"), -1)


@dataclass(frozen=True)
class _Hole:
    """A placeholder's expression: `text[start:end]`, between its braces."""

    start: int
    end: int


@dataclass(frozen=True)
class _Stray:
    """A brace that is neither escaped nor part of a placeholder: `text[start:end]`."""

    start: int
    end: int
    message: str


def _template_pieces(text: str) -> Iterator[str | _Hole | _Stray]:
    """A template as compile_template and template_parts both read it: its literal texts (`{{`/`}}` unescaped),
    its placeholders, and stray braces; an unclosed `{` ends the scan."""
    literal: list[str] = []
    i = 0
    while i < len(text):
        c, j = text[i], i + 1
        if c in "{}" and text[j : j + 1] == c:
            literal.append(c)
            j += 1
        elif c == "}":
            yield _Stray(i, j, "single '}' in template; write '}}' for a literal brace")
        elif c == "{":
            j = _closing(text, i + 1)
            if j < 0:
                yield _Stray(i, i + 1, "'{' is never closed; write '{{' for a literal brace")
                break
            if literal:
                yield "".join(literal)
                literal.clear()
            yield _Hole(i + 1, j)
            j += 1
        else:
            literal.append(c)
        i = j
    if literal:
        yield "".join(literal)


def compile_template(
    text: str, resolve: Resolver, *, access: Access, collection: bool = False
) -> Compiled | list[ExprError]:
    """Compile ``"Invoice {id} is {status}"`` to a str expression; ``{{``/``}}`` are braces."""
    chk = _Checker(resolve, access, collection)
    parts: list[str] = []
    for piece in _template_pieces(text):
        if isinstance(piece, str):
            parts.append(repr(piece))
        elif isinstance(piece, _Stray):
            chk.fail((piece.start, piece.end), piece.message)
        else:
            inner = text[piece.start : piece.end]
            whole = (piece.start - 1, piece.end + 1)
            out = chk.run(inner, piece.start) if inner.strip() else chk.fail(whole, "empty placeholder")
            parts += [f"_x_fmt({out.src})"] if out else []
    return _result(chk, _Out(" + ".join(parts or [repr("")]), _T.STRING))


# --- the syntax tree, for analyses of expressions that have already compiled --------------------------------

ExprNode = _Node


def parse_expression(text: str) -> ExprNode:
    """The syntax tree of an expression that compiled (the result budget reads it to bound a value's width)."""
    return _Parser(_lex(text)).parse()


def template_parts(text: str) -> list[str | ExprNode]:
    """A template that compiled, as its literal texts (braces unescaped) and its placeholders' syntax trees, in
    order: what `compile_template` joins at run time."""
    return [
        piece if isinstance(piece, str) else parse_expression(text[piece.start : piece.end])
        for piece in _template_pieces(text)
        if not isinstance(piece, _Stray)  # none in a template that compiled
    ]
