"""A field's `pattern`: written in JSON Schema's dialect (ECMA-262), checked by the server in Python's `re`.

The two dialects agree on most syntax but not all of it, and where they disagree the schema an agent reads
and the check the server runs would accept different strings. So a pattern is accepted only within a
portable subset, and translated where the same text means different things:

* `.` becomes `[^\\n\\r\\u2028\\u2029]` (ECMA's dot stops at every line terminator, Python's only at `\\n`);
* `$` becomes `\\Z` (Python's `$` also matches before a final newline);
* `\\s`/`\\S` become ECMA's whitespace set (Python's, under `re.ASCII`, is ASCII only);
* `\\d`, `\\w`, `\\b` mean ASCII in ECMA without the `u` flag: the server compiles with `re.ASCII`.

Refused, with the reason: Python-only or ECMA-only group syntax (`(?P<n>`, `(?<n>`, inline flags, `(?#`,
atomic groups), possessive quantifiers, `{,n}`, `[]`/`[^]`, escapes only one side knows (`\\A`, `\\Z`,
`\\p{..}`, `\\k<..>`, `\\cX`...), and anything Python cannot compile or warns about.
"""

from __future__ import annotations

import re
import warnings

# ECMA-262 WhiteSpace and LineTerminator code points, as the inside of a character class.
ECMA_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"
_PORTABLE_LETTER_ESCAPES = frozenset("dDwWsSbBnrtvfxu")
_GROUP_OPENERS = (":", "=", "!", "<=", "<!")


class PatternError(ValueError):
    """A pattern outside the portable subset; the message says why, in words for the spec's author."""


def python_pattern(pattern: str) -> str:
    """The Python regex (to compile with `re.ASCII`) that matches exactly what `pattern` matches in ECMA-262."""
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(_escape(pattern, index, in_class))
            index += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            if pattern.startswith(("[]", "[^]"), index):
                raise PatternError('"[]" and "[^]" mean different things in ECMA-262 and Python')
            in_class = True
            out.append(char)
        elif char == "(" and pattern.startswith("(?", index):
            if not pattern.startswith(_GROUP_OPENERS, index + 2):
                raise PatternError('only "(?:", "(?=", "(?!", "(?<=" and "(?<!" groups read the same in both dialects')
            out.append(char)
        elif char in "*+?}" and pattern.startswith("+", index + 1):
            raise PatternError(f'"{char}+" is a possessive quantifier in Python and an error in ECMA-262')
        elif char == "{" and pattern.startswith(",", index + 1):
            raise PatternError('"{,n}" is a quantifier in Python and literal text in ECMA-262; write "{0,n}"')
        else:
            out.append({".": _ECMA_DOT, "$": "\\Z"}.get(char, char))
        index += 1
    if in_class:
        raise PatternError("a character class is not closed")
    translated = "".join(out)
    _compile(translated)
    return translated


def _escape(pattern: str, index: int, in_class: bool) -> str:
    if index + 1 >= len(pattern):
        raise PatternError("it ends with a lone backslash")
    escaped = pattern[index + 1]
    if escaped.isalpha() and escaped not in _PORTABLE_LETTER_ESCAPES:
        raise PatternError(f'"\\{escaped}" is not an escape both ECMA-262 and Python read the same way')
    if escaped == "s":
        return ECMA_SPACE if in_class else f"[{ECMA_SPACE}]"
    if escaped == "S":
        if in_class:
            raise PatternError('"\\S" inside a character class cannot be made portable; list what you accept')
        return f"[^{ECMA_SPACE}]"
    return pattern[index : index + 2]


def _compile(translated: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. FutureWarning "possible nested set": the dialects differ there
        try:
            re.compile(translated, re.ASCII)
        except re.error as exc:
            raise PatternError(f"it does not compile: {exc.msg}") from None
        except Warning as warning:
            raise PatternError(f"Python reads it ambiguously: {warning}") from None
