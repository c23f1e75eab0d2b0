"""The presenter expression language: parsing, type errors, emitted Python and its run-time behaviour."""

from __future__ import annotations

import ast
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusiongen.expr import (
    Compiled,
    ExprError,
    ExprType,
    FieldInfo,
    compile_condition,
    compile_expression,
    compile_template,
)
from fusiongen.runtime import _expressions as expressions_runtime

T = ExprType
SCHEMA: dict[tuple[str, ...], FieldInfo] = {
    ("id",): FieldInfo(T.STRING, False),
    ("status",): FieldInfo(T.STRING, False),
    ("stage",): FieldInfo(T.STRING, True, values=("open", "review", "closed")),  # an enum
    ("amount_cents",): FieldInfo(T.INTEGER, False),
    ("rate",): FieldInfo(T.NUMBER, True),
    ("paid",): FieldInfo(T.BOOLEAN, True),
    ("tags",): FieldInfo(T.LIST, False, T.STRING),
    ("scores",): FieldInfo(T.LIST, True, T.INTEGER),
    ("lines",): FieldInfo(T.LIST, False, T.OBJECT),
    ("customer",): FieldInfo(T.OBJECT, True),
    ("customer", "name"): FieldInfo(T.STRING, True),
    ("customer", "address"): FieldInfo(T.OBJECT, True),
    ("customer", "address", "city"): FieldInfo(T.STRING, True),
}
Compiler = Callable[..., "Compiled | list[ExprError]"]
RUNTIME_PATH = Path(expressions_runtime.__file__)
RUNTIME_SOURCE = RUNTIME_PATH.read_text(encoding="utf-8")
RUNTIME: dict[str, Any] = vars(expressions_runtime)


def resolve(path: tuple[str, ...]) -> FieldInfo | None:
    if path[0] == "meta":  # an untyped object: everything below it is ANY
        return FieldInfo(T.ANY, True)
    return SCHEMA.get(path)


def access(path: tuple[str, ...]) -> str:
    return f"_x_get(item, {path!r})"


def check_source(src: str) -> None:
    """Emitted code is one Python expression that calls nothing dynamic."""
    tree = ast.parse(src, mode="eval")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not names & {"eval", "exec", "compile", "__import__", "getattr", "globals"}


def ok(text: str, fn: Compiler = compile_expression, *, collection: bool = False) -> Compiled:
    result = fn(text, resolve, access=access, collection=collection)
    assert isinstance(result, Compiled), result
    check_source(result.python)
    return result


def errs(text: str, fn: Compiler = compile_expression, *, collection: bool = False) -> list[tuple[int, int, str]]:
    result = fn(text, resolve, access=access, collection=collection)
    assert isinstance(result, list) and result, result
    return [(e.start, e.end, e.message) for e in result]


def evaluate(src: str, data: object, count: int | None = None) -> object:
    return eval(compile(src, "<expr>", "eval"), {**RUNTIME, "item": data, "count": count})


def run(text: str, data: object = None, fn: Compiler = compile_expression, **kw: Any) -> object:
    count = kw.pop("count", None)
    return evaluate(ok(text, fn, **kw).python, data, count)


INVOICE = {
    "id": "INV-1",
    "status": "overdue",
    "amount_cents": 1234,
    "rate": 0.5,
    "paid": False,
    "tags": ["vip", "eu"],
    "scores": [3, None, 1],
    "lines": [{"sku": "a"}, {"sku": "b"}],
    "customer": {"name": "Ada", "address": {"city": "Paris"}},
    "meta": {"x": 5, "s": "hi"},
}


# --- parsing and precedence -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("2 * 3 % 4", 2),
        ("7 // 2 * 2", 6),
        ("-2 * 3", -6),
        ("- -2", 2),
        ("-(1 + 2)", -3),
        ("2 - -3", 5),
        ("not true == false", True),
        ("not false and false", False),
        ("true or false and false", True),
        ("(true or false) and false", False),
        ("not 1 > 2", True),
        ("1 + 2 < 4 and 'b' in 'abc'", True),
        ("'a' not in ['b'] or false", True),
        ("not 'a' in ['a']", False),
        ("(1 < 2) == true", True),
        ("[1, 2, ] == [1, 2]", True),
        ("1.5e2 + 0", 150.0),
        ("True == true and None == null and False == false", True),
        ("'it\\'s' + \"\\\"q\\\"\" + '\\\\'", 'it\'s"q"\\'),
        ("'tab\\there'", "tab\there"),
    ],
)
def test_precedence_and_literals(text: str, expected: object) -> None:
    assert run(text) == expected


