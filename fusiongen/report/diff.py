"""`fusiongen diff`: how two versions of a spec differ for the clients and the model that use the server.

Built on the exposure report (`report.exposure`) of each side plus their IRs, so it classifies what the
server does, not how the TOML is written: moving a field's position, renaming a presenter that is not
visible, or spelling a redaction path with a wildcard instead of in full changes nothing here.

Each change has one impact:

* **breaking**: a client written against the old server may fail (a tool gone or renamed, a required
  argument added, an argument's type narrowed, an enum value refused, an output field gone);
* **exposure-widened**: the model can see more (a value newly in a result, a redaction removed, a hidden
  field shown, masked values now sent in user-audience blocks); CI can require a security review for these;
* **behaviour**: what the model is told or allowed changes (rules, suggestions, workflow states and
  transitions, a tool's kind, a value newly masked);
* **safe**: additions and wording (new tools, new optional arguments, descriptions, widened input types).

Every facet of `exposure.TOOL_FACETS` has a comparer in `FACET_DIFFS` (a test checks it), so a facet added
to the report (a tool's `requires`) cannot be forgotten here.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass

from fusiongen.ir import AuthIR, FieldIR, ServerIR, ToolIR, TypeIR
from fusiongen.report.exposure import AUDIENCE_SEES, RESOURCE_FACETS, Report, Row, exposure, input_fields, type_text


class Impact(enum.StrEnum):
    BREAKING = "breaking"
    WIDENED = "exposure-widened"
    BEHAVIOUR = "behaviour"
    SAFE = "safe"


IMPACT_ORDER = (Impact.BREAKING, Impact.WIDENED, Impact.BEHAVIOUR, Impact.SAFE)
EXIT_BREAKING, EXIT_WIDENED = 1, 4


@dataclass(frozen=True)
class Change:
    impact: Impact
    subject: str  # "tool invoice.get", "workflow invoice"
    kind: str  # a stable slug, e.g. "input-required-added": what tests and CI scripts match on
    message: str

    def as_json(self) -> dict[str, str]:
        return {"impact": self.impact.value, "subject": self.subject, "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class ToolSides:
    """One tool present on both sides: its IR and its exposure entry, old and new."""

    name: str
    old: ToolIR
    new: ToolIR
    old_entry: dict[str, object]
    new_entry: dict[str, object]
    old_server: ServerIR  # what the tools' types refer to (the models of inline objects)
    new_server: ServerIR
    what: str = "tool"  # or "resource": a resource's read is compared facet by facet as a tool's

    @property
    def subject(self) -> str:
        return f"{self.what} {self.name}"

    def rows(self, key: str) -> tuple[list[Row], list[Row]]:
        old, new = self.old_entry[key], self.new_entry[key]
        assert isinstance(old, list) and isinstance(new, list)
        return old, new


# --- types -----------------------------------------------------------------------------------------------
class Variance(enum.Enum):
    SAME = "same"
    WIDENED = "widened"  # accepts (or may hold) everything it did, and more
    NARROWED = "narrowed"  # accepts less than it did
    CHANGED = "changed"  # neither: a different type


def variance(old: TypeIR, new: TypeIR) -> Variance:
    """How type `new` relates to `old`, as sets of values."""
    if old == new:
        return Variance.SAME
    if old.kind == new.kind == "enum":
        removed, added = set(old.enum_values) - set(new.enum_values), set(new.enum_values) - set(old.enum_values)
        if removed and added:
            return Variance.CHANGED
        return Variance.NARROWED if removed else Variance.WIDENED if added else Variance.SAME  # SAME: reordered
    if old.kind == new.kind == "list" and old.items is not None and new.items is not None:
        return variance(old.items, new.items)
    pairs = {("integer", "number"): Variance.WIDENED, ("number", "integer"): Variance.NARROWED}
    pairs |= {("enum", "string"): Variance.WIDENED, ("string", "enum"): Variance.NARROWED}
    pairs |= {("enum", "text"): Variance.WIDENED, ("text", "enum"): Variance.NARROWED}
    return pairs.get((old.kind, new.kind), Variance.CHANGED)


def _enum_detail(old: TypeIR, new: TypeIR) -> str:
    removed = [v for v in old.enum_values if v not in new.enum_values]
    added = [v for v in new.enum_values if v not in old.enum_values]
    parts = ([f"values removed: {', '.join(removed)}"] if removed else []) + (
        [f"values added: {', '.join(added)}"] if added else []
    )
    return f" ({'; '.join(parts)})" if parts else ""


# --- inputs ----------------------------------------------------------------------------------------------
def diff_inputs(sides: ToolSides) -> list[Change]:
    """Arguments: what the model must and may send. The server refuses unknown arguments, so removing one is
    breaking too."""
    subject = sides.subject
    old = dict(input_fields(sides.old_server, sides.old))
    new = dict(input_fields(sides.new_server, sides.new))
    # Inside an inline object present on both sides only: the change of the object itself says the rest.
    kept = {p for p in old.keys() & new.keys() if old[p].type.element.inline and new[p].type.element.inline}
    old = {p: f for p, f in old.items() if _parent(p) in kept or _parent(p) is None}
    new = {p: f for p, f in new.items() if _parent(p) in kept or _parent(p) is None}
    changes: list[Change] = []
    for name in old:
        if name not in new:
            changes.append(
                Change(Impact.BREAKING, subject, "input-removed", f'input "{name}" removed: calls sending it fail')
            )
    for name, field in new.items():
        if name not in old:
            if field.required:
                changes.append(
                    Change(Impact.BREAKING, subject, "input-required-added", f'required input "{name}" added')
                )
            else:
                changes.append(Change(Impact.SAFE, subject, "input-optional-added", f'optional input "{name}" added'))
            continue
        changes += _input_field(subject, name, old[name], field)
    return changes


def _parent(path: str) -> str | None:
    """The input holding `path` (`address.city` → `address`, `lines[*].qty` → `lines`), None for an argument."""
    if "." not in path:
        return None
    return path.rsplit(".", 1)[0].removesuffix("[*]")


def _input_field(subject: str, name: str, old: FieldIR, new: FieldIR) -> list[Change]:
    changes: list[Change] = []
    if new.required and not old.required:
        changes.append(Change(Impact.BREAKING, subject, "input-now-required", f'input "{name}" is now required'))
    elif old.required and not new.required:
        changes.append(Change(Impact.SAFE, subject, "input-now-optional", f'input "{name}" is now optional'))
    if old.nullable and not new.nullable:
        changes.append(Change(Impact.BREAKING, subject, "input-null-refused", f'input "{name}" no longer accepts null'))
    elif new.nullable and not old.nullable:
        changes.append(Change(Impact.SAFE, subject, "input-null-accepted", f'input "{name}" now accepts null'))
    how = variance(old.type, new.type)
    shown = f"{type_text(old.type)} → {type_text(new.type)}"
    if how is Variance.NARROWED:
        kind = "input-enum-value-removed" if old.type.kind == new.type.kind == "enum" else "input-type-narrowed"
        detail = _enum_detail(old.type, new.type)
        changes.append(Change(Impact.BREAKING, subject, kind, f'input "{name}" narrowed: {shown}{detail}'))
    elif how is Variance.CHANGED:
        changes.append(Change(Impact.BREAKING, subject, "input-type-changed", f'input "{name}" type changed: {shown}'))
    elif how is Variance.WIDENED:
        changes.append(Change(Impact.SAFE, subject, "input-type-widened", f'input "{name}" widened: {shown}'))
    if old.description != new.description:
        changes.append(Change(Impact.SAFE, subject, "input-description", f'input "{name}" description changed'))
    return changes


# --- the result ------------------------------------------------------------------------------------------
def diff_model_sees(sides: ToolSides) -> list[Change]:
    """Values of the result: one gone is breaking; one newly there widens what the model sees, and the message
    says whether it was masked or left out before."""
    subject = sides.subject
    old_rows, new_rows = sides.rows("model_sees")
    old = {r["path"]: r["type"] for r in old_rows}
    new = {r["path"]: r["type"] for r in new_rows}
    old_redacted = {r["path"] for r in sides.rows("redacted")[0]}
    new_redacted = {r["path"] for r in sides.rows("redacted")[1]}
    old_hidden = {r["path"]: r["why"] for r in sides.rows("hidden")[0]}
    changes: list[Change] = []
    for path, type_ in old.items():
        if path in new:
            if new[path] != type_:
                impact, kind = _output_type_impact(sides, path)
                changes.append(Change(impact, subject, kind, f'output "{path}" type changed: {type_} → {new[path]}'))
        elif path in new_redacted:
            changes.append(Change(Impact.BEHAVIOUR, subject, "output-now-redacted", f'output "{path}" is now masked'))
        else:
            changes.append(Change(Impact.BREAKING, subject, "output-removed", f'output field "{path}" removed'))
    for path, type_ in new.items():
        if path in old:
            continue
        if path in old_redacted:
            kind, why = "redaction-removed", "was masked by redact_pii"
        elif path in old_hidden and old_hidden[path].startswith("hidden"):
            kind, why = "hidden-unhidden", f"was {old_hidden[path]}"
        elif path in old_hidden:
            kind, why = "field-newly-exposed", f"was {old_hidden[path]}"
        else:
            kind, why = "field-newly-exposed", "is new in the result"
        changes.append(Change(Impact.WIDENED, subject, kind, f'"{path}" ({type_}) now reaches the model: it {why}'))
    return changes


def _output_type_impact(sides: ToolSides, path: str) -> tuple[Impact, str]:
    """An output type that only narrowed (fewer enum values) still validates against clients' old schema."""
    old, new = _output_field(sides.old_entry, path), _output_field(sides.new_entry, path)
    enums = old is not None and new is not None and old.startswith("enum[") and new.startswith("enum[")
    if enums and old is not None and new is not None and set(new[5:-1].split("|")) <= set(old[5:-1].split("|")):
        return Impact.SAFE, "output-enum-narrowed"
    return Impact.BREAKING, "output-type-changed"


