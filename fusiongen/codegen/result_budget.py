"""The worst-case size of each tool's result: the largest `tools/call` result its presenter can produce.

Computed by building a *witness*: the result the runtime would send for the largest data the spec admits,
written exactly as the runtime writes it (the data as indented JSON in the first text block, one block per
UI block, `<domain_rules>`, `<action_suggestions>`, the structuredContent envelope of docs/spec.md §9.2), and
measuring it as compact JSON. Largest data, per value (docs/spec.md §4.1 states the rules):

* a `string`/`text` at its `max_length`, an `enum` at its longest value, a `uuid` at 36 characters, a
  `date` at 10, a `datetime` at 32 (microseconds and an offset), a `boolean` as `false`, an `integer` at the
  wider of its bounds when it has both (else 20 characters, the 64-bit range: a larger int is outside the
  bound), a `number` at 24 (the longest shortest-repr of a double); a redacted value as its censor;
* every optional field present, every nullable one non-null (or `null` where that is longer), a list at its
  `max_items` (a collection at its presenter's `limit`), every `when` true and every rule and suggestion
  distinct (the runtime sends each text once);
* in templates, a placeholder at the widest text its value can have (§8.6): a path at its value's width, a
  number computed at 17 characters (10 significant digits and an exponent), an integer computed at the sum of
  its operands' digits (at most 3000 bits), `round`/`int` of a number at 310, a comparison at 5 (`false`).

Characters are counted as one byte each and as needing no escaping (plain ASCII text): tokens follow
characters, and the spec cannot say which characters a value holds. Escaping the spec's own text (literal
template text, censors, columns) is counted exactly.

What has no bound makes the result **unbounded**, with the first path that does: a string without
`max_length`, a list without `max_items`, a collection without `limit`, a `map` or `json` field, a model that
contains itself, a presenter's inline `schema` string (it takes no constraints), a placeholder reading `ctx`
(the caller's token), a handler's own text (`returns = "text"`, or no `returns`). Handler data is not checked
against constraints (§5.10): the bound is that of data that meets them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from fusiongen.expr import ExprNode, template_parts
from fusiongen.ir import FieldIR, PresenterIR, ServerIR, ToolIR, TypeIR, UIBlockIR

INT64_MIN = -(2**63)
WIDEST_DOUBLE = -2.2250738585072014e-308  # its shortest repr is 24 characters, the most any double needs
WIDEST_COUNT = 20  # a count (`count()`, `total`, `len`) is a Python int the size of a list: under 2**63
WIDEST_COMPUTED_NUMBER = 17  # `-1.234567891e-308`: 10 significant digits (§8.6), sign, exponent
WIDEST_ROUNDED = 310  # `round(x)`/`int(x)` of a double: up to 309 digits and a sign
WIDEST_INTEGER = 905  # integers over 3000 bits are null (§8.5): 904 digits and a sign
FALSE = 5  # a boolean's widest text


class Unbounded(Exception):
    """Something in the result has no size limit: `path` names it (`data.notes`), `reason` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} ({reason})")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class _Open:
    """Stands in the witness for a value without a bound: the result is unbounded only if this value is sent or
    read (a redacted one is sent as its censor)."""

    why: Unbounded


def _check(value: Any) -> Any:
    """`value`, if nothing in it is without a bound; else raise the first such thing (in field order)."""
    if isinstance(value, _Open):
        raise value.why
    if isinstance(value, dict):
        for item in value.values():
            _check(item)
    elif isinstance(value, list):
        for item in value:
            _check(item)
    return value


