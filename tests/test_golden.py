"""Golden cases: every spec in specs/ generates exactly the tree committed under golden/<stem>/."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusiongen.api import compare, generate

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
