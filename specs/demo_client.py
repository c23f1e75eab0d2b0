"""A scripted agent session against the generated billing server over stdio: `make demo` runs it.

It prints exactly what an agent receives: tool lists, and each call's content blocks. Blocks meant only
for the human (audience = "user") are not among them: the billing spec omits them, the default, because
clients such as langchain hand every block to the model; run the server with `--user-blocks send` and
they appear, marked "[for the user only]". It runs the server twice: once in the handshake era, where the tool
list follows the session's workflow state, and once in the 2026-07-28 era, with state handles; then it reads
a resource and gets a prompt. Last, one entity for two audiences: the server over streamable HTTP with
`--auth tokens` (two static tokens, written to a temporary directory) and `--audit-log`, where an admin and a
support agent call the same `invoice_get` and each sees its own presenter (returns_for_role), side by side.
Usage: python specs/demo_client.py OUT   (OUT: where `fusiongen build` wrote billing_server/)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference

# The two callers of the audiences part: their static tokens (the tokens file holds only their SHA-256).
AUDIENCES = {
    "admin": ("demo-token-ada", "ada", ["admin"], ["invoices:read", "invoices:write"]),
    "support": ("demo-token-sam", "sam", ["support"], ["invoices:read"]),
}


def show(title: str, text: str) -> None:
    print(f"\n=== {title}")
    print(textwrap.indent(text, "  "))


def blocks(result: Any) -> str:
    parts = []
    for block in result.content:
        audience = block.annotations.audience if block.annotations else None
        marker = "[for the user only] " if audience == ["user"] else ""
        parts.append(marker + getattr(block, "text", str(block)))
    return "\n".join(parts)


async def call(client: Client, name: str, arguments: dict[str, Any], why: str) -> Any:
    # The title first (flushed), so that what the server logs on stderr during the call appears under it.
    print(f"\n=== tools/call {name} {arguments} — {why}", flush=True)
    result = await client.call_tool(name, arguments)
    print(textwrap.indent(("isError\n" if result.is_error else "") + blocks(result), "  "), flush=True)
    return result


async def tool_names(client: Client) -> str:
    return ", ".join(t.name for t in (await client.list_tools()).tools)


async def handshake_era(params: StdioServerParameters) -> None:
    notifications: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            notifications.append(method)

    async with Client(params, mode="legacy", cache=None, message_handler=on_message) as client:
        print(
            f"\n##### handshake era: protocol {client.protocol_version}, "
            f"tools.listChanged={client.server_capabilities.tools.list_changed}\n"
            "(protocols up to 2025-11-25: the client opens a session with an initialize handshake; the server keeps\n"
            "this session's workflow state, lists only the tools it allows, and notifies list_changed when it moves)"
        )
        show("tools/list (workflow in state draft)", await tool_names(client))
        listed = {t.name: t for t in (await client.list_tools()).tools}
        show("invoice_get's description: it lists the errors its handler declares", listed["invoice_get"].description)
        got = await call(
            client,
            "invoice_get",
            {"id": "inv-1"},
            "presenter: hidden fields gone, PII redacted, table/summary/mermaid, rules, suggestions",
        )
        guidance = {key: value for key, value in got.structured_content.items() if key != "data"}
        show(
            "... and its structuredContent: the same data under `data`, the rules and suggestions beside it "
            "(for clients that hand the model only structuredContent)",
            json.dumps(guidance, indent=2, ensure_ascii=False),
        )
        await call(client, "invoice_list", {}, "collection: limit 3 of 5, truncation notice, collection table")
        await call(client, "customer_get", {"id": "c-1"}, "another presenter with its own censor")
        await call(
            client,
            "invoice_create",
            {"customer_id": 7, "amount_cents": 1, "due_date": "tomorrow", "id": "mine"},
            "bad arguments: each named, guarded id refused",
        )
        await call(
            client,
            "invoice_get",
            {"id": "inv-404"},
            "a domain error: the handler raises ToolError NOT_FOUND, with its recovery and a tool to call next",
        )
        await call(
            client,
            "customer_get",
            {"id": "c-404"},
            "a handler exception: the agent gets a generic error (the server logs the ERROR line below on stderr)",
        )
        await call(client, "invoice_discharge", {"invoice_id": "inv-4"}, "out of order: FORBIDDEN")
        await call(client, "invoice_submit", {"invoice_id": "inv-4"}, "draft → review")
        show("tools/list after the transition", await tool_names(client))
        await call(client, "invoice_approve", {"invoice_id": "inv-4"}, "review → approved")
        show("tools/list after the transition", await tool_names(client))
        await call(client, "invoice_discharge", {"invoice_id": "inv-4"}, "approved → discharged (final)")
        show("tools/list in the final state", await tool_names(client))
        show("notifications received", "\n".join(notifications))


async def modern_era(params: StdioServerParameters) -> None:
    async with Client(params, mode="2026-07-28", cache=None) as client:
        print(
            f"\n##### 2026-07-28: protocol {client.protocol_version}: one stable list, state handles\n"
            "(no per-connection state: every client sees every tool, and a workflow's state travels as a handle\n"
            "that invoice_start mints and each bound call passes back)"
        )
        show("tools/list (stable)", await tool_names(client))
        await call(client, "invoice_submit", {"invoice_id": "inv-2"}, "no handle: refused, names invoice_start")
        started = await call(client, "invoice_start", {}, "mint a handle")
        handle = started.structured_content["workflow_id"]
        await call(client, "invoice_approve", {"invoice_id": "inv-2", "workflow_id": handle}, "out of order")
        await call(client, "invoice_submit", {"invoice_id": "inv-2", "workflow_id": handle}, "draft → review")
        await call(client, "invoice_status", {"workflow_id": handle}, "where the workflow is now")
        await call(client, "invoice_submit", {"invoice_id": "inv-2", "workflow_id": "forged"}, "unknown handle")
        show("tools/list (unchanged)", await tool_names(client))
        await resources_and_prompts(client)


async def resources_and_prompts(client: Client) -> None:
    """What a client reads, or a user picks, outside tool calls: a resource template and a prompt."""
    templates = (await client.list_resource_templates()).resource_templates
    show("resources/templates/list", "\n".join(f"{t.uri_template}  {t.description}" for t in templates))
    read = await client.read_resource("invoice://inv-1")
    show(
        "resources/read invoice://inv-1 — through the Invoice presenter: hidden gone, PII redacted, rules",
        "\n".join(f"[{c.mime_type}]\n{getattr(c, 'text', '')}" for c in read.contents),
    )
    prompts = (await client.list_prompts()).prompts
    show(
        "prompts/list",
        "\n".join(f"{p.name}({', '.join(a.name for a in p.arguments or ())})  {p.description}" for p in prompts),
    )
    completion = await client.complete(PromptReference(name="collect_overdue"), {"name": "tone", "value": "f"})
    show('completion/complete collect_overdue tone "f"', ", ".join(completion.completion.values))
    prompt = await client.get_prompt("collect_overdue", {"customer_id": "c-1", "tone": "firm"})
    show(
        "prompts/get collect_overdue {customer_id: c-1, tone: firm}",
        "\n".join(f"{m.role}: {getattr(m.content, 'text', '')}" for m in prompt.messages),
    )


def tokens_file(directory: Path) -> Path:
    path = directory / "tokens.toml"
    entries = []
    for token, subject, roles, scopes in AUDIENCES.values():
        digest = hashlib.sha256(token.encode()).hexdigest()
        entries.append(
            f'[[token]]\nsha256 = "{digest}"\nsubject = "{subject}"\n'
            f"roles = {json.dumps(roles)}\nscopes = {json.dumps(scopes)}\n"
        )
    path.write_text("\n".join(entries), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def http_server(env: dict[str, str], *args: str) -> Iterator[str]:
    """`python -m billing_server --http` until the block ends; yields its MCP URL once /healthz answers."""
    port = free_port()
    command = [sys.executable, "-m", "billing_server", "--http", "--port", str(port), *args]
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the HTTP server did not start (exit code {process.poll()})")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def side_by_side(left: str, right: str, width: int = 58) -> str:
    lefts, rights = left.splitlines(), right.splitlines()
    rows = max(len(lefts), len(rights))
    lefts += [""] * (rows - len(lefts))
    rights += [""] * (rows - len(rights))
    return "\n".join(f"{a:<{width}}| {b}" for a, b in zip(lefts, rights, strict=True))


def outcome(result: Any) -> str:
    return "isError: the call was refused" if result.is_error else "ok: the invoice's status is now"


async def as_caller(url: str, token: str) -> tuple[Any, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
        got = await client.call_tool("invoice_get", {"id": "inv-1"})
        update = await client.call_tool("invoice_update", {"id": "inv-2", "status": "review"})
    return got, update


async def audiences(env: dict[str, str]) -> None:
    print(
        "\n##### one entity, two audiences: streamable HTTP with --auth tokens and --audit-log\n"
        '(invoice_get has returns_for_role = { admin = "InvoiceAdmin", support = "InvoiceSupport" }: the same call,\n'
        "the same handler data, a presenter chosen per caller; invoice_update requires the invoices:write scope)"
    )
    with tempfile.TemporaryDirectory() as directory:
        tokens = tokens_file(Path(directory))
        audit = Path(directory) / "audit.jsonl"
        options = ("--auth", "tokens", "--auth-tokens-file", str(tokens), "--audit-log", str(audit))
        with http_server(env, *options) as url:
            seen = {name: await as_caller(url, token) for name, (token, *_) in AUDIENCES.items()}
        (admin, admin_update), (support, support_update) = seen["admin"], seen["support"]
        show(
            "tools/call invoice_get {'id': 'inv-1'} — as ada (roles admin) | as sam (roles support): structuredContent",
            side_by_side(
                json.dumps(admin.structured_content, indent=1, ensure_ascii=False),
                json.dumps(support.structured_content, indent=1, ensure_ascii=False),
            ),
        )
        show(
            "tools/call invoice_update {'id': 'inv-2', 'status': 'review'} — as ada | as sam (no invoices:write)",
            side_by_side(
                outcome(admin_update) + "\n" + json.dumps(admin_update.structured_content["data"]["status"]),
                outcome(support_update) + "\n" + textwrap.fill(blocks(support_update), 56),
            ),
        )
        show("the audit log (--audit-log): who, which tool, the outcome, a digest of the arguments", audit.read_text())


async def main(out: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(out)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "billing_server"], env=env)
    await handshake_era(params)
    await modern_era(params)
    await audiences(env)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".demo")
