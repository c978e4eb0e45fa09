"""The book's sources and notebooks agree, every notebook is executed, and links are derived from pyproject.

(The notebooks' outputs themselves are checked by ``pytest --nbval book/``,
which the README's test command includes.)
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)

CHAPTERS = book_tool.chapters()


def _inputs(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_chapters():
    assert {p.stem for p in CHAPTERS} >= {"00_preface", "02_server_to_graph", "90_notation"}


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_md_and_ipynb_hold_the_same_inputs(md: Path):
    ipynb = md.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: run python tools/book.py execute {md.stem}"
    assert _inputs(jupytext.read(md)) == _inputs(jupytext.read(ipynb)), (
        f"{md.name} and {ipynb.name} differ: run python tools/book.py execute {md.stem}"
    )


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_code_cell_was_executed_under_the_fast_profile(md: Path):
    nb = json.loads(md.with_suffix(".ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a chapter without code checks nothing"
    unrun = [
        i
        for i, c in enumerate(code)
        if c.get("execution_count") is None and "nbval-skip" not in c.get("metadata", {}).get("tags", [])
    ]
    assert unrun == [], f"code cells {unrun} were never executed (nbval would check nothing there)"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "cells were not executed top to bottom in one kernel"
    printed = "".join("".join(o.get("text", "")) for o in code[0]["outputs"])
    assert "profile: fast" in printed, "the first code cell must print the profile (setup_notebook)"


#: A chapter's whole run, on 2 CPU cores (book/README.md asks authors for 60 s, to leave room on slower CPUs).
CHAPTER_LIMIT_S = 90


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_the_stored_run_took_under_the_chapter_limit(md: Path):
    """First cell started to last cell finished, as the executed notebook records it (tools/book.py execute)."""
    cells = json.loads(md.with_suffix(".ipynb").read_text())["cells"]
    stamps = sorted(
        datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
        for c in cells
        for t in c["metadata"].get("execution", {}).values()
    )
    assert stamps, f"{md.stem}: no execution times recorded: run python tools/book.py execute {md.stem}"
    seconds = (stamps[-1] - stamps[0]).total_seconds()
    assert seconds < CHAPTER_LIMIT_S, f"{md.stem} ran {seconds:.0f} s, over the {CHAPTER_LIMIT_S} s a chapter may take"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_colab_badge_and_install_cell_come_from_pyproject(md: Path):
    text = md.read_text()
    assert book_tool.colab_badge(md.with_suffix(".ipynb").name) in text
    assert book_tool.install_line() in text
    assert book_tool.expected_text(md) == text, "run python tools/book.py links"
    badge_target = re.search(r"colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/(book/[^)]+)", text)
    assert badge_target and (ROOT / badge_target.group(1)).exists()


def test_myst_toc_lists_exactly_the_chapters_then_the_guide():
    """The chapters in order, then the guide pages of docs/ (the README's long sections; the order of the
    guide is the README's to choose, tests/test_readme.py checks that it links each page)."""
    toc = re.findall(r"- file: (\S+)", (ROOT / "myst.yml").read_text())
    chapters = [f for f in toc if not f.startswith("docs/")]
    assert chapters == [f"book/{p.with_suffix('.ipynb').name}" for p in CHAPTERS]
    assert toc[: len(chapters)] == chapters, "the guide pages come after the chapters"
    assert sorted(toc[len(chapters) :]) == sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    assert all((ROOT / f).exists() for f in toc)


def test_every_citation_is_in_the_bibliography():
    keys = set(book_tool.bibliography())
    for md in CHAPTERS:
        cited = book_tool.cite_keys(md.read_text())
        assert cited <= keys, f"{md.name} cites unknown keys {cited - keys}"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_uses_only_portable_syntax(md: Path):
    """No MyST role, directive or target that Jupyter and Colab would show raw; every link lands."""
    text = md.read_text()
    problems = book_tool.leftovers(text) + book_tool.broken_links(text, md.with_suffix(".ipynb").name)
    assert problems == [], "see book/README.md, 'Citations, links and equations':\n" + "\n".join(problems)


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_derived_text_is_up_to_date(md: Path):
    """Citation texts, equation numbers and their references, as tools/book.py derives them."""
    assert book_tool.expected_text(md) == md.read_text(), f"run python tools/book.py links ({md.name})"


def test_derivations_on_a_small_chapter(tmp_path: Path):
    text = (
        "# T\n\nSee [x](cite:shi2023dfedsam,lee2024fedgf) and [(x)](cite:lee2024fedgf), eq. [(9)](#eq-b), "
        '[](02_server_to_graph.ipynb), [(5)](02_server_to_graph.ipynb#eq-gossip).\n\n<span id="eq-a"></span>\n\n$$\na \\tag{7}\n$$\n\n'
        '<span id="eq-b"></span>\n\n$$\nb\n$$\n\n```{code-cell} ipython3\nx = "[x](cite:lee2024fedgf)"\n```\n'
    )
    md = tmp_path / "99_t.md"
    want = book_tool.expected_text(md, text)
    server = book_tool.page_urls()["02_server_to_graph.ipynb"]
    assert '[Shi et al. (2023); Lee & Yoon (2024)](#ref-shi2023dfedsam "cite:shi2023dfedsam,lee2024fedgf")' in want, (
        "several works: a link to the first, every key in the title"
    )
    assert "[(Lee & Yoon, 2024)](#ref-lee2024fedgf)" in want
    assert "a \\tag{1}\n$$" in want and "b \\tag{2}\n$$" in want and "eq. [(2)](#eq-b)" in want
    assert f"[From a server to a graph]({server})" in want
    gossip = book_tool.equation_numbers(ROOT.joinpath("book", "02_server_to_graph.md").read_text())["eq-gossip"]
    assert f"[({gossip})]({server}#eq-gossip)" in want, "an equation of another chapter: its number, its page"
    assert 'x = "[x](cite:lee2024fedgf)"' in want, "code cells are never rewritten"
    assert book_tool.leftovers("Text {cite:p}`k` and\n(sec-x)=\n```{note}\nn\n```\n$$ x $$ (eq-x)\n[](#a)") != []
    # the reference list: the last cell, once, every cited work with its anchor and its arXiv / DOI link
    assert want.count(book_tool.REFERENCES_MARKER) == 1
    references = want[want.index(book_tool.REFERENCES_MARKER) :]
    assert references.count("<span id=") == 2 and want.rstrip().endswith(references.rstrip())
    assert '<span id="ref-lee2024fedgf"></span>Taehwan Lee and Sung Whan Yoon (2024). ' in references
    assert "[arXiv:2302.04083](https://arxiv.org/abs/2302.04083)" in references
    assert book_tool.expected_text(md, want) == want, "links is idempotent"
    assert book_tool.cite_keys(want) == {"shi2023dfedsam", "lee2024fedgf"}
    assert book_tool.broken_links(want, md.with_suffix(".ipynb").name) == []
    # citing nothing any more: the list goes
    plain = book_tool.expected_text(
        md,
        want.replace("[(Lee & Yoon, 2024)](#ref-lee2024fedgf)", "x").replace(
            '[Shi et al. (2023); Lee & Yoon (2024)](#ref-shi2023dfedsam "cite:shi2023dfedsam,lee2024fedgf")', "y"
        ),
    )
    assert book_tool.REFERENCES_MARKER not in plain and "ref-" not in plain


def test_broken_links_are_reported():
    """What would not resolve in a notebook opened alone, or on the site, is reported."""
    server = book_tool.page_urls()["02_server_to_graph.ipynb"]
    text = (
        f"# T\n\n[a]({book_tool.book_url()}/no-such-page) [b]({server}#no-such-anchor) [c](../README.md) "
        f"[d](no_such_chapter.ipynb) [e](#nowhere) ![f](_static/x.png) [fine]({server}) [fine](https://arxiv.org)\n\n"
        '<span id="ref-mine"></span>\n'
    )
    problems = book_tool.broken_links(text, "99_t.ipynb")
    for bad in [
        "no-such-page",
        "#no-such-anchor",
        "../README.md",
        "no_such_chapter.ipynb",
        "#nowhere",
        "_static/x.png",
        "ref-mine",
    ]:
        assert sum(bad in p for p in problems) == 1, (bad, problems)
    assert len(problems) == 7, problems


def test_page_urls_follow_mystmds_slugs():
    assert book_tool.page_slug("03b_compression_privacy") == "b-compression-privacy"
    assert book_tool.page_slug("09_flatness_discrepancy_fedgf") == "flatness-discrepancy-fedgf"
    assert book_tool.page_slug("2024_notes") == "2024-notes", "a leading year is kept"
    pages = book_tool.page_urls()
    assert list(pages) == [p.with_suffix(".ipynb").name for p in CHAPTERS]
    assert pages[CHAPTERS[0].with_suffix(".ipynb").name] == book_tool.book_url() + "/", "the first page is the index"
    assert len(set(pages.values())) == len(pages)
    for name, url in pages.items():
        assert book_tool.book_link(url + "#sec-x") == (name, "sec-x")
    assert book_tool.book_link("https://arxiv.org/abs/2302.04083") is None


def test_urls_are_kept_in_pyproject_only():
    """myst.yml's project.github is written from [project.urls] Repository (python tools/book.py links)."""
    myst = (ROOT / "myst.yml").read_text()
    assert book_tool.expected_myst_yml(myst) == myst, "run python tools/book.py links"
    assert f"github: {book_tool.repository_url()}\n" in myst
    assert book_tool.book_url().startswith("https://")


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_reference_list_is_the_last_cell_and_lists_what_the_chapter_cites(md: Path):
    text = md.read_text()
    cited = book_tool.cite_keys(text)
    assert text.count(book_tool.REFERENCES_MARKER) == (1 if cited else 0)
    if cited:
        references = text[text.index(book_tool.REFERENCES_MARKER) :]
        assert set(re.findall(r'<span id="ref-([^"]+)"></span>', references)) == cited
        assert "+++" not in references[3:] and "```" not in references, "the reference list is the last cell"
        cells = json.loads(md.with_suffix(".ipynb").read_text())["cells"]
        assert cells[-1]["cell_type"] == "markdown" and "references" in cells[-1]["metadata"].get("tags", [])


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_solutions_are_collapsed_in_jupyter_colab_and_the_site(md: Path):
    cells = json.loads(md.with_suffix(".ipynb").read_text())["cells"]
    for cell in cells:
        if book_tool.SOLUTION_TAG in cell["metadata"].get("tags", []):
            assert cell["metadata"] == book_tool.solution_metadata(cell), (
                f"run python tools/book.py execute {md.stem} (solution metadata missing)"
            )


def test_the_notation_table_is_written_from_the_package():
    """90_notation's table is dfl_book.notation's: a hand edit of a row is stale, and links restores it."""
    from dfl_book import notation

    md = ROOT / "book" / "90_notation.md"
    text = md.read_text()
    assert book_tool.NOTATION_MARKER + "\n\n" + notation.markdown_table() in text
    edited = text.replace("| number of clients | $m$", "| number of clients | $N$", 1)
    assert edited != text and book_tool.expected_text(md, edited) == text
