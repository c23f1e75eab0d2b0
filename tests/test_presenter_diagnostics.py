"""Every way to get a presenter wrong, pinned as the exact diagnostics `fusiongen validate` prints.

Each test appends presenters (and sometimes models or tools) to one small valid base spec, runs the
real CLI in a subprocess from the spec's directory, and compares every `file:line:col: error[FGnnn]:
message` line (and its hint) with the expectation, in order. Positions are not hard-coded numbers:
`at(source, needle, offset)` finds the one place a needle is written, so each expectation says what it
points at: a value's opening quote, a key, a table header, or a character INSIDE an expression string.

Tests marked `xfail(strict=True)` state what fusiongen should print but does not yet; the reason
names the bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import Run, run_process

EXIT_INVALID = 2
SPEC_NAME = "presenters.toml"
DIAGNOSTIC = re.compile(r"^\S+:\d+:\d+: (error|warning)\[FG\d{3}\]: ")
ANY_HINT = object()  # the hint is not what the test is about

BASE = """\
[server]
name = "diag"

[models.Customer]
hidden = ["ssn"]
[models.Customer.fields]
id = "string"
name = "string"
email = "string"
ssn = { type = "string", required = false }

[models.LineItem]
[models.LineItem.fields]
sku = "string"
card_number = { type = "string", required = false }

[models.Invoice]
hidden = ["internal_notes"]
[models.Invoice.fields]
id = "string"
customer = { type = "Customer", required = false }
lines = { type = "list", items = "LineItem" }
tags = { type = "list", items = "string" }
amount = "integer"
status = "string"
internal_notes = { type = "string", required = false }