def test_emitted_source_is_short_and_uses_access_for_reads() -> None:
    compiled = ok("status == 'overdue' and amount_cents > 10000", compile_condition)
    assert compiled.python == (
        "_x_get(item, ('status',)) == 'overdue' and _x_gt(_x_get(item, ('amount_cents',)), 10000)"
    )
    assert compiled.type is T.BOOLEAN
    assert ok("amount_cents / 100").python == "_x_div(_x_get(item, ('amount_cents',)), 100)"
    assert ok("customer.name == null").python == "_x_get(item, ('customer', 'name')) is None"
    assert ok("-5").python == "-5"


def test_paths_are_listed_in_first_use_order_without_duplicates() -> None:
    compiled = ok("amount_cents > 1 and customer.name == id and amount_cents < 5")
    assert compiled.paths == (("amount_cents",), ("customer", "name"), ("id",))
    assert ok("1 + 2").paths == ()


def test_access_source_is_used_verbatim_and_parenthesized_when_needed() -> None:
    def local(path: tuple[str, ...]) -> str:
        return "v_" + "_".join(path)

    compiled = compile_expression("customer.name + id", resolve, access=local)
    assert isinstance(compiled, Compiled)
    assert compiled.python == "_x_add(v_customer_name, v_id)"
    assert eval(compiled.python, {**RUNTIME, "v_customer_name": "A", "v_id": "1"}) == "A1"

    def conditional(path: tuple[str, ...]) -> str:
        return f"item.get({path[0]!r}) if item else None"

    cond = compile_condition("paid", resolve, access=conditional)
    assert isinstance(cond, Compiled)
    assert cond.python == "(item.get('paid') if item else None) is True"
    assert evaluate(cond.python, {"paid": True}) is True
    assert evaluate(cond.python, None) is False


# --- every operator and function at run time --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amount_cents + 1", 1235),
        ("amount_cents - 34", 1200),
        ("amount_cents * 2", 2468),
        ("amount_cents / 100", 12.34),
        ("amount_cents // 100", 12),
        ("amount_cents % 100", 34),
        ("-amount_cents", -1234),
        ("id + '/' + status", "INV-1/overdue"),
        ("amount_cents == 1234", True),
        ("amount_cents != 1234", False),
        ("rate < 1", True),
        ("rate <= 0.5", True),
        ("rate > 0.5", False),
        ("rate >= 0.5", True),
        ("status < 'paid'", True),
        ("status in ['paid', 'overdue']", True),
        ("status not in ['paid', 'overdue']", False),
        ("'vip' in tags", True),
        ("'us' not in tags", True),
        ("'ver' in status", True),
        ("1 in scores", True),
        ("paid or status == 'overdue'", True),
        ("paid and true", False),
        ("not paid", True),
        ("len(lines)", 2),
        ("len(status)", 7),
        ("len(customer)", 2),
        ("round(amount_cents / 100)", 12),
        ("round(amount_cents / 100, 1)", 12.3),
        ("round(2.5)", 3),
        ("round(-2.5)", -3),
        ("round(2.675, 2)", 2.68),
        ("round(1250, -2)", 1300),
        ("str(amount_cents / 100)", "12.34"),
        ("str(paid)", "false"),
        ("str(tags)", "vip, eu"),
        ("int('42') + int(' 7 ')", 49),
        ("int('4.7')", 4),
        ("int(-4.7)", -4),
        ("int('x')", None),
        ("float('1.5')", 1.5),
        ("float(amount_cents)", 1234.0),
        ("float('nope')", None),
        ("abs(-3)", 3),
        ("abs(rate - 1)", 0.5),
        ("min(scores)", 1),
        ("max(scores)", 3),
        ("min(3, amount_cents)", 3),
        ("max(1, 2.5)", 2.5),
        ("min('b', 'a', 'c')", "a"),
        ("max(tags)", "vip"),
        ("upper(customer.name)", "ADA"),
        ("lower(id)", "inv-1"),
        ("customer.address.city", "Paris"),
        ("meta.x + 1", 6),
        ("upper(meta.s)", "HI"),
    ],
)
def test_operators_and_functions(text: str, expected: object) -> None:
    value = run(text, INVOICE)
    assert value == expected
    assert type(value) is type(expected)


