"""End-to-end benchmark: whole experiments, engine against the reference-structured loop.

Two experiments:

* ``cli``: the default comparison of ``python -m dfl_core run`` (D-PSGD, DFedAvg,
  DFedAvgM, DFedSAM, DFedSAM-MGS on 20 clients of the digits data, 30 rounds,
  evaluation every round, 3 seeds), run by the engine through
  :func:`dfl_core.cli.compare`, data loading included;
* ``mgs``: one DFedSAM-MGS (Q = 4) ring experiment at m = 100, 2NN,
  Fashion-MNIST (Dirichlet 0.3), 50 rounds, evaluation every 5 rounds (and
  before the first round, as the engine does); the data are loaded once,
  untimed, and given to both.

The reference loop does the same work: the same data, model, W, K, Q,
learning-rate schedule and momentum; the same measurements at each evaluation
(every client on its train and test split, the average model on the union of
the train splits and on the test set). Its time is *estimated*: its setup is
timed, a few rounds and evaluations are timed, and the estimate is
setup + T × (median round) + (number of evaluations) × (median evaluation).
For the CLI comparison the reference runs seed 0 of each algorithm and the
estimate counts it once per seed (the seed does not change the work).
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from dfl_core.cli import DEFAULT_ALGORITHMS, DEFAULT_SEEDS, compare, configs_for
from dfl_core.config import Config
from dfl_core.engine import Hooks, Simulation, federated_data

from .common import Contender, fmt_ratio, fmt_s, interleaved, markdown_table, median
from .loops import LocalSpec, ReferenceLoop, client_tensors

__all__ = ["E2ESettings", "run", "tables", "reference_estimate"]


@dataclass
class E2ESettings:
    cli_base: Config = field(default_factory=Config)
    cli_algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    cli_seeds: tuple[int, ...] = DEFAULT_SEEDS
    mgs: Config = field(
        default_factory=lambda: Config(
            algorithm="dfedsam-mgs", dataset="fashion-mnist", model="2nn", num_clients=100, rounds=50, eval_every=5
        )
    )
    ref_rounds: int = 3  # rounds of the reference loop actually timed per estimate
    ref_evals: int = 2  # evaluations actually timed per estimate
    repeats: int = 3
    label_cli: str = "default CLI comparison (5 algorithms × 3 seeds, digits, m = 20, 30 rounds, eval every round)"
    label_mgs: str = "DFedSAM-MGS (Q = 4), ring, m = 100, 2NN, Fashion-MNIST, 50 rounds, eval every 5"


def _num_evals(cfg: Config) -> int:
    """Evaluations the engine's ``run`` makes: before round 1, every ``eval_every`` rounds, and at the end."""
    marks = {0} | {t for t in range(1, cfg.rounds + 1) if t % cfg.eval_every == 0 or t == cfg.rounds}
    return len(marks)


