"""Input schemas in the form every client's converter accepts (docs/spec.md §9.2): self-contained (no `$ref`, no
`$defs`) and nullable as `anyOf: [T, {"type": "null"}]`, never a `type` array.

autogen's `mcp_server_tools` refuses a whole server over one `{"type": ["string", "null"]}`, and its
`McpWorkbench` drops `$defs`, leaving a dangling `$ref`. tests/test_agent_clients.py runs the clients' own
converters on the reference server and on a spec with every input form; here every served input schema of
golden/ and tests/cases is read, flat and grouped, so a form no converter was shown cannot creep back in.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from fusiongen.runtime._grouping import Grouping
from tests.support.build import ROOT, build, imported

SCHEMA_FILES = sorted(
    [*(ROOT / "golden").glob("*/*/schemas.py"), *(ROOT / "tests" / "cases").glob("*/expected/*/schemas.py")]
)


def unportable(schema: Any) -> list[str]:
    """Where `schema` uses a form some converter rejects: `$ref`, `$defs`, or a `type` array. Walked with a
    stack; a `properties` map's keys are field names, never keywords, so only its values are read."""
    found: list[str] = []
    stack: list[tuple[str, Any, bool]] = [("", schema, False)]
    while stack:
        where, node, names = stack.pop()
        if isinstance(node, list):
            stack += ((f"{where}[{i}]", item, False) for i, item in enumerate(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                if not names and key in ("$ref", "$defs"):
                    found.append(f"{where}/{key}")
                elif not names and key == "type" and isinstance(value, list):
                    found.append(f"{where}/type = {value}")
                stack.append((f"{where}/{key}", value, key == "properties" and not names))
    return found


def test_the_walk_finds_each_form() -> None:
    """The check can fail: each rejected form is found, at any depth, and a field named like a keyword is not."""
    assert unportable({"type": ["string", "null"]}) == ["/type = ['string', 'null']"]
    assert unportable({"properties": {"a": {"items": {"$ref": "#/$defs/A"}}}}) == ["/properties/a/items/$ref"]
    assert unportable({"anyOf": [{"type": "object"}], "$defs": {}}) == ["/$defs"]
    assert unportable({"properties": {"$ref": {"type": "string"}, "type": {"anyOf": [{"type": "null"}]}}}) == []


def test_there_are_servers_to_read() -> None:
    assert len(SCHEMA_FILES) >= 25, SCHEMA_FILES  # golden/ and every case that builds


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: str(p.relative_to(ROOT).parent.parent))
def test_every_input_schema_is_self_contained_and_nullable_as_anyof(path: Path) -> None:
    constants = runpy.run_path(str(path))
    inputs = {name: value for name, value in constants.items() if name.endswith("_INPUT")}
    assert inputs or "models-only" in str(path), f"{path} defines no input schema"
    problems = {name: found for name, schema in inputs.items() if (found := unportable(schema))}
    assert not problems, problems
    assert not [name for name in constants if name.endswith("_INPUT_DEFINITION")]


def test_the_grouped_union_is_portable_too(tmp_path: Path) -> None:
    """The grouped exposition folds the flat tools into one union per group (runtime/_grouping.py): the union
    the server lists is as portable as its branches."""
    build(ROOT / "tests" / "cases" / "grouped-exposition" / "spec.toml", tmp_path / "out")
    with imported(tmp_path / "out", "orders_server") as package:
        server = package.server
        flat = server.TOOLS
        folded = Grouping(server.GROUPS, [tool.name for tool in flat]).fold(flat)
    grouped = [tool for tool in folded if "anyOf" in tool.input_schema]
    assert grouped, [tool.name for tool in folded]
    assert not {tool.name: found for tool in folded if (found := unportable(tool.input_schema))}
