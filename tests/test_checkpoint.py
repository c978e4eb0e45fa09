"""Checkpoint and resume: an interrupted-then-resumed run equals an uninterrupted one, bit for bit.

Also: same seed, same result, for every algorithm; changing the number of
rounds or the evaluation interval leaves the first rounds alone; a run killed
with SIGKILL from outside loses at most the round in progress.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from dfl_core import ALGORITHMS, Config, DivergenceError, Simulation
from dfl_core.engine import Hooks
from dfl_core.checkpoint import FORMAT, CheckpointError, load, save_atomic
from dfl_core.local import Momentum

# one small config per algorithm; the extras make every kind of carried state appear
EXTRA = {
    "fedgf": dict(fedgf_threshold=0.05, fedgf_window=3),
    "dfedavgm": dict(reset_momentum=False),
    "dfedavgm-q": dict(quant_stochastic=True),
    "mofedsam": dict(mofedsam_variant="official-fedgf"),
    "dispfl": dict(dispfl_anneal_rounds=5),
}  # the cosine of its mask updates spans 5 rounds, not `rounds`
SMALL = dict(dataset="digits", model="2nn", num_clients=6, rounds=5, eval_every=2, device="cpu", batch_size=16, lr=0.05)


def small(algorithm: str, **changes) -> Config:
    return Config(algorithm=algorithm, **{**SMALL, **EXTRA.get(algorithm, {}), **changes})


def strip_wall(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in records]


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_resumed_run_equals_uninterrupted_run_bit_for_bit(algorithm, tmp_path):
    cfg = small(algorithm)
    whole = Simulation(cfg)
    whole.run()

    first = Simulation(cfg.replace(rounds=4))  # stops after round 4 ...
    first.run(checkpoint=tmp_path / "c.pt", checkpoint_every=3)
    assert load(tmp_path / "c.pt")["t"] == 4  # (saved at round 3 and at its end)
    resumed = Simulation.resume(tmp_path / "c.pt", cfg)  # ... and continues to round 5
    resumed.run()
    assert torch.equal(resumed.x, whole.x)
    assert strip_wall(resumed.history.records) == strip_wall(whole.history.records)
    assert type(resumed.state) is type(whole.state)
    for name, value in whole.state._asdict().items():  # the algorithm's whole state
        other = getattr(resumed.state, name)
        assert torch.equal(other, value) if isinstance(value, torch.Tensor) else other == value, name


def test_ctrl_c_in_the_middle_of_a_round_saves_the_last_completed_round(tmp_path, monkeypatch):
    cfg = small("dfedavgm")  # momentum buffers carried across rounds
    whole = Simulation(cfg)
    whole.run()

    sim = Simulation(cfg)

    class CtrlCInRound4(Hooks):  # local training of round 4 is done, then Ctrl-C
        def after_gossip(self, before, after, step):
            if sim.t == 3:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sim.run(checkpoint=tmp_path / "c.pt", checkpoint_every=100, hooks=[CtrlCInRound4()])
    state = load(tmp_path / "c.pt")
    assert state["t"] == 3 and [r["round"] for r in state["history"]] == [0, 2]  # round 4 is not kept
    resumed = Simulation.resume(tmp_path / "c.pt")
    resumed.run()
    assert torch.equal(resumed.x, whole.x)
    assert strip_wall(resumed.history.records) == strip_wall(whole.history.records)


def test_ctrl_c_while_the_hooks_see_a_completed_round_saves_that_round(tmp_path):
    cfg = small("dfedavgm")
    whole = Simulation(cfg)
    whole.run()

    class CtrlCAfterRound3(Hooks):  # round 3 is complete; Ctrl-C while the hooks look at it
        def after_round(self, run):
            if run.t == 3:
                raise KeyboardInterrupt

    sim = Simulation(cfg)
    with pytest.raises(KeyboardInterrupt):
        sim.run(checkpoint=tmp_path / "c.pt", checkpoint_every=100, hooks=[CtrlCAfterRound3()])
    assert load(tmp_path / "c.pt")["t"] == 3
    resumed = Simulation.resume(tmp_path / "c.pt")
    resumed.run()
    assert torch.equal(resumed.x, whole.x)


def momenta(state) -> list:
    """The :class:`Momentum` states in a rule state."""
    if isinstance(state, Momentum):
        return [state]
    return [] if isinstance(state, torch.Tensor) else [m for s in state for m in momenta(s)]


def test_a_checkpoint_holds_the_rule_state_untyped_and_resumes_it_typed_bit_for_bit(tmp_path):
    cfg = small("dfedavgm")  # momentum buffers carried across rounds
    whole = Simulation(cfg)
    whole.run()

    first = Simulation(cfg.replace(rounds=4))  # stops after round 4 (evaluated there, as whole is)
    first.run(checkpoint=tmp_path / "c.pt")
    assert momenta(first.run_state.rule_state)
    saved = load(tmp_path / "c.pt")
    assert not momenta(saved["rule_state"])  # plain tuples on disk
    resumed = Simulation.resume(tmp_path / "c.pt", cfg)
    resumed.run()
    assert torch.equal(resumed.x, whole.x)
    assert strip_wall(resumed.history.records) == strip_wall(whole.history.records)
    assert momenta(resumed.run_state.rule_state)  # typed again in memory


def test_more_rounds_on_resume_equal_a_longer_run(tmp_path):
    cfg = small("dfedsam-mgs")
    Simulation(cfg).run(checkpoint=tmp_path / "c.pt")
    longer = Simulation.resume(tmp_path / "c.pt", cfg.replace(rounds=7))
    longer.run()
    direct = Simulation(cfg.replace(rounds=7))
    direct.run()
    assert torch.equal(longer.x, direct.x)


def test_resume_into_another_config_is_refused(tmp_path):
    cfg = small("dfedavg")
    Simulation(cfg).run(checkpoint=tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match=r"lr: checkpoint 0.05 vs now 0.1"):
        Simulation.resume(tmp_path / "c.pt", cfg.replace(lr=0.1))
    with pytest.raises(CheckpointError, match="5 rounds done, more than rounds=2"):
        Simulation.resume(tmp_path / "c.pt", cfg.replace(rounds=2))


class Payload:
    """Any object a pickle could carry (and whose loading would run code)."""


def test_checkpoints_never_unpickle_code_and_broken_files_are_refused(tmp_path):
    torch.save({"format": FORMAT, "t": 0, "evil": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load(tmp_path / "evil.pt")
    good = save_atomic({"format": FORMAT, "t": 1, "x": torch.ones(3)}, tmp_path / "good.pt")
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load(tmp_path / "cut.pt")
    save_atomic({"format": "something/else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="expected 'dfl-book/checkpoint/v3'"):
        load(tmp_path / "other.pt")
    save_atomic({"format": "dfl-book/checkpoint/v2"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="written by an older dfl_core; start the run again"):
        load(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load(tmp_path / "missing.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.pt", "evil.pt", "good.pt", "other.pt"]  # no temp files


def test_divergence_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    sim = Simulation(small("dfedavg", rounds=8))

    class NaNInRound5(Hooks):  # a fault: round 5's local models become NaN
        def after_local_train(self, start, trained, clients):
            if sim.t == 4:
                trained.fill_(float("nan"))

    with pytest.raises(DivergenceError) as err:
        sim.run(checkpoint=tmp_path / "c.pt", checkpoint_every=1, hooks=[NaNInRound5()])
    msg = str(err.value)
    assert "client 0" in msg and "round 5" in msg and "lr=0.05" in msg
    assert "last good checkpoint (round 4)" in msg and "c.pt" in msg
    state = load(tmp_path / "c.pt")
    assert state["t"] == 4 and torch.isfinite(state["state"]["x"]).all()


def test_dispfl_annealing_over_the_run_refuses_a_resume_with_more_rounds(tmp_path):
    cfg = small("dispfl", dispfl_anneal_rounds=None, rounds=2)  # the cosine spans `rounds`
    Simulation(cfg).run(checkpoint=tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="DisPFL anneals its masks over rounds=2 .* cannot change to 4"):
        Simulation.resume(tmp_path / "c.pt", config=cfg.replace(rounds=4))
    Simulation.resume(tmp_path / "c.pt", config=cfg)  # the same horizon resumes


def test_parameters_whose_sum_overflows_are_divergence_not_a_crash():
    sim = Simulation(small("dfedavg", rounds=3))

    class HugeInRound2(Hooks):  # every entry finite, but their sum overflows float32
        def after_local_train(self, start, trained, clients):
            if sim.t == 1:
                trained.fill_(3e38)

    with pytest.raises(DivergenceError, match="grew so large that their sum overflows in round 2"):
        sim.run(hooks=[HugeInRound2()])


def test_cli_reports_divergence_with_exit_code_3(tmp_path, capsys):
    from dfl_core.cli import main

    code = main(
        [
            "run",
            "--algorithms",
            "dfedavg",
            "--seeds",
            "0",
            "--num-clients",
            "4",
            "--rounds",
            "20",
            "--lr",
            "1e6",
            "--lr-decay",
            "1",
            "--device",
            "cpu",
            "--no-plot",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 3 and ("diverged" in err or "NaN" in err)
    assert "lr=1000000.0" in err


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_same_seed_same_results_and_prefixes_do_not_depend_on_rounds_or_eval_every(algorithm):
    a, b = Simulation(small(algorithm)), Simulation(small(algorithm))
    a.run(), b.run()
    assert torch.equal(a.x, b.x) and strip_wall(a.history.records) == strip_wall(b.history.records)
    dense = Simulation(small(algorithm, rounds=3, eval_every=1))  # fewer rounds, evaluated every round
    dense.run()
    by_round = {r["round"]: r for r in strip_wall(dense.history.records)}
    for r in strip_wall(a.history.records):
        if r["round"] in by_round:
            assert r == {**by_round[r["round"]], "lr": r["lr"]}  # lr recorded is η of the last round run
    other_seed = Simulation(small(algorithm, seed=1))
    other_seed.run()
    assert not torch.equal(other_seed.x, a.x)


# ---------------------------------------------------------------- a real SIGKILL
# No sleeps and no deadlines that a busy machine could miss: the child announces on stdout
# when it has reached the state to be killed in, waits there, and only then gets SIGKILL.
# HANG_GUARD_S only ends a child that never gets there (then the test fails, saying so).
HANG_GUARD_S = 300
CLI_ARGS = [
    "run",
    "--algorithms",
    "dfedsam",
    "--seeds",
    "0",
    "--num-clients",
    "8",
    "--rounds",
    "60",
    "--eval-every",
    "5",
    "--device",
    "cpu",
    "--no-plot",
    "--no-progress",
    "--checkpoint-every",
    "1",
]
CLI = [sys.executable, "-m", "dfl_core", *CLI_ARGS]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}

# The CLI, with every checkpoint save going through a hook that, once round KILL_AT is safely
# on disk, prints a line and blocks: the run is mid-way (round KILL_AT of 60) when it is killed.
STOP_AFTER_SAVE = """
import sys
import dfl_core.checkpoint as ckpt
from dfl_core.cli import main

