"""Tests for `fusiongen.load.toml_positions`: exact spans for every rule, plus properties against tomli."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import tomli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusiongen.load.toml_positions import Duplicate, ScanError, SourceMap, Span, scan

S = Span


def scan_ok(source: str) -> SourceMap:
    """Scan a document tomli accepts; it must scan without duplicates."""
    tomli.loads(source)
    source_map, duplicates = scan(source)
    assert duplicates == []
    return source_map


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


SPEC = doc(
    """
    [server]
    name = "billing"

    [models.Invoice]
    casts = { amount_cents = "number" }
    hidden = ["internal_notes", "cost_basis"]
    [models.Invoice.fields]
    id = "string"
    status = { type = "enum", values = ["draft", "paid"] }

    [tools."invoice.get"]
    kind = "query"
    [tools."invoice.get".input]
    id = { type = "string", description = "Invoice id" }

    [[presenters.Invoice.ui]]
    type = "table"
    rows = [["Invoice", "{id}"],
            ["Amount", "{amount_cents / 100}"]]

    [[presenters.Invoice.ui]]
    type = "markdown"
    """
)


# --- a realistic spec ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "key", "value"),
    [
        (("server",), S(1, 2), S(1, 1)),
        (("server", "name"), S(2, 1), S(2, 8)),
        (("models",), S(4, 2), S(4, 2)),
        (("models", "Invoice"), S(4, 9), S(4, 1)),
        (("models", "Invoice", "casts"), S(5, 1), S(5, 9)),
        (("models", "Invoice", "casts", "amount_cents"), S(5, 11), S(5, 26)),
        (("models", "Invoice", "hidden"), S(6, 1), S(6, 10)),
        (("models", "Invoice", "hidden", 0), S(6, 11), S(6, 11)),
        (("models", "Invoice", "hidden", 1), S(6, 29), S(6, 29)),
        (("models", "Invoice", "fields"), S(7, 17), S(7, 1)),
        (("models", "Invoice", "fields", "id"), S(8, 1), S(8, 6)),
        (("models", "Invoice", "fields", "status"), S(9, 1), S(9, 10)),
        (("models", "Invoice", "fields", "status", "type"), S(9, 12), S(9, 19)),
        (("models", "Invoice", "fields", "status", "values"), S(9, 27), S(9, 36)),
        (("models", "Invoice", "fields", "status", "values", 1), S(9, 46), S(9, 46)),
        (("tools",), S(11, 2), S(11, 2)),
        (("tools", "invoice.get"), S(11, 8), S(11, 1)),
        (("tools", "invoice.get", "kind"), S(12, 1), S(12, 8)),
        (("tools", "invoice.get", "input"), S(13, 22), S(13, 1)),
        (("tools", "invoice.get", "input", "id"), S(14, 1), S(14, 6)),
        (("tools", "invoice.get", "input", "id", "description"), S(14, 25), S(14, 39)),
        (("presenters", "Invoice", "ui"), S(16, 22), S(16, 1)),
        (("presenters", "Invoice", "ui", 0), S(16, 1), S(16, 1)),
        (("presenters", "Invoice", "ui", 0, "type"), S(17, 1), S(17, 8)),
        (("presenters", "Invoice", "ui", 0, "rows"), S(18, 1), S(18, 8)),
        (("presenters", "Invoice", "ui", 0, "rows", 0), S(18, 9), S(18, 9)),
        (("presenters", "Invoice", "ui", 0, "rows", 0, 1), S(18, 21), S(18, 21)),
        (("presenters", "Invoice", "ui", 0, "rows", 1), S(19, 9), S(19, 9)),
        (("presenters", "Invoice", "ui", 0, "rows", 1, 0), S(19, 10), S(19, 10)),
        (("presenters", "Invoice", "ui", 0, "rows", 1, 1), S(19, 20), S(19, 20)),
        (("presenters", "Invoice", "ui", 1), S(21, 1), S(21, 1)),
        (("presenters", "Invoice", "ui", 1, "type"), S(22, 1), S(22, 8)),
    ],
)
def test_realistic_spec(path: tuple[str | int, ...], key: Span, value: Span) -> None:
    source_map = scan_ok(SPEC)
    assert source_map.key(path) == key
    assert source_map.value(path) == value


def test_realistic_spec_strings_and_unknown_paths() -> None:
    source_map = scan_ok(SPEC)
    rows = ("presenters", "Invoice", "ui", 0, "rows", 1, 1)  # "{amount_cents / 100}"
    assert source_map.string_char(rows, 0) == S(19, 21)
    assert source_map.string_char(rows, 14) == S(19, 35)  # the "/"
    assert source_map.string_char(rows, 20) == S(19, 41)  # the closing quote
    assert source_map.string_char(rows, 21) is None
    assert source_map.key(("models", "Invoice", "nope")) is None
    assert source_map.value(("presenters", "Invoice", "ui", 2)) is None
    assert source_map.nearest(("tools", "invoice.get", "input", "id", "format")) == (
        S(14, 1),
        ("tools", "invoice.get", "input", "id"),
    )
    assert source_map.nearest(("presenters", "Invoice", "ui", 7, "x")) == (
        S(16, 22),
        ("presenters", "Invoice", "ui"),
    )
    assert source_map.nearest(("nowhere", 3)) == (S(1, 1), ())
    assert source_map.nearest(()) == (S(1, 1), ())


# --- keys -------------------------------------------------------------------------------------


def test_plain_dotted_and_quoted_keys() -> None:
    source_map = scan_ok(
        doc(
            """
            # a comment line
            a = 1
              x . y.z = 2   # spaces around dots
            "invoice.get" = 3
            'lit.eral'.q = 4
            "" = 5
            """
        )
    )
    assert source_map.key(("a",)) == S(2, 1)
    assert source_map.value(("a",)) == S(2, 5)
    assert source_map.key(("x",)) == S(3, 3)
    assert source_map.key(("x", "y")) == S(3, 7)
    assert source_map.key(("x", "y", "z")) == S(3, 9)
    assert source_map.value(("x", "y", "z")) == S(3, 13)
    assert source_map.value(("x",)) == S(3, 3)  # a table made by a dotted key: value() == key()
    assert source_map.key(("invoice.get",)) == S(4, 1)
    assert source_map.key(("invoice",)) is None
    assert source_map.key(("lit.eral",)) == S(5, 1)
    assert source_map.key(("lit.eral", "q")) == S(5, 12)
    assert source_map.key(("",)) == S(6, 1)


def test_escaped_keys_are_decoded() -> None:
    source_map = scan_ok('"a\\u0062\\"c" = 1\n"tab\\there".x = 2\n')
    assert source_map.key(('ab"c',)) == S(1, 1)
    assert source_map.key(("tab\there", "x")) == S(2, 13)


def test_table_headers_and_implicit_prefixes() -> None:
    source_map = scan_ok(
        doc(
            """
            [ a . "b.c" . d ]
            k = 1
            [a]
            m = 2
            [a."b.c".e]
            """
        )
    )
    assert source_map.key(("a", "b.c", "d")) == S(1, 15)
    assert source_map.value(("a", "b.c", "d")) == S(1, 1)
    assert source_map.key(("a", "b.c")) == S(1, 7)  # implicit, from the first header
    assert source_map.value(("a", "b.c")) == S(1, 7)
    assert source_map.key(("a",)) == S(3, 2)  # defined explicitly later: the explicit header wins
    assert source_map.value(("a",)) == S(3, 1)
    assert source_map.key(("a", "m")) == S(4, 1)
    assert source_map.key(("a", "b.c", "e")) == S(5, 10)
    assert source_map.key(("a", "b.c", "d", "k")) == S(2, 1)


def test_arrays_of_tables_nest_and_index() -> None:
    source_map = scan_ok(
        doc(
            """
            [[fruit]]
            name = "apple"
            [fruit.physical]
            color = "red"
            [[fruit.variety]]
            name = "red delicious"
            [[fruit.variety]]
            name = "granny smith"
            [[fruit]]
            name = "banana"
              [[ fruit.variety ]]
            name = "plantain"
            """
        )
    )
    assert source_map.key(("fruit",)) == S(1, 3)
    assert source_map.value(("fruit",)) == S(1, 1)
    assert source_map.key(("fruit", 0)) == S(1, 1)
    assert source_map.key(("fruit", 0, "physical")) == S(3, 8)
    assert source_map.key(("fruit", 0, "physical", "color")) == S(4, 1)
    assert source_map.key(("fruit", 0, "variety")) == S(5, 9)
    assert source_map.key(("fruit", 0, "variety", 1)) == S(7, 1)
    assert source_map.key(("fruit", 0, "variety", 1, "name")) == S(8, 1)
    assert source_map.key(("fruit", 1)) == S(9, 1)
    assert source_map.key(("fruit", 1, "name")) == S(10, 1)
    assert source_map.key(("fruit", 1, "variety")) == S(11, 12)
    assert source_map.key(("fruit", 1, "variety", 0)) == S(11, 3)
    assert source_map.key(("fruit", 1, "variety", 0, "name")) == S(12, 1)
    assert source_map.key(("fruit", 2)) is None


def test_dotted_keys_in_sections_and_subtables_of_them() -> None:
    source_map = scan_ok(
        doc(
            """
            [fruit]
            apple.color = "red"
            apple.taste.sweet = true
            [fruit.apple.texture]
            smooth = true
            """
        )
    )
    assert source_map.key(("fruit", "apple")) == S(2, 1)
    assert source_map.key(("fruit", "apple", "taste", "sweet")) == S(3, 13)
    assert source_map.value(("fruit", "apple", "taste", "sweet")) == S(3, 21)
    assert source_map.key(("fruit", "apple", "texture")) == S(4, 14)
    assert source_map.key(("fruit", "apple", "texture", "smooth")) == S(5, 1)


# --- values -------------------------------------------------------------------------------------


def test_value_starts_of_every_kind() -> None:
    text = doc(
        """
        s = "x"   # comment
        i = -1_000
        h = 0xDEAD_beef
        o = 0o755
        b = 0b1101
        f = 6.626e-34
        g = +1e5
        inf1 = -inf
        nan1 = nan
        t = true
        fl = false
        odt = 1979-05-27 07:32:00.999-07:00 # space-separated date and time
        ld = 1979-05-27
        lt = 07:32:00
        arr = [ 1, 2.5, "three" ]
        tbl = {}
        """
    )
    source_map = scan_ok(text)
    lines = text.splitlines()
    for line_no, line in enumerate(lines, 1):
        name, _, rest = line.partition(" = ")
        assert source_map.key((name,)) == S(line_no, 1)
        assert source_map.value((name,)) == S(line_no, len(name) + 4), rest
    assert source_map.value(("arr", 2)) == S(15, 17)
    assert source_map.string_char(("i",), 0) is None  # not a string


def test_nested_inline_tables() -> None:
    source_map = scan_ok('a = { b = { c = 1 }, d = "x", e.f = [ {g = 2} ] }\n')
    assert source_map.value(("a",)) == S(1, 5)
    assert source_map.key(("a", "b")) == S(1, 7)
    assert source_map.value(("a", "b")) == S(1, 11)
    assert source_map.key(("a", "b", "c")) == S(1, 13)
    assert source_map.value(("a", "b", "c")) == S(1, 17)
    assert source_map.key(("a", "d")) == S(1, 22)
    assert source_map.value(("a", "d")) == S(1, 26)
    assert source_map.key(("a", "e", "f")) == S(1, 33)
    assert source_map.key(("a", "e", "f", 0)) == S(1, 39)
    assert source_map.key(("a", "e", "f", 0, "g")) == S(1, 40)
    assert source_map.value(("a", "e", "f", 0, "g")) == S(1, 44)


def test_multiline_arrays_with_comments_and_trailing_commas() -> None:
    source_map = scan_ok(
        doc(
            """
            rows = [  # opening comment, ] [ " '
              [1, 2,],  # trailing comma inside
              # a whole comment line
              [ "a,b", 'c]d' ],
              { k = [ [], [[ 3 ]] ] },
            ]
            after = 1
            """
        )
    )
    assert source_map.value(("rows",)) == S(1, 8)
    assert source_map.key(("rows", 0)) == S(2, 3)
    assert source_map.value(("rows", 0, 1)) == S(2, 7)
    assert source_map.key(("rows", 1)) == S(4, 3)
    assert source_map.value(("rows", 1, 1)) == S(4, 12)
    assert source_map.key(("rows", 2)) == S(5, 3)
    assert source_map.key(("rows", 2, "k")) == S(5, 5)
    assert source_map.value(("rows", 2, "k", 0)) == S(5, 11)
    assert source_map.value(("rows", 2, "k", 1, 0, 0)) == S(5, 18)
    assert source_map.key(("rows", 3)) is None
    assert source_map.key(("after",)) == S(7, 1)


def test_toml_1_1_extensions_accepted_by_tomli() -> None:
    source_map = scan_ok('t = {\n  a = 1, # comment\n  b = "\\e\\x41",\n}\nz = 0\n')
    assert source_map.key(("t", "b")) == S(3, 3)
    assert source_map.string_char(("t", "b"), 1) == S(3, 10)
    assert source_map.key(("z",)) == S(5, 1)


def test_crlf_line_endings() -> None:
    text = '[a]\r\nx = "1"\r\n# c\r\ny = """\r\nl1\r\nl2"""\r\n[[b]]\r\nz = [\r\n 1,\r\n]\r\n'
    source_map = scan_ok(text)
    assert source_map.key(("a", "x")) == S(2, 1)
    assert source_map.value(("a", "y")) == S(4, 5)
    assert tomli.loads(text)["a"]["y"] == "l1\nl2"
    assert source_map.string_char(("a", "y"), 0) == S(5, 1)
    assert source_map.string_char(("a", "y"), 2) == S(5, 3)  # the CRLF, decoded as "\n"
    assert source_map.string_char(("a", "y"), 3) == S(6, 1)
    assert source_map.key(("b", 0, "z", 0)) == S(9, 2)


def test_columns_count_code_points() -> None:
    source_map = scan_ok('"ключ" = "😀é" # ok\n["таблица"]\n"😀" = 1\n')
    assert source_map.value(("ключ",)) == S(1, 10)
    assert source_map.string_char(("ключ",), 1) == S(1, 12)
    assert source_map.key(("таблица", "😀")) == S(3, 1)
    assert source_map.value(("таблица", "😀")) == S(3, 7)


# --- strings ------------------------------------------------------------------------------------


def test_basic_string_escapes_map_to_backslash() -> None:
    text = 's = "a\\"b\\\\c\\n\\td\\u00e9\\U0001F600z"\n'
    source_map = scan_ok(text)
    value = tomli.loads(text)["s"]
    assert value == 'a"b\\c\n\tdé😀z'
    expected_cols = [6, 7, 9, 10, 12, 13, 15, 17, 18, 24, 34]
    assert [source_map.string_char(("s",), i) for i in range(len(value))] == [S(1, c) for c in expected_cols]
    assert source_map.string_char(("s",), len(value)) == S(1, 35)  # closing quote
    assert source_map.string_char(("s",), len(value) + 1) is None
    assert source_map.string_char(("s",), -1) is None
    assert source_map.string_char(("missing",), 0) is None


def test_literal_string_has_no_escapes() -> None:
    source_map = scan_ok("p = 'C:\\Users\\x'\n")
    assert source_map.string_char(("p",), 2) == S(1, 8)
    assert source_map.string_char(("p",), 3) == S(1, 9)


def test_multiline_basic_trims_first_newline_and_line_ending_backslash() -> None:
    text = 'd = """\nThe quick \\   \n\n   brown \\\n fox""""\nx = 1\n'
    source_map = scan_ok(text)
    value = tomli.loads(text)["d"]
    assert value == 'The quick brown fox"'
    assert source_map.string_char(("d",), 0) == S(2, 1)
    assert source_map.string_char(("d",), 9) == S(2, 10)  # the space before the backslash
    assert source_map.string_char(("d",), 10) == S(4, 4)  # "b" after the trimmed whitespace
    assert source_map.string_char(("d",), 16) == S(5, 2)  # "f" after the second continuation
    assert source_map.string_char(("d",), 19) == S(5, 5)  # a quote right before the delimiter
    assert source_map.string_char(("d",), 20) == S(5, 6)  # the closing delimiter
    assert source_map.key(("x",)) == S(6, 1)


def test_multiline_literal() -> None:
    text = "r = '''\n\\d{2} ''\n'''''\n"
    source_map = scan_ok(text)
    assert tomli.loads(text)["r"] == "\\d{2} ''\n''"
    assert source_map.value(("r",)) == S(1, 5)
    assert source_map.string_char(("r",), 0) == S(2, 1)
    assert source_map.string_char(("r",), 8) == S(2, 9)
    assert source_map.string_char(("r",), 9) == S(3, 1)
    assert source_map.string_char(("r",), 11) == S(3, 3)


def test_strings_hide_comment_and_bracket_characters() -> None:
    source_map = scan_ok('a = "# not ] a comment" # real\nb = \'[x]\' \nc = """\n[d]\ne = 1\n"""\n')
    assert source_map.key(("b",)) == S(2, 1)
    assert source_map.key(("c",)) == S(3, 1)
    assert source_map.key(("d",)) is None


# --- duplicates ---------------------------------------------------------------------------------


DUPLICATES = [
    pytest.param('a = 1\nb = 2\na = "x"\n', [Duplicate(("a",), S(1, 1), S(3, 1))], id="key twice"),
    pytest.param(
        '[tools."a.b"]\nkind = "q"\n[other]\n[tools."a.b"]\nkind = "r"\n',
        [Duplicate(("tools", "a.b"), S(1, 8), S(4, 8))],
        id="table header twice, body not reported again",
    ),
    pytest.param("[t]\nx = 1\ny = 2\nx = 3\n", [Duplicate(("t", "x"), S(2, 1), S(4, 1))], id="key in body"),
    pytest.param("[a]\nb = 1\n[a.b]\n", [Duplicate(("a", "b"), S(2, 1), S(3, 4))], id="header over a value"),
    pytest.param("[a.b]\n[a]\nb = 2\n", [Duplicate(("a", "b"), S(1, 4), S(3, 1))], id="key over a table"),
    pytest.param("a = {x = 1}\n[a.y]\n", [Duplicate(("a",), S(1, 1), S(2, 2))], id="header in inline table"),
    pytest.param("a = 1\na.b = 2\n", [Duplicate(("a",), S(1, 1), S(2, 1))], id="dotted key through a value"),
    pytest.param("x = {a = 1, a = 2}\n", [Duplicate(("x", "a"), S(1, 6), S(1, 13))], id="inline key twice"),
    pytest.param("a.b = 1\n[a]\n", [Duplicate(("a",), S(1, 1), S(2, 2))], id="header over dotted table"),
    pytest.param("[[a]]\n[a]\n", [Duplicate(("a",), S(1, 3), S(2, 2))], id="table over array of tables"),
    pytest.param("[a]\n[[a]]\n", [Duplicate(("a",), S(1, 2), S(2, 3))], id="array of tables over table"),
    pytest.param("[a.b]\n[a]\nb.c = 1\n", [Duplicate(("a", "b"), S(1, 4), S(3, 1))], id="dotted into header"),
    pytest.param(
        "[[p]]\nk = 1\nk = 2\n[[p]]\nk = 3\n", [Duplicate(("p", 0, "k"), S(2, 1), S(3, 1))], id="inside entry"
    ),
    pytest.param(
        "a = 1\na = 2\n[t]\n[t]\n",
        [Duplicate(("a",), S(1, 1), S(2, 1)), Duplicate(("t",), S(3, 2), S(4, 2))],
        id="several",
    ),
]


@pytest.mark.parametrize(("text", "expected"), DUPLICATES)
def test_duplicates_are_reported(text: str, expected: list[Duplicate]) -> None:
    with pytest.raises(tomli.TOMLDecodeError):
        tomli.loads(text)
    source_map, duplicates = scan(text)
    assert duplicates == expected
    for duplicate in expected:  # the first definition's positions stay in the map
        assert source_map.key(duplicate.path) == duplicate.first


def test_duplicate_contents_are_not_recorded() -> None:
    source_map, duplicates = scan('a = {x = 1}\na = {y = "2"}\n')
    assert len(duplicates) == 1
    assert source_map.key(("a", "x")) == S(1, 6)
    assert source_map.key(("a", "y")) is None


@pytest.mark.parametrize(
    "text",
    [
        "[[x]]\n[[x]]\n[[x]]\n",
        "[a.b.c]\n[a]\n[a.b]\n",
        "[a.b.c]\n[a]\nb.d = 1\n",
        "[a]\nb.c = 1\nb.d = 2\n[a.b.e]\n",
        "[[a]]\nb.c = 1\n[[a]]\nb.c = 2\n",
        "x = [{a = 1}, {a = 1}]\n",
    ],
)
def test_valid_redefinitions_are_not_duplicates(text: str) -> None:
    scan_ok(text)


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('a = "abc\n', S(1, 9)),
        ("a = 'abc", S(1, 5)),
        ('a = """abc\n', S(1, 5)),
        ("a = '''abc''", S(1, 5)),
        ('a = "\\q"\n', S(1, 6)),
        ('a = "\\u12"\n', S(1, 6)),
        ('a = "\\uD800"\n', S(1, 6)),
        ("a = @\n", S(1, 5)),
        ("a 1\n", S(1, 3)),
        ("= 1\n", S(1, 1)),
        ("[a\nb = 1\n", S(1, 3)),
        ("[[a]\n", S(1, 4)),
        ("a = 1 b = 2\n", S(1, 7)),
        ("a = [1 2]\n", S(1, 8)),
        ("a = {b = 1 c = 2}\n", S(1, 12)),
        ('"""k""" = 1\n', S(1, 1)),
        ("x = [\n", S(2, 1)),
        ('a = "\x01"\n', S(1, 6)),
    ],
)
def test_scan_errors(text: str, where: Span) -> None:
    with pytest.raises(tomli.TOMLDecodeError):
        tomli.loads(text)
    with pytest.raises(ScanError) as info:
        scan(text)
    assert info.value.span == where
    assert str(info.value).startswith(f"{where.line}:{where.col}: ")


