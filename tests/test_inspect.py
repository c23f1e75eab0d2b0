"""`fusiongen inspect`: the MCP Inspector's CLI against a built server, one call per run, walking a workflow by
its handle over stdio (each call a new server process, the state kept in SQLite) and over streamable HTTP, with
typed arguments (`--tool-args-json`: an ISBN stays a string) and every tool listed (the 2026-07-28 era)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.build import importable
from tests.support.processes import cli_env, http_server, run_process, server_env
from tests.test_official_tooling import node_env, tooling

SPEC = """\
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
isbn = { type = "string", pattern = '^\\d{13}$' }

[tools."loan.return"]
kind = "mutation"
description = "Take the book back."
bind_state = { states = ["out"], transition = "RETURN" }
"""

HANDLERS = """\
def loan_checkout(args):
    return f"lent {args.isbn}"


def loan_return(args):
    return "returned"
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inspect")
    (folder / "library.toml").write_text(SPEC, encoding="utf-8")
    (folder / "library_server_handlers.py").write_text(HANDLERS, encoding="utf-8")
    built = run_process("build", "library.toml", "-o", "out", cwd=folder)
    assert built.code == 0, built.stderr
    return folder


def wire_names(project: Path) -> dict[str, str]:
    with importable(project / "out", modules=("library_server",)):
        return dict(importlib.import_module("library_server.server").TOOL_NAMES)


def inspect(project: Path, *args: str, url: str | None = None) -> dict[str, Any]:
    """One `fusiongen inspect` run with the pinned Inspector (FUSIONGEN_INSPECTOR); the JSON it printed."""
    tools = tooling()
    env = {**cli_env(), **node_env(project), "FUSIONGEN_INSPECTOR": f"{tools.node} {tools.inspector}"}
    where = ("--url", url) if url is not None else ()
    done = run_process(
        "inspect", "library.toml", "-o", "out", *where, "--", "--format", "json", *args, cwd=project, env=env
    )
    assert done.code == 0, done.stdout + done.stderr
    output = json.loads(done.stdout)
    assert "result" in output, output
    return dict(output["result"])


def walk(project: Path, url: str | None = None) -> None:
    names = wire_names(project)

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = inspect(
            project,
            "--method",
            "tools/call",
            "--tool-name",
            names[tool],
            "--tool-args-json",
            json.dumps(arguments),
            url=url,
        )
        assert result["isError"] is False, result
        return result

    listed = {t["name"] for t in inspect(project, "--method", "tools/list", url=url)["tools"]}
    assert {names["loan.checkout"], names["loan.return"], names["loan.start"]} <= listed  # every tool, any state
    started = call("loan.start", {})["structuredContent"]
    key, handle = next(iter(started.items()))
    assert started["state"] == "available"
    lent = call("loan.checkout", {"isbn": "9780451524935", key: handle})  # a string: the pattern accepts it
    assert lent["content"][0]["text"] == "lent 9780451524935"
    assert call("loan.status", {key: handle})["structuredContent"]["state"] == "out"
    call("loan.return", {key: handle})
    done = call("loan.status", {key: handle})["structuredContent"]
    assert done["state"] == "returned" and done["final"] is True


@pytest.mark.timeout(300)
def test_inspect_walks_a_workflow_by_handle_over_stdio(project: Path) -> None:
    walk(project)
    assert (project / "out" / ".inspector-state.db").is_file()  # where the handles outlived each process


@pytest.mark.timeout(300)
def test_inspect_walks_a_workflow_by_handle_over_http(project: Path) -> None:
    with http_server(project / "out", package="library_server", env=server_env(project / "out")) as url:
        walk(project, url)


def test_inspect_says_to_build_first(tmp_path: Path) -> None:
    (tmp_path / "library.toml").write_text(SPEC, encoding="utf-8")
    done = run_process("inspect", "library.toml", cwd=tmp_path)
    assert done.code == 2 and "error[FG412]" in done.stderr and "fusiongen build library.toml" in done.stderr
