"""`fusiongen explain` and EXPOSURE.md: what the report says about the reference spec, and that `check` guards it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fusiongen.api import explain
from tests.support.build import SPECS
from tests.support.processes import run

BILLING = SPECS / "billing.toml"


def _tool(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in report["tools"] if t["name"] == name)


def test_billing_report_says_what_reaches_the_model() -> None:
    _, report, _ = explain(BILLING)
    invoice = _tool(report, "invoice.get")
    seen = {r["path"]: r["type"] for r in invoice["model_sees"]}
    assert seen["status"] == "enum[draft|review|approved|paid|overdue]"
    assert seen["lines[*].sku"] == "string"
    assert "customer.email" not in seen and "lines[*].card_number" not in seen
    redacted = {r["path"]: (r["by"], r["censor"]) for r in invoice["redacted"]}
    # the embedded Customer presenter masks email with its own censor; Invoice masks card numbers
    assert redacted == {
        "customer.email": ("Customer.redact_pii", "[REDACTED]"),
        "lines[*].card_number": ("Invoice.redact_pii", "[REDACTED]"),
    }
    hidden = {r["path"]: r["why"] for r in invoice["hidden"]}
    assert hidden["customer.ssn"] == "hidden in model Customer"
    assert hidden["internal_notes"] == "hidden in model Invoice"
    assert hidden["created_at"] == "not in presenter Invoice's fields"
    assert invoice["user_only"] == [{"path": "customer.email", "block": "Invoice", "user_blocks": "omit"}]
    assert {s["tool"] for s in invoice["suggestions"]} == {"billing.remind", "invoice.update"}
    assert invoice["states"] == [{"workflow": "", "states": "any (not bound)", "fires": ""}]


def test_collection_and_bound_tools() -> None:
    _, report, _ = explain(BILLING)
    listing = _tool(report, "invoice.list")
    assert listing["returns"] == "Invoice[] (collection, at most 3 items)"
    assert {"from": "Invoice.collection_rules", "rule": "Sorted by due date, oldest first.", "when": ""} in listing[
        "rules"
    ]
    assert listing["user_only"] == []  # collection_ui has no user-audience block
    card = _tool(report, "customer.get")
    assert card["redacted"] == [{"path": "email", "by": "CustomerCard.redact_pii", "censor": "***"}]
    discharge = _tool(report, "invoice.discharge")
    assert discharge["states"] == [{"workflow": "invoice", "states": "approved", "fires": "DISCHARGE"}]
    assert discharge["model_sees"] == []
    workflow = report["workflows"][0]
    assert workflow["generated_tools"] == ["invoice.start", "invoice.status", "invoice.resolve"]
    review = next(s for s in workflow["states"] if s["state"] == "review")
    assert review["bound_tools"] == "invoice.approve, invoice.reject"


def test_formats_are_deterministic_and_the_markdown_is_exposure_md(tmp_path: Path) -> None:
    first = run("explain", BILLING, "--format", "json", cwd=tmp_path)
    again = run("explain", BILLING, "--format", "json", cwd=tmp_path)
    assert first.code == 0 and first.stdout == again.stdout
    assert json.loads(first.stdout)["server"] == "billing"
    markdown = run("explain", BILLING, "--format", "markdown", cwd=tmp_path).stdout
    golden = (SPECS.parent / "golden" / "billing" / "EXPOSURE.md").read_text(encoding="utf-8")
    assert golden.split("\n", 1)[1] == markdown  # the golden file is the header line, then exactly this
    text = run("explain", BILLING, cwd=tmp_path).stdout
    assert "  redacted before sending:\n    path=customer.email  by=Customer.redact_pii" in text


def test_check_catches_a_stale_exposure_md(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(BILLING, folder / "billing.toml")
    shutil.copy(SPECS / "billing_handlers.py", folder / "billing_handlers.py")
    assert run("build", "billing.toml", "-o", "out", cwd=folder).code == 0
    exposure = folder / "out" / "EXPOSURE.md"
    assert "| lines[*].card_number | Invoice.redact_pii | [REDACTED] |" in exposure.read_text(encoding="utf-8")
    assert run("check", "billing.toml", "-o", "out", cwd=folder).code == 0
    spec = folder / "billing.toml"
    spec.write_text(
        spec.read_text(encoding="utf-8").replace('redact_pii = ["lines[*].card_number"]\n', ""), encoding="utf-8"
    )
    result = run("check", "billing.toml", "-o", "out", "--format", "json", cwd=folder)
    assert result.code == 1
    assert any(a["file"].endswith("out/EXPOSURE.md") and a["code"] == "FG405" for a in json.loads(result.stdout))
