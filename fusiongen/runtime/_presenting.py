"""Presenting: how a presented result reads, for the model and for the user — its envelope, the rules and
suggestions in its first text block, UI blocks, truncation notices, the text of tables, lists and code — and
the stale-results notice a mutation adds (docs/spec.md §6.9, §7, §9). `presenters.py` calls these per presenter.

Everything here fails closed: data that does not have the declared shape raises `OutputError`, which the tool
turns into an error result carrying no data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import mcp_types as types

from ._identity import caller_value as caller_value  # re-exported: presenters' `ctx.*` expressions call it
from ._results import data_result, dumps, escape_text
from ._values import OutputError


class MaskError(OutputError):
    """Data on a redaction path is not the container the schema promises: nothing may be sent."""

    def __init__(self, path: str) -> None:
        super().__init__("result", path, "a shape that can be redacted")


def expect_dict(value: object, path: str) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise MaskError(path)


def expect_list(value: object, path: str) -> list[Any]:
    if type(value) is list:
        return value
    raise MaskError(path)


class Block(NamedTuple):
    """One UI block of a result. A named tuple: as immutable as a frozen dataclass, built in half the time (one
    or more every call)."""

    type: str
    text: str
    for_user: bool  # audience = "user": annotated for the human, not the model


class Notes:
    """What a presenter adds to a result besides its data, collected while the data is unredacted.

    Rules are kept in three groups so the result lists field descriptions first, then static rules,
    then conditional ones, whatever order embedded presenters and collection items add them in.
    """

    __slots__ = ("blocks", "conditional", "descriptions", "rules", "suggestions")

    def __init__(self) -> None:
        self.descriptions: list[str] = []
        self.rules: list[str] = []
        self.conditional: list[str] = []
        self.blocks: list[Block] = []
        self.suggestions: list[tuple[str, str]] = []  # (tool's wire name, reason)


# Every character that ends a line for Markdown (\r\n, \r, \n) or for str.splitlines (\v, \f, \x1c-\x1e,
# \x85, \u2028, \u2029): inside a table cell or a list entry, any of them could start a forged row or entry.
_LINE_BREAKS: Final = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BACKTICKS: Final = re.compile("`+")


def _one_line(value: str) -> str:
    return value if value.isprintable() else _LINE_BREAKS.sub(" ", value)  # every line break is unprintable


def _cell(value: str) -> str:
    if value.isprintable() and "|" not in value and "\\" not in value:  # the usual cell: nothing to escape
        return value  # (every character _LINE_BREAKS matches is unprintable)
    # Backslashes first: "\\|" would otherwise read as an escaped backslash and a cell-ending pipe.
    return _one_line(value.replace("\\", "\\\\").replace("|", "\\|"))


@functools.lru_cache(maxsize=256)
def _table_head(columns: tuple[str, ...]) -> str:
    """A table's header and separator lines: the columns are the spec's, the same every call."""
    return "| " + " | ".join(_cell(c) for c in columns) + " |\n|" + " --- |" * len(columns)


def table_text(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = [_table_head(columns)]
    lines += ["| " + " | ".join([_cell(c) for c in row]) + " |" for row in rows]
    return "\n".join(lines)


def list_text(entries: list[str]) -> str:
    """One `- entry` line per entry; a line break inside an entry becomes a space (it could start another)."""
    return "\n".join(f"- {_one_line(entry)}" for entry in entries if entry)


def json_text(value: object) -> str:
    # JSON text escapes line breaks inside strings, so no line of it can close the fence.
    return "```json\n" + dumps(value) + "\n```"


def fenced(language: str, text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so that nothing in it can close the fence."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def summary_text(text: str) -> str:
    return f"📊 **Summary**: {text}"


def truncation_notice(shown: int, left_out: int) -> str:
    """What a truncated collection says about itself, in its summary block and in its structured `notice`."""
    return f"Dataset truncated. {shown} shown, {left_out} hidden. Use filters to narrow results."


_FOR_USER: Final = types.Annotations(audience=["user"])

# --user-blocks / create_server(user_blocks=): what the spec says, or every presenter's user-only blocks
# sent, or none. "omit" is the spec's default: audience is only a hint, and clients such as langchain hand
# every block to the model.
USER_BLOCK_MODES: Final = ("spec", "send", "omit")


def sent_user_blocks(mode: str, spec: Mapping[str, bool]) -> frozenset[str]:
    """The presenters whose audience = "user" blocks this server sends, chosen once at start-up.

    `spec` maps each presenter that declares such blocks to its spec's user_blocks == "send". An omitted
    block is not computed at all: its presenter's name is not in the set its UI function checks.
    """
    if mode == "spec":
        return frozenset(name for name, send in spec.items() if send)
    if mode == "send":
        return frozenset(spec)
    if mode == "omit":
        return frozenset()
    raise ValueError(f"user_blocks must be one of {', '.join(USER_BLOCK_MODES)}, not {mode!r}")


def presented_result(data: dict[str, Any], notes: Notes, *, fixed_guidance: bool = False) -> types.CallToolResult:
    """One presented item: the envelope `{"data", "rules", "suggestions"}` as structuredContent, and its text form.

    `fixed_guidance`: every rule and suggestion the presenter can add is spec text, no template that reads data
    (the generator knows): then their text is built once per distinct set (`_fixed_guidance_text`)."""
    rules, suggestions = _guidance(notes)
    structured = {"data": data, "rules": rules, "suggestions": _suggestion_objects(suggestions)}
    return _presented(dumps(data), structured, notes, rules, suggestions, fixed_guidance)


def presented_collection(
    items: list[dict[str, Any]], total: int, notes: Notes, *, fixed_guidance: bool = False
) -> types.CallToolResult:
    """A presented collection: the item envelope plus `total`, `shown`, `truncated` (and a `notice` when it is)."""
    rules, suggestions = _guidance(notes)
    shown = len(items)
    structured: dict[str, Any] = {"data": items, "total": total, "shown": shown, "truncated": total > shown}
    if total > shown:
        structured["notice"] = notice = truncation_notice(shown, total - shown)
        head = f"{dumps(items)}\n\n<truncation_notice>{notice}</truncation_notice>"
    else:
        head = dumps(items)
    structured["rules"] = rules
    structured["suggestions"] = _suggestion_objects(suggestions)
    return _presented(head, structured, notes, rules, suggestions, fixed_guidance)


def plain_result(data: dict[str, Any]) -> types.CallToolResult:
    """One presented item of a presenter that adds nothing besides its data (no rules, suggestions or UI blocks,
    nor do its embeds): what `presented_result` writes for empty notes, without collecting any."""
    return data_result(data, {"data": data, "rules": [], "suggestions": []})


def _guidance(notes: Notes) -> tuple[list[str], list[tuple[str, str]]]:
    """The rules (field descriptions, then static, then conditional) and suggestions, each once, in order: new
    lists (the envelope's own), deduplicated only when there is more than one."""
    rules = notes.rules
    if notes.descriptions or notes.conditional:
        rules = [*notes.descriptions, *rules, *notes.conditional]
    if len(rules) > 1:
        rules = list(dict.fromkeys(rules))
    suggestions = notes.suggestions
    return [r for r in rules if r], list(dict.fromkeys(suggestions)) if len(suggestions) > 1 else suggestions[:]


def _suggestion_objects(suggestions: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"tool": tool, "reason": reason} for tool, reason in suggestions]


