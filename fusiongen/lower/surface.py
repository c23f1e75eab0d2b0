"""Lower resources, prompts and tool tags: the protocol surface beside tools.

A resource's read is lowered to a `ToolIR` of its own (a query that tools/list never shows), so that
its variables are checked, its handler bound and its result presented by the code every tool uses.
Prompts are split into literal text and argument slots here, once: the server only concatenates.
"""

from __future__ import annotations

import difflib
import re

from fusiongen.ir import FieldIR, PromptArgumentIR, PromptIR, ResourceIR, ReturnsIR, ToolIR, TypeIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import FieldSpec, PromptSpec, ResourceSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.fields import lower_field
from fusiongen.names import snake_case

# RFC 6570 level 1: `{name}` only. A scheme is required so that a client can tell resources apart.
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_VARIABLE = re.compile(r"\{([^{}]*)\}")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Types a variable's text converts to unambiguously (a URI segment is text: no lists, objects or nulls).
_VARIABLE_KINDS = frozenset({"string", "text", "integer", "number", "boolean", "date", "datetime", "uuid", "enum"})
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
TAG = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")


def lower_resources(ctx: LowerContext, tools: tuple[ToolIR, ...]) -> tuple[ResourceIR, ...]:
    resources = []
    first_by_uri: dict[str, str] = {}
    handlers = {t.handler: f'tool "{t.name}"' for t in tools}
    idents = {t.ident: f'tool "{t.name}"' for t in tools}
    for name, spec in ctx.spec.resources.items():
        resource = _lower_resource(ctx, name, spec)
        if resource is None:
            continue
        shape = _VARIABLE.sub("{}", resource.uri)  # templates that differ only in variable names match the same URIs
        if shape in first_by_uri:
            ctx.error(
                "FG183",
                f'resource "{name}" ("{resource.uri}") matches the same URIs as resource "{first_by_uri[shape]}"',
                ("resources", name, "uri"),
                value=True,
                hint="give each resource its own URI",
            )
        first_by_uri.setdefault(shape, name)
        handler = resource.tool.handler
        if handler in handlers:
            ctx.error(
                "FG142",
                f'{handlers[handler]} and resource "{name}" both use handler "{handler}"',
                ("resources", name, "handler") if spec.handler else ("resources", name),
                value=spec.handler is not None,
                hint='give the resource its own "handler"',
            )
        handlers.setdefault(handler, f'resource "{name}"')
        ident = resource.tool.ident  # its parse_<ident> and <Ident>Input live beside the tools' in inputs.py
        if ident in idents:
            ctx.error(
                "FG143",
                f'{idents[ident]} and resource "{name}" map to the same Python name "{ident}"',
                ("resources", name),
                hint="rename one of them",
            )
        idents.setdefault(ident, f'resource "{name}"')
        resources.append(resource)
    return tuple(resources)


def _lower_resource(ctx: LowerContext, name: str, spec: ResourceSpec) -> ResourceIR | None:
    loc: Loc = ("resources", name)
    ctx.check_identifier(snake_case(name), loc, "resource name", value=False)
    variables = _uri_variables(ctx, spec.uri, (*loc, "uri"))
    if variables is None:
        return None
    inputs = _variable_inputs(ctx, spec, variables, loc)
    returns = _presenter(ctx, spec.presenter, (*loc, "presenter"))
    handler = spec.handler or f"read_{snake_case(name)}"
    ctx.check_identifier(handler, (*loc, "handler") if spec.handler else loc, "handler name", value=bool(spec.handler))
    ident = f"{snake_case(name)}_resource"
    tool = ToolIR(
        name=name,
        wire=name,
        ident=ident,
        handler=handler,
        kind="query",
        description=spec.description,
        inputs=inputs,
        guarded=(),
        returns=returns,
        resource=True,
    )
    return ResourceIR(name=name, uri=spec.uri, description=spec.description, variables=variables, tool=tool)


def _uri_variables(ctx: LowerContext, uri: str, loc: Loc) -> tuple[str, ...] | None:
    """The template's variable names, or None (reported) if it is not a level-1 URI template."""
    if not _URI_SCHEME.match(uri):
        ctx.error("FG180", f'resource URI "{uri}" has no scheme', loc, value=True, hint='e.g. "invoice://{id}"')
        return None
    names = []
    for match in _VARIABLE.finditer(uri):
        variable = match.group(1)
        if not _VARIABLE_NAME.match(variable):
            ctx.error(
                "FG180",
                f'resource URI "{uri}" has the variable "{{{variable}}}": only {{name}} (RFC 6570 level 1) '
                "is supported",
                loc,
                value=True,
            )
            return None
        if variable in names:
            ctx.error("FG180", f'resource URI "{uri}" names the variable "{variable}" twice', loc, value=True)
            return None
        names.append(variable)
    rest = _VARIABLE.sub("", uri)
    if "{" in rest or "}" in rest:
        ctx.error("FG180", f'resource URI "{uri}" has an unbalanced brace', loc, value=True)
        return None
    if re.search(r"\}\{", uri):
        ctx.error(
            "FG180",
            f'resource URI "{uri}" has two adjacent variables: where one ends is ambiguous',
            loc,
            value=True,
            hint="separate them, e.g. with /",
        )
        return None
    return tuple(names)