def test_static_types() -> None:
    assert ok("amount_cents // 3").type is T.INTEGER
    assert ok("amount_cents / 3").type is T.NUMBER
    assert ok("rate + 1").type is T.NUMBER
    assert ok("round(rate)").type is T.INTEGER
    assert ok("round(rate, 2)").type is T.NUMBER
    assert ok("abs(amount_cents)").type is T.INTEGER
    assert ok("id + status").type is T.STRING
    assert ok("meta + meta").type is T.ANY
    assert ok("meta - 1").type is T.NUMBER
    assert ok("max(scores)").type is T.INTEGER
    assert ok("min(tags)").type is T.STRING
    assert ok("[1, 2.5]").type is T.LIST
    assert ok("tags").type is T.LIST
    assert ok("1 in [1, 'a', null]").type is T.BOOLEAN
    assert ok("count()", collection=True).type is T.INTEGER


def test_count_only_in_collection_context() -> None:
    assert errs("count()") == [(0, 5, "count() is only available in collection presenters")]
    assert run("count() * 2", collection=True, count=3) == 6
    assert run("count() > 2", fn=compile_condition, collection=True, count=3) is True
    assert ok("count()", collection=True).python == "count"
    assert errs("count(1)", collection=True) == [(0, 8, "count() takes no arguments")]
    assert errs("count", collection=True) == [(0, 5, 'unknown field "count" (did you mean "count()"?)')]
    assert errs("cout()", collection=True) == [(0, 4, "unknown function 'cout' (did you mean 'count'?)")]


# --- None, missing values and other data the schema did not promise ---------------------------------


@pytest.mark.parametrize(
    ("text", "data", "expected"),
    [
        ("customer.name", {}, None),
        ("customer.name", {"customer": None}, None),
        ("customer.name", {"customer": "not an object"}, None),
        ("customer.address.city", {"customer": {"address": None}}, None),
        ("customer.name", None, None),
        ("amount_cents / 0", {"amount_cents": 5}, None),
        ("amount_cents // 0", {"amount_cents": 5}, None),
        ("amount_cents % 0", {"amount_cents": 5}, None),
        ("rate / 0.0", {"rate": 1.5}, None),
        ("rate * 2", {}, None),
        ("rate + amount_cents", {"amount_cents": 1}, None),
        ("-rate", {}, None),
        ("rate < 1", {}, False),
        ("rate >= 1", {}, False),
        ("not rate < 1", {}, True),
        ("rate == null", {}, True),
        ("rate != null", {"rate": 0}, True),
        ("rate == 1", {"rate": 1.0}, True),
        ("len(scores)", {}, 0),
        ("upper(customer.name)", {}, None),
        ("str(rate)", {}, ""),
        ("round(rate)", {}, None),
        ("abs(rate)", {}, None),
        ("min(scores)", {}, None),
        ("max(scores)", {"scores": []}, None),
        ("max(scores)", {"scores": [None]}, None),
        ("int(rate)", {}, None),
        ("1 in scores", {}, False),
        ("1 not in scores", {}, True),
        ("'a' in meta", {"meta": 5}, False),
        ("id + status", {"id": "x"}, None),
        ("amount_cents * amount_cents", {"amount_cents": 10**500}, None),  # over 3000 bits
        ("rate * rate", {"rate": 1e200}, None),  # not finite
        ("amount_cents + 1", {"amount_cents": "12"}, None),  # data that breaks the schema
        ("upper(id)", {"id": 5}, None),
        ("len(id)", {"id": 5}, 0),
        ("status < 'b'", {"status": 1}, False),
    ],
)
def test_total_runtime_semantics(text: str, data: object, expected: object) -> None:
    assert run(text, data) == expected


@pytest.mark.parametrize(
    ("paid", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        ("yes", False),
        (1, False),
    ],
)
def test_conditions_always_yield_real_booleans(paid: object, expected: bool) -> None:
    for text in ("paid", "not not paid", "meta", "paid and true or false"):
        value = run(text, {"paid": paid, "meta": paid}, compile_condition)
        assert value is expected, text
    assert run("not paid", {"paid": paid}, compile_condition) is (not expected)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-12, "-12"),
        (10.0, "10"),
        (-0.0, "0"),
        (12.34, "12.34"),
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.3333333333"),
        (2 / 3 * 1e-7, "6.666666667e-08"),
        (1e20, "1e+20"),
        (123456789012345.0, "123456789012345"),
        (float("inf"), ""),
        (float("nan"), ""),
        ("text", "text"),
        (["a", 1, None, True], "a, 1, , true"),
        ({"a": 1, "b": [True]}, '{"a": 1, "b": [true]}'),
        ({"é": "ü"}, '{"é": "ü"}'),
    ],
)
def test_text_formatting(value: object, text: str) -> None:
    assert RUNTIME["_x_fmt"](value) == text
    assert run("str(meta)", {"meta": value}) == text
    assert run("{meta}", {"meta": value}, compile_template) == text


