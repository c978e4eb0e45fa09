"""The command line: --help lists everything; a shortened default comparison runs end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dfl_core import ALGORITHMS, ConfigError, read_results
from dfl_core.cli import main
from dfl_core.data import DATASETS
from dfl_core.models import MODELS
from dfl_core.topology import TOPOLOGIES


def test_help_lists_every_algorithm_topology_dataset_and_model():
    out = subprocess.run(
        [sys.executable, "-m", "dfl_core", "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in [*ALGORITHMS, *TOPOLOGIES, *DATASETS, *MODELS]:
        assert f"  {name} " in out, f"{name} missing from --help"
    assert "--gossip-steps" in out and "--rho" in out


def test_shortened_default_comparison(tmp_path, capsys):
    code = main(
        ["run", "--rounds", "2", "--seeds", "0,1", "--num-clients", "6", "--out", str(tmp_path), "--no-progress"]
    )
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
    assert "error: --alpha must be in [0.0, inf), got -1.0" in capsys.readouterr().err  # the flag, as given
    code = main(["run", "--algorithms", "dfedsam", "--rho", "-1", "--out", str(tmp_path), "--no-progress"])
    assert code == 2 and "algorithm 'dfedsam': --rho must be in [0.0, inf), got -1.0" in capsys.readouterr().err


def test_preset_runs_with_overrides(tmp_path, capsys):
    code = main(
        [
            "run",
            "--preset",
            "dfedavgm-mnist-2nn",
            "--setting",
            "noniid-e1",
            "--algorithms",
            "dfedavgm",
            "--dataset",
            "digits",
            "--rounds",
            "1",
            "--local-steps",
            "2",
            "--seeds",
            "0",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--no-plot",
        ]
    )
    assert code == 0, capsys.readouterr().err
    (h,) = read_results(tmp_path / "results.json")
    cfg = h.config
    assert (cfg["partition"], cfg["lr"], cfg["batch_size"], cfg["momentum"], cfg["num_clients"]) == (
        "shards",
        0.01,
        50,
        0.9,
        20,
    )
    assert (cfg["dataset"], cfg["local_steps"]) == ("digits", 2)  # the overrides win


def test_setting_without_preset_is_refused(tmp_path, capsys):
    assert main(["run", "--setting", "iid", "--out", str(tmp_path), "--no-progress"]) == 2
    assert "--setting needs --preset" in capsys.readouterr().err


def test_presets_and_verdicts_come_from_the_books_extension(tmp_path, capsys):
    from dfl_book.cli import EXTENSION, paired_table
    from dfl_book.presets import PRESETS
    from dfl_core.cli import cli_presets, find_preset

    assert EXTENSION.presets is PRESETS and EXTENSION.paired_table is paired_table
    assert cli_presets() == PRESETS and find_preset("fedsam-emnist") is PRESETS["fedsam-emnist"]
    assert main(["run", "--preset", "no-such-table", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'no-such-table'; allowed: dfedsam-table1-cifar10, " in err, err


def test_the_engine_alone_runs_and_says_presets_and_verdicts_need_the_book(tmp_path, capsys, monkeypatch):
    """With no extension installed (the engine without dfl_book) ``run`` still works; --preset is refused clearly."""
    import dfl_core.cli as cli

    monkeypatch.setattr(cli, "cli_extensions", lambda: ())
    assert main(["run", "--preset", "fedsam-emnist", "--out", str(tmp_path / "a"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "error: --preset fedsam-emnist: no presets; the papers' presets come with "
        "the book's package, dfl_book, which is not installed\n"
    )
    assert "  none                   the papers' presets come with the book's package" in cli._catalogue()
    code = main(
        [
            "run",
            "--algorithms",
            "dfedavg,dfedsam",
            "--seeds",
            "0,1",
            "--rounds",
            "1",
            "--num-clients",
            "4",
            "--out",
            str(tmp_path / "b"),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "Paired with" not in out
    assert "paired verdicts: none (they come with the book's package, dfl_book, which is not installed)" in out
    assert "plot:    none (the figure comes with the book's package" in out


def test_the_distributed_launcher_starts_from_a_preset(capsys, monkeypatch):
    """``--preset`` of ``python -m dfl_core.distributed`` (checked up to the launch: a centralized row is refused)."""
    import dfl_core.cli as cli
    from dfl_core.distributed.cli import main as distributed_main

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = ["--preset", "dfedsam-table1-cifar10", "--setting", "dir0.6", "--seed", "3", "--algorithm"]
    assert distributed_main([*args, "fedavg"]) == 2
    assert "algorithm 'fedavg' is centralized" in capsys.readouterr().err
    monkeypatch.setattr(cli, "cli_extensions", lambda: ())
    assert distributed_main([*args, "dfedsam"]) == 2
    assert "--preset dfedsam-table1-cifar10: no presets; the papers' presets come with" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", ["fashion-mnist", "mnist"])
def test_a_data_dir_that_does_not_exist_is_an_error_in_the_command_lines_words(tmp_path, capsys, dataset):
    absent = tmp_path / "nonexistent" / "path"
    code = main(
        [
            "run",
            "--dataset",
            dataset,
            "--data-dir",
            str(absent),
            "--algorithms",
            "dfedavg",
            "--seeds",
            "0",
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
            "--no-plot",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: --data-dir {str(absent)!r} does not exist; give an existing folder holding" in err, err
    assert "data_dir=" not in err and "or no --data-dir to use" in err
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "out").exists()  # nothing created


def test_data_errors_name_the_flags_of_the_fields_they_mention(tmp_path, capsys):
    code = main(
        [
            "run",
            "--train-size",
            "5000",
            "--algorithms",
            "dfedavg",
            "--seeds",
            "0",
            "--rounds",
            "1",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--no-plot",
        ]
    )
    assert code == 2
    assert "error: --train-size 5000 is not available: allowed 1..1438" in capsys.readouterr().err


# ------------------------------------------------------------ earlier results are never silently replaced
SHORT = [
    "run",
    "--algorithms",
    "dfedavg",
    "--seeds",
    "0",
    "--num-clients",
    "4",
    "--rounds",
    "1",
    "--no-progress",
    "--device",
    "cpu",
]


def test_a_second_run_into_the_same_folder_is_refused_and_the_first_results_stay(tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    assert main(SHORT + out) == 0
    first = {name: (tmp_path / name).read_bytes() for name in ("results.json", "comparison.png")}
    capsys.readouterr()
    assert main(SHORT + ["--lr", "0.05"] + out) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path} already holds results.json, comparison.png" in err, err
    assert "--out DIR" in err and "--overwrite" in err and "--resume" in err
    assert {name: (tmp_path / name).read_bytes() for name in first} == first  # untouched

    assert main(SHORT + ["--lr", "0.05", "--overwrite"] + out) == 0  # replaced on request
    (h,) = read_results(tmp_path / "results.json")
    assert h.config["lr"] == 0.05 and (tmp_path / "comparison.png").read_bytes() != first["comparison.png"]
    assert main(SHORT + ["--lr", "0.05", "--resume"] + out) == 0  # continues in place
    assert read_results(tmp_path / "results.json")[0].records == h.records
    assert main(SHORT + ["--resume", "--overwrite"] + out) == 2
    assert "--resume and --overwrite" in capsys.readouterr().err


def test_the_default_folder_is_protected_too(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(SHORT + ["--no-plot"]) == 0
    assert (tmp_path / "dfl_results" / "results.json").exists()
    assert main(SHORT + ["--no-plot"]) == 2
    assert "dfl_results already holds results.json" in capsys.readouterr().err


def test_an_interrupted_runs_checkpoints_are_not_restarted_without_resume(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "dfedsam-seed7.pt").write_bytes(b"an earlier run's state")
    assert main(SHORT + ["--out", str(tmp_path), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "checkpoints of an interrupted run" in err and "--resume" in err
    assert (tmp_path / "checkpoints" / "dfedsam-seed7.pt").exists() and not (tmp_path / "results.json").exists()
    # --overwrite: the stale checkpoint goes once this command's first run is saved
    assert main(SHORT + ["--out", str(tmp_path), "--no-plot", "--overwrite"]) == 0
    assert not (tmp_path / "checkpoints").exists() and (tmp_path / "results.json").exists()


def test_a_folder_with_other_files_is_used_and_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(SHORT + ["--out", str(tmp_path / "notes.txt"), "--no-plot"]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err
    assert main(SHORT + ["--out", str(tmp_path), "--no-plot"]) == 0
    assert (tmp_path / "notes.txt").read_text() == "mine"


# ------------------------------------------------------------ help text and the summary
def _option_lines(*command: str) -> list[str]:
    import os

    out = subprocess.run(
        [sys.executable, "-m", "dfl_core", *command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "1000"},
    ).stdout  # no wrapped help text
    options, lines = out.split("\n\noptions:\n", 1)[-1].split("\n\n")[0], []
    for line in options.splitlines():  # a long option's help starts on the next line
        if line.strip().startswith("-"):
            lines.append(line.strip())
        elif lines:
            lines[-1] += "  " + line.strip()
    return out, lines


def test_run_help_gives_each_option_one_default():
    out, lines = _option_lines("run")
    assert "(default: None)" not in out
    for line in lines:
        head, _, tail = line.partition("(default:")
        own_words = head.split("  ", 1)[-1].replace("the code's default", "")  # a public code's default is no default
        assert not (tail and "default" in own_words), f"two defaults: {line}"
        assert "(default:" not in tail, f"two defaults: {line}"
    by_flag = {line.split()[0]: line for line in lines}
    assert "default: 0.01 for dfedsam, dfedsam-mgs; 0.05 for fedsam" in by_flag["--rho"]
    assert by_flag["--train-size"].endswith("(default: all)")
    assert by_flag["--topology"].count("default") == 1 and "default: ring for" in by_flag["--topology"]
    assert by_flag["--full-batch"].endswith("(default: false)")
    assert by_flag["--out"].endswith("(default: dfl_results)")
    assert by_flag["--dispfl-mask-init"].endswith("(the code's default) (default: independent)")  # the engine's own


def test_table_help_names_the_fast_profiles_real_scale():
    from dfl_book.tables import FAST

    out, _ = _option_lines("table")
    assert f"({FAST['dataset']}, {FAST['model']}, {FAST['num_clients']} clients, {FAST['rounds']} rounds" in out
    fast_sentence = out.split("'fast' is", 1)[1].split("'showcase'", 1)[0]
    assert "Fashion-MNIST" not in fast_sentence and "Fashion-MNIST" in out.split("'showcase'", 1)[1]


def test_a_single_seed_is_printed_without_a_spread():
    from dfl_core.cli import summary_table
    from dfl_core.results import History

    def history(seed, acc, cd):
        return History(
            config={"gossip_steps": 1, "seed": seed}, records=[{"round": 1, "test_acc": acc, "consensus_distance": cd}]
        )

    table = summary_table(
        {"dfedavg": [history(0, 0.9512, 0.0123)], "dfedsam": [history(0, 0.90, 0.02), history(1, 0.92, 0.04)]}
    )
    one, two = table.splitlines()[2:4]  # (then the legend)
    assert "±" not in one and "95.12" in one and "1.230e-02" in one and one.endswith(" 1")
    assert "91.00 ± 1.41" in two and two.endswith(" 2")
    assert one.index("1.230e-02") == two.index("3.000e-02")  # columns stay aligned


def test_paired_table_judges_each_method_against_dfedavg_seed_by_seed():
    from dfl_book.cli import paired_table
    from dfl_core.results import History

    def runs(accs):
        return [
            History(config={"gossip_steps": 1, "seed": s}, records=[{"round": 1, "test_acc": a}])
            for s, a in enumerate(accs)
        ]

    base = [0.90, 0.92, 0.91, 0.93, 0.89]
    table = paired_table(
        {
            "dpsgd": runs([a - 0.05 - 0.001 * i for i, a in enumerate(base)]),
            "dfedavg": runs(base),
            "dfedsam": runs(base),
            "dfedsam-mgs": runs([a + (0.02 if i % 2 else -0.02) for i, a in enumerate(base)]),
        }
    )
    lines = {line.split()[0]: line for line in table.splitlines()[3:]}
    assert "dfedavg" not in lines and table.splitlines()[1].split()[-3:] == ["verdict", "after", "Holm"]
    assert "after Holm: over these 3 comparisons" in table.splitlines()[0]
    assert lines["dpsgd"].split()[1] == "−5.20" and lines["dpsgd"].split()[-2:] == ["REVERSED", "REVERSED"]
    assert "EQUIVALENT (within ±0.5)" in lines["dfedsam"] and lines["dfedsam"].endswith("EQUIVALENT")
    assert "UNRESOLVED (could detect" in lines["dfedsam-mgs"] and lines["dfedsam-mgs"].endswith("UNRESOLVED")
    assert paired_table({"dfedavg": runs(base[:1]), "dfedsam": runs(base[:1])}) == ""  # one seed: no pairs
    few = paired_table({"dfedavg": runs(base[:3]), "dfedsam": runs(base[:3])})
    assert few.splitlines()[-1].startswith("(3 seeds: the book asks for at least 5")


def test_local_epochs_from_the_command_line(tmp_path):
    """K follows from the client's size: 1438 digits over 10 clients is n = 143.8, ⌈n/16⌉ = 9 batches an
    epoch, so 2 epochs are K = 18 steps; D-PSGD in the same comparison keeps its one step."""
    code = main(
        [
            "run",
            "--algorithms",
            "dfedavg,dpsgd",
            "--local-epochs",
            "2",
            "--batch-size",
            "16",
            "--num-clients",
            "10",
            "--rounds",
            "1",
            "--seeds",
            "0",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--no-plot",
        ]
    )
    assert code == 0
    by = {h.config["algorithm"]: h.config for h in read_results(tmp_path / "results.json")}
    assert (by["dfedavg"]["local_epochs"], by["dfedavg"]["local_steps"]) == (2, 18)
    assert (by["dpsgd"]["local_epochs"], by["dpsgd"]["local_steps"]) == (None, 1)


def test_table_data_errors_keep_the_spelling_of_set(tmp_path, capsys):
    """``table`` takes config fields as ``--set data_dir=...``, so its data errors say ``data_dir=``."""
    code = main(
        [
            "table",
            "dfedsam-table2-cifar10",
            "--algorithms",
            "dfedavg",
            "--settings",
            "ring",
            "--seeds",
            "0",
            "--set",
            "data_dir=/nonexistent/path",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "data_dir='/nonexistent/path'" in err and "--data-dir" not in err, err


def test_convert_results_converts_a_results_file_of_an_earlier_version(tmp_path, capsys):
    """``python -m dfl_core convert-results OLD.json -o NEW.json``: a file written before the typed params (every
    algorithm's hyperparameters, None or 0 where unread; quant_mixing's first names; fields added since missing)
    becomes one this version reads, its histories kept; converting it again changes nothing."""
    from dfl_core import Config
    from dfl_core.config import algorithm_fields
    from dfl_core.results import SCHEMA

    now = [
        Config(algorithm="dfedsam", rho=0.05, num_clients=4),
        Config(algorithm="dfedavgm-q", quant_bits=8, quant_mixing="differences-only", num_clients=4),
    ]
    added_since = ("precision", "channels_last", "compile", "cudnn_benchmark", "consensus_step")
    configs = []
    for cfg in now:
        old = {name: None for name in algorithm_fields()} | {"rho": 0.0, "momentum": 0.0} | cfg.to_dict()
        configs.append({k: v for k, v in old.items() if k not in added_since})
    configs[1]["quant_mixing"] = "difference"  # the reading's first name
    history = [{"round": 0, "test_acc": 0.125}, {"round": 1, "test_acc": 0.5}]
    doc = {
        "schema": SCHEMA,
        "created": "2026-11-01T00:00:00+00:00",
        "versions": {},
        "command": None,
        "runs": [{"config": c, "wall_time_s": 1.5, "history": history} for c in configs],
    }
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old_path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(ValueError, match="not used by algorithm 'dfedsam'"):  # this version reads only its own form
        Config.from_dict(read_results(old_path)[0].config)  # (momentum=0.0, unread by DFedSAM)
    assert main(["convert-results", str(old_path), "-o", str(new_path)]) == 0
    assert "2 run config(s) converted" in capsys.readouterr().out
    histories = read_results(new_path)
    assert [Config.from_dict(h.config) for h in histories] == now
    assert [h.records for h in histories] == [history, history] and histories[0].wall_time_s == 1.5
    assert json.loads(old_path.read_text()) == doc  # -o leaves the old file as it was
    assert main(["convert-results", str(new_path)]) == 0  # in place: already current, unchanged
    assert "0 run config(s) converted" in capsys.readouterr().out
    assert [h.config for h in read_results(new_path)] == [h.config for h in histories]
    assert main(["convert-results", str(tmp_path / "missing.json")]) == 2
    assert "cannot convert" in capsys.readouterr().err


def test_resume_refuses_options_that_would_drop_the_earlier_runs(tmp_path, capsys):
    out = ["--out", str(tmp_path), "--no-plot"]
    assert main(SHORT + out) == 0
    before = (tmp_path / "results.json").read_bytes()
    capsys.readouterr()
    assert main(SHORT + ["--lr", "0.05", "--resume"] + out) == 2  # the earlier run had lr 0.1
    assert "has --lr 0.1, this command asks --lr 0.05" in capsys.readouterr().err  # in the flags given
    other = [a if a != "dfedavg" else "dfedsam" for a in SHORT]
    assert main(other + ["--resume"] + out) == 2  # another algorithm: the file's run would be lost
    assert "holds a run (dfedavg, seed" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_bytes() == before  # untouched


def test_centralized_algorithms_print_their_summary(tmp_path, capsys):
    args = [a if a != "dfedavg" else "fedavg,dfedavg" for a in SHORT]
    assert main(args + ["--out", str(tmp_path), "--no-plot"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fedavg = next(line for line in lines if line.startswith("fedavg "))
    assert fedavg.split()[1] == "-"  # no gossip steps with a server
    assert any(line.startswith("consensus distance:") for line in lines)


def test_an_empty_seed_list_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--seeds", " ", "--out", str(tmp_path)])
    assert "--seeds needs at least one seed" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_a_comparison_takes_each_option_where_it_applies_and_refuses_one_none_uses():
    from dfl_core.cli import configs_for

    configs = configs_for({"local_steps": 3, "rho": 0.2}, ["dpsgd", "dfedavg", "dfedsam"])
    assert [c.params.local_steps for c in configs.values()] == [1, 3, 3]  # D-PSGD takes one step by definition
    assert configs["dfedsam"].params.rho == 0.2 and not hasattr(configs["dfedavg"].params, "rho")
    with pytest.raises(ConfigError, match="momentum=0.5 is used by none of the algorithms compared"):
        configs_for({"momentum": 0.5}, ["dfedavg", "dfedsam"])


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--degree", "6"],
            "--degree 6 has no effect on these runs (--partition dirichlet, --topology ring); "
            "it applies to --topology random-regular",
        ),
        (["--partition", "iid", "--alpha", "5"], "--alpha 5.0 has no effect"),
        (["--shards-per-client", "3"], "it applies to --partition shards"),
        (["--fresh-matrix-per-gossip-step", "true"], "it applies to --topology random-symmetric or"),
    ],
)
def test_a_run_option_that_no_run_reads_is_refused(tmp_path, capsys, options, message):
    assert main(SHORT + options + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()
    # where a run reads it, it is taken
    assert main(SHORT + ["--topology", "random-regular", "--degree", "2", "--out", str(tmp_path / "ok")]) == 0


def test_an_algorithm_registered_after_import_gets_its_options(tmp_path, capsys, monkeypatch):
    """A user's module registers an algorithm with a new hyperparameter after the CLI was imported: its
    ``--option`` is offered, routed to that algorithm only, and recorded in its runs' configs."""
    from dfl_core.algorithms import ALGORITHMS, Algorithm, ClientModels
    from dfl_core.algorithms.decentralized import DFedSAMParams
    from dfl_core.settings import Number, params, setting

    @params
    class ScaledParams(DFedSAMParams):
        """DFedSAM's hyperparameters and one more (read by no rule: only the option's path is under test)."""

        user_scale: float = setting(1.0, "s_user, a user's extra hyperparameter", Number(0.0, 10.0))

    dfedsam = ALGORITHMS["dfedsam"]
    mine = Algorithm(
        "user-dfedsam",
        "DFedSAM, registered by a user",
        params=ScaledParams,
        local_rule=dfedsam.local_rule,
        round=dfedsam.round,
        init=ClientModels.init,
    )
    monkeypatch.setitem(ALGORITHMS, "user-dfedsam", mine)
    code = main(
        [
            "run",
            "--algorithms",
            "dfedavg,user-dfedsam",
            "--user-scale",
            "2.5",
            "--rounds",
            "1",
            "--seeds",
            "0",
            "--num-clients",
            "4",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    configs = {h.config["algorithm"]: h.config for h in read_results(tmp_path / "results.json")}
    assert configs["user-dfedsam"]["user_scale"] == 2.5 and "user_scale" not in configs["dfedavg"]


# ------------------------------------------------------------ bad input: a clear error, before anything trains
def test_repeated_seeds_and_an_empty_algorithm_list_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--seeds", "0,1,0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--seeds repeats seed 0" in capsys.readouterr().err
    assert main(["run", "--algorithms", " ", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "error: --algorithms is empty; give one or more of dpsgd" in err, err
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("{bad", "is not a results file: not valid JSON"),
        ("[]", "is not a results file: it holds a JSON list, not an object"),
        ('{"schema": "dfl-book/results/v1"}', "is not a results file: 'runs' is missing"),
        ('{"schema": "dfl-book/results/v1", "runs": [{"history": []}]}', "runs[0] 'config' is missing"),
        ('{"schema": "dfl-book/results/v1", "runs": [{"config": {}, "history": []}]}', "config has no 'algorithm'"),
    ],
)
def test_resume_refuses_a_malformed_results_file_naming_it(tmp_path, capsys, text, message):
    (tmp_path / "results.json").write_text(text)
    assert main(SHORT + ["--out", str(tmp_path), "--no-plot", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"error: --resume: cannot continue from {tmp_path / 'results.json'}: " in err and message in err, err
    assert (tmp_path / "results.json").read_text() == text  # untouched


def test_an_unwritable_out_is_refused_before_anything_trains(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "results"  # under a file: no folder can be made there
    assert main(SHORT + ["--out", str(out), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert f"error: cannot write --out {str(out)!r}: Not a directory" in err, err
