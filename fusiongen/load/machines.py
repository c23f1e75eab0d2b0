"""Read the XState JSON files workflows name (`machine = "order.json"`), beside the spec.

Reading is all that happens here: what the machine means is lowering's business. A file that cannot
be read or parsed becomes a `MachineFile` carrying the reason, so lowering can report it where the
user will look (the JSON's line and column, or the spec's `machine` value).
"""

from __future__ import annotations

import json
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


def read_machine(path: Path, shown: str, machine: str) -> MachineFile:
    """The machine file at `path` (`machine` as the spec names it, for messages)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # unreadable, a NUL in the path, not UTF-8
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a readable UTF-8 file"
        return MachineFile(shown, None, problem=f'cannot read machine "{machine}": {reason}')
    try:
        return MachineFile(shown, text, json.loads(text))
    except json.JSONDecodeError as exc:
        return MachineFile(
            shown, text, problem=f"machine is not valid JSON: {exc.msg}", problem_at=Position(exc.lineno, exc.colno)
        )
    except RecursionError:
        return MachineFile(shown, text, problem=f'machine "{machine}" is nested too deeply')