def _output_field(entry: dict[str, object], path: str) -> str | None:
    rows = entry["model_sees"]
    assert isinstance(rows, list)
    return next((r["type"] for r in rows if r["path"] == path), None)


def diff_redacted(sides: ToolSides) -> list[Change]:
    """A redaction dropped is reported by `diff_model_sees` (the value now reaches the model); here: its censor."""
    subject = sides.subject
    old_rows, new_rows = sides.rows("redacted")
    old = {r["path"]: r["censor"] for r in old_rows}
    return [
        Change(Impact.BEHAVIOUR, subject, "censor-changed", f'"{r["path"]}" censor: {old[r["path"]]} → {r["censor"]}')
        for r in new_rows
        if r["path"] in old and old[r["path"]] != r["censor"]
    ]


def diff_hidden(sides: ToolSides) -> list[Change]:
    """Fields newly left out: nothing a client relied on was sent, so it only matters for `model_sees`."""
    return []


def diff_user_only(sides: ToolSides) -> list[Change]:
    """Masked values a user-audience block shows: sent ("send") they reach any client that ignores audience."""
    subject = sides.subject
    old_rows, new_rows = sides.rows("user_only")
    old = {(r["path"], r["block"]): r["user_blocks"] for r in old_rows}
    changes = []
    for row in new_rows:
        before = old.get((row["path"], row["block"]))
        if row["user_blocks"] == "send" and before != "send":
            changes.append(
                Change(
                    Impact.WIDENED,
                    subject,
                    "user-block-sends-masked",
                    f'masked "{row["path"]}" is now sent in a user-audience block of {row["block"]}',
                )
            )
        elif before is None:
            changes.append(
                Change(
                    Impact.BEHAVIOUR,
                    subject,
                    "user-block-shows-masked",
                    f'a user-audience block of {row["block"]} shows masked "{row["path"]}" (user_blocks = omit)',
                )
            )
    return changes


