"""tools/stale_numbers.py: the numbers a chapter states that none of its cells produces."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import stale_numbers as numbers_tool  # noqa: E402  (tools/stale_numbers.py)


def notebook(markdown: str, code: str = "", output: str = "") -> dict:
    return {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": markdown},
            {
                "cell_type": "code",
                "metadata": {},
                "source": code,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": output}],
            },
        ]
    }


def flagged(nb: dict, **kw) -> list[str]:
    return [c.number for c in numbers_tool.unbacked(nb, **kw)]


def test_a_number_no_cell_produces_is_listed_and_a_printed_one_is_not():
    nb = notebook(
        "Accuracy rose from 0.812 to 0.934 [(Shi et al., 2023)](cite:shi2023dfedsam).",
        code="print(acc)",
        output="0.934\n",
    )
    assert flagged(nb) == ["0.812"]


def test_rounding_signs_and_code_count_as_evidence():
    nb = notebook(
        "about 13 points; a loss of 0.30; 1,000 rounds; lr 0.05",
        code="lr = 0.05\nrounds = 1_000",
        output="gap 13.2\nΔ loss -0.300\n",
    )
    assert flagged(nb) == []


def test_places_citations_links_and_one_digit_counts_are_not_claims():
    nb = notebook(
        "Table 2 of §6, Theorem 4.5, eq. (7), [(3)](#eq-x), [Sun et al. (2022)](cite:sun2022dfedavgm), "
        "[next](08_dfedsam.ipynb#sec-x), 5 seeds"
    )
    assert flagged(nb) == []
    assert flagged(nb, all_numbers=True) == ["5"]


def test_a_stale_comment_is_listed_and_a_number_in_a_string_is_evidence():
    nb = notebook("", code='# measured: 0.134, 0.152\nprint("margin 0.152")', output="")
    assert flagged(nb) == ["0.134"]


def test_the_generated_reference_list_is_skipped():
    nb = notebook("- Tao Sun (2022). Decentralized Federated Averaging. PAMI 45.")
    nb["cells"][0]["metadata"] = {"tags": ["references", "remove-cell"]}
    assert flagged(nb) == []
