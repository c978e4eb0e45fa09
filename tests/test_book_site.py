"""The book builds as a MyST site with strict cross-references and citations, and reads well in a browser.

Two builds of a copy of the book:

- ``myst build --site --strict`` against a stub theme (no network, no theme
  needed): it still resolves every cross-reference and citation and writes
  the site's content, which is checked here: the chapters' portable forms
  (book/README.md) must come out as MyST citations, cross-references and page
  links, not as plain links.
- the real website, ``python tools/site.py build`` (mystmd's book theme: an
  offline copy from ``DFL_BOOK_THEME=DIR``, else downloaded by mystmd),
  served on 127.0.0.1 and opened page by page in Debian's headless Chromium
  (Playwright). Every request outside 127.0.0.1 is blocked, except that the
  CDN stylesheet of KaTeX is answered from the npm ``katex`` package
  (``build/node_modules``, installed by ``scripts/setup.sh``) and the MathJax 2
  that the theme loads for notebook outputs from Debian's libjs-mathjax.
  Each page must show no console error, every equation typeset once (no
  plain-text duplicate), every figure loaded, every citation with its entry in
  the page's references and every internal link leading to a page of the site
  and an anchor it has. A full-page screenshot of every page is saved in
  ``build/screenshots/site/`` for people to look at (the test's artefact).

How the same notebooks read in Jupyter and Colab is checked by tests/test_book_render.py.
The pages are those of myst.yml's toc: the chapters, then the guide pages of docs/ (the README's
long sections), which these tests check like the chapters. Needs node and mystmd (``scripts/setup.sh``),
and for the website an offline theme or the network, Chromium and the katex
package; without them these tests skip, except when ``DFL_REQUIRE_ALL=1`` (as in CI),
where they fail.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MYST = Path(sys.executable).with_name("myst")
MATHJAX = Path("/usr/share/javascript/mathjax")  # Debian's libjs-mathjax (2.7)
KATEX = ROOT / "build" / "node_modules" / "katex"  # npm's katex, for the CDN stylesheet the pages load
SCREENSHOTS = ROOT / "build" / "screenshots" / "site"
sys.path.insert(0, str(ROOT / "tools"))
import book as book_tool  # noqa: E402  (tools/book.py)
from headless import chromium, need, serve  # noqa: E402  (tests/headless.py)

_spec = importlib.util.spec_from_file_location("dfl_site_tool", ROOT / "tools" / "site.py")
site_tool = importlib.util.module_from_spec(_spec)  # tools/site.py ("site" is also a standard module)
_spec.loader.exec_module(site_tool)

MYST_CONFIG = yaml.safe_load((ROOT / "myst.yml").read_text())


def toc_files(entries: list[dict]) -> list[str]:
    """The files of myst.yml's toc, in reading order."""
    return [f for e in entries for f in ([e["file"]] if "file" in e else []) + toc_files(e.get("children", []))]


TOC = toc_files(MYST_CONFIG["project"]["toc"])
# mystmd names the first page "index" and each other page by its slug ("07_flat_minima" is "flat-minima"),
# the rule tools/book.py writes the chapters' links with: the build's pages checking it checks that rule
PAGES = {"index" if i == 0 else book_tool.page_slug(Path(f).stem): f for i, f in enumerate(TOC)}


def build_site(tmp: Path) -> subprocess.CompletedProcess:
    """``myst build --site --strict`` on a copy of the book, with a stub theme (no network)."""
    theme = tmp / site_tool.THEME_PLACE
    theme.mkdir(parents=True)
    (theme / "template.yml").write_text("myst: v1\nkind: site\ntitle: stub\n")
    return subprocess.run(
        [str(MYST), "build", "--site", "--strict"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CI": "1"},
    )


def nodes(tree: dict):
    yield tree
    for child in tree.get("children", []) or []:
        yield from nodes(child)


def text_of(node: dict) -> str:
    return (node.get("value") or "") + "".join(text_of(c) for c in node.get("children", []) or [])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, dict]:
    """The strict site build of a copy of the book: ``{page slug: page JSON}``."""
    copy = book_copy_in(tmp_path_factory.mktemp("site"))
    result = build_site(copy)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in (copy / "_build" / "site" / "content").glob("*.json")}


