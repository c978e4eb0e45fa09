"""The papers' tables and quoted numbers, loaded from ``theory/data/``.

Each CSV starts with ``# source: …`` and ``# columns: …`` lines naming the
seed file and table it transcribes (numbers exactly as printed, misprints
included), and a ``# setting: …`` line where the table holds a setting in no
column (its dataset, its number of clients); ``quotes.json`` holds the numbers the papers state in prose.
Nothing here reads the seed texts themselves.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

__all__ = ["Table", "load_table", "TABLES", "load_quotes", "quote"]

TABLES = (
    "dfedsam_table1",
    "dfedsam_table1_poster",
    "dfedsam_table2",
    "dfedsam_table2_poster",
    "dfedsam_table3",
    "fedgf_table1",
    "fedgf_table5",
    "fedsam_table1",
    "fedsam_table2",
    "fedsam_table4",
    "fedsam_table5",
)


@dataclass(frozen=True)
class Table:
    """A transcribed table: its provenance lines and its rows (values as strings, as printed); ``setting`` is
    what the table measured in no column of its own ("CIFAR-10, 100 clients"), before any parenthesis."""

    name: str
    source: str
    columns: str
    rows: tuple[dict, ...]
    setting: str = ""

    def where(self, **match) -> list[dict]:
        """Rows whose columns equal the given strings."""
        return [r for r in self.rows if all(r[k] == v for k, v in match.items())]

    def one(self, **match) -> dict:
        found = self.where(**match)
        if len(found) != 1:
            raise KeyError(f"{self.name}: {len(found)} rows match {match}")
        return found[0]


def _read(name: str) -> str:
    return resources.files("theory").joinpath("data", name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def load_table(name: str) -> Table:
    """``theory/data/<name>.csv`` as a :class:`Table`."""
    meta, body = {}, []
    for line in _read(name + ".csv").splitlines():
        if line.startswith("#"):
            k, _, v = line[1:].strip().partition(":")
            meta[k.strip()] = v.strip()
        elif line.strip():
            body.append(line)
    rows = tuple(csv.DictReader(body))
    setting = meta.get("setting", "").split(" (")[0]
    return Table(name=name, source=meta.get("source", ""), columns=meta.get("columns", ""), rows=rows, setting=setting)


@lru_cache(maxsize=None)
def load_quotes() -> dict[str, dict]:
    """``theory/data/quotes.json`` keyed by quote id."""
    return {q["id"]: q for q in json.loads(_read("quotes.json"))["quotes"]}


def quote(qid: str) -> dict:
    """One quote record: source, location, verbatim text and the numbers it states."""
    return load_quotes()[qid]
