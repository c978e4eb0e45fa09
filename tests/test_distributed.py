"""The distributed backend: 4 gloo processes on loopback give the simulator's parameters, and survive faults.

Equality: same config and seed, ``full_batch=True`` and ``dtype="float64"``:
the final parameters of every client agree with :class:`Simulation` to 1e-10
(DFedAvg, DFedSAM, DFedSAM-MGS on a ring and on a time-varying random graph,
plus the complete graph's all_gather path, quantized DFedAvgM and stochastic
mini-batches). Compressed gossip (``quant_bits``: public copies, CHOCO) on 2
processes equals it too, sends only packed levels and scales (its bytes are the
bits the simulator charges, up to the padding of each message's last byte) and
resumes from a mid-run checkpoint. Faults: a killed or frozen rank stops the
others within the timeout, naming the rank and the round; the per-rank
checkpoints resume to the uninterrupted result.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dataclasses

import pytest
import torch

from dfl_core import ALGORITHMS, Config, Simulation, read_results
from dfl_core.config import ConfigError
from dfl_core.distributed import GossipPlan, block_of, load_final_params, private_data
from dfl_core.distributed.exchange import Exchange, PeerFailure, decode_pieces, wire_pieces
from dfl_core.distributed.rank import distributed_algorithms
from dfl_core.distributed.cli import torchrun_command
from dfl_core.distributed.launch import config_args, free_port, run_configs, spawn
from dfl_core.engine import federated_data
from dfl_core.operators import encode, message_bits, quantize
from dfl_core.topology import make_topology

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
TINY = dict(
    dataset="digits",
    train_size=200,
    model="2nn",
    num_clients=8,
    rounds=3,
    full_batch=True,
    dtype="float64",
    device="cpu",
    lr=0.05,
    eval_every=3,
)
NPROC = 4


def tiny(algorithm: str, topology: str, **changes) -> Config:
    return Config(algorithm=algorithm, topology=topology, **{**TINY, **changes})


def cli_args(cfg: Config, out: Path, *extra: str) -> list[str]:
    """The command-line options that give ``cfg`` (:func:`config_args`), its output folder and ``extra``."""
    return [*config_args(cfg), "--out", str(out), "--no-progress", *extra]


def simulated(cfg: Config) -> torch.Tensor:
    sim = Simulation(cfg)
    sim.run()
    return sim.x


# ------------------------------------------------------------------ units
def test_blocks_need_a_process_count_dividing_m():
    assert block_of(1, 4, 8).tolist() == [2, 3]
    with pytest.raises(
        ConfigError,
        match=r"processes \(3\) must divide num_clients=8; allowed process "
        r"counts: 1, 2, 4, 8",
    ):
        block_of(0, 3, 8)


def test_a_rank_keeps_only_its_own_clients_samples():
    cfg = tiny("dfedavg", "ring")
    full = federated_data(cfg)
    own = block_of(2, NPROC, 8)
    mine = private_data(full, own)
    for split, full_split in ((mine.train, full.train), (mine.test, full.test)):
        assert len(split.x) == int(full_split.counts[own].sum()) < len(full_split.x)
        assert split.counts[own].tolist() == full_split.counts[own].tolist()
        assert int(split.counts.sum()) == int(split.counts[own].sum())  # others: no samples
        for i in own.tolist():  # same samples, same order
            n = int(full_split.counts[i])
            assert torch.equal(split.x[split.index[i, :n]], full_split.x[full_split.index[i, :n]])
            assert torch.equal(split.y[split.index[i, :n]], full_split.y[full_split.index[i, :n]])
    assert len(mine.dataset.x_train) == len(mine.train.x) and len(mine.dataset.x_test) == len(mine.test.x)


def test_ring_plan_sends_only_the_boundary_rows_and_the_complete_graph_gathers():
    W = make_topology("ring", 8).matrix(0).W
    plan = GossipPlan(W, 1, NPROC, torch.device("cpu"), torch.float64)  # rank 1 holds clients 2, 3
    assert not plan.collective
    assert {s: v.tolist() for s, v in plan.sends.items()} == {0: [0], 2: [1]}  # client 2 left, client 3 right
    assert {s: v.tolist() for s, v in plan.receives.items()} == {0: [1], 2: [4]}
    assert GossipPlan(make_topology("complete", 8).matrix(0).W, 1, NPROC, "cpu", torch.float64).collective


@pytest.mark.parametrize("mode", ["dense", "rows", "csr"])
def test_a_plan_mixes_its_own_rows_in_every_mode(mode):
    W = make_topology("ring", 8).matrix(0).W
    plan = GossipPlan(W, 0, 2, torch.device("cpu"), torch.float64, mode=mode)  # rows 0..3 and neighbours 4, 7
    assert plan.columns.tolist() == plan.column_ids.tolist() == [0, 1, 2, 3, 4, 7]
    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mixed = plan.mix(x[plan.column_ids])
    assert mixed.shape == (4, 5) and torch.allclose(mixed, torch.as_tensor(W[:4]) @ x, atol=1e-15)


@pytest.mark.parametrize("dtype, scale_bytes", [(torch.float32, 4), (torch.float64, 8)])
def test_what_travels_is_packed_levels_and_a_scale_per_row(dtype, scale_bytes):
    """A row of d coordinates at b bits: ⌈d·b/8⌉ bytes of levels and the scale in the working dtype."""
    v = torch.randn(3, 101, generator=torch.Generator().manual_seed(1), dtype=dtype)
    for bits in (3, 8, 13):
        pieces = wire_pieces(encode(v, bits), dtype)
        assert [p.dtype for p in pieces] == [torch.uint8, dtype]
        assert sum(p.numel() * p.element_size() for p in pieces) == 3 * (math.ceil(101 * bits / 8) + scale_bytes)
        assert 0 <= 8 * math.ceil(101 * bits / 8) - (message_bits(101, bits) - 32) < 8  # padding only
        assert torch.equal(decode_pieces(pieces, bits, 101, dtype), quantize(v, bits))


def test_the_algorithms_a_rank_runs_are_those_that_declare_it(monkeypatch):
    assert distributed_algorithms() == ["dpsgd", "dfedavg", "dfedavgm", "dfedavgm-q", "dfedsam", "dfedsam-mgs"]
    assert not ALGORITHMS["dispfl"].distributable and not ALGORITHMS["fedavg"].distributable
    monkeypatch.setitem(ALGORITHMS, "mine", dataclasses.replace(ALGORITHMS["dfedavg"], name="mine"))
    monkeypatch.setitem(
        ALGORITHMS, "other", dataclasses.replace(ALGORITHMS["dfedavg"], name="other", distributable=False)
    )
    assert distributed_algorithms()[-1] == "mine" and "other" not in distributed_algorithms()


# ------------------------------------------------------------ equality
EQUALITY = {
    **{f"{a}-{g}": tiny(a, g) for a in ("dfedavg", "dfedsam", "dfedsam-mgs") for g in ("ring", "random-as-coded")},
    "dfedavg-complete": tiny("dfedavg", "complete"),  # all_gather path
    "dfedavgm-q-ring": tiny("dfedavgm-q", "ring", quant_bits=8),  # integer payloads
    "dfedsam-stochastic": tiny("dfedsam", "random-as-coded", full_batch=False, batch_size=8),
}


def test_four_processes_equal_the_simulator(tmp_path):
    """One process group runs every config in turn (one start-up for all); each must equal the simulator."""
    configs = {
        name: cfg.replace(num_neighbors=2) if cfg.params.topology == "random-as-coded" else cfg
        for name, cfg in EQUALITY.items()
    }
    run_configs(NPROC, configs, tmp_path, env=ENV)
    for name, cfg in configs.items():
        assert make_topology(cfg.params.topology, 8, **cfg.topology_options()).time_varying == (
            cfg.params.topology == "random-as-coded"
        )
        gap = float((load_final_params(tmp_path / name) - simulated(cfg)).abs().max())
        assert gap < 1e-10, (name, gap)
    # bytes each rank handed to send in the last round (from its checkpoint): the ring sends two rows,
    # float64 for DFedAvg, int8 levels and one float64 scale each for 8-bit quantized DFedAvgM
    d = Simulation(configs["dfedavg-ring"]).model.d
    sent = {
        name: [
            torch.load(f, weights_only=True)["counters"]["bytes_last_round"]
            for f in sorted((tmp_path / name / "checkpoints").glob("rank*/round000003.pt"))
        ]
        for name in ("dfedavg-ring", "dfedavgm-q-ring")
    }
    assert sent == {"dfedavg-ring": [2 * d * 8] * NPROC, "dfedavgm-q-ring": [2 * (d * 1 + 8)] * NPROC}
    results = read_results(tmp_path / "dfedavg-complete" / "results.json")[0]
    assert results.final["rank_bytes_last_round"] == [(NPROC - 1) * 2 * d * 8] * NPROC  # all_gather
    assert results.execution == {
        "device": "cpu",
        "dtype": "float64",
        "precision": "float32",  # how it ran
        "forward_strategy": Simulation(configs["dfedavg-complete"]).model.strategy,
        "client_chunk": results.execution["client_chunk"],
        "world_size": NPROC,
        "test_set": "union of the clients' test splits",  # what differs from the simulator's record, named
        "transmissions": "rows sent between ranks",
    }
    # one record builder and one lr schedule: the simulator's keys (plus each rank's bytes) and its lr
    sim = Simulation(configs["dfedavg-ring"])
    sim.run()
    ranks, simulator = read_results(tmp_path / "dfedavg-ring" / "results.json")[0].records, sim.history.records
    assert [sorted(r) for r in ranks] == [sorted([*s, "rank_bytes_sent", "rank_bytes_last_round"]) for s in simulator]
    assert [r["lr"] for r in ranks] == [s["lr"] for s in simulator] == [0.05, 0.05 * 0.998**2]
    for r, s in zip(ranks, simulator):
        assert r["round"] == s["round"] and r["gen_error"] == r["train_acc"] - r["test_acc"]
        assert r["client_train_loss"] == pytest.approx(s["client_train_loss"], abs=1e-10)
        assert r["bytes_sent"] == sum(r["rank_bytes_sent"]) == r["bits_sent"] // 8


def test_torchrun_cli_equals_the_simulator_and_counts_the_ring_bytes(tmp_path):
    cfg = tiny("dfedsam-mgs", "ring", gossip_steps=2)
    # an earlier run's files, of a later round and of a rank this run does not have: --overwrite removes them
    stale = [tmp_path / "results.json", *(tmp_path / "checkpoints" / f"rank{r}" / "round000100.pt" for r in (0, 7))]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("an earlier run")
    done = subprocess.run(
        torchrun_command(NPROC, cli_args(cfg, tmp_path, "--overwrite"), port=free_port()),
        cwd=ROOT,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not any(p.exists() for p in stale[1:])
    assert float((load_final_params(tmp_path) - simulated(cfg)).abs().max()) < 1e-10
    final = read_results(tmp_path / "results.json")[0].final
    d = Simulation(cfg).model.d
    # each rank holds 2 clients of the ring; per gossip step it sends one row to each neighbouring rank
    assert final["rank_bytes_last_round"] == [2 * 2 * d * 8] * NPROC
    assert final["rank_bytes_sent"] == [3 * 2 * 2 * d * 8] * NPROC
    assert "bytes sent per round by rank" in done.stdout


# ------------------------------------------------ compressed gossip (public copies)
COMPRESSED_NPROC = 2
COMPRESSED = {
    "dfedavg-4bit": tiny("dfedavg", "ring", quant_bits=4),
    "dfedsam-mgs-8bit-stochastic": tiny("dfedsam-mgs", "ring", gossip_steps=2, quant_bits=8, quant_stochastic=True),
    "dfedavg-complete-3bit": tiny(
        "dfedavg",
        "complete",
        quant_bits=3,
        same_init=False,  # all_gather; x̂⁰ = 0
        consensus_step=0.5,
    ),
    "dfedavgm-q-differences-only": tiny("dfedavgm-q", "ring", quant_bits=5, quant_mixing="differences-only"),
}
#: float32 (a 4-byte scale, as message_bits counts it); m = 2 puts every message on the wire, m = 8 on a ring
#: only the rows at the blocks' edges; d·3 is not a multiple of 8 for the 2NN (d = 55210), d·8 is
BYTES = {
    f"bytes-m{m}-{b}bit": tiny("dfedavg", "ring", num_clients=m, quant_bits=b, dtype="float32")
    for m in (2, 8)
    for b in (3, 8)
}


def test_compressed_gossip_over_two_processes_equals_the_simulator_and_sends_what_it_charges(tmp_path):
    """Same messages as the simulator (stochastic rounding slices its draw), so the same parameters; only
    the encoded messages travel, so the bytes are the simulator's bits charged, up to each message's padding."""
    run_configs(COMPRESSED_NPROC, {**COMPRESSED, **BYTES}, tmp_path, env=ENV)
    for name, cfg in {**COMPRESSED, **BYTES}.items():
        gap = float((load_final_params(tmp_path / name) - simulated(cfg)).abs().max())
        assert gap < (1e-10 if cfg.dtype == "float64" else 1e-6), (name, gap)
    exact = tiny("dfedavg", "ring")  # the compression changed the run
    assert float((simulated(COMPRESSED["dfedavg-4bit"]) - simulated(exact)).abs().max()) > 1e-4
    for name, cfg in BYTES.items():
        sim = Simulation(cfg)
        sim.run()
        charged, d, b = sim.history.records[-1], sim.model.d, cfg.params.quant_bits
        # a message is d·b + 32 bits (message_bits); on the wire its levels fill whole bytes, ⌈d·b/8⌉
        padding = 8 * math.ceil(d * b / 8) - d * b  # bits per message, 0..7
        assert (padding == 0) == (b == 8) and padding < 8
        counters = [
            torch.load(f, weights_only=True)["counters"]
            for f in sorted((tmp_path / name / "checkpoints").glob("rank*/round000003.pt"))
        ]
        assert len(counters) == COMPRESSED_NPROC
        for c in counters:  # every rank: bytes · 8 = rows sent · (message_bits + padding)
            assert 8 * c["bytes_sent"] == c["rows_sent"] * (message_bits(d, b) + padding), (name, c)
        final = read_results(tmp_path / name / "results.json")[0].final
        assert final["bytes_sent"] == sum(c["bytes_sent"] for c in counters)
        if cfg.num_clients == COMPRESSED_NPROC:  # one client per rank: every message the simulator counts travels
            assert final["transmissions"] == charged["transmissions"] == 2 * cfg.rounds
            assert 8 * final["bytes_sent"] == charged["bits_sent"] + charged["transmissions"] * padding
            if d * b % 8 == 0:
                assert 8 * final["bytes_sent"] == charged["bits_sent"]
        else:  # ring of 8 on 2 ranks: 2 edge rows per rank and round
            assert [c["rows_sent"] for c in counters] == [2 * cfg.rounds] * COMPRESSED_NPROC


def test_compressed_gossip_resumes_from_a_mid_run_checkpoint(tmp_path):
    """Each rank checkpoints the rows of x̂ it holds; resumed from round 3, the run ends as it did uninterrupted."""
    cfg = tiny(
        "dfedsam-mgs",
        "ring",
        rounds=4,
        eval_every=2,
        gossip_steps=2,
        quant_bits=4,
        quant_stochastic=True,
        same_init=False,
    )

    def launch(*extra: str) -> list[tuple[int, str]]:
        procs = spawn(
            COMPRESSED_NPROC,
            cli_args(cfg, tmp_path, "--checkpoint-every", "1", *extra),
            env=ENV,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        return [(p.wait(timeout=300), p.stderr.read()) for p in procs]

    assert [code for code, _ in launch()] == [0] * COMPRESSED_NPROC
    uninterrupted = load_final_params(tmp_path)
    rank0 = torch.load(tmp_path / "checkpoints" / "rank0" / "round000003.pt", weights_only=True)
    assert rank0["gossip_state"]["rows"] == [0, 1, 2, 3, 4, 7]  # its clients and their neighbours
    assert rank0["gossip_state"]["values"].shape == (6, Simulation(cfg).model.d)
    for f in (tmp_path / "checkpoints").glob("rank*/round000004.pt"):  # as if stopped after round 3
        f.unlink()
    (tmp_path / "results.json").unlink()
    # without its public copies a checkpoint cannot continue compressed gossip: refused, not guessed
    mid = sorted((tmp_path / "checkpoints").glob("rank*/round000003.pt"))
    originals = {f: f.read_bytes() for f in mid}
    for f in mid:
        saved = torch.load(f, weights_only=True)
        saved["gossip_state"] = None
        torch.save(saved, f)
    refused = launch("--resume")
    assert all(code == 2 and "holds no public copies" in err for code, err in refused), refused
    for f, raw in originals.items():
        f.write_bytes(raw)
    assert [code for code, _ in launch("--resume")] == [0] * COMPRESSED_NPROC
    assert float((load_final_params(tmp_path) - uninterrupted).abs().max()) < 1e-10
    assert float((uninterrupted - simulated(cfg)).abs().max()) < 1e-10
    assert read_results(tmp_path / "results.json")[0].rounds == [0, 2, 4]


# ---------------------------------------------------------------- faults
def _survivors(procs, dead: int, limit_s: float) -> tuple[dict[int, tuple[int, str]], float]:
    """The exit code and stderr of every rank but ``dead``, and how long they took to exit."""
    start = time.monotonic()
    out = {}
    for r, p in enumerate(procs):
        if r == dead:
            continue
        _, err = p.communicate(timeout=limit_s)
        out[r] = (p.returncode, err)
    return out, time.monotonic() - start


def test_a_killed_rank_stops_the_others_and_the_checkpoints_resume(tmp_path):
    cfg = tiny("dfedavg", "ring", rounds=5)
    args = cli_args(cfg, tmp_path, "--timeout-s", "10", "--checkpoint-every", "1")
    procs = spawn(
        NPROC, args, env={**ENV, "DFL_DISTRIBUTED_FAULT": "kill:2:3"}, cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    assert procs[2].wait(timeout=300) == -signal.SIGKILL
    survivors, waited = _survivors(procs, 2, limit_s=60)
    assert waited < 10 + 5, waited  # within the timeout (plus the watchdog's grace)
    assert all(code == 4 for code, _ in survivors.values()), survivors
    messages = "".join(err for _, err in survivors.values())
    for r in survivors:
        assert f"error: rank {r}: round" in messages, messages
    assert "round 3" in messages and "lost rank 2" in messages, messages
    assert not (tmp_path / "results.json").exists()
    # resume: every rank has round 2 (barrier before each checkpoint), and the result is the uninterrupted one
    assert all(
        torch.load(f, weights_only=True)["gossip_state"] is None  # exact gossip keeps no state
        for f in (tmp_path / "checkpoints").glob("rank*/round*.pt")
    )
    procs = spawn(NPROC, [*args, "--resume"], env=ENV, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert [p.wait(timeout=300) for p in procs] == [0] * NPROC, [p.stderr.read() for p in procs]
    assert float((load_final_params(tmp_path) - simulated(cfg)).abs().max()) < 1e-10
    assert read_results(tmp_path / "results.json")[0].rounds == [0, 3, 5]


def test_a_peer_lost_while_posting_is_a_peer_failure():
    """gloo can refuse to put an operation on the wire at once when a peer has gone (connection reset): that is
    the same failure as one seen while waiting (exit 4, the peer named), not a crash of the program (exit 1)."""
    exchange = Exchange(rank=0, world_size=4, timeout_s=1.0)
    exchange.round = 3

    def post():
        raise RuntimeError("[gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:20688: Connection reset by peer.")

    with pytest.raises(PeerFailure, match=r"round 3: gossip with ranks \[1, 3\]: lost rank 1 \(.*Connection reset"):
        exchange.posted(post, "gossip with ranks [1, 3]", peer=1)
    with pytest.raises(PeerFailure, match="round 3: evaluation: lost a rank of the collective"):
        exchange.posted(post, "evaluation")
    assert exchange.posted(lambda: "work", "evaluation") == "work"


def test_a_frozen_rank_times_out_the_others_naming_it(tmp_path):
    cfg = tiny("dfedavg", "complete", rounds=4)
    procs = spawn(
        NPROC,
        cli_args(cfg, tmp_path, "--timeout-s", "3"),
        env={**ENV, "DFL_DISTRIBUTED_FAULT": "stall:1:2"},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        survivors, _ = _survivors(procs, 1, limit_s=120)
        assert all(code == 4 for code, _ in survivors.values()), survivors
        for r, (_, err) in survivors.items():
            assert f"error: rank {r}: round 2" in err and "rank 1" in err, err
    finally:
        procs[1].kill()  # it is stopped (SIGSTOP), not dead
        procs[1].wait()


# -------------------------------------------------------------- bad input
def as_rank_0_of_4(*options: str) -> subprocess.CompletedProcess:
    """``python -m dfl_core.distributed OPTIONS`` as rank 0 of 4, without a launcher: what it does before it would
    join a process group."""
    return subprocess.run(
        [sys.executable, "-m", "dfl_core.distributed", *options],
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **ENV, "RANK": "0", "WORLD_SIZE": "4"},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "options, message",
    [
        (["--num-clients", "6"], "the number of processes (4) must divide num_clients=6"),
        (["--backend", "nccl"], "unknown backend 'nccl'; allowed: gloo"),
        (["--algorithm", "fedavg"], "algorithm 'fedavg' is centralized"),
        (
            ["--algorithm", "dispfl"],
            "algorithm 'dispfl' is not run over processes; the distributed backend runs "
            "dpsgd, dfedavg, dfedavgm, dfedavgm-q, dfedsam, dfedsam-mgs",
        ),
        (["--timeout-s", "0"], "--timeout-s must be > 0"),
        (["--timeout-s", "inf"], "--timeout-s must be > 0 and finite (seconds, at most 604800: a week), got inf"),
        (["--timeout-s", "nan"], "--timeout-s must be > 0 and finite"),
    ],
)
def test_bad_input_is_refused_before_any_process_group(options, message):
    done = as_rank_0_of_4(*options)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_an_out_that_is_a_file_or_unwritable_is_refused_before_any_process_group(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for out, message in [
        (tmp_path / "notes.txt", "is a file; give a folder"),
        (tmp_path / "notes.txt" / "run", "cannot write --out"),
    ]:
        done = as_rank_0_of_4("--out", str(out), "--timeout-s", "5")
        assert done.returncode == 2 and message in done.stderr, done.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "earlier, message",
    [
        ("results.json", "pass --out DIR for a new folder, --overwrite to replace them, or --resume"),
        (
            "checkpoints/rank1/round000010.pt",
            "pass --resume to continue it with the same options, --out DIR for a new "
            "folder, or --overwrite to start afresh",
        ),
    ],
)
def test_a_folder_an_earlier_run_used_is_refused_without_resume_or_overwrite(tmp_path, earlier, message):
    (tmp_path / earlier).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / earlier).write_text("an earlier run")
    for extra, expected in [
        ([], message),
        (["--resume", "--overwrite"], "--resume and --overwrite contradict each other"),
    ]:
        done = as_rank_0_of_4("--out", str(tmp_path), *extra)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert (tmp_path / earlier).exists()


def test_without_a_launcher_it_says_how_to_launch():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run(
        [sys.executable, "-m", "dfl_core.distributed"],
        cwd=ROOT,
        timeout=120,
        env={**env, **ENV},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "torchrun --nproc_per_node=N -m dfl_core.distributed" in done.stderr
