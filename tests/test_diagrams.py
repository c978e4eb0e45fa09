"""The book's conceptual diagrams (dfl_book.diagrams): each builds, deterministically, with what it promises."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from dfl_book import diagrams  # noqa: E402

DIAGRAMS = [name for name in diagrams.__all__ if callable(getattr(diagrams, name))]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def artists(fig: Figure, gid: str) -> list:
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40, metadata={"Software": None})
    return buffer.getvalue()


BOOK = Path(__file__).resolve().parents[1] / "book"


def test_every_chapter_has_a_diagram_whose_docstring_names_it():
    chapters = {"00", "01", "02", "03", "035", "04", "05", "06", "07", "08", "085", "09", "10", "11", "12", "90"}
    assert set(diagrams.CHAPTERS) == chapters
    # 035 (judging a claim) and 085 (implicit SAM) draw data figures only (dfl_book.plots), no schematic diagram
    assert set(diagrams.BY_CHAPTER) == chapters - {"035", "085"}
    # the numbers are the chapters' file numbers: every book/NN_name.md but the claims table (91) is on the map
    assert {md.name.split("_")[0] for md in BOOK.glob("[0-9][0-9]*_*.md")} - {"91"} == chapters
    assert set(diagrams.CHAPTER_DEPENDENCIES) | {
        d for ds in diagrams.CHAPTER_DEPENDENCIES.values() for d in ds
    } == chapters - {"90"}
    for chapter, names in diagrams.BY_CHAPTER.items():
        for name in names:
            assert name in DIAGRAMS and chapter in getattr(diagrams, name).__doc__.split(":")[0], (chapter, name)
    assert {n for names in diagrams.BY_CHAPTER.values() for n in names} == set(DIAGRAMS)


def test_the_map_agrees_with_every_chapters_prerequisites():
    """A chapter's **Prerequisites:** links and its arrows on the map name the same chapters, with theirs."""
    import re
    import sys

    import networkx as nx

    sys.path.insert(0, str(BOOK.parent / "tools"))
    from book import page_slug  # tools/book.py: the slug of a chapter's page (the preface's is the site's index)

    number = {page_slug(md.stem): md.name.split("_")[0] for md in BOOK.glob("[0-9][0-9]*_*.md")} | {"": "00"}
    graph = nx.DiGraph([(d, c) for c, ds in diagrams.CHAPTER_DEPENDENCIES.items() for d in ds])

    def with_theirs(chapters: set[str]) -> set[str]:
        return set().union(*(nx.ancestors(graph, c) | {c} for c in chapters))

    for chapter, first in diagrams.CHAPTER_DEPENDENCIES.items():
        body = next(BOOK.glob(f"{chapter}_*.md")).read_text()
        line = re.search(r"^\*\*Prerequisites:\*\*(.*)$", body, re.M).group(1)
        linked = {number[s] for s in re.findall(r"\]\(https://dfl-book\.github\.io/dfl-book/([a-z0-9-]*)[#)]", line)}
        assert with_theirs(linked) == with_theirs(set(first)), (chapter, sorted(linked), first)


@pytest.mark.parametrize("name", DIAGRAMS)
def test_diagram_builds_and_is_deterministic(name: str):
    first = getattr(diagrams, name)()
    assert isinstance(first, Figure) and first.axes
    again = getattr(diagrams, name)()
    assert png(first) == png(again), f"{name} draws a different picture on a second call"


def test_the_torus_shows_wrap_edges_that_the_grid_lacks():
    fig = diagrams.topology_gallery(("grid", "torus"), m=16)
    grid, torus = fig.axes
    wraps = lambda ax: [a for a in ax.get_children() if a.get_gid() == "wrap-edge"]  # noqa: E731
    assert wraps(grid) == [] and len(wraps(torus)) == 8  # 4 rows and 4 columns close on a 4 x 4 torus
    assert "λ = " in torus.get_title()


def test_chapter_map_has_every_chapter_and_dependency():
    fig = diagrams.chapter_map()
    assert len(artists(fig, "chapter")) == len(diagrams.CHAPTERS) == 16
    assert len(artists(fig, "depends")) == sum(len(v) for v in diagrams.CHAPTER_DEPENDENCIES.values())


def test_rank_layout_sends_only_across_ranks():
    assert len(artists(diagrams.rank_layout(8, 4, "ring"), "message")) == 4  # 1-2, 3-4, 5-6, 7-0
    assert len(artists(diagrams.rank_layout(8, 2, "ring"), "message")) == 2  # 3-4, 7-0
    assert len(artists(diagrams.rank_layout(8, 4, "complete"), "message")) == 28 - 4  # all pairs but in-rank ones


def test_gossip_step_and_mgs_use_the_engines_ring():
    fig = diagrams.gossip_step()
    assert "sum = 12" in fig.axes[0].get_title() and "sum = 12" in fig.axes[1].get_title()
    fig = diagrams.mgs_contraction(m=8, Q=4)
    lines = [a for a in fig.axes[0].get_lines() if a.get_gid() == "client"]
    assert len(lines) == 8
    spread = np.ptp(np.array([line.get_ydata() for line in lines]), axis=0)
    assert np.all(np.diff(spread) < 0), "each gossip step must shrink the spread"


def test_quantizer_has_two_to_the_b_levels():
    fig = diagrams.quantizer_levels(bits=3, value=1.3)
    levels = [a for a in fig.axes[0].get_lines() if a.get_gid() == "level"]
    assert len(levels) == 3 and all(len(line.get_xdata()) == 8 for line in levels)


def test_no_arrow_of_the_chapter_map_crosses_another_chapter_s_box():
    pos, (width, height) = diagrams.chapter_positions(), diagrams.CHAPTER_BOX
    half_w, half_h = width / 2 + 0.05, height / 2 + 0.05  # the drawn box has a rounded padding of 0.05
    for b, first in diagrams.CHAPTER_DEPENDENCIES.items():
        for a in first:
            (xa, ya), (xb, yb) = pos[a], pos[b]
            assert xb > xa, f"the arrow {a} → {b} must point right"
            t = np.linspace(0, 1, 500)[:, None]
            points = np.array([xa + width / 2, ya]) + t * np.array([xb - xa - width, yb - ya])
            for n, (x, y) in pos.items():
                if n in (a, b):
                    continue
                inside = (np.abs(points[:, 0] - x) < half_w) & (np.abs(points[:, 1] - y) < half_h)
                assert not inside.any(), f"the arrow {a} → {b} crosses the box of chapter {n}"
