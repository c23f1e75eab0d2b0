"""The audit log fails closed: its line is written before the effect, and a log that cannot be written stops the
request before its handler runs, with a clean error.

Real servers (`python -m notes_server` on stdio and over HTTP with `--auth jwt`), a real full disk (`/dev/full`:
every write fails with ENOSPC) and real tokens whose subject holds a lone surrogate, U+2028 or NEL. The
`note.add` handler appends to a file and reports whether the begin line of its own call was already in the
audit log while it ran.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.build import build
from tests.support.client import MODERN, connect, stdio_params
from tests.support.processes import http_server, server_env
from tests.test_auth_http import Issuer, bearer_client, issuer, jwt_options  # noqa: F401

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

SPEC = """
[server]
name = "notes"
version = "1.0.0"

[models.Note.fields]
id = "string"
text = "string"

[tools."note.add"]
kind = "mutation"
description = "Add a note."
[tools."note.add".input]
text = "string"

[resources.note]
uri = "note://{id}"
presenter = "Note"
"""

HANDLERS = """
import json
import os
from typing import Any


def note_add(args: Any) -> Any:
    with open(os.environ["NOTES_FILE"], "a", encoding="utf-8") as notes:
        notes.write(args.text + "\\n")
    audit = os.environ.get("AUDIT_FILE")
    if audit is None or not os.path.isfile(audit):
        return "added"
    with open(audit, encoding="utf-8") as log:
        lines = [json.loads(line) for line in log.read().splitlines()]
    begun = [line for line in lines if line["phase"] == "begin" and line["name"] == "note.add"]
    ended = [line for line in lines if line["phase"] == "end" and line["name"] == "note.add"]
    return f"added; begin lines {len(begun)}, end lines {len(ended)}"


def read_note(args: Any) -> Any:
    return {"id": args.id, "text": "a note"}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("notes") / "out"
    build(SPEC, out, handlers=HANDLERS)
    return out


def note_tool(names: set[str]) -> str:
    return "note.add" if "note.add" in names else "note_add"


async def test_a_full_disk_stops_the_call_before_its_handler(built: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    env = server_env(built, NOTES_FILE=str(notes))
    params = stdio_params(built, "--audit-log", "/dev/full", package="notes_server", env=env)
    async with connect(params, MODERN) as client:
        tool = note_tool({t.name for t in (await client.list_tools()).tools})
        result = await client.call_tool(tool, {"text": "should never be written"})
        with pytest.raises(MCPError) as read:
            await client.read_resource("note://n1")
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert 'code="AUDIT_UNAVAILABLE"' in text and "cannot write its audit log" in text, text
    assert not notes.exists()  # the handler never ran
    assert 'code="AUDIT_UNAVAILABLE"' in read.value.message and read.value.code == -32603
    for shown in (text, read.value.message):
        assert "Errno" not in shown and "No space" not in shown  # nothing of the failure reaches the client


async def test_the_begin_line_is_written_before_the_effect(built: Path, tmp_path: Path) -> None:
    audit, notes = tmp_path / "audit.jsonl", tmp_path / "notes.txt"
    env = server_env(built, NOTES_FILE=str(notes), AUDIT_FILE=str(audit))
    params = stdio_params(built, "--audit-log", str(audit), package="notes_server", env=env)
    async with connect(params, MODERN) as client:
        tool = note_tool({t.name for t in (await client.list_tools()).tools})
        result = await client.call_tool(tool, {"text": "hello"})
    assert result.content[0].text == "added; begin lines 1, end lines 0"  # type: ignore[union-attr]
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [(line["phase"], line["outcome"]) for line in lines] == [("begin", None), ("end", "ok")]
    assert lines[0]["request"] == lines[1]["request"]
    assert stat.S_IMODE(os.stat(audit).st_mode) == 0o600  # it says who called what: private to the server's user


@pytest.mark.parametrize("subject", ["mallory\udc80", "line\u2028break", "next\x85line", "new\nline"])
async def test_any_subject_a_token_carries_is_audited_on_one_line(
    built: Path,
    tmp_path: Path,
    issuer: Issuer,  # noqa: F811
    subject: str,
) -> None:
    audit, notes = tmp_path / "audit.jsonl", tmp_path / "notes.txt"
    env = server_env(built, NOTES_FILE=str(notes))
    options = (*jwt_options(issuer), "--audit-log", str(audit))
    with http_server(built, *options, package="notes_server", env=env) as url:
        async with bearer_client(url, issuer.mint(sub=subject), MODERN) as client:
            tool = note_tool({t.name for t in (await client.list_tools()).tools})
            result = await client.call_tool(tool, {"text": "hello"})
    assert not result.is_error, result
    text = audit.read_text(encoding="utf-8")
    assert text.isascii()
    lines = [json.loads(line) for line in text.splitlines()]  # splitlines() splits at U+2028 and NEL too
    assert [(line["subject"], line["phase"], line["outcome"]) for line in lines] == [
        (subject, "begin", None),
        (subject, "end", "ok"),
    ]
    assert notes.read_text(encoding="utf-8") == "hello\n"
