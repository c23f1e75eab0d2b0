"""The script every agent client driver (tests/support/agent_*.py) follows, and the report each prints.

Imported by the drivers, which run in the agent clients' own virtualenvs (.venv-agents, .venv-agents-mcp1): it
uses the standard library only. tests/test_agent_clients.py writes the plan (wire names resolved from the
generated server's TOOL_NAMES) and reads the report.

A plan is `{"handle_key": K, "phases": [{"name": P, "calls": [[tool, arguments], ...], "start": tool?}]}`. A
phase is made call by call, as a model would make it: a call whose tool the client does not offer the model at
that moment is recorded as not offered and ends its phase (a model cannot call what it is not offered). A phase
with `start` first calls that tool (a workflow's `W.start`) and reads the handle out of what the model was
handed, as the model would, then passes it as K in every later call of the phase.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    phase: str
    tool: str
    arguments: dict[str, Any]
    offered: bool = True
    handed: str | None = None  # what the client hands the model (or returns to its program), as text
    error: bool | None = None  # whether the client marked it an error (None: it does not say)


@dataclass
class Script:
    """The plan, step by step: `next_call(offered)` gives the next call, `handed(text, error)` records its
    result. Drivers whose client has an agent loop call both from their scripted model; the others call them
    around each tool invocation."""

    plan: dict[str, Any]
    calls: list[Call] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)  # the tools offered at each step
    _queue: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    _handle: str | None = None

    def __post_init__(self) -> None:
        for phase in self.plan["phases"]:
            if phase.get("start"):
                self._queue.append((phase["name"], phase["start"], {"__start__": True}))
            self._queue.extend((phase["name"], tool, dict(arguments)) for tool, arguments in phase["calls"])

    def next_call(self, offered: list[str]) -> Call | None:
        """The next call to make, given the tools offered now; None when the script is done."""
        self.offered.append(list(offered))
        while self._queue:
            phase, tool, arguments = self._queue.pop(0)
            starting = arguments.pop("__start__", False)
            if starting:
                self._handle = None
            elif self._phase_has_start(phase):
                if self._handle is None:  # the start failed: nothing to walk with
                    self.calls.append(Call(phase, tool, arguments, offered=False))
                    self._drop_phase(phase)
                    continue
                arguments[self.plan["handle_key"]] = self._handle
            call = Call(phase, tool, arguments, offered=tool in offered)
            self.calls.append(call)
            if not call.offered:
                self._drop_phase(phase)
                continue
            return call
        return None

    def handed(self, text: str, error: bool | None = None) -> None:
        """What the client handed the model for the last call."""
        call = self.calls[-1]
        call.handed, call.error = text, error
        if self._phase_has_start(call.phase) and call.tool == self._start_of(call.phase):
            key = re.escape(self.plan["handle_key"])
            found = re.search(rf'\\?"{key}\\?":\s*\\?"([A-Za-z0-9_-]{{32}})', text)
            self._handle = found.group(1) if found else None

    def _phase(self, name: str) -> dict[str, Any]:
        return next(phase for phase in self.plan["phases"] if phase["name"] == name)

    def _phase_has_start(self, name: str) -> bool:
        return bool(self._phase(name).get("start"))

    def _start_of(self, name: str) -> str:
        return str(self._phase(name)["start"])

    def _drop_phase(self, name: str) -> None:
        self._queue = [item for item in self._queue if item[0] != name]

    def report(self, **extra: Any) -> str:
        calls = [call.__dict__ for call in self.calls]
        return json.dumps({"calls": calls, "offered": self.offered, **extra}, default=str)


def text_blocks(content: Any) -> str:
    """Text blocks (objects with .text, or dicts with "text") joined, in order."""
    parts = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        if text is not None:
            parts.append(text)
    return "\n".join(parts)
