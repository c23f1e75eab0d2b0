"""The traps a new user met in the edit-build-run loop (issue 25), each held shut: a scaffolded stub on a
mutation leaves nothing in doubt and `check` names it; a workflow done for good offers `W.start`; `check` and
`build` without `-o` in an `init` project use the project `init` built; `init` prints commands that run as
printed; `build` reports the handler signatures `check` refuses."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.build import importable
from tests.support.client import LEGACY, connect
from tests.support.processes import run

LOANS = """\
[server]
name = "library"

[workflows.loan]
initial = "available"
[workflows.loan.states]
available = { on = { CHECKOUT = "out" } }
out = { on = { RETURN = "returned" } }
returned = { type = "final" }

[tools."loan.checkout"]
kind = "mutation"
description = "Lend the book."
bind_state = { states = ["available"], transition = "CHECKOUT" }
[tools."loan.checkout".input]
isbn = "string"

[tools."loan.return"]
kind = "mutation"
description = "Take the book back."
bind_state = { states = ["out"], transition = "RETURN" }
"""

HANDLERS = """\
def loan_checkout(args):
    return "lent"


def loan_return(args):
    return "returned"
"""


def built(tmp_path: Path, handlers: str | None = None) -> Path:
    """The loan spec built into `tmp_path/out` (its handler module scaffolded unless given); the spec's folder."""
    (tmp_path / "library.toml").write_text(LOANS, encoding="utf-8")
    if handlers is not None:
        (tmp_path / "library_server_handlers.py").write_text(handlers, encoding="utf-8")
    result = run("build", "library.toml", "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    return tmp_path


async def call(client: Any, names: dict[str, str], tool: str, arguments: dict[str, Any]) -> Any:
    return await client.call_tool(names[tool], arguments)


def text(result: Any) -> str:
    return str(result.content[0].text)


def with_server(folder: Path, walk: Any) -> None:
    """Run `walk(client, TOOL_NAMES)` against the built server, in-process, handshake era (session state)."""
    with importable(folder / "out", folder, modules=("library_server", "library_server_handlers")):
        package = importlib.import_module("library_server")
        names = importlib.import_module("library_server.server").TOOL_NAMES

        async def main() -> None:
            async with connect(package.create_server(), LEGACY) as client:
                await walk(client, names)

        anyio.run(main)


def test_a_scaffolded_stub_on_a_refusing_mutation_leaves_nothing_in_doubt_and_check_names_it(tmp_path: Path) -> None:
    folder = built(tmp_path)
    scaffold = (folder / "library_server_handlers.py").read_text(encoding="utf-8")
    assert 'raise ToolError("NOT_IMPLEMENTED", "loan.checkout is not implemented yet: nothing was done.")' in scaffold

    async def walk(client: Any, names: dict[str, str]) -> None:
        for _ in range(2):  # called again: the same answer, never IN_DOUBT (nothing ran), no resolve demanded
            result = await call(client, names, "loan.checkout", {"isbn": "9780451524935"})
            assert result.is_error and 'code="NOT_IMPLEMENTED"' in text(result), text(result)
            assert "nothing was done" in text(result)
        status = (await call(client, names, "loan.status", {})).structured_content
        assert status["state"] == "available" and status["pending"] is None, status

    with_server(folder, walk)
    checked = run("check", "library.toml", "-o", "out", cwd=folder)
    assert checked.code == 0, checked.stderr  # a warning: the project is consistent, only unfinished
    stubs = re.findall(r"warning\[FG411\]: handler \"(\w+)\" of tool \"([\w.]+)\" is still a stub", checked.stderr)
    assert sorted(stubs) == [("loan_checkout", "loan.checkout"), ("loan_return", "loan.return")], checked.stderr
    # The stubs an earlier fusiongen scaffolded (NotImplementedError) are named too; an implemented one is not.
    (folder / "library_server_handlers.py").write_text(
        'def loan_checkout(args):\n    """Lend."""\n    raise NotImplementedError("loan.checkout")\n\n\n'
        'def loan_return(args):\n    return "returned"\n',
        encoding="utf-8",
    )
    checked = run("check", "library.toml", "-o", "out", cwd=folder)
    assert checked.code == 0, checked.stderr
    assert re.findall(r"FG411\]: handler \"(\w+)\".*raises (\w+)", checked.stderr) == [
        ("loan_checkout", "NotImplementedError")
    ], checked.stderr


def test_a_workflow_in_its_final_state_offers_start_and_a_new_one_walks_by_handle(tmp_path: Path) -> None:
    folder = built(tmp_path, HANDLERS)

    async def walk(client: Any, names: dict[str, str]) -> None:
        assert not (await call(client, names, "loan.checkout", {"isbn": "1"})).is_error
        assert not (await call(client, names, "loan.return", {})).is_error
        done = await call(client, names, "loan.checkout", {"isbn": "2"})  # the session's own loan is over
        start = names["loan.start"]
        assert done.is_error and f"<available_actions><action>{start}</action></available_actions>" in text(done)
        assert f"call {start} and pass the" in text(done)
        handle_key, handle = next(iter((await call(client, names, "loan.start", {})).structured_content.items()))
        assert not (await call(client, names, "loan.checkout", {"isbn": "2", handle_key: handle})).is_error
        status = (await call(client, names, "loan.status", {handle_key: handle})).structured_content
        assert status["state"] == "out", status

    with_server(folder, walk)


def test_check_and_build_without_out_use_the_project_init_built(tmp_path: Path) -> None:
    project = tmp_path / "notes"
    initialised = run("init", "notes", cwd=tmp_path)
    assert initialised.code == 0, initialised.stderr
    checked = run("check", "notes.toml", cwd=project)
    assert checked.code == 0 and "missing:" not in checked.stdout, checked.stdout + checked.stderr
    spec = project / "notes.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("A notebook", "A small notebook"), encoding="utf-8")
    drifted = run("check", "notes.toml", cwd=project)
    assert drifted.code == 1 and "missing:" not in drifted.stdout, drifted.stdout
    assert "run `fusiongen build notes.toml`" in drifted.stderr, drifted.stderr
    rebuilt = run("build", "notes.toml", cwd=project)  # what check suggested: it rebuilds the project in place
    assert rebuilt.code == 0, rebuilt.stderr
    assert not (project / "notes").exists()
    assert run("check", "notes.toml", cwd=project).code == 0


@pytest.mark.parametrize(("where", "prefix"), [(".", ""), ("lib", "cd lib && ")])
def test_init_prints_commands_that_run_as_printed(tmp_path: Path, where: str, prefix: str) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    result = run("init", where, cwd=folder if where == "." else tmp_path)
    assert result.code == 0, result.stderr
    assert "cd . " not in result.stderr
    assert f"run it:   {prefix}python -m lib_server " in result.stderr, result.stderr
    assert f"rebuild:  {prefix}fusiongen build lib.toml " in result.stderr, result.stderr


def test_build_reports_the_handler_signature_check_refuses(tmp_path: Path) -> None:
    folder = built(tmp_path, HANDLERS)
    bad = HANDLERS.replace("def loan_return(args):", "def loan_return(args, ctx, extra):")
    (folder / "library_server_handlers.py").write_text(bad, encoding="utf-8")
    built_again = run("build", "library.toml", "-o", "out", cwd=folder)
    checked = run("check", "library.toml", "-o", "out", cwd=folder)
    refused = 'error[FG401]: handler "loan_return" of tool "loan.return" requires 3 positional parameters'
    assert refused in checked.stderr and checked.code == 1, checked.stderr
    assert refused in built_again.stderr and built_again.code == 2, built_again.stderr
    assert "the server was written" in built_again.stderr
