"""The client matrix, continued: six more agent clients, each from its own virtualenv, on the reference server.

tests/test_client_matrix.py drives pydantic-ai, fastmcp, langchain and the TypeScript SDK; here the clients are
openai-agents, google-adk, llama-index-tools-mcp, smolagents (mcpadapt), autogen-ext and the official mcp 1.x
`ClientSession`. Each runs in a driver script (tests/support/agents_driver.py on mcp 2.x in .venv-agents,
tests/support/agents_mcp1_driver.py on mcp 1.30 in .venv-agents-mcp1; `make agents` builds both), which follows
one plan (tests/support/agent_script.py) and prints a JSON report of what the client hands the model. Where the
client has an agent loop, its model is a script (no LLM, no network) that records what it is handed.

One driver run per cell (client, transport, era, names) serves every check of that cell; one build and one HTTP
server per naming serve the module. The checks, and what does not apply to which client (and why), are tabled
in docs/spec.md §9.4. A missing virtualenv fails these tests, never skips them.
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

from tests.support.build import ROOT, SPECS, build, imported, write_spec
from tests.support.processes import http_server

pytestmark = pytest.mark.timeout(300)

SUPPORT = ROOT / "tests" / "support"
VENVS = {"mcp2": ROOT / ".venv-agents", "mcp1": ROOT / ".venv-agents-mcp1"}
DRIVERS = {"mcp2": SUPPORT / "agents_driver.py", "mcp1": SUPPORT / "agents_mcp1_driver.py"}
HINT = "run `make agents` (the agent clients' virtualenvs, from tests/support/agents*-requirements.txt)"
LEGACY, MODERN = "legacy", "2026-07-28"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what the OpenAI API accepts as a function name

# What every client must hand the model, and what it must never hand it (as in tests/test_client_matrix.py).
HIDDEN = ("078-05-1120", "legal says hold", "800.5", "internal_notes", "cost_basis", "credit_score", '"ssn"')
PII = ("ada@example.com", "alan@example.com", "4111111111111111", "5500000000000004", "4000056655665556")
RULES = (
    "CRITICAL: amount_cents is in CENTS. Divide by 100.",
    "Address customers by name; never ask them for their email here.",
    "Invoice inv-1 is overdue: offer a reminder before anything else.",
)
NOTICE = "Dataset truncated. 3 shown, 2 hidden. Use filters to narrow results."
USER_ONLY = "Contact: "  # the start of billing's audience = "user" block


@dataclass(frozen=True)
class Client:
    name: str
    venv: str  # key of VENVS
    eras: tuple[str, ...]  # the eras the client offers its users a way to speak
    session_walk: bool  # one session holds the workflow state across calls (no session per call)
    relists: bool  # the model is offered a list taken again after each call (else: the list of the start)


# mcp 1.x speaks the handshake era only; openai-agents on mcp 2.x always negotiates ("auto": 2026-07-28 with a
# generated server); google-adk speaks the handshake unless ADK_ENABLE_MCP_MODERN_PROTOCOL=1; llama-index's
# BasicMCPClient calls ClientSession.initialize, a session per call.
CLIENTS = {
    "openai-agents": Client("openai-agents", "mcp2", (MODERN,), session_walk=False, relists=True),
    "google-adk": Client("google-adk", "mcp2", (LEGACY, MODERN), session_walk=True, relists=True),
    "llama-index": Client("llama-index", "mcp2", (LEGACY,), session_walk=False, relists=False),
    "smolagents": Client("smolagents", "mcp1", (LEGACY,), session_walk=True, relists=False),
    "autogen": Client("autogen", "mcp1", (LEGACY,), session_walk=True, relists=True),
    "mcp-session": Client("mcp-session", "mcp1", (LEGACY,), session_walk=True, relists=True),
}
CELLS = [
    pytest.param(client, kind, era, id=f"{client}-{kind}-{era}")
    for client, spec in CLIENTS.items()
    for kind in ("stdio", "http")
    for era in spec.eras
]

# Checks that wait on issue 23's server-side fixes (made by the helper `names`), by check and client: left out
# here until they land on main, with the fix each waits on. Empty: every check is in.
WAITING: dict[str, dict[str, str]] = {"presented": {}, "session_walk": {}, "handle_walk": {}}


def ready(check: str, cells: list[Any]) -> list[Any]:
    return [c for c in cells if c.values[0] not in WAITING[check]]


def billing_variant(tmp: Path, tool_names: str | None) -> Path:
    """The reference spec, with `tool_names` set in [server] (None: as it is, the default), built into tmp/out."""
    text = (SPECS / "billing.toml").read_text(encoding="utf-8")
    if tool_names is not None:
        text = text.replace("[server]\n", f'[server]\ntool_names = "{tool_names}"\n', 1)
    handlers = (SPECS / "billing_handlers.py").read_text(encoding="utf-8")
    spec = write_spec(tmp, text, name="billing.toml", handlers=handlers)
    build(spec, tmp / "out")
    return tmp / "out"


@dataclass
class Served:
    out: Path
    names: dict[str, str]  # spec name → wire name
    url: str = ""


@pytest.fixture(scope="module")
def portable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    out = billing_variant(tmp_path_factory.mktemp("agents-portable"), None)
    with imported(out, "billing_server") as package:
        names = dict(package.server.TOOL_NAMES)
    served = Served(out, names)
    with http_server(out, log=out.parent / "http-server.log") as url:
        served.url = url
        yield served


@pytest.fixture(scope="module")
def dotted(tmp_path_factory: pytest.TempPathFactory) -> Served:
    out = billing_variant(tmp_path_factory.mktemp("agents-dotted"), "dotted")
    with imported(out, "billing_server") as package:
        return Served(out, dict(package.server.TOOL_NAMES))


def plan(names: dict[str, str], phases: tuple[str, ...]) -> dict[str, Any]:
    """The calls every client makes: the probe (a result, a collection, an invalid call, a domain error), the
    walk by handle (start, then submit → approve → discharge), the walk by the session's own workflow state."""
    n = names.get
    walk = [("invoice.submit", "inv-{}"), ("invoice.approve", "inv-{}"), ("invoice.discharge", "inv-{}")]
    every = {
        "probe": {
            "calls": [
                [n("invoice.get"), {"id": "inv-1"}],
                [n("invoice.list"), {}],
                [n("invoice.get"), {"idx": "inv-1"}],
                [n("invoice.get"), {"id": "inv-404"}],
            ]
        },
        "session": {"calls": [[n(tool), {"invoice_id": invoice.format(2)}] for tool, invoice in walk]},
        "handle": {"start": n("invoice.start"), "calls": [[n(t), {"invoice_id": i.format(4)}] for t, i in walk]},
    }
    return {"handle_key": "workflow_id", "phases": [{"name": name, **every[name]} for name in phases]}


