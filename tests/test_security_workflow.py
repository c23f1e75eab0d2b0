"""The generated workflow tools pass `requires` too: `<workflow>.resolve` settles a call of a bound tool, so only a
caller who may call that tool may settle it.

A release workflow's `secret.burn` needs `vault:burn`; its handler fails the first time, so the call ends in
doubt. A token without the scope then calls `release.resolve(outcome="completed")`: it must be refused and the
workflow must not move; the admin's own resolve then moves it. Real server (`python -m burn_server --http
--auth tokens`), real HTTP, the Python `mcp` client.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tests.support.build import build
from tests.support.client import MODERN, connect
from tests.support.processes import http_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

SPEC = """
[server]
name = "burn"
version = "1.0.0"

[auth]
scopes = { "vault:burn" = "Destroy secrets" }

[workflows.release]
initial = "armed"
[workflows.release.states]
armed = { on = { BURN = "burned" } }
burned = { type = "final" }

[tools."secret.burn"]
kind = "mutation"
description = "Destroy the secret for good."
requires = { scopes = ["vault:burn"] }
bind_state = { workflow = "release", states = ["armed"], transition = "BURN" }
[tools."secret.burn".input]
id = "string"
"""

HANDLERS = """
from typing import Any

CALLS = []


def secret_burn(args: Any) -> Any:
    CALLS.append(args.id)
    if len(CALLS) == 1:
        raise RuntimeError("the connection to the vault dropped mid-burn")
    return "burned"
"""


def token_entry(token: str, subject: str, scopes: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = []\nscopes = {scopes}\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("burn") / "out"
    build(SPEC, out, handlers=HANDLERS)
    tokens = out.parent / "tokens.toml"
    tokens.write_text(token_entry("tok-admin", "admin", '["vault:burn"]') + token_entry("tok-none", "mallory", "[]"))
    tokens.chmod(0o600)
    with http_server(out, "--auth", "tokens", "--auth-tokens-file", str(tokens), package="burn_server") as url:
        yield url


def client_for(url: str, token: str) -> tuple[httpx2.AsyncClient, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60))
    return http, connect(streamable_http_client(url, http_client=http), MODERN)


def wire(names: set[str], dotted: str) -> str:
    """The tool's name as this server lists it (dotted, or portable snake_case)."""
    return dotted if dotted in names else dotted.replace(".", "_")


async def test_resolve_of_a_call_in_doubt_needs_what_the_call_needs(server: str) -> None:
    admin_http, admin = client_for(server, "tok-admin")
    other_http, other = client_for(server, "tok-none")
    async with admin_http, admin, other_http, other:
        names = {t.name for t in (await admin.list_tools()).tools}
        start, status = wire(names, "release.start"), wire(names, "release.status")
        burn, resolve = wire(names, "secret.burn"), wire(names, "release.resolve")
        started = await admin.call_tool(start, {})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        failed = await admin.call_tool(burn, {"workflow_id": handle, "id": "s1"})
        assert failed.is_error and 'code="INTERNAL_ERROR"' in failed.content[0].text  # type: ignore[union-attr]
        in_doubt = await admin.call_tool(status, {"workflow_id": handle})
        assert in_doubt.structured_content["pending"] is not None  # type: ignore[index]

        refused = await other.call_tool(resolve, {"workflow_id": handle, "outcome": "completed"})
        assert refused.is_error
        text = refused.content[0].text  # type: ignore[union-attr]
        assert 'code="FORBIDDEN"' in text and '"vault:burn"' in text, text
        after = await admin.call_tool(status, {"workflow_id": handle})
        assert after.structured_content["state"] == "armed"  # type: ignore[index]
        assert after.structured_content["pending"] is not None  # type: ignore[index]
        also_refused = await other.call_tool(resolve, {"workflow_id": handle, "outcome": "not_completed"})
        assert also_refused.is_error and 'code="FORBIDDEN"' in also_refused.content[0].text  # type: ignore[union-attr]

        resolved = await admin.call_tool(resolve, {"workflow_id": handle, "outcome": "completed"})
        assert not resolved.is_error, resolved
        assert resolved.structured_content["state"] == "burned"  # type: ignore[index]
