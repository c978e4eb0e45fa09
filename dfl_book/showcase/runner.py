"""Running showcase experiments and reading their results files (see :mod:`dfl_book.showcase`)."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from dfl_core.checkpoint import write_atomic
from dfl_core.config import Config
from dfl_core.errors import ConfigError, DivergenceError

__all__ = [
    "Experiment",
    "RESULTS_DIR",
    "SCHEMA",
    "KEPT_METRICS",
    "ShowcaseResult",
    "load",
    "run",
    "final_value",
    "results_path",
    "stored_config",
]

SCHEMA = "dfl-book/showcase/v1"
#: Where the committed results live (package data, so Colab's pip install has them too).
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The history fields a results file keeps per evaluation (the per-client lists are left out: they would
#: make each file tens of megabytes).
KEPT_METRICS = (
    "round",
    "test_acc",
    "test_loss",
    "train_acc",
    "train_loss",
    "gen_error",
    "consensus_distance",
    "client_test_acc_mean",
    "client_train_acc_mean",
    "transmissions",
    "bits_sent",
)


@dataclass(frozen=True)
class Experiment:
    """Arms (label → config changes) run over the same seeds, at a profile's sizes.

    ``base`` holds the config changes every arm shares; an arm's changes come
    on top. ``measure(sim)`` (optional) runs after training and returns extra
    numbers per run (e.g. the Hessian's top eigenvalue). ``profile_changes``
    adapts the experiment to a profile (e.g. fewer rounds at ``fast``).
    """

    name: str
    chapter: str
    question: str  # what the experiment asks, in a sentence
    arms: Mapping[str, Mapping[str, Any]]
    base: Mapping[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    measure: Callable | None = None
    profile_changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def config(self, arm: str, seed: int, profile) -> Config:
        """The config of one run: the profile's sizes, then ``base``, the profile's changes, the arm."""
        if arm not in self.arms:
            raise ConfigError(f"experiment {self.name!r} has no arm {arm!r}; arms: {', '.join(self.arms)}")
        changes = {**self.base, **self.profile_changes.get(profile.name, {}), **self.arms[arm], "seed": seed}
        return profile.config(**changes)


def stored_config(record: dict) -> dict:
    """A run record's config as this version writes it (:meth:`Config.to_dict` of the config it reads as); a file
    written by an earlier version is converted first (``python -m dfl_core convert-results``)."""
    return Config.from_dict(record["config"]).to_dict()


def final_value(history: list[dict], metric: str = "test_acc", last: int = 5) -> float:
    """The mean of ``metric`` over the last ``last`` evaluations: less noisy than the last one alone."""
    values = [r[metric] for r in history[-last:]]
    return sum(values) / len(values)


class ShowcaseResult:
    """A results file: every run's history (``KEPT_METRICS`` per evaluation) and measures, with provenance."""

    def __init__(self, doc: dict):
        self.doc = doc
        self.name, self.provenance = doc["experiment"], doc["provenance"]
        self.arms = list(doc["arms"])
        self.seeds = tuple(doc["seeds"])
        self.runs = {(r["arm"], r["seed"]): r for r in doc["runs"]}

    def history(self, arm: str, seed: int) -> list[dict]:
        return self.runs[(arm, seed)]["history"]

    def diverged(self, arm: str) -> dict[int, int]:
        """The seeds whose run of ``arm`` diverged (loss or parameters NaN/inf), and the round it happened in."""
        return {s: self.runs[(arm, s)]["diverged"]["round"] for s in self.seeds if "diverged" in self.runs[(arm, s)]}

    def per_seed(self, arm: str, metric: str = "test_acc", last: int = 5, scale: float = 100.0) -> list[float]:
        """``final_value`` of every seed (in seed order), × ``scale`` (percent by default).

        A diverged run has no final value: asking for one is an error that names the seeds (see :meth:`diverged`).
        """
        if diverged := self.diverged(arm):
            raise ValueError(
                f"{self.name}: arm {arm!r} diverged in seed(s) {sorted(diverged)} "
                f"(round {diverged}), so it has no final {metric}; see .diverged(arm)"
            )
        return [scale * final_value(self.history(arm, s), metric, last) for s in self.seeds]

    def measure(self, arm: str, key: str) -> list[float]:
        """A measure of every seed, e.g. ``result.measure("FedSAM", "lambda_max")``."""
        return [self.runs[(arm, s)]["measures"][key] for s in self.seeds]

    def curve(self, arm: str, metric: str = "test_acc") -> tuple[list[int], list[list[float]]]:
        """The arm's evaluation rounds (its config's schedule: round 0, every ``eval_every`` and the last) and,
        per seed, the metric at each (NaN from where a diverged run stopped, even if every seed diverged)."""
        from dfl_core.engine.loop import evaluation_rounds

        cfg = self.runs[(arm, self.seeds[0])]["config"]
        rounds = evaluation_rounds(cfg["rounds"], cfg["eval_every"])
        curves = []
        for s in self.seeds:
            values = {r["round"]: r[metric] for r in self.history(arm, s)}
            curves.append([values.get(t, math.nan) for t in rounds])
        return rounds, curves

    def compare(
        self,
        better: str,
        worse: str,
        metric: str = "test_acc",
        last: int = 5,
        scale: float = 100.0,
        expect: str = "greater",
        label: str | None = None,
    ):
        """The per-seed paired comparison of two arms (:func:`dfl_book.stats.compare_paired`)."""
        from ..stats import compare_paired

        return compare_paired(
            self.per_seed(better, metric, last, scale),
            self.per_seed(worse, metric, last, scale),
            expect=expect,
            label=label or f"{better} vs {worse}",
        )

    def wall_time_s(self) -> float:
        """Training time of all runs (the sum of the runs' own wall times)."""
        return sum(r["wall_time_s"] for r in self.doc["runs"])

    def cpu_time_s(self) -> float:
        """CPU time of all runs (each ran on one thread; two ran at once on 2 cores)."""
        return sum(r.get("cpu_time_s", r["wall_time_s"]) for r in self.doc["runs"])


def results_path(name: str, folder: str | os.PathLike | None = None) -> Path:
    """Where experiment ``name``'s results file is: ``folder``, else ``$DFL_SHOWCASE_RESULTS`` (e.g. results
    of ``--profile fast`` while writing a chapter), else the committed :data:`RESULTS_DIR`."""
    return Path(folder or os.environ.get("DFL_SHOWCASE_RESULTS") or RESULTS_DIR) / f"{name}.json"


def load(name: str, folder: str | os.PathLike | None = None) -> ShowcaseResult:
    """The committed results of experiment ``name`` (or those in ``folder``)."""
    path = results_path(name, folder)
    if not path.exists():
        raise FileNotFoundError(
            f"no showcase results for {name!r} at {str(path)!r}: run python -m dfl_core showcase {name}"
        )
    doc = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{str(path)!r} has schema {doc.get('schema')!r}, not {SCHEMA!r}")
    if doc.get("experiment") != name:
        raise ValueError(f"{str(path)!r} holds the results of experiment {doc.get('experiment')!r}, not of {name!r}")
    return ShowcaseResult(doc)


# ------------------------------------------------------------------------ running
def _run_one(
    experiment: Experiment, arm: str, seed: int, profile_name: str, checkpoint: str | None, threads: int
) -> dict:
    """Train one (arm, seed) to the end (resuming from ``checkpoint`` if it exists); the run's record."""
    import torch

    from dfl_core.engine import Simulation
    from ..profiles import get_profile

    torch.set_num_threads(threads)
    profile = get_profile(profile_name)
    cfg = experiment.config(arm, seed, profile)
    start, cpu_start = time.perf_counter(), time.process_time()
    if checkpoint is not None and Path(checkpoint).exists():
        sim = Simulation.resume(checkpoint, cfg, data=profile.data(cfg))
    else:
        sim = Simulation(cfg, data=profile.data(cfg))
    diverged = None
    try:
        sim.run(checkpoint=checkpoint, checkpoint_every=10)
    except DivergenceError as err:  # an outcome of the arm, not a crash: the other runs go on
        diverged = {"round": sim.t + 1, "message": str(err)}
    measures = experiment.measure(sim) if experiment.measure is not None and diverged is None else {}
    record = {
        "arm": arm,
        "seed": seed,
        "config": cfg.to_dict(),
        "wall_time_s": time.perf_counter() - start,
        "cpu_time_s": time.process_time() - cpu_start,
        "history": [{k: r[k] for k in KEPT_METRICS if k in r} | _extras(r) for r in sim.history.records],
        "measures": measures,
    } | ({"notes": sim.history.notes} if sim.history.notes else {})
    return record | ({"diverged": diverged} if diverged else {})


def _extras(record: dict) -> dict:
    """An algorithm's own per-round quantities (FedGF's c, …), kept with the metrics."""
    known = {
        "lr",
        "bytes_sent",
        "bits_last_round",
        "wall_time_s",
        "client_test_acc",
        "client_test_loss",
        "client_train_acc",
        "client_train_loss",
    }
    return {k: v for k, v in record.items() if k not in known and k not in KEPT_METRICS and isinstance(v, float)}


def run(
    experiment: Experiment,
    profile: str = "showcase",
    jobs: int = 1,
    out: str | os.PathLike | None = None,
    checkpoints: str | os.PathLike | None = None,
    seeds: tuple[int, ...] | None = None,
    progress: bool = True,
    command: str | None = None,
    threads: int | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Path:
    """Run every arm × seed of ``experiment`` and write its results file; returns its path.

    Runs already in the file with an unchanged config are kept, so rerunning an
    interrupted regeneration continues it; each unfinished run checkpoints every
    10 rounds under ``checkpoints`` (default ``$DFL_CHECKPOINTS/showcase/NAME``).
    ``jobs`` runs that many trainings at once, one process and one thread each; with ``jobs=1`` the runs take
    ``threads`` threads (default: every core), e.g. 1 in a notebook that keeps its own thread count.
    ``provenance`` adds entries to the file's provenance (e.g. the GPU and the data copy of
    :mod:`.gpu_map`); it is read at every write, so a caller may update it between calls.
    """
    from concurrent.futures import as_completed

    from tqdm import tqdm

    from ..profiles import checkpoint_dir, get_profile
    from ..workers import process_pool

    name, prof = experiment.name, get_profile(profile)
    seeds = tuple(seeds or experiment.seeds)
    planned = {(arm, s): experiment.config(arm, s, prof).to_dict() for arm in experiment.arms for s in seeds}
    path = results_path(name, out)
    done = {}
    if path.exists():
        old = json.loads(path.read_text())
        if old.get("profile") == profile:
            done = {
                (r["arm"], r["seed"]): r for r in old["runs"] if planned.get((r["arm"], r["seed"])) == stored_config(r)
            }
    folder = Path(checkpoints) if checkpoints is not None else checkpoint_dir() / "showcase" / name
    folder.mkdir(parents=True, exist_ok=True)
    todo = [key for key in planned if key not in done]
    start = time.perf_counter()

    def write() -> None:
        runs = [done[key] for key in planned if key in done]
        doc = {
            "schema": SCHEMA,
            "experiment": name,
            "chapter": experiment.chapter,
            "question": experiment.question,
            "profile": profile,
            "seeds": list(seeds),
            "arms": {a: dict(c) for a, c in experiment.arms.items()},
            "provenance": _provenance(name, profile, seeds, command, time.perf_counter() - start, runs)
            | dict(provenance or {}),
            "runs": runs,
        }
        write_atomic(path, json.dumps(doc, indent=1).encode())  # an interruption leaves the old file or the new

    bar = tqdm(total=len(planned), initial=len(done), desc=name, disable=not progress)
    args = [
        (
            experiment,
            arm,
            s,
            profile,
            str(folder / f"{_slug(arm)}-seed{s}.pt"),
            1 if jobs > 1 else (threads or os.cpu_count() or 1),
        )
        for arm, s in todo
    ]
    if jobs > 1:
        with process_pool(jobs) as pool:
            futures = [pool.submit(_run_one, *a) for a in args]
            for future in as_completed(futures):
                record = future.result()
                done[(record["arm"], record["seed"])] = record
                write()
                bar.update(1)
    else:
        for a in args:
            record = _run_one(*a)
            done[(record["arm"], record["seed"])] = record
            write()
            bar.update(1)
    bar.close()
    write()
    for arm, s in todo:
        (folder / f"{_slug(arm)}-seed{s}.pt").unlink(missing_ok=True)  # the results file holds these runs
    return path


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def _provenance(name: str, profile: str, seeds, command: str | None, seconds: float, runs: list[dict]) -> dict:
    import torch

    from dfl_core import __version__
    from ..tables import cpu_name

    return {
        "command": command or f"python -m dfl_core showcase {name} --profile {profile}",
        "seeds": list(seeds),
        "versions": f"dfl_core {__version__}, torch {torch.__version__}, python {platform.python_version()}",
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "wall_time_s": round(sum(r["wall_time_s"] for r in runs), 1),
        "cpu_time_s": round(sum(r.get("cpu_time_s", 0.0) for r in runs), 1),
        "this_invocation_s": round(seconds, 1),
    }
