"""The showcase experiments: the command, resuming it, the results files' coverage and provenance, and the
paired comparisons the chapters read from them."""

from __future__ import annotations

import json
import math

import pytest

from dfl_core import Config
from dfl_core.cli import main
from dfl_book.profiles import get_profile
from dfl_book.showcase import RESULTS_DIR, SCHEMA, Experiment, ShowcaseResult, load, run_experiment
from dfl_book.showcase.experiments import EXPERIMENTS, REGIME_MAPS
from dfl_book.showcase.report import paper_difference

COMMITTED = sorted(RESULTS_DIR.glob("*.json"))


def test_every_experiment_builds_valid_configs_at_every_profile():
    for name, exp in EXPERIMENTS.items():
        assert len(exp.arms) >= 2 and len(exp.seeds) >= 5, name  # a comparison, over at least 5 seeds
        for profile in ("fast", "showcase"):
            for arm in exp.arms:
                cfg = exp.config(arm, 0, get_profile(profile))
                assert isinstance(cfg, Config) and cfg.seed == 0
        big = exp.config(next(iter(exp.arms)), 0, get_profile("showcase"))
        assert big.dataset == "fashion-mnist" and big.rounds >= 100
        if name in REGIME_MAPS or name == "dfedsam-topology":  # the papers' local work, 20 clients of 500 images
            assert (big.train_size, big.num_clients, big.batch_size, big.weight_decay) == (10_000, 20, 128, 5e-4)
        elif name == "dsgd-batch":  # D-SGD against centralized SGD: 20 IID clients of 500 images, one step a round
            assert (big.train_size, big.num_clients, big.partition, big.params.local_steps) == (10_000, 20, "iid", 1)
        else:
            assert big.train_size is None


def stored_config_matches(stored: dict, current: dict) -> list[str]:
    """Fields where a stored run's config differs from what the code would run now (the committed files hold
    their configs in the current form: converted once with ``python -m dfl_core convert-results``)."""
    return sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_committed_results_cover_their_configs_and_seeds(path):
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["profile"] == "showcase"
    exp = EXPERIMENTS[path.stem]  # the file is named after the experiment, under its current name
    assert doc["experiment"] == path.stem and doc["chapter"] == exp.chapter
    assert path.stem in doc["provenance"]["command"].split()  # the command that regenerates it, as it is now
    assert list(doc["arms"]) == list(exp.arms) and tuple(doc["seeds"]) == exp.seeds
    for key in ("command", "seeds", "versions", "machine", "date", "wall_time_s"):
        assert doc["provenance"][key] not in (None, ""), key
    runs = {(r["arm"], r["seed"]): r for r in doc["runs"]}
    assert set(runs) == {(a, s) for a in exp.arms for s in exp.seeds}
    profile = get_profile("showcase")
    for (arm, seed), run in runs.items():
        current = exp.config(arm, seed, profile).to_dict()
        assert stored_config_matches(run["config"], current) == [], (arm, seed)
        assert run["wall_time_s"] > 0
        if "diverged" in run:  # an outcome, recorded with its round
            assert run["history"][-1]["round"] < run["diverged"]["round"] <= current["rounds"], (arm, seed)
            continue
        assert run["history"][-1]["round"] == current["rounds"]
        if exp.measure is not None:
            assert run["measures"], (arm, seed)


TINY = Experiment(
    "tiny",
    "test",
    "Does a tiny experiment run and resume?",
    arms={"DFedAvg": dict(algorithm="dfedavg"), "DFedSAM": dict(algorithm="dfedsam")},
    base=dict(dataset="digits", train_size=None, test_size=None, num_clients=4, rounds=2, eval_every=1),
    seeds=(0, 1),
)


