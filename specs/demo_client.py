"""A scripted agent session against the generated billing server over stdio: `make demo` runs it.

It prints exactly what an agent receives: the tool list, then each call's content blocks.
Usage: python specs/demo_client.py OUT   (OUT: where `fusiongen build` wrote billing_server/)
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("invoice.get", {"id": "inv-1"}, "hidden fields (internal_notes, cost_basis, ssn) never appear; casts applied"),
    ("invoice.list", {"status": "draft"}, "a list result"),
    ("invoice.create", {"customer_id": "c-2", "amount_cents": 4200, "due_date": "2027-01-31"}, "a mutation"),
    ("invoice.create", {"customer_id": 7, "amount_cents": 1, "due_date": "tomorrow", "id": "mine"},
     "bad arguments: each named, guarded id refused, the handler never runs"),
    ("invoice.get", {"id": "inv-404"}, "a handler exception: a generic error, the server keeps serving"),
    ("customer.get", {"id": "c-1"}, "a dataclass returned by the handler, shaped to the declared fields"),
]


def show(title: str, text: str) -> None:
    print(f"\n=== {title}")
    print(textwrap.indent(text, "  "))


async def main(out: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(out)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "billing_server"], env=env)
    async with Client(params, mode="legacy", cache=None) as client:
        print(f"connected over stdio, protocol {client.protocol_version}")
        tools = await client.list_tools()
        show("tools/list", "\n".join(f"{t.name:16} {t.description}" for t in tools.tools))
        for name, arguments, why in CALLS:
            result = await client.call_tool(name, arguments)
            blocks = "\n".join(getattr(block, "text", str(block)) for block in result.content)
            flag = " (isError)" if result.is_error else ""
            show(f"tools/call {name} {arguments}{flag} — {why}", blocks)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else ".demo")