KILL_AT = int(sys.argv[1])
save = ckpt.save_atomic

def save_then_wait(state, path):
    saved = save(state, path)
    if state["t"] == KILL_AT:
        print(f"saved round {KILL_AT}", flush=True)
        sys.stdin.read()                    # blocks until SIGKILL: the test never writes
    return saved

ckpt.save_atomic = save_then_wait
sys.exit(main(sys.argv[2:]))
"""

# A checkpoint write that is killed half-way: the new state's bytes are partly in the
# temporary file, fsync and rename have not happened.
STOP_MID_WRITE = """
import sys
import torch
from dfl_core.checkpoint import FORMAT, save_atomic, write_atomic

path = sys.argv[1]
save_atomic({"format": FORMAT, "t": 1, "x": torch.zeros(1000)}, path)

def half_then_wait(f):
    f.write(b"\\x80" * 4096)               # the start of a new file ...
    f.flush()
    print("half written", flush=True)
    sys.stdin.read()                        # ... then SIGKILL

write_atomic(path, half_then_wait)
"""


def _spawn(code: str, *args: str, stderr_path: Path) -> subprocess.Popen:
    with stderr_path.open("w") as stderr:  # (a file, not a pipe that could fill and block)
        return subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def _wait_for_line(proc: subprocess.Popen, expected: str, stderr_path: Path) -> None:
    """Read the child's stdout until it prints ``expected``; fail if it exits (or hangs) first."""
    guard = threading.Timer(HANG_GUARD_S, proc.kill)
    guard.start()
    try:
        for line in proc.stdout:
            if line.strip() == expected:
                return
    finally:
        guard.cancel()
    code = proc.wait()
    pytest.fail(
        f"the child ended with code {code} without printing {expected!r}"
        + (f" (stopped by the {HANG_GUARD_S} s hang guard)" if code == -signal.SIGKILL else "")
        + f"; its stderr:\n{stderr_path.read_text()[-3000:]}"
    )


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
    proc.stdin.close()
    proc.stdout.close()


