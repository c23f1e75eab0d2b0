"""The documents hold together: every `§N.N` they cite (and every one fusiongen's own text cites, which reaches
users in hints, generated files and EXPOSURE.md) names a section that exists, each section number is used once,
and docs/architecture.md names every runtime module a server can be given."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fusiongen.cli import DOCUMENT_FILES, Document
from fusiongen.names import RUNTIME_MODULES
from tests.support.processes import run

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.M)
# A citation: `§4`, `§10.7`; `openapi.md §2` cites that document; a standard's section (`RFC 9110 §5.5`,
# `JSON Schema 2020-12 §7.3.1`) is the standard's.
CITATION = re.compile(r"(?P<before>(?:RFC\s+\d+|JSON\s+Schema\s+[\d-]+|openapi\.md)\s*)?§(?P<number>\d+(?:\.\d+)*)")


def sections(document: Path) -> list[str]:
    """The section numbers of a document's headings (a `# comment` inside a code block is no heading)."""
    prose: list[str] = []
    fence = ""  # the open fence (three or more backticks), if any
    for line in document.read_text(encoding="utf-8").splitlines():
        run = re.match(r"\s*(`{3,})", line)
        if not fence and run:
            fence = run.group(1)
        elif fence and run and run.group(1).startswith(fence) and not line.strip().strip("`"):
            fence = ""
        elif not fence:
            prose.append(line)
    return HEADING.findall("\n".join(prose))


def citing_files() -> list[Path]:
    sources = [*DOCS.glob("*.md"), ROOT / "README.md", ROOT / "CHANGELOG.md"]
    sources += sorted((ROOT / "fusiongen").rglob("*.py")) + sorted((ROOT / "fusiongen").rglob("*.j2"))
    return [p for p in sources if p.is_file()]


def test_every_section_citation_names_a_section() -> None:
    known = {"spec.md": set(sections(DOCS / "spec.md")), "openapi.md": set(sections(DOCS / "openapi.md"))}
    assert {"6.7", "7.6", "14.7", "10.5"} <= known["spec.md"]
    wrong: list[str] = []
    cited = 0
    for path in citing_files():
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            before = match.group("before") or ""
            if before and not before.startswith("openapi.md"):
                continue
            document = "openapi.md" if before.startswith("openapi.md") else "spec.md"
            cited += 1
            if match.group("number") not in known[document]:
                line = text.count("\n", 0, match.start()) + 1
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line}: §{match.group('number')} is not a section of {document}"
                )
    assert cited > 100  # the scan found the citations
    assert wrong == []


def test_each_section_number_is_used_once() -> None:
    for document in ("spec.md", "openapi.md"):
        numbers = Counter(sections(DOCS / document))
        assert [n for n, count in numbers.items() if count > 1] == [], document


def test_the_architecture_names_every_runtime_module() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert [m for m in RUNTIME_MODULES if f"`{m}.py`" not in text and f"`{m}`" not in text] == []


@pytest.mark.parametrize("document", list(Document))
def test_the_docs_command_prints_each_document_as_installed(document: Document, tmp_path: Path) -> None:
    # An editable install reads the checkout (a wheel's copy is tests/test_readme.py's).
    name = DOCUMENT_FILES[document]
    source = DOCS / name if (DOCS / name).is_file() else ROOT / name
    printed = run("docs", document.value, cwd=tmp_path)
    assert printed.code == 0 and printed.stdout == source.read_text(encoding="utf-8"), printed.stderr
    located = run("docs", document.value, "--path", cwd=tmp_path)
    assert located.stdout == f"{source}\n"