[tools."invoice.get"]
returns = "Invoice"
handler = "get_invoice"
"""


@dataclass(frozen=True)
class Expected:
    where: str  # line:col
    code: str
    message: str
    hint: object = None  # None: no hint printed; ANY_HINT: not checked
    severity: str = "error"

    def line(self) -> str:
        return f"{SPEC_NAME}:{self.where}: {self.severity}[{self.code}]: {self.message}"


def at(source: str, needle: str, offset: int = 0, *, nth: int | None = None) -> str:
    """`line:col` (1-based, in characters) of `needle`'s character at `offset`.

    The needle must be unique in the spec, unless `nth` picks one of its occurrences (from 0).
    """
    starts = [m.start() for m in re.finditer(re.escape(needle), source)]
    if nth is None:
        assert len(starts) == 1, f"{needle!r} occurs {len(starts)} times in the spec"
        nth = 0
    index = starts[nth] + offset
    line = source.count("\n", 0, index) + 1
    col = index - (source.rfind("\n", 0, index) + 1) + 1
    return f"{line}:{col}"


def validate(tmp_path: Path, source: str) -> Run:
    (tmp_path / SPEC_NAME).write_text(source, encoding="utf-8")
    return run_process("validate", SPEC_NAME, cwd=tmp_path)


def printed(stderr: str) -> list[tuple[str, str | None]]:
    """Each diagnostic line with the hint printed under it, if any."""
    found: list[tuple[str, str | None]] = []
    for line in stderr.splitlines():
        if DIAGNOSTIC.match(line):
            found.append((line, None))
        elif line.startswith("  hint: ") and found and found[-1][1] is None:
            found[-1] = (found[-1][0], line.removeprefix("  hint: "))
    return found


def check(tmp_path: Path, source: str, expected: list[Expected]) -> None:
    result = validate(tmp_path, source)
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "internal error" not in output, output
    assert result.returncode == EXIT_INVALID, output
    assert result.stdout == "", output
    got = printed(result.stderr)
    assert [line for line, _ in got] == [e.line() for e in expected], output
    for want, (line, hint) in zip(expected, got, strict=True):
        if want.hint is not ANY_HINT:
            assert hint == want.hint, f"hint of {line!r}:\n{output}"
    errors = sum(e.severity == "error" for e in expected)
    assert f"{errors} error(s); nothing was written." in result.stderr, output


def test_the_base_spec_is_valid(tmp_path: Path) -> None:
    result = validate(tmp_path, BASE)
    assert result.returncode == 0, result.stdout + result.stderr


# --- schema: FG150 FG151 FG152 ---------------------------------------------------------------------------


def test_unknown_model_and_bad_fields_and_schema_both_or_neither(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.A]
model = "Invoyce"

[presenters.B]
model = "Invoice"
fields = ["id", "internal_notes", "amont"]

[presenters.C]
model = "Invoice"
schema = { id = "string" }

[presenters.D]
rules = ["No schema at all."]

[presenters.E]
fields = ["id"]
schema = { id = "string" }
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Invoyce"'),
                "FG150",
                'presenter "A" names unknown model "Invoyce"',
                'did you mean "Invoice"?',
            ),
            Expected(
                at(source, '"internal_notes", "amont"'),
                "FG151",
                'presenter field "internal_notes" is hidden: it never leaves the server',
            ),
            Expected(
                at(source, '"amont"'),
                "FG151",
                'presenter field "amont" is not a field of "Invoice"',
                'did you mean "amount"?',
            ),
            Expected(
                at(source, 'schema = { id = "string" }\n\n[presenters.D]'),
                "FG152",
                'presenter "C" has both an inline schema and model/fields',
                "use either model (and fields) or schema",
            ),
            Expected(
                at(source, "[presenters.D]", len("[presenters.")),
                "FG152",
                'presenter "D" needs a model or an inline schema',
            ),
            Expected(
                at(source, 'fields = ["id"]\nschema', len('fields = ["id"]\n')),
                "FG152",
                'presenter "E" has both an inline schema and model/fields',
                "use either model (and fields) or schema",
            ),
        ],
    )


# --- embeds: FG153 FG154 ------------------------------------------------------------------------------


def test_bad_embeds(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"

[presenters.LineCard]
model = "LineItem"

[presenters.E]
model = "Invoice"
embed = { amount = "CustomerCard", customer = "CustomerCrad", lines = "CustomerCard", nope = "LineCard" }

[presenters.Narrow]
model = "Invoice"
fields = ["id"]
embed = { customer = "CustomerCard" }
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, 'amount = "CustomerCard"'),
                "FG153",
                'embed "amount" must name a field of this presenter that holds a model or a list of models',
            ),
            Expected(
                at(source, '"CustomerCrad"'),
                "FG153",
                'embed "customer" names unknown presenter "CustomerCrad"',
                'did you mean "CustomerCard"?',
            ),
            Expected(
                at(source, 'lines = "CustomerCard"', len("lines = ")),
                "FG153",
                'presenter "CustomerCard" shapes model "Customer", but field "lines" holds "LineItem"',
            ),
            Expected(
                at(source, 'nope = "LineCard"'),
                "FG153",
                'embed "nope" must name a field of this presenter that holds a model or a list of models',
            ),
            Expected(
                at(source, 'customer = "CustomerCard" }\n'),
                "FG153",  # not among the narrowed fields
                'embed "customer" must name a field of this presenter that holds a model or a list of models',
            ),
        ],
    )


CYCLES = (
    BASE
    + """
[models.Node]
[models.Node.fields]
id = "string"
next = { type = "Node", required = false }
prev = { type = "Node", required = false }

[presenters.Ping]
model = "Node"
embed = { next = "Pong" }

[presenters.Pong]
model = "Node"
embed = { next = "Ping" }