def book_copy_in(tmp: Path) -> Path:
    need(MYST.exists() and shutil.which("node") is not None, "mystmd (pip) and node")
    shutil.copy(ROOT / "myst.yml", tmp)
    shutil.copy(ROOT / "pyproject.toml", tmp)  # [project.urls] Book: the plugin maps page URLs to chapters
    shutil.copytree(ROOT / "book", tmp / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    shutil.copytree(ROOT / "docs", tmp / "docs")  # the guide pages (myst.yml's toc part "Guide")
    return tmp


def test_myst_site_builds_strictly_with_every_page(site: dict[str, dict]):
    assert set(site) == set(PAGES), "the site's pages are not those of myst.yml's toc"
    # a file name such as 02b_x would make the slug "b-x": chapters are numbered NN_name
    assert not [slug for slug in site if re.match(r"^[a-z]-", slug)], sorted(site)
    for slug, page in site.items():
        text = json.dumps(page)
        assert "Traceback" not in text and '"output_type":"error"' not in text.replace(" ", ""), slug


def test_portable_forms_become_citations_cross_references_and_page_links(site: dict[str, dict]):
    """What Jupyter shows as links, the site resolves: #ref- citations, #anchors and links to chapter pages."""
    cited = 0
    for slug, page in site.items():
        tree = list(nodes(page["mdast"]))
        links = [n for n in tree if n["type"] == "link"]
        assert not [n["url"] for n in links if n.get("url", "").startswith(("cite:", "#ref-"))], slug
        # a link to another chapter's page became a cross-reference, not a link out of the site
        assert not [n["url"] for n in links if n.get("url", "").startswith(book_tool.book_url())], slug
        # the generated reference list is not on the page (the site lists the page's references itself)
        assert not [
            n
            for n in tree
            if n.get("identifier", "").startswith(book_tool.REF_PREFIX)
            or n["type"] == "heading"
            and text_of(n) == "References"
        ], slug
        assert all(n.get("internal") or n.get("url", "").startswith("http") for n in links), (
            slug,
            [n.get("url") for n in links if not n.get("internal")],
        )
        assert all(n.get("resolved") for n in tree if n["type"] == "crossReference"), slug
        for group in (n for n in tree if n["type"] == "citeGroup"):
            keys = [c["label"] for c in group["children"]]
            parenthetical = group["kind"] == "parenthetical"
            rendered = "; ".join(text_of(c) for c in group["children"])
            # the site's author-year text is the one tools/book.py writes for Jupyter readers
            assert book_tool.cite_text(keys, parenthetical) == (f"({rendered})" if parenthetical else rendered)
            cited += len(keys)
        # the site lists every cited work at the end of its page
        assert {c["label"] for n in tree if n["type"] == "citeGroup" for c in n["children"]} == set(
            page.get("references", {}).get("cite", {}).get("order", [])
        ), slug
    assert cited > 50


def test_equations_carry_one_number_each(site: dict[str, dict]):
    """MyST must not number equations itself: the \\tag{N} that Jupyter shows is the only number."""
    maths = [n for page in site.values() for n in nodes(page["mdast"]) if n["type"] == "math"]
    tagged = [n for n in maths if "\\tag{" in n["value"]]
    assert len(tagged) >= 20
    assert not [n for n in maths if n.get("enumerator")], "MyST numbered an equation (numbering.equation)"


def test_solutions_are_collapsed_on_the_site(site: dict[str, dict]):
    blocks = [n for page in site.values() for n in nodes(page["mdast"]) if n["type"] == "block"]
    hidden = [n for n in blocks if n.get("visibility") == "hide"]
    assert hidden, "no collapsed solution cell (hide-cell) on the site"


def test_broken_references_fail_the_build(tmp_path: Path):
    """A link to a missing chapter, to a missing anchor, an unknown citation and an anchor id that two
    chapters define each fail the build."""
    copy = book_copy_in(tmp_path)
    page = book_tool.page_urls()["02_server_to_graph.ipynb"]
    for old, new in [
        (f"({page})", f"({book_tool.book_url()}/no-such-chapter)"),
        ("(#eq-sam-step)", "(#eq-no-such-label)"),
        ("(#ref-shi2023dfedsam)", "(#ref-nobody2099)"),
        ('<span id=\\"sec-showcase-dfedavg\\">', '<span id=\\"sec-showcase\\">'),
    ]:
        changed = [nb for nb in sorted((copy / "book").glob("[0-9]*.ipynb")) if old in nb.read_text()]
        assert changed, f"no chapter contains {old}"
        changed[0].write_text(changed[0].read_text().replace(old, new, 1))
    # and a link to a place in another chapter that the chapter does not define
    anchored = re.compile(re.escape(book_tool.book_url()) + r"/[\w-]+#(?P<anchor>[\w-]+)\)")
    changed = [nb for nb in sorted((copy / "book").glob("[0-9]*.ipynb")) if anchored.search(nb.read_text())]
    assert changed, "no chapter links to a place in another chapter"
    text = changed[0].read_text()
    m = anchored.search(text)
    changed[0].write_text(text[: m.start("anchor")] + "sec-no-such-anchor" + text[m.end("anchor") :])
    result = build_site(copy)
    assert result.returncode != 0
    for reported in [
        "no-such-chapter",
        "eq-no-such-label",
        "nobody2099",
        "sec-no-such-anchor",
        'Duplicate identifier in project "sec-showcase"',
    ]:
        assert reported in result.stdout + result.stderr, reported


# ---------------------------------------------------------------------------------------------------------
# The real website (mystmd's book theme) in headless Chromium

KATEX_CDN = re.compile(r"https://cdn\.jsdelivr\.net/npm/katex@([\d.]+)/dist/(?P<file>[^?#]+)")
MATHJAX_CDN = re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/2\.[\d.]+/(?P<file>[^?#]+)")
RAW_TEX = re.compile(r"\$\$|\\(?:tag|frac|mathbb|mathrm|sum|lVert|begin|left|right|nabla|eta|lambda)\b")

# True once the page's text, outside code and typeset math, holds no raw TeX (RAW_TEX, as the checks read it).
RAW_TEX_LEFT = """(pattern) => {
  const copy = (document.querySelector('article') || document.body).cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, .katex, .MathJax, .MathJax_CHTML, .MathJax_Display, '
                        + '.MathJax_Preview, mjx-container, .myst-bibliography').forEach(e => e.remove());
  return !new RegExp(pattern).test(copy.textContent);
}"""

# What the page is asked once it has loaded: everything the checks below need.
INSPECT = """() => {
  const visible = e => { const r = e.getBoundingClientRect(); return r.width > 1 && r.height > 1; };
  const article = document.querySelector('article') || document.body;
  const copy = article.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, .katex, .MathJax, .MathJax_CHTML, .MathJax_Display, '
                        + '.MathJax_Preview, mjx-container, .myst-bibliography').forEach(e => e.remove());
  return {
    ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
    katex: document.querySelectorAll('.katex').length,
    mathmlShown: Array.from(document.querySelectorAll('.katex .katex-mathml')).filter(visible)
                      .map(e => e.textContent.slice(0, 60)),
    htmlHidden: Array.from(document.querySelectorAll('.katex .katex-html')).filter(e => !visible(e))
                     .map(e => e.textContent.slice(0, 60)),
    mathErrors: Array.from(document.querySelectorAll('.katex-error, .MathJax_Error, .mjx-merror'))
                     .map(e => e.textContent.slice(0, 80)),
    text: copy.textContent,
    images: Array.from(article.querySelectorAll('img')).map(i => [i.getAttribute('src'), i.naturalWidth]),
    cites: Array.from(document.querySelectorAll('cite')).map(c => c.textContent.trim()),
    entries: Array.from(document.querySelectorAll('#references li[id^="cite-"]'))
                  .map(li => [li.id.slice(5), li.textContent.trim()]),
    home: (document.querySelector('.myst-home-link') || {}).textContent || '',
    github: Array.from(document.querySelectorAll('a.myst-fm-github-link')).map(a => a.getAttribute('href')),
  };
}"""


def network_reaches(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def html_site(tmp_path_factory) -> Path:
    """``python tools/site.py build`` of a copy of the book: its ``_build/html``."""
    need(
        bool(os.environ.get(site_tool.THEME_ENV)) or network_reaches("api.mystmd.org"),
        "the network (api.mystmd.org, for mystmd's book theme)",
        f"set {site_tool.THEME_ENV}=DIR to an offline copy of that theme (see tools/site.py)",
    )
    copy = book_copy_in(tmp_path_factory.mktemp("html"))
    result = site_tool.build(copy, capture=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return copy / "_build" / "html"


@pytest.fixture(scope="module")
def site_browser(html_site: Path):
    need(MATHJAX.is_dir(), "Debian's libjs-mathjax")
    need((KATEX / "dist" / "katex.min.css").exists(), "npm's katex package in build/node_modules")
    with chromium() as launched:
        yield launched


def settle_math(page, reload: bool = True) -> None:
    """Wait until MathJax has typeset the notebook outputs' TeX (or give up; raw TeX left is reported); without
    ``reload``, wait and ask MathJax to typeset only (a reload would undo what the test clicked open)."""
    # The theme loads MathJax for the outputs' TeX (sympy) only after the page is live, so its queue may not
    # exist yet. Seen in clean-clone runs under load on the theory page: MathJax loaded but never typeset the
    # outputs' TeX (a race in the theme when MathJax arrives after the output mounted), and once even after
    # being asked to typeset again, and on a slower machine once after a reload too. So: wait; ask MathJax to
    # typeset; reload the page, as a reader would, up to three times; TeX still raw after that is reported.
    for attempt in range(5 if reload else 2):
        if attempt == 1:
            page.evaluate("() => window.MathJax && MathJax.Hub && MathJax.Hub.Queue(['Typeset', MathJax.Hub])")
        elif attempt >= 2:
            page.reload(wait_until="networkidle")
        try:
            page.wait_for_function(
                "!window.MathJax || !MathJax.Hub || (MathJax.Hub.queue.pending === 0"
                " && MathJax.Hub.queue.running === 0)",
                timeout=60_000,
            )
            page.wait_for_function(RAW_TEX_LEFT, arg=RAW_TEX.pattern, timeout=30_000)
            break
        except Exception:  # noqa: BLE001  (raw TeX left after the last try is reported by the checks)
            pass


def visit(browser, base: str, slug: str, screenshot: Path | None = None, katex: bool = True) -> dict:
    """Open one page of the site served at ``base`` offline; what INSPECT found, plus errors and requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, blocked, katex_versions = [], [], set()
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def offline(route):  # nothing outside 127.0.0.1, except local copies of KaTeX's CSS and MathJax 2
        url = route.request.url
        if (m := KATEX_CDN.match(url)) and katex:
            katex_versions.add(m.group(1))
            local = KATEX / "dist" / m.group("file")
        elif m := MATHJAX_CDN.match(url):
            local = MATHJAX / m.group("file")
        else:
            blocked.append(url)
            return route.fulfill(status=204, body="")
        if local.is_file():
            return route.fulfill(path=str(local))
        return route.fulfill(status=404, body="")

    page.route(lambda url: not url.startswith(base), offline)
    page.goto(f"{base}/" if slug == "index" else f"{base}/{slug}", wait_until="networkidle")
    settle_math(page)
    if screenshot is not None:  # a full-page screenshot lays out the whole page, so lazy images load
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
    try:
        page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=15_000)
    except Exception:  # noqa: BLE001  (an image that never loads is reported by the checks)
        pass
    # The theme lists the first references only, behind a "Show All" button, when a page cites many works;
    # open the whole list, as a reader would, so that every citation can be checked against it.
    page.evaluate(
        "() => document.querySelectorAll('button.myst-bibliography-toggle')"
        ".forEach(b => { if (b.textContent.trim() === 'Show All') b.click(); })"
    )
    page.wait_for_timeout(300)
    settle_math(page, reload=False)  # opening the list re-renders the page: its outputs' TeX is typeset again
    found = page.evaluate(INSPECT)
    page.close()
    return {**found, "errors": errors, "blocked": blocked, "katex_versions": katex_versions}


@pytest.fixture(scope="module")
def rendered(html_site: Path, site_browser) -> dict:
    """Every page of the site opened once: ``{"base": url, "pages": {slug: what visit() found}}``.

    Full-page screenshots of every page are saved in build/screenshots/site/.
    """
    server, base = serve(html_site)
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    pages = {slug: visit(site_browser, base, slug, screenshot=SCREENSHOTS / f"{slug}.png") for slug in PAGES}
    print(f"\nscreenshots of the website's {len(pages)} pages: {SCREENSHOTS}")
    yield {"base": base, "folder": html_site, "pages": pages}
    server.shutdown()
    server.server_close()


@functools.lru_cache(maxsize=None)
def exists(base: str, path: str) -> bool:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as response:
            return response.status == 200
    except urllib.error.URLError:
        return False


def page_of(path: str) -> str | None:
    """The slug of the page that an internal href's path opens ("/" is the index), None if not a page."""
    slug = path.strip("/") or "index"
    return slug if slug in PAGES else None


def problems(slug: str, found: dict, ids: dict[str, set[str]], page_json: dict, base: str) -> list[str]:
    """What is wrong with one page of the site, as readable sentences (empty: nothing)."""
    out = [f"console error: {e}" for e in found["errors"]]
    # equations: typeset once, by KaTeX, with its MathML copy hidden (no plain-text duplicate)
    maths = [n for n in nodes(page_json["mdast"]) if n["type"] in ("math", "inlineMath")]
    if found["katex"] < len(maths):  # more when cell outputs (markdown tables) hold math too
        out.append(f"{len(maths)} equations in the page's content but {found['katex']} typeset by KaTeX")
    out += [
        f"equation shown twice (KaTeX's plain copy is visible; its stylesheet missing?): {t!r}"
        for t in found["mathmlShown"]
    ]
    out += [f"equation not drawn: {t!r}" for t in found["htmlHidden"]]
    out += [f"equation KaTeX/MathJax could not typeset: {t!r}" for t in found["mathErrors"]]
    out += [
        f"raw TeX in the text: {m.group(0)!r} in …{found['text'][max(0, m.start() - 40) : m.end() + 20]!r}"
        for m in RAW_TEX.finditer(found["text"])
    ]
    # figures: every one present and loaded
    out += [f"image not loaded: {src}" for src, width in found["images"] if width == 0]
    # citations: each names an entry of the page's references, and every cited work has an entry
    entries = dict(found["entries"])
    for cite in found["cites"]:
        surname, year = re.match(r"\(?([^\s,&(]+)", cite), re.search(r"\d{4}[a-z]?", cite)
        if not (
            surname
            and year
            and any(text.startswith(surname.group(1)) and f"({year.group(0)})" in text for text in entries.values())
        ):
            out.append(f"citation {cite!r} has no entry in the page's references")
    cited = set(page_json.get("references", {}).get("cite", {}).get("order", []))
    out += [f"cited work {key} is missing from the page's references" for key in sorted(cited - set(entries))]
    # internal links: to a page of the site (served), and to an anchor that page has
    for href in sorted(set(found["links"])):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):
            continue  # external (https:, mailto:): not followed offline
        path, _, anchor = href.partition("#")
        target = page_of(path) if path else slug
        if path and target is None and not (path.startswith("/build/") and exists(base, path)):
            out.append(f"link to a page that is not in the site: {href}")
        elif path and target is not None and not exists(base, path):
            out.append(f"link to a page that is not served: {href}")
        elif anchor and target is not None and anchor not in ids[target]:
            out.append(f"link to an anchor that {target} does not have: {href}")
    return out


def page_content(folder: Path, slug: str) -> dict:
    return json.loads((folder / f"{slug}.json").read_text())


@pytest.mark.parametrize("slug", list(PAGES))
def test_website_page_reads_cleanly(rendered: dict, slug: str):
    """No console error, equations typeset once, figures loaded, citations and internal links resolved.

    The page's full-page screenshot is build/screenshots/site/<slug>.png.
    """
    ids = {s: set(found["ids"]) for s, found in rendered["pages"].items()}
    found = rendered["pages"][slug]
    assert not problems(slug, found, ids, page_content(rendered["folder"], slug), rendered["base"]), (
        problems(slug, found, ids, page_content(rendered["folder"], slug), rendered["base"]),
        f"requests blocked: {found['blocked']}",
        f"screenshot: {SCREENSHOTS / (slug + '.png')}",
    )
    source = (rendered["folder"].parents[1] / PAGES[slug]).read_text()  # the copy built
    if PAGES[slug].endswith(".ipynb"):
        outputs = [o for c in json.loads(source)["cells"] for o in c.get("outputs", [])]
        figures = sum("image/png" in o.get("data", {}) for o in outputs)
    else:  # a guide page of docs/
        figures = len(re.findall(r"!\[[^\]]*\]\([^)]+\.png\)", source))
    shown = [src for src, _ in found["images"] if src.endswith(".png")]
    assert len(shown) >= figures, f"{figures} figures in {PAGES[slug]}, {len(shown)} on its page"


def test_website_title_bar_katex_and_repository(rendered: dict):
    """The title bar shows the book's short title, not the theme's "Made with MyST"; the repository link is
    pyproject.toml's; the KaTeX the pages load is the version scripts/setup.sh installs."""
    pages = rendered["pages"]
    logo_text = MYST_CONFIG["site"]["options"]["logo_text"]
    assert {found["home"].strip() for found in pages.values()} == {logo_text}
    repository = book_tool.repository_url()
    assert MYST_CONFIG["project"]["github"].rstrip("/") == repository, (
        "myst.yml's project.github is not pyproject.toml's [project.urls] Repository (python tools/book.py links)"
    )
    assert {href for found in pages.values() for href in found["github"]} == {repository}
    installed = json.loads((KATEX / "package.json").read_text())["version"]
    assert set().union(*(found["katex_versions"] for found in pages.values())) == {installed}, (
        "the pages load another KaTeX version than build/node_modules holds: update scripts/setup.sh"
    )
    assert sum(found["katex"] for found in pages.values()) > 100


def test_website_checks_catch_a_broken_page(rendered: dict, site_browser, tmp_path: Path):
    """A page with a missing figure, a link to an anchor its target lacks, and KaTeX's stylesheet not served,
    fails the checks above with each fault named, the figure's 404 as a console error too (so a clean page
    means something)."""
    pages = rendered["pages"]
    ids = {s: set(found["ids"]) for s, found in pages.items()}
    # a page with a figure and a link to an anchor of another page
    slug, href = next(
        (s, h)
        for s, found in pages.items()
        if any(src.endswith(".png") for src, _ in found["images"])
        for h in found["links"]
        if re.match(r"^/[\w-]+#[\w-]+$", h) and page_of(h.split("#")[0]) and h.split("#")[1] not in ids[s]
    )
    folder = tmp_path / "html"
    shutil.copytree(rendered["folder"], folder)
    figure = next(src for src, _ in pages[slug]["images"] if src.endswith(".png"))
    (folder / figure.lstrip("/")).unlink()
    anchor = href.split("#")[1]
    html = folder / slug / "index.html" if slug != "index" else folder / "index.html"
    html.write_text(html.read_text().replace(anchor, "no-such-anchor"))  # the HTML and its page data
    server, base = serve(folder)
    try:
        found = visit(site_browser, base, slug, katex=False)
        found_problems = problems(slug, found, ids, page_content(folder, slug), base)
    finally:
        server.shutdown()
        server.server_close()
    assert f"image not loaded: {figure}" in found_problems, found_problems
    assert (
        f"link to an anchor that {href.split('#')[0].strip('/')} does not have: "
        f"{href.split('#')[0]}#no-such-anchor" in found_problems
    ), found_problems
    assert any(p.startswith("equation shown twice") for p in found_problems), found_problems
    assert any(p.startswith("console error: Failed to load resource") for p in found_problems), found_problems
    assert not problems(slug, pages[slug], ids, page_content(rendered["folder"], slug), rendered["base"])


def test_site_tool_settings_fail_clearly_and_keep_the_theme_install(tmp_path: Path, monkeypatch):
    """tools/site.py: a wrong theme folder or base URL is a clear error; a re-copied theme keeps its npm
    install while its package-lock.json is unchanged."""
    monkeypatch.setenv(site_tool.THEME_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(site_tool.SiteError, match=f"{site_tool.THEME_ENV}=.*no template.yml"):
        site_tool.theme_setting()
    assert site_tool.main(["build", "--theme", str(tmp_path / "nowhere")]) == 2
    with pytest.raises(site_tool.SiteError, match="--base-url"):
        site_tool.check_base_url("dfl-book/")
    assert site_tool.check_base_url("/dfl-book") == "/dfl-book"
    theme = tmp_path / "theme"
    theme.mkdir()
    (theme / "template.yml").write_text("myst: v1\nkind: site\n")
    (theme / "package-lock.json").write_text("{}")
    monkeypatch.delenv(site_tool.THEME_ENV)
    assert site_tool.theme_setting(theme) == theme.resolve() and site_tool.theme_setting() is None
    project = tmp_path / "project"
    place = site_tool.install_theme(project, theme)
    assert place == project / site_tool.THEME_PLACE and (place / "template.yml").is_file()
    (place / "node_modules" / "express").mkdir(parents=True)
    site_tool.install_theme(project, theme)
    assert (place / "node_modules" / "express").is_dir()
    (theme / "package-lock.json").write_text('{"changed": true}')
    site_tool.install_theme(project, theme)
    assert not (place / "node_modules").exists() and (place / "package-lock.json").read_text() != "{}"
