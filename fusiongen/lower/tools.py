"""Lower tools: inputs (own and `input_from`), `returns`, and the names that must not collide.

Tools come after models, presenters and workflows: they read the models' fillable fields, name a
presenter or model to return, and carry the workflow binding lowered for them.
"""

from __future__ import annotations

import difflib
import re

from fusiongen.ir import BindingIR, FieldIR, IconIR, ModelIR, ReturnsIR, ToolIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import ToolSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.fields import lower_field
from fusiongen.names import (
    ERROR_CODE,
    ERROR_CODE_MAX_LENGTH,
    RESERVED_ERROR_CODES,
    TOOL_NAME,
    WIRE_TOOL_NAME,
    exposed_tool_name,
    generated_tool_name,
    snake_case,
)


def lower_tool(ctx: LowerContext, name: str, tool: ToolSpec, binding: BindingIR | None = None) -> ToolIR:
    loc: Loc = ("tools", name)
    name_ok = bool(TOOL_NAME.match(name))
    if not name_ok:
        ctx.error(
            "FG104",
            f'tool name "{name}" must start with a letter and use only letters, digits, '
            '"_", "-" and "." (at most 128 characters)',
            loc,
        )
    ident = snake_case(name)
    handler = tool.handler or ident
    if tool.handler is not None:
        ctx.check_identifier(handler, (*loc, "handler"), "handler name")
    elif name_ok:  # an invalid tool name is reported once, not again through the handler name it implies
        ctx.check_identifier(handler, loc, "handler name derived from the tool name", value=False)
    inputs = [lower_field(ctx, n, s, (*loc, "input", n)) for n, s in tool.input.items()]
    guarded: tuple[str, ...] = ()
    if tool.input_from is not None:
        from_fields, guarded = _resolve_input_from(ctx, tool, loc)
        inputs.extend(from_fields)
    returns_text = tool.returns == TEXT_RESULT and _text_result_unambiguous(ctx, (*loc, "returns"))
    returns = (
        _resolve_returns(ctx, tool.returns, (*loc, "returns"))
        if tool.returns is not None and tool.returns != TEXT_RESULT
        else None
    )
    return ToolIR(
        name=name,
        wire=exposed_tool_name(name, ctx.spec.server.tool_names, ctx.spec.server.exposition),
        ident=ident,
        handler=handler,
        kind=tool.kind,
        description=tool.description,
        inputs=tuple(inputs),
        guarded=guarded,
        returns=returns,
        compact_description=tool.compact_description,
        binding=binding,
        returns_text=returns_text,
        errors=_declared_errors(ctx, tool, loc),
        title=tool.title,
        icons=_icons(ctx, tool, loc),
        tags=tuple(tool.tags),
    )


# `returns = "text"`: the handler returns a string, sent as one text block (no presenter, no output schema).
TEXT_RESULT = "text"


def _text_result_unambiguous(ctx: LowerContext, loc: Loc) -> bool:
    if TEXT_RESULT in ctx.spec.presenters or TEXT_RESULT in ctx.spec.models:
        ctx.error(
            "FG111",
            f'returns = "{TEXT_RESULT}" means a plain-text result, but a presenter or model has that name too',
            loc,
            value=True,
            hint="rename the presenter or model",
        )
        return False
    return True


def _declared_errors(ctx: LowerContext, tool: ToolSpec, loc: Loc) -> tuple[tuple[str, str], ...]:
    """The codes a handler declares it raises as ToolError, checked as the runtime checks them when raised."""
    declared: list[tuple[str, str]] = []
    for code, meaning in tool.errors.items():
        at = (*loc, "errors", code)
        if len(code) > ERROR_CODE_MAX_LENGTH or not ERROR_CODE.match(code):
            ctx.error(
                "FG134",
                f'error code "{code}" must be UPPER_SNAKE_CASE (A-Z, 0-9 and "_", at most {ERROR_CODE_MAX_LENGTH} '
                "characters)",
                at,
                hint=f'e.g. "{_upper_snake(code) or "NOT_FOUND"}"',
            )
        elif code in RESERVED_ERROR_CODES:
            ctx.error(
                "FG135",
                f'error code "{code}" is the server\'s own: a handler cannot raise it',
                at,
                hint="reserved: " + ", ".join(sorted(RESERVED_ERROR_CODES)),
            )
        else:
            declared.append((code, meaning))
    return tuple(declared)


def _upper_snake(code: str) -> str:
    return "_".join(part for part in re.split(r"[^A-Za-z0-9]+", snake_case(code)) if part).upper()


