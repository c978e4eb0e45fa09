"""The README is the front door a newcomer reads in five minutes; its long sections are the guide pages of
docs/, which the book's website builds too (myst.yml's toc part "Guide"; tests/test_book_site.py builds and
opens them like the chapters, tests/test_book.py checks the toc).

Checked here: the README stays short; every relative link of the README and of the guide lands, on GitHub
(a file of the repository, and for ``page.md#anchor`` a heading of that page, which GitHub and MyST name
alike); the README links every guide page; the guide's links into the repository name files that exist; the
Quickstart's commands are the ones .ci/run and the guide run, and what it quotes the CLI printing, the CLI
prints; the README's figure is chapter 02's. (The names on the architecture page: tests/test_architecture.py.
The GPU timings the guide quotes: tests/test_benchmarks.py.)
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = sorted((ROOT / "docs").glob("*.md"))
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)

MAX_LINES = 250  # issue 42: a README under 250 lines
SETUP_AND_RUN = "bash scripts/setup.sh && .venv/bin/python -m dfl_core run"
TEST_SUITE = ".venv/bin/python -m pytest"
FIGURE = "docs/images/fl_vs_dfl_round.png"
FIGURE_CELL = ("book/02_server_to_graph.ipynb", "diagrams.fl_vs_dfl_round()")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where a ``](...)`` is not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def links(text: str) -> list[str]:
    """The targets of the markdown links and images of ``text``."""
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))


def heading_anchors(text: str) -> set[str]:
    """The anchors of ``text``'s headings as GitHub writes them (MyST gives the headings used here the same)."""
    titles = re.findall(r"^#{1,6} (.+)$", prose(text), re.M)
    return {re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-") for t in titles}


def fenced_commands(text: str) -> list[str]:
    """The lines of ``text``'s ```bash blocks, comments removed."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_is_short_and_keeps_its_sections():
    text = README.read_text()
    assert len(text.splitlines()) < MAX_LINES, "move the detail to a page of docs/ and link it"
    headings = re.findall(r"^## (.+)$", text, re.M)
    for section in ("Quickstart", "What the first run prints", "What is where", "Architecture", "Documentation"):
        assert section in headings, section
    assert re.search(r"^Test times: .*\d+ passed in .*$", text, re.M), "the clean-clone test times line"


def test_the_folder_table_names_every_top_level_folder():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {f.split("/")[0] for f in files if "/" in f}
    table = set(re.findall(r"^\| `([^`]+)/` \|", README.read_text(), re.M))
    assert folders <= table, f"folders missing from the README's table: {sorted(folders - table)}"
    assert all((ROOT / name).is_dir() for name in table), table


@pytest.mark.parametrize("page", [README, *GUIDE], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path):
    """On GitHub a relative link opens a file of the repository; on the site MyST resolves the same link to a
    page (a guide page or a chapter), so the guide links no file the site does not build."""
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_file(), f"{page.name}: link to a missing file: {target}"
        if page in GUIDE:
            assert file.suffix in (".md", ".ipynb") and file.parent.name in ("docs", "book"), (
                f"{page.name}: {target}: the site builds only the chapters and the guide; link other files by URL"
            )
        if anchor:
            assert anchor in heading_anchors(file.read_text()), f"{page.name}: {target}: no such heading"


def test_the_readme_links_every_guide_page():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README.read_text())}
    assert set(GUIDE) <= linked, sorted(p.name for p in set(GUIDE) - linked)


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: p.name)
def test_the_guide_links_into_the_repository_by_its_url(page: Path):
    """The guide's links to other files of the repository are absolute (they work on the site and on GitHub)
    and name files that exist; each page starts with its title."""
    text = page.read_text()
    assert text.startswith("# "), f"{page.name} must start with its title"
    repository = book_tool.repository_url()
    for url in links(text):
        if "github.com" in url:
            assert url.startswith(f"{repository}/blob/main/"), (page.name, url, repository)
            assert (ROOT / url.removeprefix(f"{repository}/blob/main/").partition("#")[0]).exists(), url


def test_the_quickstart_commands_are_the_ones_ci_and_the_guide_run():
    readme = fenced_commands(README.read_text())
    assert readme[:2] == [SETUP_AND_RUN, TEST_SUITE]
    assert fenced_commands((ROOT / "docs" / "install.md").read_text())[:1] == [SETUP_AND_RUN]
    assert TEST_SUITE in fenced_commands((ROOT / "docs" / "install.md").read_text())
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/setup.sh\n" in ci and f"\n{TEST_SUITE} " in ci


def test_a_second_run_stops_with_the_message_the_guide_quotes(tmp_path, monkeypatch, capsys):
    from dfl_core.cli import main

    quoted = re.search(r"^(error: dfl_results already holds .*)$", (ROOT / "docs" / "install.md").read_text(), re.M)
    assert quoted, "docs/install.md quotes the refusal of a second run"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dfl_results").mkdir()
    for name in ("results.json", "comparison.png"):
        (tmp_path / "dfl_results" / name).write_text("")
    assert main(["run"]) == 2
    assert quoted.group(1) in capsys.readouterr().err


def test_the_readme_figure_is_chapter_02s():
    """The README shows the figure chapter 02 draws, as its committed notebook holds it."""
    assert f"]({FIGURE})" in README.read_text()
    notebook, call = FIGURE_CELL
    cells = [
        c
        for c in json.loads((ROOT / notebook).read_text())["cells"]
        if c["cell_type"] == "code" and call in "".join(c["source"])
    ]
    pngs = [o["data"]["image/png"] for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pngs) == 1, f"{notebook}: no single figure drawn by {call}"
    assert (ROOT / FIGURE).read_bytes() == base64.b64decode(pngs[0]), (
        f"{FIGURE} is not {notebook}'s figure: copy the output of its cell calling {call} there"
    )


def test_the_guide_lists_every_registered_algorithm():
    """docs/experiments.md promises every algorithm with its paper: a new registry entry needs its row there."""
    from dfl_core.algorithms import ALGORITHMS

    guide = (ROOT / "docs" / "experiments.md").read_text()
    missing = [name for name in ALGORITHMS if f"`{name}`" not in guide]
    assert not missing, f"docs/experiments.md does not name {missing}: add a row to its Algorithms tables"
