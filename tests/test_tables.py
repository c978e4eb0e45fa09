"""The ``table`` command: fast-scale cells, provenance, reproducibility, the paper's numbers, bad input."""
from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

import pytest

from dfl_core.cli import main
from dfl_core.presets import PRESETS
from dfl_core.tables import FAST, FAST_ROUNDS, fast_config, paper_value, read_table

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ["dfedsam-table1-cifar10", "dfedsam-table2-cifar10", "dfedsam-table3-cifar10", "fedgf-table1-cifar10",
             "fedsam-cifar10", "dfedavgm-mnist-2nn"]
TINY = ["--seeds", "0,1", "--set", "num_clients=4", "--set", "rounds=2", "--no-progress"]


def test_fast_config_keeps_epochs_participation_and_the_table_s_own_choices():
    p = PRESETS["dfedsam-table1-cifar10"]
    full, fast = p.config("dfedsam", "dir0.6"), fast_config(p, "dfedsam", "dir0.6")
    assert full.local_steps == 20                         # 5 epochs of 500 samples at batch 128
    assert fast.local_steps == 5 * 3                      # 5 epochs of 1438 // 20 = 71 samples at batch 32
    assert fast_config(p, "dpsgd", "dir0.6").local_steps == 1
    assert (fast.dataset, fast.model, fast.num_clients, fast.rounds) == (
        FAST["dataset"], FAST["model"], FAST["num_clients"], FAST["rounds"])
    assert (fast.alpha, fast.topology, fast.rho, fast.lr) == (full.alpha, full.topology, full.rho, full.lr)
    g = PRESETS["fedgf-table1-cifar10"]
    assert [fast_config(g, "fedavg", f"alpha0-n{n}").clients_per_round for n in (5, 10, 20)] == [1, 2, 4]
    assert fast_config(g, "fedavg", "alpha0-n5").rounds == FAST_ROUNDS[g.name] > fast.rounds


def test_paper_numbers_are_found_where_transcribed():
    assert paper_value("dfedsam-table2-cifar10", "dfedsam-mgs", "ring") == 80.55
    assert paper_value("fedgf-table1-cifar10", "fedavg", "alpha0-n5") == 63.63
    assert paper_value("dfedsam-table1-cifar10", "fedavg", "dir0.3") == 82.39
    assert paper_value("dfedavgm-mnist-2nn", "dfedavgm", "iid-e1") is None        # figures, no table


def test_table_command_writes_provenance_and_reproduces_from_its_recorded_command(tmp_path, capsys):
    args = ["table", "dfedsam-table2-cifar10", "--algorithms", "dfedavg,dfedsam", "--settings", "ring,full",
            *TINY, "--out", str(tmp_path / "a")]
    assert main(args) == 0
    meta, rows = read_table(tmp_path / "a" / "dfedsam-table2-cifar10-fast.csv")
    for key in ("command", "seeds", "versions", "machine", "date"):
        assert meta[key], key
    assert meta["seeds"] == "0 1" and "torch" in meta["versions"]
    assert [(r["algorithm"], r["setting"]) for r in rows] == [
        ("dfedavg", "ring"), ("dfedsam", "ring"), ("dfedavg", "full"), ("dfedsam", "full")]
    for r in rows:
        values = [float(v) for v in r["values"].split()]
        assert len(values) == 2 == int(r["seeds"])
        assert float(r["mean"]) == pytest.approx(statistics.fmean(values), abs=0.006)
        assert 0 <= float(r["mean"]) <= 100
    assert rows[0]["paper"] == "69.95"                     # DFedAvg, ring (DFedSAM Table 2)
    md = (tmp_path / "a" / "dfedsam-table2-cifar10-fast.md").read_text()
    assert "| DFedSAM |" in md and "(80.55)" not in md and "(73.19)" in md
    # the recorded command, rerun, gives the same cells
    recorded = shlex.split(meta["command"])
    assert recorded[:3] == ["python", "-m", "dfl_core"]
    again = recorded[3:]
    again[again.index("--out") + 1] = str(tmp_path / "b")
    assert main(again) == 0
    assert read_table(tmp_path / "b" / "dfedsam-table2-cifar10-fast.csv")[1] == rows