def _row_set_diff(sides: ToolSides, key: str, what: str, label: Callable[[Row], str]) -> list[Change]:
    subject = sides.subject
    old_rows, new_rows = sides.rows(key)
    old = {json.dumps(r, sort_keys=True) for r in old_rows}
    new = {json.dumps(r, sort_keys=True) for r in new_rows}
    changes = [
        Change(Impact.BEHAVIOUR, subject, f"{what}-removed", f"{what} removed: {label(r)}")
        for r in old_rows
        if json.dumps(r, sort_keys=True) not in new
    ]
    changes += [
        Change(Impact.BEHAVIOUR, subject, f"{what}-added", f"{what} added: {label(r)}")
        for r in new_rows
        if json.dumps(r, sort_keys=True) not in old
    ]
    return changes


def _when(row: Row) -> str:
    return f" (when {row['when']})" if row.get("when") else ""


def diff_rules(sides: ToolSides) -> list[Change]:
    return _row_set_diff(sides, "rules", "rule", lambda r: f'"{r["rule"]}"{_when(r)}')


def diff_suggestions(sides: ToolSides) -> list[Change]:
    return _row_set_diff(sides, "suggestions", "suggestion", lambda r: f"{r['tool']}{_when(r)}")


def diff_states(sides: ToolSides) -> list[Change]:
    """Where the tool runs (bound workflow, states, event): the gate refuses calls elsewhere."""
    old_rows, new_rows = sides.rows("states")
    if old_rows == new_rows:
        return []

    def shown(rows: list[Row]) -> str:
        return "; ".join(
            f"{r['workflow']} {r['states']}".strip() + (f" fires {r['fires']}" if r["fires"] else "") for r in rows
        )

    message = f"runs in: {shown(old_rows)} → {shown(new_rows)}"
    changes = [Change(Impact.BEHAVIOUR, sides.subject, "tool-states-changed", message)]
    if sides.new.kind == "mutation":  # destructive (§6.1): callable where it was not is exposure, for a review
        before = set(sides.old.binding.states) if sides.old.binding else None  # None: every state
        after = set(sides.new.binding.states) if sides.new.binding else None
        widened = after is None if before is not None else False
        widened = widened or (before is not None and after is not None and bool(after - before))
        if widened:
            more = "every state" if after is None else ", ".join(sorted(after - (before or set())))
            message = f"destructive tool now callable in {more} (was {', '.join(sorted(before or ()))})"
            changes.append(Change(Impact.WIDENED, sides.subject, "destructive-tool-more-states", message))
    return changes


def diff_requires(sides: ToolSides) -> list[Change]:
    """Who may call the tool (with --auth): every listed scope is needed, one of the listed roles (none: any). Fewer
    scopes or more roles let more callers in (exposure widened, for a security review); more scopes or fewer roles
    refuse callers that could call it (breaking)."""
    return requires_changes(sides.subject, *sides.rows("requires"))


