"""Bearer authentication of the generated HTTP server (`--auth jwt`, `--auth tokens`), from outside.

Every server here is `python -m billing_server --http --auth ...` as a real process, and every request real HTTP:
the JWKS is served on 127.0.0.1 by the test from freshly generated RSA and EC keys, tokens are minted per test
with PyJWT, and the client is the Python `mcp` client with an `Authorization: Bearer` header. A request
without a valid token gets 401 with `WWW-Authenticate: Bearer ... resource_metadata="..."` pointing at the
RFC 9728 metadata; a token lacking an --auth-required-scope gets 403 insufficient_scope.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from mcp.client.streamable_http import streamable_http_client

from fusiongen.runtime import _auth
from tests.support.build import SPECS, build, built_server
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import http_server, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ISSUER = "https://issuer.example"
AUDIENCE = "https://billing.example/mcp"
LEGACY_VERSION = "2025-11-25"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("auth") / "out"
    build(SPECS / "billing.toml", out)
    return out


# --- the issuer: keys, a JWKS on 127.0.0.1, tokens ---------------------------------------------------------


@dataclass
class Issuer:
    """Signing keys by kid, the ones the JWKS publishes, and how often the JWKS was fetched."""

    keys: dict[str, Any]
    published: set[str]
    url: str = ""
    fetches: list[str] = field(default_factory=list)

    def jwks(self) -> dict[str, Any]:
        found = []
        for kid in sorted(self.published):
            key = self.keys[kid]
            algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            found.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": found}

    def mint(self, kid: str = "rsa-1", *, algorithm: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300, **claims}
        payload = {k: v for k, v in payload.items() if v is not None}
        algorithm = algorithm or ("RS256" if kid.startswith("rsa") else "ES256")
        return jwt.encode(payload, self.keys[kid], algorithm=algorithm, headers={"kid": kid})


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    keys = {
        "rsa-1": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec-1": ec.generate_private_key(ec.SECP256R1()),
        "rsa-unpublished": rsa.generate_private_key(public_exponent=65537, key_size=2048),
    }
    found = Issuer(keys, {"rsa-1", "ec-1"})

    class JwksHandler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.fetches.append(self.path)
            body = json.dumps(found.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), JwksHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def jwt_options(issuer: Issuer, *extra: str) -> tuple[str, ...]:
    return (
        "--auth", "jwt", "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE, "--auth-jwks-url", issuer.url, *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def jwt_server(built: Path, issuer: Issuer) -> Iterator[str]:
    with http_server(built, *jwt_options(issuer, "--auth-server", "https://login.example")) as url:
        yield url


# --- raw HTTP and the mcp client -----------------------------------------------------------------------------


def initialize_body(version: str = LEGACY_VERSION) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "outsider", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def post_initialize(url: str, token: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=initialize_body(), headers=headers, timeout=30)


def origin_of(url: str) -> str:
    return url.rsplit("/", 1)[0]


def assert_unauthorized(response: httpx.Response, url: str) -> None:
    assert response.status_code == 401, (response.status_code, response.text)
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{origin_of(url)}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert "mcp-session-id" not in response.headers  # no session was opened


@contextlib.asynccontextmanager
async def bearer_client(url: str, token: str, mode: str = LEGACY) -> Any:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60))
    async with http, connect(streamable_http_client(url, http_client=http), mode) as client:
        yield client


# --- --auth jwt ----------------------------------------------------------------------------------------------


async def test_no_token_gets_401_pointing_at_the_metadata(jwt_server: str) -> None:
    assert_unauthorized(post_initialize(jwt_server), jwt_server)
    assert_unauthorized(post_initialize(jwt_server, "not-a-jwt"), jwt_server)


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_protected_resource_metadata_names_the_servers(jwt_server: str, path: str) -> None:
    response = httpx.get(origin_of(jwt_server) + path, timeout=30)
    assert response.status_code == 200, response.text
    metadata = response.json()
    assert metadata["resource"] == jwt_server
    assert metadata["authorization_servers"] == ["https://login.example"]
    assert metadata["bearer_methods_supported"] == ["header"]
    assert metadata["resource_name"] == "billing"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
@pytest.mark.parametrize("kid", ["rsa-1", "ec-1"])
async def test_a_valid_token_calls_tools(jwt_server: str, issuer: Issuer, kid: str, mode: str) -> None:
    async with bearer_client(jwt_server, issuer.mint(kid), mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
    assert "invoice_get" in names
    assert not result.is_error, result


def forged_none(issuer: Issuer) -> str:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode())
    return f"{header.decode().rstrip('=')}.{payload.decode().rstrip('=')}."


def hmac_with_the_public_key(issuer: Issuer) -> str:
    """Key confusion: HS256 "signed" with the RSA public key the JWKS publishes."""
    from cryptography.hazmat.primitives import serialization

    public = (
        issuer.keys["rsa-1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300}
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    body = base64.urlsafe_b64encode(json.dumps(claims).encode())
    signing_input = f"{header.decode().rstrip('=')}.{body.decode().rstrip('=')}".encode()
    import hashlib
    import hmac

    signature = base64.urlsafe_b64encode(hmac.new(public, signing_input, hashlib.sha256).digest()).decode()
    return f"{signing_input.decode()}.{signature.rstrip('=')}"


BAD_TOKENS = {
    "wrong audience": lambda i: i.mint(aud="https://other.example/mcp"),
    "wrong issuer": lambda i: i.mint(iss="https://evil.example"),
    "expired": lambda i: i.mint(exp=int(time.time()) - 600),
    "not yet valid": lambda i: i.mint(nbf=int(time.time()) + 600),
    "no exp": lambda i: i.mint(exp=None),
    "no sub": lambda i: i.mint(sub=None),
    "key not in the JWKS": lambda i: i.mint("rsa-unpublished"),
    "signed by another key under a published kid": lambda i: (
        lambda t: jwt.encode(
            jwt.decode(t, options={"verify_signature": False}),
            i.keys["rsa-unpublished"],
            algorithm="RS256",
            headers={"kid": "rsa-1"},
        )
    )(i.mint()),
    "tampered payload": lambda i: (
        lambda t: t.split(".")[0] + "." + forged_none(i).split(".")[1] + "." + t.split(".")[2]
    )(i.mint()),
    "alg none": forged_none,
    "HS256 with the public key": hmac_with_the_public_key,
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_a_bad_token_gets_401(jwt_server: str, issuer: Issuer, case: str) -> None:
    token = BAD_TOKENS[case](issuer)
    assert_unauthorized(post_initialize(jwt_server, token), jwt_server)


def test_a_good_token_gets_in_over_raw_http(jwt_server: str, issuer: Issuer) -> None:
    # The control for test_a_bad_token_gets_401: the same request with a valid token opens a session.
    response = post_initialize(jwt_server, issuer.mint())
    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"]


def test_a_session_belongs_to_the_principal_that_opened_it(jwt_server: str, issuer: Issuer) -> None:
    opened = post_initialize(jwt_server, issuer.mint(sub="alice"))
    session = opened.headers["mcp-session-id"]
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {issuer.mint(sub='bob')}",
        "mcp-session-id": session,
        "mcp-protocol-version": LEGACY_VERSION,
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    hijack = httpx.post(jwt_server, json=listing, headers=headers, timeout=30)
    assert hijack.status_code in (403, 404), (hijack.status_code, hijack.text)
    assert "invoice_get" not in hijack.text


def test_a_required_scope_missing_is_403(built: Path, issuer: Issuer) -> None:
    with http_server(built, *jwt_options(issuer, "--auth-required-scope", "billing:use")) as url:
        lacking = post_initialize(url, issuer.mint(scope="other"))
        having = post_initialize(url, issuer.mint(scope="other billing:use"))
        metadata = httpx.get(origin_of(url) + "/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert lacking.status_code == 403, lacking.text
    assert 'error="insufficient_scope"' in lacking.headers["www-authenticate"]
    assert having.status_code == 200, having.text
    assert metadata["authorization_servers"] == [ISSUER]  # without --auth-server: the issuer
    assert metadata["scopes_supported"] == ["invoices:read", "invoices:write", "billing:use"]  # the spec's, then it


def test_allowed_algorithms_are_explicit(built: Path, issuer: Issuer) -> None:
    with http_server(built, *jwt_options(issuer, "--auth-algorithm", "ES256")) as url:
        rsa_signed = post_initialize(url, issuer.mint("rsa-1"))
        ec_signed = post_initialize(url, issuer.mint("ec-1"))
    assert rsa_signed.status_code == 401
    assert ec_signed.status_code == 200, ec_signed.text


async def test_a_rotated_key_is_fetched_once_it_is_published(issuer: Issuer) -> None:
    # In process, to set the cooldown between forced fetches (30 s in a server) to 0; the JWKS is still real HTTP.
    verifier = _auth.JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=issuer.url, cooldown=0)
    issuer.keys["rsa-2"] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    before = await verifier.verify_token(issuer.mint("rsa-1"))
    unknown = await verifier.verify_token(issuer.mint("rsa-2"))
    issuer.published.add("rsa-2")
    try:
        fetched = len(issuer.fetches)
        after = await verifier.verify_token(issuer.mint("rsa-2", sub="rotated"))
    finally:
        issuer.published.discard("rsa-2")
    assert before is not None and unknown is None
    assert after is not None and after.subject == "rotated"
    assert len(issuer.fetches) == fetched + 1


async def test_a_verified_token_carries_the_identity(issuer: Issuer) -> None:
    verifier = _auth.JwtVerifier(
        issuer=ISSUER, audience=AUDIENCE, jwks_url=issuer.url, roles_claim="groups", tenant_claim="org_id"
    )
    token = await verifier.verify_token(
        issuer.mint(scope="invoices:read invoices:write", groups=["support"], org_id="acme", sub="sam")
    )
    no_tenant = await verifier.verify_token(issuer.mint(groups=["support"]))
    assert isinstance(token, _auth.IdentifiedToken)
    assert (token.subject, token.scopes, token.roles, token.tenant) == (
        "sam",
        ["invoices:read", "invoices:write"],
        ["support"],
        "acme",
    )
    assert no_tenant is None  # a server that scopes data per tenant refuses a token without one


# --- --auth tokens -------------------------------------------------------------------------------------------


def tokens_file(tmp_path: Path, *entries: str) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text("\n".join(entries), encoding="utf-8")
    return path


def entry(token: str, subject: str = "alice", roles: str = '["admin"]', scopes: str = '["invoices:read"]') -> str:
    import hashlib

    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = {roles}\nscopes = {scopes}\n'


async def test_static_tokens(built: Path, tmp_path: Path) -> None:
    path = tokens_file(tmp_path, entry("s3cret-alice"), entry("s3cret-bob", "bob"))
    options = ("--auth", "tokens", "--auth-tokens-file", str(path), "--auth-server", "https://login.example")
    with http_server(built, *options) as url:
        assert_unauthorized(post_initialize(url), url)
        assert_unauthorized(post_initialize(url, "s3cret-carol"), url)
        assert_unauthorized(post_initialize(url, "s3cret-alic"), url)
        async with bearer_client(url, "s3cret-bob") as client:
            result = await client.call_tool("invoice_get", {"id": "inv-1"})
    assert not result.is_error, result
    assert "s3cret" not in path.read_text()  # the file holds digests only


def test_static_tokens_without_an_authorization_server_still_refuse(built: Path, tmp_path: Path) -> None:
    path = tokens_file(tmp_path, entry("s3cret-alice"))
    with http_server(built, "--auth", "tokens", "--auth-tokens-file", str(path)) as url:
        refused = post_initialize(url)
        admitted = post_initialize(url, "s3cret-alice")
        metadata = httpx.get(origin_of(url) + "/.well-known/oauth-protected-resource", timeout=30)
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")
    assert "resource_metadata" not in refused.headers["www-authenticate"]  # there is no server to point at
    assert admitted.status_code == 200, admitted.text
    assert metadata.status_code == 404


# --- usage errors and the start-up notice --------------------------------------------------------------------


def run_server(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "billing_server", *args],
        cwd=out,
        env=server_env(out),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--auth", "jwt", "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE), "--auth jwt needs --auth-jwks-url"),
        (("--auth", "tokens"), "--auth tokens needs --auth-tokens-file"),
        (("--auth-issuer", ISSUER), "--auth-issuer needs --auth jwt or --auth tokens"),
        (("--auth", "jwt", "--auth-issuer", "issuer.example"), "not an http:// or https:// URL"),
        (("--auth", "tokens", "--auth-tokens-file", "/nonexistent/tokens.toml"), "No such file"),
        (("--auth-algorithm", "HS256"), "invalid choice: 'HS256'"),
        (("--auth-algorithm", "none"), "invalid choice: 'none'"),
    ],
)
def test_unusable_auth_options_are_usage_errors(built: Path, arguments: tuple[str, ...], message: str) -> None:
    proc = run_server(built, "--http", *arguments)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no [[token]] entries"),
        ('[[token]]\nsha256 = "abc"\nsubject = "a"\n', "64 lowercase hex digits"),
        (entry("t") + entry("t", "b"), "token 2: the same sha256 as an earlier token"),
        (entry("t") + 'password = "x"\n', "token 1: unknown key password"),
        (entry("t", roles='"admin"'), "token 1: roles must be a list of non-empty strings"),
        ("[[token]\n", "--auth-tokens-file"),
    ],
)
def test_a_bad_tokens_file_is_a_usage_error(built: Path, tmp_path: Path, content: str, message: str) -> None:
    path = tokens_file(tmp_path, content)
    proc = run_server(built, "--http", "--auth", "tokens", "--auth-tokens-file", str(path))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_beyond_loopback_the_notice_says_whether_the_server_is_open(
    built: Path, tmp_path: Path, issuer: Issuer
) -> None:
    open_log, closed_log = tmp_path / "open.log", tmp_path / "closed.log"
    with http_server(built, "--host", "0.0.0.0", log=open_log):
        pass
    with http_server(built, "--host", "0.0.0.0", *jwt_options(issuer), log=closed_log):
        pass
    assert "without authentication (see --auth)" in open_log.read_text()
    closed = closed_log.read_text()
    assert "with bearer authentication (--auth jwt)" in closed and "without authentication" not in closed


# --- [auth] and requires: scopes and roles per tool ----------------------------------------------------------

CASES = Path(__file__).parent / "cases"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vault") / "out"
    build(CASES / "auth-requires" / "spec.toml", out)
    return out


@pytest.fixture(scope="module")
def vault_server(vault: Path, issuer: Issuer) -> Iterator[str]:
    with http_server(vault, *jwt_options(issuer), package="vault_server") as url:
        yield url


def tool_error_code(result: Any) -> str | None:
    text = result.content[0].text if result.content else ""
    found = re.search(r'code="([A-Z_]+)"', text)
    return found.group(1) if found else None


def test_the_metadata_advertises_the_specs_scopes(vault_server: str) -> None:
    metadata = httpx.get(origin_of(vault_server) + "/.well-known/oauth-protected-resource", timeout=30).json()
    assert metadata["scopes_supported"] == ["notes:read", "notes:write"]


async def test_handshake_listing_shows_only_what_the_caller_may_call(vault_server: str, issuer: Issuer) -> None:
    async with bearer_client(vault_server, issuer.mint(scope="notes:read")) as client:
        reader = [t.name for t in (await client.list_tools()).tools]
    writer_token = issuer.mint(scope="notes:read notes:write", groups=["owner"])
    async with bearer_client(vault_server, writer_token) as client:
        writer = [t.name for t in (await client.list_tools()).tools]
    no_role = issuer.mint(scope="notes:read notes:write", groups=["guest"])
    async with bearer_client(vault_server, no_role) as client:
        roleless = [t.name for t in (await client.list_tools()).tools]
    assert reader == ["note_get", "note_count"]
    assert writer == ["note_get", "note_delete", "note_count"]
    assert roleless == ["note_get", "note_count"]  # the scope without one of the roles is not enough


async def test_a_call_without_the_scope_is_forbidden_naming_it(vault_server: str, issuer: Issuer) -> None:
    async with bearer_client(vault_server, issuer.mint(scope="notes:write", groups=["admin"])) as client:
        refused = await client.call_tool("note_get", {"id": "n-1"})
        counted = await client.call_tool("note_count", {})
    assert refused.is_error and tool_error_code(refused) == "FORBIDDEN"
    text = refused.content[0].text
    assert '"notes:read"' in text and "buy milk" not in text and refused.structured_content is None
    assert not counted.is_error


@pytest.mark.parametrize(
    ("claims", "allowed"),
    [
        ({"scope": "notes:write", "groups": ["admin"]}, True),
        ({"scope": "notes:write", "groups": "guest owner"}, True),  # a space-separated roles claim
        ({"scope": "notes:write", "groups": ["guest"]}, False),
        ({"scope": "notes:write", "roles": ["admin"]}, False),  # roles_claim = "groups": another claim is no role
        ({"scope": "notes:read", "groups": ["admin"]}, False),
    ],
)
async def test_modern_lists_every_tool_and_refuses_on_call(
    vault_server: str, issuer: Issuer, claims: dict[str, Any], allowed: bool
) -> None:
    async with bearer_client(vault_server, issuer.mint(**claims), MODERN) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("note_delete", {"id": "n-missing"})
    assert names == ["note_get", "note_delete", "note_count"]  # stable, whoever asks
    assert result.is_error is not allowed, result
    if not allowed:
        assert tool_error_code(result) == "FORBIDDEN"


async def test_without_auth_over_http_a_required_tool_is_refused(vault: Path) -> None:
    with http_server(vault, package="vault_server") as url:
        async with connect(url, LEGACY) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("note_get", {"id": "n-1"})
    assert names == ["note_count"]
    assert tool_error_code(result) == "FORBIDDEN" and "without authentication" in result.content[0].text


async def test_in_process_the_local_user_may_call_everything(tmp_path: Path) -> None:
    with built_server(CASES / "auth-requires" / "spec.toml", tmp_path / "out") as built:
        async with connect(built.create_server(), LEGACY) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("note_get", {"id": "n-1"})
    assert names == ["note_get", "note_delete", "note_count"]
    assert not result.is_error, result


# --- [auth] tenant_claim: identity on ctx, workflow state per tenant ----------------------------------------


@pytest.fixture(scope="module")
def desk_server(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[str]:
    out = tmp_path_factory.mktemp("desk") / "out"
    build(CASES / "auth-tenant-workflow" / "spec.toml", out)
    with http_server(out, *jwt_options(issuer), package="desk_server") as url:
        yield url


async def test_handlers_see_the_callers_identity(desk_server: str, issuer: Issuer) -> None:
    token = issuer.mint(sub="sam", org_id="acme", roles=["support"], scope="tickets:read")
    async with bearer_client(desk_server, token, MODERN) as client:
        result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    shown = json.JSONDecoder().raw_decode(result.content[0].text)[0]
    assert shown == {"subject": "sam", "tenant": "acme", "roles": ["support"], "scopes": ["tickets:read"]}


def test_a_token_without_the_tenant_claim_is_refused(desk_server: str, issuer: Issuer) -> None:
    assert_unauthorized(post_initialize(desk_server, issuer.mint(sub="sam")), desk_server)


async def test_tenant_b_cannot_use_tenant_as_handle(desk_server: str, issuer: Issuer) -> None:
    alice, mallory = issuer.mint(sub="alice", org_id="acme"), issuer.mint(sub="mallory", org_id="globex")
    async with bearer_client(desk_server, alice, MODERN) as client:
        started = await client.call_tool("ticket_start", {})
        handle = started.structured_content["workflow_id"]
    async with bearer_client(desk_server, mallory, MODERN) as client:
        peeked = await client.call_tool("ticket_status", {"workflow_id": handle})
        closed = await client.call_tool("ticket_close", {"workflow_id": handle})
        unknown = await client.call_tool("ticket_status", {"workflow_id": "no-such-handle-at-all"})
    same_tenant_other_user = issuer.mint(sub="bob", org_id="acme")
    async with bearer_client(desk_server, same_tenant_other_user, MODERN) as client:
        status = await client.call_tool("ticket_status", {"workflow_id": handle})
        closing = await client.call_tool("ticket_close", {"workflow_id": handle})
    # Tenant B gets exactly what a handle that never existed gets: nothing says the handle is real.
    assert peeked.is_error and closed.is_error
    assert peeked.content[0].text == unknown.content[0].text
    assert "Unknown or expired workflow_id" in closed.content[0].text
    assert not status.is_error and status.structured_content["state"] == "open", status
    assert not closing.is_error, closing


# --- the official TypeScript SDK client ------------------------------------------------------------------

# Without a token the client's connect fails 401 and the SDK's own discovery reads the metadata the 401 points
# at; with a read-only token it lists what it may call and is refused the rest.
TS_CLIENT = """
const [, , sdk, url, token] = process.argv;
const { Client } = await import(sdk + "/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/client/streamableHttp.js");
const { discoverOAuthProtectedResourceMetadata } = await import(sdk + "/client/auth.js");
const report = {};
try {
  await new Client({ name: "anonymous", version: "1.0.0" }).connect(new StreamableHTTPClientTransport(new URL(url)));
  report.anonymous = "connected";
} catch (error) {
  report.anonymous = { code: error.code, message: String(error) };
}
const metadata = await discoverOAuthProtectedResourceMetadata(new URL(url));
report.metadata = metadata;
const client = new Client({ name: "reader", version: "1.0.0" });
const headers = { Authorization: `Bearer ${token}` };
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
report.tools = (await client.listTools()).tools.map((tool) => tool.name);
report.get = await client.callTool({ name: "note_get", arguments: { id: "n-1" } });
report.delete = await client.callTool({ name: "note_delete", arguments: { id: "n-1" } });
await client.close();
console.log(JSON.stringify(report));
"""


def test_the_typescript_sdk_client_with_and_without_a_token(vault_server: str, issuer: Issuer, tmp_path: Path) -> None:
    from tests.test_official_tooling import INSTALL_HINT, NODE_MODULES, node_env, tooling

    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    script = tmp_path / "client.mjs"
    script.write_text(TS_CLIENT, encoding="utf-8")
    token = issuer.mint(scope="notes:read", sub="ts-reader")
    command = [str(tools.node), str(script), sdk.as_uri(), vault_server, token]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout)
    assert report["anonymous"] != "connected" and report["anonymous"]["code"] == 401, report["anonymous"]
    assert "invalid_token" in report["anonymous"]["message"]
    assert report["metadata"]["resource"] == vault_server
    assert report["metadata"]["scopes_supported"] == ["notes:read", "notes:write"]
    assert report["tools"] == ["note_get", "note_count"]
    assert report["get"]["isError"] is False
    assert report["get"]["structuredContent"]["data"]["text"] == "buy milk"  # on main: ["data"]["text"] (the envelope)
    assert report["delete"]["isError"] is True and 'code="FORBIDDEN"' in report["delete"]["content"][0]["text"]
