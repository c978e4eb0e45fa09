"""theory.claims and ``python -m theory check``: format, required IDs, key verdicts, data provenance."""

import dataclasses
import re

import pytest

from theory import claims as cl
from theory.__main__ import main
from theory.tables import TABLES, load_quotes, load_table

LINE = re.compile(
    r"^(?P<id>[^\s|]+) \| (?P<verdict>HOLDS|FAILS|NOT CHECKABLE) \| (?P<claim>.+\[.+\]) \| (?P<computed>.+)$"
)


@pytest.fixture(scope="module")
def claims():
    return cl.all_claims()


def test_check_output_format(capsys, claims):
    assert main(["check"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    body = [ln for ln in lines if not ln.startswith("#")]
    assert len(body) == len(claims) > 150
    ids = []
    for ln in body:
        mt = LINE.match(ln)
        assert mt, ln
        ids.append(mt["id"])
    assert len(ids) == len(set(ids))
    for req in cl.REQUIRED_IDS:
        assert any(i == req or i.startswith(req + "/") for i in ids), req
    assert lines[-1].startswith(f"# {len(claims)} claims")


def test_only_and_json(capsys):
    main(["check", "--only", "ring-gap", "--json"])
    out = capsys.readouterr().out
    assert '"id": "ring-gap"' in out and '"verdict": "FAILS"' in out and "table2" not in out


def test_not_checkable_has_reason(claims):
    assert all(c.reason for c in claims if c.verdict == cl.NC)
    with pytest.raises(ValueError):
        cl.Claim("x", "c", "l", "v", "MAYBE")


def test_key_verdicts(claims):
    v = {c.id: c.verdict for c in claims}
    assert v["ring-gap"] == v["grid-gap"] == "FAILS"
    assert v["phi-q1"] == v["phi-monotone"] == v["stepsize"] == "HOLDS"
    assert v["phi-near-one/full"] == "HOLDS" and v["phi-near-one/ring"] == "FAILS"
    assert v["table2/ring-gain/DFedSAM"] == v["table2/ring-gain/DFedSAM-MGS"] == "HOLDS"
    assert v["lemma-d1/random-as-coded"] == "FAILS" and v["lemma-d1/exponential"] == "HOLDS"
    assert v["defn41-random/random-as-coded"] == "FAILS" and v["defn41-random/random-symmetric"] == "HOLDS"
    t1 = [c for c in claims if c.id.startswith("table1-gen-error/")]
    assert len(t1) == 48
    assert {c.id for c in t1 if c.verdict == "FAILS"} == {
        "table1-gen-error/CIFAR-10/FedSAM/Dir0.3",
        "table1-gen-error/CIFAR-10/DFedAvgM/Dir0.6",
        "table1-gen-error/CIFAR-100/D-PSGD/IID",
        "table1-gen-error/CIFAR-100/DFedAvg/Dir0.3",
        "table1-gen-error/CIFAR-100/DFedAvg/IID",
    }
    bold = [c.id for c in claims if c.id.startswith("fedgf-bold/") and c.verdict == "FAILS"]
    assert bold == ["fedgf-bold/CIFAR-100/alpha=10/clients=10"]
    fs = {c.id: c.verdict for c in claims if c.id.startswith("fedsam-text/")}
    assert [k for k, x in fs.items() if x == "FAILS"] == [
        "fedsam-text/accuracy/Dir0.6",
        "fedsam-text/rounds/Dir0.6",
        "fedsam-text/rounds/Dir0.3",
    ]


def test_quadratic_bound_holds(claims):
    q = [c for c in claims if c.id.startswith(("thm45-quadratic/", "lemma-d5-quadratic/", "lemma-d6-quadratic/"))]
    assert len(q) == 6 and all(c.verdict == "HOLDS" for c in q)


def test_data_files_cite_their_source():
    for name in TABLES:
        t = load_table(name)
        assert re.search(r"seeds/00\d_[0-9a-f]+\.txt", t.source), name
        assert "Table" in t.source and t.rows
    for q in load_quotes().values():
        assert q["source"].startswith("seeds/00") and q["location"] and q["text"]


NEW_VERDICTS = {
    "thm45-step-21": "FAILS",
    "thm45-step-22": "FAILS",
    "thm45-step-24": "HOLDS",
    "thm45-step-25": "FAILS",
    "thm45-step-telescope": "FAILS",
    "thm45-step-d3-second": "FAILS",
    "thm45-term-denominator": "FAILS",
    "thm45-term-init": "HOLDS",
    "thm45-term-sigma-l": "FAILS",
    "thm45-term-sigma-g": "FAILS",
    "thm45-term-rho": "FAILS",
    "thm45-term-consensus": "FAILS",
    "thm45-vs-proof": "FAILS",
    "cor46-term-init": "HOLDS",
    "cor46-term-heterogeneity": "HOLDS",
    "cor46-term-L2": "FAILS",
    "cor46-term-topology": "FAILS",
    "cor48-term-init": "HOLDS",
    "cor48-term-heterogeneity": "HOLDS",
    "cor48-term-L2": "FAILS",
    "cor48-term-topology": "FAILS",
    "d2-rate-term-init": "FAILS",
    "d2-rate-term-heterogeneity": "HOLDS",
    "d2-rate-term-rho4-topology": "FAILS",
    "d2-rate-term-topology": "FAILS",
    "d2-rate-tail": "NOT CHECKABLE",
    "d3-rate-term-init": "FAILS",
    "d3-rate-term-heterogeneity": "HOLDS",
    "d3-rate-term-topology": "FAILS",
}


def test_theorem45_and_rate_verdicts(claims):
    v = {c.id: c.verdict for c in claims}
    assert {k: v.get(k) for k in NEW_VERDICTS} == NEW_VERDICTS
    assert not [
        i
        for i in v
        if i.startswith(("thm45-term-", "thm45-step-", "cor46-term-", "cor48-term-", "d2-rate", "d3-rate"))
        and i not in NEW_VERDICTS
    ]
    by_id = {c.id: c for c in claims}
    assert "fails on thm45-term-denominator, thm45-term-sigma-l" in by_id["thm45-vs-proof"].reason
    assert by_id["thm45-term-sigma-g"].computed.endswith("derived/printed = 2")


def test_thm45_vs_proof_follows_the_term_checks(monkeypatch):
    from theory import derivation as dv

    real = dv.theorem45_terms
    monkeypatch.setattr(
        dv, "theorem45_terms", lambda name="printed-22": tuple(dataclasses.replace(t, implied=True) for t in real(name))
    )
    out = {c.id: c.verdict for c in cl.check_theorem45_terms()}
    assert set(out.values()) == {"HOLDS"}
    monkeypatch.setattr(
        dv,
        "theorem45_terms",
        lambda name="printed-22": tuple(dataclasses.replace(t, implied=(t.key != "init")) for t in real(name)),
    )
    out = {c.id: c.verdict for c in cl.check_theorem45_terms()}
    assert out["thm45-vs-proof"] == "FAILS" and out["thm45-term-init"] == "FAILS"


def test_rounding_level_values_format_identically():
    assert cl.at_rounding(8.896e-16) == cl.at_rounding(8.897e-16) == "< 1e-12"
    assert cl.at_rounding(-3e-17, ".2e") == "< 1e-12"
    assert cl.at_rounding(2.349e-01) == "= 2.349e-01" and cl.at_rounding(7.45e-06, ".2e") == "= 7.45e-06"


def test_lemma_d1_detail_is_machine_independent(monkeypatch):
    from theory import spectral as spc

    def run(noise):
        monkeypatch.setattr(spc, "STATIC", ())
        monkeypatch.setattr(
            spc,
            "lemma_d1_product",
            lambda name, m, t_max: dict(worst_ratio=1.0, first_fail=None, final_norm=noise, final_bound=5.099e-07),
        )
        return [c.computed for c in cl.check_lemma_d1()]

    assert run(8.896e-16) == run(8.897e-16)
    assert all("‖Π W_s - P‖ < 1e-12" in s for s in run(8.896e-16))


def test_no_rounding_noise_in_details(claims):
    by_id = {c.id: c for c in claims}
    assert "‖Π W_s - P‖ < 1e-12" in by_id["lemma-d1/random-symmetric"].computed
    assert "‖x-x̄1‖² < 1e-12" in by_id["defn41-random/random-symmetric"].computed
    assert "‖x-x̄1‖² = 7.45e-06" in by_id["defn41-random/random-as-coded"].computed


def test_a_quote_is_read_at_the_precision_it_prints(claims):
    """ "15%" matches a cell of 15.04 at no decimals, but "14.10%" is two decimals: it does not match 14.14, though
    the float 14.10 reads back as 14.1."""
    by_id = {c.id: c for c in claims}
    assert by_id["sec52-quotes/iid/FedSAM"].verdict == "HOLDS"  # "15%in FedSAM"
    assert by_id["sec52-quotes/noniid/DFedSAM/IID"].verdict == "FAILS"  # "14.10%" against 14.14
    assert by_id["sec52-quotes/noniid/DFedSAM/Dir0.3"].verdict == "HOLDS"