def _icons(ctx: LowerContext, tool: ToolSpec, loc: Loc) -> tuple[IconIR, ...]:
    """The tool's icons. A client fetches or renders `src`, so only https: URLs and inline images are
    accepted: no http: (mixed content), file:, javascript: or relative references."""
    found: list[IconIR] = []
    for index, icon in enumerate(tool.icons):
        at = (*loc, "icons", index)
        src_ok = icon.src.startswith("https://") and len(icon.src) > len("https://")
        src_ok = src_ok or icon.src.startswith("data:image/")
        if not src_ok:
            ctx.error(
                "FG136",
                f'icon src "{icon.src[:60]}" is neither an https: URL nor a data:image/ URI',
                (*at, "src"),
                value=True,
                hint="clients fetch or render it: serve it over https, or inline it as data:image/...",
            )
            continue
        if icon.mime_type is not None and not icon.mime_type.startswith("image/"):
            ctx.error(
                "FG136", f'icon mime_type "{icon.mime_type}" is not an image type', (*at, "mime_type"), value=True
            )
            continue
        found.append(IconIR(icon.src, icon.mime_type, tuple(icon.sizes or ()), icon.theme))
    return tuple(found)


def _resolve_input_from(ctx: LowerContext, tool: ToolSpec, loc: Loc) -> tuple[list[FieldIR], tuple[str, ...]]:
    assert tool.input_from is not None
    from_loc = (*loc, "input_from")
    model_name, dot, operation = tool.input_from.partition(".")
    if not dot or not model_name or not operation or "." in operation:
        ctx.error("FG132", f'input_from must be "Model.operation", not "{tool.input_from}"', from_loc, value=True)
        return [], ()
    model = ctx.spec.models.get(model_name)
    if model is None and ctx.withdrawn("models", model_name):
        return [], ()
    if model is None:
        close = difflib.get_close_matches(model_name, list(ctx.spec.models), n=1)
        ctx.error(
            "FG130",
            f'input_from names unknown model "{model_name}"',
            from_loc,
            value=True,
            hint=f'did you mean "{close[0]}"?' if close else None,
        )
        return [], ()
    if operation not in model.fillable:
        known = ", ".join(model.fillable) or "none"
        ctx.error(
            "FG131",
            f'model "{model_name}" has no fillable operation "{operation}"',
            from_loc,
            value=True,
            hint=f"its operations: {known}",
        )
        return [], ()
    fields: list[FieldIR] = []
    for field_name in model.fillable[operation]:
        spec = model.fields.get(field_name)
        if spec is None:
            continue  # reported on the model
        if field_name in tool.input:
            ctx.error(
                "FG133",
                f'input field "{field_name}" is also fillable through input_from "{tool.input_from}"',
                (*loc, "input", field_name),
                hint="declare selector fields (like an id) in input, and writable ones in fillable",
            )
            continue
        if operation == "update":  # an update is partial: every fillable field may be left out
            spec = spec.model_copy(update={"required": False})
        fields.append(
            lower_field(
                ctx, field_name, spec, ("models", model_name, "fields", field_name), hidden=field_name in model.hidden
            )
        )
    guarded = tuple(g for g in model.guarded if g not in tool.input)
    return fields, guarded


def _resolve_returns(ctx: LowerContext, returns: str, loc: Loc) -> ReturnsIR | None:
    """A presenter name, else a model name (its implicit presenter); "X[]" for a collection."""
    collection = returns.endswith("[]")
    name = returns[:-2] if collection else returns
    if name in ctx.spec.presenters or name in ctx.spec.models:
        return ReturnsIR(presenter=name, collection=collection)
    if ctx.withdrawn("presenters", name) or ctx.withdrawn("models", name):
        return None
    close = difflib.get_close_matches(name, [*ctx.spec.presenters, *ctx.spec.models], n=1)
    ctx.error(
        "FG111",
        f'returns names unknown presenter or model "{name}"',
        loc,
        value=True,
        hint=f'did you mean "{close[0]}"?' if close else 'name a presenter or a model, "X[]" for a list',
    )
    return None


def generates_resolve(workflow: str, tools: tuple[ToolIR, ...]) -> bool:
    """Whether fusiongen generates `<workflow>.resolve`: only for a workflow with a tool that fires a transition
    and refuses to run again when its outcome is unknown (`in_doubt = "refuse"`, §10.7)."""
    return any(
        t.binding is not None
        and t.binding.workflow == workflow
        and t.binding.transition is not None
        and not t.binding.retry_in_doubt
        for t in tools
    )


