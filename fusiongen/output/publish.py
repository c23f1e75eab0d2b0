"""Writing: the only impure step. Stage everything, then publish file by file with atomic renames.

Every file is rendered, checked and written to a staging folder before anything in OUT changes, so
a failed build writes nothing. Publishing then replaces each file with an atomic rename: a reader
never sees a half-written file, though a crash during those renames can leave some files new and
some old (the next build or `check` shows it). Files this spec generated earlier and no longer
needs are removed; nothing else in OUT is touched. Unchanged files are not rewritten, so their
timestamps stay and tools watching them stay quiet.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fusiongen.diagnostics import Diagnostic, Position, SpecError, display_path
from fusiongen.output.drift import owned_files


@dataclass(frozen=True)
class Bundle:
    """What one spec generates, as the writer needs it: the files, the first lines that mark a file as
    this spec's, and where a diagnostic about the output as a whole points (the spec's [server])."""

    files: Mapping[str, str]
    headers: tuple[str, ...]
    spec_file: str
    spec_position: Position


@dataclass
class Published:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def foreign_files(bundle: Bundle, out_dir: Path) -> list[Diagnostic]:
    """Files in OUT that the build would overwrite but that this spec did not generate: never touched."""
    found = []
    for path in sorted(bundle.files):
        target = out_dir / path
        if not target.exists():
            continue
        with target.open("rb") as handle:
            first = handle.readline().decode("utf-8", "replace")
        if first not in bundle.headers:
            found.append(
                Diagnostic(
                    "FG404",
                    f"{display_path(target)} exists and was not generated from this spec; it is left alone",
                    bundle.spec_file,
                    bundle.spec_position,
                    hint="move it, or build into another directory with -o",
                )
            )
    return found


def linked_folders(bundle: Bundle, out_dir: Path) -> list[Diagnostic]:
    """Folders inside OUT, on the way to a generated file, that are symbolic links: never written through.

    A symlinked *file* is replaced by the rename that publishes it (the file it points to is never
    written, and FG404 guards one that fusiongen did not generate). A folder has no header to say whose
    it is, and replacing the link would drop from OUT whatever the linked folder holds; writing through it
    would write outside OUT. So the build stops and says so."""
    found: dict[Path, Diagnostic] = {}
    for path in sorted(bundle.files):
        folder = out_dir
        for part in Path(path).parts[:-1]:
            folder = folder / part
            if folder in found or not folder.is_symlink():
                continue
            shown = f"{display_path(out_dir)}/{folder.relative_to(out_dir).as_posix()}"  # the link, not its target
            found[folder] = Diagnostic(
                "FG409",
                f"{shown} is a symbolic link; fusiongen does not write through it",
                bundle.spec_file,
                bundle.spec_position,
                hint="replace the link with a real folder, or build into another directory with -o",
            )
    return list(found.values())


def publish_bundle(bundle: Bundle, out_dir: Path) -> Published:
    """Write the generated files; raise SpecError (writing nothing) if that would overwrite a foreign file."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(
            [
                Diagnostic(
                    "FG409",
                    f"output directory {display_path(out_dir)} is a file",
                    bundle.spec_file,
                    bundle.spec_position,
                    hint="pass another -o",
                )
            ]
        )
    linked = linked_folders(bundle, out_dir)
    if linked:
        raise SpecError(linked)
    foreign = foreign_files(bundle, out_dir)
    if foreign:
        raise SpecError(foreign)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = Published()
    stale = [p for p in owned_files(out_dir, bundle.headers) if p not in bundle.files]
    staging = Path(tempfile.mkdtemp(prefix=".fusiongen-staging-", dir=out_dir))
    try:
        pending: list[tuple[Path, Path, str]] = []
        for path, text in sorted(bundle.files.items()):
            target = out_dir / path
            if target.is_file() and target.read_bytes() == text.encode("utf-8"):
                result.unchanged.append(path)
                continue
            staged = staging / path
            staged.parent.mkdir(parents=True, exist_ok=True)
            with staged.open("w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            pending.append((staged, target, path))
        for staged, target, path in pending:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, target)
            result.written.append(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for path in stale:
        (out_dir / path).unlink(missing_ok=True)
        result.removed.append(path)
        _remove_empty_parents((out_dir / path).parent, out_dir)
    return result


def _remove_empty_parents(directory: Path, stop: Path) -> None:
    """Remove directories that removing stale files left empty (a bytecode cache does not count)."""
    while directory != stop and directory.is_dir():
        entries = [e for e in directory.iterdir() if e.name != "__pycache__"]
        if entries:
            return
        shutil.rmtree(directory)
        directory = directory.parent


def write_user_file(path: Path, text: str) -> None:
    """Write a user-owned file (the handler module) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".fusiongen-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        # mkstemp makes the file private; a source file gets the usual permissions (or keeps its own).
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
