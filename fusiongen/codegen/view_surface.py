"""The view of resources, prompts and exposure in server.py: literals for `_surface.py`'s tables.

A resource's read is a tool view of its own (inputs.py gets its parse function, presenters.py its
present function); here it only gets the values its `ResourceRoute` is built from.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusiongen.ir import PromptIR, ResourceIR, ServerIR
from fusiongen.pyliteral import markdown_text, py_literal, py_string

_NUMERIC_KINDS = frozenset({"integer", "number", "boolean"})


@dataclass(frozen=True)
class ResourceView:
    name_literal: str
    uri_literal: str
    description_literal: str
    ident: str  # its read's tool view ident (parse_<ident>, handler binding)
    numeric_literal: str  # variables whose text is a JSON number or boolean
    row_markdown: str  # its row in the generated README's table


@dataclass(frozen=True)
class PromptView:
    prompt_literal: str  # a types.Prompt(...) expression
    parts_literal: str
    choices_literal: str
    row_markdown: str  # its row in the generated README's table


@dataclass(frozen=True)
class SurfaceView:
    resources: tuple[ResourceView, ...]
    prompts: tuple[PromptView, ...]
    resource_completions_literal: str
    completes: bool  # some prompt argument or template variable is an enum: completion/complete is served
    tool_kinds_literal: str
    tool_tags_literal: str
    workflow_tools_literal: str
    handler_kwargs: str  # the Server(...) keyword arguments of resources, prompts and completion


def resource_view(resource: ResourceIR) -> ResourceView:
    numeric = frozenset(f.name for f in resource.tool.inputs if f.type.kind in _NUMERIC_KINDS)
    return ResourceView(
        name_literal=py_string(resource.name),
        uri_literal=py_string(resource.uri),
        description_literal=py_string(resource.description) if resource.description else "None",
        ident=resource.tool.ident,
        numeric_literal=py_literal(numeric),
        row_markdown=" | ".join(
            markdown_text(text, inline=True) for text in (resource.uri, resource.description or resource.name)
        ),
    )


def prompt_view(prompt: PromptIR) -> PromptView:
    arguments = ", ".join(
        "types.PromptArgument("
        + f"name={py_string(a.name)}, "
        + (f"description={py_string(a.description)}, " if a.description else "")
        + f"required={a.required!r})"
        for a in prompt.arguments
    )
    description = f"description={py_string(prompt.description)}, " if prompt.description else ""
    return PromptView(
        prompt_literal=f"types.Prompt(name={py_string(prompt.name)}, {description}arguments=[{arguments}])",
        parts_literal=py_literal(prompt.parts),
        choices_literal=py_literal({a.name: a.values for a in prompt.arguments if a.values}),
        row_markdown=" | ".join(
            markdown_text(text, inline=True)
            for text in (
                prompt.name,
                ", ".join(a.name + ("" if a.required else " (optional)") for a in prompt.arguments) or "none",
                prompt.description or prompt.name,
            )
        ),
    )


def surface_view(server: ServerIR) -> SurfaceView:
    completions = {
        r.uri: {f.name: f.type.enum_values for f in r.tool.inputs if f.type.kind == "enum"} for r in server.resources
    }
    completions = {uri: variables for uri, variables in completions.items() if variables}
    completes = bool(completions) or any(a.values for p in server.prompts for a in p.arguments)
    workflow_tools = {}
    for w in server.workflows:
        bound = tuple(t.wire for t in server.tools if t.binding and t.binding.workflow == w.name)
        workflow_tools[w.start_tool] = bound
        workflow_tools[w.status_tool] = bound
        workflow_tools[w.resolve_tool] = bound  # whether or not the workflow has it: a name it never lists is harmless
    kwargs = []
    if server.resources:
        kwargs += [
            "on_list_resources=resources.list",
            "on_list_resource_templates=resources.list_templates",
            "on_read_resource=resources.read",
        ]
    if server.prompts:
        kwargs += ["on_list_prompts=prompts.list", "on_get_prompt=prompts.get"]
    if completes:
        resources = "resources" if server.resources else "None"
        prompts = "prompts" if server.prompts else "None"
        kwargs.append(f"on_completion=completer({prompts}, {resources})")
    return SurfaceView(
        resources=tuple(resource_view(r) for r in server.resources),
        prompts=tuple(prompt_view(p) for p in server.prompts),
        resource_completions_literal=py_literal(completions),
        completes=completes,
        tool_kinds_literal=py_literal({t.wire: t.kind for t in server.tools}),
        tool_tags_literal=py_literal({t.wire: frozenset(t.tags) for t in server.tools if t.tags}),
        workflow_tools_literal=py_literal(workflow_tools),
        handler_kwargs="".join(f", {k}" for k in kwargs),
    )
