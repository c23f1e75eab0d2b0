"""audience = "user" UI blocks: omitted unless the spec (or the operator) says to send them.

Audience is only a hint in MCP, and clients such as langchain hand every content block to the model, so
a user-only block that shows a redacted value (an email here) would reach the model through them. The
default is "omit": such a block is not computed nor sent, and nothing else of the result changes.
`[server] user_blocks` sets it for every presenter, `[presenters.X] user_blocks` for one, and
`create_server(user_blocks=)` / `--user-blocks` override both for a deployment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.build import GeneratedServer, built_server
from tests.support.client import MODES, connect, stdio_params
from tests.support.processes import server_env

pytestmark = pytest.mark.anyio

EMAIL = "ada@example.com"
TEAM_MAIL = "lead@example.com"
HANDLERS = f'''
def get_person(args):
    return {{"id": "p-1", "name": "Ada", "email": "{EMAIL}"}}


def get_team(args):
    return {{"id": "t-1", "lead": {{"id": "p-2", "name": "Lin", "email": "{TEAM_MAIL}"}}}}


def list_teams(args):
    return [get_team(args)]
'''


def spec(server_setting: str | None, person_setting: str | None) -> str:
    """Person (email redacted) has a user-only block that shows the email; Team embeds Person and has a
    user-only block of its own and a user-only collection block."""
    server_line = f'user_blocks = "{server_setting}"\n' if server_setting else ""
    person_line = f'user_blocks = "{person_setting}"\n' if person_setting else ""
    return f"""
[server]
name = "people"
{server_line}
[models.Person]
[models.Person.fields]
id = "string"
name = "string"
email = "string"

[models.Team]
[models.Team.fields]
id = "string"
lead = "Person"

[presenters.Person]
model = "Person"
redact_pii = ["email"]
{person_line}
[[presenters.Person.ui]]
type = "summary"
text = "Person {{name}}"

[[presenters.Person.ui]]
type = "summary"
audience = "user"
text = "Write to {{email}}"

[presenters.Team]
model = "Team"
embed = {{ lead = "Person" }}

[[presenters.Team.ui]]
type = "markdown"
audience = "user"
text = "Team {{id}}, led by {{lead.name}}"

[[presenters.Team.collection_ui]]
type = "markdown"
audience = "user"
text = "{{count()}} teams"

[tools."person.get"]
kind = "query"
returns = "Person"
handler = "get_person"

[tools."team.get"]
kind = "query"
returns = "Team"
handler = "get_team"

[tools."team.list"]
kind = "query"
returns = "Team[]"
handler = "list_teams"
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, GeneratedServer]]:
    """One build per (server, Person) setting; each imported in turn by the test that uses it."""
    settings = {
        "default": (None, None),
        "server-send": ("send", None),
        "server-send-person-omit": ("send", "omit"),
        "person-send": (None, "send"),
    }
    yield {
        key: built_server(spec(*pair), tmp_path_factory.mktemp(key) / "out", handlers=HANDLERS)
        for key, pair in settings.items()
    }


def is_for_user(block: Any) -> bool:
    return bool(block.annotations and block.annotations.audience == ["user"])


async def call(server: GeneratedServer, tool: str, mode: str = MODES[0], **options: Any) -> Any:
    async with connect(server.create_server(**options), mode) as client:
        result = await client.call_tool(tool, {})
    assert not result.is_error, result
    return result


def user_texts(result: Any) -> list[str]:
    return [b.text for b in result.content if is_for_user(b)]


def everything(result: Any) -> str:
    """All a client receives: every block's text and the structured content."""
    return json.dumps([b.text for b in result.content]) + json.dumps(result.structured_content)


def ui(kind: str, text: str) -> str:
    return f'<ui_passthrough type="{kind}">{text}</ui_passthrough>'


def write_to(email: str) -> str:
    return ui("summary", f"📊 **Summary**: Write to {email}")


@pytest.mark.parametrize("mode", MODES)
async def test_by_default_no_user_only_block_is_sent(servers: dict[str, GeneratedServer], mode: str) -> None:
    with servers["default"] as server:
        person = await call(server, "person_get", mode)
        team = await call(server, "team_get", mode)
        teams = await call(server, "team_list", mode)
    for result in (person, team, teams):
        assert user_texts(result) == []
        assert all(b.annotations is None for b in result.content)
    assert EMAIL not in everything(person) and TEAM_MAIL not in everything(team)
    assert person.structured_content["data"] == {"id": "p-1", "name": "Ada", "email": "[REDACTED]"}
    # Nothing else changes: the data, then the model's blocks, as before.
    assert [b.text for b in person.content][1:] == [ui("summary", "📊 **Summary**: Person Ada")]


