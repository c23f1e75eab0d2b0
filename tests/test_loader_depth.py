"""The loader's nesting guard (FG001 past 100 levels of arrays and inline tables) reads TOML strings as TOML does.

It used to read `\"\"\"` as three one-character strings and end every string at a line break, so each inline
table holding a multi-line string left one `{` open: a spec with over 100 such tables (every large spec the
OpenAPI importer writes) failed to load. These tests scan real specs through `validate`, and pin the scan on
each kind of string, escape and comment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fusiongen.api import validate
from fusiongen.diagnostics import Position, SpecError
from fusiongen.load.loader import MAX_NESTING, _too_deep_at


def test_a_spec_with_many_inline_tables_holding_multiline_strings_validates(tmp_path: Path) -> None:
    """150 fields, each an inline table with a multi-line basic or literal string (quotes, escapes, brackets
    and `#` inside): hand-written, the shape the importer writes."""
    lines = ["[server]", 'name = "many"', "", "[models.Thing.fields]"]
    for index in range(150):
        if index % 2:
            text = f'"""\nline one {{ [ # not a comment\nquote \\" and ""two"" and \\\\ end {index}"""'
        else:
            text = f"'''\nliteral {{ [ \\ no escape\n'' two quotes {index}'''"
        lines.append(f'f{index} = {{ type = "string", description = {text} }}')
    spec = tmp_path / "many.toml"
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, ir, _ = validate(spec)
    (model,) = [m for m in ir.models if m.name == "Thing"]
    descriptions = {f.name: f.description for f in model.fields}
    assert len(descriptions) == 150
    assert (descriptions["f1"] or "").endswith('""two"" and \\ end 1')


def test_nesting_past_the_limit_is_still_fg001_at_the_bracket(tmp_path: Path) -> None:
    depth = MAX_NESTING + 1
    spec = tmp_path / "deep.toml"
    text = '[server]\nname = "deep"\nx = ' + '"""a\nb""" ' + "[" * depth + "]" * depth + "\n"
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        validate(spec)
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == "FG001" and diagnostic.position == Position(4, len('b""" ') + MAX_NESTING + 1)


@pytest.mark.parametrize(
    ("text", "opens"),
    [
        ('a = """ { """\n', 0),  # multi-line basic on one line
        ('a = """\n{\n[\n"""\n', 0),  # spanning lines
        ('a = """ \\""" { """\n', 0),  # an escaped quote does not close it
        ('a = """ x""""\n{', 1),  # the closing delimiter after one quote of content
        ('a = """ x"""""\n{', 1),  # ... after two
        ("a = ''' { \\'''\n{", 1),  # a literal string has no escapes: the backslash is text
        ("a = '''\n{''\n'''\n", 0),
        ('a = "{ \\" {"\n', 0),  # one-line basic with an escaped quote
        ("a = '{ \\'\n{", 1),  # one-line literal: the backslash is text, the quote closes it
        ('a = "open\n{', 1),  # an unterminated string ends at the line break (tomli reports it)
        ("# { [ \n{", 1),  # a comment runs to the line's end
        ('a = { b = "#" }\n{', 1),  # a `#` in a string is not a comment
    ],
)
def test_the_scan_skips_each_kind_of_string(text: str, opens: int) -> None:
    """`opens` brackets are left open by `text`: the scan finds the (MAX_NESTING + 1)-th open bracket only when
    `text`'s own brackets count as TOML counts them."""
    needed = MAX_NESTING + 1 - opens
    assert _too_deep_at(text + "[" * needed) is not None
    assert _too_deep_at(text + "[" * (needed - 1)) is None
