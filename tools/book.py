"""Maintain the book: regenerate the executed notebooks, and keep derived text in sync.

    python tools/book.py execute [CHAPTER ...]   # links, then run book/NN_x.md into book/NN_x.ipynb (DFL_PROFILE=fast)
    python tools/book.py sync [CHAPTER ...]      # links, then update the notebooks' markdown, keeping outputs
    python tools/book.py links                   # rewrite the derived text of every chapter (see below)
    python tools/book.py check                   # exit 1 if derived text is stale or MyST-only syntax is left
    python tools/book.py student OUTDIR [CHAPTER ...]   # a student edition: the notebooks without solutions

A chapter must read the same in JupyterLab, Colab (one notebook opened alone) and
on the MyST site, so its markdown uses only forms that plain Markdown + MathJax
render and that MyST still resolves (book/README.md, "Citations, links and
equations"). Authors write the short forms; ``links`` turns them into forms that
resolve in a notebook on its own:

- a citation ``[(?)](cite:shi2023dfedsam)`` becomes ``[(Shi et al., 2023)](#ref-shi2023dfedsam)``,
  a link to the chapter's own reference list (several keys:
  ``[(…)](#ref-k1 "cite:k1,k2")``, the title keeps every key); the site's plugin
  ``book/_plugins/portable.mjs`` turns both forms into MyST citations;
- a chapter link ``[text](03_distributed.ipynb#sec-x)`` becomes a link to the
  chapter's page on the book's site, ``[text](<Book>/distributed#sec-x)``, which
  the plugin turns back into a cross-reference;
- an equation is labelled by ``<span id="eq-name"></span>`` before its ``$$``
  block and numbered by ``\\tag{N}``; it is referenced as ``[(N)](#eq-name)``;
- the last cell of a chapter that cites anything is its "References" list
  (tagged ``references`` and ``remove-cell``: the site shows its own bibliography).

``links`` derives, from one place each, everything a person should not type by
hand: the Colab badge and install line (from pyproject.toml), the text of each
citation and the reference list (from book/references.bib), the ``\\tag{N}`` of
each labelled equation (its rank in the chapter), the number in each equation
reference, the text of an empty chapter link (the chapter's title), the URL of
each chapter link (from pyproject.toml) and myst.yml's ``project.github``.
``execute`` also derives the cell metadata that shows solutions collapsed (cells
tagged ``solution``).

The URLs live in one place, ``[project.urls]`` of pyproject.toml: ``Repository``
(the Colab badge, the install line, myst.yml's ``github``) and ``Book`` (the
site: the page of ``NN_some_name.ipynb`` is ``<Book>/some-name``, mystmd's slug,
and the first chapter's is ``<Book>/``). Run ``execute`` after changing a chapter
or the engine's numbers, on a machine like CI's (2 CPU cores, the torch pinned in
.ci/run), and commit the notebooks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
import unicodedata
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
BIBLIOGRAPHY = BOOK / "references.bib"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(https://colab\.research\.google\.com/[^)]*\)")
INSTALL = re.compile(r'%pip install -q "dfl-book @ git\+[^"]*"')

# The portable forms (see the module docstring).
CITE_LINK = re.compile(r"\[([^\]]*)\]\(cite:([^)\s]+)\)")  # what authors write
REF_LINK = re.compile(
    r'\[(?P<text>[^\]]*)\]\(#ref-(?P<first>[^)\s"]+)(?:[ \t]+"cite:(?P<keys>[^"]+)")?\)'
)  # what links writes
REF_PREFIX = "ref-"
REFERENCES_MARKER = '+++ {"tags": ["references", "remove-cell"]}'
REFERENCES_CELL = re.compile(
    r"^" + re.escape(REFERENCES_MARKER) + r"[ \t]*\n.*?(?=^\+\+\+|^```\{code-cell\}|\Z)", re.M | re.S
)
# A markdown cell whose content is generated from the package: the notation table of 90_notation
# (dfl_book.notation, which the chapter's assert cell checks against the engine's Config).
NOTATION_MARKER = '+++ {"tags": ["notation-table"]}'
NOTATION_CELL = re.compile(
    r"^(" + re.escape(NOTATION_MARKER) + r"[ \t]*\n).*?(?=^\+\+\+|^```\{code-cell\}|\Z)", re.M | re.S
)
CHAPTER_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<file>[\w.-]+\.ipynb)(?:#(?P<anchor>[\w-]+))?\)")
EQ_DEFINITION = re.compile(
    r'^(?P<indent>[ \t]*)<span id="(?P<label>eq-[\w-]+)"></span>[ \t]*\n[ \t]*\n'
    r"(?P<open>[ \t]*\$\$[ \t]*\n)(?P<body>.*?)(?P<close>\n[ \t]*\$\$[ \t]*)$",
    re.M | re.S,
)
EQ_REFERENCE = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<file>[\w.-]+\.ipynb)?#(?P<label>eq-[\w-]+)\)")
EMPTY_CHAPTER_LINK = re.compile(r"\[\]\((?P<file>[\w.-]+\.ipynb)\)")
TAG = re.compile(r"[ \t]*\\tag\{[^}]*\}")
SOLUTION_TAG = "solution"

# MyST-only syntax that Jupyter and Colab would show raw (checked in markdown, outside code blocks).
LEFTOVERS = {
    "a MyST role ({cite:p}`...`, {eq}`...`, ...)": re.compile(
        r"\{(cite(:\w+)?|eq|numref|ref|doc|term|math|download)\}`"
    ),
    "a MyST directive (```{name} or :::{name})": re.compile(r"^\s*(```+|:::+)\{", re.M),
    "a MyST target line ((label)=)": re.compile(r"^\s*\([\w-]+\)=\s*$", re.M),
    "an equation label after $$ ($$ (label))": re.compile(r"\$\$[ \t]*\([\w-]+\)"),
    "an empty link ([](...))": re.compile(r"(?<!!)\[\]\([^)]*\)"),
}
LINK = re.compile(r'(?<!!)\[(?P<text>[^\]]*)\]\((?P<file>[\w.-]+\.ipynb)?(?:#(?P<anchor>[\w-]+))?(?:[ \t]+"[^"]*")?\)')
ANCHOR = re.compile(r'<span id="([\w-]+)"></span>')


def project_urls() -> dict[str, str]:
    """``[project.urls]`` of pyproject.toml: the one place the book's URLs are kept."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("urls", {})


