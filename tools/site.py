#!/usr/bin/env python3
"""Build the book as a website (MyST's book theme), written to _build/html.

    python tools/site.py build                        # online: mystmd downloads its theme itself
    python tools/site.py build --theme DIR            # offline: use a copy of the theme built for offline use
    DFL_BOOK_THEME=DIR python tools/site.py build     # the same, from the environment
    python tools/site.py build --base-url /dfl-book   # a site served under a sub-path (GitHub Pages)

mystmd's HTML theme is not on npm: online, ``myst build --html`` downloads it into
``_build/templates/site/myst/book-theme``; offline it cannot. ``--theme DIR`` (or ``DFL_BOOK_THEME``)
copies a theme folder (one holding ``template.yml``, such as myst-theme's ``book`` theme built for
offline use) to that place, where mystmd then finds it. Either way, the first build npm-installs the
theme's small server dependencies, so the npm registry must be reachable.

The build is strict: a broken cross-reference or citation fails it (``myst.yml``'s ``error_rules``).
Without ``--base-url`` the pages expect to be served at the root of a host:
``python -m http.server -d _build/html`` and open http://127.0.0.1:8000.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THEME_ENV = "DFL_BOOK_THEME"
THEME_PLACE = Path("_build", "templates", "site", "myst", "book-theme")  # where mystmd keeps its theme


class SiteError(RuntimeError):
    """A setting or a tool the build needs is wrong or missing."""


def theme_setting(theme: str | os.PathLike | None = None) -> Path | None:
    """The offline theme to use: ``theme``, else ``$DFL_BOOK_THEME``, else None (mystmd downloads it)."""
    chosen = theme if theme not in (None, "") else os.environ.get(THEME_ENV) or None
    if chosen is None:
        return None
    path = Path(chosen).expanduser().resolve()
    if not (path / "template.yml").is_file():
        source = "--theme" if theme not in (None, "") else THEME_ENV
        raise SiteError(
            f"{source}={chosen}: no template.yml there; it must be a MyST site theme folder "
            "(myst-theme's book theme built for offline use)"
        )
    return path


def myst_executable() -> str:
    """The mystmd wrapper of this Python (the ``book`` extra), which needs node >= 20 on PATH."""
    beside = Path(sys.executable).with_name("myst")
    myst = str(beside) if beside.exists() else shutil.which("myst")
    if myst is None:
        raise SiteError("mystmd is not installed: pip install -e '.[book]' (scripts/setup.sh)")
    if shutil.which("node") is None:
        raise SiteError("node is not on PATH: mystmd needs Node >= 20")
    return myst


def install_theme(project: Path, theme: Path) -> Path:
    """Copy ``theme`` to where mystmd looks for its theme in ``project``; returns that folder.

    The theme's ``node_modules`` (installed by mystmd on the first build) is kept while the theme's
    package-lock.json is unchanged, so later builds skip the npm install.
    """
    place = project / THEME_PLACE
    modules = None
    if place.exists():
        lock = place / "package-lock.json"
        if (
            (place / "node_modules").is_dir()
            and lock.is_file()
            and (theme / "package-lock.json").is_file()
            and lock.read_bytes() == (theme / "package-lock.json").read_bytes()
        ):
            modules = place.parent / ".book-theme-node_modules"
            shutil.rmtree(modules, ignore_errors=True)
            (place / "node_modules").rename(modules)
        shutil.rmtree(place)
    place.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(theme, place, ignore=shutil.ignore_patterns("node_modules", ".git"))
    for folder, dirs, files in os.walk(place):  # the source may be read-only; mystmd writes here
        for name in [*dirs, *files]:
            path = Path(folder, name)
            path.chmod(path.stat().st_mode | 0o200)
    place.chmod(place.stat().st_mode | 0o200)
    if modules is not None:
        modules.rename(place / "node_modules")
    return place


def check_base_url(base_url: str | None) -> str | None:
    if base_url in (None, ""):
        return None
    if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", base_url):
        raise SiteError(
            f"--base-url {base_url!r}: expected a path such as /dfl-book (a leading slash, no trailing slash, no host)"
        )
    return base_url


def build(
    project: Path = ROOT,
    theme: str | os.PathLike | None = None,
    base_url: str | None = None,
    capture: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``myst build --html --strict`` in ``project`` (the folder holding myst.yml), into ``_build/html``.

    ``theme``: an offline theme folder (else ``$DFL_BOOK_THEME``, else mystmd downloads its own).
    Returns the finished process; the caller checks its return code.
    """
    project = Path(project).resolve()
    if not (project / "myst.yml").is_file():
        raise SiteError(f"{project} has no myst.yml")
    offline = theme_setting(theme)
    env = {**os.environ, "CI": "1"}  # CI=1: no interactive prompts
    if check_base_url(base_url):
        env["BASE_URL"] = base_url
    else:
        env.pop("BASE_URL", None)
    myst = myst_executable()
    if offline is not None:
        install_theme(project, offline)
    return subprocess.run(
        [myst, "build", "--html", "--strict"], cwd=project, env=env, text=True, capture_output=capture, timeout=timeout
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/site.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="build the website into _build/html")
    command.add_argument(
        "--theme",
        metavar="DIR",
        help=f"an offline copy of MyST's book theme (default: ${THEME_ENV}; neither: mystmd downloads the theme)",
    )
    command.add_argument("--base-url", metavar="PATH", help="serve the site under this path, e.g. /dfl-book")
    args = parser.parse_args(argv)
    try:
        result = build(ROOT, theme=args.theme, base_url=args.base_url)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if result.returncode != 0:
        print(f"error: myst build --html failed (exit code {result.returncode})", file=sys.stderr)
        return result.returncode
    out = ROOT / "_build" / "html"
    print(
        f"== the website is in {out.relative_to(ROOT)}/"
        + ("" if args.base_url else f"; to read it: python -m http.server -d {out.relative_to(ROOT)}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
