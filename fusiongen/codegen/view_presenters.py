"""Prepare presenters for `presenters.py.j2`: shape fields, notes, UI blocks and straight-line masks.

Redaction paths were made concrete when lowering; here they become nested `if`/`for` code over the
dicts and lists the shape functions just built (ours, so they are masked in place: no copies). Any
node that is not the container its path expects stops the call: masking fails closed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fusiongen.codegen.view_shapes import ExactFieldView, OutputFieldView, ShapeViews, exact_fields
from fusiongen.ir import ExprIR, FieldIR, PresenterIR, RedactionPath, ServerIR, UIBlockIR
from fusiongen.pyliteral import docstring_text, py_literal, py_string


@dataclass(frozen=True)
class BlockView:
    when: str | None  # its `when`, and for a user-only block whether this server sends its presenter's
    type_literal: str
    text: str  # a Python expression producing the block's text
    for_user: bool


@dataclass(frozen=True)
class ChildView:
    key: str
    is_list: bool
    function: str
    takes_user: bool = False  # its UI function takes the set of presenters whose user-only blocks are sent


@dataclass(frozen=True)
class RedactingListView:
    """A list field whose items are redacted as they are shaped, instead of by the mask after notes and UI:
    `function` shapes the list as `item_shape` would and writes the censor into the `censored` fields."""

    function: str
    field: str
    paths: str  # the redaction paths it applies, as written (for its docstring)
    item_shape: str
    exact: tuple[ExactFieldView, ...]
    censored: frozenset[str]  # the redacted fields' names as Python string literals


@dataclass(frozen=True)
class PresenterView:
    name: str
    snake: str
    shape_function: str  # `shape_x` here, or `shapes.shape_x` for implicit presenters
    own_shape: bool
    description: str
    fields: tuple[OutputFieldView, ...]
    description_rules_constant: str | None
    rules: tuple[tuple[str | None, str], ...]  # (condition or None, rule expression)
    suggestions: tuple[tuple[str | None, str, str], ...]  # (condition, tool literal, reason expression)
    blocks: tuple[BlockView, ...]
    collection_rules: tuple[str, ...]
    collection_blocks: tuple[BlockView, ...]
    note_children: tuple[ChildView, ...]  # embedded presenters that have item notes
    ui_children: tuple[ChildView, ...]
    mask_children: tuple[ChildView, ...]
    has_item_notes: bool
    has_ui: bool
    takes_user: bool  # its UI function (and present_x) takes `user`: it or an embed has user-only blocks
    many_takes_user: bool  # present_x_many takes `user`: a collection_ui block is user-only
    has_mask: bool
    mask_lines: tuple[str, ...]
    censor_constant: str
    censor_literal: str
    limit: int | None
    single: bool  # a tool returns one item of it
    many: bool  # a tool returns a collection of it
    needed_as_child: bool
    uses_expressions: bool  # calls a helper of _expressions.py
    # Every rule and suggestion one item (and its embeds) can add is spec text: present_x passes
    # fixed_guidance=True, and the runtime builds their blocks once. `many_fixed_guidance`: the same for a
    # collection, whose collection_rules count too.
    fixed_guidance: bool = False
    many_fixed_guidance: bool = False
    redacting_lists: tuple[RedactingListView, ...] = ()


class _Trie:
    def __init__(self) -> None:
        self.leaf = False
        self.children: dict[str, _Trie] = {}
        self.child_mask: tuple[str, bool] | None = None  # (function, is_list) of an embedded presenter

    def add(self, path: RedactionPath) -> None:
        node = self
        for segment in path:
            node = node.children.setdefault(segment, _Trie())
        node.leaf = True


def _mask_lines(trie: _Trie, censor: str) -> list[str]:
    lines: list[str] = []
    counter = iter(range(1, 1000))

    def dict_body(node: _Trie, var: str, where: str, indent: str) -> None:
        for key, child in node.children.items():
            literal = py_string(key)
            path = f"{where}.{key}" if where else key
            if child.leaf:
                lines.append(f"{indent}if {var}.get({literal}) is not None:")
                lines.append(f"{indent}    {var}[{literal}] = {censor}")
                continue
            name = f"node_{next(counter)}"
            lines.append(f"{indent}{name} = {var}.get({literal})")
            lines.append(f"{indent}if {name} is not None:")
            value_body(child, name, path, indent + "    ")

    def value_body(node: _Trie, var: str, where: str, indent: str) -> None:
        star = node.children.get("[*]")
        mask = node.child_mask
        if star is not None and star.leaf:  # every item of a list replaced
            lines.append(
                f"{indent}{var}[:] = [None if v is None else {censor} for v in expect_list({var}, {py_string(where)})]"
            )
            return
        if star is not None or (mask is not None and mask[1]):  # a list: its items, then paths inside them
            item = f"item_{next(counter)}"
            lines.append(f"{indent}for {item} in expect_list({var}, {py_string(where)}):")
            if mask is not None:  # each item is shaped by an embedded presenter, which masks its own paths
                lines.append(f"{indent}    {mask[0]}(expect_dict({item}, {py_string(where + '[*]')}))")
            if star is not None:
                value_body(star, item, where + "[*]", indent + "    ")
            return
        lines.append(f"{indent}if type({var}) is not dict:")
        lines.append(f"{indent}    raise MaskError({py_string(where)})")
        if mask is not None:  # the embedded presenter's own paths first; then this presenter's paths into it
            lines.append(f"{indent}{mask[0]}({var})")
        dict_body(node, var, where, indent)

    dict_body(trie, "data", "", "    ")
    return lines


def _reads(presenter: PresenterIR) -> set[tuple[str, ...]]:
    """Every path an expression or a json block of the presenter reads (`()`: the whole item)."""
    reads = {path for expression in presenter.expressions() for path in expression.paths}
    return reads | {block.path for block in (*presenter.ui, *presenter.collection_ui) if block.type == "json"}


def redacting_lists(
    server: ServerIR, shaping: ShapeViews, presenter: PresenterIR, is_child: bool
) -> dict[str, RedactingListView]:
    """The list fields of a presenter whose redaction can happen while their items are shaped, by field name.

    The mask runs after notes and UI because a user-only block may show a redacted value. A list field is
    redacted as it is shaped only when nothing could read it before the mask: no expression or json block of
    the presenter reads it or the whole item, the presenter is no embedded child (whose parent's blocks read
    its data), and the field is neither embedded nor masked by more than `field[*].leaf` paths. Its items are
    a model with the exact shortcut, the usual case being the one worth the inline code. A wrong "yes" here
    could only redact a value a block reads earlier than the mask would, never send one the mask redacts."""
    if presenter.implicit or is_child:
        return {}
    reads = _reads(presenter)
    if () in reads:
        return {}
    leaves: dict[str, list[str]] = {}
    others: set[str] = set()
    for path in presenter.redactions:
        if len(path) == 3 and path[1] == "[*]":
            leaves.setdefault(path[0], []).append(path[2])
        else:
            others.add(path[0])
    found = {}
    embedded = dict(presenter.embeds)
    for field in presenter.fields:
        names = leaves.get(field.name)
        item_model = _exact_item_model(server, field)
        if not names or field.name in others or field.name in embedded or item_model is None:
            continue
        exact = exact_fields(server.model(item_model))
        censored = frozenset(py_string(name) for name in names)
        if any(read[:1] == (field.name,) for read in reads) or not censored <= {f.key for f in exact}:
            continue
        found[field.name] = RedactingListView(
            function=f"_shape_{presenter.snake}_{field.name}",
            field=field.name,
            paths=", ".join(f"{field.name}[*].{name}" for name in names),
            item_shape=shaping.want_shape_ref(item_model),
            exact=exact,
            censored=censored,
        )
    return found


def _exact_item_model(server: ServerIR, field: FieldIR) -> str | None:
    """The model of a list field's items when that model has the exact shortcut, else None."""
    items = field.type.items if field.type.kind == "list" and field.cast is None else None
    if items is None or items.kind != "model" or items.model is None:
        return None
    return items.model if exact_fields(server.model(items.model)) else None


