"""Prepare workflows for the templates: transition tables, bindings, and the tools a workflow adds.

Everything the gate looks up at run time is computed here: the (state, event) → target table, the
bound tools each state allows, and the tool descriptions of both protocol eras.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusiongen.ir import ServerIR, ToolIR, WorkflowIR
from fusiongen.names import generated_tool_name
from fusiongen.pyliteral import py_literal, py_string


@dataclass(frozen=True)
class WorkflowView:
    name: str
    name_literal: str
    constant: str
    initial_literal: str
    finals_literal: str
    transitions_literal: str
    tools_by_state_literal: str
    start_tool_literal: str
    status_tool_literal: str
    start_description_literal: str
    status_description_literal: str
    resolve_tool_literal: str | None  # only for a workflow with a tool that refuses to run again in doubt
    resolve_description_literal: str | None
    # Machine(start_tool=..., ...) arguments when the wire names are not the runtime's default `<name>.start`.
    tool_name_arguments: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class BindingView:
    tool_literal: str
    workflow_literal: str
    states_literal: str
    event_literal: str
    retry_in_doubt_literal: str


def _transitions_literal(workflow: WorkflowIR) -> str:
    if not workflow.transitions:
        return "{}"
    lines = [f"        ({py_string(s)}, {py_string(e)}): {py_string(t)}," for s, e, t in workflow.transitions]
    return "{\n" + "\n".join(lines) + "\n    }"


def _tools_by_state(server: ServerIR, workflow: WorkflowIR) -> dict[str, tuple[str, ...]]:
    return {
        state: tuple(
            t.wire
            for t in server.tools
            if t.binding and t.binding.workflow == workflow.name and state in t.binding.states
        )
        for state in workflow.states
    }


def _tool_name_arguments(workflow: WorkflowIR) -> tuple[tuple[str, str], ...]:
    """The generated tools' names the runtime's Machine would not derive itself (`<name>.start`), as arguments."""
    names = {"start_tool": workflow.start_tool, "status_tool": workflow.status_tool}
    names["resolve_tool"] = workflow.resolve_tool
    return tuple(
        (key, py_string(name)) for key, name in names.items() if name != f"{workflow.name}.{key.removesuffix('_tool')}"
    )


def workflow_views(server: ServerIR) -> tuple[WorkflowView, ...]:
    views = []
    for workflow in server.workflows:
        upper = workflow.ident.upper()
        by_state = _tools_by_state(server, workflow)
        refusing = sorted(
            t.wire
            for t in server.tools
            if t.binding
            and t.binding.workflow == workflow.name
            and t.binding.transition
            and not t.binding.retry_in_doubt
        )
        views.append(
            WorkflowView(
                name=workflow.name,
                name_literal=py_string(workflow.name),
                constant=f"{upper}_MACHINE",
                initial_literal=py_string(workflow.initial),
                finals_literal=py_literal(frozenset(workflow.finals)),
                transitions_literal=_transitions_literal(workflow),
                tools_by_state_literal=py_literal(by_state, 1, 19),
                start_tool_literal=py_string(workflow.start_tool),
                status_tool_literal=py_string(workflow.status_tool),
                start_description_literal=py_string(
                    f'Start a new "{workflow.name}" workflow in state "{workflow.initial}" and get its '
                    f"{server.state_handle_key}: pass it to the workflow's tools."
                ),
                status_description_literal=py_string(
                    f'The current state of a "{workflow.name}" workflow and the tools it allows now.'
                ),
                resolve_tool_literal=py_string(workflow.resolve_tool) if refusing else None,
                resolve_description_literal=py_string(
                    f"Settle a call of {', '.join(refusing)} whose outcome is unknown (the tool answered IN_DOUBT): "
                    'first check with the user or the system whether it took effect, then pass outcome "completed" '
                    '(the workflow moves on as if it had succeeded) or "not_completed" (the tool may be called '
                    "again)."
                )
                if refusing
                else None,
                tool_name_arguments=_tool_name_arguments(workflow),
            )
        )
    return tuple(views)


def binding_views(server: ServerIR) -> tuple[BindingView, ...]:
    return tuple(
        BindingView(
            py_string(t.wire),
            py_string(t.binding.workflow),
            py_literal(frozenset(t.binding.states)),
            py_string(t.binding.transition) if t.binding.transition else "None",
            py_literal(t.binding.retry_in_doubt),
        )
        for t in server.tools
        if t.binding
    )


def handle_property(server: ServerIR, tool: ToolIR) -> dict[str, Any]:
    assert tool.binding is not None
    start = _workflow(server, tool.binding.workflow).start_tool
    return {
        "type": "string",
        "description": f"The handle from {start}. Required on protocol 2026-07-28; on older protocols, "
        "omit it to use this session's own workflow.",
    }


def _workflow(server: ServerIR, name: str) -> WorkflowIR:
    return next(w for w in server.workflows if w.name == name)


def modern_description(server: ServerIR, tool: ToolIR) -> str:
    """Bound tools in the stable 2026-07-28 list say which states they need and how to pass the handle."""
    description = tool.description or tool.wire
    if tool.binding is None:
        return with_errors(tool, description)
    states = ", ".join(tool.binding.states)
    start = _workflow(server, tool.binding.workflow).start_tool
    return with_errors(
        tool,
        f'{description} (Workflow "{tool.binding.workflow}": runs only in state {states}; '
        f"pass {server.state_handle_key} from {start}.)",
    )


def with_errors(tool: ToolIR, description: str) -> str:
    """A tool's description, followed by the domain error codes its handler declares (`errors`), so that the
    model knows them before it calls; the server's own codes are the same for every tool and not listed."""
    description = with_freshness(tool, description)
    if not tool.errors:
        return description
    lines = "".join(f"\n- {code}: {meaning}" if meaning else f"\n- {code}" for code, meaning in tool.errors)
    return f"{description}\n\nErrors it may return (tool_error codes):{lines}"


