"""The book's notation table (dfl_book.notation): one symbol per thing, and the Config help texts agree with it."""

from __future__ import annotations

import dataclasses

import pytest

from dfl_core import Config
from dfl_book import notation


def test_the_table_and_the_config_agree():
    assert notation.problems() == [], "\n".join(notation.problems())
    symbols = notation.config_symbols()
    assert symbols["num_clients"] == "m" and symbols["fedgf_window"] == "W_c" and symbols["server_momentum"] == "θ_g"
    assert "device" not in symbols and "algorithm" not in symbols  # no symbol: not checked


def _with(field, **changes):
    return tuple(dataclasses.replace(s, **changes) if field in s.fields else s for s in notation.SYMBOLS)


def test_a_symbol_naming_two_things_is_caught():
    found = notation.problems(_with("fedgf_window", symbol="W"))  # FedGF's own W: the mixing matrix's
    assert any("symbol W names two things" in p for p in found), found
    assert any("fedgf_window: its help says W_c, the table says W" in p for p in found), found


def test_a_help_text_that_disagrees_or_a_missing_field_is_caught():
    already = set(notation.problems())  # empty here; a user's new field still missing from the table stays out
    fields = {**notation.config_symbols(), "server_momentum": "β"}  # the clash the table removed
    found = set(notation.problems(fields=fields)) - already
    assert found == {"field server_momentum: its help says β, the table says θ_g"}
    rows = tuple(s for s in notation.SYMBOLS if "quant_step" not in s.fields)
    (missing,) = set(notation.problems(rows)) - already
    assert missing.startswith("field quant_step (help: h, ...) is not in the table: add a Symbol to SYMBOLS"), missing
    twice = notation.SYMBOLS + (notation.Symbol("k_b", "another use of b's field", fields=("quant_bits",)),)
    assert any("field quant_bits is listed twice" in p for p in notation.problems(twice))


def test_an_index_counts_as_a_symbol():
    clash = notation.SYMBOLS + (notation.Symbol("\\tau", "a round index again", index="t"),)
    assert any("symbol t names two things" in p for p in notation.problems(clash))


@pytest.mark.parametrize(
    "text, symbol",
    [
        ("K, local steps per round", "K"),
        ("α_Mo, MoFedSAM's weight", "α_Mo"),
        ("|S_t|, number of clients", "|S_t|"),
        ("'auto', 'cpu' or 'cuda'", None),
        ("algorithm name", None),
        ("DisPFL: density, ERK", None),
        ("decay of η per round: η_t = η·lr_decay^t", None),
    ],
)
def test_help_symbol(text, symbol):
    assert notation.help_symbol(text) == symbol


@pytest.mark.parametrize(
    "latex, plain",
    [
        ("\\alpha_{\\mathrm{Mo}}", "α_Mo"),
        ("\\eta_g", "η_g"),
        ("W_c", "W_c"),
        ("\\lvert S_t \\rvert", "|S_t|"),
        ("\\mathcal Q", "𝒬"),
        ("\\lambda_{\\max}", "λ_max"),
        ("y^{t,k}(i)", "y^{t,k}(i)"),
    ],
)
def test_plain(latex, plain):
    assert notation.plain(latex) == plain


def test_the_markdown_table_has_one_row_per_symbol_and_no_stray_column():
    lines = notation.markdown_table().splitlines()
    assert len(lines) == len(notation.SYMBOLS) + 2
    columns = {line.replace("\\|", "").count("|") for line in lines}
    assert columns == {len(notation.PAPERS) + 4}
    assert all(
        f"`{f.name}`" in notation.markdown_table()
        for f in dataclasses.fields(Config)
        if f.name in notation.config_symbols()
    )
