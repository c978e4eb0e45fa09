"""The book builds as a MyST site with strict cross-references, and every chapter renders in a browser.

Offline, mystmd cannot download its HTML theme, so ``myst build --site
--strict`` runs against a stub theme: it still resolves every cross-reference
and citation and writes the site's content, which is checked here. The pixels
are checked separately: each notebook is rendered to HTML with nbconvert (math
by Debian's MathJax), served on 127.0.0.1 and opened in Debian's Chromium via
Playwright. Screenshots are kept in ``build/screenshots/`` for people to look at.

Needs node (for mystmd), ``/usr/bin/chromium`` and ``libjs-mathjax``
(``scripts/setup.sh`` installs them). Without them these tests skip, except
when ``DFL_REQUIRE_ALL=1`` (as in CI), where they fail.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYST = Path(sys.executable).with_name("myst")
CHROMIUM = Path("/usr/bin/chromium")
MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
SCREENSHOTS = ROOT / "build" / "screenshots"
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]*_*.ipynb"))


def need(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("DFL_REQUIRE_ALL") == "1":
        pytest.fail(f"{what} is missing (DFL_REQUIRE_ALL=1); run scripts/setup.sh")
    pytest.skip(f"{what} is missing; run scripts/setup.sh")


def build_site(tmp: Path) -> subprocess.CompletedProcess:
    """``myst build --site --strict`` on a copy of the book, with a stub theme (no network)."""
    theme = tmp / "_build" / "templates" / "site" / "myst" / "book-theme"
    theme.mkdir(parents=True)
    (theme / "template.yml").write_text("myst: v1\nkind: site\ntitle: stub\n")
    return subprocess.run([str(MYST), "build", "--site", "--strict"], cwd=tmp, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "CI": "1"})


@pytest.fixture()
def book_copy(tmp_path: Path) -> Path:
    need(MYST.exists() and shutil.which("node") is not None, "mystmd (pip) and node")
    shutil.copy(ROOT / "myst.yml", tmp_path)
    shutil.copytree(ROOT / "book", tmp_path / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    return tmp_path


def test_myst_site_builds_strictly_with_every_page(book_copy: Path):
    result = build_site(book_copy)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = book_copy / "_build" / "site"
    config = json.loads((site / "config.json").read_text())
    pages = {p["slug"] for p in config["projects"][0]["pages"]} | {"index"}
    # mystmd names the first page "index" and the others by file name without the leading digits and their
    # separator ("03b_compression_privacy" becomes "b-compression-privacy")
    expected = {"index"} | {re.sub(r"^\d+[_-]?", "", nb.stem).replace("_", "-") for nb in NOTEBOOKS[1:]}
    assert pages == expected
    for page in pages:
        text = (site / "content" / f"{page}.json").read_text()
        assert "Traceback" not in text and '"output_type":"error"' not in text.replace(" ", ""), page


def test_a_broken_cross_reference_fails_the_build(book_copy: Path):
    preface = book_copy / "book" / "00_preface.ipynb"
    preface.write_text(preface.read_text().replace("(#sec-server-to-graph)", "(#sec-no-such-label)"))
    result = build_site(book_copy)
    assert result.returncode != 0
    assert "sec-no-such-label" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def served_html(tmp_path_factory):
    need(CHROMIUM.exists(), "Debian's chromium (/usr/bin/chromium)")
    need(MATHJAX.exists(), "Debian's libjs-mathjax")
    out = tmp_path_factory.mktemp("html")
    shutil.copytree(MATHJAX.parent, out / "mathjax")
    for nb in NOTEBOOKS:
        subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(nb), "--output-dir", str(out),
                        "--HTMLExporter.mathjax_url=mathjax/MathJax.js?config=TeX-AMS_CHTML"],
                       check=True, capture_output=True, timeout=300)
    shutil.copytree(ROOT / "book" / "_static", out / "_static")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_renders_in_chromium(served_html: str, notebook: Path):
    from playwright.sync_api import sync_playwright

    errors, external = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        def offline(route):        # nothing outside 127.0.0.1 may be needed to read the book
            external.append(route.request.url)
            route.fulfill(status=204, body="")
        page.route(lambda url: not url.startswith(served_html), offline)
        page.goto(f"{served_html}/{notebook.stem}.html", wait_until="networkidle")
        page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                               " && MathJax.Hub.queue.running === 0", timeout=60_000)
        math = page.evaluate("document.querySelectorAll('.MathJax_CHTML, .MathJax_Display, mjx-container').length")
        # MathJax 2 typesets an unknown macro as red text (mathcolor="red") and a parse error as merror.
        math_errors = page.evaluate(
            "document.querySelectorAll('.mjx-merror, .MathJax_Error').length + Array.from("
            "document.querySelectorAll('[data-mathml]')).filter(e => e.getAttribute('data-mathml')"
            ".includes('mathcolor=\"red\"') || e.getAttribute('data-mathml').includes('<merror')).length")
        raw_tex = page.evaluate("document.body.innerText.includes('\\\\begin{') || /\\$\\$/.test(document.body.innerText)")
        images = page.evaluate("Array.from(document.images).map(i => [i.src.slice(0, 60), i.naturalWidth, i.naturalHeight])")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{notebook.stem}.png"), full_page=True)
        browser.close()
    cells = json.loads(notebook.read_text())["cells"]
    has_math = any("$" in "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert errors == [], errors
    assert math > 0 or not has_math, "the chapter's math did not render"
    assert not raw_tex, "unrendered TeX on the page"
    assert math_errors == 0, "MathJax could not typeset some math (an unknown macro?)"
    figures = [img for img in images if img[0].startswith("data:image/png")]
    assert figures or notebook.stem.startswith("9"), "a chapter without a figure (appendices 9x may have none)"
    assert all(w > 0 and h > 0 for _, w, h in images), images
    # Only CDN scripts nbconvert always links (require.js, jQuery) may be asked for; the page must not need them.
    assert all("cdnjs" in url or "cdn.jsdelivr" in url or "unpkg" in url for url in external), external
