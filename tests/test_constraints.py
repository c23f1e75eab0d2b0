"""Field constraints: advertised in input schemas, enforced on input field by field, through a real `mcp.Client`.

And `pattern`'s dialect: the server checks in Python what the schema states in ECMA-262, so the translation
is compared with node's own RegExp on the same strings.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from fusiongen.lower.patterns import PatternError, python_pattern
from tests.support.build import GeneratedServer, built_server
from tests.support.quality import assert_generated_quality
from tests.test_official_tooling import node_env, tooling

SPEC = """
[server]
name = "shop"

[models.Line]
fields.sku = { type = "string", pattern = "^[A-Z]{3}-[0-9]+$", examples = ["ABC-1"] }
fields.qty = { type = "integer", minimum = 1, maximum = 99 }
fields.pin = { type = "string", min_length = 4, max_length = 4 }
hidden = ["pin"]

[tools."order.place"]
title = "Place an order"
description = "Place an order."
icons = [{ src = "https://example.com/cart.svg", mime_type = "image/svg+xml", sizes = ["any"], theme = "light" }]
[tools."order.place".input]
code = { type = "string", min_length = 3, max_length = 8, pattern = "^[a-z.]+$" }
amount = { type = "number", exclusive_minimum = 0, maximum = 1000, examples = [12.5] }
tags = { type = "list", items = "string", max_items = 3, unique_items = true, max_length = 5, required = false }
lines = { type = "list", items = "Line", min_items = 1 }
"""

HANDLERS = """
RECEIVED = []


def order_place(args):
    RECEIVED.append(args)
