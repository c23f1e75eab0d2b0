"""Grouped exposition (`[server] exposition = "grouped"`): one tool per group, whose `action` argument picks
the operation.

The server underneath is the flat one, unchanged: every action keeps its own route, input validation,
presenter, `requires`, tags, errors and workflow gate, and every text it writes names it as the model
calls it, `invoice(action=get)` (the name the flat server routes by). This module only folds the flat
`tools/list` into one tool per group, and unfolds a call of a group back into the flat call of its action:

* the group's input schema is a discriminated union on `action`: a string enum of the actions listed, and
  one `anyOf` branch per action, with `action` fixed to its name and that action's own properties, required
  names and `additionalProperties: false`; its description names every action with its own description;
* the output schema is the action's, or an `anyOf` of the distinct ones when every action has one (none
  when an action sends only text: a client would refuse a structured result missing);
* the annotations are what holds for every action: read-only only if all are, destructive if any is.

The folded list follows whatever the flat list is for the caller: in the handshake era the actions the
session's workflow states allow (and its `requires`), so the `action` enum changes with the state and the
flat server's `notifications/tools/list_changed` says so; on 2026-07-28 the stable list with every action.
A call of an action its state does not allow is refused by the gate as the flat tool would be, naming the
action and the allowed ones. An action the group does not have is a validation error naming those it has.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import mcp_types as types

from ._results import unknown_tool, validation_error
from ._values import FieldError

__all__ = ["ACTION", "Grouping", "group_tool"]

ACTION: Final = "action"
# Folded lists kept per distinct flat list (a handful: one per combination of workflow states and rights).
MAX_FOLDED: Final = 256

ListTools = Callable[[Any, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]]
CallTool = Callable[[Any, types.CallToolRequestParams], Awaitable[types.CallToolResult]]


class Grouping:
    """The fold and unfold between the flat server and the grouped one.

    `actions` maps each flat tool name (the text name, `invoice(action=get)`) to its group and action;
    `served` are the flat tools this server serves (after --expose and --tags): only those are actions."""

    def __init__(self, actions: Mapping[str, tuple[str, str]], served: Sequence[str]) -> None:
        self.actions = {name: actions[name] for name in served if name in actions}
        self.ungrouped = [name for name in served if name not in actions]
        self.flat_of = {group_action: name for name, group_action in self.actions.items()}
        self.groups: dict[str, list[str]] = {}
        for group, action in self.actions.values():
            self.groups.setdefault(group, []).append(action)
        self._folded: dict[tuple[tuple[str, str | None], ...], types.ListToolsResult] = {}

    def fold(self, tools: Sequence[types.Tool]) -> list[types.Tool]:
        """The flat tools as the grouped server lists them: each group where its first action is."""
        order: list[types.Tool | str] = []
        members: dict[str, list[tuple[str, types.Tool]]] = {}
        for tool in tools:
            owner = self.actions.get(tool.name)
            if owner is None:
                order.append(tool)
                continue
            group, action = owner
            if group not in members:
                members[group] = []
                order.append(group)
            members[group].append((action, tool))
        return [item if isinstance(item, types.Tool) else group_tool(item, members[item]) for item in order]

    def list_tools(self, inner: ListTools) -> ListTools:
        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            listed = await inner(ctx, params)
            key = tuple((tool.name, tool.description) for tool in listed.tools)
            folded = self._folded.get(key)
            if folded is None:
                if len(self._folded) >= MAX_FOLDED:
                    self._folded.clear()
                folded = self._folded[key] = types.ListToolsResult(tools=self.fold(listed.tools))
            return folded

        return list_tools

    def call_tool(self, inner: CallTool) -> CallTool:
        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            actions = self.groups.get(params.name)
            if actions is None:
                if params.name in self.actions:  # an action by its text name: only its group is served
                    raise unknown_tool(params.name, [*self.groups, *self.ungrouped])
                return await inner(ctx, params)
            arguments = dict(params.arguments or {})
            action = arguments.pop(ACTION, None)
            flat = self.flat_of.get((params.name, action)) if isinstance(action, str) else None
            if flat is None:
                choices = ", ".join(json.dumps(a) for a in actions)
                problem = "missing" if action is None else "unknown action"
                return validation_error(params.name, [FieldError(ACTION, f"{problem}; expected one of {choices}.")])
            return await inner(ctx, params.model_copy(update={"name": flat, "arguments": arguments}))

        return call_tool


def group_tool(group: str, actions: Sequence[tuple[str, types.Tool]]) -> types.Tool:
    """One group's tool, from its actions' flat tools (in the order given)."""
    names = [action for action, _ in actions]
    definitions: dict[str, Any] = {}
    branches = []
    for action, tool in actions:
        schema = dict(tool.input_schema)
        definitions.update(schema.pop("$defs", None) or {})
        branches.append(
            {
                "type": "object",
                "properties": {ACTION: {"type": "string", "enum": [action]}, **schema.get("properties", {})},
                "required": [ACTION, *schema.get("required", [])],
                "additionalProperties": False,
            }
        )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {ACTION: {"type": "string", "enum": names, "description": "The operation to run."}},
        "required": [ACTION],
        "anyOf": branches,
    }
    if definitions:
        input_schema["$defs"] = definitions
    description = f'Actions on "{group}": pass "action" to choose one; each takes its own arguments.' + "".join(
        f'\n\naction "{action}": {tool.description or ""}' for action, tool in actions
    )
    return types.Tool(
        name=group,
        description=description,
        input_schema=input_schema,
        output_schema=_output_schema([tool for _, tool in actions]),
        annotations=_annotations([tool for _, tool in actions]),
    )


def _output_schema(tools: Sequence[types.Tool]) -> dict[str, Any] | None:
    if any(tool.output_schema is None for tool in tools):
        return None
    definitions: dict[str, Any] = {}
    distinct: dict[str, dict[str, Any]] = {}
    for tool in tools:
        schema = dict(tool.output_schema or {})
        definitions.update(schema.pop("$defs", None) or {})
        distinct.setdefault(json.dumps(schema, sort_keys=True), schema)
    schemas = list(distinct.values())
    merged: dict[str, Any] = schemas[0] if len(schemas) == 1 else {"type": "object", "anyOf": schemas}
    return {**merged, "$defs": definitions} if definitions else merged


def _annotations(tools: Sequence[types.Tool]) -> types.ToolAnnotations:
    hints = [tool.annotations or types.ToolAnnotations() for tool in tools]
    return types.ToolAnnotations(
        read_only_hint=all(h.read_only_hint is True for h in hints),
        destructive_hint=any(h.destructive_hint is not False for h in hints if h.read_only_hint is not True),
        idempotent_hint=all(h.idempotent_hint is True for h in hints),
    )
