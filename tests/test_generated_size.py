"""What a generated server ships, measured: its size, and the copied runtime its entry points cannot reach.

Four servers: a one-tool spec (one model, one query tool; no presenter, workflow or auth), the same built for
stdio alone (`[server] transports = ["stdio"]`), specs/billing.toml and specs/approval.toml. The entry points
are what runs: `__main__.main` (the command line), `server.create_server` (hosts and tests), the public functions
of `testing` (the user's tests), and every module's import-time code.
`tests/support/callgraph.py` finds what they can reach, by name.

Every copied runtime module must be reachable (the registry copies a module only for the specs that need it), and
no copied definition may be unreachable: the build leaves out of each copy what its server cannot reach
(fusiongen/codegen/prune.py, which walks names with a different bias from the call graph here, so this is an
independent check on it). The line bounds are today's measure with a little headroom. What remains in the
one-tool server is reachable from `python -m`: the fast path, the stdio and HTTP transports and `--auth`, which
every default server keeps; built for stdio alone it has neither HTTP nor `--auth`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fusiongen.api import Generation
from fusiongen.names import RUNTIME_MODULES, runtime_source
from tests.support.build import SPECS, build
from tests.support.callgraph import entry_points, nameable, read_package, unreachable

ONE_TOOL = """
[server]
name = "lookup"

[models.Item]
[models.Item.fields]
id = "string"
title = "string"

[tools."item.get"]
kind = "query"
description = "One item by id."
returns = "Item"
[tools."item.get".input]
id = "string"
"""
HANDLERS = "def get_item(args):\n    return {'id': args.id, 'title': 'the item'}\n"
ONE_TOOL_STDIO = ONE_TOOL.replace('name = "lookup"\n', 'name = "lookup"\ntransports = ["stdio"]\n')

# spec -> the .py lines of the package at most. Measured when set: one-tool 4,515, billing 8,747, approval 6,901
# (before the build left unreachable definitions out: 5,241, 9,015 and 7,419), with 4% headroom for work in
# flight. On 2026-12-06, with the runtime split by concern (_values, _cli, _observability, _serving, _http: each
# module's header, docstring and imports cost lines): 4,698, 8,941 and 7,071. Later that day, with staleness
# bound by server.py only for the tools that have it, the http transport optional, _runtime split into _results,
# _presenting and the call path, and presenters that add nothing returning `plain_result`: one-tool 4,614 (built
# for stdio alone 3,529), billing 9,023, approval 7,097.
BOUNDS = {"one-tool": 4_650, "one-tool-stdio": 3_560, "billing": 9_100, "approval": 7_180}


def generated(name: str, tmp_path: Path) -> tuple[Generation, Path]:
    out = tmp_path / "out"
    if name.startswith("one-tool"):
        generation = build(ONE_TOOL_STDIO if name == "one-tool-stdio" else ONE_TOOL, out, handlers=HANDLERS)
    else:
        generation = build(SPECS / f"{name}.toml", out)
    return generation, out / generation.ir.package


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_size_and_unreachable_runtime(name: str, tmp_path: Path) -> None:
    generation, package_dir = generated(name, tmp_path)
    lines = sum(text.count("\n") for path, text in generation.files.items() if path.endswith(".py"))
    package = read_package(package_dir)
    roots = entry_points(package)
    copied = {p.stem for p in package_dir.glob("*.py")} & set(RUNTIME_MODULES)

    # Every copied module is imported by code that runs: none is shipped for nothing.
    assert sorted(m for m in copied if m not in nameable(package, roots) and m != "testing") == []
    # And no copied definition is one that nothing which runs can call (the build left them out).
    assert unreachable(package, roots, copied) == {}
    assert lines <= BOUNDS[name], f"{name}: {lines} lines of Python"


def test_the_call_graph_sees_what_it_must(tmp_path: Path) -> None:
    """The measure above would pass vacuously if the graph reached everything or nothing: on the one-tool
    server, the call path and the HTTP transport are reached and the exposure filter too, and a definition
    added to a copy that nothing calls is reported (as the whole runtime's were before the build pruned it)."""
    _, package_dir = generated("one-tool", tmp_path)
    package = read_package(package_dir)
    dead = unreachable(package, entry_points(package), set(RUNTIME_MODULES))
    assert ("_runtime", "run_tool") in package.definitions and ("_runtime", "run_tool") not in dead
    assert ("_http", "serve_http") not in dead
    assert ("_surface", "exposed_tools") in package.definitions and ("_surface", "exposed_tools") not in dead
    assert [key for key in package.definitions if key[0] == "_catalog"] == []  # no resources or prompts: not copied

    runtime = package_dir / "_runtime.py"
    runtime.write_text(runtime.read_text(encoding="utf-8") + "\n\ndef never_called() -> None:\n    run_tool\n")
    package = read_package(package_dir)
    assert unreachable(package, entry_points(package), set(RUNTIME_MODULES)) == {("_runtime", "never_called"): 2}
    runtime.write_text(runtime_source("_runtime"), encoding="utf-8")  # the copy as it was before the build pruned
    presenting = package_dir / "_presenting.py"
    presenting.write_text(runtime_source("_presenting"), encoding="utf-8")  # likewise: this server presents plainly
    package = read_package(package_dir)
    assert {("_runtime", "by_role"), ("_runtime", "bind_handler")} <= set(
        unreachable(package, entry_points(package), {"_runtime"})
    )
    assert len(unreachable(package, entry_points(package), {"_presenting"})) > 10
