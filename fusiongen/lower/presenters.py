"""Lower presenters: schemas, embeds, redaction paths and expressions, checked against each other.

Everything a presenter does at run time is decided here: redaction paths are expanded into concrete
paths of the schema (so masking is straight-line code), and every `{…}` and `when` is compiled to
Python by `fusiongen.expr`. A block, rule or suggestion that reaches the model may not read a hidden
or redacted field: that is a build error, not a leak found in production.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from fusiongen.ir import FieldIR, ModelIR, PresenterIR, RedactionPath, RuleIR, SuggestionIR, ToolIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import PresenterSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.expressions import PresenterExpressions
from fusiongen.lower.fields import lower_field
from fusiongen.lower.scope import PresenterScope
from fusiongen.names import exposed_tool_name, generated_tool_name, snake_case


def lower_presenters(ctx: LowerContext, models: tuple[ModelIR, ...]) -> tuple[tuple[PresenterIR, ...], PresenterScope]:
    """The spec's presenters, checked against each other (embeds, redactions reaching into children), and
    the scope of schemas they were checked in."""
    by_name = {m.name: m for m in models}
    schemas = {name: presenter_schema(ctx, by_name, name, p) for name, p in ctx.spec.presenters.items()}
    scope = PresenterScope(by_name, schemas, ctx.spec.presenters)
    check_embed_cycles(ctx)
    lowering = _PresenterLowering(ctx, scope)
    # A suggestion may name a spec tool or one fusiongen generates for a workflow (`<workflow>.start`, `.status`),
    # by its spec name; the model is shown its wire name ([server] tool_names).
    style, exposition = ctx.spec.server.tool_names, ctx.spec.server.exposition
    tools = {name: exposed_tool_name(name, style, exposition) for name in ctx.spec.tools}
    tools |= {
        f"{w}.{s}": generated_tool_name(w, s, style, exposition)
        for w in ctx.spec.workflows
        for s in ("start", "status")
    }
    presenters = tuple(lowering.lower(name, p, tools) for name, p in ctx.spec.presenters.items())
    check_parent_redactions(ctx, scope, {p.name: p for p in presenters})
    return presenters, scope


def with_implicit_presenters(
    ctx: LowerContext, presenters: tuple[PresenterIR, ...], models: tuple[ModelIR, ...], tools: tuple[ToolIR, ...]
) -> tuple[PresenterIR, ...]:
    """The spec's presenters plus one per model a tool returns directly (`returns = "Model"`)."""
    found = list(presenters)
    for tool in tools:
        for name in tool.presenters:
            if all(p.name != name for p in found):
                model = next((m for m in models if m.name == name), None)
                if model is not None:
                    found.append(implicit_presenter(model))
    by_snake: dict[str, str] = {}
    for presenter in found:  # implicit ones too: both become present_<snake> functions
        other = by_snake.setdefault(presenter.snake, presenter.name)
        if other != presenter.name and presenter.implicit:
            ctx.error(
                "FG143",
                f'presenter "{other}" and the presenter implied by model "{presenter.name}" map to the same '
                f'Python name "{presenter.snake}"',
                ("models", presenter.name),
                hint="rename one of them",
            )
    return tuple(found)


def implicit_presenter(model: ModelIR) -> PresenterIR:
    return PresenterIR(
        name=model.name,
        snake=model.snake,
        implicit=True,
        model=model.name,
        description=model.description,
        fields=model.visible_fields,
        description_rules=_description_rules(model.visible_fields),
    )


