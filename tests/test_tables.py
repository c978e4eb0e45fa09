"""The ``table`` command: fast-scale cells, provenance, reproducibility, the paper's numbers, bad input."""

from __future__ import annotations

import dataclasses

import json
import shlex
import statistics
from pathlib import Path

import pytest

from dfl_core.cli import main
from dfl_book.presets import PRESETS
from dfl_book.stats import compare_paired
from dfl_book.tables import (
    CLAIMS,
    FAST,
    FAST_ROUNDS,
    TableResult,
    check_claims,
    fast_config,
    orderings,
    paper_value,
    read_result,
    read_table,
    write_table,
)

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = [
    "dfedsam-table1-cifar10",
    "dfedsam-table2-cifar10",
    "dfedsam-table3-cifar10",
    "fedgf-table1-cifar10",
    "fedsam-cifar10",
    "dfedavgm-mnist-2nn",
]
TINY = ["--seeds", "0,1", "--set", "num_clients=4", "--set", "rounds=2", "--no-progress"]


def test_fast_config_keeps_epochs_participation_and_the_table_s_own_choices():
    p = PRESETS["dfedsam-table1-cifar10"]
    full, fast = p.config("dfedsam", "dir0.6"), fast_config(p, "dfedsam", "dir0.6")
    assert full.params.local_steps == 20  # 5 epochs of 500 samples at batch 128
    assert fast.params.local_steps == 5 * 3  # 5 epochs of 1438 // 20 = 71 samples at batch 32
    assert fast_config(p, "dpsgd", "dir0.6").params.local_steps == 1
    assert (fast.dataset, fast.model, fast.num_clients, fast.rounds) == (
        FAST["dataset"],
        FAST["model"],
        FAST["num_clients"],
        FAST["rounds"],
    )
    assert (fast.alpha, fast.params.topology, fast.params.rho, fast.lr) == (
        full.alpha,
        full.params.topology,
        full.params.rho,
        full.lr,
    )
    g = PRESETS["fedgf-table1-cifar10"]
    assert [fast_config(g, "fedavg", f"alpha0-n{n}").params.clients_per_round for n in (5, 10, 20)] == [1, 2, 4]
    assert fast_config(g, "fedavg", "alpha0-n5").rounds == FAST_ROUNDS[g.name] > fast.rounds


def test_paper_numbers_are_found_where_transcribed():
    assert paper_value("dfedsam-table2-cifar10", "dfedsam-mgs", "ring") == 80.55
    assert paper_value("fedgf-table1-cifar10", "fedavg", "alpha0-n5") == 63.63
    assert paper_value("dfedsam-table1-cifar10", "fedavg", "dir0.3") == 82.39
    assert paper_value("dfedavgm-mnist-2nn", "dfedavgm", "iid-e1") is None  # figures, no table


def test_table_command_writes_provenance_and_reproduces_from_its_recorded_command(tmp_path, capsys):
    args = [
        "table",
        "dfedsam-table2-cifar10",
        "--algorithms",
        "dfedavg,dfedsam",
        "--settings",
        "ring,full",
        *TINY,
        "--out",
        str(tmp_path / "a"),
    ]
    assert main(args) == 0
    meta, rows = read_table(tmp_path / "a" / "dfedsam-table2-cifar10-fast.csv")
    for key in ("command", "seeds", "versions", "machine", "date"):
        assert meta[key], key
    assert meta["seeds"] == "0 1" and "torch" in meta["versions"]
    assert [(r["algorithm"], r["setting"]) for r in rows] == [
        ("dfedavg", "ring"),
        ("dfedsam", "ring"),
        ("dfedavg", "full"),
        ("dfedsam", "full"),
    ]
    for r in rows:
        values = [float(v) for v in r["values"].split()]
        assert len(values) == 2 == int(r["seeds"])
        assert float(r["mean"]) == pytest.approx(statistics.fmean(values), abs=0.006)
        assert 0 <= float(r["mean"]) <= 100
    assert rows[0]["paper"] == "69.95"  # DFedAvg, ring (DFedSAM Table 2)
    md = (tmp_path / "a" / "dfedsam-table2-cifar10-fast.md").read_text()
    assert "| DFedSAM |" in md and "(80.55)" not in md and "(73.19)" in md
    assert "## Paired verdicts" in md and "| ring: DFedSAM beats" not in md  # Table 2's claim needs MGS
    _, verdicts = read_table(tmp_path / "a" / "dfedsam-table2-cifar10-fast-verdicts.csv")
    assert [(v["kind"], v["setting"], v["better"], v["worse"], v["n"]) for v in verdicts] == [
        ("ordering", "ring", "dfedsam", "dfedavg", "2"),
        ("ordering", "full", "dfedsam", "dfedavg", "2"),
    ]
    # the recorded command, rerun, gives the same cells
    recorded = shlex.split(meta["command"])
    assert recorded[:3] == ["python", "-m", "dfl_core"]
    again = recorded[3:]
    again[again.index("--out") + 1] = str(tmp_path / "b")
    assert main(again) == 0
    assert read_table(tmp_path / "b" / "dfedsam-table2-cifar10-fast.csv")[1] == rows


