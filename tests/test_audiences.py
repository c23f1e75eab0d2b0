"""One entity, several audiences: `returns_for_role`, `ctx.*` in expressions and `--audit-log`, from outside.

The billing server runs as a real process over streamable HTTP with `--auth jwt` (the JWKS served on 127.0.0.1
by tests/test_auth_http.py's issuer fixture, tokens minted per test) or `--auth tokens`: `invoice.get` shows an
admin InvoiceAdmin, a support agent InvoiceSupport (id and status only), everyone else (and a caller without
identity) Invoice. Every result must validate against the tool's one outputSchema (the union of the audiences'
envelopes), for jsonschema here and for the TypeScript SDK's Ajv, and no model-hidden field reaches any audience.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.build import SPECS, build, built_server
from tests.support.cases import CASES_DIR as CASES
from tests.support.client import LEGACY, MODERN, connect, stdio
from tests.support.processes import http_server, server_env
from tests.test_auth_http import Issuer, bearer_client, entry, issuer, jwt_options, tokens_file  # noqa: F401

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ADMIN_FIELDS = {"id", "customer_id", "customer", "lines", "amount_cents", "status", "due_date", "created_at"}
SUPPORT_FIELDS = {"id", "status"}
DEFAULT_FIELDS = {"id", "customer", "lines", "amount_cents", "status", "due_date"}
# What the billing handlers hold of inv-1 and no presenter may show: its hidden fields, and the card number
# redact_pii masks (in the result's text, in any block, under any audience).
HIDDEN_VALUES = ("internal_notes", "legal says hold", "cost_basis", "800.5", "4111111111111111", "ssn")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("audiences") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "calls.jsonl"


@pytest.fixture(scope="module")
def server(built: Path, issuer: Issuer, audit_path: Path) -> Iterator[str]:  # noqa: F811
    with http_server(built, *jwt_options(issuer), "--audit-log", str(audit_path)) as url:
        yield url


def data_of(result: Any) -> Any:
    """The presented object of a presenter result (the structured envelope's `data`)."""
    return result.structured_content["data"]


def everything_sent(result: Any) -> str:
    texts = [block.text for block in result.content if hasattr(block, "text")]
    return "\n".join(texts) + json.dumps(result.structured_content)


async def get_invoice(url: str, token: str, mode: str = LEGACY) -> tuple[Any, dict[str, Any]]:
    async with bearer_client(url, token, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("invoice.get", {"id": "inv-1"})
    assert not result.is_error, result
    schema = tools["invoice.get"].output_schema
    assert schema is not None
    return result, schema


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_an_admin_sees_the_admin_presenter(server: str, issuer: Issuer, mode: str) -> None:  # noqa: F811
    result, _ = await get_invoice(server, issuer.mint(sub="ada", roles=["admin"]), mode)
    assert set(data_of(result)) == ADMIN_FIELDS
    assert data_of(result)["created_at"].startswith("2026-09-01")
    rules = result.structured_content["rules"]
    # rules_when "'admin' in ctx.roles" (a text reading ctx.subject: the audiences case, below)
    assert "You are serving an administrator: amounts and dates may be discussed and changed." in rules
    assert "Never quote amounts to customers." not in rules


async def test_support_sees_only_id_and_status(server: str, issuer: Issuer) -> None:  # noqa: F811
    result, _ = await get_invoice(server, issuer.mint(sub="sam", roles=["support"]))
    assert data_of(result) == {"id": "inv-1", "status": "overdue"}
    rules = result.structured_content["rules"]
    assert "Never quote amounts to customers." in rules
    # rules_when "'support' in ctx.roles and status == 'overdue'"
    assert "Invoice inv-1 is overdue: hand the customer over to billing, do not negotiate." in rules
    assert "1234" not in result.content[0].text  # no amount, in any form


async def test_a_caller_with_no_listed_role_gets_returns(server: str, issuer: Issuer) -> None:  # noqa: F811
    result, _ = await get_invoice(server, issuer.mint(sub="eve", roles=["auditor"]))
    assert set(data_of(result)) == DEFAULT_FIELDS
    assert not any(
        "administrator" in rule or "hand the customer" in rule for rule in result.structured_content["rules"]
    )


async def test_the_first_matching_role_in_the_tables_order_wins(server: str, issuer: Issuer) -> None:  # noqa: F811
    # The token lists support first; the spec's table lists admin first: the table's order decides.
    result, _ = await get_invoice(server, issuer.mint(sub="both", roles=["support", "admin"]))
    assert set(data_of(result)) == ADMIN_FIELDS


@pytest.mark.parametrize("roles", [["admin"], ["support"], ["auditor"], []])
async def test_every_audience_validates_and_hides_what_is_hidden(
    server: str,
    issuer: Issuer,  # noqa: F811
    roles: list[str],
) -> None:
    result, schema = await get_invoice(server, issuer.mint(sub="v", roles=roles))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(result.structured_content, schema, cls=jsonschema.Draft202012Validator)
    sent = everything_sent(result)
    for value in HIDDEN_VALUES:
        assert value not in sent, (roles, value)


async def test_the_output_schema_is_the_union_of_the_audiences(server: str, issuer: Issuer) -> None:  # noqa: F811
    _, schema = await get_invoice(server, issuer.mint())
    audiences = schema["properties"]["data"]["anyOf"]
    shown = [set(a["properties"]) for a in audiences]
    assert shown == [DEFAULT_FIELDS, ADMIN_FIELDS, SUPPORT_FIELDS]
    assert all(a["additionalProperties"] is False for a in audiences)
    # A support result must not pass as another audience's: the union stays as strict as each member.
    support_only = {"data": {"id": "inv-1", "status": "overdue"}, "rules": [], "suggestions": []}
    jsonschema.validate(support_only, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**support_only, "data": {"id": "inv-1", "status": "overdue", "cost_basis": 1}}, schema)


async def test_static_tokens_choose_the_audience_too(built: Path, tmp_path: Path) -> None:
    path = tokens_file(
        tmp_path,
        entry("tok-admin", "ada", '["admin"]'),
        entry("tok-support", "sam", '["support"]'),
    )
    with http_server(built, "--auth", "tokens", "--auth-tokens-file", str(path)) as url:
        admin, _ = await get_invoice(url, "tok-admin")
        support, _ = await get_invoice(url, "tok-support")
    assert set(data_of(admin)) == ADMIN_FIELDS
    assert set(data_of(support)) == SUPPORT_FIELDS


async def test_without_identity_the_default_presenter_and_empty_ctx(tmp_path: Path) -> None:
    # In-process (as over stdio): no identity, so `returns`, and no rule conditioned on ctx.roles.
    with built_server(SPECS / "billing.toml", tmp_path / "out") as server:
        async with connect(server.create_server(), LEGACY) as client:
            result = await client.call_tool("invoice.get", {"id": "inv-1"})
    assert set(data_of(result)) == DEFAULT_FIELDS
    assert not any("administrator" in rule for rule in result.structured_content["rules"])


# --- --audit-log ------------------------------------------------------------------------------------------


def canonical_digest(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def test_the_audit_log_names_callers_and_outcomes_never_values(
    server: str,
    issuer: Issuer,  # noqa: F811
    audit_path: Path,
) -> None:
    secret_id = "inv-secret-4242"
    update = {"id": "inv-2", "status": "review", "due_date": "2031-01-02"}
    async with bearer_client(server, issuer.mint(sub="auditee", roles=["support"], scope="invoices:read")) as client:
        missing = await client.call_tool("invoice.get", {"id": secret_id})
        refused = await client.call_tool("invoice.update", update)
    assert missing.is_error and refused.is_error
    lines = [json.loads(line) for line in audit_path.read_text(encoding="utf-8").splitlines()]
    mine = [line for line in lines if line["subject"] == "auditee" and line["phase"] == "end"]
    assert [(line["method"], line["name"], line["outcome"]) for line in mine] == [
        ("tools/call", "invoice.get", "NOT_FOUND"),
        ("tools/call", "invoice.update", "FORBIDDEN"),
    ]
    assert mine[0]["arguments_sha256"] == canonical_digest({"id": secret_id})
    assert mine[1]["arguments_sha256"] == canonical_digest(update)
    keys = {"time", "request", "phase", "subject", "tenant", "method", "name", "outcome", "arguments_sha256"}
    assert all(set(line) == keys for line in mine)
    assert all(line["tenant"] is None and line["time"].endswith("Z") for line in mine)
    text = audit_path.read_text(encoding="utf-8")
    for value in (secret_id, "2031-01-02", "review"):
        assert value not in text


async def test_over_stdio_the_audit_log_has_no_caller(built: Path, tmp_path: Path) -> None:
    path = tmp_path / "stdio.jsonl"
    async with stdio(built, MODERN, "--audit-log", str(path)) as client:
        await client.call_tool("invoice.get", {"id": "inv-2"})
        await client.call_tool("invoice.update", {"id": "inv-2", "status": "nonsense"})
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line["phase"] == "end"]
    assert [(line["subject"], line["name"], line["outcome"]) for line in lines] == [
        (None, "invoice.get", "ok"),
        (None, "invoice.update", "VALIDATION_ERROR"),
    ]
    assert "nonsense" not in path.read_text(encoding="utf-8")


def test_an_unwritable_audit_log_is_a_usage_error(built: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "billing_server", "--audit-log", str(tmp_path / "no" / "such" / "dir" / "log")],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=server_env(built),
    )
    assert done.returncode == 2, done.stderr
    assert "--audit-log: cannot append to" in done.stderr


