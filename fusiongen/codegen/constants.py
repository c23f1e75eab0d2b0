"""Module-level constants of generated code: a name, an annotation and a Python literal.

Constants are named after what they hold, so generated modules read like written ones; two fields
with the same name but different value sets get numbered names instead of clashing.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusiongen.pyliteral import py_literal


@dataclass(frozen=True)
class ConstantView:
    name: str
    annotation: str
    literal: str


def enum_constant(table: dict[str, ConstantView], field: str, values: tuple[str, ...], *, as_set: bool) -> str:
    """One constant per field name and value set: `STATUS_VALUES`, then `STATUS_VALUES_2`..."""
    literal = py_literal(frozenset(values)) if as_set else py_literal(values)
    base = f"{field.upper()}_VALUES" if as_set else f"_{field.upper()}_VALUES"
    name, number = base, 1
    while name in table and table[name].literal != literal:
        number += 1
        name = f"{base}_{number}"
    table[name] = ConstantView(name, "frozenset[str]" if as_set else "tuple[str, ...]", literal)
    return name
