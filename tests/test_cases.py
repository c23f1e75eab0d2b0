"""The case directories of `tests/cases/` as the generator's contract (layout: `tests/support/cases.py`).

Each case is replayed from inside its folder, so every path it prints is relative (`spec.toml:4:6: ...`):

* a **valid** case must generate exactly the files in `expected/` (no changed, missing, stale or foreign
  file), its warnings must be exactly `stderr.txt` (no file: no warnings), `fusiongen validate spec.toml`
  must print exactly that and exit 0, and the generated server, published with its runtime copies into a
  temp dir beside a copy of the case's handler module, must import in a fresh interpreter and list the
  spec's tools through a real in-process `mcp.Client`;
* an **invalid** case (`invalid-<slug>`) must make `validate` raise SpecError whose formatted diagnostics,
  followed by the summary line, are exactly `stderr.txt`, and the real CLI, run as a user would, must print
  exactly that on stderr, nothing on stdout, exit 2 and crash nowhere.

Replaying a case never writes into it. The corpus must cover every code a spec alone can trigger.
A case whose files state what fusiongen *should* do but does not yet carries a `KNOWN_BUG` file and runs as
a strict xfail: it fails (XPASS) the day the bug is fixed, and the file must then be removed.

After an intended change to generated code: `python -m tests.support.cases --update` (part of `make golden`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fusiongen.api import Generation, compare, generate, publish, validate
from fusiongen.diagnostics import CODES, Diagnostic, SpecError, sorted_diagnostics
from tests.support.cases import (
    CASE_NAME,
    CASES_DIR,
    EXPECTED,
    KNOWN_BUG,
    SPEC,
    STDERR,
    case_dirs,
    grouped_tool_names,
    is_invalid,
    known_bug,
    read_stderr,
    read_tree,
    skipped,
    spec_dependent,
    spec_tool_names,
    wire_name,
)

EXIT_OK, EXIT_INVALID = 0, 2
MIN_INVALID_CASES = 30
MIN_VALID_CASES = 10
TIMEOUT = 120
UPDATE = "python -m tests.support.cases --update"
DIAGNOSTIC_LINE = re.compile(
    r"(?P<file>\S+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning)\[(?P<code>FG\d{3})\]: "
)
SUMMARY_LINE = re.compile(r"(?P<errors>\d+) error\(s\); nothing was written\.")

# Codes in FG001–FG143 that no spec file can trigger, with the reason.
UNTRIGGERABLE: dict[str, str] = {
    "FG002": "the spec file cannot be read: about the file, not its contents",
    "FG105": "folder specs only (a case is one spec file): tests/test_folder_specs.py pins it",
    "FG106": "folder specs only (a case is one spec file): tests/test_folder_specs.py pins it",
    "FG108": "mounts read a second spec (a case is one spec file): tests/test_mounts.py pins it",
    "FG109": "mounts read a second spec (a case is one spec file): tests/test_mounts.py pins it",
}

# Runs in a fresh interpreter (-I: no PYTHONPATH, no working directory on sys.path; -B: no __pycache__):
# import the published package from argv[1], let create_server() find the handler module by itself, and
# list the tools in both protocol eras.
LIST_TOOLS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import anyio
from mcp import Client
package = __import__(sys.argv[2])
server_module = sys.modules[sys.argv[2] + ".server"]

async def listed(mode):
    async with Client(package.create_server(), mode=mode, cache=None) as client:
        return [tool.name for tool in (await client.list_tools()).tools]

async def main():
    modern, legacy = await listed("2026-07-28"), await listed("legacy")
    handlers = sys.modules.get(server_module.HANDLERS_MODULE)
    print(json.dumps({"modern": modern, "legacy": legacy, "handlers_file": handlers and handlers.__file__}))

anyio.run(main)
"""


def case_params() -> list[object]:
    params = []
    for case in case_dirs():
        bug = known_bug(case)
        marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


def diff(expected: str, actual: str, what: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile=f"{what} (in the case)",
        tofile=f"{what} (from the generator)",
    )
    return "".join(lines) + f"\n(if the change is intended: {UPDATE})"


def snapshot(directory: Path) -> dict[str, int]:
    """Every file below `directory` with its modification time (in ns)."""
    return {
        p.relative_to(directory).as_posix(): p.stat().st_mtime_ns
        for p in directory.rglob("*")
        if p.is_file() and not skipped(p.relative_to(directory))
    }


