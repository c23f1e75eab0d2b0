"""Lower workflows (finite-state machines) and the tools bound to their states.

A workflow is given inline in TOML or as an XState v5 machine exported to JSON. Only flat machines
with plain event → target transitions are compiled; every XState feature that would change behaviour
if ignored (guards, actions, always, after, invoke, nested or parallel states, wildcard events) is a
diagnostic naming it, because silently dropping a guard lets a call through that should be refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fusiongen.diagnostics import Diagnostic, Position, Severity
from fusiongen.ir import BindingIR, PresenterIR, ToolIR, WorkflowIR
from fusiongen.load.loader import LoadedSpec, Loc
from fusiongen.load.spec import StateSpec, ToolSpec, TransitionSpec, WorkflowSpec
from fusiongen.lower.context import LowerContext
from fusiongen.names import generated_tool_name, snake_case

_UNSUPPORTED_STATE_KEYS = ("always", "after", "invoke", "entry", "exit", "initial", "states", "history")
_UNSUPPORTED_TRANSITION_KEYS = ("guard", "cond", "actions", "reenter")
_MACHINE_KEYS = {"id", "initial", "states", "description", "version", "context", "predictableActionArguments"}


@dataclass
class _Source:
    """Where a workflow's states are written: the spec, or a machine JSON file."""

    file: str
    text: str | None  # the JSON text, to find positions in it; None for the spec itself

    def position(self, loaded: LoadedSpec, loc: Loc, json_keys: tuple[str, ...]) -> Position:
        if self.text is None:
            return loaded.key_at(*loc)
        offset = 0
        for key in json_keys:  # walk down the JSON text key by key (a key, not an equal string value)
            match = re.compile(re.escape(json.dumps(key)) + r"\s*:").search(self.text, offset)
            if match is None:
                break
            offset = match.start()
        line = self.text.count("\n", 0, offset) + 1
        return Position(line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1)


def lower_workflows(ctx: LowerContext) -> tuple[dict[str, WorkflowIR], WorkflowLowering]:
    """The workflows that compiled (by name), and the lowering that binds tools to them."""
    lowering = WorkflowLowering(ctx)
    workflows = {name: w for name, spec in ctx.spec.workflows.items() if (w := lowering.lower(name, spec)) is not None}
    return workflows, lowering