async def test_server_wide_send_sends_every_presenters_user_blocks(servers: dict[str, GeneratedServer]) -> None:
    with servers["server-send"] as server:
        person = await call(server, "person_get")
        team = await call(server, "team_get")
        teams = await call(server, "team_list")
    assert user_texts(person) == [write_to(EMAIL)]
    assert [is_for_user(b) for b in person.content] == [False, False, True]  # data, summary, the user's block
    assert EMAIL not in json.dumps([b.text for b in person.content if not is_for_user(b)])
    # The embedded Person's user block comes with the Team's (both sent: the server says so).
    assert user_texts(team) == [ui("markdown", "Team t-1, led by Lin"), write_to(TEAM_MAIL)]
    assert user_texts(teams) == [ui("markdown", "1 teams")]


async def test_a_presenter_setting_overrides_the_servers(servers: dict[str, GeneratedServer]) -> None:
    with servers["server-send-person-omit"] as server:
        person = await call(server, "person_get")
        team = await call(server, "team_get")
    assert user_texts(person) == [] and EMAIL not in everything(person)
    # Each block follows the presenter that declares it: Team sends its own, not the embedded Person's.
    assert user_texts(team) == [ui("markdown", "Team t-1, led by Lin")]
    assert TEAM_MAIL not in everything(team)
    with servers["person-send"] as server:
        person = await call(server, "person_get")
        team = await call(server, "team_get")
    assert user_texts(person) == [write_to(EMAIL)]
    assert user_texts(team) == [write_to(TEAM_MAIL)]


async def test_create_server_overrides_the_spec(servers: dict[str, GeneratedServer]) -> None:
    with servers["default"] as server:
        sent = await call(server, "person_get", user_blocks="send")
        team = await call(server, "team_get", user_blocks="send")
        as_spec = await call(server, "person_get", user_blocks="spec")
    assert user_texts(sent) == [write_to(EMAIL)]
    assert len(user_texts(team)) == 2
    assert user_texts(as_spec) == []
    with servers["server-send"] as server:
        omitted = await call(server, "person_get", user_blocks="omit")
        teams = await call(server, "team_list", user_blocks="omit")
        with pytest.raises(ValueError, match="user_blocks must be one of spec, send, omit, not 'all'"):
            server.create_server(user_blocks="all")
    assert user_texts(omitted) == [] and EMAIL not in everything(omitted)
    assert user_texts(teams) == []


async def test_an_omitted_block_is_not_even_computed(servers: dict[str, GeneratedServer]) -> None:
    """The presenter functions check the set chosen at start-up; the block's template never runs."""
    with servers["default"] as server:
        presenters = server.module("presenters")
        raw = {"id": "p-1", "name": "Ada", "email": EMAIL}
        calls: list[str] = []
        original = presenters.summary_text

        def counting(text: str) -> str:
            calls.append(text)
            return str(original(text))

        presenters.summary_text = counting
        try:
            presenters.present_person(raw, frozenset())
            assert calls == ["Person Ada"]  # the model's summary only
            presenters.present_person(raw, frozenset({"Person"}))
            assert calls == ["Person Ada", "Person Ada", f"Write to {EMAIL}"]
        finally:
            presenters.summary_text = original
        assert server.module("server").USER_BLOCKS == {"Person": False, "Team": False}


def run_server(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    params = stdio_params(out, *args, package="people_server")
    return subprocess.run(
        [sys.executable, *params.args], cwd=out, env=server_env(out), capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("flag", "sent"), [((), False), (("--user-blocks", "send"), True)])
async def test_the_user_blocks_flag_of_the_program(
    servers: dict[str, GeneratedServer], flag: tuple[str, ...], sent: bool
) -> None:
    out = servers["default"].out
    async with connect(stdio_params(out, *flag, package="people_server")) as client:
        result = await client.call_tool("person_get", {})
    assert not result.is_error
    assert user_texts(result) == ([write_to(EMAIL)] if sent else [])
    assert (EMAIL in everything(result)) is sent


def test_the_flag_refuses_an_unknown_mode(servers: dict[str, GeneratedServer]) -> None:
    done = run_server(servers["default"].out, "--user-blocks", "all")
    assert done.returncode == 2
    assert "argument --user-blocks: invalid choice: 'all'" in done.stderr  # argparse lists the choices
    shown = run_server(servers["default"].out, "--help")
    assert "--user-blocks {spec,send,omit}" in shown.stdout
