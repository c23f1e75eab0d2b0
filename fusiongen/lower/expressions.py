"""Compile one presenter's expressions and UI blocks, with positions inside the spec's strings.

Every `{…}` and `when` goes through `fusiongen.expr`; then the paths it reads are checked: a rule,
suggestion or model-facing block that reads a hidden or redacted field is a build error (FG158).
"""

from __future__ import annotations

from collections.abc import Callable

from fusiongen import expr
from fusiongen.diagnostics import Diagnostic
from fusiongen.ir import ExprIR, FieldIR, RedactionPath, UIBlockIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import UIBlockSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.scope import PresenterScope
from fusiongen.names import CODE_LANGUAGE

_EXPR_TYPES = {
    "string": expr.ExprType.STRING,
    "text": expr.ExprType.STRING,
    "date": expr.ExprType.STRING,
    "datetime": expr.ExprType.STRING,
    "uuid": expr.ExprType.STRING,
    "enum": expr.ExprType.STRING,
    "integer": expr.ExprType.INTEGER,
    "number": expr.ExprType.NUMBER,
    "boolean": expr.ExprType.BOOLEAN,
    "list": expr.ExprType.LIST,
    "model": expr.ExprType.OBJECT,
    "json": expr.ExprType.ANY,
    "map": expr.ExprType.OBJECT,  # whatever the handler returns, checked only to be plain JSON
}


# `ctx.*`: the caller, in every expression (also where fields are not: a collection's text). `ctx` is a name of
# the expression language, so a field named ctx is not readable in expressions.
CALLER = "ctx"
_CALLER_FIELDS = {
    "subject": expr.FieldInfo(expr.ExprType.STRING, nullable=True),
    "tenant": expr.FieldInfo(expr.ExprType.STRING, nullable=True),
    "roles": expr.FieldInfo(expr.ExprType.LIST, nullable=False, item=expr.ExprType.STRING),
    "scopes": expr.FieldInfo(expr.ExprType.LIST, nullable=False, item=expr.ExprType.STRING),
}


def _caller_field(path: tuple[str, ...]) -> expr.FieldInfo | None:
    """What `ctx`, `ctx.subject`, ... hold: None (unknown) for anything else under ctx."""
    if len(path) == 1:
        return expr.FieldInfo(expr.ExprType.OBJECT, nullable=False)
    return _CALLER_FIELDS.get(path[1]) if len(path) == 2 else None


def _access(path: tuple[str, ...]) -> str:
    """How generated code reads a path of shaped data (a dict built by the shape function), or of the caller."""
    if path[0] == CALLER:
        return f"caller_value({(path[1] if len(path) > 1 else '*')!r})"  # from _runtime (via _identity)
    return f"data.get({path[0]!r})" if len(path) == 1 else f"_x_get(data, {path!r})"


