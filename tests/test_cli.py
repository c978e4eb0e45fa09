"""The command line: --help lists everything; a shortened default comparison runs end to end."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dfl_core import ALGORITHMS, read_results
from dfl_core.cli import main
from dfl_core.data import DATASETS
from dfl_core.models import MODELS
from dfl_core.topology import TOPOLOGIES


def test_help_lists_every_algorithm_topology_dataset_and_model():
    out = subprocess.run([sys.executable, "-m", "dfl_core", "run", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for name in [*ALGORITHMS, *TOPOLOGIES, *DATASETS, *MODELS]:
        assert f"  {name} " in out, f"{name} missing from --help"
    assert "--gossip-steps" in out and "--rho" in out


def test_shortened_default_comparison(tmp_path, capsys):
    code = main(["run", "--rounds", "2", "--seeds", "0,1", "--num-clients", "6",
                 "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ["dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs"]:
        assert any(line.startswith(name + " ") for line in printed.splitlines()), printed
    histories = read_results(tmp_path / "results.json")
    assert len(histories) == 5 * 2
    mgs = [h for h in histories if h.config["algorithm"] == "dfedsam-mgs"]
    assert {h.config["gossip_steps"] for h in mgs} == {4}
    assert all(h.rounds == [0, 1, 2] for h in histories)
    assert (tmp_path / "comparison.png").stat().st_size > 10_000
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["schema"] == "dfl-book/results/v1" and doc["command"].startswith("python -m dfl_core")


def test_bad_value_exits_with_code_2_and_a_message(tmp_path, capsys):
    code = main(["run", "--alpha", "-1", "--out", str(tmp_path), "--no-progress"])
    assert code == 2
    assert "alpha must be in [0.0, inf), got -1.0" in capsys.readouterr().err


def test_preset_runs_with_overrides(tmp_path, capsys):
    code = main(["run", "--preset", "dfedavgm-mnist-2nn", "--setting", "noniid-e1", "--algorithms", "dfedavgm",
                 "--dataset", "digits", "--rounds", "1", "--local-steps", "2", "--seeds", "0",
                 "--out", str(tmp_path), "--no-progress", "--no-plot"])
    assert code == 0, capsys.readouterr().err
    (h,) = read_results(tmp_path / "results.json")
    cfg = h.config
    assert (cfg["partition"], cfg["lr"], cfg["batch_size"], cfg["momentum"], cfg["num_clients"]) == \
        ("shards", 0.01, 50, 0.9, 20)
    assert (cfg["dataset"], cfg["local_steps"]) == ("digits", 2)           # the overrides win


def test_setting_without_preset_is_refused(tmp_path, capsys):
    assert main(["run", "--setting", "iid", "--out", str(tmp_path), "--no-progress"]) == 2
    assert "--setting needs --preset" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", ["fashion-mnist", "mnist"])
def test_a_data_dir_that_does_not_exist_is_an_error_in_the_command_lines_words(tmp_path, capsys, dataset):
    absent = tmp_path / "nonexistent" / "path"
    code = main(["run", "--dataset", dataset, "--data-dir", str(absent), "--algorithms", "dfedavg", "--seeds", "0",
                 "--rounds", "1", "--out", str(tmp_path / "out"), "--no-progress", "--no-plot"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: --data-dir {str(absent)!r} does not exist; give an existing folder holding" in err, err
    assert "data_dir=" not in err and "or no --data-dir to use" in err
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "out").exists()   # nothing created


def test_data_errors_name_the_flags_of_the_fields_they_mention(tmp_path, capsys):
    code = main(["run", "--train-size", "5000", "--algorithms", "dfedavg", "--seeds", "0", "--rounds", "1",
                 "--out", str(tmp_path), "--no-progress", "--no-plot"])
    assert code == 2
    assert "error: --train-size 5000 is not available: allowed 1..1438" in capsys.readouterr().err