def requires_changes(subject: str, old_rows: list[Row], new_rows: list[Row]) -> list[Change]:
    """`diff_requires` of any requirement rows: a tool's, a resource's or a prompt's."""

    def names(rows: list[Row], needs: str) -> list[str]:
        return [r["name"] for r in rows if r["needs"].startswith(needs)]

    old_scopes, new_scopes = names(old_rows, "scope"), names(new_rows, "scope")
    old_roles, new_roles = names(old_rows, "role"), names(new_rows, "role")
    loosened = [f'scope "{s}" no longer needed' for s in old_scopes if s not in new_scopes]
    tightened = [f'scope "{s}" now needed' for s in new_scopes if s not in old_scopes]
    if old_roles and not new_roles:
        loosened.append("any role may call it (was " + ", ".join(old_roles) + ")")
    elif new_roles and not old_roles:
        tightened.append("only " + ", ".join(new_roles) + " may call it (was any role)")
    else:
        loosened += [f'role "{r}" may now call it' for r in new_roles if r not in old_roles]
        tightened += [f'role "{r}" may no longer call it' for r in old_roles if r not in new_roles]
    changes = [Change(Impact.WIDENED, subject, "requires-loosened", m) for m in loosened]
    return changes + [Change(Impact.BREAKING, subject, "requires-tightened", m) for m in tightened]


View = dict[str, tuple[str, str]]  # path → (type, exposure) of one audience's result


def _default_view(entry: dict[str, object]) -> tuple[str, View]:
    """What a caller with none of the roles gets: `returns`, as the other facets describe it."""
    view: View = {}
    for key, exposure_of in (
        ("model_sees", lambda r: AUDIENCE_SEES),
        ("redacted", lambda r: f"redacted by {r['by']} ({r['censor']})"),
        ("hidden", lambda r: r["why"]),
    ):
        rows = entry[key]
        assert isinstance(rows, list)
        view |= {r["path"]: (r.get("type", ""), exposure_of(r)) for r in rows}
    returns = entry["returns"]
    assert isinstance(returns, str)
    return returns.split("[", 1)[0], view


def _audience_views(entry: dict[str, object]) -> dict[str, tuple[str, View]]:
    rows = entry["audiences"]
    assert isinstance(rows, list)
    views: dict[str, tuple[str, View]] = {}
    for r in rows:
        views.setdefault(r["role"], (r["presenter"], {}))[1][r["path"]] = (r["type"], r["exposure"])
    return views


def diff_audiences(sides: ToolSides) -> list[Change]:
    """Each role's result (returns_for_role), compared with what that role got before: its own presenter then, or
    `returns` when the role was not listed. A value newly reaching a role widens exposure; one gone is breaking for
    that role's clients, one newly masked is behaviour; a role added or dropped is behaviour besides."""
    old_views, new_views = _audience_views(sides.old_entry), _audience_views(sides.new_entry)
    old_default, new_default = _default_view(sides.old_entry), _default_view(sides.new_entry)
    changes: list[Change] = []
    kept_old = [role for role in old_views if role in new_views]
    kept_new = [role for role in new_views if role in old_views]
    if kept_old != kept_new:  # the first role a caller has wins: a caller with several now gets another presenter
        message = (
            f"returns_for_role order changed: {', '.join(kept_new)} (was {', '.join(kept_old)}); a caller "
            f"with several of these roles now gets the presenter of the first of them in the new order"
        )
        changes.append(Change(Impact.WIDENED, sides.subject, "audience-order-changed", message))
    for role in [*old_views, *(r for r in new_views if r not in old_views)]:
        before, after = old_views.get(role, old_default), new_views.get(role, new_default)
        if role not in old_views:
            message = f'callers with role "{role}" now get presenter {after[0]} (was {before[0]}, as everyone)'
            changes.append(Change(Impact.BEHAVIOUR, sides.subject, "audience-added", message))
        elif role not in new_views:
            message = f'callers with role "{role}" now get {after[0]}, as everyone (was presenter {before[0]})'
            changes.append(Change(Impact.BEHAVIOUR, sides.subject, "audience-removed", message))
        changes += _view_changes(sides.subject, role, before[1], after[1])
    return changes


def _view_changes(subject: str, role: str, old: View, new: View) -> list[Change]:
    changes: list[Change] = []
    for path, (type_, exposure_) in new.items():
        was = old.get(path, ("", "not in the result"))[1]
        if exposure_ == AUDIENCE_SEES and was != AUDIENCE_SEES:
            message = f'"{path}" ({type_}) now reaches the model for role "{role}": it was {was}'
            changes.append(Change(Impact.WIDENED, subject, "audience-field-newly-exposed", message))
    for path, (_, exposure_) in old.items():
        now = new.get(path, ("", ""))[1]
        if exposure_ != AUDIENCE_SEES or now == AUDIENCE_SEES:
            continue
        if now.startswith("redacted"):
            message = f'"{path}" is now masked for role "{role}" ({now})'
            changes.append(Change(Impact.BEHAVIOUR, subject, "audience-output-now-redacted", message))
        else:
            message = f'output "{path}" no longer reaches role "{role}"' + (f": {now}" if now else "")
            changes.append(Change(Impact.BREAKING, subject, "audience-output-removed", message))
    return changes


