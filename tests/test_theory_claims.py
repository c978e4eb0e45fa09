"""theory.claims and ``python -m theory check``: format, required IDs, key verdicts, data provenance."""
import re

import pytest

from theory import claims as cl
from theory.__main__ import main
from theory.tables import TABLES, load_quotes, load_table

LINE = re.compile(r"^(?P<id>[^\s|]+) \| (?P<verdict>HOLDS|FAILS|NOT CHECKABLE) \| (?P<claim>.+\[.+\]) \| (?P<computed>.+)$")


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
        "table1-gen-error/CIFAR-10/FedSAM/Dir0.3", "table1-gen-error/CIFAR-10/DFedAvgM/Dir0.6",
        "table1-gen-error/CIFAR-100/D-PSGD/IID", "table1-gen-error/CIFAR-100/DFedAvg/Dir0.3",
        "table1-gen-error/CIFAR-100/DFedAvg/IID"}
    bold = [c.id for c in claims if c.id.startswith("fedgf-bold/") and c.verdict == "FAILS"]
    assert bold == ["fedgf-bold/CIFAR-100/alpha=10/clients=10"]
    fs = {c.id: c.verdict for c in claims if c.id.startswith("fedsam-text/")}
    assert [k for k, x in fs.items() if x == "FAILS"] == [
        "fedsam-text/accuracy/Dir0.6", "fedsam-text/rounds/Dir0.6", "fedsam-text/rounds/Dir0.3"]


def test_quadratic_bound_holds(claims):
    q = [c for c in claims if c.id.startswith(("thm45-quadratic/", "lemma-d6-quadratic/"))]
    assert len(q) == 6 and all(c.verdict == "HOLDS" for c in q)


def test_data_files_cite_their_source():
    for name in TABLES:
        t = load_table(name)
        assert re.search(r"seeds/00\d_[0-9a-f]+\.txt", t.source), name
        assert "Table" in t.source and t.rows
    for q in load_quotes().values():
        assert q["source"].startswith("seeds/00") and q["location"] and q["text"]
