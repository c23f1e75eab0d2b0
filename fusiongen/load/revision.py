"""A spec as it was at a git revision (`fusiongen diff --git REV SPEC`), copied into a folder to load from.

The spec and the XState files its workflows name are read with `git show REV:./<path>` from the spec's
own folder, so the revision's machines are used, not today's. They are written under `into` with the
same relative names, and the loader then reads that copy like any spec (with its folder rules: a machine
outside the spec's folder is refused there too). The specs it mounts (docs/spec.md §3.2) are copied with it,
as they were at the revision.
"""

from __future__ import annotations

import posixpath
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
    """Copy `spec` as of `revision`, with the machine files it names then, into `into`; return the copy's path.

    A folder spec is copied whole: every `*.toml` the folder held at `revision` (outside hidden folders, as
    the loader reads it), each with its machine files."""
    if spec.is_dir():
        copy = into / (spec.resolve().name or "spec")
        for name in _tomls_at(spec, revision):
            _copy_file(spec, revision, name, copy)
        return copy
    folder = spec.parent if str(spec.parent) else Path(".")
    _copy_file(folder, revision, spec.name, into)
    return into / spec.name


def _tomls_at(folder: Path, revision: str, under: str = ".") -> list[str]:
    """The `*.toml` files under `folder` (or its subfolder `under`) at `revision`, relative to `folder`; FG002
    if git cannot list them."""
    if revision.startswith("-"):
        raise SpecError([Diagnostic("FG002", f'"{revision}" is not a git revision', folder.as_posix())])
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-tree", "-r", "--name-only", revision, "--", under],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError([Diagnostic("FG002", f"cannot run git: {exc}", folder.as_posix())]) from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        message = (
            f"cannot list {folder.as_posix()} at git revision {revision}: {reason[-1] if reason else 'git failed'}"
        )
        raise SpecError([Diagnostic("FG002", message, folder.as_posix())])
    names = done.stdout.decode("utf-8", "replace").splitlines()
    return sorted(
        n for n in names if n.endswith(".toml") and not any(p.startswith(".") for p in PurePosixPath(n).parts[:-1])
    )


def _copy_file(folder: Path, revision: str, name: str, into: Path, *, mounts: bool = True) -> None:
    """`name` (relative to `folder`) at `revision` into `into`, with the machine files it names and (unless
    `mounts` is false: a mounted spec's own mounts are refused, not followed) the specs it mounts."""
    text = git_show(folder, revision, name)
    copy = into / name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(text)
    beside = PurePosixPath(name).parent
    for mounted in _mounted(text) if mounts else []:
        relative = PurePosixPath(posixpath.normpath(beside / mounted))
        if relative.is_absolute() or ".." in relative.parts or relative == PurePosixPath("."):
            continue  # the loader refuses it (outside the spec's folder) and says so
        names = _tomls_at(folder, revision, relative.as_posix())
        for found in names or [relative.as_posix()]:  # a folder's files, else the file itself
            try:
                _copy_file(folder, revision, found, into, mounts=False)
            except SpecError:
                continue  # not in that revision: the loader reports the missing spec where it is mounted
    for machine in _machines(text):
        relative = PurePosixPath(machine)
        if relative.is_absolute() or ".." in relative.parts:
            continue  # the loader refuses it (outside the spec's folder) and says so
        relative = beside / relative
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.write_bytes(git_show(folder, revision, relative.as_posix()))
        except SpecError:
            continue  # not in that revision: the loader reports the missing file where the spec names it


def _mounted(text: bytes) -> list[str]:
    """The spec files and folders a spec mounts; none if it does not parse (the loader reports that)."""
    mounts = _document(text).get("mounts")
    if not isinstance(mounts, list):
        return []
    return sorted({m["spec"] for m in mounts if isinstance(m, dict) and isinstance(m.get("spec"), str)})


def _document(text: bytes) -> dict[str, object]:
    try:
        return tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _machines(text: bytes) -> list[str]:
    """The machine files a spec's workflows name; none if it does not parse (the loader reports that)."""
    workflows = _document(text).get("workflows")
    if not isinstance(workflows, dict):
        return []
    return sorted(
        {w["machine"] for w in workflows.values() if isinstance(w, dict) and isinstance(w.get("machine"), str)}
    )
