"""How an output directory differs from what a spec generates now: what `fusiongen check` reports.

Reads only. A file belongs to a spec when its first line is one of that spec's headers, so files the
spec no longer generates are found (stale) and files it never generated are never touched.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fusiongen.diagnostics import Diagnostic, Position, display_path


@dataclass
class Drift:
    """How the files on disk differ from what the spec generates now."""

    changed: dict[str, str] = field(default_factory=dict)  # path → unified diff
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.changed or self.missing or self.stale)

    def annotations(self, out_dir: Path) -> list[Diagnostic]:
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


def compare(out_dir: Path, files: Mapping[str, str], header: tuple[str, ...]) -> Drift:
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
