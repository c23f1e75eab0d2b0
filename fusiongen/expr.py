"""Presenter expressions: parsed and type-checked at build time, emitted as plain Python.

Presenters carry ``{...}`` interpolations and ``when`` conditions.  The generated server
must not ship a template engine or call ``eval``, so each expression is compiled once,
here, into a short Python expression that calls a few total ``_x_`` helpers
(``RUNTIME_SOURCE``, pasted once into the generated module).  Mistakes are reported as
``ExprError`` values whose offsets point into the string the spec author wrote.

Run-time semantics (all in ``RUNTIME_SOURCE``; no data can make them raise):

* a missing or None value anywhere along a path reads as None;
* arithmetic with a None or non-number operand, division/modulo by zero, and results
  that are not finite (or integers over 3000 bits) are None;
* ``< <= > >=`` are False unless both sides are numbers or both are strings;
  ``==``/``!=`` are Python's (``x == null`` is emitted as ``x is None``);
* ``in`` is False unless the right side is a list, or a string and the left a string;
* ``and``/``or``/``not`` and conditions count only the boolean true as true;
* ``len`` of None (or a non-collection) is 0; ``upper lower abs round int float`` of
  None or of a wrong-typed value are None; ``min``/``max`` skip None and are None for an
  empty list or a list mixing numbers and strings;
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
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field, replace


class ExprType(enum.Enum):
    """Static types; INTEGER is also a NUMBER, ANY is compatible with everything."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    NULL = "null"
    LIST = "list"
    OBJECT = "object"
    ANY = "any"


T = ExprType


@dataclass(frozen=True)
class FieldInfo:
    """What the caller's schema says about a path (nullable: may be None/missing)."""

    type: ExprType
    nullable: bool
    item: ExprType | None = None


@dataclass(frozen=True)
class ExprError:
    """A mistake in an expression; offsets are 0-based and end-exclusive in the text."""

    start: int
    end: int
    message: str


Resolver = Callable[[tuple[str, ...]], FieldInfo | None]


@dataclass(frozen=True)
class Compiled:
    """Python source of the value, its static type and every field path it reads."""

    python: str
    type: ExprType
    paths: tuple[tuple[str, ...], ...]


