"""Every way in passes `requires` and the audit log: resources, prompts and completion, attacked from outside.

A vault server whose `secret.get` needs `vault:read` also serves the secrets as a resource template and a prompt,
each declaring the same `requires`. Each server here is `python -m vault_server` as a real process: over HTTP with
`--auth tokens` (a token without the scope, one with it), over HTTP without `--auth` (anyone), and over stdio (the
local user). A caller without the scope is refused before any handler runs, learns no secret (nor any
completion value), is not shown what it may not read in the handshake era, and every request, refused or not,
leaves an audit line naming its method and caller. A resource that reads what only a guarded tool shows, with no
`requires` of its own, does not build (FG168).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.build import build, write_spec
from tests.support.client import LEGACY, MODERN, MODES, connect, stdio_params
from tests.support.processes import http_server, run_process

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

SPEC = """
[server]
name = "vault"
version = "1.0.0"

[auth]
tenant_claim = "org"
scopes = { "vault:read" = "Read secrets" }

[models.Secret.fields]
id = "string"
kind = { type = "enum", values = ["api", "db"] }
value = "string"

[models.Note.fields]
id = "string"
text = "string"

[tools."secret.get"]
kind = "query"
returns = "Secret"
requires = { scopes = ["vault:read"] }
[tools."secret.get".input]
id = "string"

[tools."note.get"]
kind = "query"
returns = "Note"
[tools."note.get".input]
id = "string"

[resources.secret]
uri = "secret://{kind}/{id}"
presenter = "Secret"
requires = { scopes = ["vault:read"] }
input = { kind = { type = "enum", values = ["api", "db"] } }

[resources.note]
uri = "note://{id}"
presenter = "Note"

[prompts.rotate]
description = "Rotate a secret."
arguments = { kind = { type = "enum", values = ["api", "db"] } }
template = "Rotate the {kind} secret."
requires = { scopes = ["vault:read"] }
"""

HANDLERS = """
from typing import Any

SECRETS = {"s1": {"id": "s1", "kind": "api", "value": "SECRET-VALUE-ACME", "tenant": "acme"}}


def _secret(id: str, ctx: Any) -> Any:
    found = SECRETS.get(id)
    tenant = ctx.identity.tenant if ctx.identity is not None else None
    if found is None or (tenant is not None and found["tenant"] != tenant):
        return None
    return found


def secret_get(args: Any, ctx: Any) -> Any:
    return _secret(args.id, ctx)


def read_secret(args: Any, ctx: Any) -> Any:
    return _secret(args.id, ctx)


def note_get(args: Any) -> Any:
    return {"id": args.id, "text": "a note"}


def read_note(args: Any) -> Any:
    return {"id": args.id, "text": "a note"}
"""

SECRET_VALUE = "SECRET-VALUE-ACME"
SECRET_URI = "secret://api/s1"
FORBIDDEN = -32003


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vault") / "out"
    build(SPEC, out, handlers=HANDLERS)
    return out


def token_entry(token: str, subject: str, scopes: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = []\nscopes = {scopes}\ntenant = "acme"\n'


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "calls.jsonl"


@pytest.fixture(scope="module")
def auth_server(built: Path, audit_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    tokens.write_text(
        token_entry("tok-noscope", "mallory", "[]") + token_entry("tok-reader", "reader", '["vault:read"]'),
        encoding="utf-8",
    )
    tokens.chmod(0o600)
    options = ("--auth", "tokens", "--auth-tokens-file", str(tokens), "--audit-log", str(audit_path))
    with http_server(built, *options, package="vault_server") as url:
        yield url


def bearer(url: str, token: str | None, mode: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
    return http, connect(streamable_http_client(url, http_client=http), mode)


def audit_lines(path: Path, subject: str | None) -> list[dict[str, Any]]:
    """The end lines of `subject`'s requests (each has a begin line before it, with the same request id)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    begun = {line["request"] for line in lines if line["phase"] == "begin"}
    ended = [line for line in lines if line["phase"] == "end" and line["subject"] == subject]
    assert all(line["request"] in begun for line in ended)
    return ended