def _effect_kinds(entry: dict[str, object]) -> dict[tuple[str, str], str]:
    rows = entry["effects"]
    assert isinstance(rows, list)
    kinds: dict[tuple[str, str], str] = {}
    for r in rows:
        kinds.setdefault((r["effect"], r["access"]), r["call"])
    return kinds


def diff_effects(sides: ToolSides) -> list[Change]:
    """What its handler can do, by kind of effect (files read, network write, ...): a kind gained widens what a
    client lets it do (a host that auto-approves it now approves that too); a kind lost is safe. A different call
    of a kind it already had (a refactor) is no change."""
    old, new = _effect_kinds(sides.old_entry), _effect_kinds(sides.new_entry)
    changes = [
        Change(Impact.WIDENED, sides.subject, "effect-gained", f"its handler can now {access} {effect}: {call}")
        for (effect, access), call in new.items()
        if (effect, access) not in old
    ]
    changes += [
        Change(Impact.SAFE, sides.subject, "effect-removed", f"its handler no longer {access}s {effect}")
        for (effect, access) in old
        if (effect, access) not in new
    ]
    return changes


def diff_freshness(sides: ToolSides) -> list[Change]:
    """What goes stale, and when: a change to what the model is told to re-read, so behaviour."""
    old, new = sides.old_entry["freshness"], sides.new_entry["freshness"]
    if old == new:
        return []
    assert isinstance(old, list) and isinstance(new, list)
    shown = "; ".join(f"{r['freshness']} {r['tool']}".strip() for r in new) or "none"
    return [Change(Impact.BEHAVIOUR, sides.subject, "freshness-changed", f"freshness is now: {shown}")]


FACET_DIFFS: dict[str, Callable[[ToolSides], list[Change]]] = {
    "inputs": diff_inputs,
    "model_sees": diff_model_sees,
    "redacted": diff_redacted,
    "hidden": diff_hidden,
    "user_only": diff_user_only,
    "rules": diff_rules,
    "suggestions": diff_suggestions,
    "states": diff_states,
    "requires": diff_requires,
    "audiences": diff_audiences,
    "freshness": diff_freshness,
    "effects": diff_effects,
}


def diff_tool(sides: ToolSides) -> list[Change]:
    subject = sides.subject
    old, new = sides.old, sides.new
    changes: list[Change] = []
    if (old.returns is None) != (new.returns is None):
        if new.returns is None:
            changes.append(Change(Impact.BREAKING, subject, "output-removed", "no longer returns a result"))
        else:
            changes.append(
                Change(Impact.BEHAVIOUR, subject, "output-added", f"now returns {sides.new_entry['returns']}")
            )
    elif old.returns is not None and new.returns is not None and old.returns.collection != new.returns.collection:
        what = f"{sides.old_entry['returns']} → {sides.new_entry['returns']}"
        changes.append(Change(Impact.BREAKING, subject, "output-shape-changed", f"returns {what}"))
    elif sides.old_entry["returns"] != sides.new_entry["returns"]:
        what = f"{sides.old_entry['returns']} → {sides.new_entry['returns']}"
        changes.append(Change(Impact.BEHAVIOUR, subject, "output-presenter-changed", f"returns {what}"))
    if old.kind != new.kind:
        changes.append(Change(Impact.BEHAVIOUR, subject, "kind-changed", f"kind {old.kind} → {new.kind}"))
    if old.description != new.description or old.compact_description != new.compact_description:
        changes.append(Change(Impact.SAFE, subject, "description-changed", "description changed"))
    for compare in FACET_DIFFS.values():
        changes += compare(sides)
    return changes


# --- tools and workflows as a whole ----------------------------------------------------------------------
def _seen(ir: ServerIR, report: Report) -> set[tuple[str, str]]:
    """(presenter, path) of every value some tool or resource shows the model."""
    reads = [*zip(ir.tools, report["tools"], strict=True)]
    reads += [(r.tool, entry) for r, entry in zip(ir.resources, report["resources"], strict=True)]
    return {
        (tool.returns.presenter, row["path"])
        for tool, entry in reads
        if tool.returns is not None
        for row in entry["model_sees"]
    }


def _newly_shown(
    subject: str, tool: ToolIR, entry: dict[str, object], seen_before: set[tuple[str, str]]
) -> list[Change]:
    """A new tool or resource widens exposure by every value no tool or resource showed before (from the same
    presenter: one item or a collection, a tool or a resource, the model sees the same values)."""
    if tool.returns is None:
        return []
    rows = entry["model_sees"]
    assert isinstance(rows, list)
    return [
        Change(
            Impact.WIDENED,
            subject,
            "field-newly-exposed",
            f'"{r["path"]}" ({r["type"]}) reaches the model: nothing showed it before',
        )
        for r in rows
        if (tool.returns.presenter, r["path"]) not in seen_before
    ]