def with_freshness(tool: ToolIR, description: str) -> str:
    """A query's description says whether its results can go stale, and on what (docs/spec.md §6.9): an event the
    model sees happen (a tool it called succeeded), never an age, so it needs no clock."""
    if tool.stale_after:
        after = ", ".join(tool.stale_after)
        return (
            f"{description}\n\nVolatile: a successful {after} changes what it returns; read it again after one "
            "rather than reuse an earlier result."
        )
    if tool.immutable:
        return f"{description}\n\nReference data: its result for the same arguments never changes; reuse it."
    return description


def state_schemas(server: ServerIR) -> tuple[dict[str, Any], dict[str, Any]]:
    """Input schema of `<workflow>.status` and output schema of `.start`/`.status`."""
    key = server.state_handle_key
    start, status = (generated_tool_name("W", suffix, server.tool_names) for suffix in ("start", "status"))
    status_input = {
        "type": "object",
        "properties": {
            key: {
                "type": "string",
                "description": f"A handle returned by this workflow's start tool ({start} for {status}); "
                "omit it (older protocols only) for this session's own workflow.",
            }
        },
        "additionalProperties": False,
    }
    output = {
        "type": "object",
        "properties": {
            key: {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "The handle to pass to the workflow's tools (null for a session's own state).",
            },
            "workflow": {"type": "string"},
            "state": {"type": "string"},
            "allowed_tools": {"type": "array", "items": {"type": "string"}},
            "final": {"type": "boolean"},
            "pending": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "tool": {"type": "string"},
                            "attempts": {"type": "integer"},
                            "next": {"type": "string"},
                        },
                        "required": ["tool", "attempts", "next"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ],
                "description": "A call whose outcome is unknown (it started, but the server stopped or failed "
                "before its transition was saved), and what to do about it; null if none.",
            },
        },
        "required": [key, "workflow", "state", "allowed_tools", "final", "pending"],
        "additionalProperties": False,
    }
    return status_input, output


def resolve_schema(server: ServerIR) -> dict[str, Any]:
    """Input schema of `<workflow>.resolve`."""
    return {
        "type": "object",
        "properties": {
            server.state_handle_key: {
                "type": "string",
                "description": "The handle of the workflow in doubt; omit it (older protocols only) for this "
                "session's own workflow.",
            },
            "outcome": {
                "type": "string",
                "enum": ["completed", "not_completed"],
                "description": "Whether the call in doubt took effect, as checked with the user or the system.",
            },
        },
        "required": ["outcome"],
        "additionalProperties": False,
    }
