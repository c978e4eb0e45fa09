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
MAKING_OF = re.compile(r"text copy|seed text|seed texts|lost the symbols|lost its symbols|retract"
                       r"|earlier version of this chapter", re.I)


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
    assert heading and heading.start() < prerequisites.start() < run_time.start(), \
        f"{md.name}: the order must be '## Learning objectives', then '**Prerequisites:**', then '**Run time:**'"


def test_no_chapter_speaks_of_the_books_own_making():
    found = [f"{md.name}:{i}: {line.strip()}"
             for md in sorted(BOOK.glob("*.md"))
             for i, line in enumerate(md.read_text().splitlines(), 1) if MAKING_OF.search(line)]
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
