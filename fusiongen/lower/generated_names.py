"""Every module-level name a spec makes fusiongen generate, checked for collisions before anything renders.

Generated modules are flat namespaces: a function, constant or class derived from one spec entity must
not be defined again for another (the later definition silently replaces the earlier one, so a tool
would present or validate with the wrong code), nor be a name the module imports: templates import
every name a runtime module exports (`names.runtime_exports`), the modules they share (`shapes`,
`types`) and a few typing names. Each name is predicted from the IR the way `codegen/` derives it;
`tests/test_security_generator.py` checks the prediction against the golden trees' real definitions.

Names are checked whether or not the spec currently needs the definition (a presenter's
`present_<name>_many` exists for the rule even before a tool returns a list of it), so a spec's
validity does not change when a tool starts returning a presenter it already declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fusiongen.ir import ModelIR, PresenterIR, ToolIR, WorkflowIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import Spec
from fusiongen.lower.context import LowerContext
from fusiongen.names import pascal_case, runtime_exports

# What each generated module imports or defines whatever the spec says (see codegen/templates/).
_TYPING = frozenset({"annotations", "Any", "Final", "Mapping", "dataclass", "field", "datetime", "uuid"})


def fixed_names(module: str, *, workflows: bool) -> frozenset[str]:
    """The names `module` imports or defines whatever the spec says (see codegen/templates/)."""
    runtime = runtime_exports("_runtime") | runtime_exports("_values") | runtime_exports("_expressions")
    return {
        "inputs": _TYPING | runtime | {"TYPE_CHECKING", "ARGUMENT_CLASSES"},
        "presenters": _TYPING | runtime | {"types", "shapes"},
        "schemas": _TYPING
        | ({"WORKFLOW_STATUS_INPUT", "WORKFLOW_STATE_OUTPUT", "WORKFLOW_RESOLVE_INPUT"} if workflows else set()),
        "shapes": _TYPING | runtime,
        "workflows": _TYPING | runtime_exports("_gate") | {"HANDLE_KEY", "MACHINES", "BINDINGS"},
        # The handler module fusiongen scaffolds imports these (and the input classes, checked separately).
        "handlers": frozenset({"annotations", "TYPE_CHECKING", "Any"}),
    }[module]


@dataclass
class _Owner:
    label: str
    loc: Loc


@dataclass
class _Names:
    ctx: LowerContext
    workflows: bool
    taken: dict[tuple[str, str], _Owner] = field(default_factory=dict)
    reported: set[tuple[str, str]] = field(default_factory=set)

    def add(self, module: str, name: str, owner: _Owner) -> None:
        where = "the handler module" if module == "handlers" else f"{module}.py"
        if name in fixed_names(module, workflows=self.workflows):
            if (owner.label, name) not in self.reported:
                self.reported.add((owner.label, name))
                self.ctx.error(
                    "FG143",
                    f'{owner.label} generates "{name}" in {where}, a name that module already imports or defines',
                    owner.loc,
                    hint="rename it",
                )
            return
        first = self.taken.setdefault((module, name), owner)
        if first.label != owner.label and (first.label, owner.label) not in self.reported:
            self.reported.add((first.label, owner.label))
            self.ctx.error(
                "FG143",
                f'{first.label} and {owner.label} both generate "{name}" in {where}',
                owner.loc,
                hint="rename one of them",
            )


def check_generated_names(
    ctx: LowerContext,
    models: tuple[ModelIR, ...],
    presenters: tuple[PresenterIR, ...],
    tools: tuple[ToolIR, ...],
    workflows: tuple[WorkflowIR, ...],
) -> None:
    """FG143 for every generated name two spec entities share, or that a generated module imports."""
    names = _Names(ctx, bool(workflows))
    spec: Spec = ctx.spec
    # Two entities of one kind with the same Python name are reported by `tools.check_collisions` and
    # `presenters.with_implicit_presenters` already: only the first of them takes part here.
    seen: set[tuple[str, str]] = set()

    def first(kind: str, base: str) -> bool:
        if (kind, base) in seen:
            return False
        seen.add((kind, base))
        return True

    input_classes = {f"{pascal_case(t.ident)}Input": t for t in tools}
    for tool in tools:
        if not first("tool", tool.ident):
            continue
        table = "resources" if tool.resource else "tools"  # a resource's read is lowered to a hidden tool
        owner = _Owner(tool.label, (table, tool.name))
        upper = tool.ident.upper()
        for name in (f"{pascal_case(tool.ident)}Input", f"parse_{tool.ident}", f"_{upper}_KEYS"):
            names.add("inputs", name, owner)
        names.add("inputs", f"_{upper}_GUARDED_INPUTS", owner)
        names.add("schemas", f"{upper}_INPUT", owner)
        if tool.invalidates and tool.returns is not None:  # its envelope has `stale` (§6.9): a schema of its own
            names.add("schemas", f"{upper}_OUTPUT", owner)
        elif len(tool.presenters) > 1:  # returns_for_role: the union of its audiences is the tool's own schema
            names.add("schemas", f"{upper}_BY_ROLE_OUTPUT", owner)
        declared = spec.resources[tool.name] if tool.resource else spec.tools[tool.name]
        explicit = declared.handler is not None
        handler_owner = _Owner(owner.label, (table, tool.name, "handler") if explicit else owner.loc)
        if tool.handler in fixed_names("handlers", workflows=False):
            names.add("handlers", tool.handler, handler_owner)
        elif tool.handler in input_classes:  # handler names among themselves: FG142
            ctx.error(
                "FG143",
                f'{owner.label} uses handler "{tool.handler}", the name of the input class of tool '
                f'"{input_classes[tool.handler].name}", which the handler module imports',
                handler_owner.loc,
                hint="rename the handler",
            )
    for model in models:
        if not first("model", model.snake):
            continue
        label = (
            f'model "{model.name}"'
            if model.origin is None
            else f'inline object "{model.origin}" (model "{model.name}")'
        )
        owner = _Owner(label, ctx.model_loc(model.name))
        upper = model.snake.upper()
        for name in (f"parse_{model.snake}_fields", f"_{upper}_FIELDS", f"_{upper}_GUARDED"):
            names.add("inputs", name, owner)
        names.add("shapes", f"shape_{model.snake}", owner)
        names.add("shapes", f"shape_list_of_{model.snake}", owner)  # its list shape (when it has the exact shortcut)
        names.add("schemas", f"{upper}_INPUT_DEFINITION", owner)
        names.add("schemas", f"{upper}_OUTPUT_DEFINITION", owner)
    for presenter in presenters:
        if not first("presenter", presenter.snake):
            continue
        label = (
            f'the presenter implied by model "{presenter.name}"'
            if presenter.implicit
            else f'presenter "{presenter.name}"'
        )
        owner = _Owner(label, ("models" if presenter.implicit else "presenters", presenter.name))
        snake, upper = presenter.snake, presenter.snake.upper()
        functions = [f"item_notes_{snake}", f"ui_{snake}", f"mask_{snake}", f"present_{snake}", f"present_{snake}_many"]
        if not presenter.implicit:
            functions.append(f"shape_{snake}")
            # A list field's items redacted as they are shaped (view_presenters.redacting_lists).
            functions += [f"_shape_{snake}_{f.name}" for f in presenter.fields if f.type.kind == "list"]
        constants = [f"_{upper}_DESCRIPTION_RULES", f"_{upper}_CENSOR"]
        constants += [f"_{upper}_COLUMNS_{i}" for i, block in enumerate(presenter.ui) if block.type == "table"]
        many_ui = presenter.collection_ui
        constants += [f"_{upper}_COLLECTION_COLUMNS_{i}" for i, block in enumerate(many_ui) if block.type == "table"]
        for name in (*functions, *constants):
            names.add("presenters", name, owner)
        names.add("schemas", f"{upper}_RESULT_OUTPUT", owner)
        names.add("schemas", f"{upper}_COLLECTION_OUTPUT", owner)
    for workflow in workflows:
        if first("workflow", workflow.ident):
            owner = _Owner(f'workflow "{workflow.name}"', ("workflows", workflow.name))
            names.add("workflows", f"{workflow.ident.upper()}_MACHINE", owner)