class PresenterExpressions:
    """Compiles one presenter's expressions, with positions inside the spec's strings."""

    def __init__(
        self,
        ctx: LowerContext,
        scope: PresenterScope,
        fields: tuple[FieldIR, ...],
        embeds: dict[str, str],
        redactions: tuple[RedactionPath, ...],
        loc: Loc,
    ) -> None:
        self.ctx = ctx
        self.scope = scope
        self.fields = fields
        self.embeds = embeds
        self.redactions = redactions
        self.reads: list[tuple[str, ...]] = []  # what model-facing expressions read (checked against parents)
        self.user_reads: list[tuple[str, ...]] = []  # what the user-only block being compiled reads
        self.item_user_reads: list[tuple[str, ...]] = []  # what all its user-only item blocks read (for parents)
        self.sends_user_blocks = False  # its effective user_blocks setting, for FG161's hint
        model = scope.models.get(scope.specs[str(loc[1])].model or "") if len(loc) > 1 else None
        self.top_hidden = {f.name: f for f in model.fields if f.hidden} if model else {}

    def resolve(self, path: tuple[str, ...]) -> expr.FieldInfo | None:
        level, embeds, nullable = self.fields, self.embeds, False
        hidden = self.top_hidden
        for depth, name in enumerate(path):
            field = next((f for f in level if f.name == name), None) or hidden.get(name)
            if field is None:
                return None
            hidden = {f.name: f for f in self.scope.hidden_fields(field)}
            nullable = nullable or not field.required or field.nullable
            if depth == len(path) - 1:
                kind = field.cast or field.type.kind
                item = _EXPR_TYPES.get(field.type.items.kind) if field.type.items else None
                values = field.type.enum_values if kind == "enum" else ()
                return expr.FieldInfo(_EXPR_TYPES[kind], nullable, item, values)
            if field.type.kind != "model":
                return None
            inner = self.scope.children(field, embeds.get(name))
            if inner is None:
                return None
            embeds = dict(self.scope.specs[embeds[name]].embed) if name in embeds else {}
            level = inner
        return None

    def hidden_reason(self, path: tuple[str, ...]) -> str | None:
        """Why reading `path` would leak, if it would: it is hidden, or overlaps a redacted path."""
        if path and path[0] in self.top_hidden:
            return f'"{".".join(path)}" is hidden'
        level: tuple[FieldIR, ...] = self.fields
        embeds = self.embeds
        for depth, name in enumerate(path):
            field = next((f for f in level if f.name == name), None)
            if field is None:
                break
            if depth + 1 < len(path) and path[depth + 1] in self.scope.hidden_names(field):
                return f'"{".".join(path)}" is hidden'
            inner = self.scope.children(field, embeds.get(name))
            if inner is None:
                break
            level = inner
        written = self.redaction_of(path)
        return f'"{".".join(path)}" is redacted (redact_pii "{written}")' if written is not None else None

    def redaction_of(self, path: tuple[str, ...]) -> str | None:
        """The redaction path (as written) that overlaps `path`, if one does: this presenter's or an embed's."""
        for redacted in self.redactions:
            plain = tuple(s for s in redacted if s != "[*]")
            if plain[: len(path)] == path or path[: len(plain)] == plain:
                return "".join(s if s == "[*]" else f".{s}" for s in redacted).lstrip(".")
        return None

    def _compile(
        self, kind: str, text: str, loc: Loc, *, collection: bool, for_user: bool = False, fields_allowed: bool = True
    ) -> ExprIR | None:
        def resolve(path: tuple[str, ...]) -> expr.FieldInfo | None:
            if path[0] == CALLER:
                return _caller_field(path)
            return self.resolve(path) if fields_allowed else None

        compile_fn: Callable[..., expr.Compiled | list[expr.ExprError]] = {
            "template": expr.compile_template,
            "condition": expr.compile_condition,
        }[kind]
        result = compile_fn(text, resolve, access=_access, collection=collection)
        if isinstance(result, list):
            loaded = self.ctx.loaded
            for error in result:
                position = loaded.string_char_at(loc, error.start)
                self.ctx.diagnostics.append(Diagnostic("FG157", error.message, loaded.file_at(*loc), position))
            return None
        paths = tuple(p for p in result.paths if p[0] != CALLER)  # the caller is not data: nothing to hide
        if not for_user:
            self.reads.extend(p for p in paths if p not in self.reads)
        else:
            self.user_reads.extend(p for p in paths if p not in self.user_reads)
        for path in paths:
            reason = self.hidden_reason(path)
            if reason is None:
                continue
            if reason.endswith("is hidden"):  # hidden never leaves the server, not even for the user
                self.ctx.error("FG158", f"{reason}: hidden fields never leave the server", loc, value=True)
                return None
            if not for_user:
                self.ctx.error(
                    "FG158",
                    f"{reason}: it cannot be shown to the model",
                    loc,
                    value=True,
                    hint='show it in a UI block with audience = "user", or read another field',
                )
                return None
        return ExprIR(text, result.python, paths, result.helpers)

    def template(
        self, text: str, loc: Loc, *, collection: bool, for_user: bool = False, fields_allowed: bool = True
    ) -> ExprIR | None:
        return self._compile(
            "template", text, loc, collection=collection, for_user=for_user, fields_allowed=fields_allowed
        )

    def condition(self, text: str, loc: Loc, *, collection: bool) -> ExprIR | None:
        return self._compile("condition", text, loc, collection=collection)

    def block(self, spec: UIBlockSpec, loc: Loc, *, collection: bool) -> UIBlockIR | None:
        self.user_reads = []
        compiled = self._block(spec, loc, collection=collection)
        if compiled is not None and compiled.for_user:
            self.warn_user_block_redactions(spec, loc, compiled)
            if not collection:  # an embedded presenter renders its item blocks inside its parent's result
                reads = [*self.user_reads, *([compiled.path] if compiled.type == "json" else [])]
                self.item_user_reads.extend(p for p in reads if p not in self.item_user_reads)
        return compiled

    def warn_user_block_redactions(self, spec: UIBlockSpec, loc: Loc, block: UIBlockIR) -> None:
        """FG161: a user-only block that shows a redacted value. Allowed (that is what such blocks are for),
        but audience is only a hint: a client that ignores it hands the real value to the model."""
        reads = [*self.user_reads, *([block.path] if block.type == "json" else [])]
        shown: dict[str, str] = {}  # what the block reads -> what masks it for the model
        for path in reads:
            if not path:  # a json block of the whole result
                if self.redactions:
                    shown.setdefault("the whole result", "which holds fields redact_pii masks for the model")
            elif (written := self.redaction_of(path)) is not None:
                shown.setdefault(f'"{".".join(path)}"', f'which redact_pii "{written}" masks for the model')
        where = f"{loc[-2]}[{loc[-1]}]"
        now = (
            'this presenter sends user blocks (user_blocks = "send"): a client that ignores audience, '
            "such as langchain, hands the real value to the model"
            if self.sends_user_blocks
            else 'omitted while user_blocks = "omit"; with "send" (or --user-blocks send) a client that '
            "ignores audience hands the real value to the model"
        )
        for what, masked_by in shown.items():
            self.ctx.warning(
                "FG161",
                f"the user-only {spec.type} block {where} shows {what}, {masked_by}",
                loc,
                hint=now,
            )

    def _block(self, spec: UIBlockSpec, loc: Loc, *, collection: bool) -> UIBlockIR | None:
        user = spec.audience == "user"
        allowed = {
            "table": {"columns", "rows"} if not collection else {"columns", "row"},
            "list": {"items"} if not collection else {"item"},
            "json": {"path"},
            "code": {"text", "language"},
        }.get(spec.type, {"text"})
        given = {
            k
            for k in ("columns", "rows", "row", "text", "items", "item", "path", "language")
            if getattr(spec, k) is not None
        }
        for key in sorted(given - allowed):
            self.ctx.error(
                "FG160",
                f'a {spec.type} block{" of collection_ui" if collection else ""} has no "{key}"',
                (*loc, key),
                hint="its keys: " + ", ".join(sorted(allowed)),
            )
        for key in sorted(allowed - given - {"language", "path"}):
            self.ctx.error("FG160", f'a {spec.type} block needs "{key}"', loc)
        if given - allowed or allowed - given - {"language", "path"}:
            return None
        when = (
            self._compile(
                "condition",
                spec.when,
                (*loc, "when"),
                collection=collection,
                for_user=user,
                fields_allowed=not collection,
            )
            if spec.when
            else None
        )

        def tpl(text: str, at: Loc, per_item: bool = True) -> ExprIR | None:
            # In a collection block, row and item templates see one item; other text sees only count().
            return self.template(
                text, at, collection=collection, for_user=user, fields_allowed=per_item or not collection
            )

        columns = tuple(spec.columns or ())
        rows: list[tuple[ExprIR, ...]] = []
        all_rows = spec.rows or ([spec.row] if spec.row is not None else [])
        bad = False
        for r, row in enumerate(all_rows):
            if len(row) != len(columns):
                cells = f"{len(row)} cell" + ("" if len(row) == 1 else "s")
                self.ctx.error(
                    "FG160",
                    f"a table row has {cells} for {len(columns)} columns",
                    (*loc, "rows", r) if spec.rows is not None else (*loc, "row"),
                )
                bad = True
        if bad:
            return None
        for r, row in enumerate(all_rows):
            at = (*loc, "rows", r) if spec.rows is not None else (*loc, "row")
            compiled = [tpl(cell, (*at, c)) for c, cell in enumerate(row)]
            if any(c is None for c in compiled):
                return None
            rows.append(tuple(c for c in compiled if c is not None))
        text = tpl(spec.text, (*loc, "text"), per_item=False) if spec.text is not None else None
        entries = [tpl(t, (*loc, "items", i)) for i, t in enumerate(spec.items or [])]
        if spec.item is not None:
            entries.append(tpl(spec.item, (*loc, "item")))
        path: tuple[str, ...] = ()
        if spec.path:
            path = tuple(spec.path.split("."))
            if self.resolve(path) is None:
                self.ctx.error("FG160", f'json block path "{spec.path}" is not a field', (*loc, "path"), value=True)
                return None
        if spec.type == "json" and not user:
            self.reads.append(path)  # () reads the whole result: any parent redaction under it is shown
            reason = (
                self.hidden_reason(path)
                if path
                else ("the whole result holds redacted fields" if self.redactions else None)
            )
            if reason:
                self.ctx.error(
                    "FG158",
                    f"{reason}: a json block cannot show it to the model",
                    (*loc, "path") if path else loc,
                    hint='mark the block audience = "user"',
                )
                return None
        if spec.language is not None and not CODE_LANGUAGE.match(spec.language):
            # It opens the fence (```language): a line break or a backtick there would end the block early.
            self.ctx.error(
                "FG160",
                f'code block language "{spec.language}" is not a language name',
                (*loc, "language"),
                value=True,
                hint='one line of at most 100 characters without backticks, such as "python" or "{r}"',
            )
            return None
        if (spec.text is not None and text is None) or any(e is None for e in entries):
            return None
        return UIBlockIR(
            spec.type, user, when, columns, tuple(rows), text, tuple(e for e in entries if e), path, spec.language or ""
        )