def _redacting_field(field: FieldIR, view: RedactingListView) -> OutputFieldView:
    key = py_string(field.name)
    convert = f'{view.function}(items_of(value, at, {key}), at + ".{field.name}")'
    return OutputFieldView(key=key, required=field.required, nullable=field.nullable, convert=convert)


def user_blocks_in(server: ServerIR, presenter: PresenterIR, collection: bool) -> bool:
    """Whether presenting one item (or a collection) of `presenter` can add a user-only block: then its
    functions take `user`, the presenters whose user-only blocks this server sends (chosen at start-up)."""
    if collection:
        return any(b.for_user for b in presenter.collection_ui)
    return any(b.for_user for b in presenter.ui) or any(
        user_blocks_in(server, server.presenter(child), False) for _, child in presenter.embeds
    )


def _block(block: UIBlockIR, collection: bool, constants: dict[str, str], owner: PresenterIR, index: int) -> BlockView:
    if block.type == "table":
        columns = f"_{owner.snake.upper()}_{'COLLECTION_' if collection else ''}COLUMNS_{index}"
        constants[columns] = py_literal(block.columns)
        cells = ["(" + ", ".join(c.python for c in row) + ("," if len(row) == 1 else "") + ")" for row in block.rows]
        rows = f"[{cells[0]} for data in items]" if collection else "[" + ", ".join(cells) + "]"
        text = f"table_text({columns}, {rows})"
    elif block.type == "list":
        entries = (
            f"[{block.items[0].python} for data in items]"
            if collection
            else "[" + ", ".join(e.python for e in block.items) + "]"
        )
        text = f"list_text({entries})"
    elif block.type == "json":
        value = _read(block.path) if block.path else "data"
        text = (
            f"json_text([{value} for data in items])"
            if collection and block.path
            else ("json_text(items)" if collection else f"json_text({value})")
        )
    else:
        assert block.text is not None
        # Built by concatenation: the language is user text and never part of a format string.
        python = block.text.python
        if block.type == "mermaid":
            text = f'fenced("mermaid", {python})'
        elif block.type == "code":
            text = f"fenced({py_string(block.language)}, {python})"
        elif block.type == "summary":
            text = f"summary_text({python})"
        else:
            text = python
    when = block.when.python if block.when else None
    if block.for_user:  # an omitted block is not even computed
        sent = f"{py_string(owner.name)} in user"
        when = f"{sent} and ({when})" if when else sent
    return BlockView(when, py_string(block.type), text, block.for_user)


