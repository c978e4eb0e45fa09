"""Maintain the book: regenerate the executed notebooks, and keep derived text in sync.

    python tools/book.py execute [CHAPTER ...]   # links, then run book/NN_x.md into book/NN_x.ipynb (DFL_PROFILE=fast)
    python tools/book.py links                   # rewrite the derived text of every chapter (see below)
    python tools/book.py check                   # exit 1 if derived text is stale or MyST-only syntax is left
    python tools/book.py migrate [CHAPTER ...]   # rewrite MyST roles ({cite:p}, {eq}, (label)=, ...) into portable forms

A chapter must read the same in JupyterLab, Colab and on the MyST site, so its
markdown uses only forms that plain Markdown + MathJax render and that MyST
still resolves (book/README.md, "Citations, links and equations"):

- citations are links ``[(Shi et al., 2023)](cite:shi2023dfedsam)`` (parenthetical)
  or ``[Shi et al. (2023)](cite:shi2023dfedsam)`` (narrative); the site's plugin
  ``book/_plugins/portable.mjs`` turns them into MyST citations;
- an equation is labelled by ``<span id="eq-name"></span>`` before its ``$$``
  block and numbered by ``\\tag{N}``; it is referenced as ``[(N)](#eq-name)``;
- another chapter is linked by its notebook, ``[text](03_decentralized_fedavg.ipynb)``.

``links`` derives, from one place each, everything a person should not type by
hand: the Colab badge and install line (from pyproject.toml), the text of each
citation (from book/references.bib), the ``\\tag{N}`` of each labelled equation
(its rank in the chapter), the number in each equation reference, and the text
of an empty chapter link (the chapter's title). ``execute`` also derives the
cell metadata that shows solutions collapsed (cells tagged ``solution``).

The repository URL lives in one place, ``[project.urls] Repository`` of
pyproject.toml. Run ``execute`` after changing a chapter or the engine's
numbers, on a machine like CI's (2 CPU cores, the torch pinned in .ci/run),
and commit the notebooks.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
BIBLIOGRAPHY = BOOK / "references.bib"
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(https://colab\.research\.google\.com/[^)]*\)")
INSTALL = re.compile(r'%pip install -q "dfl-book @ git\+[^"]*"')

# The portable forms (see the module docstring).
CITE_LINK = re.compile(r"\[([^\]]*)\]\(cite:([^)\s]+)\)")
EQ_DEFINITION = re.compile(
    r'^(?P<indent>[ \t]*)<span id="(?P<label>eq-[\w-]+)"></span>[ \t]*\n[ \t]*\n'
    r"(?P<open>[ \t]*\$\$[ \t]*\n)(?P<body>.*?)(?P<close>\n[ \t]*\$\$[ \t]*)$", re.M | re.S)
EQ_REFERENCE = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<file>[\w.-]+\.ipynb)?#(?P<label>eq-[\w-]+)\)")
EMPTY_CHAPTER_LINK = re.compile(r"\[\]\((?P<file>[\w.-]+\.ipynb)\)")
TAG = re.compile(r"[ \t]*\\tag\{[^}]*\}")
SOLUTION_TAG = "solution"

# MyST-only syntax that Jupyter and Colab would show raw (checked in markdown, outside code blocks).
LEFTOVERS = {
    "a MyST role ({cite:p}`...`, {eq}`...`, ...)": re.compile(r"\{(cite(:\w+)?|eq|numref|ref|doc|term|math|download)\}`"),
    "a MyST directive (```{name} or :::{name})": re.compile(r"^\s*(```+|:::+)\{", re.M),
    "a MyST target line ((label)=)": re.compile(r"^\s*\([\w-]+\)=\s*$", re.M),
    "an equation label after $$ ($$ (label))": re.compile(r"\$\$[ \t]*\([\w-]+\)"),
    "an empty link ([](...))": re.compile(r"(?<!!)\[\]\([^)]*\)"),
}
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<file>[\w.-]+\.ipynb)?(?:#(?P<anchor>[\w-]+))?\)")
ANCHOR = re.compile(r'<span id="([\w-]+)"></span>')


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


# ---------------------------------------------------------------------------------------------
# Markdown outside code: every rewrite and check below leaves code cells and fenced blocks alone.

FENCE = re.compile(r"^(`{3,})[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)


def _rewrite_markdown(text: str, rewrite) -> str:
    """Apply ``rewrite(str) -> str`` to the parts of ``text`` outside fenced blocks (code cells, ```bash)."""
    out, last = [], 0
    for fence in FENCE.finditer(text):
        if re.match(r"```+\{(?!code-cell)", fence.group(0)):   # a MyST directive: markdown, not code
            continue
        out += [rewrite(text[last:fence.start()]), fence.group(0)]
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
    """``{key: (family names of the authors, year)}`` from book/references.bib."""
    entries = {}
    for match in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", BIBLIOGRAPHY.read_text(), re.S):
        key, body = match.groups()
        field = lambda name: re.search(rf"\b{name}\s*=\s*\{{(.*?)\}}\s*(?:,|$)", body, re.S | re.M)
        authors = [a.strip() for a in re.split(r"\s+and\s+", field("author").group(1))]
        family = tuple(re.sub(r"[{}]", "", a.split(",")[0] if "," in a else a.split()[-1]).strip() for a in authors)
        entries[key] = (family, field("year").group(1).strip())
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
    """Every key cited in a chapter's text."""
    return {k.strip() for m in CITE_LINK.finditer(text) for k in m.group(2).split(",")}


def _citations(text: str) -> str:
    def fix(m: re.Match) -> str:
        keys = [k.strip() for k in m.group(2).split(",")]
        return f"[{cite_text(keys, m.group(1).startswith('('))}](cite:{','.join(keys)})"
    return CITE_LINK.sub(fix, text)


# ---------------------------------------------------------------------------------------------
# Equations: the N-th labelled equation of a chapter is \tag{N}; references carry that number.

def equation_numbers(text: str) -> dict[str, int]:
    """``{label: N}`` for the labelled equations of a chapter, in order."""
    labels = [m.group("label") for m in EQ_DEFINITION.finditer(markdown_text(text))]
    return {label: n for n, label in enumerate(labels, start=1)}


def _tag_equations(text: str, numbers: dict[str, int]) -> str:
    def fix(m: re.Match) -> str:
        body = TAG.sub("", m.group("body")).rstrip()
        return (m.group(0)[:m.start("body") - m.start()] + f"{body} \\tag{{{numbers[m.group('label')]}}}"
                + m.group("close"))
    return EQ_DEFINITION.sub(fix, text)


def _number_references(text: str, here: str, index: dict[str, dict[str, int]]) -> str:
    def fix(m: re.Match) -> str:
        numbers = index.get(m.group("file") or here, {})
        if m.group("label") not in numbers:
            return m.group(0)           # left for the checks and the site build to report
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


def expected_text(md: Path, text: str | None = None) -> str:
    """The chapter's source with every derived piece of text brought up to date."""
    text = md.read_text() if text is None else text
    here = md.with_suffix(".ipynb").name
    texts = {**_chapter_texts(), here: text}
    index = {name: equation_numbers(t) for name, t in texts.items()}
    titles = {name: title(t) for name, t in texts.items()}

    def derive(part: str) -> str:
        part = _citations(part)
        part = _tag_equations(part, index[here])
        part = _number_references(part, here, index)
        return EMPTY_CHAPTER_LINK.sub(
            lambda m: f"[{titles[m.group('file')]}]({m.group('file')})" if m.group("file") in titles else m.group(0),
            part)

    text = BADGE.sub(lambda _: colab_badge(here), text)
    text = INSTALL.sub(lambda _: install_line(), text)
    return _rewrite_markdown(text, derive)


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


def broken_links(text: str, here: str) -> list[str]:
    """Links of a chapter to an anchor or a chapter that does not exist, as messages."""
    texts = {**_chapter_texts(), here: text}
    found = []
    for m in LINK.finditer(markdown_text(text)):
        target = m.group("file") or here
        if target not in texts:
            found.append(f"a link to a chapter that is not in book/: {m.group(0)}")
        elif m.group("anchor") and m.group("anchor") not in anchors(texts[target]):
            found.append(f"a link to an anchor that {target} does not define: {m.group(0)}")
    return found


def links(check: bool = False) -> int:
    stale, broken = [], []
    for md in chapters():
        want = expected_text(md)
        broken += [f"{md.name}: {problem}" for problem in leftovers(want) + broken_links(want, md.with_suffix(".ipynb").name)]
        if md.read_text() != want:
            stale.append(md)
            if not check:
                md.write_text(want)
                _chapter_texts.cache_clear()
    for md in stale:
        print(f"{'stale' if check else 'updated'}: {md.relative_to(ROOT)}")
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
    meta["jupyter"] = {**meta.get("jupyter", {}), "source_hidden": True,
                       **({"outputs_hidden": True} if cell["cell_type"] == "code" else {})}
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


def execute(names: list[str] | None = None) -> int:
    # DFL_BOOK_STATIC: explorations show their static figure only (no widget state in committed notebooks)
    env = {**os.environ, "DFL_PROFILE": "fast", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0", "DFL_BOOK_STATIC": "1"}
    jupytext = Path(sys.executable).with_name("jupytext")
    for md in chapters(names):
        start = time.perf_counter()
        subprocess.run([str(jupytext), "--to", "ipynb", "--execute", "--set-kernel", "python3", md.name],
                       cwd=BOOK, env=env, check=True)
        apply_solution_metadata(md.with_suffix(".ipynb"))
        print(f"{md.stem}: executed in {time.perf_counter() - start:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# One-off migration from MyST roles to the portable forms (kept for branches written before it).

def _migrate_text(text: str, labels: dict[str, str], sections: set[str], here: str) -> str:
    """Rewrite MyST-only syntax of one chapter.

    ``labels`` maps every MyST label to the notebook defining it; ``sections``
    are the labels of headings below a chapter's title.
    """
    # admonitions become block quotes with a bold title
    def admonition(m: re.Match) -> str:
        body = [line for line in m.group(2).splitlines() if not line.startswith(":class:")]
        body[0] = f"**{m.group(1).strip()}.** {body[0]}"
        return "\n".join("> " + line if line else ">" for line in body)
    text = re.sub(r"^```\{admonition\}([^\n]*)\n(.*?)\n```[ \t]*$", admonition, text, flags=re.M | re.S)

    def part(s: str) -> str:
        # (label)= before the title disappears; before a section it becomes an anchor
        s = re.sub(r"^\(([\w-]+)\)=\n(?=# )", "", s, flags=re.M)
        s = re.sub(r"^\(([\w-]+)\)=\n(?=#)", r'<span id="\1"></span>' + "\n\n", s, flags=re.M)
        # $$ ... $$ (eq-x): the label moves to an anchor before the block
        lines, out = s.split("\n"), []
        for line in lines:
            m = re.match(r"^([ \t]*)\$\$[ \t]*\(([\w-]+)\)[ \t]*$", line)
            if m:
                start = max(i for i, l in enumerate(out) if l.strip() == "$$")
                out[start:start] = [f'{m.group(1)}<span id="{m.group(2)}"></span>', ""]
                line = f"{m.group(1)}$$"
            out.append(line)
        s = "\n".join(out)

        def target(label: str) -> str:
            return "" if labels.get(label, here) == here else labels[label]
        s = re.sub(r"\{eq\}`([\w-]+)`", lambda m: f"[(0)]({target(m.group(1))}#{m.group(1)})", s)
        def named(m: re.Match) -> str:      # "Qu et al. {cite:p}`qu2022fedsam`" reads as a narrative citation
            keys = m.group(2).replace(" ", "")
            first = bibliography().get(keys.split(",")[0], ((None,), ""))[0][0]
            return f"[?](cite:{keys})" if first == m.group(1) else m.group(0)
        s = re.sub(r"\b([A-Z][\w-]+)(?:\s+et\s+al\.|\s+and\s+[A-Z][\w-]+)?\s+\{cite:p\}`([^`]+)`", named, s)
        s = re.sub(r"\{cite:p\}`([^`]+)`", lambda m: f"[(?)](cite:{m.group(1).replace(' ', '')})", s)
        s = re.sub(r"\{cite:t\}`([^`]+)`", lambda m: f"[?](cite:{m.group(1).replace(' ', '')})", s)

        def link(m: re.Match) -> str:
            label, chapter = m.group(2), labels.get(m.group(2))
            if chapter is None or chapter == here:   # a section of this chapter: keep the anchor link
                return m.group(0)
            return f"[{m.group(1)}]({chapter}#{label})" if label in sections else f"[{m.group(1)}]({chapter})"
        return re.sub(r"\[([^\]]*)\]\(#([\w-]+)\)", link, s)

    return _rewrite_markdown(text, part)


def migrate(names: list[str] | None = None) -> int:
    labels: dict[str, str] = {}
    sections: set[str] = set()
    for md in chapters():
        text, nb = md.read_text(), md.with_suffix(".ipynb").name
        for m in re.finditer(r"^\(([\w-]+)\)=\n(#+) ", text, re.M):
            labels[m.group(1)] = nb
            if len(m.group(2)) > 1:
                sections.add(m.group(1))
        for m in re.finditer(r"^[ \t]*\$\$[ \t]*\(([\w-]+)\)", text, re.M):
            labels[m.group(1)] = nb
    for md in chapters(names):
        new = _migrate_text(md.read_text(), labels, sections, md.with_suffix(".ipynb").name)
        if new != md.read_text():
            md.write_text(new)
            print(f"migrated: {md.relative_to(ROOT)}")
    _chapter_texts.cache_clear()
    return links()


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("execute", "links", "check", "migrate"):
        print(__doc__)
        return 2
    if argv[0] == "execute":
        if links():
            return 1
        return execute(argv[1:])
    if argv[0] == "migrate":
        return migrate(argv[1:])
    return links(check=argv[0] == "check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
