"""The documentation stays true: the API reference is the route table's, and every link in the
README and docs/ resolves inside the repository (a file, and a heading where it names one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

from leafsearch.rest.reference import render

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_api_reference_is_generated_from_the_route_table() -> None:
    written = (REPO / "docs" / "api-reference.md").read_text()
    assert written == render(), "regenerate: python -m leafsearch.rest.reference > docs/api-reference.md"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_resolve_inside_the_repository(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), f"{page.name}: [{target}] leaves the repository"
        assert resolved.exists(), f"{page.name}: [{target}] does not exist"
        if anchor:
            assert anchor in _anchors(resolved), f"{page.name}: no heading [{anchor}] in {resolved.name}"
