"""Every chapter of the book is a lesson: it opens with what a reader will be able to do,
what they need first, and how long its notebook runs; and its reader's path says nothing
about the book's own making (its sources' extraction, its earlier versions).

The form each chapter uses, right under its title and introduction (book/README.md):

    ## Learning objectives

    - After this chapter you can ...
    - ...            (3 to 5 bullets)

    **Prerequisites:** linked chapters and the maths needed.

    **Run time:** about N minutes in Colab on a CPU.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
# the chapters 00_ to 12_; the appendices (90_ notation, 91_ claims) are reference pages, not lessons
LESSONS = sorted(p for p in BOOK.glob("[01]*.md") if re.match(r"(0\d|1[0-2])\w*_", p.name))

# sentences about the book's own sources, their extraction or its earlier versions (issue 40, item 6)
MAKING_OF = re.compile(
    r"text copy|seed text|seed texts|lost the symbols|lost its symbols|retract|we worked from|lost in the text"
    r"|earlier version of this chapter",
    re.I,
)


def _body(md: Path) -> str:
    """The chapter without its jupytext front matter."""
    text = md.read_text()
    return text.split("---\n", 2)[2] if text.startswith("---\n") else text


def _objectives(body: str) -> list[str] | None:
    """The bullets under ``## Learning objectives``, or None without that heading."""
    m = re.search(r"^## Learning objectives[ \t]*\n(.*?)(?=^#|^\*\*Prerequisites:\*\*|\Z)", body, re.M | re.S)
    if m is None:
        return None
    return re.findall(r"^[-*] +\S.*$", m.group(1), re.M)


def test_the_lessons_are_found():
    names = {p.stem for p in LESSONS}
    assert {"00_preface", "04_decentralized_fedavg", "12_tutorial_own_algorithm"} <= names
    assert not any(n.startswith(("90_", "91_")) for n in names)


@pytest.mark.parametrize("md", LESSONS, ids=lambda p: p.stem)
def test_chapter_opens_with_learning_objectives(md: Path):
    bullets = _objectives(_body(md))
    assert bullets is not None, f"{md.name}: no '## Learning objectives' heading"
    assert 3 <= len(bullets) <= 5, f"{md.name}: {len(bullets)} learning objectives; allowed: 3 to 5 bullets"


@pytest.mark.parametrize("md", LESSONS, ids=lambda p: p.stem)
def test_chapter_states_prerequisites_and_run_time(md: Path):
    body = _body(md)
    prerequisites = re.search(r"^\*\*Prerequisites:\*\* *\S", body, re.M)
    run_time = re.search(r"^\*\*Run time:\*\* *\S", body, re.M)
    assert prerequisites, f"{md.name}: no line starting '**Prerequisites:**' followed by text"
    assert run_time, f"{md.name}: no line starting '**Run time:**' followed by text"
    heading = re.search(r"^## Learning objectives", body, re.M)
    assert heading and heading.start() < prerequisites.start() < run_time.start(), (
        f"{md.name}: the order must be '## Learning objectives', then '**Prerequisites:**', then '**Run time:**'"
    )


def test_no_chapter_speaks_of_the_books_own_making():
    found = [
        f"{md.name}:{i}: {line.strip()}"
        for md in sorted(BOOK.glob("*.md"))
        for i, line in enumerate(md.read_text().splitlines(), 1)
        if MAKING_OF.search(line)
    ]
    assert found == [], "sentences about the book's sources or earlier versions:\n" + "\n".join(found)


def test_the_checks_can_fail():
    """The parsers above reject what they should (a test that cannot fail checks nothing)."""
    assert _objectives("# T\n\nno heading\n") is None
    two = "## Learning objectives\n\n- one\n- two\n\n**Prerequisites:** none\n"
    assert len(_objectives(two)) == 2
    five = "## Learning objectives\n\n" + "".join(f"- item {i}\n" for i in range(5)) + "\n**Prerequisites:** x\n"
    assert len(_objectives(five)) == 5
    assert MAKING_OF.search("The text copy of the paper")
    assert MAKING_OF.search("we Retract it") and not MAKING_OF.search("the paper's protocol")


def _syllabus() -> str:
    text = (BOOK / "00_preface.md").read_text()
    m = re.search(r"^### A six-week syllabus\n(.*?)(?=^#)", text, re.M | re.S)
    assert m, "00_preface.md: no '### A six-week syllabus' section"
    return m.group(1)


def test_the_syllabus_covers_six_weeks_and_every_chapter():
    rows = [line for line in _syllabus().splitlines() if re.match(r"^\| *\d+ *\|", line)]
    assert [int(r.split("|")[1]) for r in rows] == [1, 2, 3, 4, 5, 6], rows
    named = set(re.findall(r"\b(\d{2,3}[a-z]?) \(\d+ min\)", _syllabus()))
    chapters = {md.name.split("_")[0] for md in LESSONS}
    assert chapters - named == set(), f"chapters missing from the syllabus: {sorted(chapters - named)}"


def test_the_syllabus_run_times_are_the_chapters_own():
    """Each '(N min)' of the syllabus is the 'about N minutes' of that chapter's **Run time:** line."""
    stated = {nn: int(minutes) for nn, minutes in re.findall(r"\b(\d{2,3}[a-z]?) \((\d+) min\)", _syllabus())}
    wrong = []
    for md in LESSONS:
        nn = md.name.split("_")[0]
        line = re.search(r"^\*\*Run time:\*\*.*?(\d+) minutes?", _body(md), re.M)
        if nn in stated and line and int(line.group(1)) != stated[nn]:
            wrong.append(f"{md.name}: syllabus {stated[nn]} min, chapter {line.group(1)} min")
    assert wrong == [], "\n".join(wrong)