def _tool_names(ir: ServerIR, report: Report) -> dict[str, str]:
    """Every tool the model can call, by wire name → what it is (a spec tool's handler, or a generated one)."""
    names = {t.wire: f"handler {t.handler}" for t in ir.tools}
    for workflow in report["workflows"]:
        names |= {name: f"workflow {workflow['name']}" for name in workflow["generated_tools"]}
    return names


def diff_tool_sets(old_ir: ServerIR, old: Report, new_ir: ServerIR, new: Report) -> list[Change]:
    old_names, new_names = _tool_names(old_ir, old), _tool_names(new_ir, new)
    added = [n for n in new_names if n not in old_names]
    changes: list[Change] = []
    for name, what in old_names.items():
        if name in new_names:
            continue
        renamed = next((n for n in added if new_names[n] == what and what.startswith("handler ")), None)
        if renamed is not None:
            changes.append(Change(Impact.BREAKING, f"tool {name}", "tool-renamed", f"renamed to {renamed}"))
        else:
            changes.append(Change(Impact.BREAKING, f"tool {name}", "tool-removed", "tool removed"))
    # What the model saw before, by the presenter shaping it: a new tool returning the same presenter (one item or
    # a collection) shows nothing new.
    seen_before = _seen(old_ir, old)
    new_tools = {t.wire: (t, entry) for t, entry in zip(new_ir.tools, new["tools"], strict=True)}
    for name in added:
        changes.append(Change(Impact.SAFE, f"tool {name}", "tool-added", "new tool"))
        tool, entry = new_tools.get(name, (None, None))
        if tool is not None and entry is not None:
            changes += _newly_shown(f"tool {name}", tool, entry, seen_before)
    return changes


def diff_resources(old_ir: ServerIR, old: Report, new_ir: ServerIR, new: Report) -> list[Change]:
    """Resources by name: one gone (or moved to another URI) breaks clients that read it; a new one is safe, but
    widens exposure by what nothing showed before; one on both sides is compared facet by facet, as a tool."""
    old_by = {r.name: (r, e) for r, e in zip(old_ir.resources, old["resources"], strict=True)}
    new_by = {r.name: (r, e) for r, e in zip(new_ir.resources, new["resources"], strict=True)}
    seen_before = _seen(old_ir, old)
    changes: list[Change] = []
    for name in old_by:
        if name not in new_by:
            changes.append(Change(Impact.BREAKING, f"resource {name}", "resource-removed", "resource removed"))
    for name, (resource, entry) in new_by.items():
        subject = f"resource {name}"
        if name not in old_by:
            changes.append(Change(Impact.SAFE, subject, "resource-added", f"new resource {resource.uri}"))
            changes += _newly_shown(subject, resource.tool, entry, seen_before)
            continue
        old_resource, old_entry = old_by[name]
        if old_resource.uri != resource.uri:
            message = f"URI {old_resource.uri} → {resource.uri}: reads of the old URI fail"
            changes.append(Change(Impact.BREAKING, subject, "resource-uri-changed", message))
        if old_resource.description != resource.description:
            changes.append(Change(Impact.SAFE, subject, "description-changed", "description changed"))
        if old_entry["returns"] != entry["returns"]:
            what = f"{old_entry['returns']} → {entry['returns']}"
            changes.append(Change(Impact.BEHAVIOUR, subject, "output-presenter-changed", f"returns {what}"))
        sides = ToolSides(name, old_resource.tool, resource.tool, old_entry, entry, old_ir, new_ir, what="resource")
        for facet in RESOURCE_FACETS:
            changes += FACET_DIFFS[facet.key](sides)
    return changes


def diff_prompts(old: Report, new: Report) -> list[Change]:
    """Prompts by name: what a user picks and what it tells the model. Clients that get a prompt by name, or send an
    argument it no longer takes (or lack one it now needs), fail: breaking. A changed template is behaviour."""
    old_by, new_by = {p["name"]: p for p in old["prompts"]}, {p["name"]: p for p in new["prompts"]}
    changes: list[Change] = []
    for name in old_by:
        if name not in new_by:
            changes.append(Change(Impact.BREAKING, f"prompt {name}", "prompt-removed", "prompt removed"))
    for name, prompt in new_by.items():
        subject = f"prompt {name}"
        if name not in old_by:
            changes.append(Change(Impact.SAFE, subject, "prompt-added", "new prompt"))
            continue
        before = old_by[name]
        if before["template"] != prompt["template"]:
            message = f"template: {before['template']!r} → {prompt['template']!r}"
            changes.append(Change(Impact.BEHAVIOUR, subject, "prompt-template-changed", message))
        if before["description"] != prompt["description"]:
            changes.append(Change(Impact.SAFE, subject, "description-changed", "description changed"))
        changes += _prompt_arguments(subject, before["arguments"], prompt["arguments"])
        changes += requires_changes(subject, before["requires"], prompt["requires"])
    return changes


