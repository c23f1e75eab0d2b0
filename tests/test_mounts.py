"""Mounted specs (docs/spec.md §3.2): several specs served as one server, each under a name prefix.

A back office mounts `specs/approval.toml` (a file, with its XState machine) and a support desk (a folder) that
shares the expense model. The server must serve both in both protocol eras over a real client, with the
composed names on the wire, the mounted workflow gating its tools, and the mounted spec's references to its
own tools following the prefix. Every mistake a mount can make is pinned: where it is written, and which code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from fusiongen.api import explain, exposure_text, validate
from fusiongen.diagnostics import SpecError
from fusiongen.load.spec import json_schema
from tests.support.build import SPECS, GeneratedServer, build
from tests.support.processes import run

LEGACY, MODERN = "legacy", "2026-07-28"

ROOT = """\
[server]
name = "backoffice"
handlers = "backoffice_handlers"

[[mounts]]
spec = "approval.toml"
prefix = "expenses"

[[mounts]]
spec = "support/"
prefix = "support"
"""

SUPPORT_MODELS = """\
[models.Expense]
description = "An expense claim."
hidden = ["approver_notes"]
fillable = { create = ["amount", "purpose"] }
[models.Expense.fields]
id = "string"
amount = { type = "number", description = "In euros" }
purpose = "text"
approver_notes = { type = "string", required = false }

[models.Ticket]
description = "A support ticket about an expense."
[models.Ticket.fields]
id = "string"
expense_id = "string"
status = { type = "enum", values = ["open", "closed"] }

[presenters.TicketCard]
model = "Ticket"
suggest = [{ tool = "ticket.close", reason = "Close it once answered.", when = "status == 'open'" }]
"""

SUPPORT_TOOLS = """\
[tools."ticket.get"]
kind = "query"
description = "Read a ticket."
returns = "TicketCard"
[tools."ticket.get".input]
ticket_id = "string"

[tools."ticket.close"]
kind = "mutation"
description = "Close a ticket."
returns = "TicketCard"
invalidates = ["ticket.*"]
[tools."ticket.close".input]
ticket_id = "string"

[resources.ticket]
uri = "ticket://{id}"
presenter = "TicketCard"

[prompts.triage]
description = "Triage a ticket."
template = "Triage ticket {ticket_id}."
[prompts.triage.arguments]
ticket_id = { description = "The ticket" }
"""

HANDLERS = '''\
"""The back office's handlers: the approval spec's, imported, and the support desk's."""

from typing import Any

from approval_server_handlers import (
    expense_approve,
    expense_create,
    expense_pay,
    expense_reject,
    expense_revise,
    expense_submit,
)

__all__ = [
    "expense_approve",
    "expense_create",
    "expense_pay",
    "expense_reject",
    "expense_revise",
    "expense_submit",
    "read_ticket",
    "ticket_close",
    "ticket_get",
]

TICKETS = {"t-1": {"id": "t-1", "expense_id": "exp-1", "status": "open"}}


def ticket_get(args: Any) -> Any:
    return TICKETS[args.ticket_id]


def ticket_close(args: Any) -> Any:
    TICKETS[args.ticket_id]["status"] = "closed"
    return TICKETS[args.ticket_id]


def read_ticket(args: Any) -> Any:
    return TICKETS[args.id]
