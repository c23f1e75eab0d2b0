"""A spec as it was at a git revision (`fusiongen diff --git REV SPEC`), copied into a folder to load from.

The spec and the XState files its workflows name are read with `git show REV:./<path>` from the spec's
own folder, so the revision's machines are used, not today's. They are written under `into` with the
same relative names, and the loader then reads that copy like any spec (with its folder rules: a machine
outside the spec's folder is refused there too).
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path, PurePosixPath

from fusiongen.diagnostics import Diagnostic, SpecError


def git_show(folder: Path, revision: str, name: str) -> bytes:
    """`name` (relative to `folder`) as committed at `revision`; FG002 if git cannot produce it."""
    if revision.startswith("-"):
        raise SpecError([Diagnostic("FG002", f'"{revision}" is not a git revision', name)])
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "show", f"{revision}:./{name}"],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError([Diagnostic("FG002", f"cannot run git: {exc}", name)]) from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        message = f"cannot read {name} at git revision {revision}: {reason[-1] if reason else 'git failed'}"
        raise SpecError([Diagnostic("FG002", message, name)])
    return done.stdout


def spec_at_revision(spec: Path, revision: str, into: Path) -> Path:
    """Copy `spec` as of `revision`, with the machine files it names then, into `into`; return the copy's path."""
    folder = spec.parent if str(spec.parent) else Path(".")
    text = git_show(folder, revision, spec.name)
    copy = into / spec.name
    copy.write_bytes(text)
    for machine in _machines(text):
        relative = PurePosixPath(machine)
        if relative.is_absolute() or ".." in relative.parts:
            continue  # the loader refuses it (outside the spec's folder) and says so
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.write_bytes(git_show(folder, revision, machine))
        except SpecError:
            continue  # not in that revision: the loader reports the missing file where the spec names it
    return copy


def _machines(text: bytes) -> list[str]:
    """The machine files a spec's workflows name; none if it does not parse (the loader reports that)."""
    try:
        document = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    workflows = document.get("workflows")
    if not isinstance(workflows, dict):
        return []
    return sorted(
        {w["machine"] for w in workflows.values() if isinstance(w, dict) and isinstance(w.get("machine"), str)}
    )
