"""Lower a parsed spec to the IR, resolving references and collecting every diagnostic on the way.

Lowering never stops at the first mistake: each check records a diagnostic and carries on with a
best guess, so one run shows the user everything that is wrong. If any error was recorded, the
caller gets a `SpecError` instead of an IR.
"""

from __future__ import annotations

import datetime
import difflib
import keyword
import math
import uuid
from collections.abc import Iterable, Mapping

from fusiongen.diagnostics import Diagnostic, SpecError, has_errors
from fusiongen.ir import (
    CAST_KINDS,
    SCALAR_KINDS,
    FieldIR,
    ModelIR,
    ServerIR,
    TypeIR,
)
from fusiongen.load.loader import LoadedSpec, Loc
from fusiongen.lower.presenters import PresenterLowering, check_parent_redactions
from fusiongen.lower.tools import ToolLowering
from fusiongen.names import (
    IDENTIFIER,
    MODULE,
    RESERVED_PACKAGES,
    RESERVED_WORDS,
    SERVER_NAME,
    pascal_case,
    snake_case,
)

__all__ = ["lower", "pascal_case", "snake_case"]
from fusiongen.load.spec import FieldSpec, ModelSpec
from fusiongen.lower.workflows import WorkflowLowering


def lower(loaded: LoadedSpec) -> tuple[ServerIR, list[Diagnostic]]:
    """The IR and the warnings found on the way; any error raises SpecError with every diagnostic."""
    lowering = _Lowering(loaded)
    ir = lowering.run()
    if has_errors(lowering.diagnostics):
        raise SpecError(lowering.diagnostics)
    return ir, lowering.diagnostics


