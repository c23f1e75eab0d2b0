"""Golden cases: every spec in specs/ generates exactly the tree committed under golden/<stem>/."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from fusiongen.api import compare, generate
from tests.support.build import importable

ROOT = Path(__file__).resolve().parent.parent
# One-file specs, and folder specs (docs/spec.md §3.1; the examples keep [server] in server.toml).
SPECS = sorted([*(ROOT / "specs").glob("*.toml"), *(p.parent for p in (ROOT / "specs").glob("*/server.toml"))])


def test_every_spec_has_a_golden_tree() -> None:
    assert SPECS, "specs/ holds no spec"
    golden = {p.name for p in (ROOT / "golden").iterdir() if p.is_dir()}
    assert golden == {s.stem for s in SPECS}, "golden/ and specs/ disagree: run `make golden`"


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_golden_tree_is_current(spec: Path) -> None:
    out = ROOT / "golden" / spec.stem
    generation = generate(spec, out)
    drift = compare(out, generation.files, generation.headers)
    assert drift.clean, (
        f"golden/{spec.stem} is not what specs/{spec.name} generates (changed, missing or stale files below).\n"
        "If the change is intended, run `make golden` and commit the result.\n\n" + drift.report()
    )


def _described(cls: Any) -> dict[str, object]:
    """Everything about an argument class that a handler or a type checker could tell apart."""
    return {
        "names": (cls.__name__, cls.__qualname__, cls.__module__, cls.__doc__, cls.__bases__),
        "annotations": cls.__annotations__,
        "slots": cls.__slots__,
        "match_args": cls.__match_args__,
        "params": repr(cls.__dataclass_params__),
        "fields": [
            (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only, f.metadata)
            for f in dataclasses.fields(cls)
        ],
        # Python 3.13 adds these two to a class written as a statement only.
        "members": sorted(set(vars(cls)) - {"__firstlineno__", "__static_attributes__"}),
        "signature": str(inspect.signature(cls)),
    }


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_argument_classes_are_made_as_declared(spec: Path) -> None:
    """inputs.py makes each argument class on first use (ARGUMENT_CLASSES) and declares it for type checkers
    only (`if TYPE_CHECKING:`): the class made is the dataclass that declaration makes, and the same every time."""
    tree = ROOT / "golden" / spec.stem
    package = next(tree.glob("*/inputs.py")).parent.name
    with importable(tree, modules=(package,)):
        inputs = importlib.import_module(f"{package}.inputs")
        path = Path(inputs.__file__ or "")
        block = next(
            node
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        )
        declared: dict[str, Any] = dict(vars(inputs))  # what the declarations see: the module's imports
        exec(compile(ast.Module(block.body, []), str(path), "exec"), declared)
        names = [node.name for node in block.body if isinstance(node, ast.ClassDef)]
        assert names and names == [name for name in inputs.__all__ if not name.startswith("parse_")]
        for name in names:
            made = getattr(inputs, name)
            assert _described(made) == _described(declared[name])
            assert getattr(inputs, name) is made is inputs.ARGUMENT_CLASSES[name]
        with pytest.raises(AttributeError):
            inputs.NoSuchInput  # noqa: B018