def check_workflow_names(ctx: LowerContext, handle_key: str, tools: tuple[ToolIR, ...]) -> None:
    """The generated <workflow>.start/.status/.resolve tools and the handle argument must not clash with the spec.
    Only the tools that are generated are reserved: `.resolve` only for a workflow that gets it, so a helpdesk's
    own `ticket.resolve` builds (and is FG177 only once a tool of `ticket` refuses in doubt, which it then says).
    Names are compared as the model sees them ([server] tool_names): with "snake", tool `invoice_start` is
    the generated `invoice.start` too."""
    if not ctx.spec.workflows:
        return
    ctx.check_identifier(handle_key, ("server", "state_handle_key"), "state_handle_key")
    style, exposition = ctx.spec.server.tool_names, ctx.spec.server.exposition
    for workflow in ctx.spec.workflows:
        suffixes = ("start", "status", "resolve") if generates_resolve(workflow, tools) else ("start", "status")
        for suffix in suffixes:
            generated = generated_tool_name(workflow, suffix, style, exposition)
            why = ' (generated because a tool of the workflow has in_doubt = "refuse")' if suffix == "resolve" else ""
            for tool in tools:
                if tool.wire == generated:
                    ctx.error(
                        "FG177",
                        f'tool "{tool.name}" clashes with the tool fusiongen generates for workflow "{workflow}"'
                        + ("" if tool.name == generated else f' ("{generated}")')
                        + why,
                        ("tools", tool.name),
                        hint="rename the tool",
                    )
    for tool in tools:
        if tool.binding and any(f.name == handle_key for f in tool.inputs):
            ctx.error(
                "FG177",
                f'tool "{tool.name}" has an input "{handle_key}", the workflow handle argument',
                ("tools", tool.name, "input", handle_key),
                hint="rename the input or set [server] state_handle_key",
            )


def check_wire_names(ctx: LowerContext, tools: tuple[ToolIR, ...]) -> None:
    """With `tool_names = "snake"`, every name the model sees must be one LLM APIs accept as a function name
    (`^[a-zA-Z0-9_-]{1,64}$`, FG104) and name one tool only (FG143). Two tools with the same Python name are
    reported by `check_collisions` already; the generated workflow tools by `check_workflow_names` and here."""
    if ctx.spec.server.tool_names != "snake" or ctx.spec.server.exposition == "grouped":
        return  # grouped: lower/exposition.py checks the served names
    first_by_wire: dict[str, ToolIR] = {}
    for tool in tools:
        loc: Loc = ("tools", tool.name)
        if TOOL_NAME.match(tool.name) and not WIRE_TOOL_NAME.match(tool.wire):
            ctx.error(
                "FG104",
                f'tool "{tool.name}" has the wire name "{tool.wire}", longer than the 64 characters LLM APIs accept',
                loc,
                hint='shorten the tool name (tool_names = "snake")',
            )
        other = first_by_wire.setdefault(tool.wire, tool)
        if other is not tool and other.ident != tool.ident:
            ctx.error(
                "FG143",
                f'tools "{other.name}" and "{tool.name}" have the same wire name "{tool.wire}" (tool_names = "snake")',
                loc,
                hint="rename one of them",
            )
    for workflow in ctx.spec.workflows:
        suffix = "resolve" if generates_resolve(workflow, tools) else "status"  # its longest generated name
        generated = generated_tool_name(workflow, suffix, "snake")
        if not WIRE_TOOL_NAME.match(generated):
            ctx.error(
                "FG104",
                f'workflow "{workflow}" generates the tool "{generated}", '
                "longer than the 64 characters LLM APIs accept",
                ("workflows", workflow),
                hint='shorten the workflow name (tool_names = "snake")',
            )


def check_collisions(ctx: LowerContext, models: tuple[ModelIR, ...], tools: tuple[ToolIR, ...]) -> None:
    first_by_handler: dict[str, str] = {}
    first_by_ident: dict[str, str] = {}
    for tool in tools:
        loc: Loc = ("tools", tool.name)
        explicit = ctx.spec.tools[tool.name].handler is not None
        same_ident = first_by_ident.get(tool.ident) == first_by_handler.get(tool.handler)
        if tool.handler in first_by_handler and (explicit or not same_ident):
            other = first_by_handler[tool.handler]
            ctx.error(
                "FG142",
                f'tools "{other}" and "{tool.name}" both use handler "{tool.handler}"',
                (*loc, "handler") if explicit else loc,
                value=explicit,
                hint='give one of them its own "handler"',
            )
        first_by_handler.setdefault(tool.handler, tool.name)
        if tool.ident in first_by_ident:
            other = first_by_ident[tool.ident]
            ctx.error(
                "FG143",
                f'tools "{other}" and "{tool.name}" map to the same Python name "{tool.ident}"',
                loc,
                hint="rename one of them",
            )
        first_by_ident.setdefault(tool.ident, tool.name)
    for kind, names in (("presenters", ctx.spec.presenters), ("workflows", ctx.spec.workflows)):
        seen: dict[str, str] = {}
        for name in names:
            snake = snake_case(name)
            if snake in seen:
                ctx.error(
                    "FG143",
                    f'{kind} "{seen[snake]}" and "{name}" map to the same Python name "{snake}"',
                    (kind, name),
                    hint="rename one of them",
                )
            seen.setdefault(snake, name)
    first_by_snake: dict[str, str] = {}
    for model in models:
        if model.snake in first_by_snake:
            ctx.error(
                "FG143",
                f'models "{first_by_snake[model.snake]}" and "{model.name}" map to the same '
                f'Python name "{model.snake}"',
                ctx.model_loc(model.name),
                hint="rename one of them",
            )
        first_by_snake.setdefault(model.snake, model.name)
