"""Pinned diagnostics of workflows and state bindings, as `fusiongen validate` prints them.

Every case writes a spec (and, for an imported XState machine, `invoice.machine.json` beside it) into a
temp dir and runs the real CLI there in a subprocess, so paths print as `spec.toml` and
`invoice.machine.json`. An invalid spec exits 2 and prints exactly the lines given; a valid spec with
warnings exits 0 and prints the warnings. Cases are variations of one valid spec, each replacing a few
of its lines, so every position below can be checked against BASE.

Where fusiongen prints something wrong, the case pins only the lines that are right, and a strict xfail
test below states what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import Run, run_process

EXIT_OK, EXIT_INVALID = 0, 2
pytestmark = pytest.mark.timeout(60)

BASE = """\
[server]
name = "shop"

[workflows.invoice]
initial = "draft"
[workflows.invoice.states]
draft = { on = { SUBMIT = "review" } }
review = { on = { APPROVE = "approved", REJECT = "draft" } }
approved = { type = "final" }

[tools."invoice.submit"]
description = "Submit."
bind_state = { states = ["draft"], transition = "SUBMIT" }

[tools."invoice.approve"]
description = "Approve."
bind_state = { states = ["review"], transition = "APPROVE" }

[tools."invoice.reject"]
description = "Reject."
bind_state = { workflow = "invoice", states = ["review"], transition = "REJECT" }
[tools."invoice.reject".input]
reason = "text"
"""

# BASE with the inline workflow (lines 5-9) replaced by an import: the tools move up by four lines.
MACHINE_SPEC = """\
[server]
name = "shop"

[workflows.invoice]
machine = "invoice.machine.json"

[tools."invoice.submit"]
description = "Submit."
bind_state = { states = ["draft"], transition = "SUBMIT" }

[tools."invoice.approve"]
description = "Approve."
bind_state = { states = ["review"], transition = "APPROVE" }

[tools."invoice.reject"]
description = "Reject."
bind_state = { workflow = "invoice", states = ["review"], transition = "REJECT" }
[tools."invoice.reject".input]
reason = "text"
"""

MACHINE = """\
{
  "id": "invoice",
  "initial": "draft",
  "states": {
    "draft": { "on": { "SUBMIT": "review" } },
    "review": { "on": { "APPROVE": "approved", "REJECT": "draft" } },
    "approved": { "type": "final" }
  }
}
"""

NO_MACHINE = "<no machine file>"


def lines_replaced(text: str, replacements: dict[int, str], extra: str = "") -> str:
    """`text` with its 1-based lines replaced (a replacement may hold several lines), then `extra`."""
    lines = text.splitlines()
    for number, replacement in replacements.items():
        lines[number - 1] = replacement
    return "\n".join(lines) + "\n" + extra


def spec(replacements: dict[int, str] | None = None, extra: str = "") -> str:
    return lines_replaced(BASE, replacements or {}, extra)


def machine(replacements: dict[int, str]) -> str:
    return lines_replaced(MACHINE, replacements)


@dataclass(frozen=True)
class Case:
    id: str
    spec: str
    exit: int
    stderr: list[str]  # every line, in order (hints and the summary included)
    machine: str | None = None  # the JSON of invoice.machine.json when the spec imports one
    # Only these lines must appear (in this order, maybe among others): the rest is a bug pinned below.
    # A line without a position pins the message only.
    partial: bool = False


def json_case(
    name: str, replacements: dict[int, str], stderr: list[str], *, exit: int = EXIT_INVALID, partial: bool = False
) -> Case:
    """A case importing BASE's workflow from invoice.machine.json, with some of MACHINE's lines replaced."""
    return Case(name, MACHINE_SPEC, exit, stderr, machine=machine(replacements), partial=partial)


def summary(errors: int) -> str:
    return f"{errors} error(s); nothing was written."


HINT_STATE = "  hint: flatten the machine, or enforce it in a handler"
HINT_TRANSITION = "  hint: ignoring it would change behaviour; move the check into a handler"
JSON = "invoice.machine.json"


def state_feature(at: str, state: str, what: str) -> list[str]:
    """FG172 for a state-level XState feature (`what` is '"entry"' or 'nested states'), with its hint."""
    return [
        f'{at}: error[FG172]: state "{state}" uses {what}, an XState feature fusiongen does not compile',
        HINT_STATE,
    ]


def guarded(at: str, state: str, event: str) -> list[str]:
    return [
        f'{at}: error[FG172]: transition {state} --{event}--> uses "guard", an XState feature fusiongen '
        "does not compile",
        HINT_TRANSITION,
    ]


def several(at: str, state: str, event: str) -> list[str]:
    return [
        f'{at}: error[FG172]: event "{event}" of state "{state}" has several (guarded) transitions; '
        "fusiongen compiles one target per event"
    ]


def unreachable(at: str, state: str) -> list[str]:
    return [f'{at}: warning[FG175]: state "{state}" of workflow "invoice" cannot be reached from "draft"']


def unfired(state: str, event: str, target: str) -> list[str]:
    """FG176: reported at the workflow's table header, [workflows.invoice]."""
    return [
        f'spec.toml:4:12: warning[FG176]: no tool fires {state} --{event}--> {target} in workflow "invoice"',
        f'  hint: bind a tool with transition = "{event}" to state "{state}"',
    ]