def test_an_experiment_runs_writes_provenance_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setitem(EXPERIMENTS, "tiny", TINY)
    path = run_experiment("tiny", "fast", out=tmp_path, checkpoints=tmp_path / "ck", seeds=(0,), progress=False)
    first = json.loads(path.read_text())
    assert [(r["arm"], r["seed"]) for r in first["runs"]] == [("DFedAvg", 0), ("DFedSAM", 0)]
    run_experiment("tiny", "fast", out=tmp_path, checkpoints=tmp_path / "ck", progress=False)  # both seeds now
    second = json.loads(path.read_text())
    assert len(second["runs"]) == 4
    kept = {(r["arm"], r["seed"]): r for r in second["runs"]}
    for r in first["runs"]:  # finished runs are not rerun
        assert kept[(r["arm"], r["seed"])]["wall_time_s"] == r["wall_time_s"]
    result = load("tiny", tmp_path)
    assert result.seeds == (0, 1) and len(result.curve("DFedSAM")[1]) == 2
    assert not list((tmp_path / "ck").glob("*.pt"))  # checkpoints of finished runs are removed

    from dfl_book.showcase.report import rerun_matches

    monkeypatch.setenv("DFL_SHOWCASE_RESULTS", str(tmp_path))
    check = rerun_matches("tiny", "DFedSAM", seed=1, rounds=2)  # reruns at the file's own profile
    assert check["round"] == 2 and check["agree"] and check["rerun"] == pytest.approx(check["committed"], abs=1e-6)
    early = rerun_matches("tiny", "DFedSAM", seed=1, rounds=1)  # the rerun stops at round 1 of 2
    assert early["round"] == 1 and early["rerun"] == pytest.approx(early["committed"], abs=1e-6)
    doc = json.loads(path.read_text())
    for r in doc["runs"]:
        r["history"][-1]["test_acc"] += 0.01  # a file the code no longer reproduces
    path.write_text(json.dumps(doc))
    assert not rerun_matches("tiny", "DFedSAM", seed=1, rounds=2)["agree"]


def test_a_diverging_arm_is_recorded_and_the_other_runs_go_on(tmp_path, monkeypatch):
    blowup = Experiment(
        "blowup",
        "test",
        "Does a diverging arm stop the experiment?",
        arms={"DFedAvg": dict(algorithm="dfedavg"), "huge lr": dict(algorithm="dfedavg", lr=1e12)},
        base=dict(dataset="digits", train_size=None, test_size=None, num_clients=4, rounds=3, eval_every=1),
        seeds=(0, 1),
    )
    monkeypatch.setitem(EXPERIMENTS, "blowup", blowup)
    run_experiment("blowup", "fast", out=tmp_path, checkpoints=tmp_path / "ck", progress=False)
    result = load("blowup", tmp_path)
    assert len(result.runs) == 4 and result.diverged("DFedAvg") == {}
    rounds = result.diverged("huge lr")
    assert sorted(rounds) == [0, 1] and all(1 <= r <= 3 for r in rounds.values())
    assert "diverged" in result.runs[("huge lr", 0)]["diverged"]["message"]
    assert len(result.per_seed("DFedAvg")) == 2
    with pytest.raises(ValueError, match=r"arm 'huge lr' diverged in seed\(s\) \[0, 1\]"):
        result.per_seed("huge lr")
    steps, curves = result.curve("huge lr")  # every seed diverged: the schedule all the same
    assert steps == result.curve("DFedAvg")[0] == [0, 1, 2, 3]
    assert all(len(c) == 4 and math.isnan(c[-1]) for c in curves)  # NaN from the divergence on


def test_no_experiment_is_named_after_a_chapter_number():
    """Chapters get renumbered; an experiment's name says what it runs (``dfedsam-regime``, not ``ch05-regime``)."""
    import re

    assert not [name for name in EXPERIMENTS if re.search(r"\d", name)]


def test_a_mislabelled_results_file_is_refused(tmp_path):
    doc = json.loads((RESULTS_DIR / "privacy.json").read_text())
    (tmp_path / "fedgf.json").write_text(json.dumps(doc))  # privacy's runs under fedgf's name
    with pytest.raises(ValueError, match="holds the results of experiment 'privacy', not of 'fedgf'"):
        load("fedgf", tmp_path)
    with pytest.raises(FileNotFoundError, match="no showcase results for 'ch03b-privacy'"):
        load("ch03b-privacy", tmp_path)