async def attack(client: Any) -> list[MCPError]:
    """resources/read, prompts/get and both completions of what `requires` guards; every one must be refused."""
    refusals = []
    for attempt in (
        client.read_resource(SECRET_URI),
        client.read_resource("secret://api/no-such-secret"),  # refused before the handler: no oracle either
        client.get_prompt("rotate", {"kind": "api"}),
        client.complete(types.PromptReference(type="ref/prompt", name="rotate"), {"name": "kind", "value": ""}),
        client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="secret://{kind}/{id}"),
            {"name": "kind", "value": ""},
        ),
    ):
        with pytest.raises(MCPError) as refused:
            await attempt
        refusals.append(refused.value)
    return refusals


def assert_refused(refusals: list[MCPError]) -> None:
    for error in refusals:
        assert error.code == FORBIDDEN, error
        assert 'code="FORBIDDEN"' in error.message
        text = error.message + json.dumps(error.data)
        for leak in (SECRET_VALUE, "api", "db"):  # neither the secret nor an enum value a completion would give
            assert leak not in text.replace("secret://api/", ""), text


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_without_the_scope_reads_nothing_and_is_audited(
    auth_server: str, audit_path: Path, mode: str
) -> None:
    before = len(audit_lines(audit_path, "mallory"))
    http, client = bearer(auth_server, "tok-noscope", mode)
    async with http, client:
        refusals = await attack(client)
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        note = await client.read_resource("note://n1")  # what no requires guards stays readable
    assert_refused(refusals)
    assert 'You may not use resource "secret": it needs the scope "vault:read"' in refusals[0].message
    assert 'You may not use prompt "rotate"' in refusals[2].message
    assert "a note" in note.contents[0].text  # type: ignore[union-attr]
    listed = {t.name for t in templates}, {p.name for p in prompts}
    # The handshake era lists only what the caller may use; 2026-07-28 lists the same for everyone.
    assert listed == (({"note"}, set()) if mode == LEGACY else ({"note", "secret"}, {"rotate"}))
    lines = audit_lines(audit_path, "mallory")[before:]
    assert [(line["method"], line["name"], line["outcome"]) for line in lines] == [
        ("resources/read", "secret", "FORBIDDEN"),
        ("resources/read", "secret", "FORBIDDEN"),
        ("prompts/get", "rotate", "FORBIDDEN"),
        ("completion/complete", "rotate", "FORBIDDEN"),
        ("completion/complete", "secret://{kind}/{id}", "FORBIDDEN"),
        ("resources/read", "note", "ok"),
    ]
    assert all(line["tenant"] == "acme" for line in lines)
    assert (
        lines[0]["arguments_sha256"]
        == hashlib.sha256(json.dumps({"uri": SECRET_URI}, separators=(",", ":")).encode()).hexdigest()
    )
    assert "s1" not in audit_path.read_text(encoding="utf-8")