class _Lowering(ToolLowering):
    def __init__(self, loaded: LoadedSpec) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.diagnostics: list[Diagnostic] = []
        self.models: tuple[ModelIR, ...] = ()
        self.presenter_fields: dict[str, tuple[FieldIR, ...]] = {}

    def error(self, code: str, message: str, loc: Loc, *, hint: str | None = None, value: bool = False) -> None:
        self.diagnostics.append(self.loaded.diagnostic(code, message, loc, hint=hint, value=value))

    # --- server -------------------------------------------------------------------------------
    def run(self) -> ServerIR:
        server = self.spec.server
        name_ok = bool(SERVER_NAME.match(server.name))
        if not name_ok:
            self.error(
                "FG104", f'server name "{server.name}" must match [a-z][a-z0-9_-]*', ("server", "name"), value=True
            )
        package = server.package or snake_case(server.name).replace("-", "_") + "_server"
        package_ok = name_ok
        if server.package is not None:
            package_ok = self.check_identifier(package, ("server", "package"), "package name")
            if package_ok and package in RESERVED_PACKAGES:
                self.error(
                    "FG141",
                    f'package name "{package}" would shadow "{package}", which generated servers import',
                    ("server", "package"),
                    value=True,
                )
        handlers = server.handlers or f"{package}_handlers"
        # A default derived from a name already reported as invalid would only repeat that mistake.
        if (server.handlers is not None or package_ok) and (
            not MODULE.match(handlers) or any(keyword.iskeyword(p) for p in handlers.split("."))
        ):
            self.error(
                "FG140",
                f'handler module "{handlers}" is not an importable Python module name',
                ("server", "handlers"),
                value=True,
            )
        elif handlers.split(".")[0] in RESERVED_PACKAGES:
            self.error(
                "FG141",
                f'handler module "{handlers}" would shadow "{handlers.split(".")[0]}", which generated servers import',
                ("server", "handlers"),
                value=True,
            )
        elif handlers.split(".")[0] == package:
            self.error(
                "FG143",
                f'handler module "{handlers}" and the generated package "{package}" share an import name',
                ("server", "handlers") if server.handlers else ("server", "package"),
                value=True,
                hint="give the handler module its own name",
            )
        models = tuple(self.lower_model(name, model) for name, model in self.spec.models.items())
        self.models = models
        presenting = PresenterLowering(self, {m.name: m for m in models})
        for name, presenter in self.spec.presenters.items():
            presenting.fields[name] = presenting.schema(name, presenter)
        self.presenter_fields = presenting.fields
        self.check_embed_cycles()
        presenters = [presenting.lower(name, p, set(self.spec.tools)) for name, p in self.spec.presenters.items()]
        check_parent_redactions(self, {p.name: p for p in presenters})
        workflowing = WorkflowLowering(self)
        workflows = {
            name: w for name, spec in self.spec.workflows.items() if (w := workflowing.lower(name, spec)) is not None
        }
        tools = tuple(
            self.lower_tool(name, tool, workflowing.binding(name, tool, workflows))
            for name, tool in self.spec.tools.items()
        )
        for workflow in workflows.values():
            workflowing.check_fireable(workflow, [t.binding for t in tools if t.binding])
        self.check_workflow_names(server.state_handle_key, tools)
        for tool in tools:
            if (
                tool.returns
                and tool.returns.presenter not in self.spec.presenters
                and all(p.name != tool.returns.presenter for p in presenters)
            ):
                presenters.append(presenting.implicit(next(m for m in models if m.name == tool.returns.presenter)))
        by_snake: dict[str, str] = {}
        for presenter in presenters:  # implicit ones too: both become present_<snake> functions
            other = by_snake.setdefault(presenter.snake, presenter.name)
            if other != presenter.name and presenter.implicit:
                self.error(
                    "FG143",
                    f'presenter "{other}" and the presenter implied by model "{presenter.name}" map to the same '
                    f'Python name "{presenter.snake}"',
                    ("models", presenter.name),
                    hint="rename one of them",
                )
        self.check_collisions(models, tools)
        return ServerIR(
            name=server.name,
            version=server.version,
            package=package,
            instructions=server.instructions,
            handlers_module=handlers,
            models=models,
            presenters=tuple(presenters),
            tools=tools,
            workflows=tuple(workflows.values()),
            state_handle_key=server.state_handle_key,
        )

    def check_identifier(self, name: str, loc: Loc, what: str, *, value: bool = True) -> bool:
        if not IDENTIFIER.match(name):
            self.error(
                "FG140",
                f'{what} "{name}" is not a valid Python identifier',
                loc,
                value=value,
                hint="use letters, digits and underscores, not starting with a digit",
            )
            return False
        if name in RESERVED_WORDS:
            self.error(
                "FG141",
                f'{what} "{name}" is a Python keyword or a reserved name',
                loc,
                value=value,
                hint="rename it; generated code uses it as an identifier",
            )
            return False
        return True

    # --- types and fields -----------------------------------------------------------------------
    def lower_type(self, name: str, spec: FieldSpec, loc: Loc) -> TypeIR:
        type_loc = (*loc, "type")
        if spec.values is not None and spec.type != "enum":
            self.error("FG112", f'"values" only applies to enum fields, and this one is {spec.type}', (*loc, "values"))
        if spec.items is not None and spec.type != "list":
            self.error("FG113", f'"items" only applies to list fields, and this one is {spec.type}', (*loc, "items"))
        if spec.type == "enum":
            if not spec.values:
                at = (*loc, "values") if spec.values is not None else type_loc
                self.error("FG112", f'enum field "{name}" needs a non-empty "values" list', at, value=True)
            else:
                seen: set[str] = set()
                for index, value in enumerate(spec.values):
                    if value in seen:
                        self.error(
                            "FG112", f'enum field "{name}" lists "{value}" twice', (*loc, "values", index), value=True
                        )
                    seen.add(value)
            return TypeIR("enum", enum_values=tuple(spec.values or ()))
        if spec.type == "list":
            if spec.items is None:
                self.error(
                    "FG113", f'list field "{name}" needs "items" (a scalar type or a model name)', type_loc, value=True
                )
                return TypeIR("list", items=TypeIR("string"))
            return TypeIR("list", items=self.resolve_type_name(spec.items, (*loc, "items"), in_list=True))
        return self.resolve_type_name(spec.type, type_loc)

    def resolve_type_name(self, type_name: str, loc: Loc, *, in_list: bool = False) -> TypeIR:
        if type_name in SCALAR_KINDS and type_name not in ("enum", "list"):
            return TypeIR(type_name)
        if type_name in self.spec.models:
            return TypeIR("model", model=type_name)
        if in_list and type_name in ("enum", "list"):
            self.error("FG113", f'list items cannot be "{type_name}"; name a scalar type or a model', loc, value=True)
            return TypeIR("string")
        known = [*SCALAR_KINDS, *self.spec.models]
        close = difflib.get_close_matches(type_name, known, n=1)
        self.error(
            "FG110",
            f'unknown type "{type_name}"',
            loc,
            value=True,
            hint=f'did you mean "{close[0]}"?' if close else "a scalar type or a model name",
        )
        return TypeIR("string")

    def lower_field(
        self,
        name: str,
        spec: FieldSpec,
        loc: Loc,
        *,
        hidden: bool = False,
        guarded: bool = False,
        cast: str | None = None,
    ) -> FieldIR:
        self.check_identifier(name, loc, "field name", value=False)
        type_ir = self.lower_type(name, spec, loc)
        has_default = "default" in spec.model_fields_set
        default = spec.default
        if type_ir.kind in ("date", "datetime") and isinstance(default, datetime.date | datetime.datetime):
            default = default.isoformat()  # a TOML date: the JSON value is its ISO text
        if has_default and not _default_fits(default, type_ir, spec.nullable):
            allowed = (
                " (one of " + ", ".join(f'"{v}"' for v in type_ir.enum_values) + ")" if type_ir.kind == "enum" else ""
            )
            self.error(
                "FG114", f'default of "{name}" is not a valid {type_ir.kind}{allowed}', (*loc, "default"), value=True
            )
        return FieldIR(
            name=name,
            type=type_ir,
            description=spec.description,
            required=spec.required and not has_default,
            nullable=spec.nullable,
            has_default=has_default,
            default=default,
            hidden=hidden,
            guarded=guarded,
            cast=cast,
        )

    # --- models ---------------------------------------------------------------------------------
    def lower_model(self, name: str, model: ModelSpec) -> ModelIR:
        loc: Loc = ("models", name)
        self.check_identifier(name, loc, "model name", value=False)
        declared = model.fields
        self.check_names(name, model.hidden, declared, ("models", name, "hidden"), "FG120", "hidden")
        self.check_names(name, model.guarded, declared, ("models", name, "guarded"), "FG121", "guarded")
        for cast_field, target in model.casts.items():
            declared_type = declared[cast_field].type if cast_field in declared else None
            if declared_type in ("enum", "list") or declared_type in self.spec.models:
                kind = "a model" if declared_type in self.spec.models else f"an {declared_type}"
                self.error(
                    "FG125",
                    f'"{cast_field}" is {kind} field: only scalar fields can be cast',
                    (*loc, "casts", cast_field),
                    value=True,
                )
            if cast_field not in declared:
                self.unknown_field(
                    "FG123", "casts", name, cast_field, declared, (*loc, "casts", cast_field), value=False
                )
            if target not in CAST_KINDS:
                self.error(
                    "FG125",
                    f'cannot cast "{cast_field}" to "{target}"',
                    (*loc, "casts", cast_field),
                    value=True,
                    hint="cast targets: " + ", ".join(CAST_KINDS),
                )
        guarded = set(model.guarded)
        for operation, names in model.fillable.items():
            op_loc = (*loc, "fillable", operation)
            self.check_identifier(operation, op_loc, "operation name", value=False)
            self.check_names(name, names, declared, op_loc, "FG122", f"fillable.{operation}")
            for index, field_name in enumerate(names):
                if field_name in guarded:
                    self.error(
                        "FG124",
                        f'field "{field_name}" of model "{name}" is both guarded and fillable ("{operation}")',
                        (*op_loc, index),
                        hint="a guarded field can never be written; remove it from one of the lists",
                    )
        fields = tuple(
            self.lower_field(
                field_name,
                spec,
                ("models", name, "fields", field_name),
                hidden=field_name in model.hidden,
                guarded=field_name in guarded,
                cast=_cast(model.casts.get(field_name), spec.type),
            )
            for field_name, spec in declared.items()
        )
        return ModelIR(
            name=name,
            snake=snake_case(name),
            description=model.description,
            fields=fields,
            fillable=tuple((op, tuple(n for n in names if n in declared)) for op, names in model.fillable.items()),
        )

    def check_names(
        self, model: str, names: Iterable[str], declared: Mapping[str, FieldSpec], loc: Loc, code: str, what: str
    ) -> None:
        for index, field_name in enumerate(names):
            if field_name not in declared:
                self.unknown_field(code, what, model, field_name, declared, (*loc, index))

    def unknown_field(
        self, code: str, what: str, model: str, name: str, declared: Iterable[str], loc: Loc, *, value: bool = True
    ) -> None:
        close = difflib.get_close_matches(name, list(declared), n=1)
        self.error(
            code,
            f'{what} names "{name}", which is not a field of model "{model}"',
            loc,
            value=value,
            hint=f'did you mean "{close[0]}"?' if close else None,
        )

    # --- tools ----------------------------------------------------------------------------------
    def check_embed_cycles(self) -> None:
        """Embedded presenters must form a tree: a cycle would shape data forever."""
        graph = {
            name: [c for c in p.embed.values() if c in self.spec.presenters] for name, p in self.spec.presenters.items()
        }
        done: set[str] = set()  # fully explored: no cycle through them (each presenter is walked once)

        def visit(name: str, trail: list[str]) -> None:
            for child in graph[name]:
                if child in trail:
                    cycle = [*trail[trail.index(child) :], child]
                    self.error(
                        "FG154",
                        "embedded presenters form a cycle: " + " → ".join(cycle),
                        ("presenters", cycle[0], "embed"),
                    )
                elif child not in done:
                    visit(child, [*trail, child])
            done.add(name)

        for name in graph:
            if name not in done:
                visit(name, [name])

    def snake(self, name: str) -> str:
        return snake_case(name)


def _cast(target: str | None, declared_type: str) -> str | None:
    """The cast to compile: only valid targets, only on scalar fields (others are diagnostics)."""
    scalar = declared_type in SCALAR_KINDS and declared_type not in ("enum", "list")
    return target if target in CAST_KINDS and scalar else None


def _json_value(value: object) -> bool:
    """Whether a default can be written as JSON (and so as a Python literal): no dates, no nan or inf."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


def _default_fits(value: object, type_ir: TypeIR, nullable: bool) -> bool:
    if not _json_value(value):
        return False
    if value is None:
        return nullable
    kind = type_ir.kind
    if kind in ("date", "datetime", "uuid") and isinstance(value, str):
        parse = {"date": datetime.date.fromisoformat, "datetime": datetime.datetime.fromisoformat, "uuid": uuid.UUID}[
            kind
        ]
        try:
            parse(value)
        except ValueError:
            return False
        return len(value) == 10 if kind == "date" else (kind != "datetime" or "T" in value)
    if kind in ("string", "text"):
        return isinstance(value, str)
    if kind == "enum":
        return value in type_ir.enum_values
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list) and all(
            type_ir.items is not None and _default_fits(v, type_ir.items, False) for v in value
        )
    return isinstance(value, dict)