[presenters.Loop]
model = "Node"
embed = { prev = "Loop" }
"""
)


def test_an_embed_of_itself_is_a_cycle(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[models.Node]
[models.Node.fields]
id = "string"
prev = { type = "Node", required = false }

[presenters.Loop]
model = "Node"
embed = { prev = "Loop" }
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(at(source, 'embed = { prev = "Loop" }'), "FG154", "embedded presenters form a cycle: Loop → Loop"),
        ],
    )


def test_a_cycle_is_reported_once(tmp_path: Path) -> None:
    check(
        tmp_path,
        CYCLES,
        [
            Expected(
                at(CYCLES, 'embed = { next = "Pong" }'), "FG154", "embedded presenters form a cycle: Ping → Pong → Ping"
            ),
            Expected(at(CYCLES, 'embed = { prev = "Loop" }'), "FG154", "embedded presenters form a cycle: Loop → Loop"),
        ],
    )


def test_an_inline_schema_embed_cannot_name_a_hidden_field(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.Card]
schema = { id = "string", ssn = "string" }

[presenters.H]
model = "Invoice"
embed = { customer = "Card" }
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Card" }'),
                "FG153",
                'presenter "Card" declares "ssn", a hidden field of model "Customer", which field "customer" holds',
                "hidden fields never leave the server; remove it from the schema",
            ),
        ],
    )


# --- redaction paths: FG155 -----------------------------------------------------------------------------


def test_bad_redaction_paths(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"

[presenters.F]
model = "Invoice"
embed = { customer = "CustomerCard" }
redact_pii = [
  "lines[*].card_numbr",
  "amount[*]",
  "lines.card_number",
  "customer[*].email",
  "bad-segment",
  "nope.email",
  "customer.*.x",
  "customer.emial",
  "lines[*]",
  "tags[*]",
  "customer.*",
  "lines[*].card_number",
]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"lines[*].card_numbr"'),
                "FG155",
                'redaction path "lines[*].card_numbr": no field "card_numbr" here (did you mean "card_number"?)',
            ),
            Expected(
                at(source, '"amount[*]"'),
                "FG155",
                'redaction path "amount[*]": "amount" is not a list, so [*] does not apply',
            ),
            Expected(
                at(source, '"lines.card_number"'),
                "FG155",
                'redaction path "lines.card_number": "lines" is a list: write lines[*] to reach its items',
            ),
            Expected(
                at(source, '"customer[*].email"'),
                "FG155",
                'redaction path "customer[*].email": "customer" is not a list, so [*] does not apply',
            ),
            Expected(
                at(source, '"bad-segment"'),
                "FG155",
                'redaction path "bad-segment": "bad-segment" is not a field name, "*" or name[*]',
            ),
            Expected(at(source, '"nope.email"'), "FG155", 'redaction path "nope.email": no field "nope" here'),
            Expected(at(source, '"customer.*.x"'), "FG155", 'redaction path "customer.*.x": matches no field'),
            Expected(
                at(source, '"customer.emial"'),
                "FG155",  # through the embed: the child presenter's fields
                'redaction path "customer.emial": no field "emial" here (did you mean "email"?)',
            ),
        ],
    )


def test_a_double_star_on_a_list_of_models_names_the_real_problem(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.F]
model = "Invoice"
redact_pii = ["lines[*][*].sku"]
"""
    )
    result = validate(tmp_path, source)
    assert result.returncode == EXIT_INVALID
    [(line, _)] = printed(result.stderr)
    where = at(source, '"lines[*][*].sku"')
    assert line.startswith(f'{SPEC_NAME}:{where}: error[FG155]: redaction path "lines[*][*].sku": ')
    assert '"lines" is not a list' not in line


# --- limit: FG156 -------------------------------------------------------------------------------------


def test_limit_must_be_positive(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.Zero]
model = "Invoice"
limit = 0

[presenters.Negative]
model = "Invoice"
limit = -3
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(at(source, "limit = 0", len("limit = ")), "FG156", "limit must be at least 1, not 0"),
            Expected(at(source, "limit = -3", len("limit = ")), "FG156", "limit must be at least 1, not -3"),
        ],
    )


# --- expressions: FG157, positioned inside the string ---------------------------------------------------