def _presented(
    head: str,
    structured: dict[str, Any],
    notes: Notes,
    rules: list[str],
    suggestions: list[tuple[str, str]],
    fixed_guidance: bool,
) -> types.CallToolResult:
    """The wire format (docs/spec.md §9.1): structuredContent carries the data with the rules and suggestions
    beside it, so a client that hands the model only structuredContent still passes the guidance on. The first
    text block carries what the agent must perceive: `head` (the data as JSON, and a collection's truncation
    notice), then the domain rules, then the action suggestions, so a client that hands the model only the first
    block (smolagents) passes them on too; the UI blocks follow, one block each, user-only ones annotated."""
    # The models are built by their validating constructors: pydantic-core checks these few fields faster than
    # `model_construct` fills them in Python (measured: 1.5 vs 3-4 us a model), and it keeps the dicts and blocks
    # passed (no copy: structuredContent is `data`'s own envelope).
    if fixed_guidance:
        head += _fixed_guidance_text(tuple(rules), tuple(suggestions))
    elif rules or suggestions:
        head += _guidance_text(rules, suggestions)
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=head)]
    for block in notes.blocks:
        text = f'<ui_passthrough type="{block.type}">{escape_text(block.text)}</ui_passthrough>'
        if block.for_user:
            content.append(types.TextContent(type="text", text=text, annotations=_FOR_USER))
        else:
            content.append(types.TextContent(type="text", text=text))
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def _guidance_text(rules: Sequence[str], suggestions: Sequence[tuple[str, str]]) -> str:
    """`<domain_rules>` (if any rule), then `<action_suggestions>` (if any suggestion), each after a blank line:
    one `- ` line each. A rule or reason is one line whatever its template interpolated (a handler value,
    `{ctx.subject}`): a line break in it becomes a space, as in table cells and lists, so no value can add a rule
    or suggestion line of its own."""
    text = ""
    if rules:
        lines = "".join([f"- {_one_line(escape_text(rule))}\n" for rule in rules])
        text = f"\n\n<domain_rules>\n{lines}</domain_rules>"
    if suggestions:
        lines = "".join(
            [f"- {_one_line(escape_text(tool))}: {_one_line(escape_text(reason))}\n" for tool, reason in suggestions]
        )
        text += f"\n\n<action_suggestions>\n{lines}</action_suggestions>"
    return text


