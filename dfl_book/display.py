"""Tables and bullet lists that read as formatted text wherever a chapter is opened.

    from dfl_book.display import Markdown
    Markdown("| claim | Δ |\\n|---|---:|\\n| **SAM beats SGD** | +0.4 |")

Jupyter and Colab render IPython's ``Markdown`` output as a table, but MyST's website shows a
``text/markdown`` output as plain preformatted text. :class:`Markdown` carries the text twice: as Markdown
(``_repr_markdown_``) and as HTML (``_repr_html_``), which the website renders and Jupyter prefers. The HTML
is written by :func:`to_html`, which knows the small part of Markdown the book's outputs use: pipe tables with
their column alignment, bullet lists, paragraphs, ``**bold**``, ``*italic*``, ```code``` and ``[links](url)``.
Math in an output belongs in a ``text/latex`` output (IPython's ``Math``), which both render.
"""

from __future__ import annotations

import html
import re

__all__ = ["Markdown", "to_html"]

_ALIGN = {(True, True): "center", (False, True): "right", (True, False): "left"}
SHORT_CELL = 28  # characters: cells up to this long do not wrap; longer ones wrap in a column of 12em or more
_CODE_SPAN = re.compile(r"`([^`]+)`")
_INLINE = [
    (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"<em>\1</em>"),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r'<a href="\2">\1</a>'),
]


def _inline(text: str) -> str:
    # Code spans are taken out first, so that ``a*b*c`` inside backticks stays literal.
    pieces = _CODE_SPAN.split(html.escape(text.strip(), quote=False))
    for i in range(0, len(pieces), 2):  # even pieces are outside code spans, odd ones the spans' contents
        for pattern, replacement in _INLINE:
            pieces[i] = pattern.sub(replacement, pieces[i])
    return "".join(piece if i % 2 == 0 else f"<code>{piece}</code>" for i, piece in enumerate(pieces))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    header, rule, rows = _cells(lines[0]), _cells(lines[1]), [_cells(line) for line in lines[2:]]
    if len(rule) != len(header) or not all(re.fullmatch(r":?-+:?", r) for r in rule):
        raise ValueError(f"a Markdown table needs a |---| rule line under its header; got {lines[1]!r}")
    align = [_ALIGN.get((r.startswith(":"), r.endswith(":"))) for r in rule]

    def cell(text, tag, align):
        style = [f"text-align:{align or 'left'}", "vertical-align:top"]
        if len(text) <= SHORT_CELL:  # a number, an interval, a verdict: kept on one line
            style.append("white-space:nowrap")
        else:  # long text wraps, but in a column wide enough to read
            style.append("min-width:12em")
        attribute = ' style="' + ";".join(style) + '"' if style else ""
        return f"<{tag}{attribute}>{_inline(text)}</{tag}>"

    def row(cells, tag):
        return "<tr>" + "".join(cell(text, tag, a) for text, a in zip(cells, align)) + "</tr>"

    # a wide table scrolls sideways in a narrow page instead of squeezing its columns
    return (
        '<div style="overflow-x:auto">\n<table style="font-size:0.85em">\n<thead>'
        + row(header, "th")
        + "</thead>\n<tbody>\n"
        + "\n".join(row(r, "td") for r in rows)
        + "\n</tbody>\n</table>\n</div>"
    )


def _bullets(lines: list[str]) -> str:
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(line[2:])
        else:  # a wrapped item continues on the next line
            items[-1] += " " + line.strip()
    return "<ul>\n" + "\n".join(f"<li>{_inline(item)}</li>" for item in items) + "\n</ul>"


def to_html(text: str) -> str:
    """The Markdown ``text`` as HTML: blocks are separated by blank lines; a block whose lines all start with
    ``|`` is a table, one that starts with ``- `` a bullet list, anything else a paragraph. HTML comments
    (``<!-- … -->``, the provenance lines of a table file) are left out, as Markdown hides them."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)  # comments, hidden in Markdown too
    blocks, out = re.split(r"\n\s*\n", text.strip()), []
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        if all(line.lstrip().startswith("|") for line in lines) and len(lines) >= 2:
            out.append(_table(lines))
        elif lines[0].startswith("- "):
            out.append(_bullets(lines))
        else:
            out.append(f"<p>{_inline(' '.join(line.strip() for line in lines))}</p>")
    return "\n".join(out)


class Markdown:
    """Markdown text that Jupyter, Colab and the website all show formatted (see the module's docstring).

    ``data`` is the Markdown itself, as on IPython's ``Markdown``; ``str()`` gives it too.
    """

    def __init__(self, data: str):
        if not isinstance(data, str):
            raise TypeError(f"Markdown takes the text as a str, not {type(data).__name__}")
        self.data = data

    def _repr_markdown_(self) -> str:
        return self.data

    def _repr_html_(self) -> str:
        return to_html(self.data)

    def __str__(self) -> str:
        return self.data

    def __repr__(self) -> str:  # the text/plain output: the Markdown itself, readable
        return self.data