def test_fedgf_threshold_is_calibrated_and_recorded(tmp_path):
    args = [
        "table",
        "fedgf-table1-cifar10",
        "--algorithms",
        "fedgf",
        "--settings",
        "alpha0-n5,alpha10-n5",
        *TINY,
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    meta, rows = read_table(tmp_path / "fedgf-table1-cifar10-fast.csv")
    assert float(meta["fedgf_threshold"]) > 0
    assert meta["fedgf_threshold_seed"] == "2"  # a seed the table does not test (it tests 0 and 1)
    assert len(rows) == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["table", "dfedsam-table9"], "unknown table 'dfedsam-table9'"),
        (
            ["table", "dfedsam-table2-cifar10", "--profile", "medium"],
            "unknown profile 'medium'; allowed: fast, showcase, full",
        ),
        (["table", "dfedsam-table2-cifar10", "--settings", "star"], "no setting 'star'; allowed: ring, grid"),
        (["table", "dfedsam-table2-cifar10", "--algorithms", "fedgf"], "unknown algorithm 'fedgf'"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(args, message, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_set_needs_a_config_field(capsys):
    with pytest.raises(SystemExit):
        main(["table", "dfedsam-table2-cifar10", "--set", "colour=red"])
    assert "--set expects FIELD=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_fast_tables_cover_their_preset(name):
    """The CSVs the book reads: every cell of the preset, five seeds, and the command that made them."""
    meta, rows = read_table(ROOT / "book" / "_tables" / f"{name}-fast.csv")
    preset = PRESETS[name]
    assert {(r["algorithm"], r["setting"]) for r in rows} == {
        (a, s) for a in preset.algorithms for s in preset.settings
    }
    assert all(r["seeds"] == "5" for r in rows)
    assert f"table {name} --profile fast --seeds 0,1,2,3,4" in meta["command"]


SHOWCASE_TABLES = sorted((ROOT / "book" / "_tables").glob("*-showcase.csv"))


def test_a_showcase_table_is_committed():
    assert SHOWCASE_TABLES, "chapter 11 reads at least one showcase table"


@pytest.mark.parametrize("path", SHOWCASE_TABLES, ids=lambda p: p.stem)
def test_committed_showcase_tables_cover_their_recorded_columns_and_seeds(path):
    """Every row of the preset in every column the recorded command names, for each of its (>= 5) seeds,
    and verdicts recomputed from the CSV equal to the committed ones."""
    meta, rows = read_table(path)
    words = shlex.split(meta["command"])
    name = words[words.index("table") + 1]
    preset, seeds = PRESETS[name], words[words.index("--seeds") + 1].split(",")
    columns = words[words.index("--settings") + 1].split(",") if "--settings" in words else list(preset.settings)
    assert words[words.index("--profile") + 1] == "showcase" and len(seeds) >= 5
    assert {(r["algorithm"], r["setting"]) for r in rows} == {(a, c) for a in preset.algorithms for c in columns}
    assert all(r["seeds"] == str(len(seeds)) and len(r["values"].split()) == len(seeds) for r in rows)
    assert float(meta["cpu_time_s"]) > 0 and "untimed_runs" not in meta  # the book states its cost
    result = read_result(path)
    _, committed = read_table(path.with_name(path.stem + "-verdicts.csv"))
    recomputed = orderings(result) + check_claims(result)
    assert [(v["label"], v["verdict"]) for v in committed] == [(c.label, c.verdict) for c in recomputed]
    # a reprint states the file's mean ± std (computed before the values were rounded), not a recomputation
    for r in rows:
        mean, std = result.mean_std(r["algorithm"], r["setting"])
        assert (f"{mean:.2f}", f"{std:.2f}") == (r["mean"], r["std"]), r


def test_tag_names_a_variant_table_and_must_be_simple(tmp_path, capsys):
    args = [
        "table",
        "fedsam-cifar10",
        "--algorithms",
        "mofedsam",
        "--settings",
        "iid",
        *TINY,
        "--set",
        "mofedsam_variant=official-fedgf",
        "--tag",
        "coded",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    assert (tmp_path / "fedsam-cifar10-fast-coded.csv").exists()
    with pytest.raises(SystemExit):
        main(["table", "fedsam-cifar10", "--tag", "../x"])
    assert "--tag must be letters" in capsys.readouterr().err


def test_an_interrupted_table_continues_without_recomputing_finished_runs(tmp_path, monkeypatch):
    args = [
        "table",
        "dfedsam-table2-cifar10",
        "--algorithms",
        "dfedavg",
        "--settings",
        "ring,full",
        *TINY,
        "--checkpoints",
        str(tmp_path / "ck"),
        "--out",
        str(tmp_path / "a"),
    ]
    import dfl_core.engine as engine

    real_run, calls = engine.run, []

    def run_then_fail(cfg, **kw):  # the third run is "interrupted"
        calls.append(cfg.seed)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run(cfg, **kw)

    monkeypatch.setattr(engine, "run", run_then_fail)
    with pytest.raises(KeyboardInterrupt):
        main(args)
    assert len(json.loads((tmp_path / "ck" / "done.json").read_text())) == 2
    calls.clear()
    assert main(args) == 0
    assert len(calls) == 2  # only the two unfinished runs ran again
    done = json.loads((tmp_path / "ck" / "done.json").read_text())
    assert len(done) == 4 and all(r["cpu_time_s"] > 0 for r in done.values())
    meta = read_table(tmp_path / "a" / "dfedsam-table2-cifar10-fast.csv")[0]
    # every run's CPU time, the two of the interrupted invocation included
    assert meta["cpu_time_s"] == f"{sum(r['cpu_time_s'] for r in done.values()):.0f}" and "untimed_runs" not in meta
    monkeypatch.setattr(engine, "run", real_run)
    fresh = [
        "table",
        "dfedsam-table2-cifar10",
        "--algorithms",
        "dfedavg",
        "--settings",
        "ring,full",
        *TINY,
        "--out",
        str(tmp_path / "b"),
    ]
    assert main(fresh) == 0
    rows = lambda d: read_table(d / "dfedsam-table2-cifar10-fast.csv")[1]
    assert rows(tmp_path / "a") == rows(tmp_path / "b")  # resumed = uninterrupted


def test_parallel_jobs_give_the_serial_table_and_record_every_run(tmp_path, capsys):
    args = ["table", "dfedsam-table2-cifar10", "--algorithms", "dfedavg,dfedsam", "--settings", "ring", *TINY]
    assert main([*args, "--out", str(tmp_path / "serial")]) == 0
    assert main([*args, "--jobs", "2", "--checkpoints", str(tmp_path / "ck"), "--out", str(tmp_path / "jobs")]) == 0
    rows = lambda d: read_table(d / "dfedsam-table2-cifar10-fast.csv")[1]
    assert rows(tmp_path / "jobs") == rows(tmp_path / "serial")
    assert sorted(json.loads((tmp_path / "ck" / "done.json").read_text())) == [
        "dfedavg-ring-seed0",
        "dfedavg-ring-seed1",
        "dfedsam-ring-seed0",
        "dfedsam-ring-seed1",
    ]
    with pytest.raises(SystemExit):
        main([*args, "--jobs", "0"])
    assert "--jobs must be >= 1, got 0" in capsys.readouterr().err


def test_every_config_is_checked_before_any_run(tmp_path, monkeypatch, capsys):
    import dfl_core.engine as engine

    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("ran before validating"))
    args = ["table", "dfedsam-table2-cifar10", *TINY, "--set", "rho=-1", "--out", str(tmp_path)]
    assert main(args) == 2
    assert "rho" in capsys.readouterr().err


# A fake DFedSAM Table 2 over 5 seeds. Paper: MGS > DFedSAM > DFedAvg in every column (ring 80.55 > 73.19 > 69.95).
AVG_RING = [90.0, 91.0, 92.0, 93.0, 94.0]
FAKE = {
    ("dfedavg", "ring"): AVG_RING,
    ("dfedsam", "ring"): [x + d for x, d in zip(AVG_RING, [-1.0, -0.9, -1.1, -1.0, -0.9])],  # below: REVERSED
    ("dfedsam-mgs", "ring"): [x + d for x, d in zip(AVG_RING, [2.0, 2.1, 1.9, 2.0, 2.05])],  # above both
    ("dfedavg", "full"): [x + 1 for x in AVG_RING],
    ("dfedsam", "full"): [x + 1 for x in AVG_RING],  # identical runs
    ("dfedsam-mgs", "full"): [x + 1 + d for x, d in zip(AVG_RING, [0.5, -0.5, 0.25, -0.25, 0.0])],  # noise only
}


def fake_table(seeds=(0, 1, 2, 3, 4)) -> TableResult:
    k = len(seeds)
    return TableResult(
        "dfedsam-table2-cifar10",
        "fast",
        tuple(seeds),
        {c: v[:k] for c, v in FAKE.items()},
        {"command": "python -m dfl_core table dfedsam-table2-cifar10 --profile fast --seeds 0,1,2,3,4"},
    )


def test_orderings_compare_every_pair_the_paper_orders_by_its_per_seed_difference():
    result = fake_table()
    got = {c.label: c for c in orderings(result)}
    assert list(got) == [
        "ring: DFedSAM > DFedAvg (paper 73.19 vs 69.95)",
        "ring: DFedSAM-MGS > DFedAvg (paper 80.55 vs 69.95)",
        "ring: DFedSAM-MGS > DFedSAM (paper 80.55 vs 73.19)",
        "full: DFedSAM > DFedAvg (paper 88.05 vs 83.48)",
        "full: DFedSAM-MGS > DFedAvg (paper 88.20 vs 83.48)",
        "full: DFedSAM-MGS > DFedSAM (paper 88.20 vs 88.05)",
    ]
    assert [c.verdict for c in got.values()] == [
        "REVERSED",
        "REPRODUCED",
        "REPRODUCED",
        "UNRESOLVED",
        "UNRESOLVED",
        "UNRESOLVED",
    ]
    ring = got["ring: DFedSAM > DFedAvg (paper 73.19 vs 69.95)"]
    assert dataclasses.replace(ring, paper=None, regime=None) == compare_paired(
        FAKE[("dfedsam", "ring")], AVG_RING, label=ring.label
    )
    assert ring.paper == "+3.24"  # the paper's own 73.19 − 69.95
    assert ring.regime == "E = 5 (K = 15, B = 32), T = 30"  # the fast scale keeps the 5 local epochs: K = 5⌈n/B⌉
    assert ring.mean == pytest.approx(-0.98) and ring.n == 5
    identical = got["full: DFedSAM > DFedAvg (paper 88.05 vs 83.48)"]
    assert (identical.low, identical.high, identical.detectable) == (0, 0, 0)
    # unpaired, the ring's DFedSAM and DFedAvg overlap completely (std 1.6 each); paired, they separate
    assert ring.high < 0 < statistics.stdev(AVG_RING) - abs(ring.mean)


def test_named_claims_are_checked_per_column():
    result = fake_table()
    claims = check_claims(result)
    assert [(c.label, c.verdict) for c in claims] == [
        ("ring: DFedSAM-MGS beats DFedSAM", "REPRODUCED"),
        ("full: DFedSAM-MGS beats DFedSAM", "UNRESOLVED"),
    ]
    assert claims[1].mean == 0 and claims[1].detectable > 0
    del result.cells[("dfedsam-mgs", "ring")]  # a column without one of the rows is skipped
    assert [c.label for c in check_claims(result)] == ["full: DFedSAM-MGS beats DFedSAM"]


def test_named_claims_take_a_margin_and_call_a_small_difference_equivalent():
    """Without a margin no claim is EQUIVALENT; with one, a difference whose 90% interval lies inside it is, and a
    resolved one smaller than the margin says so. The margin is in the table's unit, points of accuracy."""
    from dfl_book.stats import markdown_table

    result = fake_table()
    sam = [90.00, 91.00, 89.50, 90.50, 90.20]
    result.cells[("dfedsam", "ring")] = sam
    result.cells[("dfedsam-mgs", "ring")] = [x + d for x, d in zip(sam, (0.05, -0.05, 0.10, -0.10, 0.02))]
    full_sam = result.cells[("dfedsam", "full")]
    result.cells[("dfedsam-mgs", "full")] = [x + 0.1 + d for x, d in zip(full_sam, (0.01, -0.01, 0.02, -0.02, 0))]
    plain, tested = check_claims(result), check_claims(result, margin=0.5)
    labels = ["ring: DFedSAM-MGS beats DFedSAM", "full: DFedSAM-MGS beats DFedSAM"]
    assert [c.label for c in plain] == [c.label for c in tested] == labels
    ring, full = plain
    assert (ring.verdict, ring.margin, ring.within_margin) == ("UNRESOLVED", None, None)
    assert full.verdict == "REPRODUCED" and full.within_margin is None
    ring, full = tested
    assert (ring.verdict, ring.margin, ring.within_margin) == ("EQUIVALENT", 0.5, True)
    assert ring.low < 0 < ring.high and ring.format(label=False).endswith("EQUIVALENT (within ±0.5)")
    assert (full.verdict, full.within_margin) == ("REPRODUCED", True)
    assert "REPRODUCED (within the margin)" in markdown_table(tested)
    assert "(within the margin)" not in markdown_table(plain) and "EQUIVALENT" not in markdown_table(plain)
    assert (ring.paper, ring.regime) == (plain[0].paper, plain[0].regime)  # the margin changes only the verdict
    assert check_claims(result, margin=0.01)[0].verdict == "UNRESOLVED"  # a margin too small to test inside
    with pytest.raises(ValueError, match="margin"):
        check_claims(result, margin=0)


def test_every_claim_names_rows_and_columns_of_its_table():
    for name, claims in CLAIMS.items():
        preset = PRESETS[name]
        for c in claims:
            assert {c.better, c.worse} <= set(preset.algorithms), (name, c)
            assert set(c.settings or ()) <= set(preset.settings), (name, c)
            assert c.better != c.worse


def test_write_table_adds_the_verdicts(tmp_path, capsys):
    csv_path, md_path = write_table(fake_table(), tmp_path)
    meta, rows = read_table(tmp_path / "dfedsam-table2-cifar10-fast-verdicts.csv")
    assert "95% Student t-interval" in meta["interval"] and "per-seed paired difference" in meta["interval"]
    assert "note" not in meta  # 5 seeds: the book's rule is met
    assert list(rows[0]) == [
        "kind",
        "label",
        "setting",
        "better",
        "worse",
        "n",
        "mean",
        "low",
        "high",
        "detectable",
        "verdict",
        "p",
        "p_holm",
        "verdict_holm",
    ]
    assert [r["kind"] for r in rows] == ["ordering"] * 6 + ["claim"] * 2
    assert "one family" in meta["holm"] and "p_holm < 0.05" in meta["holm"]
    for family in (rows[:6], rows[6:]):  # Holm's adjusted p: at least the raw p, and monotone in it
        raw, adjusted = [float(r["p"]) for r in family], [float(r["p_holm"]) for r in family]
        assert all(a >= r for r, a in zip(raw, adjusted))
        assert all(adjusted[i] <= adjusted[j] for i in range(len(raw)) for j in range(len(raw)) if raw[i] < raw[j])
        for r in family:
            resolved = r["verdict"] in ("REPRODUCED", "REVERSED") and float(r["p_holm"]) < 0.05
            assert r["verdict_holm"] == (r["verdict"] if resolved else "UNRESOLVED"), r
    first = rows[0]
    assert (first["label"], first["setting"], first["better"], first["worse"], first["n"], first["verdict"]) == (
        "ring: DFedSAM > DFedAvg (paper 73.19 vs 69.95)",
        "ring",
        "dfedsam",
        "dfedavg",
        "5",
        "REVERSED",
    )
    assert float(first["mean"]) == pytest.approx(-0.98) and float(first["low"]) < float(first["high"]) < 0
    md = md_path.read_text()
    assert md.startswith("<!-- command:") and "| DFedSAM-MGS |" in md  # the table itself is unchanged
    assert "| setting | pairs | REPRODUCED | REVERSED | EQUIVALENT | UNRESOLVED |" in md
    assert "| ring | 3 | 2 | 1 | 0 | 0 |" in md and "| full | 3 | 0 | 0 | 0 | 3 |" in md
    assert "| all | 6 | 2 | 1 | 0 | 3 |" in md
    assert "After Holm's correction over the table's 6 orderings (one family): 2 REPRODUCED, 1 REVERSED" in md
    assert "| claim | mean Δ | 95% CI | detectable | verdict | after Holm | paper's Δ | regime |" in md
    assert (
        "| ring: DFedSAM-MGS beats DFedSAM | +2.99 | [+2.96, +3.02] | 0.04 | REPRODUCED | REPRODUCED | +7.36 | "
        "E = 5 (K = 15, B = 32), T = 30 |"
    ) in md
    assert "Note:" not in md
    assert "pooled" not in md


def test_few_seeds_give_a_note_and_one_seed_no_verdicts(tmp_path):
    write_table(fake_table(seeds=(0, 1, 2)), tmp_path)
    meta, rows = read_table(tmp_path / "dfedsam-table2-cifar10-fast-verdicts.csv")
    assert "3 seeds; the book's rule asks for at least 5" in meta["note"] and rows[0]["n"] == "3"
    assert "> Note: 3 seeds" in (tmp_path / "dfedsam-table2-cifar10-fast.md").read_text()
    write_table(fake_table(seeds=(0,)), tmp_path)  # replaces the 3-seed table
    assert not (tmp_path / "dfedsam-table2-cifar10-fast-verdicts.csv").exists()
    md = (tmp_path / "dfedsam-table2-cifar10-fast.md").read_text()
    assert "No verdicts: a paired comparison needs at least 2 seeds" in md and "| claim |" not in md
    with pytest.raises(ValueError, match="at least 2 seeds"):
        orderings(fake_table(seeds=(0,)))


def test_tagged_tables_get_their_own_verdicts(tmp_path):
    write_table(fake_table(), tmp_path, tag="coded")
    assert (tmp_path / "dfedsam-table2-cifar10-fast-coded-verdicts.csv").exists()


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_tables_give_verdicts(name):
    result = read_result(ROOT / "book" / "_tables" / f"{name}-fast.csv")
    assert result.name == name and result.seeds == (0, 1, 2, 3, 4)
    assert all(len(v) == 5 for v in result.cells.values())
    comparisons = orderings(result) + check_claims(result)
    assert all(c.n == 5 and c.verdict in ("REPRODUCED", "REVERSED", "UNRESOLVED") for c in comparisons)
    assert bool(comparisons) == (name != "dfedavgm-mnist-2nn")  # that paper prints figures only


def test_a_named_claim_is_checked_only_where_the_papers_table_orders_it():
    """FedGF's table has FedAvgM below FedAvg in five columns and SCAFFOLD failing to train at α = 0: there the
    claims are not the paper's, so they are not checked; every checked claim has the paper's sign."""
    from dfl_book.tables import paper_orders

    result = read_result(ROOT / "book" / "_tables" / "fedgf-table1-cifar10-fast.csv")
    checked = check_claims(result)
    labels = {c.label for c in checked}
    assert "alpha0.005-n5: FedAvgM beats FedAvg" not in labels  # the paper: FedAvg 67.85, FedAvgM 67.56
    assert "alpha0.005-n20: FedAvgM beats FedAvg" in labels
    assert not any(label.startswith("alpha0-") and "SCAFFOLD beats FedAvg" in label for label in labels)
    assert paper_orders("fedgf-table1-cifar10", "fedavg", "scaffold", "alpha0-n5")  # SCAFFOLD fails there
    assert not paper_orders("fedgf-table1-cifar10", "scaffold", "fedavg", "alpha0-n5")
    assert checked and all(c.paper is None or not c.paper.startswith(("−", "-")) for c in checked)
