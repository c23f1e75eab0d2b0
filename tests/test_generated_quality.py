"""Generated code is first-class Python: every golden tree passes ruff (lint and format) and mypy --strict,
with the configuration the generated pyproject.toml itself declares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.build import ROOT
from tests.support.processes import run_python

GOLDEN = sorted(p for p in (ROOT / "golden").iterdir() if p.is_dir())
RUFF = ["-m", "ruff"]


@pytest.mark.parametrize("tree", GOLDEN, ids=[p.name for p in GOLDEN])
def test_ruff_check_is_clean(tree: Path) -> None:
    result = run_python([*RUFF, "check", "--no-cache", "."], cwd=tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("tree", GOLDEN, ids=[p.name for p in GOLDEN])
def test_ruff_format_is_clean(tree: Path) -> None:
    result = run_python([*RUFF, "format", "--check", "--no-cache", "."], cwd=tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("tree", GOLDEN, ids=[p.name for p in GOLDEN])
def test_mypy_strict_is_clean(tree: Path, tmp_path: Path) -> None:
    packages = [p.name for p in tree.iterdir() if (p / "__init__.py").is_file()]
    env = {**os.environ, "MYPYPATH": str(ROOT / "specs")}
    result = run_python(
        ["-m", "mypy", "--strict", "--cache-dir", tmp_path / "mypy", *packages], cwd=tree, env=env, timeout=540
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout
