"""The exposure report: what each tool lets the model see, computed from the validated IR alone.

A runtime framework learns what a server exposes by running it; here every field that can reach the model,
every redaction and every workflow state is already decided in the IR. This module turns that into one
plain, JSON-ready value (`exposure`) and prints it three ways (`as_text`, `as_markdown`, `as_json`). It is a
pure function of the IR: no clock, no paths, no ordering from dict or set iteration, so `build` can write it
as `EXPOSURE.md` and `check` can compare it byte for byte.

A tool's entry is a list of **facets**, each a titled table (`Facet`): `TOOL_FACETS` is the whole list, and
the renderers and `fusiongen diff` only iterate it. A resource's entry is the facets of its read
(`RESOURCE_FACETS`: it is a query rendered by its presenter), a prompt's its arguments and template, each a
top-level list beside `tools`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fusiongen.ir import (
    FieldIR,
    PresenterIR,
    PromptIR,
    RequiresIR,
    ResourceIR,
    ServerIR,
    ToolIR,
    TypeIR,
    WorkflowIR,
)
from fusiongen.pyliteral import comment_text

Row = dict[str, str]  # column → cell; every cell is text, so all three renderings agree
Report = dict[str, Any]


@dataclass(frozen=True)
class Facet:
    """One section of a tool's entry: a table with fixed columns; `key` is its name in the JSON."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: Callable[[ServerIR, ToolIR], list[Row]]


# --- types and paths -------------------------------------------------------------------------------------
def type_text(type_: TypeIR) -> str:
    """A field's type as the report prints it: `string`, `enum[a|b]`, `list[LineItem]`, `Customer`."""
    if type_.kind == "enum":
        return "enum[" + "|".join(type_.enum_values) + "]"
    if type_.kind == "list":
        return f"list[{type_text(type_.items)}]" if type_.items else "list"
    if type_.kind == "model" and type_.inline:  # its fields are the rows below it
        return "object"
    if type_.kind == "model":
        return type_.model or "model"
    if type_.kind == "recursive":  # a model inside itself: its fields as listed above, at every depth
        return f"{type_.model}, recursively (fields as above; redact_pii paths mask only the depths they name)"
    return type_.kind


def path_text(path: tuple[str, ...]) -> str:
    """`("lines", "[*]", "card_number")` → `lines[*].card_number`."""
    text = ""
    for segment in path:
        text += segment if segment == "[*]" or not text else "." + segment
    return text


def _covers(redaction: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether masking `redaction` masks `path`: the same path or an ancestor of it."""
    return path[: len(redaction)] == redaction


@dataclass(frozen=True)
class _Redaction:
    path: tuple[str, ...]  # absolute, from the result's item
    presenter: str
    censor: str


@dataclass(frozen=True)
class _Seen:
    """One field of a tool's result, as the presenter tree decides it."""

    path: tuple[str, ...]
    field: FieldIR
    redaction: _Redaction | None


# --- walking a presenter tree ----------------------------------------------------------------------------
class _ResultWalk:
    """Every field a tool's result holds, what is masked there and what is left out, from the presenter tree.

    A parent's redaction wins over an embedded presenter's (its censor is the one shown, §7.3), so the
    redactions in force are collected from the root down and the first that covers a path decides."""

    def __init__(self, ir: ServerIR, root: PresenterIR) -> None:
        self.ir = ir
        self.seen: list[_Seen] = []
        self.hidden: list[Row] = []
        self.presenters: list[tuple[tuple[str, ...], PresenterIR]] = []  # (where it is embedded, presenter)
        self.expanding: list[str] = []  # the models being walked on the way down: a model holding itself stops
        self._presenter(root, (), ())

    def _presenter(self, presenter: PresenterIR, at: tuple[str, ...], active: tuple[_Redaction, ...]) -> None:
        self.presenters.append((at, presenter))
        own = tuple(_Redaction((*at, *p), presenter.name, presenter.censor) for p in presenter.redactions)
        active = (*active, *own)  # parents' first: they win
        if presenter.model is not None:
            model = self.ir.model(presenter.model)
            shown = {f.name for f in presenter.fields}
            for candidate in model.fields:
                if candidate.hidden:
                    self._hide((*at, candidate.name), f"hidden in {model.label}")
                elif candidate.name not in shown:
                    self._hide((*at, candidate.name), f"not in presenter {presenter.name}'s fields")
        self.expanding.append(presenter.model or "")
        for item in presenter.fields:
            self._field(item, (*at, item.name), active, presenter.embed(item.name))
        self.expanding.pop()

    def _field(self, item: FieldIR, path: tuple[str, ...], active: tuple[_Redaction, ...], embed: str | None) -> None:
        redaction = next((r for r in active if _covers(r.path, path)), None)
        self.seen.append(_Seen(path, item, redaction))
        if redaction is not None and redaction.path == path:
            return  # the whole value becomes the censor string: nothing inside it is sent
        inner = (*path, "[*]") if item.type.kind == "list" else path
        target = item.type.items if item.type.kind == "list" else item.type
        if inner != path and any(r.path == inner for r in active):  # `tags[*]`: every item masked whole
            self.seen.append(_Seen(inner, FieldIR("[*]", target or item.type), _first(active, inner)))
            return
        if target is None or target.kind != "model":
            return
        if embed is not None:
            self._presenter(self.ir.presenter(embed), inner, active)
            return
        model = self.ir.model(target.model or "")
        if model.name in self.expanding:  # recursive: deeper levels repeat the fields above
            recursive = FieldIR("*", TypeIR("recursive", model=model.name))
            self.seen.append(_Seen((*inner, "*"), recursive, _first(active, (*inner, "*"))))
            return
        self.expanding.append(model.name)
        for nested in model.fields:
            if nested.hidden:
                self._hide((*inner, nested.name), f"hidden in {model.label}")
            else:
                self._field(nested, (*inner, nested.name), active, None)
        self.expanding.pop()

    def _hide(self, path: tuple[str, ...], why: str) -> None:
        self.hidden.append({"path": path_text(path), "why": why})


def _first(active: tuple[_Redaction, ...], path: tuple[str, ...]) -> _Redaction | None:
    return next((r for r in active if _covers(r.path, path)), None)


def _walk(ir: ServerIR, tool: ToolIR) -> _ResultWalk | None:
    if tool.returns is None:
        return None
    return _ResultWalk(ir, ir.presenter(tool.returns.presenter))


# --- the facets ------------------------------------------------------------------------------------------
def input_fields(ir: ServerIR, tool: ToolIR) -> list[tuple[str, FieldIR]]:
    """Every value the model may send, by path: the arguments, and inside an inline object its writable fields
    (`address.city`, `lines[*].qty`), each after the field holding it. A declared model's fields are its own
    table's business; an inline object's are only ever written here, so they are listed where they are."""
    found: list[tuple[str, FieldIR]] = []
    pending = [(f.name, f) for f in reversed(tool.inputs)]
    while pending:
        path, field = pending.pop()
        found.append((path, field))
        element = field.type.element
        if element.kind == "model" and element.inline and element.model is not None:
            inner = path + ("[*]" if field.type.kind == "list" else "")  # never a map's values (FG196)
            writable = ir.model(element.model).writable_fields
            pending += [(f"{inner}.{f.name}", f) for f in reversed(writable)]
    return found


def input_guarded(ir: ServerIR, tool: ToolIR) -> list[str]:
    """What the server refuses with a "guarded" message: input_from's guarded fields, and the guarded fields of
    the inline objects the model sends."""
    inner = [
        f"{path}{'[*]' if field.type.kind == 'list' else ''}.{guarded.name}"
        for path, field in input_fields(ir, tool)
        if field.type.element.inline and field.type.element.model is not None
        for guarded in ir.model(field.type.element.model).fields
        if guarded.guarded
    ]
    return [*tool.guarded, *inner]


def input_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """What the model sends: every argument (and every field of an inline object), with its type and whether it
    must be given."""
    rows = [
        {
            "path": path,
            "type": type_text(f.type),
            "required": "yes" if f.required else "no",
            "nullable": "yes" if f.nullable else "no",
        }
        for path, f in input_fields(ir, tool)
    ]
    rows += [
        {"path": path, "type": "refused (guarded)", "required": "no", "nullable": "no"}
        for path in input_guarded(ir, tool)
    ]
    return rows


def model_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Every value of the result the model is sent as it is (paths of one item for a collection)."""
    walk = _walk(ir, tool)
    if walk is None:
        return []
    return [{"path": path_text(s.path), "type": type_text(s.field.type)} for s in walk.seen if s.redaction is None]


def redacted_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Every value replaced by a censor string before it is sent, and which presenter's redact_pii does it."""
    walk = _walk(ir, tool)
    if walk is None:
        return []
    return [
        {"path": path_text(s.path), "by": f"{s.redaction.presenter}.redact_pii", "censor": s.redaction.censor}
        for s in walk.seen
        if s.redaction is not None and s.redaction.path == s.path
    ]


def hidden_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Fields of the models involved that are never put into the result at all."""
    walk = _walk(ir, tool)
    return walk.hidden if walk is not None else []


def user_only_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Masked values that an `audience = "user"` block shows: they reach the human only, and only when that
    presenter sends its user blocks (a client that ignores audience would hand them to the model)."""
    if tool.returns is None:
        return []
    rows: dict[tuple[str, str], Row] = {}
    for name in tool.presenters:  # `returns` and every role's presenter (returns_for_role): each sends its own
        walk = _ResultWalk(ir, ir.presenter(name))
        masked = [s for s in walk.seen if s.redaction is not None and s.redaction.path == s.path]
        embedded = walk.presenters if not tool.returns.collection else walk.presenters[:1]
        for at, presenter in embedded:
            blocks = presenter.collection_ui if tool.returns.collection and not at else presenter.ui
            if not any(b.for_user for b in blocks):
                continue
            for read in [(*at, *r) for r in presenter.user_reads]:  # () among them: the whole value (a json block)
                for s in masked:
                    if _covers(s.path, read) or _covers(read, s.path):
                        sent = "send" if presenter.send_user_blocks else "omit"
                        row = {"path": path_text(s.path), "block": presenter.name, "user_blocks": sent}
                        rows[(path_text(s.path), presenter.name)] = row
    return [rows[k] for k in sorted(rows)]


def rule_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Every rule the result can carry, with the condition under which it is added."""
    walk = _walk(ir, tool)
    if walk is None or tool.returns is None:
        return []
    rows: list[Row] = []
    for at, presenter in walk.presenters:
        source = presenter.name
        rows += [{"from": source, "rule": text, "when": ""} for text in presenter.description_rules]
        if tool.returns.collection and not at:
            rows += [
                {"from": f"{source}.collection_rules", "rule": r.text.source, "when": r.when.source if r.when else ""}
                for r in presenter.collection_rules
            ]
        rows += [
            {"from": f"{source}.rules", "rule": r.text.source, "when": r.when.source if r.when else ""}
            for r in presenter.rules
        ]
    return rows


def suggestion_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Every tool the result can suggest to the model, with its reason and condition."""
    walk = _walk(ir, tool)
    if walk is None:
        return []
    return [
        {"from": presenter.name, "tool": s.tool, "reason": s.reason.source, "when": s.when.source if s.when else ""}
        for _, presenter in walk.presenters
        for s in presenter.suggestions
    ]


def state_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Where the tool runs: every state when it is not bound, else its workflow's states and the event it fires."""
    if tool.binding is None:
        return [{"workflow": "", "states": "any (not bound)", "fires": ""}]
    return [
        {
            "workflow": tool.binding.workflow,
            "states": ", ".join(tool.binding.states),
            "fires": tool.binding.transition or "",
        }
    ]


def requirement_rows(requires: RequiresIR | None) -> list[Row]:
    """Who may use a tool, resource or prompt: each scope needed, and the roles of which one is."""
    if requires is None:
        return []
    rows = [{"needs": "scope (every one)", "name": scope} for scope in requires.scopes]
    return rows + [{"needs": "role (one of them)", "name": role} for role in requires.roles]


def requires_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Who may call it (with `--auth`, §14.2): every scope listed, and one of the roles listed. No rows: anyone."""
    return requirement_rows(tool.requires)


AUDIENCE_SEES = "reaches the model"


def audience_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Each role of `returns_for_role` as its own audience: every value of its presenter's result, and whether it
    reaches the model, is masked (by which presenter, with which censor) or is left out. Callers with none of the
    roles get `returns`, which the other facets describe."""
    rows: list[Row] = []
    for role, name in tool.returns_for_role:
        walk = _ResultWalk(ir, ir.presenter(name))
        for s in walk.seen:
            if s.redaction is None:
                exposure_ = AUDIENCE_SEES
            elif s.redaction.path == s.path:
                exposure_ = f"redacted by {s.redaction.presenter}.redact_pii ({s.redaction.censor})"
            else:
                continue
            row = {"role": role, "presenter": name, "path": path_text(s.path), "type": type_text(s.field.type)}
            rows.append({**row, "exposure": exposure_})
        rows += [
            {"role": role, "presenter": name, "path": h["path"], "type": "", "exposure": h["why"]} for h in walk.hidden
        ]
    return rows


def effect_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """What its handler can do, as read from the handler module (docs/spec.md §6.8): each call once, with the
    module's own functions it is reached through. No rows: nothing found (or no handler module to read)."""
    rows = [
        {"effect": e.category, "access": e.access, "call": e.call, "through": " → ".join(e.via)} for e in tool.effects
    ]
    return list({tuple(r.values()): r for r in rows}.values())


def freshness_rows(ir: ServerIR, tool: ToolIR) -> list[Row]:
    """Freshness (docs/spec.md §6.9): the reads a mutation's success makes stale (its result names them), the tools
    whose success makes a query's results stale (its description names them), or a query's results never go stale."""
    wire = {t.name: t.wire for t in ir.tools}
    rows = [{"freshness": "its success makes stale", "tool": wire.get(n, n)} for n in tool.invalidates]
    rows += [{"freshness": "stale after a successful", "tool": name} for name in tool.stale_after]
    return rows + ([{"freshness": "immutable: never stale", "tool": ""}] if tool.immutable else [])


TOOL_FACETS: tuple[Facet, ...] = (
    Facet("inputs", "Inputs (the model sends)", ("path", "type", "required", "nullable"), input_rows),
    Facet("model_sees", "Reaches the model", ("path", "type"), model_rows),
    Facet("redacted", "Redacted before sending", ("path", "by", "censor"), redacted_rows),
    Facet("hidden", "Never in the result", ("path", "why"), hidden_rows),
    Facet("user_only", "Shown only in user-audience blocks", ("path", "block", "user_blocks"), user_only_rows),
    Facet("rules", "Rules it can emit", ("from", "rule", "when"), rule_rows),
    Facet("suggestions", "Suggestions it can emit", ("from", "tool", "reason", "when"), suggestion_rows),
    Facet("states", "Workflow states that allow it", ("workflow", "states", "fires"), state_rows),
    Facet("requires", "Restricted to (scopes and roles, with --auth)", ("needs", "name"), requires_rows),
    Facet(
        "audiences",
        "Role audiences (returns_for_role: the first role the caller has)",
        ("role", "presenter", "path", "type", "exposure"),
        audience_rows,
    ),
    Facet("freshness", "Freshness (what goes stale, and when)", ("freshness", "tool"), freshness_rows),
    Facet(
        "effects",
        "What its handler can do (read from the handler module)",
        ("effect", "access", "call", "through"),
        effect_rows,
    ),
)
# A resource read is a query through its presenter: what its result exposes, as a tool's, and who may read it
# (its requires); never bound, never presented per role, and without UI blocks (its contents are the structured
# envelope, §15.1).
RESOURCE_FACETS: tuple[Facet, ...] = tuple(
    f
    for f in TOOL_FACETS
    if f.key in ("inputs", "model_sees", "redacted", "hidden", "rules", "suggestions", "requires", "effects")
)
PROMPT_REQUIRES_FACET: Facet = next(f for f in TOOL_FACETS if f.key == "requires")
PROMPT_ARGUMENT_COLUMNS = ("name", "required", "values", "description")


# --- the report ------------------------------------------------------------------------------------------
def returns_text(ir: ServerIR, tool: ToolIR) -> str:
    if tool.returns is None:
        return "nothing (the text `<tool>: done.`)"
    presenter = ir.presenter(tool.returns.presenter)
    if not tool.returns.collection:
        return presenter.name
    limit = f", at most {presenter.limit} items" if presenter.limit is not None else ""
    return f"{presenter.name}[] (collection{limit})"


def tool_entry(ir: ServerIR, tool: ToolIR) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tool.wire,
        "spec_name": tool.name,
        "kind": tool.kind,
        "description": tool.description or "",
        "returns": returns_text(ir, tool),
    }
    for facet in TOOL_FACETS:
        entry[facet.key] = facet.rows(ir, tool)
    return entry


def workflow_entry(ir: ServerIR, workflow: WorkflowIR) -> dict[str, Any]:
    """A workflow's states with the tools each allows, and its transitions with the tools that fire them."""
    bound = [t for t in ir.tools if t.binding is not None and t.binding.workflow == workflow.name]
    unbound = [t.wire for t in ir.tools if t.binding is None]
    generated = [workflow.start_tool, workflow.status_tool]
    if any(not t.binding.retry_in_doubt for t in bound if t.binding is not None):
        generated.append(workflow.resolve_tool)
    states = [
        {
            "state": state,
            "final": "yes" if state in workflow.finals else "no",
            "initial": "yes" if state == workflow.initial else "no",
            "bound_tools": ", ".join(t.wire for t in bound if t.binding is not None and state in t.binding.states),
        }
        for state in workflow.states
    ]
    transitions = [
        {
            "from": source,
            "event": event,
            "to": target,
            "fired_by": ", ".join(
                t.wire
                for t in bound
                if t.binding is not None and t.binding.transition == event and source in t.binding.states
            ),
        }
        for source, event, target in workflow.transitions
    ]
    return {
        "name": workflow.name,
        "initial": workflow.initial,
        "generated_tools": generated,
        "unbound_tools": unbound,
        "states": states,
        "transitions": transitions,
    }


def resource_entry(ir: ServerIR, resource: ResourceIR) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": resource.name,
        "uri": resource.uri,
        "description": resource.description or "",
        "returns": returns_text(ir, resource.tool),
    }
    for facet in RESOURCE_FACETS:
        entry[facet.key] = facet.rows(ir, resource.tool)
    return entry


def prompt_template(prompt: PromptIR) -> str:
    """The template as the spec writes it: literal text (braces doubled again) and `{argument}` slots."""
    return "".join(f"{{{text}}}" if slot else text.replace("{", "{{").replace("}", "}}") for text, slot in prompt.parts)


def prompt_entry(prompt: PromptIR) -> dict[str, Any]:
    """What a user who picks the prompt sends the model: its arguments and the message its template makes."""
    arguments = [
        {
            "name": a.name,
            "required": "yes" if a.required else "no",
            "values": "|".join(a.values),
            "description": a.description or "",
        }
        for a in prompt.arguments
    ]
    return {
        "name": prompt.name,
        "description": prompt.description or "",
        "arguments": arguments,
        "template": prompt_template(prompt),
        "requires": requirement_rows(prompt.requires),
    }


def exposure(ir: ServerIR) -> Report:
    """The whole report, JSON-ready and in a fixed order (tools, resources and prompts as the spec lists them)."""
    return {
        "server": ir.name,
        "version": ir.version,
        "handlers_file": ir.handlers_file,  # where the handlers' effects were read from; None: not read
        "tools": [tool_entry(ir, t) for t in ir.tools],
        "resources": [resource_entry(ir, r) for r in ir.resources],
        "prompts": [prompt_entry(p) for p in ir.prompts],
        "workflows": [workflow_entry(ir, w) for w in ir.workflows],
    }


# --- renderings ------------------------------------------------------------------------------------------
def as_json(report: Report) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks kept on one line, never empty."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ") or " ").strip() or "—"


def _table(columns: tuple[str, ...], rows: list[Row]) -> Iterator[str]:
    yield "| " + " | ".join(columns) + " |"
    yield "| " + " | ".join("---" for _ in columns) + " |"
    for row in rows:
        yield "| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |"


WORKFLOW_STATE_COLUMNS = ("state", "initial", "final", "bound_tools")
WORKFLOW_TRANSITION_COLUMNS = ("from", "event", "to", "fired_by")


def as_markdown(report: Report, spec: str | None = None) -> str:
    """The report as Markdown: `EXPOSURE.md`, readable as a diff in a pull request. `spec` (as seen from the
    output folder) names the spec it was generated from, encoded like every header (`comment_text`)."""
    lines = [
        f"# What {report['server']} {report['version']} exposes to the model",
        "",
        "Computed from the spec by `fusiongen explain`: every value a tool's or resource's result carries, what is",
        "masked or left out (for each role audience too), who may call it, the rules and suggestions it can add and",
        "the workflow states it runs in, what its handler can do; each prompt's arguments and template. Paths of a",
        "collection are paths of one item.",
    ]
    if report["handlers_file"] is not None:
        lines += [
            "",
            f"Handler effects are read from `{comment_text(report['handlers_file'])}` beside the spec (docs/spec.md "
            "§6.8 says what that can and cannot see).",
        ]
    if spec is not None:
        lines += [
            "",
            f"Generated by fusiongen from `{comment_text(spec)}`: edit the spec and rebuild (`fusiongen build`), "
            "never this file.",
        ]
    for tool in report["tools"]:
        lines += ["", f"## `{tool['name']}` ({tool['kind']})", ""]
        if tool["description"]:
            lines += [_cell(tool["description"]), ""]
        lines += [f"Returns: {tool['returns']}."]
        lines += _markdown_facets(TOOL_FACETS, tool)
    for resource in report["resources"]:
        lines += ["", f"## Resource `{resource['name']}` (`{_cell(resource['uri'])}`)", ""]
        if resource["description"]:
            lines += [_cell(resource["description"]), ""]
        lines += [f"Returns: {resource['returns']}."]
        lines += _markdown_facets(RESOURCE_FACETS, resource)
    for prompt in report["prompts"]:
        lines += ["", f"## Prompt `{prompt['name']}`", ""]
        if prompt["description"]:
            lines += [_cell(prompt["description"]), ""]
        lines += [f"Template: {_cell(prompt['template'])}"]
        if prompt["arguments"]:
            lines += ["", "### Arguments", "", *_table(PROMPT_ARGUMENT_COLUMNS, prompt["arguments"])]
        else:
            lines += ["", "No arguments."]
        lines += _markdown_facets((PROMPT_REQUIRES_FACET,), prompt)
    for workflow in report["workflows"]:
        lines += ["", f"## Workflow `{workflow['name']}` (initial state `{workflow['initial']}`)", ""]
        lines += [f"Generated tools: {', '.join(f'`{t}`' for t in workflow['generated_tools'])}."]
        if workflow["unbound_tools"]:
            lines += [f"Allowed in every state (not bound): {', '.join(f'`{t}`' for t in workflow['unbound_tools'])}."]
        lines += ["", "### States", "", *_table(WORKFLOW_STATE_COLUMNS, workflow["states"])]
        lines += ["", "### Transitions", ""]
        transitions = workflow["transitions"]
        lines += list(_table(WORKFLOW_TRANSITION_COLUMNS, transitions)) if transitions else ["None."]
    return "\n".join(lines) + "\n"


