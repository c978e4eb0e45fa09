"""Maintain the book: regenerate the executed notebooks, and keep Colab links in sync.

    python tools/book.py execute [CHAPTER ...]   # run book/NN_x.md (or NNb_x.md) into book/NN_x.ipynb (DFL_PROFILE=fast)
    python tools/book.py links                   # rewrite Colab badges and install cells from pyproject.toml
    python tools/book.py check                   # exit 1 if a badge or install cell is out of date

The repository URL lives in one place, ``[project.urls] Repository`` of
pyproject.toml; every badge and install cell is derived from it here. Run
``execute`` after changing a chapter or the engine's numbers, on a machine like
CI's (2 CPU cores, the torch pinned in .ci/run), and commit the notebooks.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(https://colab\.research\.google\.com/[^)]*\)")
INSTALL = re.compile(r'%pip install -q "dfl-book @ git\+[^"]*"')


def repository_url() -> str:
    """``https://github.com/OWNER/REPO`` from pyproject.toml."""
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    return url.rstrip("/").removesuffix(".git")


def colab_badge(notebook: str, ref: str = "main") -> str:
    """The "Open in Colab" badge for ``book/<notebook>``."""
    owner_repo = repository_url().removeprefix("https://github.com/")
    target = f"https://colab.research.google.com/github/{owner_repo}/blob/{ref}/book/{notebook}"
    # The badge image ships with the book (_static/), so the book builds and renders offline.
    return f"[![Open In Colab](_static/colab-badge.svg)]({target})"


def install_line() -> str:
    """The pip line of a chapter's Colab set-up cell (no pins on torch or numpy)."""
    return f'%pip install -q "dfl-book @ git+{repository_url()}"'


def chapters(names: list[str] | None = None) -> list[Path]:
    """The chapter sources ``book/NN_*.md``, all or those whose name contains one of ``names``."""
    found = sorted(BOOK.glob("[0-9][0-9]*_*.md"))
    if names:
        found = [p for p in found if any(n in p.stem for n in names)]
    return found


def expected_text(md: Path) -> str:
    text = md.read_text()
    text = BADGE.sub(lambda _: colab_badge(md.with_suffix(".ipynb").name), text)
    return INSTALL.sub(lambda _: install_line(), text)


def links(check: bool = False) -> int:
    stale = []
    for md in chapters():
        want = expected_text(md)
        if md.read_text() != want:
            stale.append(md)
            if not check:
                md.write_text(want)
    for md in stale:
        print(f"{'stale' if check else 'updated'}: {md.relative_to(ROOT)}")
    return 1 if (check and stale) else 0


def execute(names: list[str] | None = None) -> int:
    env = {**os.environ, "DFL_PROFILE": "fast", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}
    jupytext = Path(sys.executable).with_name("jupytext")
    for md in chapters(names):
        start = time.perf_counter()
        subprocess.run([str(jupytext), "--to", "ipynb", "--execute", "--set-kernel", "python3", md.name],
                       cwd=BOOK, env=env, check=True)
        print(f"{md.stem}: executed in {time.perf_counter() - start:.1f} s")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("execute", "links", "check"):
        print(__doc__)
        return 2
    if argv[0] == "execute":
        links()
        return execute(argv[1:])
    return links(check=argv[0] == "check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