def repository_url() -> str:
    """``https://github.com/OWNER/REPO`` from pyproject.toml."""
    return project_urls()["Repository"].rstrip("/").removesuffix(".git")


def book_url() -> str:
    """The book's site, ``[project.urls] Book`` of pyproject.toml, without a trailing slash."""
    url = project_urls().get("Book", "")
    if not re.match(r"https?://[^\s/]+", url):
        raise ValueError(f"pyproject.toml: [project.urls] Book must be the http(s) URL of the book's site, not {url!r}")
    return url.rstrip("/")


def colab_badge(notebook: str, ref: str = "main") -> str:
    """The "Open in Colab" badge for ``book/<notebook>`` (absolute URLs: it works in a notebook opened alone)."""
    owner_repo = repository_url().removeprefix("https://github.com/")
    target = f"https://colab.research.google.com/github/{owner_repo}/blob/{ref}/book/{notebook}"
    return f"[![Open In Colab]({BADGE_IMAGE})]({target})"


def page_slug(stem: str) -> str:
    """The slug mystmd gives the page of ``<stem>.ipynb`` (myst-cli's ``createSlug``, mystmd 1.11).

    A leading enumeration ``[0-9_.-]+`` is removed (unless the name starts with a
    year or five digits), every run of characters other than ``a-z0-9-`` becomes
    one ``-``, lower case, at most 50 characters: ``03_distributed`` → ``distributed``,
    ``03b_compression_privacy`` → ``b-compression-privacy``.
    """
    name = stem
    if not re.match(r"[12][0-9]{3}|[0-9]{5}", name):
        name = re.sub(r"^[0-9_.-]+", "", name) or name
    marked = "".join(
        c if re.fullmatch(r"[a-z0-9-]", c) else "\u00b6"
        for c in ("\u00b6" + name.replace("&", "\u00b6and\u00b6")).lower()
    )
    slug = re.sub("-+", "-", re.sub("\u00b6+", "\u00b6", marked)[1:].replace("\u00b6", "-"))
    slug = slug[1:] if slug.startswith("-") else slug
    slug = slug[:-1] if slug.endswith("-") else slug
    return slug[:50]