def test_expression_errors_point_inside_the_string(tmp_path: Path) -> None:
    source = (
        BASE
        + r"""
[presenters.G]
model = "Invoice"
rules = ["Total {amount +}", "Due {amont}", "Up {upper(amount)}", "First {customer.name.first}"]
collection_rules = ["{count} invoices", "{count(1)} invoices"]

[[presenters.G.rules_when]]
when = "status = 'paid'"
rule = "Paid."

[[presenters.G.rules_when]]
when = "amount"
rule = "Unclosed {id"

[[presenters.G.rules_when]]
when = "amount > 'ten'"
rule = "Single {count()}"

[[presenters.G.suggest]]
tool = "invoice.get"
reason = "Look at {idd}"
when = "len(tags) == 'x'"

[[presenters.G.ui]]
type = "table"
columns = ["Customer"]
rows = [["{custmer.name}"]]

[[presenters.G.ui]]
type = "markdown"
text = "caf\u00e9 {stauts}"
when = "status == 1"

[[presenters.G.ui]]
type = "summary"
text = '''
literal {amont}'''

[[presenters.G.collection_ui]]
type = "list"
item = "{id} of {count()} {totl}"
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(at(source, "{amount +}", len("{amount +")), "FG157", "unexpected end of expression"),
            Expected(
                at(source, '"Due {amont}"', len('"Due {')), "FG157", 'unknown field "amont" (did you mean "amount"?)'
            ),
            Expected(at(source, "upper(amount)", len("upper(")), "FG157", "upper() needs a string, got INTEGER"),
            Expected(
                at(source, "name.first", len("name.")), "FG157", '"customer.name" is STRING; it has no field "first"'
            ),
            Expected(at(source, "{count} invoices", 1), "FG157", 'unknown field "count" (did you mean "count()"?)'),
            Expected(at(source, "count(1)"), "FG157", "count() takes no arguments"),
            Expected(at(source, "status = 'paid'", len("status ")), "FG157", "unexpected '='; use '==' to compare"),
            Expected(
                at(source, 'when = "amount"\n', len('when = "')),
                "FG157",
                "a condition must be true or false, got INTEGER (compare it, e.g. status == 'paid')",
            ),
            Expected(
                at(source, "Unclosed {id", len("Unclosed ")),
                "FG157",
                "'{' is never closed; write '{{' for a literal brace",
            ),
            Expected(
                at(source, "amount > 'ten'"), "FG157", "'>' needs two numbers or two strings, got INTEGER and STRING"
            ),
            Expected(
                at(source, "Single {count()}", len("Single {")),
                "FG157",
                "count() is only available in collection presenters",
            ),
            Expected(at(source, "{idd}", 1), "FG157", 'unknown field "idd" (did you mean "id"?)'),
            Expected(
                at(source, "len(tags) == 'x'"), "FG157", "'==' compares INTEGER with STRING: they are never equal"
            ),
            Expected(at(source, "{custmer.name}", 1), "FG157", 'unknown field "custmer" (did you mean "customer"?)'),
            Expected(at(source, "{stauts}", 1), "FG157", 'unknown field "stauts" (did you mean "status"?)'),
            Expected(at(source, "status == 1"), "FG157", "'==' compares STRING with INTEGER: they are never equal"),
            Expected(
                at(source, "literal {amont}", len("literal {")),
                "FG157",
                'unknown field "amont" (did you mean "amount"?)',
            ),
            Expected(at(source, "{totl}", 1), "FG157", 'unknown field "totl"'),
        ],
    )


# --- leaks: FG158 ----------------------------------------------------------------------------------------


def test_model_audience_text_cannot_read_redacted_paths(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"
redact_pii = ["email"]

[presenters.H]
model = "Invoice"
embed = { customer = "CustomerCard" }
redact_pii = ["status"]
rules = ["Status {status}."]
rules_when = [{ when = "customer.email == 'x'", rule = "r" }]
suggest = [{ tool = "invoice.get", reason = "Write to {customer.email}" }]

[[presenters.H.ui]]
type = "json"

[[presenters.H.ui]]
type = "json"
path = "customer"

[[presenters.H.ui]]
type = "markdown"
text = "Mail {customer.email}"

[[presenters.H.ui]]
type = "summary"
text = "Shown to the user only: {customer.email} {status}"
audience = "user"

[[presenters.H.ui]]
type = "json"
path = "customer.email"
audience = "user"

[[presenters.H.collection_ui]]
type = "list"
item = "{id}: {status}"
"""
    )
    redacted_email = '"customer.email" is redacted (redact_pii "customer.email"): it cannot be shown to the model'
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Status {status}."'),
                "FG158",
                '"status" is redacted (redact_pii "status"): it cannot be shown to the model',
                ANY_HINT,
            ),
            Expected(at(source, "\"customer.email == 'x'\""), "FG158", redacted_email, ANY_HINT),
            Expected(at(source, '"Write to {customer.email}"'), "FG158", redacted_email, ANY_HINT),
            Expected(
                at(source, '[[presenters.H.ui]]\ntype = "json"\n\n'),
                "FG158",
                "the whole result holds redacted fields: a json block cannot show it to the model",
                'mark the block audience = "user"',
            ),
            Expected(
                at(source, 'path = "customer"\n'),
                "FG158",
                '"customer" is redacted (redact_pii "customer.email"): a json block cannot show it to the model',
                'mark the block audience = "user"',
            ),
            Expected(
                at(source, '"Mail {customer.email}"'),
                "FG158",
                redacted_email,
                'show it in a UI block with audience = "user", or read another field',
            ),
            # Allowed for the user, but a client that ignores audience would show the model: FG161 warns.
            Expected(
                at(source, '[[presenters.H.ui]]\ntype = "summary"'),
                "FG161",
                'the user-only summary block ui[3] shows "customer.email", '
                'which redact_pii "customer.email" masks for the model',
                'omitted while user_blocks = "omit"; with "send" (or --user-blocks send) a client that ignores '
                "audience hands the real value to the model",
                "warning",
            ),
            Expected(
                at(source, '[[presenters.H.ui]]\ntype = "summary"'),
                "FG161",
                'the user-only summary block ui[3] shows "status", which redact_pii "status" masks for the model',
                ANY_HINT,
                "warning",
            ),
            Expected(
                at(source, '[[presenters.H.ui]]\ntype = "json"\npath = "customer.email"'),
                "FG161",
                'the user-only json block ui[4] shows "customer.email", '
                'which redact_pii "customer.email" masks for the model',
                ANY_HINT,
                "warning",
            ),
            Expected(
                at(source, '"{id}: {status}"'),
                "FG158",
                '"status" is redacted (redact_pii "status"): it cannot be shown to the model',
                ANY_HINT,
            ),
        ],
    )


