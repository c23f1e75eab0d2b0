"""A request's head is bounded before anything reads it, authentication included.

uvicorn's httptools parser (the `fast` extra, installed here) has no header size limit: one unauthenticated request
with a 32 MB header cost the server 64 MB. The billing server runs as a real process (`--http --auth tokens`); a
raw socket sends a header that never ends, in 1 MB pieces: the server must answer 431 and close the connection
after about `--max-header-size` bytes (the client's sending fails long before 32 MB), and go on serving others.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.support.build import SPECS, build
from tests.support.processes import http_server
from tests.test_auth_http import entry, post_initialize, tokens_file

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("headers") / "out"
    build(SPECS / "billing.toml", out)
    return out


def send_endless_header(port: int) -> tuple[int, bytes]:
    """How many bytes went out before the server closed, and what it answered."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Padding: ".encode())
        try:
            for _ in range(32):
                conn.sendall(b"a" * 1_000_000)
                sent += 1_000_000
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return sent, answer


def test_an_endless_header_is_refused_before_authentication(built: Path, tmp_path: Path) -> None:
    tokens = tokens_file(tmp_path, entry("s3cret"))
    with http_server(built, "--auth", "tokens", "--auth-tokens-file", str(tokens)) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        sent, answer = send_endless_header(port)
        health = httpx.get(url.rsplit("/", 1)[0] + "/healthz", timeout=30)
        normal = post_initialize(url, "s3cret")
        big_token = post_initialize(url, "s3cret" + "x" * 20_000)  # a large header under the bound: read, refused 401
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert sent < 32_000_000  # the server stopped reading long before the header ended
    assert health.status_code == 200 and normal.status_code == 200
    assert big_token.status_code == 401


def test_the_bound_is_an_option(built: Path) -> None:
    with http_server(built, "--max-header-size", "4096") as url:
        small = httpx.get(url.rsplit("/", 1)[0] + "/healthz", headers={"X-Pad": "a" * 3000}, timeout=30)
        large = httpx.get(url.rsplit("/", 1)[0] + "/healthz", headers={"X-Pad": "a" * 5000}, timeout=30)
    assert small.status_code == 200
    assert large.status_code == 431