_reports: dict[tuple[str, ...], dict[str, Any]] = {}


def run_client(client: str, kind: str, era: str, served: Served, phases: tuple[str, ...]) -> dict[str, Any]:
    """The driver's report for one cell, made once per module run."""
    key = (client, kind, era, str(served.out), *phases)
    if key in _reports:
        return _reports[key]
    spec = CLIENTS[client]
    python = VENVS[spec.venv] / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"{python} is missing: {HINT}", pytrace=False)
    target = ["http", served.url] if kind == "http" else ["stdio", sys.executable, str(served.out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADK_", "OPENAI_", "GOOGLE_"))}
    if client == "google-adk" and era == MODERN:
        env["ADK_ENABLE_MCP_MODERN_PROTOCOL"] = "1"
    command = [str(python), str(DRIVERS[spec.venv]), client, json.dumps(plan(served.names, phases)), *target]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    _reports[key] = report
    return report


def cell(client: str, kind: str, era: str, served: Served) -> dict[str, Any]:
    # The walk by handle first: a session that walked by its own state lists what that state allows.
    phases = ("probe", "handle", "session") if era == LEGACY and CLIENTS[client].session_walk else ("probe", "handle")
    return run_client(client, kind, era, served, phases)


def calls(report: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [call for call in report["calls"] if call["phase"] == phase]


# --- the checks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "kind", "era"), CELLS)
def test_lists_portable_names(client: str, kind: str, era: str, portable: Served) -> None:
    report = cell(client, kind, era, portable)
    offered = report["offered"][0]
    wire = portable.names
    assert {wire["invoice.get"], wire["invoice.list"], wire["invoice.start"], wire["invoice.submit"]} <= set(offered)
    assert all(OPENAI_NAME.match(name) for name in offered), offered
    # The tools the model is offered are the ones the server serves, under the same names.
    assert set(offered) <= set(wire.values()), offered
    listed = json.dumps(report["schemas"])
    for secret in HIDDEN:
        assert secret not in listed


@pytest.mark.parametrize(("client", "kind", "era"), ready("presented", CELLS))
def test_hands_the_model_the_presented_result(client: str, kind: str, era: str, portable: Served) -> None:
    get, listed, *_ = calls(cell(client, kind, era, portable), "probe")
    reminder = f"{portable.names['billing.remind']}: Send a payment reminder for inv-1"
    presented = [(get["handed"], False), (listed["handed"], True)]
    if client == "smolagents":
        # A client limitation (§9.4): smolagents requires every input whose schema lacks `nullable: true`, an
        # OpenAPI 3.0 keyword a portable JSON Schema does not carry (OpenAI's strict mode refuses unknown
        # keywords), so its own check refuses invoice_list without `status` before any call. Its first-block
        # perception is checked on invoice_get; the truncation notice cannot reach it through invoice_list.
        assert "Argument status is required" in listed["handed"], listed
        presented = presented[:1]
    for handed, collection in presented:
        assert handed, (get, listed)
        for secret in (*HIDDEN, *PII, USER_ONLY):
            assert secret not in handed, f"{secret!r} reached the model:\n{handed}"
        assert "[REDACTED]" in handed
        for rule in RULES:
            assert rule in handed, f"rule {rule!r} did not reach the model:\n{handed}"
        assert reminder in handed or json.dumps(reminder)[1:-1] in handed, handed
        assert (NOTICE in handed) is collection, handed


@pytest.mark.parametrize(("client", "kind", "era"), CELLS)
def test_hands_the_model_the_errors(client: str, kind: str, era: str, portable: Served) -> None:
    _, _, invalid, missing = calls(cell(client, kind, era, portable), "probe")
    get, listing = portable.names["invoice.get"], portable.names["invoice.list"]
    if client == "smolagents":  # it checks arguments against the input schema itself: the call is never made
        assert "Argument idx is not in the tool's input schema" in invalid["handed"], invalid
    else:
        assert f'<validation_error tool="{get}"><field name="idx">unknown field.' in _unescaped(invalid["handed"])
    handed = _unescaped(missing["handed"])
    assert f'<tool_error tool="{get}" code="NOT_FOUND"' in handed and f"<action>{listing}</action>" in handed
    for call in (invalid, missing):
        # None: the client does not flag errors apart from the text; llama-index's ToolOutput drops isError.
        assert call["error"] in ((False,) if client == "llama-index" else (None, True)), call


def _unescaped(text: str | None) -> str:
    """Clients that hand the model a JSON or repr dump of the result escape its quotes."""
    assert text, text
    return text.replace('\\"', '"').replace("\\'", "'")


# Not for clients that open a session per call (llama-index), nor on 2026-07-28, which has no session state.
SESSION_CELLS = [c for c in CELLS if c.values[2] == LEGACY and CLIENTS[str(c.values[0])].session_walk]


@pytest.mark.parametrize(("client", "kind", "era"), ready("session_walk", SESSION_CELLS))
def test_walks_by_the_session_state(client: str, kind: str, era: str, portable: Served) -> None:
    walk = calls(cell(client, kind, era, portable), "session")
    assert [call["tool"] for call in walk] == [
        portable.names[f"invoice.{step}"] for step in ("submit", "approve", "discharge")
    ]
    for call in walk:
        assert call["offered"], f"{call['tool']} was never offered: {walk}"
        assert f"{call['tool']}: done." in call["handed"], call


# Not for llama-index over stdio: BasicMCPClient starts a server process per call, so no state (no handle) lives
# from one call to the next.
HANDLE_CELLS = [c for c in CELLS if c.values[:2] != ("llama-index", "stdio")]


@pytest.mark.parametrize(("client", "kind", "era"), ready("handle_walk", HANDLE_CELLS))
def test_walks_by_handle(client: str, kind: str, era: str, portable: Served) -> None:
    walk = calls(cell(client, kind, era, portable), "handle")
    start, *steps = walk
    assert '"workflow": "invoice"' in _unescaped(start["handed"]), start
    assert [call["tool"] for call in steps] == [
        portable.names[f"invoice.{s}"] for s in ("submit", "approve", "discharge")
    ]
    for call in steps:
        assert call["offered"], f"{call['tool']} was never offered: {walk}"
        assert f"{call['tool']}: done." in call["handed"], call


@pytest.mark.parametrize(("client", "kind", "era"), CELLS)
def test_the_clients_converter_accepts_every_tool(client: str, kind: str, era: str, portable: Served) -> None:
    report = cell(client, kind, era, portable)
    schemas = report["schemas"]
    offered = set(report["offered"][0])
    assert offered <= set(schemas), offered - set(schemas)
    if client == "openai-agents":  # strict function calling: every schema converted
        assert all(schemas[name]["strict"] for name in offered), [n for n in offered if not schemas[n]["strict"]]
    if client == "llama-index":
        assert not [name for name in offered if "error" in schemas[name]], schemas
    if client == "autogen":
        for way in ("mcp_server_tools", "workbench"):
            converted = report["converters"][way]
            assert "error" not in converted, converted
            assert set(converted["convert_tools"]) >= offered - {"final_answer"}


# --- dotted names: an explicit choice, and what each client makes of it -----------------------------------

# What each client offers the model for a dotted tool name (docs/spec.md §9.4): all pass it on unchanged but
# smolagents (mcpadapt makes a Python identifier of it, dropping the dot).
DOTTED_OFFERED = {"smolagents": "invoiceget"}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_dotted_names_as_each_client_offers_them(client: str, dotted: Served) -> None:
    report = run_client(client, "stdio", CLIENTS[client].eras[0], dotted, ("probe",))
    offered = report["offered"][0]
    assert DOTTED_OFFERED.get(client, "invoice.get") in offered, offered
    get = report["calls"][0]
    if client == "smolagents":  # the model is offered another name than the one the server serves
        assert get["offered"] is False, get
    else:
        assert "CRITICAL: amount_cents is in CENTS. Divide by 100." in get["handed"], get
    # Dotted names are no OpenAI function names: openai-agents would send them as they are (the API refuses
    # them), autogen's converter refuses them before any request.
    assert not any(OPENAI_NAME.match(name) for name in offered if "." in name) and any("." in n for n in offered) is (
        client != "smolagents"
    )
    if client == "autogen":
        for way in ("mcp_server_tools", "workbench"):
            assert "Invalid name: invoice." in report["converters"][way]["error"], report["converters"]


# --- every input form, through each client's own converter ----------------------------------------------

# An input of every form a schema can take (docs/spec.md §9.2): a declared model (inlined, never a `$ref` a
# converter may drop with `$defs`), a list of them, a nullable model, a nullable string and enum (`anyOf` with
# null, never a `type` array, which autogen's mcp_server_tools refuses the whole server over), a default.
FORMS_SPEC = """
[server]
name = "billing"  # the drivers start billing_server on stdio

[models.Requester]
description = "Who asks."
[models.Requester.fields]
name = "string"
email = { type = "string", required = false, nullable = true }

[models.Ticket.fields]
id = "string"
summary = "string"
requester = "Requester"

[presenters.TicketCard]
model = "Ticket"

[tools."ticket.open"]
kind = "action"
description = "Open a ticket."
returns = "TicketCard"
[tools."ticket.open".input]
summary = "string"
requester = "Requester"
watchers = { type = "list", items = "Requester", required = false }
escalate_to = { type = "Requester", nullable = true }
note = { type = "string", nullable = true }
priority = { type = "enum", values = ["low", "high"], nullable = true }
tags = { type = "list", items = "string", default = [] }
"""
FORMS_HANDLERS = """
def ticket_open(args):
    return {"id": "t-1", "summary": args.summary, "requester": args.requester}
"""
# Not smolagents: mcpadapt gives every property without a top-level `type` the type "string", and smolagents then
# refuses a null or an object for it; the `type` array it would read is the form autogen refuses the whole
# server over (docs/spec.md §9.4).
FORMS_CLIENTS = [pytest.param(c, id=c) for c in ("autogen", "openai-agents", "llama-index")]


@pytest.fixture(scope="module")
def forms(tmp_path_factory: pytest.TempPathFactory) -> Served:
    tmp = tmp_path_factory.mktemp("agents-forms")
    build(write_spec(tmp, FORMS_SPEC, handlers=FORMS_HANDLERS), tmp / "out")
    with imported(tmp / "out", "billing_server") as package:
        return Served(tmp / "out", dict(package.server.TOOL_NAMES))


@pytest.mark.parametrize("client", FORMS_CLIENTS)
def test_every_input_form_converts_and_calls(client: str, forms: Served) -> None:
    """Each client's converter accepts the tool (autogen: mcp_server_tools and the workbench; openai-agents:
    strict), and the call it makes with a nested model and nulls is served."""
    arguments = {
        "summary": "Printer on fire",
        "requester": {"name": "Ada", "email": None},
        "watchers": [{"name": "Alan", "email": "alan@example.org"}],
        "escalate_to": None,
        "note": None,
        "priority": "high",
        "tags": ["hw"],
    }
    tool = forms.names["ticket.open"]
    spec = CLIENTS[client]
    target = ["stdio", sys.executable, str(forms.out)]
    calls_plan = {"handle_key": "workflow_id", "phases": [{"name": "probe", "calls": [[tool, arguments]]}]}
    command = [str(VENVS[spec.venv] / "bin" / "python"), str(DRIVERS[spec.venv]), client, json.dumps(calls_plan)]
    if not Path(command[0]).is_file():
        pytest.fail(f"{command[0]} is missing: {HINT}", pytrace=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADK_", "OPENAI_", "GOOGLE_"))}
    done = subprocess.run(
        [*command, *target], capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    assert tool in report["schemas"], report["schemas"]
    if client == "openai-agents":
        assert report["schemas"][tool]["strict"], report["schemas"][tool]
    if client == "llama-index":
        assert "error" not in report["schemas"][tool], report["schemas"][tool]
    if client == "autogen":
        for way in ("mcp_server_tools", "workbench"):
            assert "error" not in report["converters"][way], report["converters"]
            assert tool in report["converters"][way]["convert_tools"], report["converters"]
    (call,) = calls(report, "probe")
    assert "Printer on fire" in call["handed"] and "Ada" in call["handed"], call
