"""`fusiongen diff`: each kind of change, as a pair of specs, gets its impact, and the command its exit code.

Every pair is one base spec and one textual edit of it, so a case states exactly what changed. The
classification is asserted as the exact set of (impact, kind) the diff reports: a change reported twice,
under a wrong impact or not at all fails.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fusiongen.api import diff_specs
from fusiongen.report.diff import FACET_DIFFS, Impact, exit_code
from fusiongen.report.exposure import TOOL_FACETS
from tests.support.processes import run

BASE = """
[server]
name = "shop"
version = "1.0.0"

[models.Customer]
hidden = ["ssn"]
[models.Customer.fields]
id = "string"
name = "string"
email = "string"
ssn = { type = "string", required = false }
score = { type = "integer", required = false }

[models.Order]
[models.Order.fields]
id = "string"
customer = { type = "Customer" }
status = { type = "enum", values = ["open", "paid", "void"] }
total = "integer"

[presenters.Customer]
model = "Customer"
fields = ["id", "name", "email"]
redact_pii = ["email"]

[presenters.Order]
model = "Order"
embed = { customer = "Customer" }
rules = ["Totals are in cents."]

[[presenters.Order.suggest]]
tool = "order.pay"
reason = "Pay {id}"
when = "status == 'open'"

[workflows.order]
initial = "open"
[workflows.order.states]
open = { on = { PAY = "paid" } }
paid = { type = "final" }

[tools."order.get"]
kind = "query"
description = "Fetch an order."
returns = "Order"
handler = "get_order"
[tools."order.get".input]
id = "string"
status = { type = "enum", values = ["open", "paid", "void"], required = false }
count = { type = "integer", required = false }
ratio = { type = "number", required = false }

[tools."order.pay"]
kind = "action"
description = "Pay an order."
handler = "pay_order"
bind_state = { states = ["open"], transition = "PAY" }
[tools."order.pay".input]
order_id = "string"

[auth]
scopes = { "orders:read" = "Read orders", "orders:write" = "Change orders" }

[presenters.OrderAdmin]
model = "Order"
fields = ["id", "status"]

[tools."order.audit"]
kind = "query"
description = "Audit an order."
returns = "Order"
returns_for_role = { admin = "OrderAdmin" }
requires = { scopes = ["orders:read"], roles = ["admin", "auditor"] }
handler = "audit_order"
[tools."order.audit".input]
order_id = "string"

[resources."order"]
uri = "order://{id}"
presenter = "Order"
description = "One order."
requires = {}  # open on purpose: order.audit (with requires) shows Order too (FG168 without this line)

