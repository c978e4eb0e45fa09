"""Every chapter reads cleanly the way Jupyter and Colab show it: plain Markdown and MathJax, no MyST.

Each notebook is exported with nbconvert (the Markdown rendering Jupyter
uses, math by Debian's MathJax 2.7), served on 127.0.0.1 and opened in
Debian's Chromium via Playwright, one browser for all chapters. A chapter
fails if its rendered markdown shows

- MyST syntax that only the MyST site understands: roles (``{cite:p}``,
  ``{eq}``, ``{numref}``, ``{ref}``, ``{doc}``, ``{term}``), directives
  (```` ```{name} ````, ``:::{name}``) or targets (``(label)=``);
- a link that would not resolve in a notebook opened alone (Colab): every
  link must be an ``#anchor`` the page has, a page of the book's site
  (``[project.urls] Book``) whose chapter and anchor exist, or another
  http(s) URL (the reference list's DOI and arXiv links); an empty link, a
  relative file link (``NN_x.ipynb``) or a ``cite:`` link fails;
- math MathJax cannot typeset (an undefined macro such as ``\\R``, a parse error),
  raw TeX, console errors, or broken images.

Nothing outside 127.0.0.1 is fetched: the Colab badge's image is answered with
the book's copy, book/_static/colab-badge.svg. Screenshots are kept in
``build/screenshots/`` for people to look at.
Needs ``/usr/bin/chromium`` and ``libjs-mathjax`` (``scripts/setup.sh``); without
them these tests skip, except when ``DFL_REQUIRE_ALL=1`` (as in CI).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)
from headless import CHROMIUM, chromium, need, serve  # noqa: E402  (tests/headless.py)

LOCAL_BADGE = ROOT / "book" / "_static" / "colab-badge.svg"
MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
SCREENSHOTS = ROOT / "build" / "screenshots"
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]*_*.ipynb"))

# What the page is asked, in one evaluation once MathJax is done.
INSPECT = """() => {
  const cells = Array.from(document.querySelectorAll('.jp-MarkdownCell'));
  const text = cells.map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('.MathJax_CHTML, .MathJax_Display, .MathJax_Preview, script, .anchor-link')
        .forEach(e => e.remove());
    return copy.innerText || copy.textContent;
  }).join('\\n');
  const links = cells.flatMap(cell => Array.from(cell.querySelectorAll('a')));
  const bad = [];
  for (const jax of (window.MathJax && MathJax.Hub ? MathJax.Hub.getAllJax() : [])) {
    const mathml = jax.root.toMathML('');
    if (mathml.includes('<merror') || mathml.includes('mathcolor="red"')) bad.push(jax.originalText.trim());
  }
  return {
    text,
    directives: cells.flatMap(c => Array.from(c.querySelectorAll('code[class*="language-{"]')))
                     .map(e => e.className),
    emptyLinks: links.filter(a => !a.textContent.trim() && !a.querySelector('img'))
                     .map(a => a.outerHTML.slice(0, 120)),
    hrefs: links.map(a => a.getAttribute('href') || ''),
    ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
    math: document.querySelectorAll('.MathJax_CHTML, .MathJax_Display, mjx-container').length,
    mathErrors: bad.concat(Array.from(document.querySelectorAll('.mjx-merror, .MathJax_Error'))
                               .map(e => e.textContent)),
    images: Array.from(document.images).map(i => [i.src.slice(0, 60), i.naturalWidth, i.naturalHeight]),
  };
}"""

ROLE = re.compile(r"\{(cite(:\w+)?|eq|numref|ref|doc|term)\}")
DIRECTIVE = re.compile(r"^\s*(```+|:::+)\{", re.M)
TARGET = re.compile(r"^\s*\([\w-]+\)=\s*$", re.M)


@pytest.fixture(scope="module")
def served_html(tmp_path_factory):
    """Every chapter exported to HTML by nbconvert (in this process), served on 127.0.0.1."""
    need(CHROMIUM.exists(), "Debian's chromium (/usr/bin/chromium)")
    need(MATHJAX.exists(), "Debian's libjs-mathjax")
    from nbconvert import HTMLExporter

    out = tmp_path_factory.mktemp("html")
    shutil.copytree(MATHJAX.parent, out / "mathjax")
    shutil.copytree(ROOT / "book" / "_static", out / "_static")
    exporter = HTMLExporter(mathjax_url="mathjax/MathJax.js?config=TeX-AMS_CHTML")
    for nb in NOTEBOOKS:
        body, _ = exporter.from_filename(str(nb))
        (out / f"{nb.stem}.html").write_text(body)

    server, base = serve(out)
    yield base
    server.shutdown()


@pytest.fixture(scope="module")
def browser(served_html):
    with chromium() as launched:
        yield launched


@functools.lru_cache(maxsize=None)
def ids_of(stem: str) -> frozenset[str]:
    """The anchors another chapter defines (``<span id>`` in its markdown), read from its notebook."""
    cells = json.loads((ROOT / "book" / f"{stem}.ipynb").read_text())["cells"]
    return frozenset(
        re.findall(r'\bid="([\w-]+)"', "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"))
    )


def link_problems(hrefs: list[str], ids: set[str]) -> list[str]:
    """The links of a page that would not resolve in a notebook opened alone, as messages."""
    problems = []
    for href in hrefs:
        chapter = book_tool.book_link(href)
        if href.startswith("#"):
            if href[1:] not in ids:
                problems.append(f"a link to an anchor this page does not have: {href}")
        elif chapter is not None:
            notebook, anchor = chapter
            if notebook is None:
                problems.append(f"a link to a page the book's site does not have: {href}")
            elif anchor and anchor not in ids_of(Path(notebook).stem):
                problems.append(f"{notebook} has no anchor #{anchor}: {href}")
        elif not href.startswith(("https://", "http://")):
            problems.append(f"a link that does not resolve in a notebook opened alone: {href!r}")
    return problems


def render(browser, served_html: str, notebook: Path) -> tuple[dict, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors, external = [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def offline(route):  # nothing outside 127.0.0.1 may be needed to read the book
        if route.request.url == book_tool.BADGE_IMAGE:  # the Colab badge: the book's own copy
            route.fulfill(path=str(LOCAL_BADGE), content_type="image/svg+xml")
            return
        external.append(route.request.url)
        route.fulfill(status=204, body="")

    page.route(lambda url: not url.startswith(served_html), offline)
    page.goto(f"{served_html}/{notebook.stem}.html", wait_until="networkidle")
    page.wait_for_function(
        "window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0",
        timeout=60_000,
    )
    found = page.evaluate(INSPECT)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{notebook.stem}.png"), full_page=True)
    page.close()
    return found, errors, external


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_reads_cleanly_in_jupyter(browser, served_html: str, notebook: Path):
    found, errors, external = render(browser, served_html, notebook)
    text = found["text"]
    leftovers = [m.group(0) for pattern in (ROLE, DIRECTIVE, TARGET) for m in pattern.finditer(text)]
    assert leftovers == [] and found["directives"] == [], (
        f"MyST-only syntax shows raw in Jupyter: {leftovers + found['directives']} (see book/README.md)"
    )
    assert found["emptyLinks"] == [], f"links without text: {found['emptyLinks']}"
    problems = link_problems(found["hrefs"], set(found["ids"]))
    assert problems == [], (
        "links that a notebook opened alone cannot follow (run python tools/book.py links):\n" + "\n".join(problems)
    )
    assert any(h.startswith(book_tool.BADGE_IMAGE.split("/assets")[0]) for h in found["hrefs"]), "no Colab badge"

    assert errors == [], errors
    cells = json.loads(notebook.read_text())["cells"]
    has_math = any("$" in "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert found["math"] > 0 or not has_math, "the chapter's math did not render"
    assert "\\begin{" not in text and "$$" not in text, "unrendered TeX on the page"
    assert found["mathErrors"] == [], f"MathJax could not typeset (an unknown macro?): {found['mathErrors']}"
    figures = [img for img in found["images"] if img[0].startswith("data:image/png")]
    assert figures, "a chapter without a figure"
    assert all(w > 0 and h > 0 for _, w, h in found["images"]), found["images"]
    # Only CDN scripts nbconvert always links (require.js, jQuery) may be asked for; the page must not need them.
    assert all("cdnjs" in url or "cdn.jsdelivr" in url or "unpkg" in url for url in external), external


def test_the_checks_catch_what_they_are_for(browser, served_html: str, tmp_path: Path):
    """A notebook with every kind of leftover fails each check (so a clean chapter means something)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "See {cite:p}`shi2023dfedsam` and {eq}`eq-x`, [](#sec-x), [gone](#nowhere).\n\n"
            f"[file](02_server_to_graph.ipynb), [cite](cite:shi2023dfedsam), [page]({book_tool.book_url()}/no-such-page), "
            f"[place]({book_tool.page_urls()['02_server_to_graph.ipynb']}#no-such-anchor), "
            f"[fine]({book_tool.page_urls()['02_server_to_graph.ipynb']}), [fine too](https://arxiv.org/abs/2302.04083).\n\n"
            "```{note}\nA directive.\n```\n\n$$ \\R^d \\tag{1} $$\n\n$$ x^{ $$"
        )
    ]
    body, _ = HTMLExporter(mathjax_url=f"{served_html}/mathjax/MathJax.js?config=TeX-AMS_CHTML").from_notebook_node(nb)
    (tmp_path / "selftest.html").write_text(body)
    page = browser.new_page()
    page.goto((tmp_path / "selftest.html").as_uri(), wait_until="networkidle")
    page.wait_for_function(
        "window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0",
        timeout=60_000,
    )
    found = page.evaluate(INSPECT)
    page.close()
    assert {m.group(1) for m in ROLE.finditer(found["text"])} == {"cite:p", "eq"}, found["text"]
    assert found["directives"], "a ```{note} directive renders as a code block with class language-{note}"
    assert len(found["emptyLinks"]) == 1
    problems = link_problems(found["hrefs"], set(found["ids"]))
    for bad in ["#nowhere", "'02_server_to_graph.ipynb'", "'cite:shi2023dfedsam'", "no-such-page", "#no-such-anchor"]:
        assert sum(bad in p for p in problems) == 1, (bad, problems)
    assert len(problems) == 6, problems  # the five above and [](#sec-x); the two fine links pass
    assert "\\R" in " ".join(found["mathErrors"]) and any("x^{" in e for e in found["mathErrors"]), found["mathErrors"]
