"""The book's sources and notebooks agree, every notebook is executed, and links are derived from pyproject.

(The notebooks' outputs themselves are checked by ``pytest --nbval book/``,
which the README's test command includes.)
"""
from __future__ import annotations

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
    assert _inputs(jupytext.read(md)) == _inputs(jupytext.read(ipynb)), \
        f"{md.name} and {ipynb.name} differ: run python tools/book.py execute {md.stem}"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_code_cell_was_executed_under_the_fast_profile(md: Path):
    nb = json.loads(md.with_suffix(".ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a chapter without code checks nothing"
    unrun = [i for i, c in enumerate(code)
             if c.get("execution_count") is None and "nbval-skip" not in c.get("metadata", {}).get("tags", [])]
    assert unrun == [], f"code cells {unrun} were never executed (nbval would check nothing there)"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "cells were not executed top to bottom in one kernel"
    printed = "".join("".join(o.get("text", "")) for o in code[0]["outputs"])
    assert "profile: fast" in printed, "the first code cell must print the profile (setup_notebook)"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_colab_badge_and_install_cell_come_from_pyproject(md: Path):
    text = md.read_text()
    assert book_tool.colab_badge(md.with_suffix(".ipynb").name) in text
    assert book_tool.install_line() in text
    assert book_tool.expected_text(md) == text, "run python tools/book.py links"
    badge_target = re.search(r"colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/(book/[^)]+)", text)
    assert badge_target and (ROOT / badge_target.group(1)).exists()


def test_myst_toc_lists_exactly_the_chapters():
    toc = re.findall(r"- file: (\S+)", (ROOT / "myst.yml").read_text())
    assert toc == [f"book/{p.with_suffix('.ipynb').name}" for p in CHAPTERS]
    assert all((ROOT / f).exists() for f in toc)


def test_every_citation_is_in_the_bibliography():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    for md in CHAPTERS:
        cited = set(re.findall(r"\{cite:[pt]\}`([^`]+)`", md.read_text()))
        cited = {k.strip() for group in cited for k in group.split(",")}
        assert cited <= keys, f"{md.name} cites unknown keys {cited - keys}"
