"""The book builds as a MyST site with strict cross-references and citations.

Offline, mystmd cannot download its HTML theme, so ``myst build --site
--strict`` runs against a stub theme: it still resolves every cross-reference
and citation and writes the site's content, which is checked here: the
chapters' portable forms (book/README.md) must come out as MyST citations,
cross-references and page links, not as plain links. How the same notebooks
read in Jupyter and Colab is checked by tests/test_book_render.py.

Needs node (for mystmd; ``scripts/setup.sh`` installs it). Without it these
tests skip, except when ``DFL_REQUIRE_ALL=1`` (as in CI), where they fail.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYST = Path(sys.executable).with_name("myst")
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]*_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)


def need(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("DFL_REQUIRE_ALL") == "1":
        pytest.fail(f"{what} is missing (DFL_REQUIRE_ALL=1); run scripts/setup.sh")
    pytest.skip(f"{what} is missing; run scripts/setup.sh")


def build_site(tmp: Path) -> subprocess.CompletedProcess:
    """``myst build --site --strict`` on a copy of the book, with a stub theme (no network)."""
    theme = tmp / "_build" / "templates" / "site" / "myst" / "book-theme"
    theme.mkdir(parents=True)
    (theme / "template.yml").write_text("myst: v1\nkind: site\ntitle: stub\n")
    return subprocess.run([str(MYST), "build", "--site", "--strict"], cwd=tmp, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "CI": "1"})


def nodes(tree: dict):
    yield tree
    for child in tree.get("children", []) or []:
        yield from nodes(child)


def text_of(node: dict) -> str:
    return (node.get("value") or "") + "".join(text_of(c) for c in node.get("children", []) or [])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, dict]:
    """The strict site build of a copy of the book: ``{page slug: page JSON}``."""
    copy = book_copy_in(tmp_path_factory.mktemp("site"))
    result = build_site(copy)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in (copy / "_build" / "site" / "content").glob("*.json")}


def book_copy_in(tmp: Path) -> Path:
    need(MYST.exists() and shutil.which("node") is not None, "mystmd (pip) and node")
    shutil.copy(ROOT / "myst.yml", tmp)
    shutil.copytree(ROOT / "book", tmp / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    return tmp


def test_myst_site_builds_strictly_with_every_page(site: dict[str, dict]):
    # mystmd names the first page "index" and the others by file name without the leading digits and their
    # separator ("03b_compression_privacy" becomes "b-compression-privacy")
    expected = {"index"} | {re.sub(r"^\d+[_-]?", "", nb.stem).replace("_", "-") for nb in NOTEBOOKS[1:]}
    assert set(site) == expected
    for slug, page in site.items():
        text = json.dumps(page)
        assert "Traceback" not in text and '"output_type":"error"' not in text.replace(" ", ""), slug


def test_portable_forms_become_citations_cross_references_and_page_links(site: dict[str, dict]):
    """What Jupyter shows as links, the site resolves: cite: links, #anchors and NN_x.ipynb links."""
    cited = 0
    for slug, page in site.items():
        tree = list(nodes(page["mdast"]))
        links = [n for n in tree if n["type"] == "link"]
        assert not [n["url"] for n in links if n.get("url", "").startswith("cite:")], slug
        assert all(n.get("internal") or n.get("url", "").startswith("http") for n in links), \
            (slug, [n.get("url") for n in links if not n.get("internal")])
        assert all(n.get("resolved") for n in tree if n["type"] == "crossReference"), slug
        for group in (n for n in tree if n["type"] == "citeGroup"):
            keys = [c["label"] for c in group["children"]]
            parenthetical = group["kind"] == "parenthetical"
            rendered = "; ".join(text_of(c) for c in group["children"])
            # the site's author-year text is the one tools/book.py writes for Jupyter readers
            assert book_tool.cite_text(keys, parenthetical) == (f"({rendered})" if parenthetical else rendered)
            cited += len(keys)
        # the site lists every cited work at the end of its page
        assert {c["label"] for n in tree if n["type"] == "citeGroup" for c in n["children"]} \
            == set(page.get("references", {}).get("cite", {}).get("order", [])), slug
    assert cited > 50


def test_equations_carry_one_number_each(site: dict[str, dict]):
    """MyST must not number equations itself: the \\tag{N} that Jupyter shows is the only number."""
    maths = [n for page in site.values() for n in nodes(page["mdast"]) if n["type"] == "math"]
    tagged = [n for n in maths if "\\tag{" in n["value"]]
    assert len(tagged) >= 20
    assert not [n for n in maths if n.get("enumerator")], "MyST numbered an equation (numbering.equation)"


def test_solutions_are_collapsed_on_the_site(site: dict[str, dict]):
    blocks = [n for page in site.values() for n in nodes(page["mdast"]) if n["type"] == "block"]
    hidden = [n for n in blocks if n.get("visibility") == "hide"]
    assert hidden, "no collapsed solution cell (hide-cell) on the site"


def test_broken_references_fail_the_build(tmp_path: Path):
    """A link to a missing chapter, to a missing anchor and to an unknown citation each fail the build."""
    copy = book_copy_in(tmp_path)
    for old, new in [("(02_server_to_graph.ipynb)", "(02_no_such_chapter.ipynb)"),
                     ("(#eq-sam-step)", "(#eq-no-such-label)"), ("(cite:shi2023dfedsam)", "(cite:nobody2099)")]:
        changed = [nb for nb in sorted((copy / "book").glob("[0-9]*.ipynb")) if old in nb.read_text()]
        assert changed, f"no chapter contains {old}"
        changed[0].write_text(changed[0].read_text().replace(old, new, 1))
    result = build_site(copy)
    assert result.returncode != 0
    for reported in ["02_no_such_chapter.ipynb", "eq-no-such-label", "nobody2099"]:
        assert reported in result.stdout + result.stderr, reported