def _results(path: Path) -> list[dict]:
    runs = json.loads(path.read_text())["runs"]
    return [dict(config=r["config"], history=strip_wall(r["history"])) for r in runs]


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    whole = subprocess.run(
        CLI + ["--out", str(tmp_path / "whole")], env=ENV, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert whole.returncode == 0, whole.stderr

    killed = tmp_path / "killed"
    proc = _spawn(STOP_AFTER_SAVE, "10", *CLI_ARGS, "--out", str(killed), stderr_path=tmp_path / "stderr.txt")
    _wait_for_line(proc, "saved round 10", tmp_path / "stderr.txt")
    _kill(proc)
    state = load(killed / "checkpoints" / "dfedsam-seed0.pt")  # readable: never half-written
    assert state["t"] == 10 and [r["round"] for r in state["history"]] == [0, 5, 10]
    assert not (killed / "results.json").exists()  # the only run was not finished
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == ["dfedsam-seed0.pt"]

    rerun = subprocess.run(
        CLI + ["--out", str(killed)], env=ENV, capture_output=True, text=True, timeout=HANG_GUARD_S
    )  # without --resume: refused, nothing lost
    assert rerun.returncode == 2 and "--resume" in rerun.stderr, rerun.stderr
    resumed = subprocess.run(
        CLI + ["--out", str(killed), "--resume"], env=ENV, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _results(killed / "results.json") == _results(tmp_path / "whole" / "results.json")
    assert not (killed / "checkpoints").exists()


def test_sigkill_in_the_middle_of_a_checkpoint_write_leaves_the_previous_one(tmp_path):
    path = tmp_path / "run.pt"
    proc = _spawn(STOP_MID_WRITE, str(path), stderr_path=tmp_path / "stderr.txt")
    _wait_for_line(proc, "half written", tmp_path / "stderr.txt")
    _kill(proc)
    state = load(path)  # the previous checkpoint, whole
    assert state["t"] == 1 and torch.equal(state["x"], torch.zeros(1000))
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("run.pt", "stderr.txt")]
    assert len(leftovers) == 1 and leftovers[0].startswith("run.pt.") and leftovers[0].endswith(".tmp")


def test_cli_resume_skips_finished_runs(tmp_path, capsys):
    from dfl_core.cli import main

    args = [
        "run",
        "--algorithms",
        "dfedavg,dfedsam",
        "--seeds",
        "0",
        "--num-clients",
        "4",
        "--rounds",
        "2",
        "--device",
        "cpu",
        "--no-plot",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    first = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert main(args + ["--resume"]) == 0  # nothing to do: both runs are reused as they are
    again = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["wall_time_s"] for r in again] == [r["wall_time_s"] for r in first]
    assert main(args + ["--resume", "--checkpoint-every", "0"]) == 2
    assert "--checkpoint-every must be >= 1" in capsys.readouterr().err


def test_the_full_profile_checkpoints_and_resumes_every_run(tmp_path, monkeypatch):
    from dfl_book.profiles import PROFILES

    monkeypatch.setenv("DFL_CHECKPOINTS", str(tmp_path))
    full, fast = PROFILES["full"], PROFILES["fast"]
    cfg = small("dfedsam", rounds=3)
    first = full.run(cfg)
    files = list(tmp_path.glob("dfedsam-*.pt"))
    assert len(files) == 1 and load(files[0])["t"] == 3
    again = full.run(cfg)  # a rerun loads the finished run instead of training
    assert again.records == first.records  # wall times included: nothing was recomputed
    longer = full.run(cfg.replace(rounds=4))  # another config: another checkpoint
    assert len(list(tmp_path.glob("dfedsam-*.pt"))) == 2 and longer.final["round"] == 4
    assert strip_wall(fast.run(cfg).records) == strip_wall(first.records)  # fast: same numbers, no files
    assert len(list(tmp_path.glob("*.pt"))) == 2
