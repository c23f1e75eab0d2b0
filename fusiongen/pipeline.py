"""The whole pipeline: load → lower → render → format → parse-check, and the comparison `check` and tests share.

`generate` is pure apart from reading the spec (and running ruff's formatter on stdin/stdout);
`publish` (in `fusiongen.output`) is the only step that writes. Paths written into generated files
are relative to the output directory, so a build is reproducible wherever the checkout lives.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from fusiongen.diagnostics import Diagnostic, Position, Severity
from fusiongen.formatting import format_files
from fusiongen.handlers import check_handlers, handler_path
from fusiongen.ir import ServerIR
from fusiongen.loader import LoadedSpec, load_spec
from fusiongen.lower import lower
from fusiongen.render import headers, parse_check, render


@dataclass(frozen=True)
class Generation:
    loaded: LoadedSpec
    ir: ServerIR
    files: dict[str, str]
    headers: tuple[str, ...]  # the first line of every file this spec generates: marks which files it owns
    warnings: list[Diagnostic]


def display_path(path: Path) -> str:
    """How a path is shown to the user: relative to the working directory when it is below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def validate(spec_path: Path) -> tuple[LoadedSpec, ServerIR, list[Diagnostic]]:
    """Load and lower a spec: raises SpecError on errors, returns the warnings otherwise."""
    loaded = load_spec(spec_path, display_path(spec_path))
    ir, warnings = lower(loaded)
    return loaded, ir, warnings


def generate(spec_path: Path, out_dir: Path, *, syntax_check: bool = True) -> Generation:
    """Every file the spec generates into `out_dir`, formatted and (unless the caller will do it for the
    files it needs, as `check` does) parse-checked with libcst."""
    loaded, ir, warnings = validate(spec_path)
    spec_from_out = relative(spec_path, out_dir)
    files = render(
        ir,
        spec_from_out=spec_from_out,
        handlers_dir_from_package=relative(spec_path.parent, out_dir / ir.package),
    )
    files = format_files(files)
    if syntax_check:
        parse_check(files)
    return Generation(loaded, ir, files, headers(spec_from_out), warnings)


@dataclass
class Drift:
    """How the files on disk differ from what the spec generates now."""

    changed: dict[str, str] = field(default_factory=dict)  # path → unified diff
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.changed or self.missing or self.stale)

    def annotations(self, out_dir: Path, files: dict[str, str]) -> list[Diagnostic]:
        """The drift as diagnostics (file, line, message), for CI annotations."""
        found = []
        for path, diff in self.changed.items():
            line = next((int(h.split("+")[1].split(",")[0]) for h in diff.splitlines() if h.startswith("@@")), 1)
            found.append(
                Diagnostic(
                    "FG405",
                    "generated file is out of date; run fusiongen build",
                    display_path(out_dir / path),
                    Position(max(line, 1), 1),
                )
            )
        found += [
            Diagnostic("FG406", "generated file is missing; run fusiongen build", display_path(out_dir / p))
            for p in self.missing
        ]
        found += [
            Diagnostic("FG407", "stale generated file; run fusiongen build to remove it", display_path(out_dir / p))
            for p in self.stale
        ]
        return found

    def report(self) -> str:
        parts = [*self.changed.values()]
        parts += [f"missing: {p} (the spec generates it; run fusiongen build)\n" for p in self.missing]
        parts += [f"stale: {p} (generated earlier, no longer needed; run fusiongen build)\n" for p in self.stale]
        return "".join(parts)


def owned_files(out_dir: Path, header: tuple[str, ...]) -> list[str]:
    """Files under `out_dir` whose first line is one of `header`: generated from this spec earlier."""
    found: list[str] = []
    if not out_dir.is_dir():
        return found
    for root, dirs, names in os.walk(out_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules"))
        for name in sorted(names):
            path = Path(root) / name
            try:
                with path.open("rb") as handle:
                    first = handle.readline()
            except OSError:
                continue
            if first.decode("utf-8", "replace") in header:
                found.append(path.relative_to(out_dir).as_posix())
    return found


def compare(out_dir: Path, files: dict[str, str], header: tuple[str, ...]) -> Drift:
    drift = Drift()
    for path, text in sorted(files.items()):
        target = out_dir / path
        if not target.is_file():
            drift.missing.append(path)
            continue
        current = target.read_bytes().decode("utf-8", "replace")
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"{path} (on disk)",
                tofile=f"{path} (from spec)",
            )
            drift.changed[path] = "".join(diff)
    drift.stale = [p for p in owned_files(out_dir, header) if p not in files]
    return drift


def handler_diagnostics(generation: Generation) -> list[Diagnostic]:
    """What `check` reports about the handler module, statically."""
    loaded, ir = generation.loaded, generation.ir
    path = handler_path(loaded.path.parent, ir.handlers_module)
    shown = display_path(path)
    if not path.is_file():
        # Maybe installed elsewhere: it cannot be checked from here, which is worth saying but not failing.
        return [
            Diagnostic(
                "FG402",
                f'handler module "{ir.handlers_module}" not found at {shown}; not checked',
                loaded.display_path,
                loaded.key_at("server"),
                Severity.WARNING,
                hint="run `fusiongen build` to scaffold it beside the spec",
            )
        ]
    positions: dict[str, Position] = {t.name: loaded.key_at("tools", t.name) for t in ir.tools}
    source = path.read_bytes().decode("utf-8", "replace")
    return check_handlers(source, ir, shown, positions, loaded.display_path)
