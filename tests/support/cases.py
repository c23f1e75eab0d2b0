"""The case directories of `tests/cases/`: what a case holds, what the generator makes of it, and a rewriter.

A case is a folder `tests/cases/<name>/` holding

* `spec.toml`: the spec;
* its handler module, where `[server] handlers` puts it beside the spec (valid cases);
* any XState machine (`*.json`) the spec imports;
* `expected/`: every file `generate(spec.toml, expected/)` returns that depends on the spec (the runtime
  copies, whose second line starts with `# fusiongen runtime `, are left out); valid cases only;
* `stderr.txt`: exactly what `fusiongen validate spec.toml` prints on stderr, run from the case folder,
  when it prints anything (the errors and the summary line of an invalid case, the warnings of a valid one);
* `KNOWN_BUG` (optional): one line saying why `expected/` and `stderr.txt` state what fusiongen *should*
  produce but does not yet. The replay then runs as a strict xfail, and the rewriter leaves the case alone.

Invalid cases are named `invalid-<slug>`; every other case must be valid.

    python -m tests.support.cases            # report the cases whose files are out of date (exit 1 if any)
    python -m tests.support.cases --update   # rewrite expected/ and stderr.txt of every case (make golden)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusiongen.api import Generation, generate
from fusiongen.diagnostics import Diagnostic, SpecError, sorted_diagnostics

CASES_DIR = Path(__file__).resolve().parents[1] / "cases"
SPEC = "spec.toml"
EXPECTED = "expected"
STDERR = "stderr.txt"
KNOWN_BUG = "KNOWN_BUG"
INVALID_PREFIX = "invalid-"
CASE_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
RUNTIME_MARK = "# fusiongen runtime "


def case_dirs() -> list[Path]:
    """Every case folder, sorted by name."""
    return sorted(p for p in CASES_DIR.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))


def is_invalid(case: Path) -> bool:
    return case.name.startswith(INVALID_PREFIX)


def known_bug(case: Path) -> str | None:
    """Why the case states what fusiongen should do but does not yet, if it says so."""
    marker = case / KNOWN_BUG
    if not marker.is_file():
        return None
    return marker.read_text(encoding="utf-8").strip() or "(no reason given)"


@contextmanager
def inside(case: Path) -> Iterator[None]:
    """Run with the case folder as working directory, so diagnostics name `spec.toml`."""
    before = Path.cwd()
    os.chdir(case)
    try:
        yield
    finally:
        os.chdir(before)


def is_runtime_copy(text: str) -> bool:
    """A verbatim copy of `fusiongen/runtime/*.py`: its second line says so; it does not depend on the spec."""
    lines = text.split("\n", 2)
    return len(lines) > 1 and lines[1].startswith(RUNTIME_MARK)


def spec_dependent(files: dict[str, str]) -> dict[str, str]:
    return {path: text for path, text in files.items() if not is_runtime_copy(text)}


def validate_stderr(diagnostics: Iterable[Diagnostic], *, failed: bool) -> str:
    """What `fusiongen validate` prints on stderr for these diagnostics (the summary line if it failed)."""
    ordered = sorted_diagnostics(diagnostics)
    text = "".join(d.format() + "\n" for d in ordered)
    if failed:
        text += f"{sum(d.is_error for d in ordered)} error(s); nothing was written.\n"
    return text


@dataclass(frozen=True)
class Outcome:
    """What the current generator makes of a case."""

    generation: Generation | None  # None: the spec is invalid
    stderr: str

    @property
    def files(self) -> dict[str, str]:
        """The files `expected/` must hold."""
        return spec_dependent(self.generation.files) if self.generation else {}


def run_case(case: Path) -> Outcome:
    """Generate the case into its `expected/` folder (in memory), from inside the case folder."""
    with inside(case):
        try:
            generation = generate(case / SPEC, case / EXPECTED)
        except SpecError as exc:
            return Outcome(None, validate_stderr(exc.diagnostics, failed=True))
        return Outcome(generation, validate_stderr(generation.warnings, failed=False))


def skipped(relative: Path) -> bool:
    """Folders no case file lives in, as `fusiongen check` skips them: tool caches (`.ruff_cache`, which
    `ruff check tests` creates beside `expected/pyproject.toml`), `__pycache__`, `node_modules`."""
    return any(part.startswith(".") or part in ("__pycache__", "node_modules") for part in relative.parts[:-1])


def read_tree(directory: Path) -> dict[str, str]:
    """Every file below `directory` (POSIX paths relative to it) with its text, except in skipped folders."""
    if not directory.is_dir():
        return {}
    return {
        path.relative_to(directory).as_posix(): path.read_bytes().decode("utf-8", "replace")
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not skipped(path.relative_to(directory))
    }


def read_stderr(case: Path) -> str:
    path = case / STDERR
    return path.read_bytes().decode("utf-8") if path.is_file() else ""


def spec_tool_names(case: Path) -> list[str]:
    """The tools a case's server must list, read from the spec itself (§2.7): its tools in spec order, then
    `<workflow>.start` and `<workflow>.status` per workflow, and `<workflow>.resolve` for a workflow with a tool
    that refuses to run again in doubt (`in_doubt = "refuse"`, the default of a mutation that fires a transition).
    Under `[server] tool_names = "snake"` (the default), as the model sees them: every run of other characters than
    `[A-Za-z0-9_-]` becomes `_` (`invoice.get` → `invoice_get`, `invoice_start`)."""
    spec = tomllib.loads((case / SPEC).read_text(encoding="utf-8"))
    tools = spec.get("tools", {})
    workflows = list(spec.get("workflows", {}))
    refusing = set()
    for tool in tools.values():
        bind = tool.get("bind_state")
        if bind and bind.get("transition"):
            policy = bind.get("in_doubt", "refuse" if tool.get("kind") == "mutation" else "retry")
            if policy == "refuse":
                refusing.add(bind.get("workflow", workflows[0] if len(workflows) == 1 else None))
    names = list(tools)
    for workflow in workflows:
        names += [f"{workflow}.start", f"{workflow}.status"]
        names += [f"{workflow}.resolve"] if workflow in refusing else []
    return [wire_name(spec, n) for n in names]


def grouped_tool_names(case: Path) -> list[str] | None:
    """With `[server] exposition = "grouped"` (docs/spec.md §4.3), the tools a case's server must list: one per
    group (the part of a tool name before its first "."; a workflow's generated tools are in the workflow's
    group), where its first action is, and the tools without "."; None for a flat spec."""
    spec = tomllib.loads((case / SPEC).read_text(encoding="utf-8"))
    if spec.get("server", {}).get("exposition") != "grouped":
        return None
    names = [*spec.get("tools", {}), *(f"{w}.start" for w in spec.get("workflows", {}))]
    return list(dict.fromkeys(wire_name(spec, name.split(".", 1)[0]) for name in names))


def wire_name(spec: dict[str, Any], name: str) -> str:
    """The name the model sees for tool `name` of a parsed spec (`[server] tool_names`, docs/spec.md §4)."""
    snake = spec.get("server", {}).get("tool_names", "snake") == "snake"  # "snake" is the default
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name) if snake else name


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def out_of_date(case: Path, outcome: Outcome) -> list[str]:
    """What differs between the case's files and the outcome (empty: up to date)."""
    found: list[str] = []
    want, have = outcome.files, read_tree(case / EXPECTED)
    found += [f"{EXPECTED}/{p}: changed" for p in sorted(want.keys() & have.keys()) if want[p] != have[p]]
    found += [f"{EXPECTED}/{p}: missing" for p in sorted(want.keys() - have.keys())]
    found += [f"{EXPECTED}/{p}: stale" for p in sorted(have.keys() - want.keys())]
    if read_stderr(case) != outcome.stderr or ((case / STDERR).exists() and not outcome.stderr):
        found.append(f"{STDERR}: changed")
    return found