def _prompt_arguments(subject: str, old_rows: list[Row], new_rows: list[Row]) -> list[Change]:
    old, new = {a["name"]: a for a in old_rows}, {a["name"]: a for a in new_rows}
    changes: list[Change] = []
    for name in old:
        if name not in new:
            message = f'argument "{name}" removed: prompts/get sending it fails'
            changes.append(Change(Impact.BREAKING, subject, "prompt-argument-removed", message))
    for name, argument in new.items():
        required = argument["required"] == "yes"
        if name not in old:
            kind = "prompt-argument-required-added" if required else "prompt-argument-optional-added"
            impact = Impact.BREAKING if required else Impact.SAFE
            what = "required" if required else "optional"
            changes.append(Change(impact, subject, kind, f'{what} argument "{name}" added'))
            continue
        was = old[name]
        if required and was["required"] != "yes":
            message = f'argument "{name}" is now required'
            changes.append(Change(Impact.BREAKING, subject, "prompt-argument-now-required", message))
        elif not required and was["required"] == "yes":
            changes.append(
                Change(Impact.SAFE, subject, "prompt-argument-now-optional", f'argument "{name}" is now optional')
            )
        old_values = [v for v in was["values"].split("|") if v]
        new_values = [v for v in argument["values"].split("|") if v]
        removed = [v for v in old_values if v not in new_values]
        if removed or (new_values and not old_values):
            detail = ", ".join(removed) if removed else "now one of " + ", ".join(new_values)
            message = f'argument "{name}" refuses values it took: {detail}'
            changes.append(Change(Impact.BREAKING, subject, "prompt-argument-narrowed", message))
        elif old_values and (not new_values or set(new_values) > set(old_values)):
            changes.append(
                Change(Impact.SAFE, subject, "prompt-argument-widened", f'argument "{name}" takes more values')
            )
    return changes


def diff_workflows(old: Report, new: Report) -> list[Change]:
    old_by, new_by = {w["name"]: w for w in old["workflows"]}, {w["name"]: w for w in new["workflows"]}
    changes: list[Change] = []
    for name in old_by.keys() - new_by.keys():
        changes.append(Change(Impact.BEHAVIOUR, f"workflow {name}", "workflow-removed", "workflow removed"))
    for name in new_by.keys() - old_by.keys():
        changes.append(Change(Impact.BEHAVIOUR, f"workflow {name}", "workflow-added", "new workflow"))
    for name in sorted(old_by.keys() & new_by.keys()):
        changes += _diff_workflow(name, old_by[name], new_by[name])
    return changes


def _diff_workflow(name: str, old: dict[str, object], new: dict[str, object]) -> list[Change]:
    subject = f"workflow {name}"
    changes: list[Change] = []
    if old["initial"] != new["initial"]:
        changes.append(
            Change(Impact.BEHAVIOUR, subject, "initial-changed", f"initial state {old['initial']} → {new['initial']}")
        )

    def transitions(side: dict[str, object]) -> list[str]:
        rows = side["transitions"]
        assert isinstance(rows, list)
        return [f"{t['from']} --{t['event']}--> {t['to']}" for t in rows]

    def allowed(side: dict[str, object]) -> dict[str, str]:
        rows = side["states"]
        assert isinstance(rows, list)
        return {s["state"]: s["bound_tools"] for s in rows}

    old_t, new_t = transitions(old), transitions(new)
    changes += [
        Change(Impact.BEHAVIOUR, subject, "transition-removed", f"transition {t} removed")
        for t in old_t
        if t not in new_t
    ]
    changes += [
        Change(Impact.BEHAVIOUR, subject, "transition-added", f"transition {t} added") for t in new_t if t not in old_t
    ]
    old_s, new_s = allowed(old), allowed(new)
    changes += [
        Change(Impact.BEHAVIOUR, subject, "state-removed", f'state "{s}" removed') for s in old_s if s not in new_s
    ]
    changes += [Change(Impact.BEHAVIOUR, subject, "state-added", f'state "{s}" added') for s in new_s if s not in old_s]
    for state, tools in new_s.items():
        if state in old_s and old_s[state] != tools:
            before, after = old_s[state] or "none", tools or "none"
            message = f'state "{state}" allows {after} (was {before})'
            changes.append(Change(Impact.BEHAVIOUR, subject, "state-tools-changed", message))
    return changes


