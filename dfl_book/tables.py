"""Rerun a seed paper's table: ``python -m dfl_core table NAME --profile fast|showcase|full``.

A table is a paper preset (:mod:`dfl_book.presets`): its rows are algorithms,
its columns settings. Under ``full`` every cell runs the preset's config as it
is (the papers' scale, for a GPU). Under ``fast`` every cell runs a small copy
of it (:func:`fast_config`): the bundled 8×8 digits (1438 training images, about 72
per client; no download), the 2NN, 20 clients, 30 rounds (:data:`FAST_ROUNDS` for the
exceptions), batch 32, with the table's own algorithms, partitions,
topologies, participation *fractions*, local *epochs* and learning rates.
Under ``showcase`` every cell runs at the book's showcase scale
(:func:`showcase_config`): all of Fashion-MNIST, the 2NN, 100 clients, 100
rounds (600 for centralized FL), 5 local steps per round (the table's local
epochs kept only as ratios between its columns), with the table's own
algorithms, partitions, topologies, participation fractions and learning rates.

Each cell is run for every seed and reported as mean ± std of the test accuracy
(%) of the global (average) model: the mean of its last 5 evaluations (at the
fast scale, which evaluates only at the end, the last one). :func:`write_table` writes a
CSV and a Markdown file whose header lines record the command, the seeds, the
versions and the machine; where the paper's table is transcribed in
:mod:`theory.tables`, the paper's number stands beside ours.

Two rows are compared seed by seed (:mod:`dfl_book.stats`): runs with the same
seed share the initial model, the data split and the mini-batches, so the
per-seed difference better − worse cancels what the seed changes in both. Its
95% t-interval over the seeds gives the verdict: REPRODUCED (above 0, the
paper's direction), REVERSED (below 0) or UNRESOLVED (contains 0; the
detectable effect says how large a difference these seeds could have shown).
:func:`orderings` compares every pair of rows the paper orders in a column,
:func:`check_claims` the papers' named claims (:data:`CLAIMS`);
:func:`write_table` adds both to the Markdown and writes them to
``NAME-PROFILE[-TAG]-verdicts.csv``. A table tests many comparisons, so each
is also judged after Holm's correction over its family: the table's orderings
form one family, its named claims another.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dfl_core.checkpoint import write_atomic
from dfl_core.config import Config, ConfigError

from .presets import PRESETS, Preset, get_preset
from .stats import (
    MIN_SEEDS,
    VERDICTS,
    PairedComparison,
    compare_paired,
    holm,
    holm_adjust,
    markdown_table,
    p_value,
    signed,
    summarize,
)

__all__ = [
    "TABLE_PROFILES",
    "FAST",
    "FAST_ROUNDS",
    "fast_config",
    "SHOWCASE",
    "showcase_config",
    "TableResult",
    "run_table",
    "write_table",
    "read_table",
    "paper_value",
    "DISPLAY_NAMES",
    "local_work",
    "epochs_per_round",
    "forward_flops",
    "full_scale_cost",
    "ASSUMED_GPU_TFLOPS",
    "Claim",
    "CLAIMS",
    "orderings",
    "check_claims",
    "verdicts_markdown",
    "to_markdown",
    "read_result",
    "cpu_name",
]

TABLE_PROFILES = ("fast", "showcase", "full")

#: The fast scale: the book's ``fast`` profile (:data:`dfl_book.profiles.PROFILES`) on the digits,
#: whose 2NN is a quarter of the Fashion-MNIST one, so that every table runs in minutes on a CPU.
FAST = dict(dataset="digits", train_size=None, test_size=None, model="2nn", num_clients=20, rounds=30, batch_size=32)

#: Tables whose fast copy needs more rounds than ``FAST["rounds"]``: FedGF's table trains one epoch per
#: round at lr 0.01 for 10,000 rounds (public code), and after 30 such rounds on 1–4 of 20 clients every
#: method is still far from trained (FedAvg 13–59% on the digits), so its fast copy runs 300.
FAST_ROUNDS = {"fedgf-table1-cifar10": 300, "fedgf-table1-cifar100": 300}

#: How the papers' tables spell the algorithms.
DISPLAY_NAMES = {
    "fedavg": "FedAvg",
    "fedavgm": "FedAvgM",
    "fedprox": "FedProx",
    "scaffold": "SCAFFOLD",
    "feddyn": "FedDyn",
    "fedcm": "FedCM",
    "mimelite": "MimeLite",
    "fedsam": "FedSAM",
    "fedasam": "FedASAM",
    "mofedsam": "MoFedSAM",
    "fedsmoo": "FedSMOO",
    "fedgamma": "FedGAMMA",
    "fedgf": "FedGF",
    "fedrobust": "FedRobust",
    "dpsgd": "D-PSGD",
    "dfedavg": "DFedAvg",
    "dfedavgm": "DFedAvgM",
    "dfedavgm-q": "Q-DFedAvgM",
    "dfedsam": "DFedSAM",
    "dfedsam-mgs": "DFedSAM-MGS",
    "dispfl": "DisPFL",
}


def _steps_per_epoch(cfg: Config) -> int:
    """⌈n/B⌉, the steps of one local epoch of ``cfg``, with n from the one definition of a client's samples,
    :meth:`Config.samples_per_client` (the dataset entry's declared train size, or the subset's, over m)."""
    return math.ceil(cfg.samples_per_client() / cfg.batch_size)


def fast_config(preset: Preset, algorithm: str, setting: str, **changes) -> Config:
    """The preset's cell at the fast scale (see the module docstring).

    Local steps keep the cell's local *epochs*: K_fast = E · ceil(n_fast / B_fast)
    with E = K_full / ceil(n_full / B_full); D-PSGD keeps its single step.
    A fixed count of sampled clients keeps its fraction of m.
    """
    full = preset.config(algorithm, setting, **changes)
    m, rounds = FAST["num_clients"], FAST_ROUNDS.get(preset.name, FAST["rounds"])
    fast_data = Config(
        dataset=FAST["dataset"], train_size=FAST["train_size"], num_clients=m, batch_size=FAST["batch_size"]
    )
    small = dict(FAST, rounds=rounds, eval_every=rounds)
    if algorithm != "dpsgd":
        small["local_steps"] = max(1, round(epochs_per_round(full) * _steps_per_epoch(fast_data)))
    if getattr(full.params, "clients_per_round", None) is not None:  # centralized, a count of clients
        small["clients_per_round"] = max(1, round(full.params.clients_per_round * m / full.num_clients))
    return full.replace(**small)


#: The showcase scale: the book's ``showcase`` profile (:data:`dfl_book.profiles.PROFILES`). Local steps per
#: round: ``SHOWCASE_K`` for a table's most frequent local epochs, in proportion for its other columns.
SHOWCASE = dict(dataset="fashion-mnist", train_size=None, test_size=None, model="2nn", num_clients=100, batch_size=32)
SHOWCASE_K = 5
#: Rounds at the showcase scale: centralized FL trains a tenth of the clients a round and needs more of them.
SHOWCASE_ROUNDS = {"decentralized": 100, "centralized": 600}


def _epochs(preset: Preset, algorithm: str, setting: str) -> float:
    full = preset.config(algorithm, setting, **({"fedgf_threshold": NEVER} if algorithm == "fedgf" else {}))
    return epochs_per_round(full)


def showcase_config(preset: Preset, algorithm: str, setting: str, **changes) -> Config:
    """The preset's cell at the showcase scale (see the module docstring); D-PSGD keeps its single step."""
    from dfl_core.algorithms import ALGORITHMS

    full = preset.config(algorithm, setting, **changes)
    rounds = SHOWCASE_ROUNDS[ALGORITHMS[algorithm].kind]
    big = dict(SHOWCASE, rounds=rounds, eval_every=rounds // 20)
    if algorithm != "dpsgd":
        usual = statistics.mode(
            round(_epochs(preset, a, s), 6) for a in preset.algorithms if a != "dpsgd" for s in preset.settings
        )
        big["local_steps"] = max(1, round(SHOWCASE_K * _epochs(preset, algorithm, setting) / usual))
    if getattr(full.params, "clients_per_round", None) is not None:
        big["clients_per_round"] = max(
            1, round(full.params.clients_per_round * SHOWCASE["num_clients"] / full.num_clients)
        )
    return full.replace(**big)


@dataclass
class TableResult:
    """One rerun table: per cell the final test accuracies (%) of every seed."""

    name: str
    profile: str
    seeds: tuple[int, ...]
    cells: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (algorithm, setting) -> accs
    meta: dict[str, str] = field(default_factory=dict)
    # (algorithm, setting) -> (mean, std) as a CSV states them, computed before its values were rounded to 0.01
    stated: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def mean_std(self, algorithm: str, setting: str) -> tuple[float, float]:
        """The cell's mean and std over seeds: those its CSV states, if it was read from one (so that a reprint
        matches the file), else computed from the per-seed values."""
        if (algorithm, setting) in self.stated:
            return self.stated[algorithm, setting]
        values = self.cells[(algorithm, setting)]
        return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


NEVER = 1e30  # a FedGF threshold no drift reaches: c stays 0


def _calibrate_fedgf(
    preset: Preset, make: Callable[[str, str], Config], seed: int, data, pilot_rounds: int | None = None
) -> float:
    """T_D for FedGF, which no source gives: as chapter 09 does, the midpoint of the mean client drift
    D^r (eq. (15)) of a pilot on the most and on the least heterogeneous setting. The pilot is FedGF
    with a threshold never reached (c stays 0, i.e. FedSAM), which records D^r every round; it runs the
    whole schedule, or its first ``pilot_rounds`` rounds."""
    from dfl_core.engine import RoundLog, Simulation

    by_alpha = sorted(preset.settings, key=lambda s: make("fedgf", s, NEVER).alpha)
    drifts = []
    for setting in (by_alpha[0], by_alpha[-1]):
        cfg = make("fedgf", setting, NEVER).replace(seed=seed)
        if pilot_rounds is not None and cfg.rounds > pilot_rounds:
            cfg = cfg.replace(rounds=pilot_rounds, eval_every=pilot_rounds)
        log = RoundLog()
        Simulation(cfg, data(cfg)).run(hooks=[log])
        drifts.append(statistics.fmean(log.series("fedgf_drift")))
    return (drifts[0] + drifts[1]) / 2


def run_table(
    name: str,
    profile: str = "fast",
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    algorithms: tuple[str, ...] | None = None,
    settings: tuple[str, ...] | None = None,
    changes: dict | None = None,
    progress: bool = True,
    command: str | None = None,
    checkpoints: str | Path | None = None,
    jobs: int = 1,
) -> TableResult:
    """Run every cell of preset ``name`` for every seed under ``profile``.

    Every config is built and validated before anything runs. With
    ``checkpoints`` (a folder; under ``full`` by default
    ``checkpoint_dir()/tables/NAME``) each run saves its state there every 10
    rounds and resumes from it, and each finished run's accuracy is recorded
    in ``done.json``, so an interrupted table continues where it stopped and
    finished runs are not recomputed (a run is reused only if its
    config is unchanged). ``jobs`` trains that many runs at once, one process
    and one thread each (the numbers do not depend on it). Each run's CPU time
    is kept with its accuracy, and ``meta["cpu_time_s"]`` sums them over every
    run of the table, however many invocations it took (a run resumed from a
    checkpoint counts from the resume).
    """
    from tqdm import tqdm

    from dfl_core.engine import DataCache

    if name not in PRESETS:
        raise ValueError(f"unknown table {name!r}; allowed: {', '.join(PRESETS)}")
    if profile not in TABLE_PROFILES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {', '.join(TABLE_PROFILES)}")
    if not seeds:
        raise ValueError("give at least one seed")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    preset = PRESETS[name]
    algorithms = tuple(algorithms or preset.algorithms)
    settings = tuple(settings or preset.settings)
    for s in settings:
        if s not in preset.settings:
            raise ValueError(f"table {name!r} has no setting {s!r}; allowed: {', '.join(preset.settings)}")
    extra = dict(changes or {})

    def make(algorithm: str, setting: str, threshold: float | None = None) -> Config:
        own = {"fedgf_threshold": threshold} if algorithm == "fedgf" else {}
        scaled = {"fast": fast_config, "showcase": showcase_config}.get(profile)
        cfg = scaled(preset, algorithm, setting, **own) if scaled else preset.config(algorithm, setting, **own)
        return cfg.replace(**{k: v for k, v in extra.items() if k != "fedgf_threshold"})

    for algorithm in algorithms:  # every config valid before any training
        for setting in settings:
            make(algorithm, setting, NEVER)
    if checkpoints is None and profile in ("showcase", "full"):
        from .profiles import checkpoint_dir

        checkpoints = checkpoint_dir() / "tables" / name
    done = _Done(Path(checkpoints)) if checkpoints is not None else None

    result = TableResult(name, profile, tuple(seeds))
    cache = DataCache()
    if "fedgf" in algorithms:
        threshold = extra.get("fedgf_threshold")
        if threshold is None:
            # calibrated on a seed the table does not test, so that no tested run also chose its threshold
            pilot_seed = max(seeds) + 1
            threshold = _calibrate_fedgf(preset, make, pilot_seed, cache, None if profile == "fast" else 50)
            result.meta["fedgf_threshold_seed"] = str(pilot_seed)
        result.meta["fedgf_threshold"] = f"{threshold:.6g}"
    cells = [(a, s) for s in settings for a in algorithms]
    start = time.perf_counter()
    threshold = float(result.meta.get("fedgf_threshold", NEVER))
    runs = {(a, s, seed): make(a, s, threshold).replace(seed=seed) for a, s in cells for seed in seeds}
    accs = {k: done.get(_run_key(*k), c) if done else None for k, c in runs.items()}
    cpu = {k: done.cpu_time(_run_key(*k)) if done else None for k in runs}
    checkpoint = {k: done.folder / f"{_run_key(*k)}.pt" if done else None for k in runs}
    todo = [k for k, acc in accs.items() if acc is None]
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc=name, disable=not progress)
    for k, (acc, seconds) in _train_all([(k, runs[k], checkpoint[k]) for k in todo], jobs, cache):
        accs[k], cpu[k] = acc, seconds
        if done:
            done.put(_run_key(*k), runs[k], acc, seconds)
            checkpoint[k].unlink(missing_ok=True)  # done.json now holds this run
        bar.update(1)
    bar.close()
    for a, s in cells:
        result.cells[(a, s)] = [accs[(a, s, seed)] for seed in seeds]
    result.meta.update(_provenance(name, profile, seeds, time.perf_counter() - start, command))
    result.meta["cpu_time_s"] = f"{sum(t for t in cpu.values() if t is not None):.0f}"
    if untimed := sum(t is None for t in cpu.values()):
        result.meta["untimed_runs"] = str(untimed)  # finished before CPU times were kept
    return result