def _read(path: tuple[str, ...]) -> str:
    return f"data.get({py_string(path[0])})" if len(path) == 1 else f"_x_get(data, {py_literal(path)})"


def _spec_text(template: ExprIR) -> bool:
    """Whether a template compiled to a plain string literal: it reads nothing, so it is the same every call."""
    try:
        return isinstance(ast.literal_eval(template.python), str)
    except (ValueError, SyntaxError):
        return False


def fixed_guidance(server: ServerIR, presenter: PresenterIR) -> bool:
    """Whether every rule and suggestion an item of `presenter` can add (its own, its embedded presenters') is
    spec text. Description rules always are; `when` only chooses among them."""
    return (
        all(_spec_text(r.text) for r in presenter.rules)
        and all(_spec_text(s.reason) for s in presenter.suggestions)
        and all(fixed_guidance(server, server.presenter(child)) for _, child in presenter.embeds)
    )


def _expr(value: ExprIR | None) -> str | None:
    return value.python if value is not None else None


def build_presenters(server: ServerIR, shaping: ShapeViews, constants: dict[str, str]) -> tuple[PresenterView, ...]:
    used_single = {p for t in server.handled if t.returns and not t.returns.collection for p in t.presenters}
    used_many = {p for t in server.tools if t.returns and t.returns.collection for p in t.presenters}
    children = {child for p in server.presenters for _, child in p.embeds}
    wanted = [p for p in server.presenters if p.name in used_single | used_many | children]
    flags: dict[str, dict[str, bool]] = {}

    def flag(p: PresenterIR) -> dict[str, bool]:
        if p.name not in flags:
            kids = [flag(server.presenter(c)) for _, c in p.embeds]
            flags[p.name] = {
                "notes": bool(p.description_rules or p.rules or p.suggestions) or any(k["notes"] for k in kids),
                "ui": bool(p.ui) or any(k["ui"] for k in kids),
                "mask": bool(p.redactions) or any(k["mask"] for k in kids),
            }
        return flags[p.name]

    views = []
    for presenter in wanted:
        snake = presenter.snake
        own = not presenter.implicit
        embeds = dict(presenter.embeds)
        redacting = redacting_lists(server, shaping, presenter, presenter.name in children)
        fields = (
            tuple(
                _redacting_field(f, redacting[f.name]) if f.name in redacting else shaping.output_field(f, embeds)
                for f in presenter.fields
            )
            if own
            else ()
        )
        description_constant = None
        if presenter.description_rules:
            description_constant = f"_{snake.upper()}_DESCRIPTION_RULES"
            constants[description_constant] = py_literal(presenter.description_rules)

        def kids(kind: str, prefix: str, p: PresenterIR = presenter) -> tuple[ChildView, ...]:
            found = []
            for field_name, child in p.embeds:
                if flag(server.presenter(child))[kind]:
                    field = next(f for f in p.fields if f.name == field_name)
                    found.append(
                        ChildView(
                            py_string(field_name),
                            field.type.kind == "list",
                            f"{prefix}_{server.presenter(child).snake}",
                            kind == "ui" and user_blocks_in(server, server.presenter(child), False),
                        )
                    )
            return tuple(found)

        trie = _Trie()
        for path in presenter.redactions:
            if path[0] not in redacting:  # redacted as shaped
                trie.add(path)
        for child in kids("mask", "mask"):
            node = trie.children.setdefault(child.key[1:-1], _Trie())
            node.child_mask = (child.function, child.is_list)
        censor_constant = f"_{snake.upper()}_CENSOR"
        views.append(
            PresenterView(
                name=presenter.name,
                snake=snake,
                shape_function=f"shape_{snake}" if own else shaping.want_shape_ref(presenter.name),
                own_shape=own,
                description=docstring_text(presenter.description or f"The {presenter.name} presenter."),
                fields=fields,
                description_rules_constant=description_constant,
                rules=tuple((_expr(r.when), r.text.python) for r in presenter.rules),
                suggestions=tuple((_expr(s.when), py_string(s.tool), s.reason.python) for s in presenter.suggestions),
                blocks=tuple(_block(b, False, constants, presenter, i) for i, b in enumerate(presenter.ui)),
                collection_rules=tuple(r.text.python for r in presenter.collection_rules),
                collection_blocks=tuple(
                    _block(b, True, constants, presenter, i) for i, b in enumerate(presenter.collection_ui)
                ),
                note_children=kids("notes", "item_notes"),
                ui_children=kids("ui", "ui"),
                mask_children=kids("mask", "mask"),
                has_item_notes=flag(presenter)["notes"],
                has_ui=flag(presenter)["ui"],
                takes_user=user_blocks_in(server, presenter, False),
                many_takes_user=user_blocks_in(server, presenter, True),
                has_mask=flag(presenter)["mask"] and bool(trie.children),
                mask_lines=tuple(_mask_lines(trie, censor_constant)),
                censor_constant=censor_constant,
                censor_literal=py_string(presenter.censor),
                limit=presenter.limit,
                single=presenter.name in used_single,
                many=presenter.name in used_many,
                needed_as_child=presenter.name in children,
                uses_expressions=any(e.helpers for e in presenter.expressions()),
                fixed_guidance=fixed_guidance(server, presenter),
                many_fixed_guidance=fixed_guidance(server, presenter)
                and all(_spec_text(r.text) for r in presenter.collection_rules),
                redacting_lists=tuple(redacting.values()),
            )
        )
    return tuple(views)