def test_pathological_nesting_is_a_scan_error() -> None:
    with pytest.raises(ScanError):
        scan("a = " + "[" * 100_000)
    with pytest.raises(ScanError):
        scan("a" + ".a" * 100_000 + " = 1\n")
    source_map = scan_ok("a = " + "[" * 50 + "]" * 50 + "\n")
    assert source_map.key(("a", 0, 0)) == S(1, 7)


def test_large_document_scans() -> None:
    text = "".join(f'[t{i}]\nk = "{"x" * 50}\\n"\narr = [1, 2, {{ a = "b" }}]\n' for i in range(2000))
    source_map = scan_ok(text)
    assert source_map.key(("t1999", "arr", 2, "a")) == S(6000, 16)


# --- properties ---------------------------------------------------------------------------------

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_PLAIN = list("ab_-.\"'\\ \t\n#=[]{},é€😀")
_TRICKY = [*_PLAIN, "\r", "\x00", "\x08", "\x1b", "\x7f"]
_CONTROL = {chr(c) for c in range(32)} | {"\x7f"}

text_st = st.text(st.sampled_from(_PLAIN), max_size=12) | st.text(
    st.sampled_from(_TRICKY) | st.characters(exclude_categories=("Cs",)), max_size=12
)
key_st = st.text(st.sampled_from(_TRICKY) | st.characters(exclude_categories=("Cs",)), max_size=6) | st.text(
    st.sampled_from(sorted(_BARE)), min_size=1, max_size=6
)
scalar_st = st.one_of(
    text_st,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.dates(),
    st.times(),
    st.datetimes(),
)
value_st = st.recursive(
    scalar_st,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key_st, inner, max_size=4),
    max_leaves=16,
)
document_st = st.dictionaries(key_st, value_st, max_size=6)


