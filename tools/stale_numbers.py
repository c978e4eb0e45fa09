"""List the numbers a chapter states that its own notebook never produces.

    python tools/stale_numbers.py [CHAPTER ...]        # every book/NN_*.ipynb, or those whose name contains CHAPTER
    python tools/stale_numbers.py --all [CHAPTER ...]  # also one-digit integers (mostly counts: "two clients", "5 seeds")

The book's rule (book/README.md, "Two kinds of output"): no number in the prose
that a cell did not compute. A *claim* is a number in a markdown cell or in a
comment (``# ...``) of a code cell; the *evidence* is every number in the code
(outside comments) and in the outputs of the same executed notebook. A claim
is listed when no evidence has its value: exactly, or rounded to the claim's
own number of decimals (prose "about 13 points" is backed by a printed 13.2).
Signs are ignored (prose writes "a loss of 0.3", code prints "-0.300").

Not claims: citation and link text, equation tags and references, section,
table, theorem, exercise numbers and the like ("§6", "Table 2", "eq. (4)",
"Theorem 4.5"). What is left is for a person to judge: a parameter ("decayed by
0.998"), a number quoted from a paper with its source, or a stale measurement,
which should be printed by a cell or deleted. The exit status is 0 (a report,
not a test: parameters and quotations are legitimate hits).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

NUMBER = re.compile(r"(?<![\w.^])[−–-]?(?:\d{1,3}(?:[,_]\d{3})+|\d+)(?:\.\d+)?(?:[eE][−+-]?\d+)?(?![\w])")
#: Words after which a number names a place, not a quantity.
PLACE = re.compile(
    r"(?:§|¶|\b(?:Table|Tables|Figure|Fig\.|Theorem|Lemma|Definition|Def\.|Corollary|Assumption|"
    r"Proposition|Remark|Algorithm|Appendix|App\.|Section|Sec\.|Chapter|chapter|Exercise|exercise|"
    r"exercises|eq\.|eqs\.|Eq\.|equation|equations|Step|step|line|lines|Example|Property|"
    r"Table\s+\d+\s+and|Theorems|Lemmas))\s*\(?$"
)
MARKUP = [
    re.compile(p)
    for p in (
        r"\[\((?:[^\]]*?\d{4}[a-z]?)\)\]",  # parenthetical citation text "(Shi et al., 2023)"
        r"\[[^\]]*?\(\d{4}[a-z]?\)\]",  # narrative citation text "Shi et al. (2023)"
        r"\[\(\d+\)\]\([^)]*\)",  # equation references "[(4)](#eq-x)"
        r"\]\([^)]*\)",  # link targets (URLs, cite: keys, #anchors)
        r"<span[^>]*></span>",
        r"\\tag\{[^}]*\}",
        r"!\[[^\]]*\]",  # image alt text (the Colab badge)
        r"^\+\+\+.*$",  # jupytext cell markers
        r"https?://\S+",
        r"\d{4}\.\d{4,5}",  # arXiv identifiers
    )
]


@dataclass(frozen=True)
class Claim:
    cell: int  # index of the notebook cell
    kind: str  # "markdown" or "comment"
    number: str
    line: str


def _value(token: str) -> float:
    return abs(float(token.replace("−", "-").replace("–", "-").replace(",", "").replace("_", "")))


def _decimals(token: str) -> int | None:
    """Decimals written in ``token``; None for exponent notation (compared exactly)."""
    if re.search(r"[eE]", token):
        return None
    return len(token.split(".")[1]) if "." in token else 0


def _strip_markup(text: str) -> str:
    for pattern in MARKUP:
        text = (
            pattern.sub(lambda m: " " * len(m.group(0)), text)
            if pattern.pattern != r"^\+\+\+.*$"
            else re.sub(pattern.pattern, "", text, flags=re.M)
        )
    return text


def _numbers(text: str) -> list[tuple[str, str]]:
    """(number, its line) for each number of ``text`` that is not a place ("§6", "Table 2")."""
    found = []
    for line in text.splitlines():
        for m in NUMBER.finditer(line):
            if PLACE.search(line[: m.start()]):
                continue
            found.append((m.group(0), line.strip()))
    return found


def _split_code(source: str) -> tuple[str, str]:
    """(code without comments, the comments) of a code cell; a ``#`` inside a string is code."""
    code, comments = [], []
    for line in source.splitlines():
        quote, cut = None, None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                cut = i
                break
        if cut is None:
            code.append(line)
        else:
            code.append(line[:cut])
            if not line[cut:].startswith(("# @title", "#@title")):
                comments.append(line[cut + 1 :])
    return "\n".join(code), "\n".join(comments)


def _output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append("".join(out["text"]))
        for mime in ("text/plain", "text/markdown", "text/latex", "text/html"):
            if mime in out.get("data", {}):
                parts.append("".join(out["data"][mime]))
        if "evalue" in out:
            parts.append(out["evalue"])
    return "\n".join(parts)


def claims_and_evidence(notebook: dict) -> tuple[list[Claim], list[str]]:
    """The claims of a notebook and the number tokens of its evidence (code and outputs)."""
    claims: list[Claim] = []
    evidence: list[str] = []
    for index, cell in enumerate(notebook["cells"]):
        source = "".join(cell["source"])
        if "references" in cell.get("metadata", {}).get("tags", []):
            continue  # the generated reference list: bibliographic numbers
        if cell["cell_type"] == "markdown":
            claims += [Claim(index, "markdown", n, line) for n, line in _numbers(_strip_markup(source))]
        elif cell["cell_type"] == "code":
            code, comments = _split_code(source)
            claims += [Claim(index, "comment", n, line) for n, line in _numbers(comments)]
            evidence += NUMBER.findall(code) + NUMBER.findall(_output_text(cell))
    return claims, evidence


def backed(number: str, evidence: list[str]) -> bool:
    """Whether some evidence has the value of ``number``, exactly or rounded to its decimals."""
    value, decimals = _value(number), _decimals(number)
    for token in evidence:
        v = _value(token)
        if v == value or (decimals is not None and abs(round(v, decimals) - value) < 10 ** -(decimals + 6)):
            return True
    return False


def unbacked(notebook: dict, all_numbers: bool = False) -> list[Claim]:
    """The claims of ``notebook`` with no evidence: one-digit integers only with ``all_numbers``."""
    claims, evidence = claims_and_evidence(notebook)
    return [
        c for c in claims if (all_numbers or not re.fullmatch(r"[−–-]?\d", c.number)) and not backed(c.number, evidence)
    ]


def main(argv: list[str]) -> int:
    all_numbers = "--all" in argv
    names = [a for a in argv if not a.startswith("--")]
    notebooks = sorted(BOOK.glob("[0-9][0-9]*_*.ipynb"))
    if names:
        notebooks = [p for p in notebooks if any(n in p.stem for n in names)]
    total = 0
    for path in notebooks:
        hits = unbacked(json.loads(path.read_text()), all_numbers)
        total += len(hits)
        for c in hits:
            print(f"{path.name}:cell {c.cell} ({c.kind}): {c.number:<8} | {c.line[:140]}")
    print(f"{total} number(s) in prose or comments that no code or output of their notebook produces")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
