"""Folder specs (docs/spec.md §3.1): every *.toml under a folder read as one spec.

specs/billing_split/ is specs/billing.toml cut into files (server, models, presenters, tools, the invoice
workflow beside its bound tools, resources and prompts): it must build the same server, serve the invoice
workflow in both protocol eras over a real client, and every command must take the folder. Mistakes name
the file they are in; what two files define names both.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import mcp_types as types
import pytest
import tomli
from mcp import Client

from fusiongen.api import explain, exposure_text, generate, validate
from fusiongen.diagnostics import SpecError
from fusiongen.load.folder import spec_files
from fusiongen.load.spec import json_schema
from tests.support.build import SPECS, GeneratedServer, build
from tests.support.processes import run

FOLDER = SPECS / "billing_split"
LEGACY, MODERN = "legacy", "2026-07-28"


def _copy(tmp_path: Path) -> Path:
    """The example folder copied (its handler module as a file, not the link)."""
    target = tmp_path / "billing_split"
    shutil.copytree(FOLDER, target, symlinks=False)
    return target


def _diagnostics(spec: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        validate(spec)
    return [d.format() for d in caught.value.diagnostics]


def test_files_are_every_toml_below_the_folder_sorted_by_path() -> None:
    names = [p.relative_to(FOLDER).as_posix() for p in spec_files(FOLDER)]
    assert names == [
        "models.toml",
        "presenters.toml",
        "server.toml",
        "surface.toml",
        "tools.toml",
        "workflows/invoice.toml",
    ]


def test_the_folder_builds_the_server_the_file_does(tmp_path: Path) -> None:
    folder = generate(FOLDER, tmp_path / "a")
    single = generate(SPECS / "billing.toml", tmp_path / "b")
    assert exposure_text(explain(FOLDER)[1], "json") == exposure_text(explain(SPECS / "billing.toml")[1], "json")

    def body(generation: object, package: str) -> str:
        files = generation.files  # type: ignore[attr-defined]
        lines = files[f"{package}/server.py"].splitlines()[1:]  # below the header, which names the source
        return "\n".join(line for line in lines if not line.startswith("HANDLERS_DIR"))  # relative to each

    assert body(folder, "billing_server") == body(single, "billing_server")
    assert folder.files.keys() == single.files.keys()
    header = folder.files["billing_server/server.py"].splitlines()[0]
    assert header.endswith("specs/billing_split/. DO NOT EDIT.")  # the header names the folder


async def _walk(server: GeneratedServer, mode: str) -> None:
    names = server.module("server").TOOL_NAMES
    created = server.create_server(server.handlers)
    async with Client(created, mode=mode, cache=None) as client:
        started = await client.call_tool(names["invoice.start"], {})
        handle = started.structured_content["workflow_id"]
        for tool, after in [
            ("invoice.submit", "review"),
            ("invoice.approve", "approved"),
            ("invoice.discharge", "discharged"),
        ]:
            result = await client.call_tool(names[tool], {"invoice_id": "inv-1", "workflow_id": handle})
            assert not result.is_error, result.content
            status = await client.call_tool(names["invoice.status"], {"workflow_id": handle})
            assert status.structured_content["state"] == after
        again = await client.call_tool(names["invoice.submit"], {"invoice_id": "inv-1", "workflow_id": handle})
        assert again.is_error
        block = again.content[0]
        assert isinstance(block, types.TextContent) and 'code="FORBIDDEN"' in block.text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_a_folder_spec_walks_the_invoice_workflow(tmp_path: Path, mode: str) -> None:
    generation = build(FOLDER, tmp_path / "out")
    with GeneratedServer(generation, tmp_path / "out") as server:
        await _walk(server, mode)


def test_a_mistake_names_its_file_line_and_column(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    tools = folder / "tools.toml"
    tools.write_text(tools.read_text(encoding="utf-8").replace('kind = "query"', 'kind = "qurey"', 1), encoding="utf-8")
    workflow = folder / "workflows" / "invoice.toml"
    text = workflow.read_text(encoding="utf-8").replace('handler = "approve_invoice"', 'handlr = "approve_invoice"')
    workflow.write_text(text, encoding="utf-8")
    found = _diagnostics(folder)
    line = next(i for i, t in enumerate(tools.read_text(encoding="utf-8").splitlines(), 1) if "qurey" in t)
    assert any(d.startswith(f"{folder.as_posix()}/tools.toml:{line}:8: error[FG101]") for d in found), found
    assert any(f"{folder.as_posix()}/workflows/invoice.toml:" in d and "error[FG100]" in d for d in found), found


def test_a_lowering_mistake_names_its_file(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    surface = folder / "surface.toml"
    surface.write_text(surface.read_text(encoding="utf-8").replace('presenter = "Invoice"', 'presenter = "Invoce"'))
    found = _diagnostics(folder)
    assert any(d.startswith(f"{folder.as_posix()}/surface.toml:") and "Invoce" in d for d in found), found


def test_an_entity_in_two_files_names_both(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "zz.toml").write_text('\n[tools."invoice.get"]\nkind = "query"\n\n[auth]\nroles_claim = "r"\n')
    found = _diagnostics(folder)
    tools_line = next(
        i for i, t in enumerate((folder / "tools.toml").read_text().splitlines(), 1) if t == '[tools."invoice.get"]'
    )
    assert f'{folder.as_posix()}/zz.toml:2:8: error[FG105]: tool "invoice.get" is defined in two files: ' in found[0]
    assert f"{folder.as_posix()}/tools.toml:{tools_line}:" in found[0]
    assert any("error[FG105]: [auth] is defined in two files: " in d and "server.toml" in d for d in found), found


def test_a_folder_without_server_or_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert any("error[FG106]: the folder holds no *.toml files" in d for d in _diagnostics(empty))
    folder = _copy(tmp_path)
    (folder / "server.toml").unlink()
    assert any("error[FG106]: no file of the folder holds [server]" in d for d in _diagnostics(folder))


def test_syntax_errors_of_every_file_are_reported_together(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "a.toml").write_text("x = = 1\n")
    (folder / "z.toml").write_text("[models.A\n")
    found = _diagnostics(folder)
    assert [d.split(":")[0] for d in found] == [f"{folder.as_posix()}/a.toml", f"{folder.as_posix()}/z.toml"]


def test_hidden_folders_and_generated_files_are_not_read(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / ".venv").mkdir()
    (folder / ".venv" / "x.toml").write_text("not toml")
    build(folder, folder / "out")  # a server built into the folder: its pyproject.toml is generated
    assert (folder / "out" / "pyproject.toml").is_file()
    validate(folder)


def test_machine_files_are_read_beside_the_file_that_names_them(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    workflow = folder / "workflows" / "invoice.toml"
    text = workflow.read_text()
    states = text[text.index("[workflows.invoice]") : text.index("[tools.")]
    machine = {
        "id": "invoice",
        "initial": "draft",
        "states": {
            "draft": {"on": {"SUBMIT": "review"}},
            "review": {"on": {"APPROVE": "approved", "REJECT": "draft"}},
            "approved": {"on": {"DISCHARGE": "discharged"}},
            "discharged": {"type": "final"},
        },
    }
    (folder / "workflows" / "invoice.json").write_text(json.dumps(machine))
    workflow.write_text(text.replace(states, '[workflows.invoice]\nmachine = "invoice.json"\n\n'))
    assert exposure_text(explain(folder)[1], "json") == exposure_text(explain(FOLDER)[1], "json")


def test_commands_take_a_folder(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    assert run("validate", folder, cwd=tmp_path).code == 0
    assert "invoice_discharge" in run("explain", folder, cwd=tmp_path).stdout
    built = run("build", folder, "--budget", cwd=tmp_path)
    assert built.code == 0, built.stderr
    assert "invoice_get" in built.stdout
    out = tmp_path / "billing_split-build"  # the default: beside the folder, not in it
    assert (out / "billing_server" / "server.py").is_file()
    assert run("check", folder, cwd=tmp_path).code == 0
    assert (folder / "billing_handlers.py").is_file()
    same = run("diff", FOLDER, folder, cwd=tmp_path)
    assert same.code == 0, same.stdout + same.stderr


def test_diff_git_reads_the_folder_at_the_revision(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, timeout=60)

    folder = _copy(tmp_path)
    git("init", "-q")
    git("add", "billing_split")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    presenters = folder / "presenters.toml"
    presenters.write_text(presenters.read_text().replace('redact_pii = ["email"]\n', "", 1))
    result = run("diff", "--git", "HEAD", "billing_split", cwd=tmp_path)
    assert result.code == 4, result.stdout + result.stderr
    assert "redaction-removed" in result.stdout
    (folder / "tools.toml").write_text("[tools.x\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "broken")
    presenters.write_text((FOLDER / "presenters.toml").read_text())
    (folder / "tools.toml").write_text((FOLDER / "tools.toml").read_text())
    broken = run("diff", "--git", "HEAD", "billing_split", cwd=tmp_path)
    assert broken.code == 2
    assert "billing_split@HEAD/tools.toml:1:" in broken.stderr  # names the revision and the file


def test_every_file_of_the_example_validates_against_the_part_schema() -> None:
    schema = json_schema(part=True)
    assert "server" not in schema.get("required", [])
    for path in spec_files(FOLDER):
        jsonschema.validate(tomli.loads(path.read_text(encoding="utf-8")), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"modles": {}}, schema)
    printed = run("schema", "--part", cwd=FOLDER)
    assert json.loads(printed.stdout) == schema
