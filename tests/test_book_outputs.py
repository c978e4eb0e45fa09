"""The outputs nbval compares strictly must print the same on every CPU and library build.

A float's last digits depend on the order of a reduction, the BLAS and its
thread count, and the numpy/scipy/torch build; a roundoff residue (1e-16,
4e-30) depends on them entirely. So every output nbval compares (code cells
not tagged ``nbval-ignore-output``) prints at most :data:`MAX_SIGNIFICANT`
significant digits, and no nonzero number below :data:`RESIDUE` in size
except a threshold written as a power of ten ("1e-10"). Rounding errors of the
book's computations are about 1e-13 relative, so 8 digits leave a margin of
five orders of magnitude.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)

MAX_SIGNIFICANT = 8
RESIDUE = 1e-9
#: A decimal number, optionally with an exponent; not part of a word, a version (2.14.1) or an identifier.
NUMBER = re.compile(
    r"(?<![\w.])[-+−]?(?P<int>\d*)\.(?P<frac>\d+)(?:[eE](?P<exp>[-+]?\d+))?(?![\w.])"
    r"|(?<![\w.])[-+−]?(?P<mant>\d)[eE](?P<exp2>[-+]?\d+)(?![\w.])"
)
COMPARED_MIME = ("text/plain", "text/markdown", "text/latex")


def significant_digits(match: re.Match) -> int:
    if match.group("mant") is not None:
        return 1
    return len((match.group("int") + match.group("frac")).lstrip("0")) or 1


def value(match: re.Match) -> float:
    return float(match.group(0).replace("−", "-"))


def unstable_numbers(text: str) -> list[str]:
    """The numbers in ``text`` that would not print the same on another machine (see the module docstring)."""
    bad = []
    for match in NUMBER.finditer(text):
        x = value(match)
        threshold = match.group("mant") == "1" or (
            match.group("int") in ("", "0", "1") and set(match.group("frac")) <= {"0"}
        )
        if significant_digits(match) > MAX_SIGNIFICANT or (0 < abs(x) < RESIDUE and not threshold):
            bad.append(match.group(0))
    return bad


def compared_texts(notebook: dict):
    """(cell number, text) of every output nbval compares."""
    for i, cell in enumerate(notebook["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] != "code" or "nbval-ignore-output" in tags or "nbval-skip" in tags:
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                yield i, "".join(out["text"])
            for mime in COMPARED_MIME:
                if mime in out.get("data", {}):
                    yield i, "".join(out["data"][mime])


def test_the_scan_finds_what_varies_between_machines():
    assert unstable_numbers("λ = 0.22095762947118883") == ["0.22095762947118883"]
    assert unstable_numbers("Φ = 380.00000000000017, then 14.003036") == ["380.00000000000017"]
    assert unstable_numbers("residue 4.339e-30 and −4.4e-16") == ["4.339e-30", "−4.4e-16"]
    assert unstable_numbers("below 1e-12: True; equal to 1e-10; 0.000000001 is 1e-9") == []
    assert unstable_numbers("λ = 0.9987, gap 1.3155e-03, torch 2.14.1, 95.17 ± 0.32, x2.5") == []
    assert unstable_numbers("0.94925302 (8 digits) but 0.949253022 (9)") == ["0.949253022"]


@pytest.mark.parametrize("md", book_tool.chapters(), ids=lambda p: p.stem)
def test_compared_outputs_print_only_stable_digits(md: Path):
    notebook = json.loads(md.with_suffix(".ipynb").read_text())
    found = {i: bad for i, text in compared_texts(notebook) if (bad := unstable_numbers(text))}
    assert found == {}, (
        f"{md.with_suffix('.ipynb').name}: cells print digits that differ between machines "
        f"(round them, print a threshold, or tag the cell nbval-ignore-output if it is training "
        f"noise): {found}"
    )