@dataclass(frozen=True)
class ResultBudget:
    tool: str  # the wire name
    spec_name: str
    result_bytes: int | None  # None: unbounded
    audience: str | None = None  # the presenter of the largest (or the unbounded) result, when it has several
    unbounded: Unbounded | None = None

    @property
    def result_tokens(self) -> int | None:
        return None if self.result_bytes is None else -(-self.result_bytes // 4)  # as budget.tokens rounds


def result_budget(server: ServerIR, tool: ToolIR) -> ResultBudget:
    """The tool's worst case over every audience (each presenter returns_for_role may pick)."""
    if tool.returns is None:
        what = 'returns = "text"' if tool.returns_text else "no returns"
        return _unbounded(tool, Unbounded("result", f"the handler's own text: {what}"), None)
    largest: tuple[int, str] | None = None
    for name in tool.presenters:
        try:
            size = _size(worst_result(server, server.presenter(name), collection=tool.returns.collection))
        except Unbounded as unbounded:
            return _unbounded(tool, unbounded, name if len(tool.presenters) > 1 else None)
        if largest is None or size > largest[0]:
            largest = (size, name)
    assert largest is not None
    return ResultBudget(tool.wire, tool.name, largest[0], largest[1] if len(tool.presenters) > 1 else None)


def _unbounded(tool: ToolIR, unbounded: Unbounded, audience: str | None) -> ResultBudget:
    return ResultBudget(tool.wire, tool.name, None, audience, unbounded)


def _size(wire: dict[str, Any]) -> int:
    return len(json.dumps(wire, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def worst_result(server: ServerIR, presenter: PresenterIR, *, collection: bool) -> dict[str, Any]:
    """The witness: the `tools/call` result (as on the wire) of the largest data the presenter admits."""
    return _Witness(server).result(presenter, collection)


# --- values ---------------------------------------------------------------------------------------------------


@dataclass
class _Notes:
    """The witness's guidance, in the runtime's groups (descriptions, static rules, conditional rules)."""

    descriptions: list[str]
    rules: list[str]
    conditional: list[str]
    blocks: list[tuple[str, str, bool]]  # (type, text, for the user)
    suggestions: list[tuple[str, str]]


class _Witness:
    def __init__(self, server: ServerIR) -> None:
        self.server = server
        self.distinct = 0  # makes every per-item text unique, as the worst case has it
        server_info = {"name": server.name, "version": server.version}
        self.stamp = {"_meta": {"io.modelcontextprotocol/serverInfo": server_info}, "resultType": "complete"}

    # The largest value of a field. `data`: as serialized in the result (a nullable value is null where that is
    # longer); else as read by expressions (never null: an empty text is the shortest).
    def presenter_value(self, presenter: PresenterIR, at: str, data: bool, seen: tuple[str, ...]) -> dict[str, Any]:
        return {
            f.name: self.field_value(f, presenter.embed(f.name), f"{at}.{f.name}", data, seen, presenter.model is None)
            for f in presenter.fields
        }

    def field_value(
        self, field: FieldIR, embed: str | None, at: str, data: bool, seen: tuple[str, ...], inline: bool
    ) -> Any:
        value = self.type_value(field, field.type, embed, at, data, seen, inline)
        if data and field.nullable and _size_of(value) < len("null"):
            return None
        return value

    def type_value(
        self,
        field: FieldIR,
        type_ir: TypeIR,
        embed: str | None,
        at: str,
        data: bool,
        seen: tuple[str, ...],
        inline: bool,
    ) -> Any:
        kind = field.cast if field.cast is not None else type_ir.kind
        c = field.constraints
        if kind == "list":
            assert type_ir.items is not None
            if c.max_items is None:
                return _Open(Unbounded(at, "list without max_items"))
            item = self.type_value(field, type_ir.items, embed, f"{at}[*]", data, seen, inline)
            return [item] * c.max_items
        if embed is not None:
            child = self.server.presenter(embed)
            return self.model_value(child.name, at, seen, lambda s: self.presenter_value(child, at, data, s))
        if kind == "model":
            assert type_ir.model is not None
            model = self.server.model(type_ir.model)
            fields = model.visible_fields
            return self.model_value(
                model.name,
                at,
                seen,
                lambda s: {f.name: self.field_value(f, None, f"{at}.{f.name}", data, s, False) for f in fields},
            )
        return _scalar(kind, type_ir, field, at, inline)

    def model_value(self, name: str, at: str, seen: tuple[str, ...], build: Any) -> Any:
        if name in seen:
            return _Open(Unbounded(at, f"{name} contains itself"))
        return build((*seen, name))

    # --- the result -----------------------------------------------------------------------------------------

    def result(self, presenter: PresenterIR, collection: bool) -> dict[str, Any]:
        notes = _Notes([], [], [], [], [])
        if collection:
            if presenter.limit is None:
                raise Unbounded("data", f"a collection of {presenter.name} without limit")
            shown = presenter.limit
            items = [self.masked(presenter, "data[*]") for _ in range(shown)]
            read = self.presenter_value(presenter, "data[*]", False, ())
            notice = f"Dataset truncated. {shown} shown, {'9' * WIDEST_COUNT} hidden. Use filters to narrow results."
            notes.blocks.append(("summary", _summary("⚠️ " + notice), False))
            notes.rules.extend(
                self.template(r.text.source, presenter, read, "collection_rules") for r in presenter.collection_rules
            )
            for index, block in enumerate(presenter.collection_ui):
                if not block.for_user or presenter.send_user_blocks:
                    notes.blocks.append(self.collection_block(block, presenter, read, shown, f"collection_ui[{index}]"))
            for _ in range(shown):
                self.item_notes(presenter, read, notes)
            big = int("9" * WIDEST_COUNT)
            structured: dict[str, Any] = {"data": items, "total": big, "shown": shown, "truncated": True}
            structured["notice"] = notice
            return _wire(items, structured, notes, self.stamp)
        data = self.masked(presenter)
        read = self.presenter_value(presenter, "data", False, ())
        self.item_notes(presenter, read, notes)
        self.item_ui(presenter, read, notes)
        return _wire(data, {"data": data}, notes, self.stamp)

    def masked(self, presenter: PresenterIR, at: str = "data") -> dict[str, Any]:
        """The largest data as sent: each redacted value replaced by its censor (the outermost presenter's)."""
        value = self.presenter_value(presenter, at, True, ())
        self.mask(presenter, value)
        _check(value)
        return value

    def mask(self, presenter: PresenterIR, value: dict[str, Any]) -> None:
        for field_name, child in presenter.embeds:  # the embedded presenter's own paths first, as the runtime does
            for node in _nodes(value.get(field_name)):
                self.mask(self.server.presenter(child), node)
        for path in presenter.redactions:
            _censor(value, path, presenter.censor, presenter)

    def item_notes(self, presenter: PresenterIR, read: dict[str, Any], notes: _Notes) -> None:
        notes.descriptions.extend(presenter.description_rules)
        for rule in presenter.rules:
            target = notes.rules if rule.when is None else notes.conditional
            target.append(self.template(rule.text.source, presenter, read, "rules"))
        for suggestion in presenter.suggestions:
            notes.suggestions.append(
                (suggestion.tool, self.template(suggestion.reason.source, presenter, read, "suggest"))
            )
        for field_name, child in presenter.embeds:
            for node in _nodes(read.get(field_name)):
                self.item_notes(self.server.presenter(child), node, notes)

    def item_ui(self, presenter: PresenterIR, read: dict[str, Any], notes: _Notes) -> None:
        for index, block in enumerate(presenter.ui):
            if not block.for_user or presenter.send_user_blocks:
                notes.blocks.append(self.item_block(block, presenter, read, f"ui[{index}]"))
        for field_name, child in presenter.embeds:
            for node in _nodes(read.get(field_name)):
                self.item_ui(self.server.presenter(child), node, notes)

    def item_block(
        self, block: UIBlockIR, presenter: PresenterIR, read: dict[str, Any], at: str
    ) -> tuple[str, str, bool]:
        def text(source: str) -> str:
            return self.template(source, presenter, read, at)

        if block.type == "table":
            rows = [tuple(text(cell.source) for cell in row) for row in block.rows]
            body = _table(block.columns, rows)
        elif block.type == "list":
            body = "\n".join(f"- {text(item.source)}" for item in block.items)
        elif block.type == "json":
            body = "```json\n" + json.dumps(self.json_shown(presenter, block), indent=2, ensure_ascii=False) + "\n```"
        else:
            assert block.text is not None
            body = self.rendered(block, text(block.text.source))
        return block.type, body, block.for_user

    def collection_block(
        self, block: UIBlockIR, presenter: PresenterIR, read: dict[str, Any], shown: int, at: str
    ) -> tuple[str, str, bool]:
        def per_item(source: str) -> list[str]:
            return [self.template(source, presenter, read, at) for _ in range(shown)]

        if block.type == "table":
            cells = [per_item(cell.source) for cell in block.rows[0]] if block.rows else []
            body = _table(block.columns, list(zip(*cells, strict=True)) if cells else [])
        elif block.type == "list":
            body = "\n".join(f"- {entry}" for entry in per_item(block.items[0].source)) if block.items else ""
        elif block.type == "json":
            value = [self.json_shown(presenter, block) for _ in range(shown)]
            body = "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"
        else:
            assert block.text is not None
            body = self.rendered(block, self.template(block.text.source, presenter, read, at))
        return block.type, body, block.for_user

    def json_shown(self, presenter: PresenterIR, block: UIBlockIR) -> Any:
        """What a json block shows: the value at its path as serialized (a nullable value null where that is
        longer), before masking, as the runtime renders blocks."""
        return _at(self.presenter_value(presenter, "data", True, ()), block.path)

    @staticmethod
    def rendered(block: UIBlockIR, text: str) -> str:
        if block.type == "mermaid":
            return f"```mermaid\n{text}\n```"
        if block.type == "code":
            return f"```{block.language}\n{text}\n```"
        if block.type == "summary":
            return _summary(text)
        return text

    def template(self, source: str, presenter: PresenterIR, read: dict[str, Any], at: str) -> str:
        """The template's widest text: literal text as written, each placeholder as that many characters, filled
        so that no two placeholder texts are equal: in the worst case each item's rule differs from the others'
        (the runtime sends equal texts once)."""
        self.distinct += 1
        tag = str(self.distinct)
        out: list[str] = []
        for part in template_parts(source):
            if isinstance(part, str):
                out.append(part)
            else:
                width = _Width(self.server, presenter, read, f"{presenter.name} {at}").of(part)[0]
                out.append(tag.ljust(width, "x")[:width])
        return "".join(out)


def _scalar(kind: str, type_ir: TypeIR, field: FieldIR, at: str, inline: bool) -> Any:
    c = field.constraints
    if kind in ("string", "text"):
        if c.max_length is None:
            why = "an inline schema's string: declare it in a model with max_length" if inline else ""
            return _Open(Unbounded(at, why or f"{kind} without max_length"))
        return "x" * c.max_length
    if kind == "enum":
        return max(type_ir.enum_values, key=len)
    if kind == "integer":
        low = c.minimum if c.minimum is not None else c.exclusive_minimum
        high = c.maximum if c.maximum is not None else c.exclusive_maximum
        if low is None or high is None:
            return INT64_MIN
        return max((math.floor(low), math.ceil(high)), key=lambda v: len(str(v)))
    if kind == "number":
        return WIDEST_DOUBLE
    if kind == "boolean":
        return False
    if kind == "date":
        return "9999-12-31"
    if kind == "datetime":
        return "9999-12-31T23:59:59.999999+23:59"
    if kind == "uuid":
        return "x" * 36
    return _Open(Unbounded(at, f"a {kind} field"))


def _nodes(value: Any) -> list[Any]:
    """The objects at a field: itself, or a list's items."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return [value] if isinstance(value, dict) else []


def _censor(value: Any, path: tuple[str, ...], censor: str, presenter: PresenterIR) -> None:
    if not isinstance(value, (dict, list)):
        return  # nothing below a value without a bound: the whole of it is named if it is sent
    head, rest = path[0], path[1:]
    targets = value if head == "[*]" else None
    if targets is not None:
        for i, item in enumerate(targets):
            if rest:
                _censor(item, rest, censor, presenter)
            else:
                targets[i] = censor
        return
    if not isinstance(value, dict) or value.get(head) is None:
        return
    if rest:
        child = value[head]
        if rest[0] == "[*]" and isinstance(child, list):
            value[head] = [dict(i) if isinstance(i, dict) else i for i in child]  # items are shared copies
        elif isinstance(child, dict):
            value[head] = dict(child)
        _censor(value[head], rest, censor, presenter)
    else:
        value[head] = censor


def _at(value: Any, path: tuple[str, ...]) -> Any:
    """The value at a path of the witness, checked: reading a value without a bound makes the text unbounded."""
    for name in path:
        value = _check_open(value).get(name) if isinstance(value, (dict, _Open)) else None
    return _check(value)


def _check_open(value: Any) -> Any:
    if isinstance(value, _Open):
        raise value.why
    return value


def _size_of(value: Any) -> int:
    """A value's JSON size; one without a bound counts as larger than any (it is never swapped for null)."""
    try:
        _check(value)
    except Unbounded:
        return 2**63
    return len(json.dumps(value, ensure_ascii=False))


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    def cell(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _summary(text: str) -> str:
    return f"📊 **Summary**: {text}"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _wire(data: Any, structured: dict[str, Any], notes: _Notes, stamp: dict[str, Any]) -> dict[str, Any]:
    """As `_presenting._presented` and `tool_result_wire` write it (the key order does not change the size), with what a
    2026-07-28 result adds (`stamp`): the larger of the two protocol eras' results, as the list budget counts."""
    rules = [r for r in dict.fromkeys([*notes.descriptions, *notes.rules, *notes.conditional]) if r]
    suggestions = list(dict.fromkeys(notes.suggestions))
    structured["rules"] = rules
    structured["suggestions"] = [{"tool": tool, "reason": reason} for tool, reason in suggestions]
    content: list[dict[str, Any]] = [{"text": json.dumps(data, indent=2, ensure_ascii=False), "type": "text"}]
    for kind, text, for_user in notes.blocks:
        block: dict[str, Any] = {
            "text": f'<ui_passthrough type="{kind}">{_escape(text)}</ui_passthrough>',
            "type": "text",
        }
        if for_user:
            block = {"annotations": {"audience": ["user"]}, **block}
        content.append(block)
    if rules:
        lines = "".join(f"- {_escape(rule)}\n" for rule in rules)
        content.append({"text": f"<domain_rules>\n{lines}</domain_rules>", "type": "text"})
    if suggestions:
        lines = "".join(f"- {_escape(tool)}: {_escape(reason)}\n" for tool, reason in suggestions)
        content.append({"text": f"<action_suggestions>\n{lines}</action_suggestions>", "type": "text"})
    return {"content": content, "isError": False, "structuredContent": structured, **stamp}


# --- the widest text of an expression -------------------------------------------------------------------------


class _Width:
    """(width, static type) of an expression's text (§8.6), over the largest values the presenter reads."""

    def __init__(self, server: ServerIR, presenter: PresenterIR, read: dict[str, Any], at: str) -> None:
        self.server = server
        self.presenter = presenter
        self.read = read
        self.at = at

    def of(self, node: ExprNode) -> tuple[int, str]:
        if node.kind == "lit":
            return len(_fmt(node.value)), _kind_of(node.value)
        if node.kind == "path":
            return self.path(node.names)
        if node.kind == "list":
            widths = [self.of(k)[0] for k in node.kids]
            return sum(widths) + 2 * max(len(widths) - 1, 0), "list"
        if node.kind == "unary":
            width, kind = self.of(node.kids[0])
            return (FALSE, "bool") if node.op == "not" else (width + 1, kind)
        if node.kind == "call":
            return self.call(node.op, [self.of(k) for k in node.kids])
        return self.binary(node.op, self.of(node.kids[0]), self.of(node.kids[1]))

    def path(self, names: tuple[str, ...]) -> tuple[int, str]:
        if names[0] == "ctx":
            raise Unbounded(f"{self.at}: ctx.{'.'.join(names[1:])}", "the caller's identity has no size limit")
        value = _at(self.read, names)
        return len(_fmt(value)), _kind_of(value)

    def call(self, name: str, args: list[tuple[int, str]]) -> tuple[int, str]:
        first = args[0] if args else (0, "any")
        if name in ("len", "count"):
            return WIDEST_COUNT, "int"
        if name in ("str", "upper", "lower", "abs"):
            return first[0], ("str" if name != "abs" else first[1])
        if name == "float":
            return WIDEST_COMPUTED_NUMBER, "num"
        if name == "round":
            if len(args) > 1:
                return (first[0], "int") if first[1] == "int" else (WIDEST_COMPUTED_NUMBER, "num")
            return (first[0], "int") if first[1] == "int" else (WIDEST_ROUNDED, "int")
        if name == "int":
            return (first[0], "int") if first[1] == "int" else (max(WIDEST_ROUNDED, first[0]), "int")
        # min / max: one of their items
        return max((w for w, _ in args), default=0), (args[0][1] if len(args) > 1 else "any")

    def binary(self, op: str, a: tuple[int, str], b: tuple[int, str]) -> tuple[int, str]:
        if op in ("or", "and", "in", "not in", "==", "!=", "<", "<=", ">", ">="):
            return FALSE, "bool"
        if op == "+" and a[1] == "str" and b[1] == "str":
            return a[0] + b[0], "str"
        if a[1] == "int" and b[1] == "int" and op != "/":
            width = a[0] + b[0] if op == "*" else max(a[0], b[0]) + 1
            return min(width, WIDEST_INTEGER), "int"
        if op == "+" and "str" in (a[1], b[1]):
            return max(a[0] + b[0], WIDEST_COMPUTED_NUMBER), "any"
        return WIDEST_COMPUTED_NUMBER, "num"


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "num"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "obj" if isinstance(value, dict) else "any"


def _fmt(v: Any) -> str:
    """A value as text, as the runtime's `_x_fmt` writes it (§8.6)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not v.is_integer() or abs(v) >= 1e16:
            v = float(format(v, ".10g"))
        return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    if isinstance(v, list):
        return ", ".join(_fmt(i) for i in v)
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def result_budgets(server: ServerIR) -> list[ResultBudget]:
    """Every spec tool's worst-case result, in spec order."""
    return [result_budget(server, tool) for tool in server.tools]