async def test_a_token_with_the_scope_reads_through_every_way_in(auth_server: str, audit_path: Path) -> None:
    before = len(audit_lines(audit_path, "reader"))
    http, client = bearer(auth_server, "tok-reader", LEGACY)
    async with http, client:
        read = await client.read_resource(SECRET_URI)
        prompt = await client.get_prompt("rotate", {"kind": "db"})
        done = await client.complete(
            types.PromptReference(type="ref/prompt", name="rotate"), {"name": "kind", "value": "d"}
        )
        templates = (await client.list_resource_templates()).resource_templates
    assert SECRET_VALUE in read.contents[0].text  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Rotate the db secret."  # type: ignore[union-attr]
    assert done.completion.values == ["db"]
    assert {t.name for t in templates} == {"note", "secret"}
    lines = audit_lines(audit_path, "reader")[before:]
    assert [(line["method"], line["outcome"]) for line in lines] == [
        ("resources/read", "ok"),
        ("prompts/get", "ok"),
        ("completion/complete", "ok"),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_over_http_without_auth_requires_refuses_everyone(built: Path, tmp_path: Path, mode: str) -> None:
    path = tmp_path / "open.jsonl"
    with http_server(built, "--audit-log", str(path), package="vault_server") as url:
        http, client = bearer(url, None, mode)
        async with http, client:
            refusals = await attack(client)
            tool = await client.call_tool("secret.get", {"id": "s1"})
    assert_refused(refusals)
    assert tool.is_error and SECRET_VALUE not in str(tool)
    lines = audit_lines(path, None)
    assert [(line["method"], line["outcome"]) for line in lines] == [
        ("resources/read", "FORBIDDEN"),
        ("resources/read", "FORBIDDEN"),
        ("prompts/get", "FORBIDDEN"),
        ("completion/complete", "FORBIDDEN"),
        ("completion/complete", "FORBIDDEN"),
        ("tools/call", "FORBIDDEN"),
    ]


async def test_over_stdio_the_local_user_reads_and_every_request_is_audited(built: Path, tmp_path: Path) -> None:
    path = tmp_path / "stdio.jsonl"
    params = stdio_params(built, "--audit-log", str(path), package="vault_server")
    async with connect(params, MODERN) as client:
        read = await client.read_resource(SECRET_URI)
        prompt = await client.get_prompt("rotate", {"kind": "api"})
        done = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="secret://{kind}/{id}"),
            {"name": "kind", "value": ""},
        )
        with pytest.raises(MCPError):
            await client.read_resource("nothing://here")
        with pytest.raises(MCPError):
            await client.get_prompt("rotate", {"kind": "nonsense-value"})
        with pytest.raises(MCPError):
            await client.call_tool("probe.for-a-tool-name", {"id": "guess"})
    assert SECRET_VALUE in read.contents[0].text  # type: ignore[union-attr]
    assert prompt.messages and done.completion.values == ["api", "db"]
    lines = audit_lines(path, None)
    assert [(line["method"], line["name"], line["outcome"]) for line in lines] == [
        ("resources/read", "secret", "ok"),
        ("prompts/get", "rotate", "ok"),
        ("completion/complete", "secret://{kind}/{id}", "ok"),
        ("resources/read", None, "NOT_FOUND"),
        ("prompts/get", "rotate", "VALIDATION_ERROR"),
        ("tools/call", None, "NOT_FOUND"),  # an unknown tool is audited too, without the name the client sent
    ]
    text = path.read_text(encoding="utf-8")
    assert "nonsense-value" not in text and "nothing://here" not in text and "probe.for" not in text


# --- build time: a resource without requires over what only a guarded tool shows -------------------------------


def test_a_resource_reading_a_guarded_model_without_requires_does_not_build(tmp_path: Path) -> None:
    open_resource = SPEC.replace(
        'presenter = "Secret"\nrequires = { scopes = ["vault:read"] }\n', 'presenter = "Secret"\n'
    )
    assert open_resource != SPEC
    spec = write_spec(tmp_path / "refused", open_resource)
    done = run_process("build", spec, "-o", tmp_path / "refused" / "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "error[FG168]" in done.stderr
    assert 'resource "secret" has no requires, but reads model Secret' in done.stderr
    assert 'hint: add requires = { scopes = ["vault:read"] } as the tool has' in done.stderr
    assert not (tmp_path / "refused" / "out").exists()
    # Open on purpose: `requires = {}` is the author saying so.
    deliberate = open_resource.replace('presenter = "Secret"\n', 'presenter = "Secret"\nrequires = {}\n')
    spec = write_spec(tmp_path / "open", deliberate)
    done = run_process("build", spec, "-o", tmp_path / "open" / "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