class WorkflowLowering:
    """Compiles machines and then the tools' bindings to them. It keeps the events each workflow
    declares, so a binding to an event already reported where it is declared is not reported twice."""

    def __init__(self, ctx: LowerContext) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        # Every event a workflow's states name, compiled or not: a binding to an event whose transition was
        # already reported (unsupported, or an unknown target) is not reported again.
        self.declared_events: dict[str, set[str]] = {}
        self.sources: dict[str, _Source] = {}  # where each compiled workflow's states are written

    def report(
        self,
        source: _Source,
        code: str,
        message: str,
        loc: Loc,
        json_keys: tuple[str, ...] = (),
        *,
        hint: str | None = None,
        warning: bool = False,
    ) -> None:
        self.ctx.diagnostics.append(
            Diagnostic(
                code,
                message,
                source.file,
                source.position(self.ctx.loaded, loc, json_keys),
                Severity.WARNING if warning else Severity.ERROR,
                hint,
            )
        )

    # --- machines --------------------------------------------------------------------------------
    def lower(self, name: str, workflow: WorkflowSpec) -> WorkflowIR | None:
        loc: Loc = ("workflows", name)
        self.ctx.check_identifier(name, loc, "workflow name", value=False)
        source = _Source(self.ctx.loaded.file_at(*loc), None)
        initial, states = workflow.initial, workflow.states
        if workflow.machine is not None:
            if workflow.states is not None or workflow.initial is not None:
                self.ctx.error(
                    "FG173", f'workflow "{name}" has both "machine" and inline initial/states', (*loc, "machine")
                )
                return None
            loaded = self.load_machine(name, workflow.machine, (*loc, "machine"))
            if loaded is None:
                return None
            source, initial, states = loaded
        if states is None or not states:
            self.ctx.error("FG170", f'workflow "{name}" declares no states', loc)
            return None
        state_loc = (*loc, "states")
        transitions: list[tuple[str, str, str]] = []
        finals: list[str] = []
        self.declared_events[name] = {event for spec in states.values() for event in spec.on}
        for state, spec in states.items():
            at = (*state_loc, state)
            keys = ("states", state)
            nested_reported = False
            for key in _UNSUPPORTED_STATE_KEYS:
                if getattr(spec, key) is not None:
                    nested = key in ("states", "initial", "history")
                    if nested and nested_reported:
                        continue
                    nested_reported = nested_reported or nested
                    what = "nested states" if nested else f'"{key}"'
                    self.report(
                        source,
                        "FG172",
                        f'state "{state}" uses {what}, an XState feature fusiongen does not compile',
                        (*at, key),
                        (*keys, key),
                        hint="flatten the machine, or enforce it in a handler",
                    )
            if spec.type not in (None, "atomic", "final"):
                self.report(
                    source,
                    "FG172",
                    f'state "{state}" has type "{spec.type}", which fusiongen does not '
                    "compile (only atomic and final states)",
                    (*at, "type"),
                    (*keys, "type"),
                )
            if spec.type == "final":
                finals.append(state)
                if spec.on:
                    self.report(
                        source, "FG174", f'final state "{state}" cannot have transitions', (*at, "on"), (*keys, "on")
                    )
                continue
            for event, target in spec.on.items():
                at_event = (*at, "on", event)
                json_at = (*keys, "on", event)
                resolved = self.target(source, state, event, target, at_event, json_at)
                if resolved is None:
                    continue
                if resolved not in states:
                    self.report(
                        source,
                        "FG170",
                        f'transition {state} --{event}--> "{resolved}": no such state',
                        at_event,
                        json_at,
                    )
                    continue
                transitions.append((state, event, resolved))
        if initial is None or initial not in states:
            self.report(
                source,
                "FG170",
                f'workflow "{name}" needs "initial" naming one of its states'
                + (f' ("{initial}" is not one)' if initial else ""),
                (*loc, "initial"),
                ("initial",),
            )
            return None
        reachable = {initial}
        frontier = [initial]
        while frontier:
            current = frontier.pop()
            for state, _, target in transitions:
                if state == current and target not in reachable:
                    reachable.add(target)
                    frontier.append(target)
        for state in states:
            if state not in reachable:
                self.report(
                    source,
                    "FG175",
                    f'state "{state}" of workflow "{name}" cannot be reached from "{initial}"',
                    (*state_loc, state),
                    ("states", state),
                    warning=True,
                )
        self.sources[name] = source
        style, exposition = self.ctx.spec.server.tool_names, self.ctx.spec.server.exposition
        start, status, resolve = (
            generated_tool_name(name, suffix, style, exposition) for suffix in ("start", "status", "resolve")
        )
        return WorkflowIR(
            name, snake_case(name), initial, tuple(states), tuple(finals), tuple(transitions), start, status, resolve
        )

    def target(
        self,
        source: _Source,
        state: str,
        event: str,
        target: str | TransitionSpec | list[Any],
        loc: Loc,
        json_keys: tuple[str, ...],
    ) -> str | None:
        if event == "*" or "*" in event:
            self.report(source, "FG172", f'wildcard event "{event}" in state "{state}" is not compiled', loc, json_keys)
            return None
        if isinstance(target, list):
            self.report(
                source,
                "FG172",
                f'event "{event}" of state "{state}" has several (guarded) transitions; '
                "fusiongen compiles one target per event",
                loc,
                json_keys,
            )
            return None
        if isinstance(target, TransitionSpec):
            for key in _UNSUPPORTED_TRANSITION_KEYS:
                if getattr(target, key) is not None:
                    self.report(
                        source,
                        "FG172",
                        f'transition {state} --{event}--> uses "{key}", an XState feature fusiongen does not compile',
                        (*loc, key),
                        (*json_keys, key),
                        hint="ignoring it would change behaviour; move the check into a handler",
                    )
                    return None
            target = target.target
        if target.startswith(("#", ".")) or "." in target:
            self.report(
                source,
                "FG172",
                f'transition target "{target}" refers to a nested or id-addressed state',
                loc,
                json_keys,
            )
            return None
        return target

    def load_machine(
        self, workflow: str, machine: str, loc: Loc
    ) -> tuple[_Source, str | None, dict[str, StateSpec]] | None:
        read = self.ctx.loaded.machines[workflow]
        if read.text is None or read.problem is not None:
            if read.problem_at is not None:
                self.ctx.diagnostics.append(Diagnostic("FG173", read.problem or "", read.file, read.problem_at))
            else:
                self.ctx.error("FG173", read.problem or f'cannot read machine "{machine}"', loc, value=True)
            return None
        config, text, shown = read.document, read.text, read.file
        source = _Source(shown, text)
        if not isinstance(config, Mapping) or not isinstance(config.get("states"), Mapping):
            self.report(source, "FG173", 'a machine must be a JSON object with "states"', (), ())
            return None
        for key in config:
            if key not in _MACHINE_KEYS:
                self.report(
                    source,
                    "FG172",
                    f'machine key "{key}" is an XState feature fusiongen does not compile',
                    (),
                    (str(key),),
                )
        if "context" in config:
            self.report(
                source, "FG172", 'machine "context" has no effect here (no actions run)', (), ("context",), warning=True
            )
        states: dict[str, StateSpec] = {}
        for name, raw in config["states"].items():
            try:
                states[str(name)] = StateSpec.model_validate(raw if raw is not None else {})
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                self.report(
                    source,
                    "FG172" if first["type"] == "extra_forbidden" else "FG173",
                    f'state "{name}": "{where}" is not supported here ({first["msg"].lower()})',
                    (),
                    ("states", str(name), *(str(p) for p in first["loc"][:1])),
                )
        initial = config.get("initial")
        return source, initial if isinstance(initial, str) else None, states

    # --- bindings --------------------------------------------------------------------------------
    def binding(self, tool_name: str, tool: ToolSpec, workflows: dict[str, WorkflowIR]) -> BindingIR | None:
        loc: Loc = ("tools", tool_name)
        if tool.bind_state is None:
            if tool.compact_description is not None:
                self.ctx.error(
                    "FG174",
                    "compact_description needs bind_state: it is shown while the bound "
                    "workflow is in its initial state",
                    (*loc, "compact_description"),
                )
            return None
        bind = tool.bind_state
        at = (*loc, "bind_state")
        name = bind.workflow
        if name is None:
            if len(self.spec.workflows) != 1:
                if any(table == "workflows" for table, _ in self.ctx.loaded.withdrawn):
                    return None  # the count is not what the user wrote; the set-aside workflow was reported
                self.ctx.error("FG174", 'bind_state needs "workflow" when the spec does not have exactly one', at)
                return None
            name = next(iter(self.spec.workflows))
        workflow = workflows.get(name)
        if workflow is None:
            if name not in self.spec.workflows and not self.ctx.withdrawn("workflows", name):
                self.ctx.error("FG174", f'bind_state names unknown workflow "{name}"', (*at, "workflow"), value=True)
            return None
        ok = True
        for index, state in enumerate(bind.states):
            if state not in workflow.states:
                self.ctx.error(
                    "FG170",
                    f'workflow "{name}" has no state "{state}"',
                    (*at, "states", index),
                    value=True,
                    hint="its states: " + ", ".join(workflow.states),
                )
                ok = False
        if not bind.states:
            self.ctx.error("FG174", "bind_state needs at least one state", (*at, "states"), value=True)
            ok = False
        if bind.transition is not None:
            accepting = {s for s, e, _ in workflow.transitions if e == bind.transition}
            if not accepting and bind.transition in self.declared_events.get(name, set()):
                ok = False  # its transitions were reported where they are declared
            elif not accepting:
                self.ctx.error(
                    "FG171",
                    f'no state of workflow "{name}" accepts event "{bind.transition}"',
                    (*at, "transition"),
                    value=True,
                )
                ok = False
            elif ok and not accepting & set(bind.states):
                self.ctx.error(
                    "FG171",
                    f'event "{bind.transition}" is accepted only in '
                    f"{', '.join(sorted(accepting))}, not in the states this tool runs in",
                    (*at, "transition"),
                    value=True,
                )
                ok = False
        if bind.in_doubt is not None and bind.transition is None:
            self.ctx.error(
                "FG174",
                "in_doubt needs a transition: only a call that fires one can end in doubt",
                (*at, "in_doubt"),
                value=True,
            )
            ok = False
        if ok and tool.compact_description is not None and workflow.initial not in bind.states:
            self.ctx.warning(
                "FG189",
                f'compact_description of "{tool_name}" never shows: it is listed only while workflow "{name}" is in '
                f'its initial state "{workflow.initial}", which is not one of this tool\'s states',
                (*loc, "compact_description"),
                hint=f'add "{workflow.initial}" to bind_state.states, or remove compact_description',
            )
        # A mutation is destructive: running it twice could do its effect twice, so by default it is refused.
        retry = bind.in_doubt == "retry" if bind.in_doubt is not None else tool.kind != "mutation"
        return BindingIR(name, tuple(bind.states), bind.transition, retry) if ok else None

    def check_fireable(self, workflow: WorkflowIR, bindings: list[BindingIR]) -> None:
        if any(table == "tools" for table, _ in self.ctx.loaded.withdrawn):
            return  # a set-aside tool may be the one that fires it: no warning built on a guess
        for state, event, target in workflow.transitions:
            if not any(b.workflow == workflow.name and b.transition == event and state in b.states for b in bindings):
                self.ctx.warning(
                    "FG176",
                    f'no tool fires {state} --{event}--> {target} in workflow "{workflow.name}"',
                    ("workflows", workflow.name),
                    hint=f'bind a tool with transition = "{event}" to state "{state}"',
                )

    # --- model checks ----------------------------------------------------------------------------
    def bindings_complete(self, workflow: str, tools: tuple[ToolIR, ...]) -> bool:
        """Whether every tool the spec binds to `workflow` has a binding: one that failed (reported already) or a
        set-aside tool may be the one that fires a transition, so no verdict about the machine is built on it."""
        if any(table == "tools" for table, _ in self.ctx.loaded.withdrawn):
            return False
        lowered = {t.name: t for t in tools}
        sole = next(iter(self.spec.workflows)) if len(self.spec.workflows) == 1 else None
        for name, tool in self.spec.tools.items():
            if tool.bind_state is None:
                continue
            bound_to = tool.bind_state.workflow or sole
            if bound_to is not None and bound_to != workflow:
                continue  # bound elsewhere; no workflow at all (several to choose from) could be any of them
            if name not in lowered or lowered[name].binding is None:
                return False
        return True

    def check_model(self, workflow: WorkflowIR, tools: tuple[ToolIR, ...]) -> None:
        """Run the machine as the gate will: only transitions some bound tool fires move it. A reachable state
        that is not final and that no tool can leave is a deadlock (FG178, an error: every session reaching it is
        stuck for good); a state from which no final state can be reached is FG179 (a warning: a machine may
        loop on purpose; a workflow without final states is not checked for it)."""
        if not self.bindings_complete(workflow.name, tools):
            return
        fireable = fireable_transitions(workflow, tools)
        reachable = reachable_states({workflow.initial}, fireable)
        source = self.sources[workflow.name]
        stuck: set[str] = set()
        for state in workflow.states:
            if state not in reachable or state in workflow.finals or any(s == state for s, _, _ in fireable):
                continue
            stuck.add(state)
            events = [e for s, e, _ in workflow.transitions if s == state]
            hint = (
                f"bind a tool with transition = one of {', '.join(events)} to it, or make it final"
                if events
                else 'give it a transition a tool fires, or make it final (type = "final")'
            )
            self.report(
                source,
                "FG178",
                f'deadlock: workflow "{workflow.name}" can reach state "{state}", which is not final, '
                "and no tool fires a transition out of it",
                ("workflows", workflow.name, "states", state),
                ("states", state),
                hint=hint,
            )
        if not workflow.finals:
            return
        for state in workflow.states:
            if state not in reachable or state in stuck or state in workflow.finals:
                continue
            if not reachable_states({state}, fireable) & set(workflow.finals):
                self.report(
                    source,
                    "FG179",
                    f'no final state of workflow "{workflow.name}" can be reached from state "{state}"',
                    ("workflows", workflow.name, "states", state),
                    ("states", state),
                    hint="sessions that get there never finish; bind tools to transitions leading to a final state",
                    warning=True,
                )

    def check_suggestions(
        self, presenters: tuple[PresenterIR, ...], tools: tuple[ToolIR, ...], workflows: dict[str, WorkflowIR]
    ) -> None:
        """FG188: a suggestion naming a bound tool that the gate would refuse in every state the suggesting
        result can be produced in, so following it can only fail."""
        by_wire = {t.wire: t for t in tools}
        for presenter in presenters:
            spec = self.spec.presenters.get(presenter.name)
            if spec is None:
                continue
            returning = [
                t for t in tools if t.returns and presenter.name in _contained(presenters, t.returns.presenter)
            ]
            for index, suggestion in enumerate(presenter.suggestions):
                target = by_wire.get(suggestion.tool)
                if not returning or target is None or target.binding is None:
                    continue
                workflow = workflows.get(target.binding.workflow)
                if workflow is None or not self.bindings_complete(workflow.name, tools):
                    continue
                possible = set().union(*(_states_after(t, workflow, tools) for t in returning))
                if possible & set(target.binding.states):
                    continue
                where = ", ".join(s for s in workflow.states if s in possible) or "none"
                self.ctx.warning(
                    "FG188",
                    f'presenter "{presenter.name}" suggests "{suggestion.tool}", which runs only in state(s) '
                    f'{", ".join(target.binding.states)} of workflow "{workflow.name}"; the results that carry this '
                    f"suggestion are produced only in {where}",
                    ("presenters", presenter.name, "suggest", index, "tool"),
                    hint="the gate would refuse the call; suggest a tool allowed there, or add a when",
                )


