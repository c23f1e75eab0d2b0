"""`--auth jwt` against a JWKS that fails, hangs or answers garbage, from outside.

The billing server runs as a real process (`--http --auth jwt`); the JWKS is a real HTTP server on 127.0.0.1 run by
the test, whose answer each test sets: the keys, 503, a body that is not JSON, or a hang (the request is held until
the server gives up on it, which the JWKS sees as its connection closing). The documented bounds: at most one fetch
per 30 s cooldown whatever the JWKS answers, a token whose key is cached never waits for a fetch, a JWKS that is
not JSON is a 401 (never a 500 with a traceback), and a kid holding a line break cannot forge a log line. And
`--auth tokens` refuses a tokens file that others may write (they could add a token of their own).
"""

from __future__ import annotations

import http.server
import json
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.support.build import SPECS, build
from tests.support.processes import http_server, server_env
from tests.test_auth_http import AUDIENCE, ISSUER, Issuer, entry, post_initialize

pytestmark = [pytest.mark.timeout(180)]


@dataclass
class Jwks:
    """What the JWKS answers (`mode`), every fetch it saw, and the hung fetches the server has given up on."""

    issuer: Issuer
    mode: str = "keys"  # keys | 503 | garbage | hang
    url: str = ""
    fetches: list[str] = field(default_factory=list)
    hung: threading.Event = field(default_factory=threading.Event)  # a fetch is being held
    abandoned: threading.Event = field(default_factory=threading.Event)  # the server closed a held fetch
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jwks") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    from cryptography.hazmat.primitives.asymmetric import rsa

    issuer = Issuer({"rsa-1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}, {"rsa-1"})
    found = Jwks(issuer)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.fetches.append(found.mode)
            if found.mode == "hang":
                found.hung.set()
                while not found.release.is_set():  # held until the server gives up (its socket closes)
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    if readable and not self.connection.recv(1, 0x2):  # MSG_PEEK: b"" is the close
                        found.abandoned.set()
                        return
                return
            if found.mode == "503":
                body, status, kind = b"unavailable", 503, "text/plain"
            elif found.mode == "garbage":
                body, status, kind = b"<html>not a key set</html>", 200, "text/html"
            else:
                body, status, kind = json.dumps(issuer.jwks()).encode(), 200, "application/json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    issuer.url = found.url
    try:
        yield found
    finally:
        found.release.set()
        server.shutdown()
        server.server_close()


def options(jwks: Jwks, *extra: str) -> tuple[str, ...]:
    return ("--auth", "jwt", "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE, "--auth-jwks-url", jwks.url, *extra)


def unknown_kid_token(jwks: Jwks, kid: str) -> str:
    """A token signed by a key the JWKS never published, naming `kid`: what an outsider can always make."""
    return jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "outsider", "exp": 4102444800},
        jwks.issuer.keys["rsa-1"],
        algorithm="RS256",
        headers={"kid": kid},
    )


def test_a_failing_jwks_is_fetched_once_per_cooldown(built: Path, jwks: Jwks) -> None:
    jwks.mode = "503"
    with http_server(built, *options(jwks)) as url:
        answers = [post_initialize(url, unknown_kid_token(jwks, f"kid-{n}")).status_code for n in range(10)]
        valid = post_initialize(url, jwks.issuer.mint("rsa-1")).status_code
    assert answers == [401] * 10 and valid == 401  # no keys: nobody gets in, fail closed
    assert jwks.fetches == ["503"]  # one attempt, then the cooldown, although every token named an unknown kid


def test_a_jwks_that_is_not_json_is_a_401_not_a_500(built: Path, jwks: Jwks, tmp_path: Path) -> None:
    jwks.mode = "garbage"
    log = tmp_path / "server.log"
    with http_server(built, *options(jwks), log=log) as url:
        answer = post_initialize(url, jwks.issuer.mint("rsa-1"))
    assert answer.status_code == 401, answer.text
    text = log.read_text(encoding="utf-8")
    assert "Traceback" not in text
    assert "the JWKS could not be fetched" in text


def test_a_hanging_jwks_never_stalls_a_token_whose_key_is_cached(built: Path, jwks: Jwks) -> None:
    # No cooldown, so that the unknown kids may make it fetch (one fetch at a time even so).
    with http_server(built, *options(jwks, "--auth-jwks-cooldown", "0")) as url:
        assert post_initialize(url, jwks.issuer.mint("rsa-1")).status_code == 200  # the keys are now cached
        jwks.mode = "hang"
        with ThreadPoolExecutor(2) as pool:
            attackers = [pool.submit(post_initialize, url, unknown_kid_token(jwks, f"x-{n}")) for n in range(2)]
            assert jwks.hung.wait(30)  # an unknown kid's fetch is being held
            valid = post_initialize(url, jwks.issuer.mint("rsa-1", sub="patient"))
            # Answered while the fetch is still held: it never waited for it (nor for a second one).
            still_held = not jwks.abandoned.is_set()
            jwks.release.set()
            refused = [a.result().status_code for a in attackers]
    assert valid.status_code == 200, valid.text
    assert still_held
    assert refused == [401, 401]
    assert jwks.fetches == ["keys", "hang"]  # the second unknown kid waited for the first one's fetch


def test_a_kid_with_a_line_break_cannot_forge_a_log_line(built: Path, jwks: Jwks, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    forged = "x\nINFO fusiongen: call tool=invoice.update outcome=ok"
    with http_server(built, *options(jwks), "--log-level", "info", log=log) as url:
        assert post_initialize(url, unknown_kid_token(jwks, forged)).status_code == 401
        httpx.get(url.rsplit("/", 1)[0] + "/healthz", timeout=30)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert not any(line.startswith("INFO fusiongen: call tool=invoice.update") for line in lines)
    assert any("no key of the JWKS has its kid" in line and "\\n" in line for line in lines)


def test_a_tokens_file_others_may_write_is_refused(built: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(entry("s3cret"), encoding="utf-8")
    tokens.chmod(0o666)
    command = [sys.executable, "-m", "billing_server", "--http", "--auth", "tokens", "--auth-tokens-file", str(tokens)]
    done = subprocess.run(
        command, cwd=built, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=server_env(built)
    )
    assert done.returncode == 2, done.stderr
    assert "writable by its group or by others (mode 0666)" in done.stderr
    assert "Traceback" not in done.stderr