def _variable_inputs(
    ctx: LowerContext, spec: ResourceSpec, variables: tuple[str, ...], loc: Loc
) -> tuple[FieldIR, ...]:
    """One required input per variable: its declaration in `input`, else a string."""
    for declared in spec.input:
        if declared not in variables:
            close = difflib.get_close_matches(declared, variables, n=1)
            ctx.error(
                "FG182",
                f'resource input "{declared}" is not a variable of its URI "{spec.uri}"',
                (*loc, "input", declared),
                hint=f'did you mean "{close[0]}"?' if close else "a resource's inputs are its URI's {variables}",
            )
    fields = []
    for variable in variables:
        field_spec = spec.input.get(variable, FieldSpec(type="string"))
        field_loc: Loc = (*loc, "input", variable) if variable in spec.input else (*loc, "uri")
        field = lower_field(ctx, variable, field_spec, field_loc)
        if field.type.kind not in _VARIABLE_KINDS or not field.required or field.nullable:
            ctx.error(
                "FG182",
                f'resource variable "{variable}" must be a required scalar (not {field.type.kind}'
                + (", optional" if not field.required else "")
                + (", nullable" if field.nullable else "")
                + ")",
                field_loc,
                hint="a URI segment is one value: " + ", ".join(sorted(_VARIABLE_KINDS)),
            )
            field = FieldIR(name=variable, type=TypeIR("string"))
        fields.append(field)
    return tuple(fields)


def _presenter(ctx: LowerContext, name: str, loc: Loc) -> ReturnsIR | None:
    if name in ctx.spec.presenters or name in ctx.spec.models:
        return ReturnsIR(presenter=name, collection=False)
    if ctx.withdrawn("presenters", name) or ctx.withdrawn("models", name):
        return None
    close = difflib.get_close_matches(name, [*ctx.spec.presenters, *ctx.spec.models], n=1)
    ctx.error(
        "FG181",
        f'resource names unknown presenter or model "{name}"',
        loc,
        value=True,
        hint=f'did you mean "{close[0]}"?' if close else "name a presenter or a model",
    )
    return None


def lower_prompts(ctx: LowerContext) -> tuple[PromptIR, ...]:
    return tuple(_lower_prompt(ctx, name, spec) for name, spec in ctx.spec.prompts.items())


def _lower_prompt(ctx: LowerContext, name: str, spec: PromptSpec) -> PromptIR:
    loc: Loc = ("prompts", name)
    arguments = []
    for arg_name, arg in spec.arguments.items():
        arg_loc: Loc = (*loc, "arguments", arg_name)
        if not _VARIABLE_NAME.match(arg_name):
            ctx.error("FG185", f'prompt argument name "{arg_name}" must be an identifier', arg_loc)
        if arg.type == "enum" and not arg.values:
            ctx.error("FG185", f'enum argument "{arg_name}" needs values', arg_loc, hint='values = ["a", "b"]')
        if arg.type == "string" and arg.values is not None:
            ctx.error("FG185", f'string argument "{arg_name}" has values', arg_loc, hint='use type = "enum"')
        arguments.append(PromptArgumentIR(arg_name, arg.description, arg.required, tuple(arg.values or ())))
    parts = _template_parts(ctx, spec, (*loc, "template"))
    used = {text for text, is_argument in parts if is_argument}
    for argument in arguments:
        if argument.name not in used:
            ctx.warning(
                "FG186",
                f'prompt argument "{argument.name}" is not used in the template',
                (*loc, "arguments", argument.name),
                hint=f"write {{{argument.name}}} where its value belongs",
            )
    return PromptIR(name=name, description=spec.description, arguments=tuple(arguments), parts=parts)


def _template_parts(ctx: LowerContext, spec: PromptSpec, loc: Loc) -> tuple[tuple[str, bool], ...]:
    """Literal text and argument slots. `{{`/`}}` are braces; any other brace must open a known argument."""
    parts: list[tuple[str, bool]] = []
    text: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(spec.template):
        text.append(spec.template[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            text.append(token[0])
            continue
        placeholder = match.group(1)
        if placeholder is None or placeholder not in spec.arguments:
            close = difflib.get_close_matches(placeholder or "", list(spec.arguments), n=1)
            ctx.error(
                "FG184",
                f'prompt template has "{token}", which names no argument'
                if placeholder is not None
                else f'prompt template has a lone "{token}"',
                loc,
                value=True,
                hint=f'did you mean "{{{close[0]}}}"?' if close else 'declare it in arguments, or write "{{" / "}}"',
            )
            continue
        if text:
            parts.append(("".join(text), False))
            text = []
        parts.append((placeholder, True))
    text.append(spec.template[position:])
    if "".join(text):
        parts.append(("".join(text), False))
    return tuple(p for p in parts if p[0])


def check_tags(ctx: LowerContext) -> None:
    for name, tool in ctx.spec.tools.items():
        for tag in tool.tags:
            if not TAG.match(tag):
                ctx.error(
                    "FG187",
                    f'tag "{tag}" of tool "{name}" must match [a-z0-9][a-z0-9_-]*',
                    ("tools", name, "tags"),
                    value=True,
                    hint="--tags takes a comma-separated list: tags have no commas or spaces",
                )
