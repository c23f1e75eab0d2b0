"""Workflow model checks (FG178–FG189) beyond what the case corpus pins: positions in XState files, no verdict
built on a binding that failed, and what the shipped specs get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusiongen.api import validate
from fusiongen.diagnostics import SpecError
from tests.support.build import SPECS

HEADER = '[server]\nname = "m"\n\n'


def _codes(spec: Path) -> list[tuple[str, int]]:
    try:
        _, _, warnings = validate(spec)
    except SpecError as exc:
        return [(d.code, d.position.line) for d in exc.diagnostics]
    return [(d.code, d.position.line) for d in warnings]


def test_deadlock_in_an_xstate_machine_points_into_the_json(tmp_path: Path) -> None:
    machine = {
        "id": "m",
        "initial": "a",
        "states": {"a": {"on": {"GO": "b"}}, "b": {"on": {"END": "c"}}, "c": {"type": "final"}},
    }
    (tmp_path / "m.json").write_text(json.dumps(machine, indent=2), encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        HEADER
        + '[workflows.w]\nmachine = "m.json"\n\n[tools.go]\nbind_state = { states = ["a"], transition = "GO" }\n',
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as raised:
        validate(spec)
    deadlocks = [d for d in raised.value.diagnostics if d.code == "FG178"]
    assert len(deadlocks) == 1
    assert deadlocks[0].file.endswith("m.json")
    lines = (tmp_path / "m.json").read_text(encoding="utf-8").splitlines()
    assert lines[deadlocks[0].position.line - 1].strip().startswith('"b"')


def test_a_binding_that_failed_builds_no_verdict(tmp_path: Path) -> None:
    """The tool meant to leave "b" names a state that does not exist: FG170, and no deadlock built on the guess."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        HEADER + '[workflows.w]\ninitial = "a"\nstates = { a = { on = { GO = "b" } }, b = { on = { END = "c" } }, '
        'c = { type = "final" } }\n\n[tools.go]\nbind_state = { states = ["a"], transition = "GO" }\n'
        '[tools.end]\nbind_state = { states = ["bb"], transition = "END" }\n',
        encoding="utf-8",
    )
    codes = {code for code, _ in _codes(spec)}
    assert "FG170" in codes
    assert not codes & {"FG178", "FG179"}


def test_a_workflow_without_final_states_may_loop(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        HEADER + '[workflows.w]\ninitial = "lit"\n'
        'states = { lit = { on = { FLIP = "dark" } }, dark = { on = { FLIP = "lit" } } }\n\n'
        '[tools.flip]\nbind_state = { states = ["lit", "dark"], transition = "FLIP" }\n',
        encoding="utf-8",
    )
    assert _codes(spec) == []


def test_a_suggestion_allowed_after_the_transition_is_fine(tmp_path: Path) -> None:
    """ticket.begin moves to "working"; suggesting ticket.pause (bound to "working") is what the gate allows."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        HEADER + '[models.T.fields]\nid = "string"\n\n[presenters.T]\nmodel = "T"\n'
        '[[presenters.T.suggest]]\ntool = "ticket.pause"\nreason = "pause"\n\n'
        '[workflows.w]\ninitial = "open"\nstates = { open = { on = { START = "working" } }, '
        'working = { on = { STOP = "done" } }, done = { type = "final" } }\n\n'
        '[tools."ticket.begin"]\nreturns = "T"\nbind_state = { states = ["open"], transition = "START" }\n'
        '[tools."ticket.pause"]\nbind_state = { states = ["working"], transition = "STOP" }\n',
        encoding="utf-8",
    )
    assert _codes(spec) == []


@pytest.mark.parametrize("name", ["billing", "approval"])
def test_shipped_specs_have_no_deadlock_and_always_finish(name: str) -> None:
    """Both examples bind compact_description to a tool outside the initial state: FG189 says it never shows."""
    codes = [code for code, _ in _codes(SPECS / f"{name}.toml")]
    assert not set(codes) & {"FG178", "FG179", "FG188"}
    assert codes.count("FG189") == 1
