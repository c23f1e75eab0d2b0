"""A server built without the http transport (`[server] transports = ["stdio"]`, docs/spec.md §4).

It must ship nothing of HTTP (no `_http.py`, no HTTP option, no `--auth` and its verifiers, no http/auth extra,
no streamable-HTTP entry in server.json), still pass the generated-code gate (`_serving` and `__main__` must not
name the module it lacks), and serve a real client over stdio on both serving paths with the same answers.
`requires` still works there: stdio is the local user's process, which holds every scope and role.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StdioTransport

from tests.support.build import GeneratedServer, build, built_server
from tests.support.client import LEGACY, MODERN, connect, stdio_params
from tests.support.processes import run_python, server_env
from tests.support.quality import assert_generated_quality
from tests.test_startup_imports import PLAIN_HANDLERS, PLAIN_SPEC

pytestmark = [pytest.mark.timeout(600)]

# test_startup_imports' one-tool spec, built for stdio alone.
SPEC = PLAIN_SPEC.replace('name = "plain"\n', 'name = "plain"\ntransports = ["stdio"]\n')
HANDLERS = PLAIN_HANDLERS
GUARDED = SPEC.replace('returns = "Note"\n', 'returns = "Note"\nrequires = { roles = ["editor"] }\n')
assert SPEC != PLAIN_SPEC and GUARDED != SPEC  # each replace found its text


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stdio-only") / "out"
    build(SPEC, out, handlers=HANDLERS)
    return out


def test_nothing_of_http_ships(out: Path) -> None:
    package = out / "plain_server"
    assert not (package / "_http.py").exists() and not (package / "_auth.py").exists()
    for module in package.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert "from ._http" not in text and "from ._auth" not in text, module
        assert "def add_http_arguments" not in text and "def token_verifier" not in text, module
    project = tomllib.loads((out / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert sorted(extras) == ["fast", "otel"]
    assert [r.split(">=")[0] for r in extras["fast"]] == ["orjson"]  # httptools and uvloop serve only HTTP
    registry = json.loads((out / "server.json").read_text(encoding="utf-8"))
    assert [p["transport"] for p in registry["packages"]] == [{"type": "stdio"}]
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "serves stdio only" in readme and " --http " not in readme and "127.0.0.1:8000" not in readme


def test_http_options_are_refused_as_usage_errors(out: Path) -> None:
    for option in ("--http", "--auth=jwt", "--port=8000"):
        done = run_python(["-m", "plain_server", option], cwd=out, env=server_env(out, out.parent))
        assert done.returncode == 2, done.stderr
        assert f"unrecognized arguments: {option}" in done.stderr


def test_the_generated_code_passes_the_gate(out: Path, tmp_path: Path) -> None:
    with GeneratedServer(build(SPEC, tmp_path / "gate", handlers=HANDLERS), tmp_path / "gate") as server:
        assert_generated_quality(server, tmp_path)


async def answers(out: Path, mode: str, env: dict[str, str]) -> dict[str, Any]:
    async with connect(stdio_params(out, package="plain_server", env=env), mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("note_get", {"id": "n1"})
    assert names == ["note_get"] and not result.is_error
    structured = result.structured_content
    assert isinstance(structured, dict)
    return structured


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_it_serves_stdio_on_both_paths_with_the_same_answers(out: Path, mode: str) -> None:
    fast = await answers(out, mode, server_env(out, out.parent))
    public = await answers(out, mode, server_env(out, out.parent, MCP_SERVER_FAST_PATH="off"))
    assert fast == public
    assert fast["data"] == {"id": "n1", "text": "hello"}


@pytest.mark.anyio
async def test_a_fastmcp_client_with_its_defaults_reads_the_result(out: Path) -> None:
    """What agents run on: fastmcp's Client, nothing set but the command. It checks structuredContent against
    the tool's outputSchema and parses it into `.data`: the plain presenter's envelope must satisfy both."""
    transport = StdioTransport(command=sys.executable, args=["-m", "plain_server"], cwd=str(out), env=server_env(out))
    async with FastMCPClient(transport) as client:
        tools = await client.list_tools()
        result = await client.call_tool("note_get", {"id": "n1"})
    assert [t.name for t in tools] == ["note_get"] and tools[0].output_schema is not None
    assert result.is_error is False and result.data is not None
    assert (result.data.data.id, result.data.data.text) == ("n1", "hello")
    assert list(result.data.rules) == [] and list(result.data.suggestions) == []


def test_requires_keeps_its_checks_and_stdio_holds_every_role(tmp_path: Path) -> None:
    """With `requires`, `_auth.py` ships for its checks alone (no verifier, no --auth); the local caller passes."""
    with built_server(GUARDED, tmp_path / "out", handlers=HANDLERS) as server:
        assert (server.out / "plain_server" / "_auth.py").exists()
        auth_source = (server.out / "plain_server" / "_auth.py").read_text(encoding="utf-8")
        assert "class JwtVerifier" not in auth_source and "class StaticTokens" not in auth_source
        assert 'frozenset({"editor"})' in (server.out / "plain_server" / "server.py").read_text(encoding="utf-8")
        outcome = server.module("testing").call_tool("note.get", {"id": "n1"}, server=server.create_server())
    assert outcome.error is None and outcome.data == {"id": "n1", "text": "hello"}