def _run_key(algorithm: str, setting: str, seed: int) -> str:
    return f"{algorithm}-{setting}-seed{seed}"


def _train_all(todo: list, jobs: int, cache):
    """Yield ``(key, (accuracy, cpu_seconds))`` for every ``(key, config, checkpoint)`` in ``todo``, as each
    run finishes."""
    if jobs == 1:
        for key, cfg, path in todo:
            yield key, _train(cfg, path, cache(cfg))
        return
    from concurrent.futures import as_completed

    from .workers import process_pool

    with process_pool(jobs) as pool:
        futures = {pool.submit(_train_in_worker, cfg, path): key for key, cfg, path in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()


_WORKER_CACHE = None


def _train_in_worker(cfg: Config, path: Path | None) -> tuple[float, float]:
    """One run in a worker process: one thread, the worker's own data cache."""
    import torch

    from dfl_core.engine import DataCache

    global _WORKER_CACHE
    torch.set_num_threads(1)
    _WORKER_CACHE = _WORKER_CACHE or DataCache()
    return _train(cfg, path, _WORKER_CACHE(cfg))


def _train(cfg: Config, path: Path | None, data) -> tuple[float, float]:
    """Train one table run (resuming from ``path`` if given): its final accuracy in % and the CPU seconds
    it took (this process's, every thread's)."""
    from dfl_core.engine import run

    start = time.process_time()
    history = run(cfg, data=data, checkpoint=path, resume=path is not None)
    return 100 * final_accuracy(history.records), time.process_time() - start


def final_accuracy(records: list[dict], last: int = 5) -> float:
    """The mean test accuracy of the last ``last`` evaluations after round 0 (less noisy than the last alone)."""
    after = [r["test_acc"] for r in records if r["round"] > 0][-last:]
    return statistics.fmean(after)


class _Done:
    """``done.json`` in a table's checkpoint folder: finished runs' accuracies and CPU times, keyed by cell
    and seed."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "done.json"
        self.runs = json.loads(self.path.read_text()) if self.path.exists() else {}

    @staticmethod
    def _config_key(cfg: Config) -> str:
        return json.dumps(cfg.to_dict(), sort_keys=True)

    def get(self, key: str, cfg: Config) -> float | None:
        entry = self.runs.get(key)
        return entry["test_acc"] if entry and entry["config"] == self._config_key(cfg) else None

    def cpu_time(self, key: str) -> float | None:
        return self.runs.get(key, {}).get("cpu_time_s")

    def put(self, key: str, cfg: Config, acc: float, cpu_time_s: float) -> None:
        self.runs[key] = {"config": self._config_key(cfg), "test_acc": acc, "cpu_time_s": cpu_time_s}
        write_atomic(self.path, json.dumps(self.runs, indent=1).encode())  # never a half-written record


def _provenance(name: str, profile: str, seeds, seconds: float, command: str | None) -> dict[str, str]:
    import torch

    from dfl_core import __version__

    return {
        "command": command
        or f"python -m dfl_core table {name} --profile {profile} --seeds {','.join(map(str, seeds))}",
        "seeds": " ".join(map(str, seeds)),
        "versions": f"dfl_core {__version__}, torch {torch.__version__}, python {platform.python_version()}",
        "machine": f"{cpu_name()}, {torch.get_num_threads()} torch thread(s), "
        + (torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "wall_time_s": f"{seconds:.0f}",
    }


#: Sustained training throughput assumed for one GPU when estimating run times (an assumption, not a
#: measurement: about a quarter of an A100's fp32/TF32 peak, which per-client small-batch training rarely beats).
ASSUMED_GPU_TFLOPS = 5.0


def forward_flops(model: str, dataset: str) -> int:
    """FLOPs of one sample's forward pass (``torch.utils.flop_counter``: a multiply-add counts 2)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from dfl_core.data import dataset_shape
    from dfl_core.models import build_model

    shape, classes = dataset_shape(dataset)
    net = build_model(model, shape, classes)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        net(torch.zeros(1, *shape))
    return int(counter.get_total_flops())


def full_scale_cost(name: str, seeds: int = 5, tflops: float = ASSUMED_GPU_TFLOPS) -> dict[str, float]:
    """An *estimate* of the full-scale table's training compute and its hours on one GPU.

    Per cell and seed: rounds × clients trained per round × K × B samples, each
    costing 3 forward passes (forward + backward), twice for the SAM family.
    Evaluation, gossip and the extra passes of SCAFFOLD-I, MimeLite and
    DisPFL are left out; ``tflops`` is the assumed sustained throughput.
    """
    from dfl_core.algorithms import ALGORITHMS

    preset = PRESETS[name]
    total = 0.0
    flops = {}
    for setting in preset.settings:
        for algorithm in preset.algorithms:
            cfg = preset.config(algorithm, setting, **({"fedgf_threshold": 1.0} if algorithm == "fedgf" else {}))
            key = (cfg.model, cfg.dataset)
            if key not in flops:
                flops[key] = forward_flops(*key)
            if ALGORITHMS[algorithm].kind == "centralized":
                clients = cfg.clients_per_round_count()
            else:
                clients = cfg.num_clients
            passes = 2 if (getattr(cfg.params, "rho", 0) or algorithm in ("fedgf", "fedsmoo")) else 1
            total += cfg.rounds * clients * cfg.params.local_steps * cfg.batch_size * 3 * flops[key] * passes * seeds
    return {
        "cells": len(preset.settings) * len(preset.algorithms),
        "seeds": seeds,
        "pflop": total / 1e15,
        "gpu_hours": total / (tflops * 1e12) / 3600,
        "assumed_tflops": tflops,
    }


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` reports: for the provenance of runs."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def paper_value(name: str, algorithm: str, setting: str) -> float | None:
    """The paper's printed test accuracy (%) of this cell, if :mod:`theory.tables` transcribes it."""
    from theory.tables import load_table

    label = DISPLAY_NAMES.get(algorithm, algorithm)
    family = name.rsplit("-", 1)[0]
    task = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}.get(name.rsplit("-", 1)[-1])
    split = {"dir0.3": "Dir0.3", "dir0.6": "Dir0.6", "iid": "IID"}
    try:
        if family == "dfedsam-table1":
            row = load_table("dfedsam_table1").one(task=task, algorithm=label, split=split[setting])
            return float(row["validation"])
        if family == "dfedsam-table2":
            col = {"exponential": "exp"}.get(setting, setting)
            return float(load_table("dfedsam_table2").one(algorithm=label)[col])
        if family == "dfedsam-table3":
            return float(load_table("dfedsam_table3").one(task=task, algorithm=label)["test_acc"])
        if family == "fedgf-table1":
            alpha, n = setting.removeprefix("alpha").split("-n")
            value = load_table("fedgf_table1").one(
                task=task, algorithm=label, dirichlet_alpha=alpha, clients_per_round=n
            )["test_acc"]
            return float(value) if value else None
        if name == "fedsam-cifar10":
            return float(load_table("fedsam_table2").one(setting=split[setting], algorithm=label)["validation"])
    except KeyError:
        return None
    return None


@dataclass(frozen=True)
class Claim:
    """A paper's claim that row ``better`` beats row ``worse``: in every column where the paper's own table
    orders the two rows that way (:func:`paper_orders`), or only in ``settings``."""

    text: str
    better: str
    worse: str
    settings: tuple[str, ...] | None = None


#: The papers' named claims that chapter 11 checks, per table. Each is compared in every column (or in
#: its ``settings``) that the table has both rows in and that the paper's own numbers order the same way: a
#: claim is the paper's only where its table agrees (FedGF's table, for instance, has FedAvgM below FedAvg in
#: five of its nine columns).
CLAIMS: dict[str, list[Claim]] = {
    "dfedsam-table1-cifar10": [
        Claim("DFedAvg beats D-PSGD", "dfedavg", "dpsgd"),
        Claim("DFedSAM beats DFedAvg", "dfedsam", "dfedavg"),
        Claim("DFedSAM beats DFedAvgM", "dfedsam", "dfedavgm"),
        Claim("DFedSAM-MGS beats DFedSAM", "dfedsam-mgs", "dfedsam"),
        Claim("DFedSAM beats DisPFL", "dfedsam", "dispfl"),
        Claim("DFedSAM-MGS beats FedAvg", "dfedsam-mgs", "fedavg"),
        Claim("FedSAM beats FedAvg", "fedsam", "fedavg"),
    ],
    "dfedsam-table2-cifar10": [
        Claim("DFedSAM-MGS beats DFedSAM", "dfedsam-mgs", "dfedsam"),  # most of all on the ring
    ],
    "dfedsam-table3-cifar10": [
        Claim("FedSAM beats DFedSAM-MGS", "fedsam", "dfedsam-mgs"),
        Claim("FedAvg beats DFedAvg", "fedavg", "dfedavg"),
        Claim("DFedSAM-MGS beats DFedSAM", "dfedsam-mgs", "dfedsam"),
        Claim("DFedSAM beats DFedAvgM", "dfedsam", "dfedavgm"),
        Claim("FedSAM beats FedAvg", "fedsam", "fedavg"),
    ],
    "fedgf-table1-cifar10": [
        Claim("FedGF beats FedSAM", "fedgf", "fedsam"),
        Claim("FedGF beats FedAvg", "fedgf", "fedavg"),
        Claim("FedSAM beats FedAvg", "fedsam", "fedavg"),
        Claim("FedSMOO beats FedSAM", "fedsmoo", "fedsam"),
        Claim("FedGF beats FedSMOO", "fedgf", "fedsmoo"),
        Claim("FedAvgM beats FedAvg", "fedavgm", "fedavg"),
        Claim("SCAFFOLD beats FedAvg", "scaffold", "fedavg"),
        Claim("FedGF beats FedGAMMA", "fedgf", "fedgamma"),
        Claim("FedASAM beats FedSAM", "fedasam", "fedsam"),
    ],
    "fedsam-cifar10": [
        Claim("FedSAM beats FedAvg", "fedsam", "fedavg"),
        Claim("MoFedSAM beats FedSAM", "mofedsam", "fedsam"),
        Claim("MoFedSAM beats FedAvg", "mofedsam", "fedavg"),
        Claim("FedCM beats FedAvg", "fedcm", "fedavg"),
        Claim("MimeLite beats FedAvg", "mimelite", "fedavg"),
        Claim("FedAvg beats SCAFFOLD", "fedavg", "scaffold"),
        Claim("FedAvg beats FedRobust", "fedavg", "fedrobust"),
    ],
}


@dataclass(frozen=True)
class _Pair:
    """One comparison to make: in column ``setting``, row ``better`` against row ``worse``."""

    kind: str  # "ordering" (the paper's numbers order the rows) or "claim" (a named claim)
    setting: str
    better: str
    worse: str
    label: str


def _rows_and_columns(result: TableResult) -> tuple[list[str], list[str]]:
    return list(dict.fromkeys(a for a, _ in result.cells)), list(dict.fromkeys(s for _, s in result.cells))


def _ordering_pairs(result: TableResult) -> list[_Pair]:
    algorithms, settings = _rows_and_columns(result)
    pairs = []
    for s in settings:
        ranked = [(a, paper_value(result.name, a, s)) for a in algorithms if (a, s) in result.cells]
        ranked = [(a, p) for a, p in ranked if p is not None]
        for (a, pa), (b, pb) in itertools.combinations(ranked, 2):
            if pa == pb:  # the paper does not order a tie
                continue
            (hi, p_hi), (lo, p_lo) = ((a, pa), (b, pb)) if pa > pb else ((b, pb), (a, pa))
            label = f"{s}: {DISPLAY_NAMES.get(hi, hi)} > {DISPLAY_NAMES.get(lo, lo)} (paper {p_hi:.2f} vs {p_lo:.2f})"
            pairs.append(_Pair("ordering", s, hi, lo, label))
    return pairs


def paper_orders(name: str, better: str, worse: str, setting: str) -> bool:
    """Whether the paper's table ``name`` orders row ``better`` above ``worse`` in column ``setting``: its
    numbers say so, or ``worse`` failed to train there. Where the paper prints neither number, the claim rests
    on its text, and the column counts."""
    b, w = (paper_value(name, a, setting) for a in (better, worse))
    if b is None:
        return w is None
    return w is None or b > w


def _claim_pairs(result: TableResult) -> list[_Pair]:
    _, settings = _rows_and_columns(result)
    return [
        _Pair("claim", s, c.better, c.worse, f"{s}: {c.text}")
        for c in CLAIMS.get(result.name, [])
        for s in (c.settings or settings)
        if (c.better, s) in result.cells
        and (c.worse, s) in result.cells
        and paper_orders(result.name, c.better, c.worse, s)
    ]


def _compare(result: TableResult, pair: _Pair, margin: float | None = None) -> PairedComparison:
    """The paired comparison of a pair of rows in one column, with the paper's own difference and the regime
    (each row's local work and horizon, both when they differ) beside it; ``margin`` as in
    :func:`~dfl_book.stats.compare_paired`."""
    c = compare_paired(
        result.cells[(pair.better, pair.setting)],
        result.cells[(pair.worse, pair.setting)],
        expect="greater",
        label=pair.label,
        margin=margin,
    )
    better, worse = (paper_value(result.name, a, pair.setting) for a in (pair.better, pair.worse))
    paper = None if better is None or worse is None else signed(better - worse, 2)
    regimes = [_cell_regime(result, a, pair.setting) for a in (pair.worse, pair.better)]
    regime = (
        regimes[0]
        if regimes[0] == regimes[1]
        else f"{DISPLAY_NAMES.get(pair.worse, pair.worse)}: {regimes[0]}; {DISPLAY_NAMES.get(pair.better, pair.better)}: "
        f"{regimes[1]}"
    )
    return dataclasses.replace(c, paper=paper, regime=regime)


def epochs_per_round(cfg: Config) -> float:
    """The local epochs E a round, as the engine defines them: K = E·⌈n/B⌉ steps (one step an epoch when full
    batch), so E = K/⌈n/B⌉; ``local_epochs`` itself when the config gives it."""
    if cfg.local_epochs is not None:
        return cfg.local_epochs
    return cfg.params.local_steps / (1 if cfg.full_batch else _steps_per_epoch(cfg))


def local_work(cfg: Config) -> str:
    """A run's regime in one phrase: local epochs a round E = K/⌈n/B⌉, K, B, the rounds T and who trains a
    round."""
    text = f"E = {epochs_per_round(cfg):.2g} (K = {cfg.params.local_steps}, B = {cfg.batch_size}), T = {cfg.rounds}"
    if hasattr(cfg.params, "client_fraction"):  # centralized: clients sampled a round
        text += f", {cfg.clients_per_round_count()} of {cfg.num_clients} clients a round"
    return text


def _cell_regime(result: TableResult, algorithm: str, setting: str) -> str:
    """:func:`local_work` of a table cell at the table's profile ("" if the cell's config cannot be built)."""
    try:
        preset = get_preset(result.name)
        extra = {"fedgf_threshold": NEVER} if algorithm == "fedgf" else {}
        make = {"fast": fast_config, "showcase": showcase_config}.get(result.profile)
        return local_work(
            make(preset, algorithm, setting, **extra) if make else preset.config(algorithm, setting, **extra)
        )
    except (ConfigError, KeyError, ValueError):
        return ""


def orderings(result: TableResult) -> list[PairedComparison]:
    """Per column, every pair of rows the paper orders (both have a paper number, and they differ):
    our per-seed values of the paper's better row against its worse one, ``expect="greater"``."""
    return [_compare(result, p) for p in _ordering_pairs(result)]


def check_claims(result: TableResult, margin: float | None = None) -> list[PairedComparison]:
    """The table's named claims (:data:`CLAIMS`), one comparison per claim and column that has both rows.

    ``margin`` δ (in the table's unit, points of accuracy) turns on the equivalence test, as in
    :func:`dfl_book.showcase.report.judge`: an unresolved difference whose 90% interval lies inside (−δ, δ) is
    EQUIVALENT, and a resolved one smaller than δ is marked ``within_margin``. Without it (the default) no
    comparison is called EQUIVALENT."""
    return [_compare(result, p, margin=margin) for p in _claim_pairs(result)]


def _method_text(n: int) -> str:
    return (
        f"per-seed paired difference better − worse (same seed: same initial model, data split and "
        f"mini-batches) over n = {n} seeds; 95% Student t-interval, mean ± t(0.975, n−1)·s_d/√n. "
        f"REPRODUCED: the interval is above 0 (the paper's direction); REVERSED: below 0; UNRESOLVED: it "
        f'contains 0 (not resolved by these seeds, which is not "no difference"). Detectable: the smallest '
        f"difference this design resolves with 80% power, (t(0.975, n−1) + t(0.8, n−1))·s_d/√n."
    )


def _few_seeds(n: int) -> str:
    """Why a table with n < MIN_SEEDS seeds has no verdicts (n < 2) or weak ones; "" if n is enough."""
    if n < 2:
        return (
            f"a paired comparison needs at least 2 seeds (the book's rule asks for {MIN_SEEDS}); "
            f"this table has {n}, so it has no verdicts."
        )
    if n < MIN_SEEDS:
        return (
            f"{n} seeds; the book's rule asks for at least {MIN_SEEDS} before a verdict is taken as settled, "
            f"so expect wide intervals and many UNRESOLVED."
        )
    return ""


_Family = list[tuple[_Pair, PairedComparison]]


def _families(result: TableResult) -> tuple[_Family, _Family]:
    """The table's two families of comparisons, each pair with its comparison: the paper's orderings and the named
    claims (each family is corrected by Holm on its own)."""
    return tuple([(p, _compare(result, p)) for p in pairs] for pairs in (_ordering_pairs(result), _claim_pairs(result)))


def verdicts_markdown(result: TableResult, families: tuple[_Family, _Family] | None = None) -> str:
    """The verdict section: per-column verdict counts over the paper's orderings and the named claims
    (``families``: :func:`_families` of ``result``, if already computed)."""
    n = len(result.seeds)
    lines = ["## Paired verdicts", ""]
    if n < 2:
        return "\n".join(lines + [f"No verdicts: {_few_seeds(n)}"])
    lines += [f"How: {_method_text(n)}", ""]
    if n < MIN_SEEDS:
        lines += [f"> Note: {_few_seeds(n)}", ""]
    ordered, named = families or _families(result)
    if ordered:
        by_setting: dict[str, list[PairedComparison]] = {}
        for pair, c in ordered:
            by_setting.setdefault(pair.setting, []).append(c)
        by_setting["all"] = [c for _, c in ordered]
        lines += [
            "The paper's orderings (every pair of rows whose paper numbers differ), per column, uncorrected:",
            "",
            "| setting | pairs | " + " | ".join(VERDICTS) + " |",
            "|---|---:|" + "---:|" * len(VERDICTS),
        ]
        for s, cs in by_setting.items():
            counts = summarize(cs)
            lines.append(f"| {s} | {len(cs)} | " + " | ".join(str(counts[v]) for v in VERDICTS) + " |")
        after = holm([c for _, c in ordered])
        lines += [
            "",
            f"After Holm's correction over the table's {len(ordered)} orderings (one family): "
            f"{after.count('REPRODUCED')} REPRODUCED, {after.count('REVERSED')} REVERSED, "
            f"{after.count('UNRESOLVED')} UNRESOLVED.",
        ]
    else:
        lines.append("No two rows here have different paper numbers in a column, so there are no orderings to check.")
    claims = [c for _, c in named]
    lines += [""] + (
        [
            "The paper's named claims (`CLAIMS` in `dfl_book/tables.py`), each checked in the columns where the "
            "paper's own numbers order its two rows that way; *after Holm* corrects "
            f"over the table's {len(claims)} named-claim comparisons (one family):",
            "",
            markdown_table(claims, corrected=holm(claims)),
        ]
        if claims
        else ["No named claims for these rows."]
    )
    return "\n".join(lines)


_HOLM_TEXT = (
    "p is the paired t-test's two-sided p-value; p_holm its Holm-adjusted value within the row's family "
    "(the table's orderings are one family, its named claims another), and verdict_holm the verdict that "
    "stands after the correction (a difference stands when p_holm < 0.05)."
)


def _write_verdicts(result: TableResult, families: tuple[_Family, _Family], path: Path) -> None:
    """One CSV row per comparison (the paper's orderings, then the named claims), headed like the table's CSV."""
    n = len(result.seeds)
    header = [f"# {k}: {v}" for k, v in result.meta.items()] + [f"# interval: {_method_text(n)}"]
    if n < MIN_SEEDS:
        header.append(f"# note: {_few_seeds(n)}")
    header.append(f"# holm: {_HOLM_TEXT}")
    fields = ["kind", "label", "setting", "better", "worse", "n", "mean", "low", "high", "detectable", "verdict"]
    fields += ["p", "p_holm", "verdict_holm"]
    with open(path, "w", newline="") as f:
        f.write("\n".join(header) + "\n")
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for family in filter(None, families):  # a table may have no named claims for its rows
            comparisons = [c for _, c in family]
            p_values = [p_value(c) for c in comparisons]
            rows = zip(family, p_values, holm_adjust(p_values), holm(comparisons))
            for (p, c), p_raw, p_holm, verdict_holm in rows:
                writer.writerow(
                    dict(
                        kind=p.kind,
                        label=p.label,
                        setting=p.setting,
                        better=p.better,
                        worse=p.worse,
                        n=c.n,
                        mean=f"{c.mean:.4f}",
                        low=f"{c.low:.4f}",
                        high=f"{c.high:.4f}",
                        detectable=f"{c.detectable:.4f}",
                        verdict=c.verdict,
                        p=f"{p_raw:.4f}",
                        p_holm=f"{p_holm:.4f}",
                        verdict_holm=verdict_holm,
                    )
                )


def write_table(result: TableResult, folder: str | Path, tag: str | None = None) -> tuple[Path, Path]:
    """``<name>-<profile>[-<tag>].csv`` and ``.md`` in ``folder``; returns both paths.

    With at least 2 seeds it also writes ``<name>-<profile>[-<tag>]-verdicts.csv`` (one row per
    paired comparison: the paper's orderings, then the named claims), and the Markdown ends with
    the verdict section (:func:`verdicts_markdown`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{result.name}-{result.profile}{'-' + tag if tag else ''}"
    header = [f"# {k}: {v}" for k, v in result.meta.items()]
    rows = []
    for (algorithm, setting), accs in result.cells.items():
        mean, std = result.mean_std(algorithm, setting)
        paper = paper_value(result.name, algorithm, setting)
        rows.append(
            dict(
                algorithm=algorithm,
                setting=setting,
                mean=f"{mean:.2f}",
                std=f"{std:.2f}",
                seeds=len(accs),
                values=" ".join(f"{a:.2f}" for a in accs),
                paper="" if paper is None else f"{paper:.2f}",
            )
        )
    with open(stem.with_suffix(".csv"), "w", newline="") as f:
        f.write("\n".join(header) + "\n")
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    verdicts = Path(f"{stem}-verdicts.csv")
    families = _families(result) if len(result.seeds) >= 2 else None  # once, for the CSV and the Markdown
    if families:
        _write_verdicts(result, families, verdicts)
    else:
        verdicts.unlink(missing_ok=True)  # one from an earlier run would not match this table
    stem.with_suffix(".md").write_text(to_markdown(result) + "\n\n" + verdicts_markdown(result, families) + "\n")
    return stem.with_suffix(".csv"), stem.with_suffix(".md")


def to_markdown(result: TableResult) -> str:
    """Rows = algorithms, columns = settings; each cell ``mean ± std (paper)``."""
    algorithms, settings = _rows_and_columns(result)
    lines = [f"<!-- {k}: {v} -->" for k, v in result.meta.items()]
    lines += [
        f"Test accuracy (%) of the global model, mean ± std over seeds {', '.join(map(str, result.seeds))} "
        f"({result.profile} profile); the paper's number in parentheses.",
        "",
        "| algorithm | " + " | ".join(settings) + " |",
        "|---" * (len(settings) + 1) + "|",
    ]
    for a in algorithms:
        cells = []
        for s in settings:
            mean, std = result.mean_std(a, s)
            paper = paper_value(result.name, a, s)
            cells.append(f"{mean:.2f} ± {std:.2f}" + ("" if paper is None else f" ({paper:.2f})"))
        lines.append(f"| {DISPLAY_NAMES.get(a, a)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_table(path: str | Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A CSV written by :func:`write_table`: its header lines and its rows."""
    meta, body = {}, []
    for line in Path(path).read_text().splitlines():
        if line.startswith("#"):
            k, _, v = line[1:].strip().partition(":")
            meta[k.strip()] = v.strip()
        elif line.strip():
            body.append(line)
    return meta, list(csv.DictReader(body))


def read_result(path: str | Path) -> TableResult:
    """A CSV written by :func:`write_table` (old ones included) as a :class:`TableResult`, so that its
    verdicts can be recomputed without rerunning: name and profile from the recorded command, each
    cell's per-seed values (rounded to 0.01 in the file) in the order of the recorded seeds, and its mean and
    std as the file states them (computed before rounding)."""
    meta, rows = read_table(path)
    words = shlex.split(meta["command"])
    name = words[words.index("table") + 1]
    profile = words[words.index("--profile") + 1] if "--profile" in words else "fast"
    seeds = tuple(int(s) for s in meta["seeds"].split())
    cells = {(r["algorithm"], r["setting"]): [float(v) for v in r["values"].split()] for r in rows}
    stated = {(r["algorithm"], r["setting"]): (float(r["mean"]), float(r["std"])) for r in rows}
    return TableResult(name, profile, seeds, cells, meta, stated)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m dfl_core table NAME")
