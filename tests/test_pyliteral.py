"""`py_literal`: values as Python source, one line when they fit, wrapped one item per line when not.

The line-fitting test (`_flat_within`) stops writing a literal once it is longer than the room left, so a
large API's schemas (nested hundreds of items wide, tens deep) are written in time linear in their size; it
must decide exactly as writing the whole literal and measuring it would.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusiongen import pyliteral
from fusiongen.pyliteral import LINE_LENGTH, PyName, _flat, _flat_within, py_literal

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.just(PyName("SOME_CONSTANT")),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=10), inner, max_size=5),
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(min_value=-5, max_value=LINE_LENGTH + 40))
def test_fitting_decides_as_writing_it_whole_would(value: Any, budget: int) -> None:
    flat = _flat(value)
    assert _flat_within(value, budget) == (flat if len(flat) <= budget else None)


@settings(max_examples=200, deadline=None)
@given(VALUES, st.integers(min_value=0, max_value=6))
def test_a_literal_is_the_value_and_keeps_to_the_line_where_it_can(value: Any, level: int) -> None:
    text = py_literal(value, level)
    source = text.replace("SOME_CONSTANT", "'SOME_CONSTANT'")
    expected = _plain(value)
    assert ast.literal_eval(source) == expected
    if len("    " * level) + len(_flat(value)) <= LINE_LENGTH:
        assert "\n" not in text


def test_a_deep_literal_is_not_written_again_at_each_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """150 levels of one-key tables around a list: trying each level whole wrote every string once per level
    above it (19,075 strings here; GitHub's schemas took seconds). Now each string is written a bounded
    number of times."""
    value: Any = ["x" * 20] * 50
    for depth in range(150):
        value = {f"level{depth}": value}
    written = 0
    string = pyliteral.py_string

    def counted(text: str) -> str:
        nonlocal written
        written += 1
        return string(text)

    monkeypatch.setattr(pyliteral, "py_string", counted)
    text = py_literal(value)
    assert ast.literal_eval(text) == value
    assert written <= 3 * (150 + 50), written  # 301: the key twice at each level, a leaf once


def _plain(value: Any) -> Any:
    if isinstance(value, PyName):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    return value
