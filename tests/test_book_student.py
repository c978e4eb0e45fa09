"""The student edition (`python tools/book.py student OUTDIR`): every chapter's notebook without its
solutions, which still runs top to bottom."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "book.py"), "student", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_every_chapter_is_in_the_edition(edition: Path):
    assert sorted(p.name for p in edition.glob("*.ipynb")) == sorted(
        md.with_suffix(".ipynb").name for md in book_tool.chapters()
    )


def test_no_solution_is_left(edition: Path):
    removed = 0
    for nb_path in sorted(edition.glob("*.ipynb")):
        nb = json.loads(nb_path.read_text())
        source = json.loads((ROOT / "book" / nb_path.name).read_text())
        removed += len(source["cells"]) - len(nb["cells"])
        for cell in nb["cells"]:
            tags = cell.get("metadata", {}).get("tags", [])
            assert "solution" not in tags, f"{nb_path.name}: a cell tagged solution is left"
            assert "Solution to exercise" not in _text(cell), f"{nb_path.name}: solution text is left"
            assert "@title Solution" not in _text(cell), f"{nb_path.name}: a solution's code is left"
        # everything else is kept: the exercises themselves, and the number of non-solution cells
        if "## Exercises" in "".join(_text(c) for c in source["cells"]):
            assert "## Exercises" in "".join(_text(c) for c in nb["cells"]), nb_path.name
        kept = [
            c
            for c in source["cells"]
            if "solution" not in c.get("metadata", {}).get("tags", [])
            and not book_tool.SOLUTION_LINE.match(_text(c).strip() or "-")
        ]
        assert len(nb["cells"]) == len(kept), nb_path.name
        nbformat.validate(nbformat.reads(nb_path.read_text(), as_version=4))
    assert removed > 0, "the book has solutions, so the edition must have removed some cells"


def test_a_code_cell_after_a_solution_is_refused():
    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": "x = 1"},
            {"cell_type": "code", "metadata": {}, "source": "print(x)"},
        ]
    }
    with pytest.raises(ValueError, match="follows a solution"):
        book_tool.student_notebook(nb)


def test_solution_lines_are_removed_from_mixed_markdown():
    nb = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": "Intro.\n\n**Solution to exercise 2.**\n\nMore."}]
    }
    assert book_tool.student_notebook(nb)["cells"][0]["source"] == "Intro.\n\n\nMore."


def test_a_student_notebook_runs_top_to_bottom(edition: Path):
    """The preface, end to end, in a fresh kernel (as a student opens it), under a time limit."""
    from nbclient import NotebookClient

    nb = nbformat.read(edition / "00_preface.ipynb", as_version=4)
    env = {"DFL_PROFILE": "fast", "DFL_BOOK_STATIC": "1", "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(edition)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    assert "profile: fast" in "".join(
        o.get("text", "") for o in nb.cells[[c.cell_type for c in nb.cells].index("code")].outputs
    )