def test_fedgf_threshold_is_calibrated_and_recorded(tmp_path):
    args = ["table", "fedgf-table1-cifar10", "--algorithms", "fedgf", "--settings", "alpha0-n5,alpha10-n5",
            *TINY, "--out", str(tmp_path)]
    assert main(args) == 0
    meta, rows = read_table(tmp_path / "fedgf-table1-cifar10-fast.csv")
    assert float(meta["fedgf_threshold"]) > 0
    assert len(rows) == 2


@pytest.mark.parametrize("args, message", [
    (["table", "dfedsam-table9"], "unknown table 'dfedsam-table9'"),
    (["table", "dfedsam-table2-cifar10", "--profile", "medium"], "unknown profile 'medium'; allowed: fast, full"),
    (["table", "dfedsam-table2-cifar10", "--settings", "star"], "no setting 'star'; allowed: ring, grid"),
    (["table", "dfedsam-table2-cifar10", "--algorithms", "fedgf"], "unknown algorithm 'fedgf'"),
])
def test_bad_input_is_refused_with_a_clear_message(args, message, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_set_needs_a_config_field(capsys):
    with pytest.raises(SystemExit):
        main(["table", "dfedsam-table2-cifar10", "--set", "colour=red"])
    assert "--set expects FIELD=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_fast_tables_cover_their_preset(name):
    """The CSVs the book reads: every cell of the preset, three seeds, and the command that made them."""
    meta, rows = read_table(ROOT / "book" / "_tables" / f"{name}-fast.csv")
    preset = PRESETS[name]
    assert {(r["algorithm"], r["setting"]) for r in rows} == {(a, s) for a in preset.algorithms
                                                             for s in preset.settings}
    assert all(r["seeds"] == "3" for r in rows)
    assert f"table {name} --profile fast --seeds 0,1,2" in meta["command"]


def test_tag_names_a_variant_table_and_must_be_simple(tmp_path, capsys):
    args = ["table", "fedsam-cifar10", "--algorithms", "mofedsam", "--settings", "iid", *TINY,
            "--set", "mofedsam_variant=official-fedgf", "--tag", "coded", "--out", str(tmp_path)]
    assert main(args) == 0
    assert (tmp_path / "fedsam-cifar10-fast-coded.csv").exists()
    with pytest.raises(SystemExit):
        main(["table", "fedsam-cifar10", "--tag", "../x"])
    assert "--tag must be letters" in capsys.readouterr().err


def test_an_interrupted_table_continues_without_recomputing_finished_runs(tmp_path, monkeypatch):
    args = ["table", "dfedsam-table2-cifar10", "--algorithms", "dfedavg", "--settings", "ring,full", *TINY,
            "--checkpoints", str(tmp_path / "ck"), "--out", str(tmp_path / "a")]
    import dfl_core.engine as engine
    real_run, calls = engine.run, []

    def run_then_fail(cfg, **kw):                       # the third run is "interrupted"
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
    assert len(calls) == 2                              # only the two unfinished runs ran again
    monkeypatch.setattr(engine, "run", real_run)
    fresh = ["table", "dfedsam-table2-cifar10", "--algorithms", "dfedavg", "--settings", "ring,full", *TINY,
             "--out", str(tmp_path / "b")]
    assert main(fresh) == 0
    rows = lambda d: read_table(d / "dfedsam-table2-cifar10-fast.csv")[1]
    assert rows(tmp_path / "a") == rows(tmp_path / "b")   # resumed = uninterrupted


def test_every_config_is_checked_before_any_run(tmp_path, monkeypatch, capsys):
    import dfl_core.engine as engine
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("ran before validating"))
    args = ["table", "dfedsam-table2-cifar10", *TINY, "--set", "rho=-1", "--out", str(tmp_path)]
    assert main(args) == 2
    assert "rho" in capsys.readouterr().err