def test_a_leak_names_the_redaction_path_as_written(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.H]
model = "Invoice"
redact_pii = ["lines[*].card_number"]
rules = ["Lines: {lines}"]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Lines: {lines}"'),
                "FG158",
                '"lines" is redacted (redact_pii "lines[*].card_number"): it cannot be shown to the model',
                ANY_HINT,
            ),
        ],
    )


def test_model_audience_text_cannot_read_hidden_paths(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.H]
model = "Invoice"
rules = ["Notes: {internal_notes}", "SSN: {customer.ssn}"]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Notes: {internal_notes}"'),
                "FG158",
                '"internal_notes" is hidden: hidden fields never leave the server',
                ANY_HINT,
            ),
            Expected(
                at(source, '"SSN: {customer.ssn}"'),
                "FG158",
                '"customer.ssn" is hidden: hidden fields never leave the server',
                ANY_HINT,
            ),
        ],
    )


def test_not_even_a_user_block_can_read_hidden_paths(tmp_path: Path) -> None:
    """Redacted values may be shown to the human (audience = "user"); hidden ones never leave the server."""
    source = (
        BASE
        + """
[presenters.H]
model = "Invoice"

[[presenters.H.ui]]
type = "markdown"
audience = "user"
text = "Notes: {internal_notes}"
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"Notes: {internal_notes}"'),
                "FG158",
                '"internal_notes" is hidden: hidden fields never leave the server',
                ANY_HINT,
            ),
        ],
    )


def test_a_user_block_may_be_conditioned_on_a_redacted_path(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.H]
model = "Invoice"
redact_pii = ["status"]

[[presenters.H.ui]]
type = "summary"
audience = "user"
text = "Status {status}"
when = "status == 'overdue'"
"""
    )
    result = validate(tmp_path, source)
    assert result.returncode == 0, result.stderr


