"""The README is the first hour's page and the way into docs/; every link of the project's pages
leads somewhere: a file that exists, a heading that is there."""

import re
from pathlib import Path

import pytest

from mdread import DOCS, README, ROOT, anchors, links, pages

# The README's budget: what a newcomer reads in one sitting.
README_MAX_BYTES = 25 * 1024
# Pages whose links are checked: the README, docs/, and the module's and the samples' READMEs.
LINKED = pages() + [ROOT / "infra" / "README.md", ROOT / "events" / "README.md"]


def test_the_readme_stays_short():
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes, over {README_MAX_BYTES}: move the detail to docs/"


def test_the_readme_links_every_page_of_docs():
    targets = {Path(t.split("#")[0]).name for _, t in links(README.read_text()) if t.startswith("docs/")}
    missing = sorted(p.name for p in DOCS.glob("*.md") if p.name not in targets)
    assert not missing, f"README.md links no docs/ page named {missing}"


@pytest.mark.parametrize("page", LINKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_leads_somewhere(page):
    bad = []
    for line, target in links(page.read_text()):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.name}:{line}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{page.name}:{line}: {target}: no heading with that anchor in {dest.name}")
    assert not bad, "\n".join(bad)