class Dumper:
    """A tiny TOML writer that picks a random but valid spelling for everything."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.lines: list[str] = []

    def key(self, name: str) -> str:
        if name and set(name) <= _BARE and self.rnd.random() < 0.8:
            return name
        if "'" not in name and not (set(name) & _CONTROL - {"\t"}) and self.rnd.random() < 0.5:
            return f"'{name}'"
        return '"' + "".join(self.escape(c) for c in name) + '"'

    def escape(self, c: str) -> str:
        named = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\x1b": "\\e"}
        if c in named and (c != "\t" or self.rnd.random() < 0.5):
            return named[c]
        if c in _CONTROL or self.rnd.random() < 0.1:
            spellings = [f"\\U{ord(c):08X}"]
            spellings += [f"\\u{ord(c):04x}"] if ord(c) <= 0xFFFF else []
            spellings += [f"\\x{ord(c):02x}"] if ord(c) <= 0xFF else []
            return self.rnd.choice(spellings)
        return c

    def string(self, s: str) -> str:
        style = self.rnd.randrange(4)
        if style == 1 and "'" not in s and not set(s) & _CONTROL - {"\t"}:
            return f"'{s}'"
        if style == 2 and "'''" not in s and not set(s) & _CONTROL - {"\t", "\n"}:
            return "'''" + ("\n" if s.startswith("\n") or self.rnd.random() < 0.5 else "") + s + "'''"
        if style == 3:
            out = '"""' + ("\n" if self.rnd.random() < 0.5 else "")
            for c in s:
                if self.rnd.random() < 0.15 and not c.isspace():
                    out += "\\" + " " * self.rnd.randrange(2) + "\n" + " " * self.rnd.randrange(3)
                if c == "\n" and out != '"""':
                    out += c
                elif c == '"':
                    out += '\\"' if out.endswith('""') else c
                else:
                    out += self.escape(c)
            return out + '"""'
        return '"' + "".join(self.escape(c) for c in s) + '"'

    def value(self, v: Any) -> str:
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            if v >= 0 and self.rnd.random() < 0.3:
                return self.rnd.choice([hex, oct, bin])(v)
            return f"{v:_}" if self.rnd.random() < 0.3 else str(v)
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, dt.datetime):
            return v.isoformat(sep=self.rnd.choice("T "))
        if isinstance(v, dt.date | dt.time):
            return v.isoformat()
        if isinstance(v, list):
            sep = self.rnd.choice([", ", ",\n  ", " , # c\n "])
            trailing = "," if v and self.rnd.random() < 0.3 else ""
            return "[" + sep.join(self.value(x) for x in v) + trailing + "]"
        return "{" + ", ".join(f"{self.key(k)} = {self.value(x)}" for k, x in v.items()) + "}"

    def keyvals(self, keys: list[str], v: Any) -> None:
        """`a.b.c = v`, spreading a table over dotted keys now and then."""
        if isinstance(v, dict) and v and self.rnd.random() < 0.3:
            for k, x in v.items():
                self.keyvals([*keys, self.key(k)], x)
        else:
            self.lines.append(self.rnd.choice([".", " . "]).join(keys) + f" = {self.value(v)}  # note")

    def table(self, header: list[str], table: dict[str, Any], *, entry: bool = False) -> None:
        later: list[tuple[str, Any]] = []
        body_start = len(self.lines)
        for k, v in table.items():
            aot = isinstance(v, list) and v and all(isinstance(x, dict) for x in v)
            if (isinstance(v, dict) or aot) and self.rnd.random() < 0.6:
                later.append((k, v))
            else:
                self.keyvals([self.key(k)], v)
        if entry:
            self.lines.insert(body_start, "[[" + ".".join(header) + "]]")
        elif header and (len(self.lines) > body_start or not later or self.rnd.random() < 0.5):
            self.lines.insert(body_start, "[" + ".".join(header) + "]")
        for k, v in later:
            if isinstance(v, dict):
                self.table([*header, self.key(k)], v)
            else:
                for x in v:
                    self.table([*header, self.key(k)], x, entry=True)

    def dump(self, document: dict[str, Any]) -> str:
        self.table([], document)
        text = "\n".join(self.lines) + "\n"
        return text.replace("\n", "\r\n") if self.rnd.random() < 0.2 else text


