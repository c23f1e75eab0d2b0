"""Read the XState JSON files workflows name (`machine = "order.json"`), beside the spec.

Reading is all that happens here: what the machine means is lowering's business. A file that cannot
be read or parsed becomes a `MachineFile` carrying the reason, so lowering can report it where the
user will look (the JSON's line and column, or the spec's `machine` value).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusiongen.diagnostics import Position


@dataclass(frozen=True)
class MachineFile:
    file: str  # the path shown in diagnostics
    text: str | None  # None when the file could not be read
    document: Any = None  # the parsed JSON, when it parsed
    problem: str | None = None  # why there is no document
    problem_at: Position | None = None  # where in the JSON text; None: about the file as a whole


# An XState export of a flat machine is a few kilobytes; anything this large is not one.
MAX_MACHINE_BYTES = 1024 * 1024


def read_machine(path: Path, shown: str, machine: str, project: Path | None = None) -> MachineFile:
    """The machine file at `path` (`machine` as the spec names it, for messages).

    Only a regular file inside `project` (the spec's folder and below, symlinks resolved) of at most
    `MAX_MACHINE_BYTES` is read. The spec names the file, and what it holds becomes generated code
    (state and event names), so a spec built from someone else's checkout must not read whatever the
    machine can (`/etc/...`, a home folder, `../../secrets.json`), nor hang or exhaust memory on a device
    or FIFO (`/dev/zero`, `/dev/stdin`). The spec's folder is the unit `build` already trusts: the
    handler module is looked up there too."""

    def problem(reason: str) -> MachineFile:
        return MachineFile(shown, None, problem=f'cannot read machine "{machine}": {reason}')

    try:
        resolved = path.resolve()  # every link that exists is followed: where it points is what counts
        if project is not None and not resolved.is_relative_to(project.resolve()):
            return problem("it is outside the spec's folder (machine files must be in it or below it)")
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then decides on the file opened.
        fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return problem("not a regular file")
            if info.st_size > MAX_MACHINE_BYTES:
                return problem(f"larger than {MAX_MACHINE_BYTES // 1024} KiB")
            data = os.read(fd, MAX_MACHINE_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_MACHINE_BYTES:  # it grew after fstat
            return problem(f"larger than {MAX_MACHINE_BYTES // 1024} KiB")
        text = data.decode("utf-8")
    except (OSError, ValueError, RuntimeError) as exc:  # missing, unreadable, a NUL in the path, not UTF-8, a loop
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a readable UTF-8 file"
        return problem(reason)
    try:
        return MachineFile(shown, text, json.loads(text))
    except json.JSONDecodeError as exc:
        return MachineFile(
            shown, text, problem=f"machine is not valid JSON: {exc.msg}", problem_at=Position(exc.lineno, exc.colno)
        )
    except RecursionError:
        return MachineFile(shown, text, problem=f'machine "{machine}" is nested too deeply')