def fireable_transitions(workflow: WorkflowIR, tools: tuple[ToolIR, ...]) -> list[tuple[str, str, str]]:
    """The transitions some tool bound to `workflow` fires: the only ways the gate moves a session."""
    bindings = [t.binding for t in tools if t.binding is not None and t.binding.workflow == workflow.name]
    return [
        (state, event, target)
        for state, event, target in workflow.transitions
        if any(b.transition == event and state in b.states for b in bindings)
    ]


def reachable_states(start: set[str], transitions: list[tuple[str, str, str]]) -> set[str]:
    reached, frontier = set(start), list(start)
    while frontier:
        current = frontier.pop()
        for state, _, target in transitions:
            if state == current and target not in reached:
                reached.add(target)
                frontier.append(target)
    return reached


def _contained(presenters: tuple[PresenterIR, ...], root: str) -> set[str]:
    """`root` and every presenter it embeds, at any depth (embeds are acyclic: FG154)."""
    by_name = {p.name: p for p in presenters}
    found, frontier = {root}, [root]
    while frontier:
        current = by_name.get(frontier.pop())
        for _, child in current.embeds if current is not None else ():
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _states_after(tool: ToolIR, workflow: WorkflowIR, tools: tuple[ToolIR, ...]) -> set[str]:
    """The states `workflow` can be in when `tool`'s result is presented: after its transition if it fires one,
    its own states if it is bound without one, and every reachable state if it is not bound to this workflow."""
    binding = tool.binding
    if binding is None or binding.workflow != workflow.name:
        return reachable_states({workflow.initial}, fireable_transitions(workflow, tools))
    if binding.transition is None:
        return set(binding.states)
    return {t for s, e, t in workflow.transitions if e == binding.transition and s in binding.states}