def presenter_schema(
    ctx: LowerContext, models: Mapping[str, ModelIR], name: str, presenter: PresenterSpec
) -> tuple[FieldIR, ...]:
    """What the presenter shows: an inline schema, or a model's visible fields (all, or those listed)."""
    loc: Loc = ("presenters", name)
    error = ctx.error
    if presenter.schema_ is not None:
        if presenter.model is not None or presenter.fields is not None:
            error(
                "FG152",
                f'presenter "{name}" has both an inline schema and model/fields',
                (*loc, "schema"),
                hint="use either model (and fields) or schema",
            )
        return tuple(
            lower_field(ctx, n, s, (*loc, "schema", n), output_only=True) for n, s in presenter.schema_.items()
        )
    if presenter.model is None:
        error("FG152", f'presenter "{name}" needs a model or an inline schema', loc)
        return ()
    model = models.get(presenter.model)
    if model is None and ctx.withdrawn("models", presenter.model):
        return ()
    if model is None:
        close = difflib.get_close_matches(presenter.model, list(models), n=1)
        error(
            "FG150",
            f'presenter "{name}" names unknown model "{presenter.model}"',
            (*loc, "model"),
            value=True,
            hint=f'did you mean "{close[0]}"?' if close else None,
        )
        return ()
    if presenter.fields is None:
        return model.visible_fields
    chosen: list[FieldIR] = []
    for index, field_name in enumerate(presenter.fields):
        field = model.field(field_name)
        if field is None or field.hidden:
            why = "is hidden: it never leaves the server" if field else f'is not a field of "{model.name}"'
            close = difflib.get_close_matches(field_name, [f.name for f in model.visible_fields], n=1)
            error(
                "FG151",
                f'presenter field "{field_name}" {why}',
                (*loc, "fields", index),
                value=True,
                hint=f'did you mean "{close[0]}"?' if close and not field else None,
            )
        else:
            chosen.append(field)
    return tuple(chosen)