def update(case: Path, outcome: Outcome) -> list[str]:
    """Rewrite `expected/` and `stderr.txt` from the outcome, removing stale files; returns what changed."""
    changes = out_of_date(case, outcome)
    expected = case / EXPECTED
    want = outcome.files
    for path in read_tree(expected).keys() - want.keys():
        (expected / path).unlink()
    for path, text in want.items():
        target = expected / path
        if not target.is_file() or target.read_bytes() != text.encode("utf-8"):
            _write(target, text)
    if expected.is_dir():
        for directory in sorted((d for d in expected.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            if directory.name == "__pycache__":
                shutil.rmtree(directory)
            elif directory.exists() and not any(directory.iterdir()):
                directory.rmdir()
        if not want and not any(expected.iterdir()):
            expected.rmdir()
    if outcome.stderr:
        if read_stderr(case) != outcome.stderr:
            _write(case / STDERR, outcome.stderr)
    else:
        (case / STDERR).unlink(missing_ok=True)
    return changes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cases", description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite expected/ and stderr.txt of every case")
    parser.add_argument("names", nargs="*", help="only these cases (folder names); default: all")
    args = parser.parse_args(argv)
    cases = case_dirs()
    if args.names:
        unknown = sorted(set(args.names) - {c.name for c in cases})
        if unknown:
            parser.error(f"no such case: {', '.join(unknown)}")
        cases = [c for c in cases if c.name in args.names]
    stale = 0
    for case in cases:
        if known_bug(case) is not None:
            print(f"{case.name}: KNOWN_BUG, left alone", file=sys.stderr)
            continue
        outcome = run_case(case)
        if outcome.generation is None and not is_invalid(case):
            print(f"{case.name}: the spec is invalid, but the case is not named {INVALID_PREFIX}*", file=sys.stderr)
        elif outcome.generation is not None and is_invalid(case):
            print(f"{case.name}: named {INVALID_PREFIX}*, but the spec is valid", file=sys.stderr)
        changes = update(case, outcome) if args.update else out_of_date(case, outcome)
        stale += bool(changes)
        for change in changes:
            print(f"{case.name}: {change}{' (rewritten)' if args.update else ''}", file=sys.stderr)
    verb = "rewritten" if args.update else "out of date"
    print(f"{len(cases)} case(s), {stale} {verb}", file=sys.stderr)
    return 0 if args.update or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