# --- type errors, with the offending sub-expression's offsets -----------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status < 3", [(0, 10, "'<' needs two numbers or two strings, got STRING and INTEGER")]),
        ("amount_cents + 'x'", [(0, 18, "'+' needs two numbers or two strings, got INTEGER and STRING")]),
        ("1 + (status * 2)", [(4, 16, "'*' needs numbers, got STRING and INTEGER")]),
        ("tags - 1", [(0, 8, "'-' needs numbers, got LIST and INTEGER")]),
        ("paid and amount_cents", [(9, 21, "'and' needs true/false, got INTEGER")]),
        ("id or paid", [(0, 2, "'or' needs true/false, got STRING")]),
        ("not status", [(4, 10, "'not' needs true/false, got STRING")]),
        ("-status", [(0, 7, "unary '-' needs a number, got STRING")]),
        ("status == 1", [(0, 11, "'==' compares STRING with INTEGER: they are never equal")]),
        ("paid != 0", [(0, 9, "'!=' compares BOOLEAN with INTEGER: they are never equal")]),
        ("status in 5", [(10, 11, "'in' needs a list or a string on the right, got INTEGER")]),
        ("amount_cents in tags", [(0, 20, "'in' looks for INTEGER in a list of STRING: it is never there")]),
        ("status not in [1, 2]", [(0, 20, "'not in' looks for STRING in a list of INTEGER: it is never there")]),
        ("5 in 'abc'", [(0, 1, "'in' a string needs a string on the left, got INTEGER")]),
        ("len(amount_cents)", [(4, 16, "len() needs a string, list or object, got INTEGER")]),
        ("len(id, id)", [(0, 11, "len() takes 1 argument(s), got 2")]),
        ("round()", [(0, 7, "round() takes 1 or 2 argument(s), got 0")]),
        ("round(rate, 'x')", [(12, 15, "round() needs a number, then an integer, got STRING")]),
        ("round(rate, 1.5)", [(12, 15, "round() needs a number, then an integer, got NUMBER")]),
        ("int(tags)", [(4, 8, "int() needs a number or a string, got LIST")]),
        (
            "upper(amount_cents) + lower(5)",
            [(6, 18, "upper() needs a string, got INTEGER"), (28, 29, "lower() needs a string, got INTEGER")],
        ),
        ("min(status, 1)", [(0, 14, "min() needs a list, or two or more numbers or strings; got STRING, INTEGER")]),
        ("max()", [(0, 5, "max() needs a list, or two or more numbers or strings; got nothing")]),
        ("max(amount_cents)", [(4, 16, "max() needs a list of numbers or strings, got INTEGER")]),
        ("min(lines)", [(4, 9, "min() needs a list of numbers or strings, got a list of OBJECT")]),
        ("lenn(id)", [(0, 4, "unknown function 'lenn' (did you mean 'len'?)")]),
        (
            "sum(scores)",
            [(0, 3, "unknown function 'sum' (allowed: len, round, str, int, float, abs, min, max, upper, lower)")],
        ),
        (
            "(status < 1) or (id * 2) or amout",
            [
                (0, 12, "'<' needs two numbers or two strings, got STRING and INTEGER"),
                (16, 24, "'*' needs numbers, got STRING and INTEGER"),
                (28, 33, 'unknown field "amout"'),
            ],
        ),
    ],
)
def test_type_errors(text: str, expected: list[tuple[int, int, str]]) -> None:
    assert errs(text) == expected


def test_any_is_compatible_with_everything() -> None:
    for text in (
        "meta + 1",
        "meta + 'x'",
        "meta < 3",
        "meta == 'a'",
        "meta in tags",
        "'a' in meta",
        "meta and paid",
        "not meta",
        "len(meta)",
        "upper(meta)",
        "min(meta)",
        "round(rate, meta)",
    ):
        ok(text)


def test_conditions_must_be_boolean() -> None:
    assert errs("  status ", compile_condition) == [
        (2, 8, "a condition must be true or false, got STRING (compare it, e.g. status == 'paid')")
    ]
    assert errs("amount_cents + 1", compile_condition)[0][:2] == (0, 16)
    assert errs("null", compile_condition)[0][:2] == (0, 4)
    assert ok("meta", compile_condition).python == "_x_get(item, ('meta',)) is True"
    assert ok("paid and not paid", compile_condition).type is T.BOOLEAN


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stage == 'Open'", [(9, 15, "'Open' is not a value of stage (open, review, closed) (did you mean 'open'?)")]),
        (
            "'reveiw' != stage",
            [(0, 8, "'reveiw' is not a value of stage (open, review, closed) (did you mean 'review'?)")],
        ),
        ("stage in ['open', 'done']", [(18, 24, "'done' is not a value of stage (open, review, closed)")]),
        ("stage == 'open' and stage != 'xyz'", [(29, 34, "'xyz' is not a value of stage (open, review, closed)")]),
    ],
)
def test_an_enum_compared_with_a_string_it_never_holds(text: str, expected: list[tuple[int, int, str]]) -> None:
    assert errs(text) == expected