# --- the official TypeScript SDK client (Ajv validates structuredContent against the outputSchema) ----------

TS_CLIENT = """
const [, , sdk, url, ...tokens] = process.argv;
const { Client } = await import(sdk + "/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/client/streamableHttp.js");
const report = [];
for (const token of tokens) {
  const client = new Client({ name: "audience", version: "1.0.0" });
  const headers = { Authorization: `Bearer ${token}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  await client.listTools();  // the client caches each tool's output validator from the listing
  report.push(await client.callTool({ name: "invoice.get", arguments: { id: "inv-1" } }));
  await client.close();
}
console.log(JSON.stringify(report));
"""


def test_the_typescript_sdk_accepts_every_audience(server: str, issuer: Issuer, tmp_path: Path) -> None:  # noqa: F811
    from tests.test_official_tooling import INSTALL_HINT, NODE_MODULES, node_env, tooling

    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    script = tmp_path / "client.mjs"
    script.write_text(TS_CLIENT, encoding="utf-8")
    tokens = [issuer.mint(sub="ts", roles=roles) for roles in (["admin"], ["support"], [])]
    command = [str(tools.node), str(script), sdk.as_uri(), server, *tokens]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    admin, support, default = json.loads(done.stdout)
    assert [r["isError"] for r in (admin, support, default)] == [False, False, False]
    assert set(admin["structuredContent"]["data"]) == ADMIN_FIELDS
    assert support["structuredContent"]["data"] == {"id": "inv-1", "status": "overdue"}
    assert set(default["structuredContent"]["data"]) == DEFAULT_FIELDS


