"""Nothing is written to the state store for a handle it does not know.

A gated call, or `<workflow>.resolve`, naming a handle that was never minted used to take the handle's lock first,
which writes (a Redis `fence:<handle>` counter living the idle TTL, an SQLite lock row): any client could grow the
store with random handles. The billing server runs as a real process (`--http`, 2026-07-28 clients) on a real
Redis and on SQLite; after a hundred calls with random handles the store holds no key or row for any of them.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.build import SPECS, build
from tests.support.client import MODERN, connect
from tests.support.processes import http_server
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("store") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))  # pytest.fail if redis-server is missing
    try:
        yield port
    finally:
        stop()


async def call_with_random_handles(url: str, count: int) -> list[str]:
    """Gated calls and resolves with handles never minted; every answer must say the handle is unknown."""
    handles = [secrets.token_urlsafe(24) for _ in range(count)]
    async with connect(url, MODERN) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        submit = "invoice.submit" if "invoice.submit" in names else "invoice_submit"
        resolve = "invoice.resolve" if "invoice.resolve" in names else "invoice_resolve"
        for n, handle in enumerate(handles):
            if n % 2:
                result = await client.call_tool(submit, {"workflow_id": handle, "invoice_id": "inv-1"})
            else:
                result = await client.call_tool(resolve, {"workflow_id": handle, "outcome": "completed"})
            assert result.is_error and "UNKNOWN" in result.content[0].text.upper(), result  # type: ignore[union-attr]
    return handles


async def test_unknown_handles_write_nothing_to_redis(built: Path, redis_port: int) -> None:
    url_of_store = f"redis://127.0.0.1:{redis_port}/0"
    with http_server(built, "--state-store", url_of_store) as url:
        handles = await call_with_random_handles(url, 100)
    keys = [key.decode() for key in redis.Redis(port=redis_port).keys("*")]
    assert not [key for key in keys if any(handle in key for handle in handles)], keys
    assert not [key for key in keys if ":fence:" in key or ":lock:" in key], keys


async def test_unknown_handles_write_nothing_to_sqlite(built: Path, tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    with http_server(built, "--state-store", f"sqlite:///{database}") as url:
        await call_with_random_handles(url, 100)
    with sqlite3.connect(database) as db:
        locks = db.execute("SELECT COUNT(*) FROM workflow_locks").fetchone()[0]
        records = db.execute("SELECT COUNT(*) FROM workflow_records").fetchone()[0]
    assert (locks, records) == (0, 0)
