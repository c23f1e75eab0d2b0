"""codegen/prune.py: what a runtime copy keeps of its source, given what the rendered modules mention."""

from __future__ import annotations

from types import CodeType

from fusiongen.codegen.prune import Trimmed, trim_runtime

COPY = '''# header
# provenance
"""A runtime module. Its docstring names unused_helper, which keeps nothing."""

from __future__ import annotations

from ._other import Exported as Exported
from ._other import Unexported as Unexported

__all__ = ["Exported", "Unexported", "used", "unused_helper", "Annotated", "LIMIT", "UNUSED_LIMIT"]

LIMIT = 10
UNUSED_LIMIT = 20


def used(store: "Annotated | None") -> int:
    """Calls nothing named in this docstring: unused_helper."""
    return LIMIT


# The comment block above a definition goes with it,
# however many lines it has.
@staticmethod
def unused_helper() -> None:
    return None


class Annotated:
    pass


print("import-time code runs, and what it names is kept:", Exported)
'''


def trim(mentioned: str, copy: str = COPY) -> Trimmed:
    return trim_runtime({"pkg/server.py": mentioned}, {"pkg/_mod.py": copy}, lambda module: ())["pkg/_mod.py"]


def test_what_nothing_reaches_is_left_out_with_its_comment_block_and_decorators() -> None:
    trimmed = trim("from ._mod import used\nused(None)\n")
    assert trimmed.left_out == ("Unexported", "UNUSED_LIMIT", "unused_helper")
    assert "unused_helper()" not in trimmed.text
    assert "comment block" not in trimmed.text and "however many" not in trimmed.text
    assert "@staticmethod" not in trimmed.text
    assert "import Unexported" not in trimmed.text and "import Exported as Exported" in trimmed.text
    # What is kept is the source's text, its spacing too: two blank lines between definitions.
    assert "    return LIMIT\n\n\nclass Annotated:\n    pass\n\n\nprint(" in trimmed.text


def test_all_is_rewritten_to_what_remains() -> None:
    trimmed = trim("from ._mod import used\n")
    assert '__all__ = ["Exported", "used", "Annotated", "LIMIT"]\n' in trimmed.text


def test_a_long_all_is_one_name_per_line() -> None:
    names = [f"a_rather_long_name_{i:02}" for i in range(12)]
    copy = f"__all__ = {names!r}\n".replace("'", '"') + "".join(f"{n} = {i}\n" for i, n in enumerate(names))
    trimmed = trim("\n".join(names[:10]), copy)
    assert trimmed.left_out == ("a_rather_long_name_10", "a_rather_long_name_11")
    assert trimmed.text.startswith('__all__ = [\n    "a_rather_long_name_00",\n    "a_rather_long_name_01",\n')
    assert '    "a_rather_long_name_09",\n]\na_rather_long_name_00 = 0\n' in trimmed.text
    assert "_10" not in trimmed.text


def test_a_string_annotation_keeps_the_names_it_holds() -> None:
    assert "class Annotated" in trim("used\n").text  # only `used` mentions it, in "Annotated | None"


def test_a_docstring_or_a_message_keeps_nothing() -> None:
    assert "unused_helper" in trim("used\n").left_out
    assert "unused_helper" in trim("'see unused_helper for details'\n").left_out
    assert "unused_helper" not in trim("getattr(module, 'unused_helper')\n").left_out


def test_a_re_export_is_kept_exactly_when_its_name_is_reached() -> None:
    assert "Unexported" in trim("used\n").left_out
    assert "Unexported" not in trim("x.Unexported\n").left_out
    assert "Exported" not in trim("\n").left_out  # import-time code of the module names it


def test_roots_of_a_module_are_kept_though_nothing_generated_names_them() -> None:
    kept = trim_runtime({"pkg/server.py": ""}, {"pkg/_mod.py": COPY}, lambda module: ("unused_helper",))
    assert "unused_helper" not in kept["pkg/_mod.py"].left_out


def test_a_copy_that_loses_nothing_is_returned_unchanged() -> None:
    assert trim("used\nunused_helper\nUnexported\nUNUSED_LIMIT\n") == Trimmed(COPY, ())


def test_a_constant_right_above_a_definition_leaves_the_gap_before_it() -> None:
    copy = "KEPT = 1\nDROPPED = 2\n\n\ndef kept() -> int:\n    return KEPT\n"
    assert trim("kept\n", copy) == Trimmed("KEPT = 1\n\n\ndef kept() -> int:\n    return KEPT\n", ("DROPPED",))


def test_an_annotation_keeps_what_it_names_though_compiled_as_a_string() -> None:
    # Generated modules are read from their compiled code, where `from __future__ import annotations` has made
    # every annotation a string.
    future = "from __future__ import annotations\n"
    assert "Unexported" not in trim(future + "def f(x: dict[str, Unexported]) -> None: ...\n").left_out
    assert "UNUSED_LIMIT" not in trim(future + "LIMITS: list[UNUSED_LIMIT] = []\n").left_out


def test_a_module_that_spells_no_name_left_to_reach_is_not_read() -> None:
    generated = {
        "pkg/server.py": "from ._mod import used\nused(None)\n",
        "pkg/schemas.py": "SCHEMA = {'type': 'object', 'description': 'used by nothing'}\n",
        "pkg/README.md": "unused_helper",
    }
    asked: list[str] = []

    def code_of(path: str) -> CodeType:
        asked.append(path)
        return compile(generated[path], path, "exec")

    kept = trim_runtime(generated, {"pkg/_mod.py": COPY}, lambda module: (), code_of)
    assert asked == ["pkg/server.py"]  # schemas.py spells `used` only, reached by then; README.md is not code
    assert kept["pkg/_mod.py"].left_out == ("Unexported", "UNUSED_LIMIT", "unused_helper")