# --- a collection per audience, ctx.tenant and ctx.scopes (tests/cases/audiences) --------------------------


def tenant_entry(token: str, subject: str, roles: list[str], tenant: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return (
        f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\nroles = {json.dumps(roles)}\n'
        f'scopes = ["tickets:read"]\ntenant = "{tenant}"\n'
    )


async def test_collections_choose_per_caller_and_expressions_read_the_tenant(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build(CASES / "audiences" / "spec.toml", out)
    path = tokens_file(
        tmp_path,
        tenant_entry("tok-lead", "lee", ["lead"], "acme"),
        tenant_entry("tok-agent", "ann", ["agent"], "acme"),
    )
    with http_server(out, "--auth", "tokens", "--auth-tokens-file", str(path), package="helpdesk_server") as url:
        async with bearer_client(url, "tok-lead") as client:
            lead = await client.call_tool("ticket.get", {"id": "t-1"})
            lead_list = await client.call_tool("ticket.list", {})
        async with bearer_client(url, "tok-agent") as client:
            agent = await client.call_tool("ticket.get", {"id": "t-1"})
            agent_list = await client.call_tool("ticket.list", {})
            listed = {t.name: t for t in (await client.list_tools()).tools}
    # lead: TicketManager (the table's second role), every visible field, the email redacted
    assert data_of(lead) == {"id": "t-1", "subject": "Printer", "requester_email": "[REDACTED]", "priority": 3}
    assert "You are lee of acme; your scopes: tickets:read." in lead.structured_content["rules"]
    assert "Ticket t-1 needs a lead's decision." in lead.structured_content["rules"]
    assert data_of(agent) == {"id": "t-1", "subject": "Printer"}
    # ticket.list has only agent in its table: the lead gets `returns` (Ticket[]), the agent TicketAgent[]
    assert data_of(lead_list) == [{"id": "t-1", "subject": "Printer", "priority": 3}]
    assert data_of(agent_list) == [{"id": "t-1", "subject": "Printer"}]
    assert not any("Shown without a caller" in rule for rule in lead_list.structured_content["rules"])
    for result, tool in (
        (lead, "ticket.get"),
        (agent, "ticket.get"),
        (lead_list, "ticket.list"),
        (agent_list, "ticket.list"),
    ):
        jsonschema.validate(result.structured_content, listed[tool].output_schema)
        assert "internal_notes" not in everything_sent(result) and "a@example.com" not in everything_sent(result)


async def test_without_identity_ctx_is_empty_and_conditions_on_it_false(tmp_path: Path) -> None:
    with built_server(CASES / "audiences" / "spec.toml", tmp_path / "out") as server:
        async with connect(server.create_server(), MODERN) as client:
            result = await client.call_tool("ticket.list", {})
    assert "Shown without a caller: the local user." in result.structured_content["rules"]  # ctx.subject == null
    assert data_of(result) == [{"id": "t-1", "subject": "Printer", "priority": 3}]


# --- the runtime pieces, as source ---------------------------------------------------------------------------


def test_by_role_and_ctx_read_only_the_identity_being_presented() -> None:
    from fusiongen.runtime._identity import Identity, caller_value, presenting_for
    from fusiongen.runtime._runtime import by_role

    def presenter(name: str) -> Any:
        return lambda raw: name

    present = by_role(presenter("default"), (("admin", presenter("admin")), ("support", presenter("support"))))
    assert present({}) == "default" and caller_value("roles") == [] and caller_value("subject") is None
    sam = Identity("sam", frozenset({"support", "admin"}), frozenset({"b", "a"}), "acme")
    with presenting_for(sam):
        assert present({}) == "admin"  # the table's order, not the token's
        assert caller_value("scopes") == ["a", "b"] and caller_value("tenant") == "acme"
        assert caller_value("*") == {
            "subject": "sam",
            "roles": ["admin", "support"],
            "scopes": ["a", "b"],
            "tenant": "acme",
        }
        with presenting_for(Identity("eve", frozenset({"auditor"}), frozenset())):
            assert present({}) == "default"
        assert present({}) == "admin"  # restored on leaving the inner call
    assert present({}) == "default" and caller_value("subject") is None