class _PresenterLowering:
    """Lowers one presenter at a time within a fixed scope; remembers only what embedded presenters
    redact (several parents may embed the same child)."""

    def __init__(self, ctx: LowerContext, scope: PresenterScope) -> None:
        self.ctx = ctx
        self.scope = scope
        self._embedded_memo: dict[str, tuple[RedactionPath, ...]] = {}

    # --- presenters ------------------------------------------------------------------------------
    def lower(self, name: str, presenter: PresenterSpec, tools: dict[str, str]) -> PresenterIR:
        loc: Loc = ("presenters", name)
        self.ctx.check_identifier(name, loc, "presenter name", value=False)
        fields = self.scope.schemas.get(name, ())
        by_name = {f.name: f for f in fields}
        embeds = self.embeds(name, presenter, by_name)
        redactions = self.redactions(presenter, fields, dict(embeds), loc)
        if presenter.limit is not None and presenter.limit < 1:
            self.ctx.error("FG156", f"limit must be at least 1, not {presenter.limit}", (*loc, "limit"), value=True)
        context = PresenterExpressions(
            self.ctx, self.scope, fields, dict(embeds), self.effective_redactions(name, redactions), loc
        )
        context.sends_user_blocks = (presenter.user_blocks or self.ctx.spec.server.user_blocks) == "send"
        rules = [
            RuleIR(t)
            for i, text in enumerate(presenter.rules)
            if (t := context.template(text, (*loc, "rules", i), collection=False))
        ]
        for i, conditional in enumerate(presenter.rules_when):
            at = (*loc, "rules_when", i)
            when = context.condition(conditional.when, (*at, "when"), collection=False)
            text = context.template(conditional.rule, (*at, "rule"), collection=False)
            if when and text:
                rules.append(RuleIR(text, when))
        collection_rules = [
            RuleIR(t)
            for i, text in enumerate(presenter.collection_rules)
            if (t := context.template(text, (*loc, "collection_rules", i), collection=True, fields_allowed=False))
        ]
        suggestions = []
        for i, suggestion in enumerate(presenter.suggest):
            at = (*loc, "suggest", i)
            if suggestion.tool not in tools and not self.ctx.withdrawn("tools", suggestion.tool):
                close = difflib.get_close_matches(suggestion.tool, sorted(tools), n=1)
                self.ctx.error(
                    "FG159",
                    f'suggestion names unknown tool "{suggestion.tool}"',
                    (*at, "tool"),
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close else None,
                )
            reason = context.template(suggestion.reason, (*at, "reason"), collection=False)
            when = context.condition(suggestion.when, (*at, "when"), collection=False) if suggestion.when else None
            if reason:
                suggestions.append(SuggestionIR(tools.get(suggestion.tool, suggestion.tool), reason, when))
        return PresenterIR(
            name=name,
            snake=snake_case(name),
            implicit=False,
            model=presenter.model,
            description=model.description if (model := self.scope.models.get(presenter.model or "")) else None,
            fields=fields,
            embeds=embeds,
            description_rules=_description_rules(fields),
            rules=tuple(rules),
            collection_rules=tuple(collection_rules),
            redactions=redactions,
            censor=presenter.censor,
            limit=presenter.limit,
            ui=tuple(
                b for i, s in enumerate(presenter.ui) if (b := context.block(s, (*loc, "ui", i), collection=False))
            ),
            collection_ui=tuple(
                b
                for i, s in enumerate(presenter.collection_ui)
                if (b := context.block(s, (*loc, "collection_ui", i), collection=True))
            ),
            suggestions=tuple(suggestions),
            model_reads=tuple(context.reads),
            user_reads=tuple(context.item_user_reads),
            send_user_blocks=context.sends_user_blocks,
        )

    def embeds(self, name: str, presenter: PresenterSpec, by_name: dict[str, FieldIR]) -> tuple[tuple[str, str], ...]:
        found: list[tuple[str, str]] = []
        for field_name, child in presenter.embed.items():
            at: Loc = ("presenters", name, "embed", field_name)
            field = by_name.get(field_name)
            target = field.type.items if field and field.type.kind == "list" else (field.type if field else None)
            if field is None or target is None or target.kind != "model":
                self.ctx.error(
                    "FG153",
                    f'embed "{field_name}" must name a field of this presenter that holds a model or a list of models',
                    at,
                )
                continue
            if child not in self.scope.specs and self.ctx.withdrawn("presenters", child):
                continue
            if child not in self.scope.specs:
                close = difflib.get_close_matches(child, list(self.scope.specs), n=1)
                self.ctx.error(
                    "FG153",
                    f'embed "{field_name}" names unknown presenter "{child}"',
                    at,
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close else None,
                )
                continue
            child_spec = self.scope.specs[child]
            if child_spec.model is not None and child_spec.model != target.model:
                self.ctx.error(
                    "FG153",
                    f'presenter "{child}" shapes model "{child_spec.model}", but field '
                    f'"{field_name}" holds "{target.model}"',
                    at,
                    value=True,
                )
                continue
            # An inline schema (or one it embeds, or a model it types a field with) would read a hidden
            # field straight from the handler's data, at whatever depth the model hides it.
            leak = self.scope.hidden_leak(child, target.model or "")
            if leak is not None:
                path, owner = leak
                where = (
                    f'{self._named(target.model or "")}, which field "{field_name}" holds'
                    if len(path) == 1
                    else f'{self._named(owner)}, inside field "{field_name}" ({self._named(target.model or "")})'
                )
                self.ctx.error(
                    "FG153",
                    f'presenter "{child}" declares "{".".join(path)}", a hidden field of {where}',
                    at,
                    value=True,
                    hint="hidden fields never leave the server; remove it from the schema",
                )
                continue
            found.append((field_name, child))
        return tuple(found)

    # --- redaction -------------------------------------------------------------------------------
    def _named(self, model: str) -> str:
        """A model as a diagnostic names it: `model "Address"`, or `inline object "Invoice.address"`."""
        found = self.scope.models.get(model)
        origin = found.origin if found is not None else None
        return f'model "{model}"' if origin is None else f'inline object "{origin}"'

    def effective_redactions(
        self, name: str, own: tuple[RedactionPath, ...], visiting: frozenset[str] = frozenset()
    ) -> tuple[RedactionPath, ...]:
        """A presenter's paths plus those its embedded presenters mask, as paths of this presenter."""
        return tuple(dict.fromkeys([*own, *self.embedded_redactions(name, visiting)]))

    def embedded_redactions(self, name: str, visiting: frozenset[str]) -> tuple[RedactionPath, ...]:
        """What the presenters embedded in `name` mask, as paths of `name` (memoized: embeds may share)."""
        if name in self._embedded_memo:
            return self._embedded_memo[name]
        found: list[RedactionPath] = []
        spec = self.scope.specs[name]
        by_name = {f.name: f for f in self.scope.schemas.get(name, ())}
        for field_name, child in spec.embed.items():
            field = by_name.get(field_name)
            if field is None or child not in self.scope.specs or child in visiting:
                continue
            child_spec = self.scope.specs[child]
            child_fields = self.scope.schemas.get(child, ())
            child_own: list[RedactionPath] = []
            for path in child_spec.redact_pii:
                problem, paths = self.scope.expand(path, child_fields, dict(child_spec.embed))
                child_own.extend(paths if problem is None else [])
            prefix = (field_name, "[*]") if field.type.kind == "list" else (field_name,)
            for inner in self.effective_redactions(child, tuple(child_own), visiting | {name}):
                found.append((*prefix, *inner))
        result = tuple(dict.fromkeys(found))
        if not visiting:  # a result computed inside a cycle check may be partial: keep only whole ones
            self._embedded_memo[name] = result
        return result

    def redactions(
        self, presenter: PresenterSpec, fields: tuple[FieldIR, ...], embeds: dict[str, str], loc: Loc
    ) -> tuple[RedactionPath, ...]:
        concrete: list[RedactionPath] = []
        for index, path in enumerate(presenter.redact_pii):
            problem, paths = self.scope.expand(path, fields, embeds)
            if problem:
                self.ctx.error("FG155", f'redaction path "{path}": {problem}', (*loc, "redact_pii", index), value=True)
            concrete.extend(p for p in paths if p not in concrete)
        return tuple(concrete)


