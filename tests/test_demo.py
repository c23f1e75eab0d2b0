"""`make demo`'s client (specs/demo_client.py) against a freshly built billing server, over real stdio.

The demo is the first thing a newcomer runs: it must finish, introduce both protocol eras, and show a server's log
line under the call that caused it (stderr and stdout share the terminal: the test merges them the same way).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.build import SPECS, build


def test_the_demo_runs_and_explains_what_it_shows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build(SPECS / "billing.toml", out)
    done = subprocess.run(
        [sys.executable, str(SPECS / "demo_client.py"), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    shown = done.stdout
    assert done.returncode == 0, shown
    assert "##### handshake era: protocol 2025-11-25" in shown and "initialize handshake" in shown
    assert "##### 2026-07-28: protocol 2026-07-28" in shown and "travels as a handle" in shown
    title = shown.index("=== tools/call customer_get {'id': 'c-404'}")
    log = shown.index("ERROR billing_server: tool customer_get: handler raised KeyError")
    answer = shown.index('<tool_error tool="customer_get" code="INTERNAL_ERROR"')
    assert title < log < answer, shown[title - 200 : answer + 200]
    # A domain error: the handler's own code, words and next tool, and nothing logged at ERROR for it.
    assert "Errors it may return (tool_error codes):\n  - NOT_FOUND: No invoice has that id" in shown
    missed = shown.index("=== tools/call invoice_get {'id': 'inv-404'}")
    assert shown.index('<tool_error tool="invoice_get" code="NOT_FOUND"', missed) < title
    assert "<action>invoice_list</action>" in shown[missed:title]
    assert "ERROR" not in shown[missed:title].replace("<tool_error", "")
    assert "Traceback" not in shown
    envelope = shown.index("... and its structuredContent")  # the envelope's guidance, shown after the blocks
    assert '"Invoice inv-1 is overdue: offer a reminder before anything else."' in shown[envelope:]
    assert '"tool": "billing_remind"' in shown[envelope:]
    # The spec omits its user-only blocks (the default): the customer's real email is shown nowhere.
    assert "[for the user only]" not in shown and "ada@example.com" not in shown
    # It reads a resource through its presenter and gets a prompt.
    resource = shown.index("=== resources/read invoice://inv-1")
    assert '"email": "[REDACTED]"' in shown[resource:] and "internal_notes" not in shown[resource:]
    assert "user: List the overdue invoices of customer c-1 with invoice_list" in shown
    # One entity, two audiences over HTTP with static tokens: each sees its own presenter of invoice.get.
    both = shown.index("=== tools/call invoice_get {'id': 'inv-1'} — as ada (roles admin) | as sam (roles support)")
    side = shown[both : shown.index("=== tools/call invoice_update", both)]
    admin_column = "\n".join(line.split("|")[0] for line in side.splitlines()[1:])
    support_column = "\n".join(line.split("| ", 1)[1] for line in side.splitlines()[1:] if "| " in line)
    assert '"created_at"' in admin_column and "administrator" in admin_column
    assert '"amount_cents"' not in support_column and "Never quote amounts to customers." in support_column
    assert 'code="FORBIDDEN"' in shown[both:] and '"outcome":"FORBIDDEN"' in shown[both:]
    assert '"subject":"sam"' in shown and '"inv-1"' not in shown[shown.index("=== the audit log") :]