RUNTIME_SOURCE = '''\
import decimal
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
    """Keep results printable and JSON-safe: no inf/nan, no giant integers."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return None if isinstance(v, int) and v.bit_length() > 3000 else v


def _x_num2(f: _x_Any, a: _x_Any, b: _x_Any) -> _x_Any:
    if not (_x_isnum(a) and _x_isnum(b)):
        return None
    try:
        return _x_ok(f(a, b))
    except (ArithmeticError, ValueError):
        return None


def _x_add(a: _x_Any, b: _x_Any) -> _x_Any:
    if isinstance(a, str) and isinstance(b, str):
        return a + b
    return _x_num2(operator.add, a, b)


def _x_sub(a: _x_Any, b: _x_Any) -> _x_Any:
    return _x_num2(operator.sub, a, b)


def _x_mul(a: _x_Any, b: _x_Any) -> _x_Any:
    return _x_num2(operator.mul, a, b)


def _x_div(a: _x_Any, b: _x_Any) -> _x_Any:
    return _x_num2(operator.truediv, a, b)


def _x_floordiv(a: _x_Any, b: _x_Any) -> _x_Any:
    return _x_num2(operator.floordiv, a, b)


def _x_mod(a: _x_Any, b: _x_Any) -> _x_Any:
    return _x_num2(operator.mod, a, b)


def _x_neg(a: _x_Any) -> _x_Any:
    return _x_num2(operator.sub, 0, a)


def _x_abs(a: _x_Any) -> _x_Any:
    return abs(a) if _x_isnum(a) else None


def _x_ordered(a: _x_Any, b: _x_Any) -> bool:
    return (_x_isnum(a) and _x_isnum(b)) or (isinstance(a, str) and isinstance(b, str))


def _x_lt(a: _x_Any, b: _x_Any) -> bool:
    return _x_ordered(a, b) and bool(a < b)


def _x_le(a: _x_Any, b: _x_Any) -> bool:
    return _x_ordered(a, b) and bool(a <= b)


def _x_gt(a: _x_Any, b: _x_Any) -> bool:
    return _x_ordered(a, b) and bool(a > b)


def _x_ge(a: _x_Any, b: _x_Any) -> bool:
    return _x_ordered(a, b) and bool(a >= b)


def _x_in(a: _x_Any, b: _x_Any) -> bool:
    if isinstance(b, str):
        return isinstance(a, str) and a in b
    return isinstance(b, (list, tuple)) and a in b


def _x_len(v: _x_Any) -> int:
    return len(v) if isinstance(v, (str, list, tuple, dict)) else 0


def _x_upper(v: _x_Any) -> _x_Any:
    return v.upper() if isinstance(v, str) else None


def _x_lower(v: _x_Any) -> _x_Any:
    return v.lower() if isinstance(v, str) else None


def _x_float(v: _x_Any) -> _x_Any:
    if not (_x_isnum(v) or isinstance(v, str)):
        return None
    try:
        return _x_ok(float(v))
    except (ValueError, OverflowError):
        return None


def _x_int(v: _x_Any) -> _x_Any:
    """Numbers truncate toward zero; strings may hold an integer or a decimal."""
    if isinstance(v, str):
        try:
            return _x_ok(int(v))
        except ValueError:
            v = _x_float(v)
    try:
        return _x_ok(int(v)) if _x_isnum(v) else None
    except (ValueError, OverflowError):
        return None


def _x_round(x: _x_Any, n: _x_Any = None) -> _x_Any:
    """Half away from zero on the printed value; round(x) is an integer."""
    if not _x_isnum(x) or not (n is None or (isinstance(n, int) and not isinstance(n, bool))):
        return None
    places = 0 if n is None else max(-330, min(330, n))
    try:
        step = decimal.Decimal(1).scaleb(-places)
        q = decimal.Decimal(repr(x)).quantize(step, decimal.ROUND_HALF_UP, _x_DEC)
        return _x_ok(int(q) if n is None or isinstance(x, int) else float(q))
    except (ArithmeticError, ValueError):
        return None


def _x_pick(f: _x_Any, xs: _x_Any) -> _x_Any:
    if not isinstance(xs, (list, tuple)):
        return None
    nums = [x for x in xs if _x_isnum(x)]
    strs = [x for x in xs if isinstance(x, str)]
    return f(nums or strs) if bool(nums) != bool(strs) else None


def _x_min(xs: _x_Any) -> _x_Any:
    return _x_pick(min, xs)


def _x_max(xs: _x_Any) -> _x_Any:
    return _x_pick(max, xs)


def _x_fmt(v: _x_Any) -> str:
    """Text of a value, as shown in presenters (see fusiongen.expr for the rules)."""
    try:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            if not math.isfinite(v):
                return ""
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
'''

_FUNCS = ("len", "round", "str", "int", "float", "abs", "min", "max", "upper", "lower")
_CONSTS: dict[str, object] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None
}
_CMP = ("==", "!=", "<", "<=", ">", ">=")
_ORDER = {"<": "_x_lt", "<=": "_x_le", ">": "_x_gt", ">=": "_x_ge"}
_ARITH = {"+": "_x_add", "-": "_x_sub", "*": "_x_mul", "/": "_x_div", "//": "_x_floordiv",
          "%": "_x_mod"}
_OPS2 = ("**", "//", "==", "!=", "<=", ">=", "&&", "||")
_HINTS = {"=": "; use '==' to compare", "!": "; use 'not'", "&&": "; use 'and'",
          "&": "; use 'and'", "||": "; use 'or'", "|": "; use 'or'",
          "**": " (there is no power operator)", ":": " (no format specs; use round(x, 2))"}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_MAX_NESTING = 40  # parser recursion: parentheses, calls, lists, unary chains