def _description_rules(fields: tuple[FieldIR, ...]) -> tuple[str, ...]:
    return tuple(f"{f.name}: {f.description}" for f in fields if f.description)


def check_parent_redactions(ctx: LowerContext, scope: PresenterScope, presenters: dict[str, PresenterIR]) -> None:
    """An embedded presenter's rules and blocks reach the model in its parent's result: they must not read
    what the parent redacts (the child alone cannot know; the parent's redact_pii entry is reported). Its
    user-only blocks may (that is what they are for), with FG161's warning, as for the parent's own blocks."""

    memo: dict[tuple[str, bool], list[tuple[str, ...]]] = {}

    def reads(name: str, for_user: bool, visiting: frozenset[str]) -> list[tuple[str, ...]]:
        presenter = presenters.get(name)
        if presenter is None or name in visiting:
            return []
        if (name, for_user) in memo:
            return memo[name, for_user]
        found = list(presenter.user_reads if for_user else presenter.model_reads)
        for field, child in presenter.embeds:
            found += [(field, *p) for p in reads(child, for_user, visiting | {name})]
        memo[name, for_user] = found = list(dict.fromkeys(found))
        return found

    for name, presenter in presenters.items():
        spec = scope.specs[name]
        for field, child in presenter.embeds:
            model_reads = [(field, *p) for p in reads(child, False, frozenset({name}))]
            user_reads = [(field, *p) for p in reads(child, True, frozenset({name}))]
            for index, text in enumerate(spec.redact_pii):
                _, own = scope.expand(text, presenter.fields, dict(presenter.embeds))
                for redacted in own:
                    plain = tuple(s for s in redacted if s != "[*]")
                    if plain[:1] != (field,):
                        continue
                    at: Loc = ("presenters", name, "redact_pii", index)
                    if (hit := _overlapping(model_reads, plain)) is not None:
                        ctx.error(
                            "FG158",
                            f'presenter "{child}" (embedded as "{field}") shows '
                            f'"{".".join(hit)}" to the model, which redact_pii "{text}" masks',
                            at,
                            value=True,
                            hint=f'redact it in "{child}" too, or show it only with audience = "user"',
                        )
                        break
                    if (hit := _overlapping(user_reads, plain)) is not None:
                        _warn_child_user_block(ctx, child, field, hit, text, at, presenters)
                        break


def _overlapping(reads: list[tuple[str, ...]], plain: tuple[str, ...]) -> tuple[str, ...] | None:
    return next((r for r in reads if r[: len(plain)] == plain or plain[: len(r)] == r), None)


def _warn_child_user_block(
    ctx: LowerContext,
    child: str,
    field: str,
    hit: tuple[str, ...],
    text: str,
    at: Loc,
    presenters: dict[str, PresenterIR],
) -> None:
    """FG161 for an embedded presenter's user-only block that shows what its parent redacts."""
    sends = presenters[child].send_user_blocks
    ctx.warning(
        "FG161",
        f'presenter "{child}" (embedded as "{field}") shows "{".".join(hit)}" in a user-only block, '
        f'which redact_pii "{text}" masks for the model',
        at,
        hint=(
            f'"{child}" sends user blocks (user_blocks = "send"): a client that ignores audience, such as '
            "langchain, hands the real value to the model"
            if sends
            else f'omitted while "{child}" has user_blocks = "omit"; with "send" (or --user-blocks send) a client '
            "that ignores audience hands the real value to the model"
        ),
    )


def check_embed_cycles(ctx: LowerContext) -> None:
    """Embedded presenters must form a tree: a cycle would shape data forever."""
    graph = {name: [c for c in p.embed.values() if c in ctx.spec.presenters] for name, p in ctx.spec.presenters.items()}
    done: set[str] = set()  # fully explored: no cycle through them (each presenter is walked once)

    def visit(name: str, trail: list[str]) -> None:
        for child in graph[name]:
            if child in trail:
                cycle = [*trail[trail.index(child) :], child]
                ctx.error(
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
