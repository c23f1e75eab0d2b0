"""The README's "Use" section works as written: its shell blocks, taken from README.md itself (never a copy), run
verbatim in a fresh clone of this repository, with fusiongen installed in a fresh virtualenv from the clone and
from a wheel built from it, in the folders they name. Every other shell block of the README is accounted for.

These tests install packages (from pip's cache when it holds them): they are the slowest of the suite, so
there are two, each running the whole section once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
# Shell blocks of the README that no test runs, and why.
NOT_RUN = {
    "make demo": "the developer's targets: `make demo` builds the demo the way tests/test_demo.py runs it, and "
    "`make test` is the whole suite itself",
}


def use_blocks() -> dict[str, str]:
    """The shell blocks of the README's "Use" section, by role: installing from the clone, from a wheel, the
    user's project and the clone's examples, in the order the README gives them."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Use\n")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = BLOCK.findall(section)
    assert len(blocks) == 4, blocks
    return dict(zip(("clone", "wheel", "project", "examples"), blocks, strict=True))


def test_every_shell_block_of_the_readme_runs_or_says_why_not() -> None:
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    run = set(use_blocks().values())
    unaccounted = [b for b in blocks if b not in run and not any(b.startswith(key) for key in NOT_RUN)]
    assert unaccounted == []
    assert all(any(b.startswith(key) for b in blocks) for key in NOT_RUN)  # no stale exclusion


def fresh_clone(tmp_path: Path) -> Path:
    """A clone of this repository's committed state, under a name that is not "fusiongen"."""
    clone = tmp_path / "my-checkout"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, capture_output=True)
    return clone


def user_env() -> dict[str, str]:
    """A user's shell: no virtualenv active, nothing of the test run's on the paths."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def run_verbatim(clone: Path, *blocks: str) -> subprocess.CompletedProcess[str]:
    script = "set -e\n" + "\n".join(blocks)
    return subprocess.run(
        ["bash", "-c", script],
        cwd=clone,
        env=user_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1500,
    )


def assert_the_section_did_its_work(clone: Path, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (clone / "notes" / "notes_server" / "server.py").is_file()
    assert not (clone / "notes" / "notes").exists()  # the rebuild went where init built
    assert "passed" in result.stdout  # the project's own tests ran
    assert (clone / "generated" / "billing" / "billing_server" / "server.py").is_file()
    assert (clone / "generated" / "library.toml").is_file()
    assert (clone / "generated" / "fusiongen.schema.json").is_file()
    # `fusiongen docs spec --path` named the reference installed with fusiongen (a wheel's copy, also when pip
    # built that wheel from the clone), and it is the reference of this commit.
    shipped = re.search(r"^(/\S+/site-packages/fusiongen/docs/spec\.md)$", result.stdout, re.M)
    assert shipped is not None, result.stdout[-4000:]
    assert Path(shipped.group(1)).read_bytes() == (clone / "docs" / "spec.md").read_bytes()


@pytest.mark.timeout(1800)
def test_the_use_section_runs_verbatim_from_a_clone(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path)
    blocks = use_blocks()
    result = run_verbatim(clone, blocks["clone"], blocks["project"], blocks["examples"])
    assert_the_section_did_its_work(clone, result)


@pytest.mark.timeout(1800)
def test_the_use_section_runs_verbatim_from_a_wheel(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path)
    blocks = use_blocks()
    result = run_verbatim(clone, blocks["wheel"], blocks["project"], blocks["examples"])
    assert_the_section_did_its_work(clone, result)
    assert list((clone / "dist").glob("fusiongen-*-py3-none-any.whl"))