def diff_auth(old_ir: ServerIR, new_ir: ServerIR) -> list[Change]:
    """[auth]'s claims: where roles and the tenant come from decides who holds a role and whose data a caller sees.
    A tenant claim removed lets tokens without a tenant in and keeps workflow state for all tenants together; a
    roles claim changed gives roles from another claim (which the issuer may let users set): both widen exposure.
    A tenant claim added or changed refuses tokens that worked (breaking)."""
    old_auth, new_auth = old_ir.auth or AuthIR(), new_ir.auth or AuthIR()
    changes: list[Change] = []
    if old_auth.tenant_claim != new_auth.tenant_claim:
        if new_auth.tenant_claim is None:
            message = (
                f'tenant_claim "{old_auth.tenant_claim}" removed: tokens without a tenant are accepted, and workflow '
                "handles and session state are no longer kept per tenant"
            )
            changes.append(Change(Impact.WIDENED, "auth", "tenant-claim-removed", message))
        else:
            was = f'"{old_auth.tenant_claim}"' if old_auth.tenant_claim else "none"
            message = f'tenant_claim "{new_auth.tenant_claim}" (was {was}): tokens without it are refused'
            changes.append(Change(Impact.BREAKING, "auth", "tenant-claim-changed", message))
    if old_auth.roles_claim != new_auth.roles_claim:
        message = (
            f'roles_claim "{new_auth.roles_claim}" (was "{old_auth.roles_claim}"): roles, and so requires and '
            "returns_for_role, now come from another claim of the token"
        )
        changes.append(Change(Impact.WIDENED, "auth", "roles-claim-changed", message))
    return changes


def diff_transports(old_ir: ServerIR, new_ir: ServerIR) -> list[Change]:
    """`[server] transports`: HTTP left out leaves every streamable HTTP client without a server (breaking);
    HTTP added changes nothing a client or the model sees of the tools (who may connect is the deployment's
    `--auth` and `--host`)."""
    if old_ir.http and not new_ir.http:
        message = 'transport "http" removed: the server has no --http, so streamable HTTP clients cannot connect'
        return [Change(Impact.BREAKING, "server", "transport-removed", message)]
    if new_ir.http and not old_ir.http:
        message = 'transport "http" added: the server can be served over streamable HTTP (--http)'
        return [Change(Impact.SAFE, "server", "transport-added", message)]
    return []


def diff_output_descriptions(sides: ToolSides) -> list[Change]:
    """The descriptions of the models a result shows, which its outputSchema carries (on each model's object
    schema, or an embedded object's) and a client may show the model: a change is behaviour, never silent."""

    def descriptions(ir: ServerIR, tool: ToolIR) -> dict[str, str | None]:
        models = {m.name: m for m in ir.models}
        found: dict[str, str | None] = {}
        pending = [ir.presenter(p).model for p in tool.presenters]
        while pending:
            name = pending.pop()
            if name is None or name in found or name not in models:
                continue
            found[name] = models[name].description
            pending += [m for f in models[name].fields if not f.hidden for m in f.type.models]
        return found

    old, new = descriptions(sides.old_server, sides.old), descriptions(sides.new_server, sides.new)
    return [
        Change(
            Impact.BEHAVIOUR,
            sides.subject,
            "output-description-changed",
            f"the description of model {name} in its outputSchema: {old[name]!r} → {new[name]!r}",
        )
        for name in sorted(old.keys() & new.keys())
        if old[name] != new[name]
    ]


# --- the whole diff --------------------------------------------------------------------------------------
def diff(old_ir: ServerIR, new_ir: ServerIR) -> list[Change]:
    """Every change from `old_ir` to `new_ir` that a client or the model can notice, most severe first."""
    old, new = exposure(old_ir), exposure(new_ir)
    changes = diff_tool_sets(old_ir, old, new_ir, new)
    old_tools = {t.wire: t for t in old_ir.tools}
    old_entries = {t["name"]: t for t in old["tools"]}
    for tool, entry in zip(new_ir.tools, new["tools"], strict=True):
        if tool.wire in old_tools:
            sides = ToolSides(tool.wire, old_tools[tool.wire], tool, old_entries[tool.wire], entry, old_ir, new_ir)
            changes += diff_tool(sides)
            changes += diff_output_descriptions(sides)
    changes += diff_resources(old_ir, old, new_ir, new)
    changes += diff_prompts(old, new)
    changes += diff_auth(old_ir, new_ir)
    changes += diff_transports(old_ir, new_ir)
    changes += diff_workflows(old, new)
    rank = {impact: index for index, impact in enumerate(IMPACT_ORDER)}
    return sorted(changes, key=lambda c: (rank[c.impact], c.subject, c.kind, c.message))


def exit_code(changes: list[Change]) -> int:
    """1 if anything is breaking (it fails CI first), else 4 if exposure widened, else 0."""
    impacts = {c.impact for c in changes}
    if Impact.BREAKING in impacts:
        return EXIT_BREAKING
    return EXIT_WIDENED if Impact.WIDENED in impacts else 0


def as_text(changes: list[Change]) -> str:
    if not changes:
        return "no changes a client or the model can see\n"
    lines: list[str] = []
    for impact in IMPACT_ORDER:
        found = [c for c in changes if c.impact is impact]
        if found:
            lines.append(f"{impact.value} ({len(found)}):")
            lines += [f"  {c.subject}: {c.message} [{c.kind}]" for c in found]
    return "\n".join(lines) + "\n"


def as_json(changes: list[Change]) -> str:
    summary = {impact.value: sum(c.impact is impact for c in changes) for impact in IMPACT_ORDER}
    document = {"changes": [c.as_json() for c in changes], "summary": summary, "exit_code": exit_code(changes)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