def test_an_enum_compared_with_its_values_compiles() -> None:
    assert run("stage == 'open'", {"stage": "open"}) is True
    assert run("stage in ['open', 'closed']", {"stage": "review"}) is False
    assert run("stage != null", {"stage": None}) is False  # null is not a string: no check
    assert run("status == 'Open'", {"status": "Open"}) is True  # not an enum: any string may be meant


# --- unknown fields ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amout_cents > 1", (0, 11, 'unknown field "amout_cents" (did you mean "amount_cents"?)')),
        ("customer.nmae", (9, 13, 'unknown field "customer.nmae" (did you mean "customer.name"?)')),
        ("Status", (0, 6, 'unknown field "Status" (did you mean "status"?)')),
        ("amountCents", (0, 11, 'unknown field "amountCents" (did you mean "amount_cents"?)')),
        (
            "1 + customer.address.citty",
            (21, 26, 'unknown field "customer.address.citty" (did you mean "customer.address.city"?)'),
        ),
        ("custmer.name", (0, 7, 'unknown field "custmer" (did you mean "customer"?)')),
        ("zzz", (0, 3, 'unknown field "zzz"')),
        ("id.length", (3, 9, '"id" is STRING; it has no field "length"')),
        ("len", (0, 3, 'unknown field "len"')),
    ],
)
def test_unknown_fields(text: str, expected: tuple[int, int, str]) -> None:
    assert errs(text) == [expected]


def test_every_unknown_field_is_reported() -> None:
    assert [e[:2] for e in errs("amout + stauts * idd")] == [(0, 5), (8, 14), (17, 20)]


# --- syntax errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(amount_cents + 1))", (18, 19, "unexpected ')'")),
        (")", (0, 1, "unexpected ')'")),
        ("'abc", (0, 4, "unterminated string")),
        ("status == 'a", (10, 12, "unterminated string")),
        ("'ends with backslash\\", (0, 21, "unterminated string")),
        ("'\\q'", (1, 3, "unknown escape '\\q' (write '\\\\' for \\)")),
        ("amount_cents +", (14, 14, "unexpected end of expression")),
        ("", (0, 0, "empty expression")),
        ("   ", (0, 0, "empty expression")),
        ("amount_cents = 1", (13, 14, "unexpected '='; use '==' to compare")),
        ("paid && true", (5, 7, "unexpected '&&'; use 'and'")),
        ("!paid", (0, 1, "unexpected '!'; use 'not'")),
        ("amount_cents ** 2", (13, 15, "unexpected '**' (there is no power operator)")),
        ("rate:.2f", (4, 5, "unexpected ':' (no format specs; use round(x, 2))")),
        ("tags[0]", (4, 5, "indexing is not supported")),
        ("[1, 2][0]", (6, 7, "indexing is not supported")),
        ("id.upper()", (3, 9, "method calls are not supported; write upper(id)")),
        ("customer.name.strip()", (14, 20, "method calls are not supported")),
        ("lambda x: x", (0, 6, "'lambda' is not supported")),
        ("status is None", (7, 9, "unexpected 'is'; use '==' or '!='")),
        ("is", (0, 2, "'is' is not supported; use '==' or '!='")),
        ("1 + 'abc", (4, 8, "unterminated string")),
        ("(1 + 'abc", (5, 9, "unterminated string")),
        ("1 if paid else 2", (2, 4, "unexpected 'if'")),
        ("1 < amount_cents < 3", (17, 18, "comparisons can't be chained; join them with 'and'")),
        ("1 == 1 != 2", (7, 9, "comparisons can't be chained; join them with 'and'")),
        ("[1, 2", (0, 1, "'[' is never closed")),
        ("len(id", (3, 4, "'(' is never closed")),
        ("(1 + 2", (0, 1, "'(' is never closed")),
        ("len(id id)", (7, 9, "unexpected 'id'")),
        ("12abc", (0, 5, "invalid number '12abc'")),
        ("1e", (0, 2, "invalid number '1e'")),
        ("1.5.3", (3, 4, "unexpected '.'")),
        ("1" + "0" * 5000, (0, 5001, "number too large")),
        ("1e999", (0, 5, "number too large")),
        ("customer.", (8, 9, "expected a field name after '.'")),
        ("status @ 1", (7, 8, "unexpected '@'")),
        ("1 + not paid", (4, 7, "unexpected 'not'")),
        ("x = y", (2, 3, "unexpected '='; use '==' to compare")),
        ("and", (0, 3, "unexpected 'and'")),
        ("{id}", (0, 1, "unexpected '{'")),
    ],
)
def test_syntax_errors(text: str, expected: tuple[int, int, str]) -> None:
    assert errs(text) == [expected]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert errs("(" * 200 + "1" + ")" * 200)[0][2] == "expression is nested too deeply"
    assert errs("not " * 200 + "paid")[0][2] == "expression is nested too deeply"
    assert errs(" + ".join(["1"] * 500))[0][2] == "expression is too complex (over 60 levels)"
    ok(" + ".join(["amount_cents"] * 50))  # long but fine, and still valid Python


