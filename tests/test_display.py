"""dfl_book.display: Markdown outputs that the website renders as tables and lists, not as plain text."""

from __future__ import annotations

import pytest

from dfl_book.display import Markdown, to_html
from dfl_book.stats import compare_paired


def test_a_table_keeps_its_columns_alignment_and_inline_formatting():
    html = to_html("| claim | Δ | note |\n|---|---:|:---:|\n| **SAM beats SGD** | +0.40 | `ρ` < 1 |")
    short = "vertical-align:top;white-space:nowrap"  # short cells do not wrap
    assert (
        f'<thead><tr><th style="text-align:left;{short}">claim</th><th style="text-align:right;{short}">Δ</th>' in html
    )
    assert f'<td style="text-align:left;{short}"><strong>SAM beats SGD</strong></td>' in html
    assert f'<td style="text-align:center;{short}"><code>ρ</code> &lt; 1</td>' in html  # HTML escaped
    assert html.startswith('<div style="overflow-x:auto">')  # a wide table scrolls instead of squeezing


def test_long_cells_wrap_in_a_readable_column():
    html = to_html("| regime |\n|---|\n| E = 5 (K = 20, B = 128), T = 100; DFedAvg: train 88.3% |")
    assert '<td style="text-align:left;vertical-align:top;min-width:12em">E = 5' in html


def test_bullets_paragraphs_and_comments():
    html = to_html("<!-- command: python -m x -->\nCaption, *seeds 0 to 4*.\n\n- **one**: first\n  wrapped\n- two")
    assert "command" not in html  # a comment stays hidden, as in Markdown
    assert html.startswith("<p>Caption, <em>seeds 0 to 4</em>.</p>")
    assert "<li><strong>one</strong>: first wrapped</li>\n<li>two</li>" in html


def test_code_spans_stay_literal():
    html = to_html("run `a*b*c` and `**kwargs`, then **bold**")
    assert html == "<p>run <code>a*b*c</code> and <code>**kwargs</code>, then <strong>bold</strong></p>"


def test_a_table_without_its_rule_line_is_refused():
    with pytest.raises(ValueError, match=r"\|---\| rule line"):
        to_html("| a | b |\n| 1 | 2 |")


def test_markdown_carries_both_representations_and_the_text():
    shown = Markdown("| a |\n|---|\n| 1 |")
    assert shown._repr_markdown_() == shown.data == str(shown) == repr(shown)
    assert "<table" in shown._repr_html_()
    with pytest.raises(TypeError, match="str, not list"):
        Markdown(["| a |"])


def test_a_verdict_table_renders_as_an_html_table():
    from dfl_book.showcase.report import verdict_table

    one = compare_paired([1.0, 1.2, 0.9, 1.1, 1.0], [0.5, 0.6, 0.4, 0.5, 0.6], expect="greater", label="A beats B")
    table = verdict_table([one])
    html = table._repr_html_()
    assert ">A beats B</td>" in html and ">verdict</th>" in html and "Endpoint:" in html
    assert "|---|" not in html