'''


def _backoffice(tmp_path: Path) -> Path:
    """The back office folder: its spec, the approval spec beside it, the support folder, the handlers."""
    home = tmp_path / "backoffice"
    (home / "support").mkdir(parents=True)
    for name in ("approval.toml", "approval.machine.json", "approval_server_handlers.py"):
        shutil.copy(SPECS / name, home / name)
    (home / "spec.toml").write_text(ROOT, encoding="utf-8")
    (home / "support" / "models.toml").write_text(SUPPORT_MODELS, encoding="utf-8")
    (home / "support" / "tools.toml").write_text(SUPPORT_TOOLS, encoding="utf-8")
    (home / "backoffice_handlers.py").write_text(HANDLERS, encoding="utf-8")
    return home / "spec.toml"


def _diagnostics(spec: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        validate(spec)
    return [d.format() for d in caught.value.diagnostics]


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line)


def test_mounted_entities_are_served_under_their_prefix(tmp_path: Path) -> None:
    _, ir, _ = validate(_backoffice(tmp_path))
    tools = {tool.name: tool for tool in ir.tools}
    assert {
        "expenses.expense.create",
        "expenses.expense.pay",
        "support.ticket.get",
        "support.ticket.close",
    } <= set(tools)
    assert "expense.create" not in tools and "ticket.get" not in tools
    assert tools["expenses.expense.create"].handler == "expense_create"  # the handler its own spec gives it
    assert tools["support.ticket.get"].handler == "ticket_get"
    assert tools["expenses.expense.submit"].binding is not None  # bound to the mounted spec's one workflow
    assert tools["expenses.expense.submit"].binding.workflow == "expense"
    assert [r.name for r in ir.resources] == ["support.ticket"]
    assert [p.name for p in ir.prompts] == ["support.triage"]
    assert [m.name for m in ir.models] == ["Expense", "Ticket"]  # the model both define alike is one model


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_the_server_serves_every_mounted_spec(tmp_path: Path, mode: str) -> None:
    spec = _backoffice(tmp_path)
    generation = build(spec, tmp_path / "out")
    with GeneratedServer(generation, tmp_path / "out") as server:
        names = server.module("server").TOOL_NAMES
        assert names["expenses.expense.create"] == "expenses_expense_create"
        async with Client(server.create_server(server.handlers), mode=mode, cache=None) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert {"expenses_expense_create", "support_ticket_get", "expense_start"} <= listed
            created = await client.call_tool(names["expenses.expense.create"], {"amount": 12.5, "purpose": "taxi"})
            assert not created.is_error, created.content
            expense = created.structured_content["data"]
            assert "approver_notes" not in expense  # the shared model's hidden field
            on: dict[str, str] = {}  # the handle, on 2026-07-28; the session holds the state in the handshake era
            if mode == MODERN:
                started = await client.call_tool(names["expense.start"], {})
                on = {"workflow_id": started.structured_content["workflow_id"]}
            refused = await client.call_tool(names["expenses.expense.pay"], {"expense_id": expense["id"], **on})
            assert refused.is_error
            block = refused.content[0]
            assert isinstance(block, types.TextContent)
            assert "<available_actions><action>expenses_expense_submit</action></available_actions>" in block.text
            walk = [("expense.submit", "pending"), ("expense.approve", "approved"), ("expense.pay", "paid")]
            for tool, after in walk:
                result = await client.call_tool(names[f"expenses.{tool}"], {"expense_id": expense["id"], **on})
                assert not result.is_error, result.content
                status = await client.call_tool(names["expense.status"], on)
                assert status.structured_content["state"] == after
            ticket = await client.call_tool(names["support.ticket.get"], {"ticket_id": "t-1"})
            assert not ticket.is_error, ticket.content
            assert "support_ticket_close" in str(ticket.content)  # the presenter's suggestion, prefixed
            closed = await client.call_tool(names["support.ticket.close"], {"ticket_id": "t-1"})
            assert not closed.is_error, closed.content
            stale = str(closed.content)
            assert "support_ticket_get" in stale  # invalidates "ticket.*": its own tools, prefixed
            read = await client.read_resource("ticket://t-1")
            assert "closed" in str(read.contents)
            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["support.triage"]


def test_commands_follow_the_mounts(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    home = spec.parent
    built = run("build", spec, "-o", "out", "--budget", cwd=home)
    assert built.code == 0, built.stderr
    assert "support_ticket_get" in built.stdout
    assert run("check", spec, "-o", "out", cwd=home).code == 0
    tools = home / "support" / "tools.toml"
    tools.write_text(tools.read_text(encoding="utf-8").replace("Read a ticket.", "Read one ticket."), encoding="utf-8")
    stale = run("check", spec, "-o", "out", cwd=home)
    assert stale.code != 0, stale.stdout  # a change in a mounted file makes the committed server stale
    assert "support_ticket_get" in run("explain", spec, cwd=home).stdout
    assert exposure_text(explain(spec)[1], "json") == exposure_text(explain(spec)[1], "json")


def test_diff_git_reads_the_mounted_specs_at_the_revision(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    home = spec.parent

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=home, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    same = run("diff", "--git", "HEAD", "spec.toml", cwd=home)
    assert same.code == 0, same.stdout + same.stderr
    models = home / "support" / "models.toml"
    models.write_text(models.read_text(encoding="utf-8").replace('hidden = ["approver_notes"]\n', ""), encoding="utf-8")
    changed = run("diff", "--git", "HEAD", "spec.toml", cwd=home)
    assert changed.code != 0, changed.stdout + changed.stderr  # the shared model now differs: FG105 today
    (home / "approval.toml").write_text(
        (home / "approval.toml").read_text(encoding="utf-8").replace('hidden = ["approver_notes"]\n', ""),
        encoding="utf-8",
    )
    exposed = run("diff", "--git", "HEAD", "spec.toml", cwd=home)
    assert exposed.code == 4, exposed.stdout + exposed.stderr  # read at HEAD, the field was hidden
    assert "approver_notes" in exposed.stdout


def test_a_mistake_in_a_mounted_file_names_that_file(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    tools = spec.parent / "support" / "tools.toml"
    tools.write_text(tools.read_text(encoding="utf-8").replace('kind = "query"', 'kind = "qurey"'), encoding="utf-8")
    found = _diagnostics(spec)
    line = _line_of(tools, "qurey")
    shown = f"{spec.parent.as_posix()}/support/tools.toml:{line}:8: error[FG101]"
    assert any(d.startswith(shown) and '[tools."support.ticket.get"]' in d for d in found), found


def test_a_mounted_tool_the_mounting_spec_defines_too_is_fg105(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    spec.write_text(ROOT + '\n[tools."support.ticket.get"]\nkind = "query"\n', encoding="utf-8")
    found = _diagnostics(spec)
    line = _line_of(spec.parent / "support" / "tools.toml", '[tools."ticket.get"]')
    assert any(
        d.startswith(f"{spec.parent.as_posix()}/support/tools.toml:{line}:")
        and 'error[FG105]: tool "support.ticket.get" is defined in two files: ' in d
        and f"{spec.as_posix()}:" in d
        for d in found
    ), found


def test_a_shared_model_defined_differently_is_fg105(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    models = spec.parent / "support" / "models.toml"
    models.write_text(models.read_text(encoding="utf-8").replace("In euros", "In cents"), encoding="utf-8")
    found = _diagnostics(spec)
    line = _line_of(spec.parent / "approval.toml", "[models.Expense]")
    assert any(
        'error[FG105]: model "Expense" is defined in two files: ' in d
        and f"{spec.parent.as_posix()}/approval.toml:{line}:" in d
        and d.startswith(f"{spec.parent.as_posix()}/support/models.toml:1:")
        for d in found
    ), found


def test_two_tools_with_one_handler_are_fg142(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    spec.write_text(ROOT + '\n[tools."ticket.get"]\nkind = "query"\n', encoding="utf-8")
    found = _diagnostics(spec)
    assert any("error[FG142]" in d and "ticket_get" in d for d in found), found


def test_mounts_outside_the_folder_or_nested_are_fg108(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    (tmp_path / "other.toml").write_text('[server]\nname = "other"\n', encoding="utf-8")
    outside = ROOT.replace('spec = "support/"', 'spec = "../other.toml"')
    spec.write_text(outside, encoding="utf-8")
    line = _line_of(spec, "../other.toml")
    found = _diagnostics(spec)
    assert found[0].startswith(f'{spec.as_posix()}:{line}:8: error[FG108]: mount "../other.toml" is outside the')
    spec.write_text(ROOT.replace('spec = "support/"', 'spec = "."'), encoding="utf-8")
    assert any('error[FG108]: mount "." is the spec itself' in d for d in _diagnostics(spec))
    spec.write_text(ROOT, encoding="utf-8")
    nested = spec.parent / "support" / "more.toml"
    nested.write_text('[[mounts]]\nspec = "../approval.toml"\nprefix = "again"\n', encoding="utf-8")
    assert any(
        d.startswith(f"{nested.as_posix()}:1:") and "error[FG108]: a mounted spec may not mount specs itself" in d
        for d in _diagnostics(spec)
    )


def test_a_bad_prefix_or_a_missing_spec(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    spec.write_text(ROOT.replace('prefix = "support"', 'prefix = "9 lives"'), encoding="utf-8")
    line = _line_of(spec, "9 lives")
    found = _diagnostics(spec)
    assert any(d.startswith(f"{spec.as_posix()}:{line}:10: error[FG104]: mount prefix") for d in found), found
    spec.write_text(ROOT.replace('spec = "support/"', 'spec = "absent.toml"'), encoding="utf-8")
    assert any("error[FG002]: cannot read the spec" in d and "absent.toml" in d for d in _diagnostics(spec))
    spec.write_text(ROOT.replace('prefix = "support"', 'prefix = "support"\nprefx = "x"'), encoding="utf-8")
    assert any('error[FG100]: unknown key "prefx"' in d for d in _diagnostics(spec))


def test_a_mounted_auth_must_be_the_mounting_specs(tmp_path: Path) -> None:
    spec = _backoffice(tmp_path)
    auth = '\n[auth]\nscopes = { "tickets:write" = "Close tickets" }\n'
    tools = spec.parent / "support" / "tools.toml"
    tools.write_text(tools.read_text(encoding="utf-8") + auth, encoding="utf-8")
    found = _diagnostics(spec)
    line = _line_of(tools, "[auth]")
    assert any(d.startswith(f"{tools.as_posix()}:{line}:") and "error[FG109]" in d for d in found), found
    spec.write_text(ROOT + auth, encoding="utf-8")
    text = tools.read_text(encoding="utf-8").replace(
        'kind = "mutation"\n', 'kind = "mutation"\nrequires = { scopes = ["tickets:write"] }\n'
    )
    tools.write_text(text, encoding="utf-8")
    _, ir, _ = validate(spec)  # the same [auth] in both: the mounted requires names the server's scopes
    closing = next(tool for tool in ir.tools if tool.name == "support.ticket.close")
    assert closing.requires is not None and closing.requires.scopes == ("tickets:write",)


def test_the_schema_has_mounts() -> None:
    schema = json_schema()
    assert "mounts" in schema["properties"]
    mount = schema["$defs"]["MountSpec"]
    assert set(mount["required"]) == {"spec", "prefix"}


def test_two_mounted_workflows_may_name_their_machine_files_alike(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for folder, workflow, states in (("a", "order", ("draft", "placed")), ("b", "ticket", ("open", "closed"))):
        (home / folder).mkdir(parents=True)
        machine = {
            "id": workflow,
            "initial": states[0],
            "states": {states[0]: {"on": {"GO": states[1]}}, states[1]: {"type": "final"}},
        }
        (home / folder / "machine.json").write_text(json.dumps(machine), encoding="utf-8")
        (home / folder / "spec.toml").write_text(
            f'[workflows.{workflow}]\nmachine = "machine.json"\n\n[tools."{workflow}.go"]\n'
            f'bind_state = {{ states = ["{states[0]}"], transition = "GO" }}\n',
            encoding="utf-8",
        )
    spec = home / "spec.toml"
    spec.write_text(
        '[server]\nname = "two"\n\n[[mounts]]\nspec = "a/spec.toml"\nprefix = "a"\n\n'
        '[[mounts]]\nspec = "b/spec.toml"\nprefix = "b"\n',
        encoding="utf-8",
    )
    _, ir, _ = validate(spec)
    assert {w.name: w.states for w in ir.workflows} == {"order": ("draft", "placed"), "ticket": ("open", "closed")}
    tools = {tool.name: tool.binding for tool in ir.tools}
    assert tools["a.order.go"] is not None and tools["a.order.go"].workflow == "order"
    assert tools["b.ticket.go"] is not None and tools["b.ticket.go"].workflow == "ticket"
