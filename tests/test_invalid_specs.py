"""The invalid-spec corpus: every file in `tests/invalid_specs/` is a spec with known mistakes.

Each case starts with comments stating the exact diagnostics `fusiongen validate` must print, in order:

    # expect: tests/invalid_specs/07_unknown_key.toml:5:1: error[FG100]: unknown key "kindd" in [tools."a.b"]
    # hint: did you mean "kind"?

A `# hint:` line states the hint of the expectation above it; an expectation without one does not
check its hint. The test runs the real CLI in a subprocess from the repository root, exactly as a user
would, and checks the exit code, the diagnostic lines, the hints, that nothing crashed and that
nothing was written.

A case whose expectation is what fusiongen *should* print, but does not yet, says so in a
`# KNOWN BUG: <what is wrong>` comment and runs as a strict xfail: it fails (XPASS) the day the bug
is fixed, and the comment must then be removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fusiongen.diagnostics import CODES

REPO = Path(__file__).resolve().parents[1]
CASES_DIR = Path(__file__).resolve().parent / "invalid_specs"
CASE_NAME = re.compile(r"\d{2}_[a-z0-9_]+\.toml\Z")
DIAGNOSTIC_LINE = re.compile(r"^\S+:\d+:\d+: (error|warning)\[FG\d{3}\]")
CODE_IN_LINE = re.compile(r": (?:error|warning)\[(FG\d{3})\]: ")
EXIT_INVALID = 2
MIN_CASES = 30

# Codes in FG001–FG143 that no spec file can trigger, with the reason.
UNTRIGGERABLE: dict[str, str] = {
    "FG002": "the spec file cannot be read: about the file, not its contents",
}


@dataclass(frozen=True)
class Expected:
    line: str
    hint: str | None = None

    @property
    def code(self) -> str:
        match = CODE_IN_LINE.search(self.line)
        assert match, f"not a diagnostic line: {self.line!r}"
        return match.group(1)


def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.toml"))


def parse_expectations(path: Path) -> list[Expected]:
    """The `# expect:` / `# hint:` lines of the comment block a case starts with."""
    found: list[Expected] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if text.startswith("expect:"):
            found.append(Expected(text.removeprefix("expect:").strip()))
        elif text.startswith("hint:"):
            assert found, f"{path.name}: a hint before any expectation"
            assert found[-1].hint is None, f"{path.name}: two hints for {found[-1].line!r}"
            found[-1] = Expected(found[-1].line, text.removeprefix("hint:").strip())
    return found


def parse_output(stderr: str) -> list[Expected]:
    """The diagnostics printed on stderr, each with the hint printed under it (if any)."""
    found: list[Expected] = []
    for line in stderr.splitlines():
        if DIAGNOSTIC_LINE.match(line):
            found.append(Expected(line))
        elif line.startswith("  hint: ") and found and found[-1].hint is None:
            found[-1] = Expected(found[-1].line, line.removeprefix("  hint: "))
    return found


def snapshot(directory: Path) -> dict[str, int]:
    """Every file below `directory` with its modification time (in ns)."""
    return {p.relative_to(directory).as_posix(): p.stat().st_mtime_ns
            for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def run_validate(spec: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FUSIONGEN_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "fusiongen", "validate", spec.relative_to(REPO).as_posix()],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def known_bug(path: Path) -> str | None:
    """The `# KNOWN BUG:` comment of a case, if it has one."""
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            return None
        if raw.startswith("# KNOWN BUG:"):
            return raw.removeprefix("# KNOWN BUG:").strip()
    return None


def case_params() -> list[object]:
    params = []
    for path in case_files():
        bug = known_bug(path)
        marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("spec", case_params())
def test_invalid_spec(spec: Path) -> None:
    expected = parse_expectations(spec)
    assert expected, f"{spec.name} states no `# expect:` line"
    before = snapshot(CASES_DIR)

    result = run_validate(spec)
    output = result.stdout + result.stderr

    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    assert result.returncode == EXIT_INVALID, output
    actual = parse_output(result.stderr)
    assert [a.line for a in actual] == [e.line for e in expected], output
    for want, got in zip(expected, actual, strict=True):
        if want.hint is not None:
            assert got.hint == want.hint, f"hint of {want.line!r}:\n{output}"
    errors = sum(": error[" in e.line for e in expected)
    assert f"{errors} error(s); nothing was written." in result.stderr, output
    assert result.stdout == "", output
    assert snapshot(CASES_DIR) == before, "validate wrote or changed files"


def test_case_files_are_well_formed() -> None:
    for path in case_files():
        assert CASE_NAME.match(path.name), f"{path.name}: name it NN_slug.toml"
        shown = path.relative_to(REPO).as_posix()
        for want in parse_expectations(path):
            assert want.line.startswith(f"{shown}:"), f"{path.name}: {want.line!r} names another file"
            assert DIAGNOSTIC_LINE.match(want.line), f"{path.name}: {want.line!r} is not a diagnostic line"
            assert want.code in CODES, f"{path.name}: {want.code} is not in the catalogue"
    numbers = [path.name[:2] for path in case_files()]
    assert len(numbers) == len(set(numbers)), "two cases share a number"


def test_corpus_covers_every_spec_code() -> None:
    """At least MIN_CASES cases, and every code a spec alone can trigger is expected by one of them.

    A KNOWN BUG case counts too: it runs like the others, and states the code fusiongen should print.
    """
    cases = case_files()
    assert len(cases) >= MIN_CASES
    covered = {want.code for path in cases for want in parse_expectations(path)}
    spec_codes = {code for code in CODES if "FG001" <= code <= "FG143"}
    assert set(UNTRIGGERABLE) <= spec_codes
    missing = sorted(spec_codes - set(UNTRIGGERABLE) - covered)
    assert not missing, f"no invalid-spec case triggers {', '.join(missing)}"
