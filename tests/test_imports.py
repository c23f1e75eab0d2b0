"""codegen/imports.py: a generated module imports what its code uses, read from the module itself."""

from __future__ import annotations

import pytest

from fusiongen.codegen.imports import ImportProblem, RuntimeSource, with_imports

RUNTIME = RuntimeSource("_runtime", frozenset({"ToolError", "Block", "run_tool", "MISSING", "reader"}))
GATE = RuntimeSource("_gate", frozenset({"Gate", "forbidden"}))
CATALOG = RuntimeSource("_catalog", frozenset({"forbidden", "Resources"}))

HEAD = '''"""A module."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Final

import mcp_types as types

from . import inputs, schemas
'''


def imports(body: str, *sources: RuntimeSource) -> str:
    return with_imports("pkg/server.py", HEAD + body, sources or (RUNTIME,))


def test_the_runtime_names_the_code_uses_are_imported_and_no_others() -> None:
    text = imports("\n\ndef call(name: str) -> Any:\n    return run_tool(name, schemas.X)\n")
    assert "from ._runtime import run_tool\n" in text
    assert "ToolError" not in text and "Block" not in text


def test_what_the_template_imports_keeps_only_what_the_code_uses() -> None:
    text = imports("\n\ndef call(x: Mapping[str, Any]) -> Any:\n    return inputs.parse(x)\n")
    assert "from collections.abc import Mapping\n" in text  # Awaitable went
    assert "from typing import Any\n" in text  # Final went
    assert "import mcp_types" not in text  # a statement left empty goes
    assert "from . import inputs\n" in text
    assert "from __future__ import annotations\n" in text  # whatever the code uses


def test_an_annotation_is_a_use() -> None:
    text = imports("\n\nLIMIT: Final[int] = 3\n\n\ndef shaped(src: object) -> Block:\n    ...\n")
    assert "from typing import Final\n" in text and "from ._runtime import Block\n" in text


def test_a_name_the_module_binds_or_a_function_shadows_is_not_imported() -> None:
    body = "\n\nMISSING = object()\n\n\ndef call(reader: Any) -> Any:\n    return reader(MISSING)\n"
    text = imports(body)
    assert "from ._runtime" not in text


def test_words_in_strings_comments_and_attributes_import_nothing() -> None:
    body = '\n\ndef call(x: Any) -> Any:\n    """Raises ToolError."""\n    # run_tool is not called\n'
    body += '    return x.Block, "reader"\n'
    assert "from ._runtime" not in imports(body)


def test_names_in_nested_scopes_and_classes_are_uses() -> None:
    body = "\n\nclass Tools:\n    error = ToolError\n\n    def listed(self) -> Any:\n"
    body += "        return [reader(t) for t in (lambda: MISSING)()]\n"
    text = imports(body)
    assert "from ._runtime import MISSING, ToolError, reader\n" in text


def test_one_statement_per_source_in_the_order_listed() -> None:
    text = imports("\n\nx = (Gate, run_tool, inputs, schemas)\n", GATE, RUNTIME)
    assert "from . import inputs, schemas\nfrom ._gate import Gate\nfrom ._runtime import run_tool\n\n" in text


def test_a_name_two_sources_offer_is_a_generator_bug() -> None:
    with pytest.raises(ImportProblem, match="'forbidden' is offered by _gate and _catalog"):
        imports("\n\nx = forbidden\n", GATE, CATALOG)
    assert "from ._gate import Gate\n" in imports("\n\nx = Gate\n", GATE, CATALOG)  # unused: no ambiguity


def test_a_parenthesised_import_is_rewritten_whole() -> None:
    text = with_imports(
        "pkg/m.py",
        "from typing import (\n    Any,\n    Final,\n)\n\nX: Final = 1\n",
        (),
    )
    assert text == "from typing import Final\n\nX: Final = 1\n"


def test_every_generated_module_but_the_package_init_gets_its_imports_written() -> None:
    from fusiongen.codegen.render import PACKAGE_TEMPLATES, RUNTIME_SOURCES
    from fusiongen.names import RUNTIME_MODULES

    assert set(RUNTIME_SOURCES) == {name for _, name, _ in PACKAGE_TEMPLATES} - {"__init__.py"}
    assert {m for sources in RUNTIME_SOURCES.values() for m in sources} <= set(RUNTIME_MODULES)