def _markdown_facets(facets: tuple[Facet, ...], entry: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for facet in facets:
        rows = entry[facet.key]
        if rows:
            lines += ["", f"### {facet.title}", "", *_table(facet.columns, rows)]
    empty = [facet.title.lower() for facet in facets if not entry[facet.key]]
    if empty:  # one line, so a section that appears or disappears in review stands out
        lines += ["", "None: " + "; ".join(empty) + "."]
    return lines


def _text_facets(facets: tuple[Facet, ...], entry: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for facet in facets:
        rows = entry[facet.key]
        if rows:
            lines.append(f"  {facet.title.lower()}:")
            lines += ["    " + "  ".join(f"{c}={row[c]}" for c in facet.columns if row.get(c)) for row in rows]
    return lines


def as_text(report: Report) -> str:
    """The report for a terminal: one block per tool, one line per row, empty facets left out."""
    lines = [f"{report['server']} {report['version']}"]
    for tool in report["tools"]:
        lines += ["", f"tool {tool['name']} ({tool['kind']}) returns {tool['returns']}"]
        lines += _text_facets(TOOL_FACETS, tool)
    for resource in report["resources"]:
        lines += ["", f"resource {resource['name']} ({resource['uri']}) returns {resource['returns']}"]
        lines += _text_facets(RESOURCE_FACETS, resource)
    for prompt in report["prompts"]:
        lines += ["", f"prompt {prompt['name']}: {prompt['template']}"]
        lines += [
            "  argument " + "  ".join(f"{c}={a[c]}" for c in PROMPT_ARGUMENT_COLUMNS if a.get(c))
            for a in prompt["arguments"]
        ]
        lines += _text_facets((PROMPT_REQUIRES_FACET,), prompt)
    for workflow in report["workflows"]:
        lines += ["", f"workflow {workflow['name']} (initial {workflow['initial']})"]
        for state in workflow["states"]:
            kind = " (final)" if state["final"] == "yes" else ""
            lines.append(f"  state {state['state']}{kind}: {state['bound_tools'] or 'no bound tool'}")
        for t in workflow["transitions"]:
            lines.append(f"  {t['from']} --{t['event']}--> {t['to']}: fired by {t['fired_by'] or 'no tool'}")
    return "\n".join(lines) + "\n"