def reference_estimate(cfg: Config, rounds: int, evals: int, data=None) -> dict[str, float]:
    """Seconds the reference loop would take for ``cfg`` (see the module docstring), and its parts.

    ``data=None`` loads (and times) the data as the engine's run would.
    """
    t0 = time.perf_counter()
    if data is None:
        data = federated_data(cfg)
    sim = Simulation(cfg, data=data)  # for the model, W_t and x0 only
    template = copy.deepcopy(sim.model.template)
    template.load_state_dict(sim.model.unflatten(sim.x0[0]))
    spec = LocalSpec(
        lr=cfg.lr,
        K=cfg.params.local_steps,
        B=cfg.batch_size,
        rho=getattr(cfg.params, "rho", 0.0),
        momentum=getattr(cfg.params, "momentum", 0.0),
        weight_decay=cfg.weight_decay,
        lr_decay=cfg.lr_decay,
    )
    loop = ReferenceLoop(
        template,
        client_tensors(data),
        lambda t: sim.matrices(t)[0].W,
        spec,
        gossip_steps=cfg.params.gossip_steps,
        dpsgd=cfg.algorithm == "dpsgd",
    )
    setup = time.perf_counter() - t0
    round_times, eval_times = [], []
    for _ in range(min(evals, 1)):
        eval_times.append(_timed(lambda: loop.evaluate(train_too=True)))
    for _ in range(rounds):
        round_times.append(_timed(loop.train_round))
    for _ in range(evals - len(eval_times)):
        eval_times.append(_timed(lambda: loop.evaluate(train_too=True)))
    r, e = statistics.median(round_times), statistics.median(eval_times)
    n_eval = _num_evals(cfg)
    return {
        "total": setup + cfg.rounds * r + n_eval * e,
        "setup": setup,
        "round": r,
        "eval": e,
        "rounds": cfg.rounds,
        "evals": n_eval,
    }


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _engine_run(cfg: Config, data, parts: dict[str, float]) -> None:
    """``Simulation(cfg, data).run()``, adding the seconds spent in its rounds and its evaluations to ``parts``."""
    t0 = time.perf_counter()
    sim = Simulation(cfg, data=data)
    parts["setup"] = parts.get("setup", 0.0) + time.perf_counter() - t0
    sim.run(hooks=[_Timer(parts)])


class _Timer(Hooks):
    """Adds the seconds of every round (``step``) and every evaluation (``evaluate``) to ``parts``."""

    def __init__(self, parts: dict[str, float]):
        self.parts, self.round_start, self.eval_start = parts, None, None

    def _add(self, key: str, since: float) -> None:
        self.parts[key] = self.parts.get(key, 0.0) + time.perf_counter() - since

    def before_round(self, run) -> None:
        self.round_start = time.perf_counter()

    def before_evaluate(self, run) -> None:
        if self.round_start is not None:  # the round is over: its evaluation starts
            self._add("step", self.round_start)
            self.round_start = None
        self.eval_start = time.perf_counter()

    def after_evaluate(self, run, record) -> None:
        self._add("evaluate", self.eval_start)

    def after_round(self, run) -> None:
        if self.round_start is not None:  # a round without an evaluation
            self._add("step", self.round_start)
            self.round_start = None


@dataclass
class E2EResult:
    name: str
    label: str
    times: dict[str, list[float]]
    ref_parts: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine_split: dict[str, float] = field(default_factory=dict)  # seconds in setup, rounds, evaluations
    ref_split: dict[str, float] = field(default_factory=dict)


def _ref_split(parts: list[dict], copies: int = 1) -> dict[str, float]:
    """Total reference seconds in setup, rounds and evaluations over runs (each counted ``copies`` times)."""
    return {
        "setup": copies * sum(p["setup"] for p in parts),
        "rounds": copies * sum(p["round"] * p["rounds"] for p in parts),
        "evals": copies * sum(p["eval"] * p["evals"] for p in parts),
    }


def _median_repeat(parts: list, totals: list[float]):
    """The repeat whose reference total is the median one (closest to it for an even count), for the split."""
    mid = median(totals)
    return parts[min(range(len(totals)), key=lambda i: abs(totals[i] - mid))]


