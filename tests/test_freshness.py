"""Freshness (docs/spec.md §6.9): `invalidates` and `immutable`, checked at build and told to the agent.

A successful mutation's result names, in the wire names the client calls, the tools whose earlier results it made
stale: in an envelope as `stale` and as its last rule (in `<domain_rules>` too), in a text result after its text.
A volatile query's description names what changes it; an immutable one says it can be reused. Names and globs
that match no tool are FG200; `invalidates` on a query, `immutable` off one, an immutable tool named in
`invalidates` are FG201. Through real clients: tests/test_client_matrix.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types

from fusiongen.api import validate
from fusiongen.diagnostics import SpecError
from tests.support.build import built_server, write_spec
from tests.support.client import MODES, connect

SPEC = """
[server]
name = "notes"
version = "0.1.0"
tool_names = "{naming}"

[models.Note.fields]
id = "string"
text = "string"

[tools."note.get"]
kind = "query"
description = "Read a note."
returns = "Note"
handler = "get_note"
[tools."note.get".input]
id = "string"

[tools."note.list"]
kind = "query"
description = "List notes."
returns = "Note[]"
handler = "list_notes"

[tools."note.edit"]
kind = "mutation"
description = "Edit a note."
returns = "Note"
handler = "edit_note"
invalidates = ["note.*"]
[tools."note.edit".input]
id = "string"
text = "string"

[tools."note.wipe"]
kind = "mutation"
description = "Wipe every note."
returns = "text"
handler = "wipe_notes"
invalidates = ["note.list", "note.get"]

[tools."unit.list"]
kind = "query"
description = "The units a note may use."
returns = "text"
handler = "list_units"
immutable = true
"""

HANDLERS = """
NOTES = {"n-1": {"id": "n-1", "text": "hello"}}


def get_note(args):
    return NOTES[args.id]


def list_notes(args):
    return list(NOTES.values())


def edit_note(args):
    NOTES[args.id] = {"id": args.id, "text": args.text}
    return NOTES[args.id]


def wipe_notes(args):
    NOTES.clear()
    return "wiped"


def list_units(args):
    return "cm, in"
"""


def problems(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    spec = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as raised:
        validate(spec)
    return [(d.code, f"{d.message} ({d.hint})") for d in raised.value.diagnostics]


def test_names_and_globs_resolve_to_tools_and_descriptions_say_what_is_volatile(tmp_path: Path) -> None:
    _, ir, _ = validate(write_spec(tmp_path, SPEC.format(naming="snake")))
    tools = {t.name: t for t in ir.tools}
    assert tools["note.edit"].invalidates == ("note.get", "note.list")  # the glob, without note.edit itself
    assert tools["note.wipe"].invalidates == ("note.list", "note.get")
    assert tools["note.get"].stale_after == ("note_edit", "note_wipe")  # wire names: what the model calls
    assert tools["unit.list"].immutable and not tools["unit.list"].stale_after


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (('invalidates = ["note.*"]', 'invalidates = ["note.gett"]'), "FG200", 'did you mean "note.get"'),
        (('invalidates = ["note.*"]', 'invalidates = ["memo.*"]'), "FG200", 'invalidates "memo.*"'),
        (('handler = "list_notes"', 'handler = "list_notes"\ninvalidates = ["note.get"]'), "FG201", "is a query"),
        (('handler = "wipe_notes"', 'handler = "wipe_notes"\nimmutable = true'), "FG201", "can be immutable"),
        (('invalidates = ["note.*"]', 'invalidates = ["unit.list"]'), "FG201", "which is immutable"),
        (('invalidates = ["note.*"]', 'invalidates = ["note.wipe"]'), "FG201", "a mutation: only a query's"),
        (('version = "0.1.0"', 'version = "0.1.0"\nregistry_name = "notes"'), "FG202", "namespace/name"),
    ],
)
def test_freshness_mistakes_are_diagnostics(tmp_path: Path, change: tuple[str, str], code: str, words: str) -> None:
    text = SPEC.format(naming="dotted").replace(*change)
    found = problems(tmp_path, text)
    assert [c for c, _ in found] == [code], found
    assert words in found[0][1]


def test_a_glob_skips_immutable_tools(tmp_path: Path) -> None:
    text = SPEC.format(naming="dotted").replace('invalidates = ["note.*"]', 'invalidates = ["*.list"]')
    _, ir, _ = validate(write_spec(tmp_path, text))
    assert {t.name: t for t in ir.tools}["note.edit"].invalidates == ("note.list",)


def texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


@pytest.mark.anyio
@pytest.mark.parametrize("naming", ["dotted", "snake"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_mutation_result_names_the_stale_reads_in_wire_names(tmp_path: Path, naming: str, mode: str) -> None:
    with built_server(SPEC.format(naming=naming), tmp_path / "out", handlers=HANDLERS) as server:
        names: dict[str, str] = server.module("server").TOOL_NAMES
        async with connect(server.create_server(), mode) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert f"a successful {names['note.edit']}, {names['note.wipe']} changes" in (
                listed[names["note.get"]].description or ""
            )
            assert "Reference data" in (listed[names["unit.list"]].description or "")
            assert "stale" in listed[names["note.edit"]].output_schema["required"]  # type: ignore[index]
            edited = await client.call_tool(names["note.edit"], {"id": "n-1", "text": "bye"})
            stale = [names["note.get"], names["note.list"]]
            structured: Any = edited.structured_content
            assert structured["stale"] == stale
            assert structured["rules"][-1] == f"Stale now: results read earlier from {', '.join(stale)}; call them " + (
                "again before relying on them."
            )
            # In the first block, after the data: a client that hands the model only that block passes it on.
            assert texts(edited)[0].endswith(f"\n\n<domain_rules>\n- {structured['rules'][-1]}\n</domain_rules>")
            wiped = await client.call_tool(names["note.wipe"], {})
            (text,) = texts(wiped)  # a text result: the notice follows the handler's text in its one block
            assert text.startswith("wiped\n\nStale now: results read earlier from ")
            assert names["note.list"] in text and names["note.get"] in text
            failed = await client.call_tool(names["note.get"], {"id": "n-1"})  # gone: an error says nothing stale
            assert failed.is_error and "Stale now" not in texts(failed)[0]
            read = await client.call_tool(names["unit.list"], {})
            assert texts(read) == ["cm, in"]