def page_urls() -> dict[str, str]:
    """``{notebook: URL of its page on the book's site}``; the first chapter is the site's index, ``<Book>/``."""
    names = [md.with_suffix(".ipynb").name for md in chapters()]
    slugs = {name: ("" if i == 0 else page_slug(Path(name).stem)) for i, name in enumerate(names)}
    clashes = sorted(
        n for n in names if list(slugs.values()).count(slugs[n]) > 1 or (slugs[n] == "index" and n != names[0])
    )
    if clashes:
        raise ValueError(f"chapters whose pages would get the same slug on the site (rename one): {clashes}")
    return {name: f"{book_url()}/{slug}" for name, slug in slugs.items()}


def book_link(url: str) -> tuple[str | None, str] | None:
    """``(notebook, anchor)`` for a URL of a page of the book's site (notebook ``None`` if no chapter has
    that page), or ``None`` for any other URL."""
    if not (url == book_url() or url.startswith(book_url() + "/") or url.startswith(book_url() + "#")):
        return None
    page, _, anchor = url.partition("#")
    page = page.rstrip("/") + "/"
    found = [name for name, u in page_urls().items() if u.rstrip("/") + "/" == page]
    return (found[0] if found else None), anchor


def _book_link_pattern() -> re.Pattern:
    return re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<url>" + re.escape(book_url()) + r"(?:/[\w.-]*)?(?:#[\w-]+)?)\)")


def install_line() -> str:
    """The pip line of a chapter's Colab set-up cell (no pins on torch or numpy)."""
    return f'%pip install -q "dfl-book @ git+{repository_url()}"'


def reading_order(path: Path) -> float:
    """Where a chapter stands in the book: ``NN_`` is chapter NN, and a chapter added between NN and NN + 1 is
    ``NNk_``, read as NN + k/10 (``035_judging_a_claim`` comes after 03, ``085_implicit_sam`` after 08)."""
    number = path.name.split("_")[0]
    return int(number[:2]) + (int(number[2:]) / 10 if len(number) > 2 else 0)


def chapters(names: list[str] | None = None) -> list[Path]:
    """The chapter sources ``book/NN_*.md`` in reading order (:func:`reading_order`), all or those whose name
    contains one of ``names``."""
    found = sorted(BOOK.glob("[0-9][0-9]*_*.md"), key=reading_order)
    if names:
        found = [p for p in found if any(n in p.stem for n in names)]
    return found


# ---------------------------------------------------------------------------------------------
# Markdown outside code: every rewrite and check below leaves code cells and fenced blocks alone.

FENCE = re.compile(r"^(`{3,})[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)


def _rewrite_markdown(text: str, rewrite) -> str:
    """Apply ``rewrite(str) -> str`` to the parts of ``text`` outside fenced blocks (code cells, ```bash)."""
    out, last = [], 0
    for fence in FENCE.finditer(text):
        if re.match(r"```+\{(?!code-cell)", fence.group(0)):  # a MyST directive: markdown, not code
            continue
        out += [rewrite(text[last : fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(out + [rewrite(text[last:])])


def markdown_text(text: str) -> str:
    """``text`` with code cells and fenced code blocks blanked out (for checks)."""
    parts: list[str] = []
    _rewrite_markdown(text, lambda s: parts.append(s) or s)
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Citations: author-year text from book/references.bib, as MyST's default (APA) style prints it.


@lru_cache(maxsize=1)
def bibliography() -> dict[str, tuple[tuple[str, ...], str]]:
    """``{key: (family names of the authors, year)}`` from book/references.bib (read by :func:`bib_entries`)."""
    entries = {}
    for key, fields in bib_entries().items():
        authors = [a.strip() for a in re.split(r"\s+and\s+", fields["author"])]
        family = tuple(re.sub(r"[{}]", "", a.split(",")[0] if "," in a else a.split()[-1]).strip() for a in authors)
        entries[key] = (family, fields["year"].strip())
    return entries


def _authors(family: tuple[str, ...]) -> str:
    if len(family) == 1:
        return family[0]
    return f"{family[0]} & {family[1]}" if len(family) == 2 else f"{family[0]} et al."


def cite_text(keys: list[str], parenthetical: bool) -> str:
    """How a citation reads: ``(Shi et al., 2023; Qu et al., 2022)`` or ``Shi et al. (2023)``."""
    bib = bibliography()
    unknown = [k for k in keys if k not in bib]
    if unknown:
        raise KeyError(f"not in book/references.bib: {', '.join(unknown)}")
    if parenthetical:
        return "(" + "; ".join(f"{_authors(bib[k][0])}, {bib[k][1]}" for k in keys) + ")"
    return "; ".join(f"{_authors(bib[k][0])} ({bib[k][1]})" for k in keys)


def cite_keys(text: str) -> set[str]:
    """Every key cited in a chapter's markdown, in either form (``cite:`` or ``#ref-``)."""
    text = markdown_text(text)
    keys = {k.strip() for m in CITE_LINK.finditer(text) for k in m.group(2).split(",")}
    return keys | {k.strip() for m in REF_LINK.finditer(text) for k in (m.group("keys") or m.group("first")).split(",")}


def _citations(text: str) -> str:
    def fix(m: re.Match) -> str:
        keys = [k.strip() for k in m.group(2).split(",")]
        return f"[{cite_text(keys, m.group(1).startswith('('))}](cite:{','.join(keys)})"

    return CITE_LINK.sub(fix, text)


def citation_link(text: str, keys: list[str]) -> str:
    """A citation as a chapter stores it: a link to the first work in the chapter's reference list,
    whose title lists every key when there are several."""
    title = f' "cite:{",".join(keys)}"' if len(keys) > 1 else ""
    return f"[{text}](#{REF_PREFIX}{keys[0]}{title})"


# The reference list: the last cell of a chapter, one entry per cited work, each with its anchor.


@lru_cache(maxsize=1)
def bib_entries() -> dict[str, dict[str, str]]:
    """``{key: {field: raw value}}`` of book/references.bib (braces balanced, so nested ``{...}`` stay whole)."""
    text, entries = BIBLIOGRAPHY.read_text(), {}
    for head in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        fields, i = {"ENTRYTYPE": head.group(1).lower()}, head.end()
        while True:
            field = re.compile(r"[\s,]*(?:(\})|(\w+)\s*=\s*)").match(text, i)
            if field is None:
                raise ValueError(
                    f"book/references.bib: cannot read the entry {head.group(2)} near: {text[i : i + 60]!r}"
                )
            if field.group(1):
                break
            i = field.end()
            if text[i] == "{":
                depth, j = 0, i
                while True:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    if depth == 0:
                        break
                    j += 1
                value, i = text[i + 1 : j], j + 1
            elif text[i] == '"':
                j = text.index('"', i + 1)
                value, i = text[i + 1 : j], j + 1
            else:
                value = re.compile(r"[^,}\s]+").match(text, i).group(0)
                i += len(value)
            fields[field.group(2).lower()] = value
        entries[head.group(2)] = fields
    return entries


ACCENTS = {
    '"': "\u0308",
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "u": "\u0306",
    "v": "\u030c",
    "H": "\u030b",
    "c": "\u0327",
    "k": "\u0328",
}


def plain_text(latex: str) -> str:
    """A BibTeX value as text: accents (``{\\"u}``) as letters, dashes, no protecting braces."""
    text = re.sub(r'\{?\\([\'"`^~=.])\s*\{?([A-Za-z])\}?\}?', lambda m: m.group(2) + ACCENTS[m.group(1)], latex)
    text = re.sub(r"\{?\\([uvHck])\s*\{([A-Za-z])\}\}?", lambda m: m.group(2) + ACCENTS[m.group(1)], text)
    text = text.replace("---", "\u2014").replace("--", "\u2013").replace("\\&", "&").replace("~", " ")
    text = re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()
    return unicodedata.normalize("NFC", text)


def _markdown_escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>$])", r"\\\1", text)


def reference(key: str) -> str:
    """One entry of a chapter's reference list: anchor, authors, year, title, venue, DOI / arXiv / URL links."""
    entries = bib_entries()
    if key not in entries:
        raise KeyError(f"not in book/references.bib: {key}")
    bib = {name: plain_text(value) for name, value in entries[key].items()}
    authors = []
    for author in re.split(r"\s+and\s+", bib["author"]):
        family, _, given = author.partition(",")
        authors.append(f"{given.strip()} {family.strip()}".strip() if given else author.strip())
    names = authors[0] if len(authors) == 1 else ", ".join(authors[:-1]) + " and " + authors[-1]
    title = bib["title"] + ("" if bib["title"][-1:] in "?!." else ".")
    venue = bib.get("journal") or bib.get("booktitle") or bib.get("publisher") or bib.get("howpublished") or ""
    details = "".join(
        [
            f", {bib['series']} {bib['volume']}"
            if "series" in bib and "volume" in bib
            else f", {bib['volume']}"
            if "volume" in bib
            else "",
            f"({bib['number']})" if "number" in bib and "volume" in bib else "",
            f", {bib['pages'].replace('--', '–')}" if "pages" in bib else "",
        ]
    )
    links = []
    if "doi" in bib:
        links.append(f"[doi:{bib['doi']}](https://doi.org/{bib['doi'].replace('(', '%28').replace(')', '%29')})")
    if "eprint" in bib:
        links.append(f"[arXiv:{bib['eprint']}](https://arxiv.org/abs/{bib['eprint']})")
    if "url" in bib:
        links.append(f"[{re.sub(r'^https?://(www[.])?', '', bib['url']).rstrip('/')}]({bib['url']})")
    line = f'- <span id="{REF_PREFIX}{key}"></span>{_markdown_escape(names)} ({bib["year"]}). {_markdown_escape(title)}'
    if venue:
        line += f" *{_markdown_escape(venue)}*{_markdown_escape(details)}."
    return line + (" " + " · ".join(links) if links else "")


def references_cell(keys: set[str]) -> str:
    """The generated last cell of a chapter: every work it cites, by first author's family name and year."""
    bib = bibliography()
    unknown = sorted(k for k in keys if k not in bib)
    if unknown:
        raise KeyError(f"not in book/references.bib: {', '.join(unknown)}")
    ordered = sorted(keys, key=lambda k: ([plain_text(f).lower() for f in bib[k][0]], bib[k][1], k))
    return "\n".join([REFERENCES_MARKER, "", "## References", "", *map(reference, ordered)]) + "\n"


# ---------------------------------------------------------------------------------------------
# Equations: the N-th labelled equation of a chapter is \tag{N}; references carry that number.


def equation_numbers(text: str) -> dict[str, int]:
    """``{label: N}`` for the labelled equations of a chapter, in order."""
    labels = [m.group("label") for m in EQ_DEFINITION.finditer(markdown_text(text))]
    return {label: n for n, label in enumerate(labels, start=1)}


def _tag_equations(text: str, numbers: dict[str, int]) -> str:
    def fix(m: re.Match) -> str:
        body = TAG.sub("", m.group("body")).rstrip()
        return (
            m.group(0)[: m.start("body") - m.start()]
            + f"{body} \\tag{{{numbers[m.group('label')]}}}"
            + m.group("close")
        )

    return EQ_DEFINITION.sub(fix, text)


def _number_references(text: str, here: str, index: dict[str, dict[str, int]]) -> str:
    def fix(m: re.Match) -> str:
        numbers = index.get(m.group("file") or here, {})
        if m.group("label") not in numbers:
            return m.group(0)  # left for the checks and the site build to report
        new = re.sub(r"\d+", str(numbers[m.group("label")]), m.group("text"), count=1)
        return m.group(0).replace(f"[{m.group('text')}]", f"[{new}]", 1)

    return EQ_REFERENCE.sub(fix, text)


# ---------------------------------------------------------------------------------------------
# Chapter links and derived text.


def title(text: str) -> str:
    """A chapter's title: its first ``# `` heading."""
    return re.search(r"^# (.+)$", markdown_text(text), re.M).group(1).strip()


@lru_cache(maxsize=None)
def _chapter_texts() -> dict[str, str]:
    return {md.with_suffix(".ipynb").name: md.read_text() for md in chapters()}


def _short_forms(part: str) -> str:
    """Citations and chapter links as authors write them (``cite:``, ``NN_x.ipynb``), for the derivations."""
    part = REF_LINK.sub(lambda m: f"[{m.group('text')}](cite:{m.group('keys') or m.group('first')})", part)

    def chapter(m: re.Match) -> str:
        notebook, anchor = book_link(m.group("url"))
        if notebook is None:
            return m.group(0)  # a page the book does not have: left for the checks to report
        return f"[{m.group('text')}]({notebook}{'#' + anchor if anchor else ''})"

    return _book_link_pattern().sub(chapter, part)


def _stored_forms(part: str, here: str) -> str:
    """Citations and chapter links as a chapter stores them: links that resolve in a notebook opened alone."""
    part = CITE_LINK.sub(lambda m: citation_link(m.group(1), [k.strip() for k in m.group(2).split(",")]), part)
    pages = page_urls()

    def chapter(m: re.Match) -> str:
        text, notebook, anchor = m.group("text", "file", "anchor")
        if notebook == here and anchor:
            return f"[{text}](#{anchor})"  # a place in this chapter: an in-page anchor
        if notebook not in pages:
            return m.group(0)  # not a chapter: left for the checks to report
        return f"[{text}]({pages[notebook]}{'#' + anchor if anchor else ''})"

    return CHAPTER_LINK.sub(chapter, part)


def expected_text(md: Path, text: str | None = None) -> str:
    """The chapter's source with every derived piece of text brought up to date."""
    text = md.read_text() if text is None else text
    here = md.with_suffix(".ipynb").name
    texts = {**_chapter_texts(), here: text}
    index = {name: equation_numbers(t) for name, t in texts.items()}
    titles = {name: title(t) for name, t in texts.items()}

    def derive(part: str) -> str:
        part = _short_forms(part)
        part = _citations(part)
        part = _tag_equations(part, index[here])
        part = _number_references(part, here, index)
        part = EMPTY_CHAPTER_LINK.sub(
            lambda m: f"[{titles[m.group('file')]}]({m.group('file')})" if m.group("file") in titles else m.group(0),
            part,
        )
        return _stored_forms(part, here)

    body, had_references = REFERENCES_CELL.subn("", text)
    body = NOTATION_CELL.sub(lambda m: m.group(1) + "\n" + notation_table() + "\n\n", body)
    body = BADGE.sub(lambda _: colab_badge(here), body)
    body = INSTALL.sub(lambda _: install_line(), body)
    body = _rewrite_markdown(body, derive)
    keys = cite_keys(body)
    if keys:
        return body.rstrip("\n") + "\n\n" + references_cell(keys)
    return body.rstrip("\n") + "\n" if had_references else body


def notation_table() -> str:
    """The notation table, as the package's :func:`dfl_book.notation.markdown_table` writes it."""
    from dfl_book import notation  # only chapters with a notation cell need the package

    return notation.markdown_table()


def leftovers(text: str) -> list[str]:
    """MyST-only syntax in a chapter's markdown that Jupyter and Colab would show raw, as messages."""
    found = []
    for lineno, line in enumerate(markdown_text(text).splitlines(), start=1):
        for what, pattern in LEFTOVERS.items():
            if pattern.search(line):
                found.append(f"{what}: {line.strip()[:90]}")
    return found


def anchors(text: str) -> set[str]:
    """The ids a chapter defines for links: its ``<span id="..."></span>`` anchors."""
    return set(ANCHOR.findall(markdown_text(text)))


ANY_LINK = re.compile(r'!?\[[^\]]*\]\((?P<target>[^)\s]*)(?:[ \t]+"[^"]*")?\)')


def broken_links(text: str, here: str) -> list[str]:
    """Links of a chapter that would not resolve, as messages: to a chapter, page or anchor that does not
    exist, to a relative file (which a notebook opened alone in Colab cannot follow), or anchors with the
    ``ref-`` prefix that only the generated reference list may use."""
    texts = {**_chapter_texts(), here: text}
    markdown = markdown_text(text)
    found = []
    for m in _book_link_pattern().finditer(markdown):
        if book_link(m.group("url"))[0] is None:
            found.append(f"a link to a page that the book's site does not have: {m.group(0)}")
    for m in ANY_LINK.finditer(markdown):
        target = m.group("target")
        if not re.match(r"(https?://|mailto:|cite:|#|[\w.-]+\.ipynb(#|$))", target):
            found.append(f"a relative link, which a notebook opened alone cannot follow: {m.group(0)}")
    for m in LINK.finditer(_short_forms(markdown)):
        target = m.group("file") or here
        if target not in texts:
            found.append(f"a link to a chapter that is not in book/: {m.group(0)}")
        elif m.group("anchor") and m.group("anchor") not in anchors(texts[target]):
            found.append(f"a link to an anchor that {target} does not define: {m.group(0)}")
    reserved = anchors(REFERENCES_CELL.sub("", text)) & {a for a in anchors(text) if a.startswith(REF_PREFIX)}
    found += [
        f"an anchor id with the prefix {REF_PREFIX!r}, which only the reference list may use: {a}"
        for a in sorted(reserved)
    ]
    return found


def expected_myst_yml(text: str) -> str:
    """myst.yml with ``project.github`` set to the repository URL of pyproject.toml."""
    github = re.compile(r"^(?P<indent>  )github:[^\n]*$", re.M)
    if not github.search(text):
        raise ValueError("myst.yml has no 'github:' line under 'project:' (tools/book.py links writes its URL)")
    return github.sub(lambda m: f"{m.group('indent')}github: {repository_url()}", text, count=1)


def links(check: bool = False) -> int:
    stale, broken = [], []
    myst = ROOT / "myst.yml"
    if myst.read_text() != expected_myst_yml(myst.read_text()):
        stale.append(myst)
        if not check:
            myst.write_text(expected_myst_yml(myst.read_text()))
    for md in chapters():
        try:
            want = expected_text(md)
        except KeyError as unknown:
            broken.append(f"{md.name}: {unknown.args[0]}")
            continue
        broken += [
            f"{md.name}: {problem}" for problem in leftovers(want) + broken_links(want, md.with_suffix(".ipynb").name)
        ]
        if md.read_text() != want:
            stale.append(md)
            if not check:
                md.write_text(want)
                _chapter_texts.cache_clear()
    for path in stale:
        print(f"{'stale' if check else 'updated'}: {path.relative_to(ROOT)}")
    for problem in broken:
        print(f"not portable: {problem}")
    return 1 if (check and stale) or broken else 0


# ---------------------------------------------------------------------------------------------
# Solutions: cells tagged `solution` are collapsed everywhere, and still executed and compared.


def solution_metadata(cell: dict) -> dict:
    """The metadata a cell tagged ``solution`` gets in the notebook, for each reader.

    - MyST site: the ``hide-cell`` tag (a collapsed block with a "show" toggle);
    - JupyterLab / Notebook 7: ``jupyter.source_hidden`` (and ``outputs_hidden`` for code);
    - Colab: ``cellView: form`` on code cells (code hidden behind "Show code").
    nbval ignores all of them, so the cell is executed and its output compared as usual.
    """
    meta = dict(cell.get("metadata", {}))
    tags = list(meta.get("tags", []))
    meta["tags"] = tags + [t for t in ("hide-cell",) if t not in tags]
    meta["jupyter"] = {
        **meta.get("jupyter", {}),
        "source_hidden": True,
        **({"outputs_hidden": True} if cell["cell_type"] == "code" else {}),
    }
    if cell["cell_type"] == "code":
        meta["cellView"] = "form"
    return meta


def apply_solution_metadata(ipynb: Path) -> int:
    """Give every cell tagged ``solution`` its :func:`solution_metadata`; the number of such cells."""
    nb = json.loads(ipynb.read_text())
    solutions = [c for c in nb["cells"] if SOLUTION_TAG in c.get("metadata", {}).get("tags", [])]
    for cell in solutions:
        cell["metadata"] = solution_metadata(cell)
    if solutions:
        ipynb.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return len(solutions)


def sync(names: list[str] | None = None) -> int:
    """Bring the notebooks' markdown up to date with their sources, keeping every output (no execution):
    for changes to markdown cells only, such as those ``links`` makes."""
    jupytext = Path(sys.executable).with_name("jupytext")
    for md in chapters(names):
        subprocess.run(
            [str(jupytext), "--update", "--to", "ipynb", md.name], cwd=BOOK, check=True, stdout=subprocess.DEVNULL
        )
        apply_solution_metadata(md.with_suffix(".ipynb"))  # --update keeps only the source's metadata
        print(f"{md.stem}: notebook updated (outputs kept)")
    return 0


def execute(names: list[str] | None = None) -> int:
    # DFL_BOOK_STATIC: explorations show their static figure only (no widget state in committed notebooks)
    env = {**os.environ, "DFL_PROFILE": "fast", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0", "DFL_BOOK_STATIC": "1"}
    jupytext = Path(sys.executable).with_name("jupytext")
    for md in chapters(names):
        start = time.perf_counter()
        subprocess.run(
            [str(jupytext), "--to", "ipynb", "--execute", "--set-kernel", "python3", md.name],
            cwd=BOOK,
            env=env,
            check=True,
        )
        apply_solution_metadata(md.with_suffix(".ipynb"))
        print(f"{md.stem}: executed in {time.perf_counter() - start:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# The student edition: the executed notebooks without their solutions, for homework.

SOLUTION_LINE = re.compile(r"^\s*\*\*Solution to exercise \d+\.\*\*\s*$")


def student_notebook(nb: dict) -> dict:
    """``nb`` (a notebook as JSON) without its solutions: the cells tagged ``solution`` are removed, and so
    are the visible "**Solution to exercise N.**" lines (a markdown cell left empty goes too). Every other
    cell, its outputs included, is kept as it is.

    Raises ValueError if a code cell that is not a solution follows the first solution: it could use a
    name a solution defined, and the student edition would no longer run top to bottom.
    """
    cells, seen_solution = [], False
    for cell in nb["cells"]:
        if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            seen_solution = True
            continue
        if cell["cell_type"] == "code" and seen_solution:
            first = "".join(cell["source"]).strip().splitlines()[:1]
            raise ValueError(
                f"a code cell follows a solution and may depend on it: {first}; "
                "move it above the exercises or tag it 'solution'"
            )
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            kept = [line for line in source.splitlines(keepends=True) if not SOLUTION_LINE.match(line)]
            if not "".join(kept).strip():
                continue
            cell = {**cell, "source": "".join(kept).rstrip("\n")}
        cells.append(cell)
    return {**nb, "cells": cells}


def student(argv: list[str]) -> int:
    """``student OUTDIR [CHAPTER ...]``: write each chapter's executed notebook, without its solutions
    (:func:`student_notebook`), to OUTDIR (created if needed); the chapter's sources are not touched."""
    if not argv:
        print("usage: python tools/book.py student OUTDIR [CHAPTER ...]  (OUTDIR: the folder to write)")
        return 2
    out = Path(argv[0])
    if out.resolve() == BOOK.resolve():
        print(f"refusing to write the student edition over the book itself ({BOOK}); give another OUTDIR")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for md in chapters(argv[1:] or None):
        ipynb = md.with_suffix(".ipynb")
        nb = json.loads(ipynb.read_text())
        try:
            edition = student_notebook(nb)
        except ValueError as e:
            print(f"{ipynb.name}: {e}")
            return 1
        (out / ipynb.name).write_text(json.dumps(edition, indent=1, ensure_ascii=False) + "\n")
        print(f"{out / ipynb.name}: {len(nb['cells']) - len(edition['cells'])} solution cells removed")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "student":
        return student(argv[1:])
    if not argv or argv[0] not in ("execute", "sync", "links", "check"):
        print(__doc__)
        return 2
    if argv[0] in ("execute", "sync"):
        if links():
            return 1
        return (execute if argv[0] == "execute" else sync)(argv[1:])
    return links(check=argv[0] == "check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
