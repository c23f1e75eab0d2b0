"""Idle handshake-era sessions cannot lock everyone out: sessions are bounded per client, and new clients are
served while one floods.

The billing server runs as a real process over HTTP. A flooder sends `initialize` requests that never end their
sessions, more than the server's whole `--max-sessions`; then other clients open sessions and call tools: none is
refused. With `--auth tokens` the flooder's sessions are bounded by `--max-sessions-per-client` and only its own
least recently used sessions are closed (the others' keep working); without --auth (every client here has the
same address) a new session still opens, in place of the least recently used one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.build import SPECS, build
from tests.support.client import LEGACY
from tests.support.processes import http_server
from tests.test_auth_http import LEGACY_VERSION, bearer_client, initialize_body

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sessions") / "out"
    build(SPECS / "billing.toml", out)
    return out


def flood(url: str, count: int, token: str | None = None) -> list[str]:
    """`count` initialize requests whose sessions are never used again: the session ids they got."""
    headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    sessions = []
    with httpx.Client(timeout=30) as http:
        for _ in range(count):
            answer = http.post(url, json=initialize_body(LEGACY_VERSION), headers=headers)
            assert answer.status_code == 200, (answer.status_code, answer.text)
            sessions.append(answer.headers["mcp-session-id"])
    return sessions


def still_open(url: str, session: str, token: str | None = None) -> bool:
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": LEGACY_VERSION}
    headers |= {"Authorization": f"Bearer {token}"} if token else {}
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return httpx.post(url, json=ping, headers=headers, timeout=30).status_code == 200


def token_entry(token: str, subject: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = []\nscopes = ["invoices:read"]\n'


async def call(url: str, token: str) -> Any:
    async with bearer_client(url, token, LEGACY) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        return await client.call_tool("invoice.get" if "invoice.get" in names else "invoice_get", {"id": "inv-1"})


async def test_a_flooding_client_only_ever_closes_its_own_sessions(built: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry("tok-flood", "flooder") + token_entry("tok-user", "user"), encoding="utf-8")
    options = ("--auth", "tokens", "--auth-tokens-file", str(tokens), "--max-sessions", "60")
    with http_server(built, *options, "--max-sessions-per-client", "40") as url:
        mine = flood(url, 5, "tok-user")  # the user's idle sessions, opened before the flood
        flooded = flood(url, 120, "tok-flood")  # twice the server's whole --max-sessions
        served = [still_open(url, session, "tok-user") for session in mine]
        kept = [still_open(url, session, "tok-flood") for session in flooded]
        new_user = flood(url, 10, "tok-user")  # new sessions of another client: never refused
        result = await call(url, "tok-user")
    assert served == [True] * 5  # the flood closed none of the user's sessions
    assert kept == [False] * 80 + [True] * 40  # the flooder holds its 40 most recent
    assert len(new_user) == 10 and not result.is_error


async def test_without_auth_a_new_client_is_served_at_the_cap(built: Path) -> None:
    with http_server(built, "--max-sessions", "50") as url:
        flooded = flood(url, 80)
        fresh = flood(url, 1)
        alive = still_open(url, fresh[0])
        oldest = still_open(url, flooded[0])
    assert alive and not oldest  # the least recently used session made room; nobody got 503