"""

VALID = {"code": "ab.c", "amount": 12.5, "tags": ["a", "b"], "lines": [{"sku": "ABC-12", "qty": 3, "pin": "1234"}]}

pytestmark = pytest.mark.anyio
MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("shop")
    with built_server(SPEC, root / "out", handlers=HANDLERS) as server:
        yield server


async def call(shop: GeneratedServer, arguments: dict[str, Any], mode: str = "legacy") -> tuple[bool, str]:
    async with Client(shop.create_server(), mode=mode, cache=None) as client:
        result = await client.call_tool("order_place", arguments)
    return bool(result.is_error), "".join(getattr(b, "text", "") for b in result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_schema_advertises_the_constraints_the_title_and_the_icons(shop: GeneratedServer, mode: str) -> None:
    async with Client(shop.create_server(), mode=mode, cache=None) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "order_place")
    assert tool.title == "Place an order"
    assert tool.icons is not None
    assert [i.model_dump(by_alias=True) for i in tool.icons] == [
        {"src": "https://example.com/cart.svg", "mimeType": "image/svg+xml", "sizes": ["any"], "theme": "light"}
    ]
    properties = tool.input_schema["properties"]
    assert properties["code"] == {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z.]+$"}
    assert properties["amount"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1000, "examples": [12.5]}
    assert properties["tags"] == {
        "type": "array",
        "items": {"type": "string", "maxLength": 5},
        "maxItems": 3,
        "uniqueItems": True,
    }
    assert properties["lines"]["minItems"] == 1
    line = properties["lines"]["items"]["properties"]  # the model inline (docs/spec.md §5.2)
    assert line["qty"] == {"type": "integer", "minimum": 1, "maximum": 99}
    assert line["sku"]["examples"] == ["ABC-1"]
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    jsonschema.validate(VALID, tool.input_schema)


@pytest.mark.parametrize("mode", MODES)
async def test_valid_arguments_reach_the_handler(shop: GeneratedServer, mode: str) -> None:
    shop.handlers.RECEIVED.clear()
    is_error, text = await call(shop, VALID, mode)
    assert not is_error, text
    (args,) = shop.handlers.RECEIVED
    assert args.code == "ab.c" and args.amount == 12.5 and args.lines == [{"sku": "ABC-12", "qty": 3, "pin": "1234"}]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"code": "ab"},
            "code",
            "expected a string of 3 to 8 characters matching the pattern ^[a-z.]+$; you sent 2 characters.",
        ),
        ({"code": "abcdefghi"}, "code", "you sent 9 characters."),
        (
            {"code": "AB.C"},
            "code",
            'expected a string of 3 to 8 characters matching the pattern ^[a-z.]+$; you sent "AB.C".',
        ),
        ({"code": "abc\n"}, "code", "matching the pattern"),  # ECMA's $ is the end; Python's allows a final newline
        ({"amount": 0}, "amount", "expected a number that is greater than 0 and at most 1000; you sent 0."),
        ({"amount": 1000.5}, "amount", "you sent 1000.5."),
        (
            {"tags": ["a", "b", "c", "d"]},
            "tags",
            "expected an array of at most 3 items with no two items equal; you sent 4 items.",
        ),
        ({"tags": ["a", "b", "a"]}, "tags", "you sent item 2 equal to item 0."),
        ({"tags": ["toolong"]}, "tags[0]", "expected a string of at most 5 characters; you sent 7 characters."),
        ({"lines": []}, "lines", "expected an array of at least 1 item; you sent 0 items."),
        ({"lines": [{"sku": "abc-1", "qty": 3, "pin": "1234"}]}, "lines[0].sku", 'you sent "abc-1".'),
        (
            {"lines": [{"sku": "ABC-1", "qty": 100, "pin": "1234"}]},
            "lines[0].qty",
            "expected an integer from 1 to 99; you sent 100.",
        ),
    ],
)
async def test_each_broken_constraint_is_named_with_what_was_expected(
    shop: GeneratedServer, change: dict[str, Any], field: str, message: str
) -> None:
    shop.handlers.RECEIVED.clear()
    is_error, text = await call(shop, {**VALID, **change})
    assert is_error and text.startswith('<validation_error tool="order_place">')
    assert f'<field name="{field}">' in text and message in text.replace("&quot;", '"')
    assert text.count("<field ") == 1
    assert shop.handlers.RECEIVED == []


async def test_a_hidden_field_is_bounded_without_echoing_its_value(shop: GeneratedServer) -> None:
    is_error, text = await call(shop, {**VALID, "lines": [{"sku": "ABC-1", "qty": 1, "pin": "98765"}]})
    assert is_error
    assert '<field name="lines[0].pin">expected a string of exactly 4 characters; you sent a string.</field>' in text
    assert "98765" not in text and "5 characters" not in text


async def test_every_broken_field_is_reported_at_once(shop: GeneratedServer) -> None:
    _, text = await call(shop, {"code": "x", "amount": -1, "tags": ["a", "a"], "lines": []})
    for name in ("code", "amount", "tags", "lines"):
        assert f'<field name="{name}">' in text


def test_the_generated_checks_pass_ruff_and_mypy_strict(shop: GeneratedServer, tmp_path: Path) -> None:
    """The golden trees do not use constraints, so the quality gate of generated code is run here."""
    assert_generated_quality(shop, tmp_path)


# --- pattern dialect ---------------------------------------------------------------------------------

PATTERNS = [
    "^[a-z.]+$",
    "^a.c$",
    "\\s",
    "^\\S+$",
    "[\\sx]",
    "^\\d+$",
    "^\\w+$",
    "\\bcat\\b",
    "^(?:ab)+$",
    "a(?=b)",
    "(?<!x)y",
    "^[^\\]]*$",
    "^\\u00e9$",
    "^(a|b){2,3}$",
    "^x{2}$",
]
SUBJECTS = [
    "abc",
    "a.c",
    "abc\n",
    "a\nc",
    "a\rc",
    "a\u2028c",
    "a c",
    "a\u00a0c",
    "\u3000",
    "123",
    "\u0663",
    "é",
    "naïve",
    "cat",
    "concat",
    "ab",
    "abab",
    "xy",
    "zy",
    "a]",
    "aa",
    "aba",
    "xx",
    "xxx",
    "",
    "\ufeff",
]


def test_translated_patterns_match_what_ecma_262_matches(tmp_path: Path) -> None:
    """Every portable pattern accepts exactly the strings node's RegExp accepts."""
    tools = tooling()
    script = tmp_path / "match.mjs"
    script.write_text(
        "const [patterns, subjects] = JSON.parse(process.argv[2]);\n"
        "console.log(JSON.stringify(patterns.map(p => subjects.map(s => new RegExp(p).test(s)))));\n"
    )
    argument = json.dumps([PATTERNS, SUBJECTS])
    done = subprocess.run(
        [str(tools.node), str(script), argument], capture_output=True, text=True, timeout=60, env=node_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    ecma = json.loads(done.stdout)
    import re

    python = [[re.search(python_pattern(p), s, re.ASCII) is not None for s in SUBJECTS] for p in PATTERNS]
    differences = [
        (p, s, e)
        for p, row_e, row_p in zip(PATTERNS, ecma, python, strict=True)
        for s, e, q in zip(SUBJECTS, row_e, row_p, strict=True)
        if e != q
    ]
    assert differences == []


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?P<x>a)", "groups read the same"),
        ("(?<x>a)", "groups read the same"),
        ("(?i)abc", "groups read the same"),
        ("a{,3}", "{,n}"),
        ("a*+", "possessive"),
        ("[]a]", '"[]"'),
        ("\\Aabc", '"\\A"'),
        ("\\p{L}", '"\\p"'),
        ("[[a]", "ambiguously"),
        ("[\\S]", '"\\S" inside'),
        ("(a", "does not compile"),
        ("abc\\", "lone backslash"),
    ],
)
def test_patterns_outside_the_portable_subset_are_refused(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as refused:
        python_pattern(pattern)
    assert reason in str(refused.value)