@pytest.mark.parametrize(("opener", "closer"), [("(", ")"), ("not ", ""), ("-", ""), ("abs(", ")"), ("[", "]")])
def test_nesting_just_past_the_limit_is_a_diagnostic(opener: str, closer: str) -> None:
    """40 nested brackets or prefixes compile; the 41st is the "nested too deeply" diagnostic (never a crash).
    The random expressions above stay below this limit: for them this diagnostic would be a correct answer."""
    leaf = "paid" if opener == "not " else "1"
    assert errs(opener * 41 + leaf + closer * 41)[0][2] == "expression is nested too deeply"
    assert ok(opener * 40 + leaf + closer * 40) is not None


# --- templates ---------------------------------------------------------------------------------------


def test_templates() -> None:
    text = "Invoice {id} is overdue: {amount_cents / 100} EUR, {len(lines)} lines"
    compiled = ok(text, compile_template)
    assert compiled.type is T.STRING
    assert compiled.paths == (("id",), ("amount_cents",), ("lines",))
    assert evaluate(compiled.python, INVOICE) == "Invoice INV-1 is overdue: 12.34 EUR, 2 lines"
    assert evaluate(compiled.python, {}) == "Invoice  is overdue:  EUR, 0 lines"
    assert ok("{id}", compile_template).python == "_x_fmt(_x_get(item, ('id',)))"


def test_template_braces_and_plain_text() -> None:
    assert run("{{literal}} {id} }}", INVOICE, compile_template) == "{literal} INV-1 }"
    assert run("{'}' + '{'}", INVOICE, compile_template) == "}{"
    assert run('{"a\\"}"}', INVOICE, compile_template) == 'a"}'
    plain = [("plain text", "plain text"), ("{{x}}", "{x}"), ("", ""), ('it\'s "q" \\', 'it\'s "q" \\')]
    for text, value in plain:
        compiled = ok(text, compile_template)
        assert isinstance(ast.parse(compiled.python, mode="eval").body, ast.Constant)
        assert ast.literal_eval(compiled.python) == value
        assert compiled.paths == ()
    assert run("{count()} of {len(lines)}", INVOICE, compile_template, collection=True, count=9) == "9 of 2"
    due = run("Paid: {paid}, due {status == 'overdue'}", INVOICE, compile_template)
    assert due == "Paid: false, due true"


def test_template_errors_have_offsets_in_the_whole_template() -> None:
    text = "Invoice {id} has {amout_cents} and {status < 1} {count()}"
    assert errs(text, compile_template) == [
        (18, 29, 'unknown field "amout_cents" (did you mean "amount_cents"?)'),
        (36, 46, "'<' needs two numbers or two strings, got STRING and INTEGER"),
        (49, 54, "count() is only available in collection presenters"),
    ]
    assert errs("Total: {amount_cents +}", compile_template) == [(22, 22, "unexpected end of expression")]
    assert errs("a } b", compile_template) == [(2, 3, "single '}' in template; write '}}' for a literal brace")]
    assert errs("a { b", compile_template) == [(2, 3, "'{' is never closed; write '{{' for a literal brace")]
    assert errs("x {} y { }", compile_template) == [(2, 4, "empty placeholder"), (7, 10, "empty placeholder")]
    assert errs("x {'abc} y", compile_template) == [(3, 7, "unterminated string")]
    assert errs("{amount_cents:.2f}", compile_template)[0][:2] == (13, 14)


# --- the runtime module (fusiongen/runtime/_expressions.py) -------------------------------------------