def walk(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if path:
        yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, (*path, i))


def offset_of(text: str, span: Span) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: span.line - 1]) + span.col - 1


def check_positions(text: str) -> None:
    """Every path tomli reports is located, and located where its text really is."""
    data = tomli.loads(text)
    source_map, duplicates = scan(text)
    assert duplicates == []
    for path, value in walk(data):
        key, start = source_map.key(path), source_map.value(path)
        assert key is not None and start is not None, path
        if isinstance(path[-1], str):  # a key span points at the bare key or its opening quote
            written = text[offset_of(text, key) :]
            assert written[0] in "\"'" or written.startswith(path[-1]), path
        else:
            assert key == start, path
        at = text[offset_of(text, start) :]
        if isinstance(value, str):
            assert at[0] in "\"'"
            for i, char in enumerate(value):
                span = source_map.string_char(path, i)
                assert span is not None
                source = text[offset_of(text, span) :]
                if source[0] == "\\" and at[0] == '"':  # an escape, in a basic string
                    escaped = source[: 2 + {"x": 2, "u": 4, "U": 8}.get(source[1], 0)]
                    assert tomli.loads(f'v = "{escaped}"')["v"] == char, (path, i)
                else:
                    assert source[0] == char or (char == "\n" and source.startswith("\r\n")), (path, i)
            closing = source_map.string_char(path, len(value))
            assert closing is not None and text[offset_of(text, closing)] == at[0]
        elif isinstance(value, dict | list):
            assert at[0] in "{[" or start == key, path
        else:
            token = at.split("\n")[0].split("#")[0].split(",")[0].split("]")[0].split("}")[0].strip()
            assert tomli.loads(f"v = {token}")["v"] == value, path


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document_st, st.randoms(use_true_random=False))
def test_property_every_path_is_located(document: dict[str, Any], rnd: random.Random) -> None:
    text = Dumper(rnd).dump(document)
    assert tomli.loads(text) == document
    check_positions(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document_st, st.randoms(use_true_random=False), st.data())
def test_property_mutations_never_crash(document: dict[str, Any], rnd: random.Random, data: st.DataObject) -> None:
    """Near-valid text: whatever tomli accepts is located exactly, anything else fails cleanly."""
    text = Dumper(rnd).dump(document)
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(st.sampled_from(_TRICKY), max_size=2))
    mutated = text[:at] + insert + text[at + cut :]
    try:
        tomli.loads(mutated)
    except tomli.TOMLDecodeError:
        with contextlib.suppress(ScanError):
            scan(mutated)
    else:
        check_positions(mutated)
