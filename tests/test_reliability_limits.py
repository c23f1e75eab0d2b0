"""The start limits key callers by who they are, never by a shared address unless told, with defaults that no
legitimate load meets.

The billing server runs as a real process over HTTP. Fifty concurrent 2026-07-28 clients through one address
(127.0.0.1, as behind a load balancer) on the default settings start workflows without one refusal; with
`--auth tokens`, the limits are per authenticated subject (one subject's starts never use up another's); with
`--start-limit-by-address` the peer address is the client.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tests.support.build import SPECS, build
from tests.support.client import MODERN, connect
from tests.support.processes import http_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

CLIENTS, STARTS = 50, 6


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("limits") / "out"
    build(SPECS / "billing.toml", out)
    return out


def client_for(url: str, token: str | None = None) -> tuple[httpx2.AsyncClient, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=120))
    return http, connect(streamable_http_client(url, http_client=http), MODERN)


async def starts(url: str, count: int, token: str | None = None) -> list[str]:
    """`count` calls of invoice.start by one client: "ok", or the error code each got."""
    http, client = client_for(url, token)
    async with http, client:
        names = {t.name for t in (await client.list_tools()).tools}
        start = "invoice.start" if "invoice.start" in names else "invoice_start"
        outcomes = []
        for _ in range(count):
            result = await client.call_tool(start, {})
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            outcomes.append("RATE_LIMITED" if 'code="RATE_LIMITED"' in text else "ok" if not result.is_error else text)
    return outcomes


async def test_fifty_clients_through_one_address_are_never_refused_by_default(built: Path) -> None:
    outcomes: list[str] = []

    async def one() -> None:
        outcomes.extend(await starts(url, STARTS))

    with http_server(built) as url:
        async with anyio.create_task_group() as group:
            for _ in range(CLIENTS):
                group.start_soon(one)
    assert outcomes == ["ok"] * (CLIENTS * STARTS)


def token_entry(token: str, subject: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = []\nscopes = []\n'


async def test_the_limits_are_per_authenticated_subject(built: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry("tok-a", "a") + token_entry("tok-b", "b"), encoding="utf-8")
    options = ("--auth", "tokens", "--auth-tokens-file", str(tokens), "--max-live-starts", "3")
    with http_server(built, *options) as url:
        first = await starts(url, 4, "tok-a")
        again = await starts(url, 1, "tok-a")  # a new session of the same subject: the same budget
        other = await starts(url, 3, "tok-b")
    assert first == ["ok", "ok", "ok", "RATE_LIMITED"]
    assert again == ["RATE_LIMITED"]
    assert other == ["ok", "ok", "ok"]


async def test_the_peer_address_is_the_client_only_when_told(built: Path) -> None:
    with http_server(built, "--max-live-starts", "2", "--start-limit-by-address") as url:
        told = [*(await starts(url, 2)), *(await starts(url, 1))]
    with http_server(built, "--max-live-starts", "2") as url:
        untold = [*(await starts(url, 2)), *(await starts(url, 2))]
    assert told == ["ok", "ok", "RATE_LIMITED"]  # two clients, one address: one budget, as asked
    assert untold == ["ok"] * 4  # unauthenticated sessionless clients cannot be told apart: not limited per client