def no_state(at: str, state: str, states: str = "draft, review, approved") -> list[str]:
    return [f'{at}: error[FG170]: workflow "invoice" has no state "{state}"', f"  hint: its states: {states}"]


def clash(at: str, tool: str) -> list[str]:
    wire = tool.replace(".", "_")  # the default tool_names: a spec name is compared as the model sees it
    return [
        f'{at}: error[FG177]: tool "{tool}" clashes with the tool fusiongen generates for workflow "invoice" '
        f'("{wire}")',
        "  hint: rename the tool",
    ]


NO_WORKFLOW = 'error[FG174]: bind_state needs "workflow" when the spec does not have exactly one'
DRAFT = '    "draft": { "on": { "SUBMIT": "review" }, '
REVIEW = '    "review": { "on": { "APPROVE": "approved", "REJECT": '
LIMBO = 'approved = { type = "final" }\nlimbo = { type = "final" }'
REFUND = """
[workflows.refund]
initial = "asked"
[workflows.refund.states]
asked = { on = { GRANT = "granted" } }
granted = { type = "final" }

[tools."refund.grant"]
description = "Grant."
bind_state = { workflow = "refund", states = ["asked"], transition = "GRANT" }
"""

CASES = [
    Case("valid", spec(), EXIT_OK, []),
    Case("valid-machine", MACHINE_SPEC, EXIT_OK, [], machine=MACHINE),
    # --- states and transitions -----------------------------------------------------------------------
    Case(
        "unknown-initial-state",
        spec({5: 'initial = "drafts"'}),
        EXIT_INVALID,
        [
            'spec.toml:5:1: error[FG170]: workflow "invoice" needs "initial" naming one of its states '
            '("drafts" is not one)',
            summary(1),
        ],
    ),
    Case(
        "missing-initial-state",
        spec({5: ""}),
        EXIT_INVALID,
        [
            'spec.toml:4:12: error[FG170]: workflow "invoice" needs "initial" naming one of its states',
            summary(1),
        ],
    ),
    Case(
        "unknown-transition-target",
        spec({8: 'review = { on = { APPROVE = "aproved", REJECT = "draft" } }'}),
        EXIT_INVALID,
        [
            'spec.toml:8:19: error[FG170]: transition review --APPROVE--> "aproved": no such state',
            *unreachable("spec.toml:9:1", "approved"),
        ],
        partial=True,
    ),
    Case(
        "final-state-with-transitions",
        spec({9: 'approved = { type = "final", on = { REOPEN = "draft" } }'}),
        EXIT_INVALID,
        [
            'spec.toml:9:30: error[FG174]: final state "approved" cannot have transitions',
            summary(1),
        ],
    ),
    # --- warnings: they never fail a valid spec --------------------------------------------------------
    Case("unreachable-state", spec({9: LIMBO}), EXIT_OK, unreachable("spec.toml:10:1", "limbo")),
    Case(
        "transition-no-tool-fires",
        spec({21: 'bind_state = { workflow = "invoice", states = ["review"] }'}),
        EXIT_OK,
        unfired("review", "REJECT", "draft"),
    ),
    Case(
        "warnings-beside-an-error",
        spec({9: LIMBO, 21: 'bind_state = { workflow = "invoice", states = ["reveiw"] }'}),
        EXIT_INVALID,
        [
            *unfired("review", "REJECT", "draft"),
            *unreachable("spec.toml:10:1", "limbo"),
            *no_state("spec.toml:22:48", "reveiw", "draft, review, approved, limbo"),
            summary(1),
        ],
    ),
    # --- bind_state -----------------------------------------------------------------------------------
    Case(
        "unknown-bound-state",
        spec({17: 'bind_state = { states = ["reveiw"], transition = "APPROVE" }'}),
        EXIT_INVALID,
        [
            *unfired("review", "APPROVE", "approved"),
            *no_state("spec.toml:17:26", "reveiw"),
            summary(1),
        ],
    ),
    Case(
        "unknown-bound-event",
        spec({17: 'bind_state = { states = ["review"], transition = "APPROVED" }'}),
        EXIT_INVALID,
        [
            *unfired("review", "APPROVE", "approved"),
            'spec.toml:17:50: error[FG171]: no state of workflow "invoice" accepts event "APPROVED"',
            summary(1),
        ],
    ),
    Case(
        "bound-event-not-accepted-in-the-tools-states",
        spec({13: 'bind_state = { states = ["draft"], transition = "APPROVE" }'}),
        EXIT_INVALID,
        [
            *unfired("draft", "SUBMIT", "review"),
            'spec.toml:13:49: error[FG171]: event "APPROVE" is accepted only in review, not in the states '
            "this tool runs in",
            summary(1),
        ],
    ),
    Case(
        "bind-state-without-workflow-when-there-are-two",
        spec(extra=REFUND),
        EXIT_INVALID,
        [
            *unfired("draft", "SUBMIT", "review"),
            *unfired("review", "APPROVE", "approved"),
            f"spec.toml:13:1: {NO_WORKFLOW}",
            f"spec.toml:17:1: {NO_WORKFLOW}",
            summary(2),
        ],
    ),
    Case(
        "compact-description-without-bind-state",
        spec(
            extra="""
[tools."invoice.peek"]
description = "Peek at the invoice."
compact_description = "Peek."
"""
        ),
        EXIT_INVALID,
        [
            "spec.toml:27:1: error[FG174]: compact_description needs bind_state: it is shown while the bound "
            "workflow is in its initial state",
            summary(1),
        ],
    ),
    # --- names fusiongen generates ----------------------------------------------------------------------
    Case(
        "user-tool-named-like-the-generated-start",
        spec(
            extra="""
[tools."invoice.start"]
description = "My own start."

[tools."invoice.status"]
description = "My own status."
"""
        ),
        EXIT_INVALID,
        [
            *clash("spec.toml:25:8", "invoice.start"),
            *clash("spec.toml:28:8", "invoice.status"),
            summary(2),
        ],
    ),
    # Only what is generated is reserved: no tool of BASE refuses in doubt, so there is no invoice.resolve
    # (issue 23 #6: a helpdesk's own ticket.resolve must build).
    Case(
        "user-tool-named-like-resolve-where-none-is-generated",
        spec(extra='\n[tools."invoice.resolve"]\ndescription = "My own resolve."\n'),
        EXIT_OK,
        [],
    ),
    Case(
        "user-tool-named-like-resolve-where-one-is-generated",
        spec(
            {16: 'description = "Approve."\nkind = "mutation"'},  # a mutation refuses in doubt: resolve is generated
            '\n[tools."invoice.resolve"]\ndescription = "Mine."\n',
        ),
        EXIT_INVALID,
        [
            'spec.toml:26:8: error[FG177]: tool "invoice.resolve" clashes with the tool fusiongen generates for '
            'workflow "invoice" ("invoice_resolve") (generated because a tool of the workflow has in_doubt = "refuse")',
            "  hint: rename the tool",
            summary(1),
        ],
    ),
    Case(
        "bound-tool-input-named-like-the-handle",
        spec({23: 'workflow_id = "string"'}),
        EXIT_INVALID,
        [
            'error[FG177]: tool "invoice.reject" has an input "workflow_id", the workflow handle argument',
            "  hint: rename the input or set [server] state_handle_key",
        ],
        partial=True,
    ),
    Case(
        "input-named-workflow-id-is-fine-with-another-handle-key",
        spec({2: 'name = "shop"\nstate_handle_key = "ticket"', 23: 'workflow_id = "string"'}),
        EXIT_OK,
        [],
    ),
    # --- XState features in TOML ---------------------------------------------------------------------
    Case(
        "toml-always",
        spec({7: 'draft = { on = { SUBMIT = "review" }, always = "review" }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", '"always"'), summary(1)],
    ),
    Case(
        "toml-after",
        spec({7: 'draft = { on = { SUBMIT = "review" }, after = { 5000 = "review" } }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", '"after"'), summary(1)],
    ),
    Case(
        "toml-invoke",
        spec({7: 'draft = { on = { SUBMIT = "review" }, invoke = { src = "fetch" } }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", '"invoke"'), summary(1)],
    ),
    Case(
        "toml-entry",
        spec({7: 'draft = { on = { SUBMIT = "review" }, entry = ["notify"] }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", '"entry"'), summary(1)],
    ),
    Case(
        "toml-nested-states",
        spec({7: 'draft = { on = { SUBMIT = "review" }, states = { editing = {} } }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", "nested states"), summary(1)],
    ),
    Case(
        "toml-nested-states-with-initial",
        spec({7: 'draft = { on = { SUBMIT = "review" }, initial = "editing", states = { editing = {} } }'}),
        EXIT_INVALID,
        [*state_feature("spec.toml:7:39", "draft", "nested states")],
        partial=True,
    ),
    Case(
        "toml-guard",
        spec({8: 'review = { on = { APPROVE = "approved", REJECT = { target = "draft", guard = "ok" } } }'}),
        EXIT_INVALID,
        guarded("spec.toml:8:70", "review", "REJECT"),
        partial=True,
    ),
    Case(
        "toml-guarded-transitions-array",
        spec(
            {
                8: 'review = { on = { APPROVE = "approved", REJECT = [{ target = "draft", guard = "ok" }, '
                '{ target = "review" }] } }'
            }
        ),
        EXIT_INVALID,
        several("spec.toml:8:41", "review", "REJECT"),
        partial=True,
    ),
    Case(
        "toml-wildcard-event",
        spec({8: 'review = { on = { APPROVE = "approved", REJECT = "draft", "*" = "review" } }'}),
        EXIT_INVALID,
        [
            'spec.toml:8:59: error[FG172]: wildcard event "*" in state "review" is not compiled',
            summary(1),
        ],
    ),
    # --- XState features in a JSON machine: positions point into the JSON --------------------------------
    json_case(
        "json-always",
        {5: DRAFT + '"always": [{ "target": "review" }] },'},
        [*state_feature(f"{JSON}:5:46", "draft", '"always"'), summary(1)],
    ),
    json_case(
        "json-after",
        {5: DRAFT + '"after": { "5000": "review" } },'},
        [*state_feature(f"{JSON}:5:46", "draft", '"after"'), summary(1)],
    ),
    json_case(
        "json-invoke",
        {5: DRAFT + '"invoke": { "src": "fetchInvoice" } },'},
        [*state_feature(f"{JSON}:5:46", "draft", '"invoke"'), summary(1)],
    ),
    json_case(
        "json-entry",
        {5: DRAFT + '"entry": ["notify"] },'},
        [*state_feature(f"{JSON}:5:46", "draft", '"entry"'), summary(1)],
    ),
    Case(
        "json-exit",
        MACHINE_SPEC,
        EXIT_INVALID,  # "tags" are metadata: accepted
        [*state_feature(f"{JSON}:7:54", "approved", '"exit"'), summary(1)],
        machine=machine({7: '    "approved": { "type": "final", "tags": ["done"], "exit": ["log"] }'}),
    ),
    Case(
        "json-nested-states",
        MACHINE_SPEC,
        EXIT_INVALID,
        [*state_feature(f"{JSON}:5:46", "draft", "nested states"), summary(1)],
        machine=machine({5: DRAFT + '"states": { "editing": {} } },'}),
    ),
    Case(
        "json-guard",
        MACHINE_SPEC,
        EXIT_INVALID,
        guarded(f"{JSON}:6:79", "review", "REJECT"),
        partial=True,
        machine=machine({6: REVIEW + '{ "target": "draft", "guard": "hasReason" } } },'}),
    ),
    json_case(
        "json-guarded-transitions-array",
        {6: REVIEW + '[{ "target": "draft", "guard": "ok" }, { "target": "review" }] } },'},
        several(f"{JSON}:6:48", "review", "REJECT"),
        partial=True,
    ),
    Case(
        "json-wildcard-event",
        MACHINE_SPEC,
        EXIT_INVALID,
        [
            f'{JSON}:6:67: error[FG172]: wildcard event "*" in state "review" is not compiled',
            summary(1),
        ],
        machine=machine({6: REVIEW + '"draft", "*": "review" } },'}),
    ),
    Case(
        "json-parallel-machine",
        MACHINE_SPEC,
        EXIT_INVALID,
        [
            f'{JSON}:3:3: error[FG172]: machine key "type" is an XState feature fusiongen does not compile',
            summary(1),
        ],
        machine=machine({2: '  "id": "invoice",\n  "type": "parallel",'}),
    ),
    Case(
        "json-final-state-with-transitions",
        MACHINE_SPEC,
        EXIT_INVALID,
        [
            f'{JSON}:7:36: error[FG174]: final state "approved" cannot have transitions',
            summary(1),
        ],
        machine=machine({7: '    "approved": { "type": "final", "on": { "REOPEN": "draft" } }'}),
    ),
    Case(
        "json-unreachable-state",
        MACHINE_SPEC,
        EXIT_OK,
        unreachable(f"{JSON}:8:5", "limbo"),
        machine=machine({7: '    "approved": { "type": "final" },\n    "limbo": { "type": "final" }'}),
    ),
    json_case(
        "json-entry-in-two-states",
        {5: DRAFT + '"entry": ["notify"] },', 6: REVIEW + '"draft" }, "entry": ["audit"] },'},
        state_feature(f"{JSON}:5:46", "draft", '"entry"'),
        partial=True,
    ),
    json_case(
        "json-unknown-initial-state",
        {3: '  "initial": "drafts",'},
        [
            f'{JSON}:3:3: error[FG170]: workflow "invoice" needs "initial" naming one of its states ("drafts" is '
            "not one)",
            summary(1),
        ],
    ),
    json_case(
        "json-context-is-only-a-warning",
        {2: '  "id": "invoice",\n  "context": { "count": 0 },'},
        [
            f'{JSON}:3:3: warning[FG172]: machine "context" has no effect here (no actions run)',
        ],
        exit=EXIT_OK,
    ),
    # --- machine files that cannot be used ---------------------------------------------------------------
    Case(
        "invalid-machine-json",
        MACHINE_SPEC,
        EXIT_INVALID,
        [
            f"{JSON}:8:3: error[FG173]: machine is not valid JSON: Expecting property name enclosed in double quotes",
            summary(1),
        ],
        machine=machine({7: '    "approved": { "type": "final" },'}),
    ),  # a trailing comma
    Case(
        "missing-machine-file",
        MACHINE_SPEC,
        EXIT_INVALID,
        [
            f'spec.toml:5:11: error[FG173]: cannot read machine "{JSON}": No such file or directory',
            summary(1),
        ],
        machine=NO_MACHINE,
    ),
]
BY_ID = {case.id: case for case in CASES}


def validate(directory: Path, case: Case) -> Run:
    directory.mkdir()
    (directory / "spec.toml").write_text(case.spec, encoding="utf-8")
    if case.machine is not None and case.machine != NO_MACHINE:
        (directory / "invoice.machine.json").write_text(case.machine, encoding="utf-8")
    return run_process("validate", "spec.toml", cwd=directory)


class Results:
    """Each case validated at most once per module, when a test first asks for it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, Run] = {}

    def __getitem__(self, case_id: str) -> Run:
        if case_id not in self.done:
            self.done[case_id] = validate(self.root / case_id, BY_ID[case_id])
        return self.done[case_id]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    return Results(tmp_path_factory.mktemp("workflow-diagnostics"))


def matches(expected: str, actual: str) -> bool:
    """Equal; or, for an expected line without a position (its position is a pinned bug), its end."""
    if expected.startswith(("spec.toml:", "invoice.machine.json:", "  hint:")) or expected == actual:
        return expected == actual
    return actual.endswith(f": {expected}")


def in_order(expected: list[str], actual: list[str]) -> bool:
    """Every expected line matches an actual line, in this order (other lines may come between)."""
    remaining = iter(actual)
    return all(any(matches(line, candidate) for candidate in remaining) for line in expected)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_diagnostics(results: Results, case: Case) -> None:
    if case.machine is None:
        assert "machine =" not in case.spec
    result = results[case.id]
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.stdout == ""
    assert result.returncode == case.exit, result.stderr
    if case.partial:
        assert in_order(case.stderr, lines), result.stderr
    else:
        assert lines == case.stderr
    if case.exit == EXIT_OK:
        assert not any(": error[" in line for line in lines)
        assert not any("nothing was written" in line for line in lines)


# --- regressions: things fusiongen once got wrong ------------------------------------------------------


@pytest.mark.parametrize(
    "case_id",
    [
        "unknown-transition-target",
        "toml-guard",
        "toml-guarded-transitions-array",
        "json-guard",
        "json-guarded-transitions-array",
    ],
)
def test_a_rejected_transition_does_not_cascade_into_fg171(results: Results, case_id: str) -> None:
    result = results[case_id]
    assert result.returncode == EXIT_INVALID
    assert "error[FG171]" not in result.stderr, result.stderr
    assert summary(1) in result.stderr.splitlines()


def test_nested_states_are_reported_once(results: Results) -> None:
    result = results["toml-nested-states-with-initial"]
    assert result.stderr.count("uses nested states") == 1, result.stderr


def test_json_position_of_a_feature_in_a_later_state(results: Results) -> None:
    result = results["json-entry-in-two-states"]
    [line, _] = state_feature(f"{JSON}:6:69", "review", '"entry"')
    assert line in result.stderr.splitlines(), result.stderr


def test_handle_named_input_points_at_the_input(results: Results) -> None:
    result = results["bound-tool-input-named-like-the-handle"]
    assert result.stderr.splitlines() == [
        'spec.toml:23:1: error[FG177]: tool "invoice.reject" has an input "workflow_id", the workflow handle argument',
        "  hint: rename the input or set [server] state_handle_key",
        summary(1),
    ]


def test_the_base_specs_are_what_the_cases_assume() -> None:
    base, imported = BASE.splitlines(), MACHINE_SPEC.splitlines()
    assert base[:4] == imported[:4] and base[9:] == imported[5:]
    assert base[12] == 'bind_state = { states = ["draft"], transition = "SUBMIT" }'
    assert base[22] == 'reason = "text"'
    assert MACHINE.splitlines()[4].startswith('    "draft"')