def run(s: E2ESettings, log: Callable[[str], None] = print) -> list[E2EResult]:
    results = []
    # --- the default CLI comparison
    configs = configs_for(s.cli_base, s.cli_algorithms)
    cli_parts: list[dict] = []

    cli_engine_parts: list[dict] = []

    def engine_cli():
        compare(configs, s.cli_seeds, progress=False)

    def engine_cli_parts():  # the same runs, timing rounds and evaluations apart
        parts: dict[str, float] = {}
        for cfg in configs.values():
            for seed in s.cli_seeds:
                c = cfg.replace(seed=seed)
                t0 = time.perf_counter()
                data = federated_data(c)
                parts["setup"] = parts.get("setup", 0.0) + time.perf_counter() - t0
                _engine_run(c, data, parts)
        cli_engine_parts.append(parts)

    def reference_cli():
        parts = {
            name: reference_estimate(cfg.replace(seed=s.cli_seeds[0]), s.ref_rounds, s.ref_evals)
            for name, cfg in configs.items()
        }
        cli_parts.append(parts)
        return sum(p["total"] for p in parts.values()) * len(s.cli_seeds)

    log(f"  e2e: {s.label_cli}")
    times = interleaved(
        [Contender("engine", engine_cli), Contender("reference", reference_cli, measures=True)],
        s.repeats,
        warmup=False,
        log=log,
    )
    engine_cli_parts()  # once more, untimed as a whole, for the split
    res = E2EResult("cli", s.label_cli, times, cli_parts)
    e = cli_engine_parts[-1]
    res.notes.append(
        f"engine split (one extra run): setup and data {fmt_s(e.get('setup', 0))}, rounds "
        f"{fmt_s(e.get('step', 0))}, evaluations {fmt_s(e.get('evaluate', 0))}"
    )
    last = _median_repeat(cli_parts, times["reference"])  # the split of the total the table shows
    res.engine_split = {"setup": e.get("setup", 0.0), "rounds": e.get("step", 0.0), "evals": e.get("evaluate", 0.0)}
    res.ref_split = _ref_split(list(last.values()), len(s.cli_seeds))
    res.notes.append(
        "reference per algorithm (seed 0; setup / round / evaluation): "
        + "; ".join(f"{a}: {fmt_s(p['setup'])} / {fmt_s(p['round'])} / {fmt_s(p['eval'])}" for a, p in last.items())
    )
    results.append(res)

    # --- one DFedSAM-MGS experiment
    cfg = s.mgs
    log(f"  e2e: {s.label_mgs} (loading data)")
    data = federated_data(cfg)
    mgs_parts: list[dict] = []

    mgs_engine_parts: list[dict] = []

    def engine_mgs():
        parts: dict[str, float] = {}
        _engine_run(cfg, data, parts)
        mgs_engine_parts.append(parts)

    def reference_mgs():
        p = reference_estimate(cfg, s.ref_rounds, s.ref_evals, data=data)
        mgs_parts.append(p)
        return p["total"]

    times = interleaved(
        [Contender("engine", engine_mgs), Contender("reference", reference_mgs, measures=True)],
        s.repeats,
        warmup=False,
        log=log,
    )
    res = E2EResult("mgs", s.label_mgs, times, mgs_parts)
    p = _median_repeat(mgs_parts, times["reference"])
    e = {k: median([d.get(k, 0.0) for d in mgs_engine_parts]) for k in ("setup", "step", "evaluate")}
    res.notes.append(
        f"engine (median split): setup {fmt_s(e['setup'])}, round {fmt_s(e['step'] / cfg.rounds)} × "
        f"{cfg.rounds}, evaluation {fmt_s(e['evaluate'] / _num_evals(cfg))} × {_num_evals(cfg)}"
    )
    res.notes.append(
        f"reference: setup {fmt_s(p['setup'])}, round {fmt_s(p['round'])} × {p['rounds']}, "
        f"evaluation {fmt_s(p['eval'])} × {p['evals']}"
    )
    res.engine_split = {"setup": e["setup"], "rounds": e["step"], "evals": e["evaluate"]}
    res.ref_split = _ref_split([p])
    results.append(res)
    return results


def tables(results: list[E2EResult], s: E2ESettings) -> str:
    rows = []
    for r in results:
        e, ref = median(r.times["engine"]), median(r.times["reference"])
        rows.append([r.label, fmt_s(e), fmt_s(ref), fmt_ratio(e / ref)])
    text = markdown_table(["experiment", "engine", "reference loop (estimated)", "engine/reference"], rows)
    notes = [f"- {r.name}: {n}" for r in results for n in r.notes]
    text += (
        f"\n\nThe reference time is estimated from {s.ref_rounds} timed rounds and {s.ref_evals} timed "
        "evaluations per run (setup + T × round + evaluations × evaluation); the engine runs every round.\n\n"
        + "\n".join(notes)
    )
    return text