@pytest.mark.xfail(
    strict=True,
    reason="fusiongen bug (false positive): a null check of an object that holds a redacted field (customer "
    "!= null) is refused with FG158, though it reveals nothing redacted",
)
def test_a_null_check_of_an_object_holding_a_redacted_field_is_allowed(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"
redact_pii = ["email"]

[presenters.H]
model = "Invoice"
embed = { customer = "CustomerCard" }
suggest = [{ tool = "invoice.get", reason = "Reload {id} for {customer.name}", when = "customer != null" }]
"""
    )
    result = validate(tmp_path, source)
    assert result.returncode == 0, result.stderr


def test_an_embedded_presenter_cannot_show_what_its_parent_redacts(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"
rules = ["Customer {name}."]

[presenters.LineCard]
model = "LineItem"
suggest = [{ tool = "invoice.get", reason = "Charge {card_number}" }]

[presenters.I]
model = "Invoice"
embed = { customer = "CustomerCard", lines = "LineCard" }
redact_pii = ["customer.name", "lines[*].card_number"]
"""
    )
    check(
        tmp_path,
        source,
        [  # reported at the parent's redact_pii entry: the child alone cannot know
            Expected(
                at(source, '"customer.name"'),
                "FG158",
                'presenter "CustomerCard" (embedded as "customer") shows "customer.name" to the model, '
                'which redact_pii "customer.name" masks',
                'redact it in "CustomerCard" too, or show it only with audience = "user"',
            ),
            Expected(
                at(source, '"lines[*].card_number"'),
                "FG158",
                'presenter "LineCard" (embedded as "lines") shows "lines.card_number" to the model, '
                'which redact_pii "lines[*].card_number" masks',
                'redact it in "LineCard" too, or show it only with audience = "user"',
            ),
        ],
    )


def test_each_parent_redaction_is_blamed_only_for_what_it_masks(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.CustomerCard]
model = "Customer"
rules = ["Customer {name}."]

[presenters.I]
model = "Invoice"
embed = { customer = "CustomerCard" }
redact_pii = ["customer.name", "customer.id"]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"customer.name"'),
                "FG158",
                'presenter "CustomerCard" (embedded as "customer") shows "customer.name" to the model, '
                'which redact_pii "customer.name" masks',
                ANY_HINT,
            ),
        ],
    )


def test_an_enum_field_compared_with_a_value_it_never_holds(tmp_path: Path) -> None:
    """`status == 'Open'` where status is an enum of lower-case values: the rule would never apply, silently."""
    source = """\
[server]
name = "diag"

[models.Ticket.fields]
id = "string"
status = { type = "enum", values = ["open", "closed"] }

[presenters.T]
model = "Ticket"
rules_when = [{ when = "status == 'Open'", rule = "Say it is open." }]
suggest = [{ tool = "ticket.get", reason = "Reload", when = "status in ['open', 'shut']" }]

[tools."ticket.get"]
returns = "T"
"""
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, "'Open'"), "FG157", "'Open' is not a value of status (open, closed) (did you mean 'open'?)"
            ),
            Expected(at(source, "'shut'"), "FG157", "'shut' is not a value of status (open, closed)"),
        ],
    )


# --- suggestions: FG159 -----------------------------------------------------------------------------------


def test_suggestion_naming_an_unknown_tool(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.S]
model = "Invoice"
suggest = [{ tool = "invoice.gett", reason = "Reload" }, { tool = "mail.send", reason = "Mail {id}" }]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"invoice.gett"'),
                "FG159",
                'suggestion names unknown tool "invoice.gett"',
                'did you mean "invoice.get"?',
            ),
            Expected(at(source, '"mail.send"'), "FG159", 'suggestion names unknown tool "mail.send"'),
        ],
    )


