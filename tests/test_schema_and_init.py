"""The spec language's JSON Schema is generated, committed and current; `fusiongen init` makes a project
that builds, runs its own tests and passes them as created."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
import tomli

from fusiongen.load.spec import json_schema
from tests.support.build import ROOT
from tests.support.processes import run_process, run_python

COMMITTED = ROOT / "docs" / "fusiongen.schema.json"


def test_committed_schema_is_current() -> None:
    expected = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    assert COMMITTED.read_text(encoding="utf-8") == expected, (
        "docs/fusiongen.schema.json is stale: run `fusiongen schema -o docs/fusiongen.schema.json`"
    )


@pytest.mark.parametrize("spec", sorted((ROOT / "specs").glob("*.toml")), ids=lambda p: p.name)
def test_every_example_spec_validates_against_the_schema(spec: Path) -> None:
    jsonschema.validate(tomli.loads(spec.read_text(encoding="utf-8")), json.loads(COMMITTED.read_text()))


def test_schema_rejects_an_unknown_key_as_editors_would() -> None:
    document = {"server": {"name": "x", "nmae": "typo"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, json_schema())


def test_schema_command_prints_the_committed_schema() -> None:
    result = run_process("schema", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == COMMITTED.read_text(encoding="utf-8")


@pytest.mark.timeout(300)
def test_init_project_builds_and_passes_its_own_tests(tmp_path: Path) -> None:
    project = tmp_path / "my-notes"
    created = run_process("init", project, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert (project / "my-notes.toml").is_file() and (project / "my_notes_server" / "server.py").is_file()
    tests = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, timeout=240)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "4 passed" in tests.stdout
    check = run_process("check", "my-notes.toml", "-o", ".", cwd=project)
    assert check.returncode == 0, check.stdout + check.stderr
    again = run_process("init", project, cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.timeout(300)
def test_an_init_project_installed_as_a_wheel_finds_its_handlers(tmp_path: Path) -> None:
    """`pip install .` in an init project, then the server, run from anywhere: its handler module ships in the wheel
    (the generated README says `pip install .` then `<name>-server`)."""
    project = tmp_path / "notes"
    assert run_process("init", project, cwd=tmp_path).returncode == 0
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = ["-m", "pip", "--disable-pip-version-check", "-q"]
    built = run_python([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, project], timeout=240)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = wheels.glob("notes_server-*.whl")
    installed = run_python([*pip, "install", "--no-deps", "--target", site, wheel], timeout=240)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (site / "notes_server_handlers.py").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import anyio\n"
        "from mcp import Client\n"
        "from notes_server import create_server\n"
        "async def main():\n"
        "    async with Client(create_server(), cache=None) as client:\n"
        "        print(sorted(t.name for t in (await client.list_tools()).tools))\n"
        "anyio.run(main)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = run_python(["-c", code], cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr  # not "the handler module ... is not importable"
    assert "notes_list" in done.stdout