# ------------------------------------------------------------------------------- a lesson's size (issue 40, item 2)
#: A chapter's main path fits one class session: at most this much prose and this many code cells. The main path
#: is everything but the sections "Going further", "Exercises" and "References" and the solutions.
MAX_MAIN_WORDS, MAX_MAIN_CELLS = 2200, 35
#: No output cell prints a wall of verdicts: a family of more comparisons is a figure (plots.paired_differences).
MAX_VERDICT_LINES = 12
OFF_PATH = ("going further", "exercises", "references")
VERDICT = re.compile(r"\b(REPRODUCED|REVERSED|EQUIVALENT|UNRESOLVED)\b")
#: sympy's plain-text form of a product or a power (K*eta*(32*Gamma ...): formulas are typeset instead
RAW_SYMPY = re.compile(r"\b[A-Za-z_]\w*\*{1,2}[A-Za-z_(]")


def _notebook(md: Path) -> dict:
    import json

    return json.loads(md.with_suffix(".ipynb").read_text())


def main_path(notebook: dict) -> tuple[int, int]:
    """(words of prose, code cells) of the main path: math blocks, link targets and HTML tags are not words."""
    words = cells = 0
    off = False
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if "solution" in tags or "references" in tags:
            continue
        if cell["cell_type"] == "code":
            cells += 0 if off else 1
            continue
        if cell["cell_type"] != "markdown":
            continue
        # a markdown cell may hold main-path prose and then an off-path heading (or the reverse): each part
        # between headings counts by the heading above it
        for part in re.split(r"^(?=#{1,2} )", source, flags=re.M):
            heading = re.match(r"#{1,2} (.+)", part)
            if heading:
                off = heading.group(1).strip().lower().startswith(OFF_PATH)
            if not off:
                text = re.sub(r"\$\$.*?\$\$", " ", part, flags=re.S)
                text = re.sub(r"<[^>]+>", " ", re.sub(r"\]\([^)]*\)", "]", text))
                words += len(re.findall(r"[A-Za-zÀ-ÿ][\w'’-]*", text))
    return words, cells


def _outputs(notebook: dict):
    """Each output as a reader sees it: ``(cell, its plain text, all its text)``. A display with a Markdown form
    (also shown as HTML) is read in that form; its ``text/plain`` is the same text, shown only where nothing
    renders (a terminal), so it is not counted twice."""
    for i, cell in enumerate(notebook["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            data = out.get("data", {})
            rich = "".join(data.get("text/markdown", ""))
            plain = "".join(out.get("text", "")) + ("" if rich else "".join(data.get("text/plain", "")))
            yield i, plain, plain + rich


@pytest.mark.parametrize("md", LESSONS, ids=lambda p: p.stem)
def test_the_main_path_fits_a_session(md: Path):
    words, cells = main_path(_notebook(md))
    assert words <= MAX_MAIN_WORDS, f"{md.name}: {words} words of prose on the main path; at most {MAX_MAIN_WORDS}"
    assert cells <= MAX_MAIN_CELLS, f"{md.name}: {cells} code cells on the main path; at most {MAX_MAIN_CELLS}"


@pytest.mark.parametrize("md", LESSONS, ids=lambda p: p.stem)
def test_no_output_is_a_wall_of_verdicts_or_raw_sympy(md: Path):
    for i, plain, text in _outputs(_notebook(md)):
        lines = sum(1 for line in text.splitlines() if VERDICT.search(line))
        assert lines <= MAX_VERDICT_LINES, f"{md.name} cell {i}: {lines} lines of verdicts; at most {MAX_VERDICT_LINES}"
        assert not RAW_SYMPY.search(plain), f"{md.name} cell {i}: raw sympy text {RAW_SYMPY.findall(plain)[:3]}"


def test_the_size_checks_can_fail():
    prose = {"cell_type": "markdown", "source": ["# T\n\n" + "word " * 50], "metadata": {}}
    code = {"cell_type": "code", "source": ["x = 1"], "metadata": {}, "outputs": []}
    aside = {"cell_type": "markdown", "source": ["## Going further\n\n" + "more " * 500], "metadata": {}}
    solution = {"cell_type": "code", "source": ["y = 2"], "metadata": {"tags": ["solution"]}, "outputs": []}
    assert main_path({"cells": [prose, code, aside, code, solution]}) == (51, 1)
    math = {"cell_type": "markdown", "source": ["$$\na = b\n$$\n[a link](https://x.org/long/path)"], "metadata": {}}
    assert main_path({"cells": [math]}) == (2, 0)
    # a cell that ends the main path and opens "Going further" counts its first part only
    mixed = {
        "cell_type": "markdown",
        "source": ["word " * 7 + "\n\n## Going further\n\n" + "more " * 100],
        "metadata": {},
    }
    assert main_path({"cells": [prose, mixed]}) == (58, 0)
    assert RAW_SYMPY.search("a = K*eta*(32*Gamma*K**2)") and not RAW_SYMPY.search("**REPRODUCED**: 3 * 4")