def test_runtime_source_is_standalone() -> None:
    tree = ast.parse(RUNTIME_SOURCE)
    assert ast.get_docstring(tree), "the module says why it exists"
    body = tree.body[1:]
    imports = [n for n in body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert body[: len(imports)] == imports, "imports come first"
    future = [n for n in imports if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in future] == [("__future__", ["annotations"])]
    imports = [n for n in imports if n not in future]
    assert all(isinstance(n, ast.Import) for n in imports)
    assert {a.name for n in imports for a in n.names} <= sys.stdlib_module_names
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assigned = [t for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
    defined |= {t.id for t in assigned if isinstance(t, ast.Name)}
    assert defined and all(name.startswith("_x_") for name in defined)
    assert "eval(" not in RUNTIME_SOURCE and "exec(" not in RUNTIME_SOURCE


def test_runtime_helpers_are_total_on_odd_values() -> None:
    odd = [
        None,
        True,
        0,
        -1,
        10**400,
        1.5,
        -0.0,
        float("inf"),
        float("nan"),
        "",
        "12",
        "x",
        [],
        [1, "a"],
        {},
        {"a": None},
        (1, 2),
        object(),
    ]
    one = [
        "_x_neg",
        "_x_abs",
        "_x_len",
        "_x_upper",
        "_x_lower",
        "_x_float",
        "_x_int",
        "_x_round",
        "_x_min",
        "_x_max",
        "_x_fmt",
    ]
    two = [
        "_x_add",
        "_x_sub",
        "_x_mul",
        "_x_div",
        "_x_floordiv",
        "_x_mod",
        "_x_lt",
        "_x_le",
        "_x_gt",
        "_x_ge",
        "_x_in",
        "_x_round",
        "_x_get",
    ]
    for a in odd:
        for name in one:
            RUNTIME[name](a)
        for b in odd:
            for name in two:
                if name != "_x_get" or isinstance(b, tuple):
                    RUNTIME[name](a, b)
    assert RUNTIME["_x_round"](2.5, 10**6) == 2.5
    assert RUNTIME["_x_round"](1234.5, -(10**6)) == 0
    assert RUNTIME["_x_round"](1.7976931348623157e308, -308) is None  # would be inf
    assert math.isclose(RUNTIME["_x_round"](1e-300, 301), 1e-300)


# --- random well-typed expressions -------------------------------------------------------------------


def quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def paren(op: str) -> Callable[[tuple[str, str]], str]:
    return lambda pair: f"({pair[0]} {op} {pair[1]})"


def binary(left: st.SearchStrategy[str], ops: list[str], right: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(left, st.sampled_from(ops), right).map(lambda t: f"({t[0]} {t[1]} {t[2]})")


def call(name: str, *args: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(*args).map(lambda xs: f"{name}({', '.join(xs)})")


# How deep the random expressions go. Each level adds at most two brackets or prefixes and two tree levels, so
# they stay below the compiler's limits (40 nested brackets and prefixes, 60 tree levels): deeper expressions get
# the "nested too deeply" or "too complex" diagnostic, which is correct and is tested on its own below
# (test_nesting_just_past_the_limit_is_a_diagnostic), not an error these properties should find.
EXPRESSION_LEVELS = 12


@functools.cache
def typed(levels: int) -> dict[ExprType, st.SearchStrategy[str]]:
    """Expressions of each type, at most `levels` levels of operators and calls deep."""
    leaf_ints = st.one_of(
        st.integers(-1000, 10**6).map(str),
        st.sampled_from(["amount_cents", "count()", "len(tags)", "len(status)", "max(scores)"]),
    )
    leaf_nums = st.one_of(
        st.floats(-1e9, 1e9).map(repr).filter(lambda s: not s.startswith("-")),
        st.sampled_from(["rate", "meta", "meta.x"]),
        leaf_ints,
    )
    leaf_strs = st.one_of(
        st.text(max_size=6).map(quote),
        st.sampled_from(["id", "status", "customer.name", "customer.address.city"]),
        st.just("min(tags)"),
    )
    leaf_bools = st.sampled_from(["true", "false", "True", "paid", "(customer == null)", "(scores != None)"])
    if levels == 0:
        return {T.INTEGER: leaf_ints, T.NUMBER: leaf_nums, T.STRING: leaf_strs, T.BOOLEAN: leaf_bools}
    below = typed(levels - 1)
    ints, nums, strs, bools = below[T.INTEGER], below[T.NUMBER], below[T.STRING], below[T.BOOLEAN]
    return {
        T.INTEGER: st.one_of(
            leaf_ints,
            binary(ints, ["+", "-", "*", "//", "%"], ints),
            ints.map(lambda e: f"-{e}"),
            call("abs", ints),
            call("round", nums),
            call("int", strs | nums),
            call("min", ints, ints),
        ),
        T.NUMBER: st.one_of(
            leaf_nums,
            ints,
            binary(nums, ["+", "-", "*", "/", "//", "%"], nums),
            call("round", nums, ints),
            call("float", strs | nums),
            call("abs", nums),
            call("max", nums, nums),
        ),
        T.STRING: st.one_of(
            leaf_strs,
            binary(strs, ["+"], strs),
            call("upper", strs),
            call("lower", strs),
            call("str", strs | nums | bools | st.just("tags")),
            call("min", strs, strs),
        ),
        T.BOOLEAN: st.one_of(
            leaf_bools,
            binary(nums, ["==", "!=", "<", "<=", ">", ">="], nums),
            binary(strs, ["==", "!=", "<", "<=", ">", ">="], strs),
            binary(
                strs,
                ["in", "not in"],
                strs | st.just("tags") | st.lists(strs, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
            ),
            binary(ints, ["in", "not in"], st.just("scores")),
            binary(bools, ["and", "or", "==", "!="], bools),
            bools.map(lambda e: f"(not {e})"),
            binary(st.just("meta"), ["in", "=="], strs),
            binary(st.just("meta"), ["and", "or"], bools),
        ),
    }


EXPRESSIONS = st.integers(0, EXPRESSION_LEVELS).flatmap(
    lambda levels: st.one_of(*(st.tuples(st.just(t), s) for t, s in typed(levels).items()))
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


TEXT = st.text(max_size=4)
DATA = st.fixed_dictionaries(
    {},
    optional={
        "id": maybe(TEXT),
        "status": maybe(st.sampled_from(["paid", "overdue"]) | TEXT),
        "amount_cents": maybe(st.integers()),
        "rate": maybe(st.floats() | st.integers()),
        "paid": maybe(st.booleans()),
        "tags": maybe(st.lists(maybe(TEXT), max_size=3)),
        "scores": maybe(st.lists(maybe(st.integers()), max_size=3)),
        "customer": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": maybe(TEXT),
                    "address": maybe(st.fixed_dictionaries({}, optional={"city": maybe(TEXT)})),
                },
            )
        ),
        "meta": JSON,
    },
)
PYTHON_TYPES: dict[ExprType, type | tuple[type, ...]] = {
    T.INTEGER: int,
    T.NUMBER: (int, float),
    T.STRING: str,
    T.BOOLEAN: bool,
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS, DATA, st.integers(0, 10**6))
def test_random_well_typed_expressions_compile_and_never_raise(
    typed: tuple[ExprType, str], data: dict[str, Any], count: int
) -> None:
    expected, text = typed
    compiled = ok(text, collection=True)
    assert compiled.type is expected or (expected is T.NUMBER and compiled.type in (T.INTEGER, T.ANY))
    value = evaluate(compiled.python, data, count)
    if compiled.type is not T.ANY:
        assert value is None or (
            isinstance(value, PYTHON_TYPES[compiled.type])
            and (compiled.type is T.BOOLEAN or not isinstance(value, bool))
        )
    assert isinstance(evaluate(ok(f"{{{text}}}", compile_template, collection=True).python, data, count), str)
    if expected is T.BOOLEAN:
        assert type(evaluate(ok(text, compile_condition, collection=True).python, data, count)) is bool


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    EXPRESSIONS,
    st.dictionaries(
        st.sampled_from(["id", "status", "amount_cents", "rate", "paid", "tags", "scores", "customer", "meta"]), JSON
    ),
)
def test_random_expressions_never_raise_on_data_that_breaks_the_schema(
    typed: tuple[ExprType, str], data: dict[str, Any]
) -> None:
    _, text = typed
    evaluate(ok(text, collection=True).python, data, 0)
    assert isinstance(evaluate(ok(f"{{{text}}}", compile_template, collection=True).python, data, 0), str)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20))
def test_string_literals_round_trip(s: str) -> None:
    assert run(quote(s)) == s
    assert run("{" + quote(s) + "}", fn=compile_template) == s
    escaped = s.replace("{", "{{").replace("}", "}}")
    assert run(escaped, fn=compile_template) == s


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_text_never_raises(text: str) -> None:
    for fn in (compile_expression, compile_condition, compile_template):
        result = fn(text, resolve, access=access, collection=True)
        if isinstance(result, Compiled):
            check_source(result.python)
        else:
            assert result and all(0 <= e.start <= e.end <= len(text) for e in result)