[prompts."chase"]
description = "Chase an unpaid order."
arguments = { order_id = { description = "Order id" }, tone = { type = "enum", values = ["friendly", "firm"] } }
template = "Chase {order_id} in a {tone} tone."
"""
REQUIRES = 'requires = { scopes = ["orders:read"], roles = ["admin", "auditor"] }'
AUDIENCES = 'returns_for_role = { admin = "OrderAdmin" }'
RESOURCE = (
    '[resources."order"]\nuri = "order://{id}"\npresenter = "Order"\ndescription = "One order."\n'
    "requires = {}  # open on purpose: order.audit (with requires) shows Order too (FG168 without this line)\n"
)
PROMPT_ARGUMENTS = (
    'arguments = { order_id = { description = "Order id" }, tone = { type = "enum", values = ["friendly", "firm"] } }'
)

# (name, text replaced, replacement, the exact (impact, kind) set the diff reports)
CASES: list[tuple[str, str, str, set[tuple[Impact, str]]]] = [
    ("nothing", "", "", set()),
    (
        "tool-removed",
        '\n[tools."order.get"]\nkind = "query"\ndescription = "Fetch an order."\nreturns = "Order"\n'
        'handler = "get_order"\n[tools."order.get".input]\nid = "string"\n'
        'status = { type = "enum", values = ["open", "paid", "void"], required = false }\n'
        'count = { type = "integer", required = false }\nratio = { type = "number", required = false }\n',
        "\n",
        {(Impact.BREAKING, "tool-removed")},
    ),
    (
        "tool-renamed",
        'tools."order.get"',
        'tools."order.fetch"',
        {(Impact.BREAKING, "tool-renamed"), (Impact.SAFE, "tool-added")},
    ),
    (
        "required-input-added",
        'order_id = "string"\n',
        'order_id = "string"\nmethod = "string"\n',
        {(Impact.BREAKING, "input-required-added")},
    ),
    (
        "optional-input-added",
        'order_id = "string"\n',
        'order_id = "string"\nnote = { type = "string", required = false }\n',
        {(Impact.SAFE, "input-optional-added")},
    ),
    (
        "input-removed",
        'count = { type = "integer", required = false }\n',
        "",
        {(Impact.BREAKING, "input-removed")},
    ),
    (
        "input-now-required",
        'count = { type = "integer", required = false }',
        'count = { type = "integer" }',
        {(Impact.BREAKING, "input-now-required")},
    ),
    (
        "input-now-optional",
        'order_id = "string"',
        'order_id = { type = "string", required = false }',
        {(Impact.SAFE, "input-now-optional")},
    ),
    (
        "input-type-changed",
        'count = { type = "integer", required = false }',
        'count = { type = "enum", values = ["1", "2"], required = false }',
        {(Impact.BREAKING, "input-type-changed")},
    ),
    (
        "input-number-narrowed-to-integer",
        'ratio = { type = "number", required = false }',
        'ratio = { type = "integer", required = false }',
        {(Impact.BREAKING, "input-type-narrowed")},
    ),
    (
        "input-enum-value-removed",
        'status = { type = "enum", values = ["open", "paid", "void"], required = false }',
        'status = { type = "enum", values = ["open", "paid"], required = false }',
        {(Impact.BREAKING, "input-enum-value-removed")},
    ),
    (
        "input-enum-value-added",
        'status = { type = "enum", values = ["open", "paid", "void"], required = false }',
        'status = { type = "enum", values = ["open", "paid", "void", "late"], required = false }',
        {(Impact.SAFE, "input-type-widened")},
    ),
    (
        "input-integer-widened-to-number",
        'count = { type = "integer", required = false }',
        'count = { type = "number", required = false }',
        {(Impact.SAFE, "input-type-widened")},
    ),
    (
        "output-field-removed",
        'total = "integer"\n',
        "",
        {(Impact.BREAKING, "output-removed")},
    ),
    (
        "output-type-changed",
        'total = "integer"',
        'total = "string"',
        {(Impact.BREAKING, "output-type-changed")},
    ),
    (
        "output-enum-narrowed",
        'status = { type = "enum", values = ["open", "paid", "void"] }',
        'status = { type = "enum", values = ["open", "paid"] }',
        {(Impact.SAFE, "output-enum-narrowed")},
    ),
    (
        "field-newly-exposed",
        'fields = ["id", "name", "email"]',
        'fields = ["id", "name", "email", "score"]',
        {(Impact.WIDENED, "field-newly-exposed")},
    ),
    (
        "redaction-removed",
        'redact_pii = ["email"]',
        "",
        {(Impact.WIDENED, "redaction-removed")},
    ),
    (
        "hidden-but-not-selected",
        'hidden = ["ssn"]\n',
        "",
        # ssn is not among the presenter's fields: un-hiding it in the model shows nothing more
        set(),
    ),
    (
        "new-field-redacted",
        'redact_pii = ["email"]',
        'redact_pii = ["email", "name"]',
        {(Impact.BEHAVIOUR, "output-now-redacted")},
    ),
    (
        "censor-changed",
        'redact_pii = ["email"]',
        'redact_pii = ["email"]\ncensor = "***"',
        {(Impact.BEHAVIOUR, "censor-changed")},
    ),
    (
        "rule-added",
        'rules = ["Totals are in cents."]',
        'rules = ["Totals are in cents.", "Never refund."]',
        {(Impact.BEHAVIOUR, "rule-added")},
    ),
    (
        "suggestion-removed",
        '[[presenters.Order.suggest]]\ntool = "order.pay"\nreason = "Pay {id}"\nwhen = "status == \'open\'"\n',
        "",
        {(Impact.BEHAVIOUR, "suggestion-removed")},
    ),
    (
        "transition-added",
        'open = { on = { PAY = "paid" } }',
        'open = { on = { PAY = "paid", VOID = "paid" } }',
        {(Impact.BEHAVIOUR, "transition-added")},
    ),
    (
        "state-tools-changed",
        'bind_state = { states = ["open"], transition = "PAY" }',
        'bind_state = { states = ["open", "paid"], transition = "PAY" }',
        {(Impact.BEHAVIOUR, "tool-states-changed"), (Impact.BEHAVIOUR, "state-tools-changed")},
    ),
    (
        "kind-changed",
        'kind = "action"',
        'kind = "mutation"',
        # a mutation refuses to run again in doubt: the workflow gains its generated resolve tool
        {(Impact.BEHAVIOUR, "kind-changed"), (Impact.SAFE, "tool-added")},
    ),
    (
        "description-changed",
        'description = "Fetch an order."',
        'description = "Fetch one order by id."',
        {(Impact.SAFE, "description-changed")},
    ),
    (
        "new-tool",
        '[tools."order.pay"]',
        '[tools."order.count"]\nkind = "query"\n\n[tools."order.pay"]',
        {(Impact.SAFE, "tool-added")},
    ),
    (
        "new-tool-showing-a-new-value",
        '[tools."order.pay"]',
        '[tools."customer.get"]\nkind = "query"\nreturns = "Customer"\n\n[tools."order.pay"]',
        {(Impact.SAFE, "tool-added"), (Impact.WIDENED, "field-newly-exposed")},
    ),
    (
        "new-tool-showing-what-another-showed",
        '[tools."order.pay"]',
        '[tools."order.list"]\nkind = "query"\nreturns = "Order[]"\n\n[tools."order.pay"]',
        {(Impact.SAFE, "tool-added")},
    ),
    # who may call a tool: requires
    (
        "requires-scope-dropped",
        REQUIRES,
        'requires = { roles = ["admin", "auditor"] }',
        {(Impact.WIDENED, "requires-loosened")},
    ),
    ("requires-removed", REQUIRES + "\n", "", {(Impact.WIDENED, "requires-loosened")}),
    (
        "requires-role-added",
        '"admin", "auditor"]',
        '"admin", "auditor", "clerk"]',
        {(Impact.WIDENED, "requires-loosened")},
    ),
    (
        "requires-scope-added",
        'scopes = ["orders:read"]',
        'scopes = ["orders:read", "orders:write"]',
        {(Impact.BREAKING, "requires-tightened")},
    ),
    (
        "requires-roles-dropped-to-one",
        '"admin", "auditor"]',
        '"admin"]',
        {(Impact.BREAKING, "requires-tightened")},
    ),
    # each returns_for_role audience
    (
        "audience-presenter-gains-a-field",
        'fields = ["id", "status"]',
        'fields = ["id", "status", "total"]',
        {(Impact.WIDENED, "audience-field-newly-exposed")},
    ),
    (
        "audience-presenter-loses-a-field",
        'fields = ["id", "status"]',
        'fields = ["id"]',
        {(Impact.BREAKING, "audience-output-removed")},
    ),
    (
        "audience-presenter-redacts-a-field",
        'fields = ["id", "status"]',
        'fields = ["id", "status"]\nredact_pii = ["status"]',
        {(Impact.BEHAVIOUR, "audience-output-now-redacted")},
    ),
    (
        "audience-added-seeing-less",
        AUDIENCES,
        'returns_for_role = { admin = "OrderAdmin", auditor = "OrderAdmin" }',
        # auditors got Order as everyone did; OrderAdmin shows them less
        {(Impact.BEHAVIOUR, "audience-added"), (Impact.BREAKING, "audience-output-removed")},
    ),
    (
        "audience-removed-seeing-more",
        AUDIENCES + "\n",
        "",
        # admins now get Order, as everyone: its customer and total reach them
        {(Impact.BEHAVIOUR, "audience-removed"), (Impact.WIDENED, "audience-field-newly-exposed")},
    ),
    # resources
    ("resource-removed", RESOURCE, "", {(Impact.BREAKING, "resource-removed")}),
    (
        "resource-uri-changed",
        'uri = "order://{id}"',
        'uri = "orders://{id}"',
        {(Impact.BREAKING, "resource-uri-changed")},
    ),
    (
        "resource-added-showing-what-a-tool-showed",
        RESOURCE,
        RESOURCE + '\n[resources."brief"]\nuri = "brief://{id}"\npresenter = "Order"\n',
        {(Impact.SAFE, "resource-added")},
    ),
    (
        "resource-added-showing-a-new-value",
        RESOURCE,
        RESOURCE + '\n[resources."customer"]\nuri = "customer://{id}"\npresenter = "Customer"\n',
        {(Impact.SAFE, "resource-added"), (Impact.WIDENED, "field-newly-exposed")},
    ),
    (
        "resource-presenter-changed",
        'presenter = "Order"',
        'presenter = "OrderAdmin"',
        # a resource reads through one presenter: values it no longer shows are gone for its readers
        {
            (Impact.BEHAVIOUR, "output-presenter-changed"),
            (Impact.BREAKING, "output-removed"),
            (Impact.BEHAVIOUR, "rule-removed"),
            (Impact.BEHAVIOUR, "suggestion-removed"),
        },
    ),
    # prompts
    (
        "prompt-removed",
        '[prompts."chase"]',
        '[prompts."chase_again"]',
        {(Impact.BREAKING, "prompt-removed"), (Impact.SAFE, "prompt-added")},
    ),
    (
        "prompt-required-argument-added",
        'order_id = { description = "Order id" }',
        'order_id = { description = "Order id" }, channel = { description = "Mail or phone" }',
        {(Impact.BREAKING, "prompt-argument-required-added")},
    ),
    (
        "prompt-optional-argument-added",
        'order_id = { description = "Order id" }',
        'order_id = { description = "Order id" }, note = { description = "A note", required = false }',
        {(Impact.SAFE, "prompt-argument-optional-added")},
    ),
    (
        "prompt-argument-value-removed",
        'values = ["friendly", "firm"]',
        'values = ["friendly"]',
        {(Impact.BREAKING, "prompt-argument-narrowed")},
    ),
    (
        "prompt-argument-removed",
        PROMPT_ARGUMENTS + '\ntemplate = "Chase {order_id} in a {tone} tone."',
        'arguments = { order_id = { description = "Order id" } }\ntemplate = "Chase {order_id}."',
        # the template cannot name {tone} any more: it changes too
        {(Impact.BREAKING, "prompt-argument-removed"), (Impact.BEHAVIOUR, "prompt-template-changed")},
    ),
    (
        "prompt-template-changed",
        'template = "Chase {order_id} in a {tone} tone."',
        'template = "Chase {order_id} politely, in a {tone} tone."',
        {(Impact.BEHAVIOUR, "prompt-template-changed")},
    ),
    (
        "prompt-requires-added",
        'template = "Chase {order_id} in a {tone} tone."',
        'template = "Chase {order_id} in a {tone} tone."\nrequires = { scopes = ["orders:read"] }',
        {(Impact.BREAKING, "requires-tightened")},
    ),
    (
        "resource-requires-added",
        "requires = {}  # open on purpose",
        'requires = { roles = ["admin"] }  # open on purpose',
        {(Impact.BREAKING, "requires-tightened")},
    ),
    (
        "output-shape-changed",
        'returns = "Order"',
        'returns = "Order[]"',
        {(Impact.BREAKING, "output-shape-changed")},
    ),
]


def _spec(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "old", "new", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_change_is_classified(
    tmp_path: Path, name: str, old: str, new: str, expected: set[tuple[Impact, str]]
) -> None:
    assert old == "" or BASE.count(old) >= 1, "the edit must name a place of the base spec"
    edited = BASE.replace(old, new) if old else BASE
    changes = diff_specs(_spec(tmp_path, "old", BASE), _spec(tmp_path, "new", edited))
    assert {(c.impact, c.kind) for c in changes} == expected, [c.message for c in changes]


def test_kinds_pinned_cover_twenty_kinds() -> None:
    kinds = {kind for *_, expected in CASES for _, kind in expected}
    assert len(kinds) >= 20, sorted(kinds)


NO_AUTH = BASE[: BASE.index("[auth]")]  # the models, workflow and first tools: [auth] (FG204 without HTTP) on


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            NO_AUTH,
            NO_AUTH.replace('version = "1.0.0"\n', 'version = "1.0.0"\ntransports = ["stdio"]\n'),
            {(Impact.BREAKING, "transport-removed")},
        ),
        (
            NO_AUTH.replace('version = "1.0.0"\n', 'version = "1.0.0"\ntransports = ["stdio"]\n'),
            NO_AUTH,
            {(Impact.SAFE, "transport-added")},
        ),
        (NO_AUTH, NO_AUTH.replace('version = "1.0.0"\n', 'version = "1.0.0"\ntransports = ["stdio", "http"]\n'), set()),
    ],
    ids=["http-removed", "http-added", "default-written-out"],
)
def test_transports_changes_are_classified(
    tmp_path: Path, old: str, new: str, expected: set[tuple[Impact, str]]
) -> None:
    assert "[auth]" not in NO_AUTH and 'version = "1.0.0"\n' in NO_AUTH
    changes = diff_specs(_spec(tmp_path, "old", old), _spec(tmp_path, "new", new))
    assert {(c.impact, c.kind) for c in changes} == expected, [c.message for c in changes]
    assert all(c.subject == "server" for c in changes)


def test_every_facet_of_the_report_has_a_comparer() -> None:
    """A facet added to the exposure report (a tool's `requires`) must say how its changes are classified."""
    assert set(FACET_DIFFS) == {f.key for f in TOOL_FACETS}


def test_unhiding_a_field_the_presenter_shows_widens_exposure(tmp_path: Path) -> None:
    """A model field that a presenter with all visible fields shows: hidden before, shown after."""
    old = BASE.replace('fields = ["id", "name", "email"]\n', "")
    new = old.replace('hidden = ["ssn"]\n', "")
    changes = diff_specs(_spec(tmp_path, "old", old), _spec(tmp_path, "new", new))
    # every read through the Order presenter: both tools and the resource
    subjects = ["resource order", "tool order_audit", "tool order_get"]  # tools by their wire names
    assert [(c.impact, c.kind, c.subject) for c in changes] == [
        (Impact.WIDENED, "hidden-unhidden", s) for s in subjects
    ]
    assert '"customer.ssn"' in changes[0].message


def test_exit_codes_and_json(tmp_path: Path) -> None:
    old = _spec(tmp_path, "old", BASE)
    breaking = _spec(tmp_path, "breaking", BASE.replace('total = "integer"\n', ""))
    widened = _spec(tmp_path, "widened", BASE.replace('redact_pii = ["email"]', ""))
    safe = _spec(tmp_path, "safe", BASE.replace("Fetch an order.", "Fetch one order."))
    assert run("diff", old, old, cwd=tmp_path).code == 0
    assert run("diff", old, safe, cwd=tmp_path).code == 0
    assert run("diff", old, widened, cwd=tmp_path).code == 4
    assert run("diff", old, breaking, cwd=tmp_path).code == 1
    both = _spec(tmp_path, "both", BASE.replace('total = "integer"\n', "").replace('redact_pii = ["email"]', ""))
    result = run("diff", old, both, "--format", "json", cwd=tmp_path)
    assert result.code == 1  # breaking first: CI fails; the widening is still listed
    document = json.loads(result.stdout)
    # order.get, order.audit and the order resource all read through the Order presenter
    assert document["summary"] == {"breaking": 3, "exposure-widened": 3, "behaviour": 0, "safe": 0}
    assert document["exit_code"] == 1
    assert {c["kind"] for c in document["changes"]} == {"output-removed", "redaction-removed"}
    text = run("diff", old, widened, cwd=tmp_path).stdout
    assert text.startswith('exposure-widened (3):\n  resource order: "customer.email" (string) now reaches')


def test_invalid_spec_and_usage_exit_2(tmp_path: Path) -> None:
    old = _spec(tmp_path, "old", BASE)
    bad = _spec(tmp_path, "bad", BASE.replace('total = "integer"', 'total = "intger"'))
    result = run("diff", old, bad, cwd=tmp_path)
    assert result.code == 2
    assert "error[FG110]" in result.stderr
    assert run("diff", old, cwd=tmp_path).code == 2


def test_git_revision_is_the_old_side(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    spec = _spec(tmp_path, "shop", BASE)
    git("add", "shop.toml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    spec.write_text(BASE.replace('redact_pii = ["email"]', ""), encoding="utf-8")
    result = run("diff", "--git", "HEAD", "shop.toml", cwd=tmp_path)
    assert result.code == 4, result.stdout + result.stderr
    assert "redaction-removed" in result.stdout
    spec.write_text(BASE.replace('total = "integer"', 'total = "intger"'), encoding="utf-8")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "broken")
    spec.write_text(BASE, encoding="utf-8")
    broken_before = run("diff", "--git", "HEAD", "shop.toml", cwd=tmp_path)
    assert broken_before.code == 2
    assert "shop.toml@HEAD:" in broken_before.stderr and "error[FG110]" in broken_before.stderr  # names the revision
    missing = run("diff", "--git", "no-such-rev", "shop.toml", cwd=tmp_path)
    assert missing.code == 2
    assert "error[FG002]" in missing.stderr


def test_exit_code_of_no_changes_is_zero() -> None:
    assert exit_code([]) == 0


INLINE = """
[server]
name = "shop"

[models.Order]
[models.Order.fields]
id = "string"
address = { type = "object", fields = { street = "string", zip = { type = "string", hidden = true } } }

[tools."order.place"]
kind = "mutation"
returns = "Order"
[tools."order.place".input]
address = { type = "object", fields = { street = "string", note = { type = "string", required = false } } }
"""


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('note = { type = "string", required = false }', 'note = "string"', {(Impact.BREAKING, "input-now-required")}),
        (', note = { type = "string", required = false }', "", {(Impact.BREAKING, "input-removed")}),
        (
            'street = "string", note',
            'street = "string", city = "string", note',
            {(Impact.BREAKING, "input-required-added")},
        ),
        ('zip = { type = "string", hidden = true }', 'zip = "string"', {(Impact.WIDENED, "hidden-unhidden")}),
        # The object itself replaced: one change, not one per field inside it.
        (
            'address = { type = "object", fields = { street = "string", note = { type = "string", required = false } } '
            "}",
            'address = "string"',
            {(Impact.BREAKING, "input-type-changed")},
        ),
    ],
    ids=["inner-now-required", "inner-removed", "inner-required-added", "inner-unhidden", "object-replaced"],
)
def test_changes_inside_inline_objects_are_classified(
    tmp_path: Path, old: str, new: str, expected: set[tuple[Impact, str]]
) -> None:
    assert INLINE.count(old) == 1, "the edit must name one place of the spec"
    changes = diff_specs(_spec(tmp_path, "old", INLINE), _spec(tmp_path, "new", INLINE.replace(old, new)))
    assert {(c.impact, c.kind) for c in changes} == expected, [c.message for c in changes]
    assert all("address." in c.message for c in changes if c.kind != "input-type-changed")
