"""Every relative link in the README, the changelog and docs/ points at a file or folder of the repository, and every
`#anchor` at a heading of its target."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    text = FENCE.sub("", path.read_text())
    out = set()
    for title in re.findall(r"^#+\s+(.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _links(path: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", path.read_text()))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for link in _links(doc):
        if re.match(r"^[a-z]+:", link) or link.startswith("mailto:"):
            continue  # http(s) and other schemes: not checked here
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        outside = ROOT not in path.parents and path != ROOT
        missing = not path.exists() or outside
        if missing or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(link)
    assert not broken, f"{doc.relative_to(ROOT)}: broken links {broken}"


def test_the_docs_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in DOCS}
    assert {"README.md", "docs/architecture.md", "docs/benchmarks.md"} <= names


WORK_LOG = re.compile(r"\b[Ss]essions? \d|\b[Ii]ssues? #?\d|STATE\.md|[Ww]ork periods?\b|\bhelper (?:branch|session)")


def test_no_work_log_references_in_the_repository() -> None:
    """State for the next developer lives outside the repository: its files name no work periods or issue numbers."""
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for folder in ("docs", "bench", "scripts", "tests", "dbt", "examples", "sample_project"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in {".md", ".py", ".sh", ".sql", ".yml"}]
    me = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in files if p.resolve() != me and p.is_file()
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if WORK_LOG.search(line)]
    assert not found, "\n".join(found)