_MAX_DEPTH = 60  # tree depth: bounds our recursion and CPython's 200-parenthesis limit
_OR, _AND, _NOT, _CMPP, _ATOM = 1, 2, 3, 4, 9  # Python precedence of emitted source
_NUMS = frozenset({T.INTEGER, T.NUMBER, T.ANY})
# function -> (helper, accepted types per argument, description, minimum arguments)
_SIGS: dict[str, tuple[str, tuple[frozenset[ExprType], ...], str, int]] = {
    "len": ("_x_len", (frozenset({T.STRING, T.LIST, T.OBJECT, T.ANY}),),
            "a string, list or object", 1),
    "round": ("_x_round", (_NUMS, frozenset({T.INTEGER, T.ANY})), "a number, then an integer", 1),
    "str": ("_x_fmt", (frozenset(T),), "any value", 1),
    "int": ("_x_int", (_NUMS | {T.STRING},), "a number or a string", 1),
    "float": ("_x_float", (_NUMS | {T.STRING},), "a number or a string", 1),
    "abs": ("_x_abs", (_NUMS,), "a number", 1),
    "upper": ("_x_upper", (frozenset({T.STRING, T.ANY}),), "a string", 1),
    "lower": ("_x_lower", (frozenset({T.STRING, T.ANY}),), "a string", 1),
}


class _Syntax(Exception):
    """Internal: the first syntax error; turned into an ExprError, never escapes."""

    def __init__(self, start: int, end: int, message: str) -> None:
        super().__init__(message)
        self.start, self.end, self.message = start, end, message


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
    spans: tuple[tuple[int, int], ...] = ()  # path segment / function name offsets
    depth: int = 1


def _mk(kind: str, start: int, end: int, **kw: object) -> _Node:
    """Build a node, refusing trees too deep to compile or to emit safely."""
    node = _Node(kind, start, end, **kw)  # type: ignore[arg-type]
    depth = 1 + max((k.depth for k in node.kids), default=0)
    if depth > _MAX_DEPTH:
        raise _Syntax(start, end, f"expression is too complex (over {_MAX_DEPTH} levels)")
    return replace(node, depth=depth)


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "0123456789":
            m = _NUMBER.match(text, i)
            assert m is not None
            j = m.end()
            if j < n and (text[j].isalnum() or text[j] == "_"):
                raise _Syntax(i, j + 1, f"invalid number {text[i:j + 1]!r}")
            try:
                value: object = float(m[0]) if m[1] or m[2] else int(m[0])
            except ValueError:  # more digits than int() accepts
                value = float("inf")
            if value == float("inf"):
                raise _Syntax(i, j, "number too large")
            toks.append(_Tok("num", m[0], i, j, value))
            i = j
        elif c in "'\"":
            j, out = i + 1, []
            while j < n and text[j] != c:
                esc = text[j + 1:j + 2] if text[j] == "\\" else None
                if esc == "":
                    j = n
                elif esc is not None and esc not in _ESCAPES:
                    raise _Syntax(j, j + 2, f"unknown escape '\\{esc}' (write '\\\\' for \\)")
                out.append(text[j] if esc is None else _ESCAPES[esc])
                j += 1 if esc is None else 2
            if j >= n:
                raise _Syntax(i, n, "unterminated string")
            toks.append(_Tok("str", text[i:j + 1], i, j + 1, "".join(out)))
            i = j + 1
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(_Tok("name", text[i:j], i, j))
            i = j
        else:
            w = 2 if text[i:i + 2] in _OPS2 else 1
            toks.append(_Tok("op", text[i:i + w], i, i + w))
            i += w
    toks.append(_Tok("end", "", n, n))
    return toks