def run_python(args: list[str], cwd: Path, *, checkout: bool = False) -> subprocess.CompletedProcess[str]:
    """`python ARGS`; with `checkout`, this checkout's fusiongen importable (not whichever one is installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FUSIONGEN_DEBUG", "PYTHONPATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if checkout:
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def run_validate(case: Path) -> subprocess.CompletedProcess[str]:
    """`fusiongen validate spec.toml`, run from the case folder exactly as a user would."""
    return run_python(["-m", "fusiongen", "validate", SPEC], cwd=case, checkout=True)


def formatted(diagnostics: list[Diagnostic], *, failed: bool) -> str:
    text = "".join(d.format() + "\n" for d in diagnostics)
    if failed:
        text += f"{sum(d.is_error for d in diagnostics)} error(s); nothing was written.\n"
    return text


@pytest.mark.parametrize("case", case_params())
def test_case(case: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(case)
    before = snapshot(case)
    if is_invalid(case):
        replay_invalid(case, tmp_path)
    else:
        replay_valid(case, tmp_path)
    assert snapshot(case) == before, "replaying the case wrote or changed files in it"


def replay_invalid(case: Path, tmp_path: Path) -> None:
    expected = read_stderr(case)
    assert expected, f"{case.name}: an invalid case needs a {STDERR} stating its diagnostics"
    assert not (case / EXPECTED).exists(), f"{case.name}: an invalid spec generates nothing; remove {EXPECTED}/"

    with pytest.raises(SpecError) as caught:
        validate(Path(SPEC))
    diagnostics = caught.value.diagnostics
    assert any(d.is_error for d in diagnostics), "SpecError without an error"
    actual = formatted(diagnostics, failed=True)
    assert actual == expected, diff(expected, actual, STDERR)

    out = tmp_path / "out"
    with pytest.raises(SpecError) as again:
        generate(case / SPEC, out)
    assert [d.format() for d in again.value.diagnostics] == [d.format() for d in diagnostics]
    assert not out.exists(), "generate wrote files for an invalid spec"

    result = run_validate(case)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    assert result.returncode == EXIT_INVALID, output
    assert result.stdout == "", output
    errors = sum(": error[" in line for line in expected.splitlines())
    assert f"{errors} error(s); nothing was written." in result.stderr, output
    assert result.stderr == expected, diff(expected, result.stderr, f"{STDERR} (fusiongen validate)")


def replay_valid(case: Path, tmp_path: Path) -> None:
    generation = generate(case / SPEC, case / EXPECTED)
    files = spec_dependent(generation.files)
    assert files, "a valid spec generates spec-dependent files"
    assert set(files) <= set(generation.files)

    drift = compare(case / EXPECTED, files, generation.headers)
    foreign = sorted(read_tree(case / EXPECTED).keys() - files.keys() - set(drift.stale))
    report = drift.report() + "".join(f"foreign: {p} (not generated from this spec)\n" for p in foreign)
    report += f"(if the change is intended: {UPDATE})"
    assert not drift.changed, report
    assert not drift.missing, report
    assert not drift.stale, report
    assert not foreign, report

    expected = read_stderr(case)
    assert (case / STDERR).exists() == bool(expected), f"an empty {STDERR}: remove it"
    assert not any(d.is_error for d in generation.warnings)
    # `generation.warnings` are in the order the phases found them; the CLI prints them sorted.
    assert sorted_diagnostics(generation.warnings) == sorted(generation.warnings, key=Diagnostic.sort_key)
    actual = formatted(sorted_diagnostics(generation.warnings), failed=False)
    assert actual == expected, diff(expected, actual, STDERR)

    result = run_validate(case)
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_OK, output
    assert result.stdout == "", output
    assert result.stderr == expected, diff(expected, result.stderr, f"{STDERR} (fusiongen validate)")

    check_server(case, generation, tmp_path)


def check_server(case: Path, generation: Generation, tmp_path: Path) -> None:
    """Publish the whole generation (runtime copies included) into a copy of the case, where its
    HANDLERS_DIR finds the handler module, and list the tools from a fresh interpreter."""
    copy = tmp_path / case.name
    shutil.copytree(case, copy, ignore=shutil.ignore_patterns(EXPECTED, STDERR, KNOWN_BUG, "__pycache__", ".*"))
    out = copy / EXPECTED
    published = publish(generation, out)
    assert sorted(published.written) == sorted(generation.files)
    assert read_tree(out) == generation.files

    package = generation.ir.package
    result = run_python(["-I", "-B", "-c", LIST_TOOLS, str(out), package], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    listed = json.loads(result.stdout)

    names = spec_tool_names(case)
    grouped = grouped_tool_names(case)
    spec = tomllib.loads((case / SPEC).read_text(encoding="utf-8"))
    if grouped is not None:  # one tool per group (docs/spec.md §4.3): its actions follow the state, not the list
        assert listed["modern"] == grouped
        assert listed["legacy"] == [n for n in grouped if n in listed["legacy"]]
    elif spec.get("workflows"):
        assert listed["modern"] == names
        # The handshake era lists the unbound tools and those bound to the session's (initial) state.
        tools = spec.get("tools", {})
        unbound = [wire_name(spec, n) for n, tool in tools.items() if "bind_state" not in tool]
        assert set(unbound) <= set(listed["legacy"]) <= set(names)
        assert listed["legacy"] == [n for n in names if n in listed["legacy"]]
    else:
        assert listed["modern"] == names
        assert listed["legacy"] == names
    if not generation.ir.tools:  # nothing to call: the server does not need (or import) a handler module
        assert listed["handlers_file"] is None, listed
        return
    # create_server() found the handler module beside the (copied) spec by itself.
    handlers = Path(listed["handlers_file"]).resolve()
    assert handlers.is_relative_to(copy.resolve()), handlers


def test_cases_are_well_formed() -> None:
    cases = case_dirs()
    names = [c.name for c in cases]
    assert len({n.lower() for n in names}) == len(names), "two cases differ only in case"
    for case in cases:
        assert CASE_NAME.match(case.name), f"{case.name}: name it lowercase-words-with-hyphens"
        assert (case / SPEC).is_file(), f"{case.name}: no {SPEC}"
        lines = read_stderr(case).splitlines()
        assert read_stderr(case).endswith("\n") or not lines, f"{case.name}: {STDERR} must end with a newline"
        errors = 0
        for index, line in enumerate(lines):
            if line.startswith("  hint: "):
                assert index and DIAGNOSTIC_LINE.match(lines[index - 1]), f"{case.name}: a hint under no diagnostic"
                continue
            summary = SUMMARY_LINE.fullmatch(line)
            if summary:
                assert is_invalid(case), f"{case.name}: a valid case has no summary line"
                assert index == len(lines) - 1, f"{case.name}: the summary line comes last"
                assert int(summary.group("errors")) == errors, f"{case.name}: the summary miscounts the errors"
                continue
            match = DIAGNOSTIC_LINE.match(line)
            assert match, f"{case.name}: {line!r} is not a diagnostic line"
            assert match.group("code") in CODES, f"{case.name}: {match.group('code')} is not in the catalogue"
            assert (case / match.group("file")).is_file(), f"{case.name}: {line!r} names a file not in the case"
            assert int(match.group("line")) >= 1 and int(match.group("col")) >= 1
            errors += match.group("severity") == "error"
        if is_invalid(case):
            assert lines and SUMMARY_LINE.fullmatch(lines[-1]), f"{case.name}: no summary line"
            assert errors, f"{case.name}: an invalid case states no error"
        else:
            assert not errors, f"{case.name}: a valid case cannot print errors"


def test_corpus_covers_every_spec_code() -> None:
    """Enough cases, and every code a spec alone can trigger is printed by an invalid case.

    A KNOWN_BUG case counts too: it runs like the others, and states the code fusiongen should print.
    """
    cases = case_dirs()
    invalid = [c for c in cases if is_invalid(c)]
    assert len(invalid) >= MIN_INVALID_CASES
    assert len(cases) - len(invalid) >= MIN_VALID_CASES
    covered = {
        match.group("code")
        for case in invalid
        for line in read_stderr(case).splitlines()
        if (match := DIAGNOSTIC_LINE.match(line))
    }
    spec_codes = {code for code in CODES if "FG001" <= code <= "FG143"}
    assert set(UNTRIGGERABLE) <= spec_codes
    missing = sorted(spec_codes - set(UNTRIGGERABLE) - covered)
    assert not missing, f"no invalid case triggers {', '.join(missing)}"


def test_cases_dir_is_where_the_rewriter_writes() -> None:
    assert Path(__file__).resolve().parent / "cases" == CASES_DIR
    assert {c.name for c in case_dirs()} == {p.name for p in CASES_DIR.iterdir() if (p / SPEC).is_file()}