@functools.lru_cache(maxsize=256)
def _fixed_guidance_text(rules: tuple[str, ...], suggestions: tuple[tuple[str, str], ...]) -> str:
    """The guidance text of a presenter whose rules and suggestions are all spec text: the same few sets every
    call (the spec bounds them), so each set's text is built once and appended to every result that has that set.
    Only for spec text: text a template made from data is never kept past its call."""
    return _guidance_text(rules, suggestions)


def stale_notice(names: Sequence[str]) -> str:
    """What a successful mutation tells the agent about results it read before (docs/spec.md §6.9)."""
    them = "them" if len(names) > 1 else "it"
    return f"Stale now: results read earlier from {', '.join(names)}; call {them} again before relying on {them}."


def with_stale(
    result: types.CallToolResult, stale: Sequence[str], tool_names: Mapping[str, str] | None
) -> types.CallToolResult:
    """A successful mutation's result, naming (by the wire names the client uses) the tools whose earlier results
    it made stale: in an envelope, as `stale` and as the last rule, in the `<domain_rules>` of its first block too;
    in a text result, after its text in the same block: a client passing on only the first block passes it on.

    In a presented result's first block `\n</domain_rules>` and `\n\n<action_suggestions>\n` occur only where
    `_presented` wrote them: the data before them is JSON, whose strings never hold a raw line break."""
    names = [tool_names.get(n, n) for n in stale] if tool_names is not None else list(stale)
    notice = stale_notice(names)
    structured = result.structured_content
    content = list(result.content)
    first = content[0] if content else None
    if (
        isinstance(structured, dict)
        and isinstance(structured.get("rules"), list)
        and isinstance(first, types.TextContent)
    ):
        structured = {**structured, "rules": [*structured["rules"], notice], "stale": names}
        line = f"- {_one_line(escape_text(notice))}\n"
        text = first.text
        end = text.rfind("\n</domain_rules>")
        if end >= 0:
            text = f"{text[: end + 1]}{line}{text[end + 1 :]}"
        else:
            at = text.rfind("\n\n<action_suggestions>\n")
            at = len(text) if at < 0 else at
            text = f"{text[:at]}\n\n<domain_rules>\n{line}</domain_rules>{text[at:]}"
        content[0] = types.TextContent(type="text", text=text, annotations=first.annotations)
        return types.CallToolResult(content=content, structured_content=structured, is_error=False)
    if isinstance(first, types.TextContent):
        content[0] = types.TextContent(type="text", text=f"{first.text}\n\n{notice}", annotations=first.annotations)
    else:
        content.insert(0, types.TextContent(type="text", text=notice))
    return types.CallToolResult(content=content, structured_content=structured, is_error=result.is_error)