class _Parser:
    """Recursive descent, one method per precedence level, lowest first."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks, self.i, self.nesting = toks, 0, 0

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def is_(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind in ("op", "name") and tok.text == text

    def take(self) -> _Tok:
        self.i += 1
        return self.toks[min(self.i - 1, len(self.toks) - 1)]

    def unexpected(self, tok: _Tok) -> _Syntax:
        if tok.kind == "end":
            return _Syntax(tok.start, tok.end, "unexpected end of expression")
        return _Syntax(tok.start, tok.end, f"unexpected {tok.text!r}{_HINTS.get(tok.text, '')}")

    def close(self, opener: _Tok, closer: str) -> _Tok:
        tok = self.take()
        if tok.kind == "end":
            raise _Syntax(opener.start, opener.end, f"'{opener.text}' is never closed")
        if tok.text != closer or tok.kind != "op":
            raise self.unexpected(tok)
        return tok

    def nest(self, tok: _Tok) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise _Syntax(tok.start, tok.end, "expression is nested too deeply")

    def parse(self) -> _Node:
        if self.peek().kind == "end":
            raise _Syntax(0, 0, "empty expression")
        node = self.or_()
        if self.peek().kind != "end":
            raise self.unexpected(self.peek())
        return node

    def chain(self, sub: Callable[[], _Node], ops: tuple[str, ...]) -> _Node:
        left = sub()
        while any(self.is_(op) for op in ops):
            op = self.take().text
            right = sub()
            left = _mk("binary", left.start, right.end, op=op, kids=(left, right))
        return left

    def or_(self) -> _Node:
        return self.chain(self.and_, ("or",))

    def and_(self) -> _Node:
        return self.chain(self.not_, ("and",))

    def not_(self) -> _Node:
        if not self.is_("not"):
            return self.comparison()
        tok = self.take()
        self.nest(tok)
        operand = self.not_()
        self.nesting -= 1
        return _mk("unary", tok.start, operand.end, op="not", kids=(operand,))

    def comparison_op(self) -> str | None:
        tok = self.peek()
        if (tok.kind == "op" and tok.text in _CMP) or self.is_("in"):
            return self.take().text
        if self.is_("not") and self.is_("in", 1):
            self.i += 2
            return "not in"
        return None

    def comparison(self) -> _Node:
        left = self.additive()
        op = self.comparison_op()
        if op is None:
            return left
        right = self.additive()
        tok = self.peek()
        if self.comparison_op():
            raise _Syntax(tok.start, tok.end, "comparisons can't be chained; join them with 'and'")
        return _mk("binary", left.start, right.end, op=op, kids=(left, right))

    def additive(self) -> _Node:
        return self.chain(self.multiplicative, ("+", "-"))

    def multiplicative(self) -> _Node:
        return self.chain(self.unary, ("*", "/", "//", "%"))

    def unary(self) -> _Node:
        if not self.is_("-"):
            node = self.primary()
            if self.is_("["):
                raise _Syntax(self.peek().start, self.peek().end, "indexing is not supported")
            return node
        tok = self.take()
        self.nest(tok)
        operand = self.unary()
        self.nesting -= 1
        v = operand.value
        if operand.kind == "lit" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return _mk("lit", tok.start, operand.end, value=-v)
        return _mk("unary", tok.start, operand.end, op="-", kids=(operand,))

    def items(self, opener: _Tok, closer: str) -> tuple[tuple[_Node, ...], _Tok]:
        self.nest(opener)
        items: list[_Node] = []
        while not self.is_(closer) and self.peek().kind != "end":
            items.append(self.or_())
            if not self.is_(","):
                break
            self.take()
        self.nesting -= 1
        return tuple(items), self.close(opener, closer)

    def primary(self) -> _Node:
        tok = self.take()
        if tok.kind in ("num", "str"):
            return _mk("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "name":
            return self.name(tok)
        if tok.kind == "op" and tok.text == "(":
            self.nest(tok)
            inner = self.or_()
            self.nesting -= 1
            return replace(inner, start=tok.start, end=self.close(tok, ")").end)
        if tok.kind == "op" and tok.text == "[":
            kids, end = self.items(tok, "]")
            return _mk("list", tok.start, end.end, kids=kids)
        raise self.unexpected(tok)

    def name(self, tok: _Tok) -> _Node:
        if tok.text in _CONSTS:
            return _mk("lit", tok.start, tok.end, value=_CONSTS[tok.text])
        if tok.text in ("and", "or", "not", "in"):
            raise self.unexpected(tok)
        if keyword.iskeyword(tok.text):
            hint = "; use '==' or '!='" if tok.text == "is" else ""
            raise _Syntax(tok.start, tok.end, f"'{tok.text}' is not supported{hint}")
        if self.is_("("):
            args, end = self.items(self.take(), ")")
            return _mk("call", tok.start, end.end, op=tok.text, kids=args,
                       spans=((tok.start, tok.end),))
        names, spans = [tok.text], [(tok.start, tok.end)]
        while self.is_("."):
            dot, seg = self.take(), self.take()
            if seg.kind != "name":
                raise _Syntax(dot.start, dot.end, "expected a field name after '.'")
            names.append(seg.text)
            spans.append((seg.start, seg.end))
        if self.is_("("):
            fix = f"; write {names[-1]}({'.'.join(names[:-1])})" if names[-1] in _FUNCS else ""
            raise _Syntax(spans[-1][0], self.peek().end, f"method calls are not supported{fix}")
        return _mk("path", tok.start, spans[-1][1], names=tuple(names), spans=tuple(spans))


@dataclass(frozen=True)
class _Out:
    src: str
    type: ExprType
    prec: int = _ATOM
    item: ExprType | None = None
    strict: bool = False  # src always evaluates to a real bool


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


def _numeric(t: ExprType) -> bool:
    return t in (T.INTEGER, T.NUMBER)


def _comparable(a: ExprType, b: ExprType) -> bool:
    return T.ANY in (a, b) or T.NULL in (a, b) or a == b or (_numeric(a) and _numeric(b))


def _orderable(a: ExprType, b: ExprType) -> bool:
    kinds = {a, b} - {T.ANY}
    return kinds <= {T.INTEGER, T.NUMBER} or kinds == {T.STRING}


def _arith_type(op: str, a: ExprType, b: ExprType) -> ExprType | None:
    kinds = {a, b}
    if op == "+" and kinds <= {T.STRING, T.ANY}:
        return T.STRING if T.STRING in kinds else T.ANY
    if not kinds <= _NUMS:
        return None
    return T.INTEGER if kinds == {T.INTEGER} and op != "/" else T.NUMBER


def _near(name: str) -> set[str]:
    """Names one edit away, plus case variants: the resolver can't list its fields."""
    if len(name) > 64:
        return set()
    letters = set(string.ascii_lowercase + string.digits + "_" + name)
    splits = [(name[:i], name[i:]) for i in range(len(name) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in letters}
    out |= {a + c + b for a, b in splits for c in letters}
    out |= {name.lower(), re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower(),
            re.sub(r"_([a-z])", lambda m: m[1].upper(), name)}
    return out - {name, ""}


@dataclass
class _Checker:
    """Type-checks trees and emits their Python source, gathering every error it can."""

    resolve: Resolver
    access: Callable[[tuple[str, ...]], str]
    collection: bool
    errors: list[ExprError] = field(default_factory=list)
    paths: dict[tuple[str, ...], str] = field(default_factory=dict)  # path -> source
    base: int = 0  # offset of the current expression inside the caller's text

    def fail(self, start: int, end: int, message: str) -> None:
        self.errors.append(ExprError(start + self.base, end + self.base, message))

    def run(self, text: str, base: int) -> _Out | None:
        self.base = base
        try:
            return self.emit(_Parser(_lex(text)).parse())
        except _Syntax as exc:
            self.fail(exc.start, exc.end, exc.message)
            return None
        finally:
            self.base = 0

    def truth(self, out: _Out) -> _Out:
        """A real bool: only the boolean true counts as true (None, junk -> False)."""
        if out.strict:
            return out
        return _Out(f"{_wrap(out, _ATOM)} is True", T.BOOLEAN, _CMPP, strict=True)

    def boolish(self, out: _Out, node: _Node, what: str) -> bool:
        if out.type in (T.BOOLEAN, T.ANY):
            return True
        self.fail(node.start, node.end, f"{what} needs true/false, got {out.type.name}")
        return False

    def emit(self, node: _Node) -> _Out | None:
        if node.kind == "lit":
            v = node.value
            t = {bool: T.BOOLEAN, type(None): T.NULL, int: T.INTEGER, float: T.NUMBER}
            return _Out(repr(v), t.get(type(v), T.STRING), strict=isinstance(v, bool))
        if node.kind == "path":
            return self.path(node)
        outs = [self.emit(k) for k in node.kids]  # all children first: report every error
        kids = [o for o in outs if o is not None]
        if len(kids) < len(outs):
            return None
        if node.kind == "list":
            kinds = {o.type for o in kids} - {T.NULL}
            item = (kinds.pop() if len(kinds) == 1 else
                    T.NUMBER if kinds and kinds <= {T.INTEGER, T.NUMBER} else T.ANY)
            return _Out("[" + ", ".join(o.src for o in kids) + "]", T.LIST, item=item)
        if node.kind == "call":
            return self.call(node, kids)
        if node.kind == "binary":
            return self.binary(node, kids[0], kids[1])
        x = kids[0]
        if node.op == "not":
            ok = self.boolish(x, node.kids[0], "'not'")
            return _Out(f"not {_wrap(self.truth(x), _NOT)}", T.BOOLEAN, _NOT, strict=True) if ok else None
        if x.type not in _NUMS:
            return self.fail(node.start, node.end, f"unary '-' needs a number, got {x.type.name}")
        return _Out(f"_x_neg({x.src})", T.NUMBER if x.type is T.ANY else x.type)

    def path(self, node: _Node) -> _Out | None:
        path = node.names
        info = self.resolve(path)
        if info is not None:
            if path not in self.paths:
                self.paths[path] = _atomic(self.access(path))
            return _Out(self.paths[path], info.type, item=info.item)
        for k in range(1, len(path) + 1):  # find the first segment that does not exist
            info = self.resolve(path[:k]) if k < len(path) else None
            if info is None:
                name = ".".join(path[:k])
                self.fail(*node.spans[k - 1], f'unknown field "{name}"{self.suggest(path[:k])}')
                break
            if info.type not in (T.OBJECT, T.ANY):
                owner = ".".join(path[:k])
                self.fail(*node.spans[k], f'"{owner}" is {info.type.name}; it has no field "{path[k]}"')
                break
        return None

    def suggest(self, path: tuple[str, ...]) -> str:
        *prefix, name = path
        if self.collection and path == ("count",):
            return ' (did you mean "count()"?)'
        found = sorted(c for c in _near(name) if self.resolve((*prefix, c)) is not None)
        if not found:
            return ""
        best = max(found, key=lambda c: difflib.SequenceMatcher(None, name, c).ratio())
        return f' (did you mean "{".".join((*prefix, best))}"?)'

    def binary(self, node: _Node, a: _Out, b: _Out) -> _Out | None:
        op, (left, right), before = node.op, node.kids, len(self.errors)
        got = f"got {a.type.name} and {b.type.name}"
        if op in ("and", "or"):
            if not (self.boolish(a, left, f"'{op}'") & self.boolish(b, right, f"'{op}'")):
                return None
            prec = _AND if op == "and" else _OR
            src = f"{_wrap(self.truth(a), prec)} {op} {_wrap(self.truth(b), prec)}"
            return _Out(src, T.BOOLEAN, prec, strict=True)
        if op in ("==", "!="):
            if not _comparable(a.type, b.type):
                return self.fail(node.start, node.end, f"'{op}' compares {a.type.name} with "
                                 f"{b.type.name}: they are never equal")
            nulls = [k.kind == "lit" and k.value is None for k in (left, right)]
            if any(nulls):  # x == null reads better, and is exact, as `x is None`
                other = b if nulls[0] else a
                src = f"{_wrap(other, _ATOM)} {'is' if op == '==' else 'is not'} None"
            else:
                src = f"{_wrap(a, _ATOM)} {op} {_wrap(b, _ATOM)}"
            return _Out(src, T.BOOLEAN, _CMPP, strict=True)
        if op in _ORDER:
            if not _orderable(a.type, b.type):
                return self.fail(node.start, node.end, f"'{op}' needs two numbers or two strings, {got}")
            return _Out(f"{_ORDER[op]}({a.src}, {b.src})", T.BOOLEAN, strict=True)
        if op in ("in", "not in"):
            if b.type is T.LIST and b.item is not None and not _comparable(a.type, b.item):
                self.fail(node.start, node.end, f"'{op}' looks for {a.type.name} in a list of "
                          f"{b.item.name}: it is never there")
            elif b.type is T.STRING and a.type not in (T.STRING, T.ANY):
                self.fail(left.start, left.end, f"'{op}' a string needs a string, got {a.type.name}")
            elif b.type not in (T.LIST, T.STRING, T.ANY):
                self.fail(right.start, right.end,
                          f"'{op}' needs a list or a string on the right, got {b.type.name}")
            if len(self.errors) > before:
                return None
            src = f"_x_in({a.src}, {b.src})"
            if op == "in":
                return _Out(src, T.BOOLEAN, strict=True)
            return _Out(f"not {src}", T.BOOLEAN, _NOT, strict=True)
        t = _arith_type(op, a.type, b.type)
        if t is None:
            need = "two numbers or two strings" if op == "+" else "numbers"
            return self.fail(node.start, node.end, f"'{op}' needs {need}, {got}")
        return _Out(f"{_ARITH[op]}({a.src}, {b.src})", t)

    def call(self, node: _Node, args: list[_Out]) -> _Out | None:
        name, (start, end) = node.op, node.spans[0]
        if name == "count" and self.collection:
            if args:
                return self.fail(node.start, node.end, "count() takes no arguments")
            return _Out("count", T.INTEGER)
        if name == "count":
            return self.fail(start, end, "count() is only available in collection presenters")
        if name in ("min", "max"):
            return self.minmax(node, args)
        if name not in _SIGS:
            close = difflib.get_close_matches(name, _FUNCS + ("count",) * self.collection, 1)
            hint = f"did you mean '{close[0]}'?" if close else "allowed: " + ", ".join(_FUNCS)
            return self.fail(start, end, f"unknown function '{name}' ({hint})")
        helper, accepted, desc, least = _SIGS[name]
        if not least <= len(args) <= len(accepted):
            want = f"{least}" if least == len(accepted) else f"{least} or {len(accepted)}"
            return self.fail(node.start, node.end,
                             f"{name}() takes {want} argument(s), got {len(args)}")
        bad = [(k, o) for k, o, ok in zip(node.kids, args, accepted) if o.type not in ok]
        for kid, out in bad:
            self.fail(kid.start, kid.end, f"{name}() needs {desc}, got {out.type.name}")
        if bad:
            return None
        first = args[0].type
        result = {"len": T.INTEGER, "str": T.STRING, "int": T.INTEGER, "float": T.NUMBER,
                  "upper": T.STRING, "lower": T.STRING}.get(name)
        if result is None:  # round / abs keep integers integral
            whole = first is T.INTEGER or (name == "round" and len(args) == 1)
            result = T.INTEGER if whole else T.NUMBER
        return _Out(f"{helper}({', '.join(o.src for o in args)})", result)

    def minmax(self, node: _Node, args: list[_Out]) -> _Out | None:
        name = node.op
        if len(args) == 1:
            kid, out = node.kids[0], args[0]
            item = out.item or T.ANY
            if out.type not in (T.LIST, T.ANY) or not _orderable(item, item):
                what = f"a list of {item.name}" if out.type is T.LIST else out.type.name
                return self.fail(kid.start, kid.end,
                                 f"{name}() needs a list of numbers or strings, got {what}")
            return _Out(f"_x_{name}({out.src})", T.ANY if out.type is T.ANY else item)
        kinds = {o.type for o in args}
        if not args or not (kinds - {T.ANY} <= {T.INTEGER, T.NUMBER} or kinds - {T.ANY} == {T.STRING}):
            got = ", ".join(o.type.name for o in args) or "nothing"
            return self.fail(node.start, node.end,
                             f"{name}() needs a list, or two or more numbers or strings; got {got}")
        result = T.ANY if T.ANY in kinds else kinds.pop() if len(kinds) == 1 else T.NUMBER
        return _Out(f"_x_{name}([{', '.join(o.src for o in args)}])", result)


def _result(chk: _Checker, out: _Out | None) -> Compiled | list[ExprError]:
    if out is None or chk.errors:
        return sorted(chk.errors or [ExprError(0, 0, "invalid expression")],
                      key=lambda e: (e.start, e.end))
    return Compiled(out.src, out.type, tuple(chk.paths))


def compile_expression(text: str, resolve: Resolver, *, access: Callable[[tuple[str, ...]], str],
                       collection: bool = False) -> Compiled | list[ExprError]:
    """Compile a value expression such as ``amount_cents / 100``."""
    chk = _Checker(resolve, access, collection)
    return _result(chk, chk.run(text, 0))


def compile_condition(text: str, resolve: Resolver, *, access: Callable[[tuple[str, ...]], str],
                      collection: bool = False) -> Compiled | list[ExprError]:
    """Compile a ``when`` condition; the emitted source always yields a real bool."""
    chk = _Checker(resolve, access, collection)
    out = chk.run(text, 0)
    if out is not None and out.type not in (T.BOOLEAN, T.ANY):
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        chk.fail(start, end, f"a condition must be true or false, got {out.type.name} "
                 "(compare it, e.g. status == 'paid')")
    return _result(chk, out and chk.truth(out))


def _closing(text: str, i: int) -> int:
    """Index of the '}' that ends a placeholder, skipping quoted strings."""
    j, quote = i, ""
    while j < len(text):
        c = text[j]
        if quote and c == "\\":
            j += 1
        elif c == quote:
            quote = ""
        elif not quote and c in "'\"":
            quote = c
        elif not quote and c == "}":
            return j
        j += 1
    return text.find("}", i)  # unterminated quote: let the lexer report it


def compile_template(text: str, resolve: Resolver, *, access: Callable[[tuple[str, ...]], str],
                     collection: bool = False) -> Compiled | list[ExprError]:
    """Compile ``"Invoice {id} is {status}"`` to a str-valued expression ({{ }} escape)."""
    chk = _Checker(resolve, access, collection)
    parts: list[str] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "{}" and text[i + 1:i + 2] == c:
            literal.append(c)
            i += 2
        elif c == "}":
            chk.fail(i, i + 1, "single '}' in template; write '}}' for a literal brace")
            i += 1
        elif c == "{":
            j = _closing(text, i + 1)
            if j < 0:
                chk.fail(i, i + 1, "'{' is never closed; write '{{' for a literal brace")
                break
            if literal:
                parts.append(repr("".join(literal)))
                literal.clear()
            if not text[i + 1:j].strip():
                chk.fail(i, j + 1, "empty placeholder")
            out = chk.run(text[i + 1:j], i + 1) if text[i + 1:j].strip() else None
            if out is not None:
                parts.append(f"_x_fmt({out.src})")
            i = j + 1
        else:
            literal.append(c)
            i += 1
    if literal or not parts:
        parts.append(repr("".join(literal)))
    return _result(chk, _Out(" + ".join(parts), T.STRING))