def test_the_command_lists_and_refuses_unknown_experiments(capsys):
    assert main(["showcase", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPERIMENTS)
    assert main(["showcase", "no-such-experiment", "--no-progress"]) == 2
    assert "unknown showcase experiment 'no-such-experiment'" in capsys.readouterr().err


def fake(values: dict[str, list[float]]) -> ShowcaseResult:
    """A results document whose final test accuracy (in %) per arm and seed is ``values``."""
    runs = [
        {
            "arm": arm,
            "seed": s,
            "config": {},
            "wall_time_s": 1.0,
            "measures": {},
            "history": [{"round": 1, "test_acc": v / 100}],
        }
        for arm, vs in values.items()
        for s, v in enumerate(vs)
    ]
    return ShowcaseResult(
        {
            "schema": SCHEMA,
            "experiment": "fake",
            "provenance": {},
            "arms": dict.fromkeys(values),
            "seeds": list(range(len(next(iter(values.values()))))),
            "runs": runs,
        }
    )


def test_compare_is_the_per_seed_paired_difference():
    result = fake({"A": [80.0, 81.0, 79.0, 82.0, 80.5], "B": [79.0, 80.2, 78.1, 81.0, 79.4]})
    c = result.compare("A", "B")
    assert c.mean == pytest.approx(0.96) and c.verdict == "REPRODUCED" and c.n == 5
    assert result.compare("B", "A").verdict == "REVERSED"
    noisy = fake({"A": [80, 81, 79, 82, 80], "B": [81, 80, 80, 81, 80]})
    assert noisy.compare("A", "B").verdict == "UNRESOLVED"


def test_a_record_written_before_a_field_existed_matches_its_planned_config_once_converted():
    """Resuming keeps runs whose stored config is the planned one; a record written before a field existed
    (``local_epochs``) matches once its file is converted (``convert_config``, the convert-results command)."""
    from dfl_book.showcase.runner import stored_config
    from dfl_core.results import convert_config

    planned = TINY.config("DFedAvg", 0, get_profile("fast")).to_dict()
    old = {k: v for k, v in planned.items() if k != "local_epochs"}
    assert stored_config({"config": planned}) == planned
    assert "local_epochs" not in old and stored_config({"config": convert_config(old)}) == planned
    assert stored_config({"config": {**planned, "rounds": 3}}) != planned  # a real change still reruns


#: Committed runs whose start is rerun with today's code: the chapters read these files (04, 05 and 06), so
#: the files must still be what the code produces. Other chapters (07 to 09) rerun theirs in a cell.
RERUN = [
    ("dfedavg", "D-PSGD"),
    ("compressed-gossip", "8 bits"),
    ("compressed-gossip", "4 bits, stochastic"),
    ("privacy", "K = 5"),
]


@pytest.mark.parametrize("name, arm", RERUN, ids=[f"{n}/{a}" for n, a in RERUN])
def test_the_start_of_a_committed_run_still_reproduces(name, arm):
    from dfl_book.showcase.report import rerun_matches

    check = rerun_matches(name, arm)  # seed 0, to its first evaluation at round 10 or later
    assert check["round"] >= 10 and check["agree"], check


def test_judge_names_each_claims_endpoint_and_its_whole_regime():
    """The regime names data, model, clients, graph, local work, rounds and test size (the book's rule 6)."""
    from dfl_book.showcase.report import ENDPOINT, Claim, judge, load

    result = load("fedsam")
    sam = result.arms[1]
    accuracy, sharpness = judge(
        result,
        [
            Claim("SAM more accurate", sam, "FedAvg"),
            Claim("SAM flatter", sam, "FedAvg", "lambda_max", "less", 1.0, True),
        ],
    )
    assert (
        accuracy.endpoint == ENDPOINT
        and sharpness.endpoint == "λ_max of the train-loss Hessian at x̄, after the last round"
    )
    parts = accuracy.regime.split("; ")
    assert parts[:2] == ["Fashion-MNIST (Dirichlet 0.3), 2NN", "m = 100, with a server"], parts
    assert parts[2].startswith("E = 0.26 (K = 5, B = 32), T = 600") and parts[3] == "test on 10,000 images"
    assert parts[4].startswith("FedAvg: train ")


def test_the_fedgf_threshold_is_calibrated_on_seeds_the_experiment_does_not_run():
    import inspect

    from dfl_book.showcase.measures import calibrate_fedgf_threshold

    pilot_seeds = inspect.signature(calibrate_fedgf_threshold).parameters["seeds"].default
    assert not set(pilot_seeds) & set(EXPERIMENTS["fedgf"].seeds)
    threshold = calibrate_fedgf_threshold(profile="fast", rounds=2, seeds=(5,))
    assert math.isfinite(threshold) and threshold > 0


def test_a_comparison_of_arms_with_different_local_work_names_each_arms():
    """A compute-matched baseline trains twice the local steps: the regime must not state the baseline's alone."""
    from dfl_book.showcase.experiments import COMPUTE_MATCHED, REGIME_MAPS
    from dfl_book.showcase.report import Claim, judge, load

    regime_map, result = REGIME_MAPS["dfedsam-regime"], load("dfedsam-regime")
    sam, matched = regime_map.treated_arm(5, 0.01), COMPUTE_MATCHED["DFedAvg"]
    (equal_gradients,) = judge(result, [Claim("DFedSAM beats DFedAvg at equal gradients", sam, matched)])
    assert f"{sam}: E = 5 (K = 20, B = 128), T = 100" in equal_gradients.regime
    assert f"{matched}: E = 10 (K = 40, B = 128), T = 100" in equal_gradients.regime
    (same_work,) = judge(result, [Claim("DFedSAM beats DFedAvg", sam, regime_map.baseline_arm(5))])
    assert "; E = 5 (K = 20, B = 128), T = 100;" in same_work.regime  # one local work, named once


def test_a_comparison_of_arms_on_different_graphs_names_both():
    """The ring against the complete graph: the regime must not state the baseline's graph alone."""
    from dfl_book.showcase.report import Claim, judge, load

    result = load("dsgd-batch")
    (ring_vs_complete,) = judge(result, [Claim("ring beats SGD", "ring, total batch 160", "complete, total batch 160")])
    assert "graph: ring against complete" in ring_vs_complete.regime, ring_vs_complete.regime
    (same_graph,) = judge(result, [Claim("160 beats 1280", "ring, total batch 160", "ring, total batch 1280")])
    assert "graph: ring;" in same_graph.regime and "against" not in same_graph.regime.split("; ")[1]


def test_paper_difference_names_where_the_number_is():
    """The label says which paper, table, data, split and graph; numbers as printed in the transcribed tables."""
    diff, where = paper_difference("dfedsam_table2", "DFedSAM", "DFedAvg", column="ring")
    assert round(diff, 2) == 3.24 and where == "DFedSAM paper, Table 2, CIFAR-10, 100 clients, ring"
    assert paper_difference("dfedsam_table2", "DFedSAM", "DFedAvg", column="full")[1].endswith("complete graph")
    diff, where = paper_difference("dfedsam_table1", "DFedSAM", "DFedAvg", task="CIFAR-10", split="Dir0.3")
    assert round(diff, 2) == 8.49 and where == "DFedSAM paper, Table 1, CIFAR-10, 100 clients, Dirichlet 0.3"
    _, where = paper_difference(
        "fedgf_table1", "FedGF", "FedSAM", "test_acc", task="CIFAR-10", dirichlet_alpha="0.005", clients_per_round="10"
    )
    assert where == "FedGF paper, Table 1, CIFAR-10, α = 0.005, 10 clients a round"