def test_a_suggestion_may_name_a_tool_generated_for_a_workflow(tmp_path: Path) -> None:
    """`<workflow>.start` and `.status` are tools the server lists: suggesting them is fine, and a misspelt one gets
    the generated name as its "did you mean" (the one error below is the misspelling)."""
    source = (
        BASE
        + """
[workflows.ticket]
initial = "open"
[workflows.ticket.states]
open = { on = { CLOSE = "closed" } }
closed = { type = "final" }

[tools."ticket.close"]
bind_state = { states = ["open"], transition = "CLOSE" }

[presenters.S]
model = "Invoice"
suggest = [
  { tool = "ticket.start", reason = "Open a ticket about {id}" },
  { tool = "ticket.status", reason = "See where it stands" },
  { tool = "ticket.strat", reason = "Typo" },
]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"ticket.strat"'),
                "FG159",
                'suggestion names unknown tool "ticket.strat"',
                'did you mean "ticket.start"?',
            )
        ],
    )


# --- UI blocks: FG160 -------------------------------------------------------------------------------------


def test_ui_blocks_with_missing_or_foreign_keys_and_bad_rows(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.U]
model = "Invoice"

[[presenters.U.ui]]
type = "table"
columns = ["A"]

[[presenters.U.ui]]
type = "list"
item = "{id}"

[[presenters.U.ui]]
type = "code"
text = "x"
path = "id"

[[presenters.U.ui]]
type = "markdown"
text = "x"
language = "md"

[[presenters.U.ui]]
type = "table"
columns = ["A", "B"]
rows = [["a", "b"], ["a", "b", "c"]]

[[presenters.U.ui]]
type = "json"
path = "customer.nme"

[[presenters.U.collection_ui]]
type = "table"
columns = ["A"]
rows = [["{id}"]]

[[presenters.U.collection_ui]]
type = "list"
items = ["{id}"]
"""
    )

    def header(n: int) -> str:  # the n-th block's [[...]] header: where a missing key is reported
        return at(source, "\n[[presenters.U.", 1, nth=n)

    check(
        tmp_path,
        source,
        [
            Expected(header(0), "FG160", 'a table block needs "rows"'),
            Expected(header(1), "FG160", 'a list block needs "items"'),
            Expected(at(source, 'item = "{id}"'), "FG160", 'a list block has no "item"', "its keys: items"),
            Expected(at(source, 'path = "id"'), "FG160", 'a code block has no "path"', "its keys: language, text"),
            Expected(at(source, 'language = "md"'), "FG160", 'a markdown block has no "language"', "its keys: text"),
            Expected(at(source, '["a", "b", "c"]'), "FG160", "a table row has 3 cells for 2 columns"),
            Expected(at(source, '"customer.nme"'), "FG160", 'json block path "customer.nme" is not a field'),
            Expected(header(6), "FG160", 'a table block needs "row"'),
            Expected(
                at(source, 'rows = [["{id}"]]'),
                "FG160",
                'a table block of collection_ui has no "rows"',
                "its keys: columns, row",
            ),
            Expected(header(7), "FG160", 'a list block needs "item"'),
            Expected(
                at(source, 'items = ["{id}"]'),
                "FG160",
                'a list block of collection_ui has no "items"',
                "its keys: item",
            ),
        ],
    )


def test_every_bad_table_row_is_reported(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.U]
model = "Invoice"

[[presenters.U.ui]]
type = "table"
columns = ["A", "B"]
rows = [["a", "b", "c"], ["a", "b"], ["d", "e", "f", "g"]]
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(at(source, '["a", "b", "c"]'), "FG160", "a table row has 3 cells for 2 columns"),
            Expected(at(source, '["d", "e", "f", "g"]'), "FG160", "a table row has 4 cells for 2 columns"),
        ],
    )


# --- returns: FG111 ------------------------------------------------------------------------------------


def test_returns_naming_an_unknown_presenter(tmp_path: Path) -> None:
    source = (
        BASE
        + """
[presenters.InvoiceView]
model = "Invoice"

[tools."invoice.view"]
returns = "InvoiceVeiw"
handler = "view_invoice"

[tools."invoice.list"]
returns = "Nothing[]"
handler = "list_invoices"
"""
    )
    check(
        tmp_path,
        source,
        [
            Expected(
                at(source, '"InvoiceVeiw"'),
                "FG111",
                'returns names unknown presenter or model "InvoiceVeiw"',
                'did you mean "InvoiceView"?',
            ),
            Expected(
                at(source, '"Nothing[]"'),
                "FG111",
                'returns names unknown presenter or model "Nothing"',
                'name a presenter or a model, "X[]" for a list',
            ),
        ],
    )
