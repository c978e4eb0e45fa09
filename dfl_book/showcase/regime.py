r"""Regime maps: where does a flat-minimum method pay, and where does it cost?

A paper's claim "SAM beats SGD" is made in one regime: its own local work
(5 local epochs of batch 128), its own ρ, its own horizon. A single comparison
outside that regime neither confirms nor refutes it. A :class:`RegimeMap` runs
the comparison over a grid instead:

* rows: local work per round, in local epochs E (K = E·⌈n/B⌉ steps,
  :attr:`dfl_core.Config.local_epochs`), from a fraction of an epoch to the
  papers' 5;
* columns: SAM's radius ρ, from the paper's value up.

Each cell is the per-seed paired difference ``treated − baseline`` in the
book's endpoint, test accuracy as the mean of each seed's last five evaluations
(``last``; a 95% t-interval, :func:`dfl_book.stats.compare_paired`), beside
what the regime was: the baseline's train accuracy and train − test gap, how
steep its test curve still was at the end (:func:`curve_slope`), and λ_max
of the Hessian where the experiment measures it. The map is an ordinary
:class:`~.runner.Experiment` (one arm per baseline row and per cell), so it
runs, resumes and is stored like every other showcase experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .runner import Experiment, ShowcaseResult

__all__ = ["RegimeMap", "Cell", "cells", "curve_slope", "summary", "FLAT_SLOPE"]

#: A test curve counts as flat when, over the last fifth of the rounds, a least-squares line through it rises
#: by less than this many accuracy points per 100 rounds.
FLAT_SLOPE = 1.0


def _number(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class RegimeMap:
    """The grid ``local_epochs`` × ``rhos`` of ``treated`` against ``baseline`` (see the module docstring).

    ``baseline`` and ``treated`` are config changes (e.g. ``dict(algorithm="dfedavg")`` and
    ``dict(algorithm="dfedsam")``); ``base`` holds what every run shares (the papers' batch, weight decay,
    rounds, …); ``extra_arms`` are further arms keyed by their label (a row's E is given as
    ``local_epochs`` in their changes).
    """

    name: str
    chapter: str
    question: str
    baseline_name: str
    treated_name: str
    baseline: Mapping[str, Any]
    treated: Mapping[str, Any]
    local_epochs: tuple[float, ...]
    rhos: tuple[float, ...]
    base: Mapping[str, Any] = field(default_factory=dict)
    extra_arms: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    measure: Callable | None = None
    profile_changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def baseline_arm(self, epochs: float) -> str:
        return f"{self.baseline_name}, E = {_number(epochs)}"

    def treated_arm(self, epochs: float, rho: float) -> str:
        return f"{self.treated_name} ρ = {_number(rho)}, E = {_number(epochs)}"

    def arms(self) -> dict[str, dict[str, Any]]:
        arms: dict[str, dict[str, Any]] = {}
        for e in self.local_epochs:
            arms[self.baseline_arm(e)] = {**self.baseline, "local_epochs": e}
            for rho in self.rhos:
                arms[self.treated_arm(e, rho)] = {**self.treated, "local_epochs": e, "rho": rho}
        return arms | {label: dict(changes) for label, changes in self.extra_arms.items()}

    def experiment(self) -> Experiment:
        return Experiment(
            self.name,
            self.chapter,
            self.question,
            arms=self.arms(),
            base=self.base,
            seeds=self.seeds,
            measure=self.measure,
            profile_changes=self.profile_changes,
        )


def curve_slope(rounds: list[int], values: list[float], fraction: float = 0.2) -> float:
    """The least-squares slope of ``values`` over the last ``fraction`` of the rounds, per 100 rounds.

    With accuracies in percent this is "points gained per 100 rounds at the
    end of the run": below :data:`FLAT_SLOPE` the curve counts as flat.
    """
    if len(rounds) != len(values) or len(rounds) < 2:
        raise ValueError(
            f"a slope needs at least 2 (round, value) pairs of equal count; got {len(rounds)} rounds "
            f"and {len(values)} values"
        )
    start = rounds[-1] - fraction * (rounds[-1] - rounds[0])
    pts = [(r, v) for r, v in zip(rounds, values) if r >= start]
    if len(pts) < 2:
        pts = list(zip(rounds, values))[-2:]
    mr = sum(r for r, _ in pts) / len(pts)
    mv = sum(v for _, v in pts) / len(pts)
    sxx = sum((r - mr) ** 2 for r, _ in pts)
    return 100 * sum((r - mr) * (v - mv) for r, v in pts) / sxx


@dataclass(frozen=True)
class Cell:
    """One cell of a regime map: the paired comparison and the regime it was measured in."""

    local_epochs: float
    local_steps: int
    rho: float
    comparison: Any  # dfl_book.stats.PairedComparison, treated − baseline, test accuracy (points)
    baseline_train_acc: float  # % (mean over seeds, last 5 evaluations)
    baseline_gap: float  # train − test accuracy of the baseline, points
    treated_train_acc: float
    treated_gap: float
    baseline_slope: float  # points per 100 rounds over the last fifth (curve_slope), mean over seeds
    lambda_max_baseline: float | None = None  # Hessian top eigenvalue at the average model, mean over seeds
    lambda_max_treated: float | None = None

    @property
    def flat(self) -> bool:
        """The baseline's test curve had flattened (:data:`FLAT_SLOPE`)."""
        return self.baseline_slope < FLAT_SLOPE


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def cells(result: ShowcaseResult, rmap: RegimeMap, margin: float | None = None, last: int = 5) -> list[Cell]:
    """Every cell of ``rmap`` from its results file, row by row (E), then by ρ.

    ``margin`` (points) turns on the equivalence test (:func:`dfl_book.stats.compare_paired`); accuracies
    are the means of the ``last`` evaluations of each run (:func:`~.runner.final_value`).
    """
    from ..stats import compare_paired

    out = []
    for e in rmap.local_epochs:
        base_arm = rmap.baseline_arm(e)
        base_acc = result.per_seed(base_arm, last=last)
        base_train = result.per_seed(base_arm, "train_acc", last=last)
        rounds, curves = result.curve(base_arm)
        slope = _mean(curve_slope(rounds, [100 * v for v in c]) for c in curves)
        steps = result.runs[(base_arm, result.seeds[0])]["config"]["local_steps"]
        lam_base = _lambda(result, base_arm)
        for rho in rmap.rhos:
            arm = rmap.treated_arm(e, rho)
            acc, train = result.per_seed(arm, last=last), result.per_seed(arm, "train_acc", last=last)
            comparison = compare_paired(acc, base_acc, expect="greater", margin=margin, label=f"{arm} vs {base_arm}")
            out.append(
                Cell(
                    e,
                    steps,
                    rho,
                    comparison,
                    _mean(base_train),
                    _mean(base_train) - _mean(base_acc),
                    _mean(train),
                    _mean(train) - _mean(acc),
                    slope,
                    lam_base,
                    _lambda(result, arm),
                )
            )
    return out


def _lambda(result: ShowcaseResult, arm: str) -> float | None:
    run = result.runs[(arm, result.seeds[0])]
    if "lambda_max" not in run.get("measures", {}):
        return None
    return _mean(result.measure(arm, "lambda_max"))


def _where(group: list[Cell]) -> str:
    return "; ".join(f"E = {c.local_epochs:g}, ρ = {c.rho:g} ({c.comparison.interval()})" for c in group)


def summary(grid: list[Cell], treated: str, baseline: str, unit: str = "points") -> str:
    """Markdown bullets, worded from the cells: where ``treated`` pays, where it costs, where it matches
    ``baseline`` and where the seeds could not tell (with the smallest difference they could have seen)."""
    by = {
        v: [c for c in grid if c.comparison.verdict == v]
        for v in ("REPRODUCED", "REVERSED", "EQUIVALENT", "UNRESOLVED")
    }
    lines = []
    if by["REPRODUCED"]:
        small = [c for c in by["REPRODUCED"] if c.comparison.within_margin]
        size = ""
        if small:
            size = (
                f" All of these gains lie within the ±{small[0].comparison.margin:g}-{unit} margin."
                if len(small) == len(by["REPRODUCED"])
                else f" Of these, {_where(small)} lie within the ±{small[0].comparison.margin:g}-{unit} margin."
            )
        lines.append(f"- **{treated} pays** (beats {baseline}, 95% CI above 0) at {_where(by['REPRODUCED'])}.{size}")
    else:
        lines.append(f"- **{treated} beats {baseline} in no cell** of the map.")
    if by["REVERSED"]:
        lines.append(f"- **{treated} costs** ({baseline} is better, 95% CI below 0) at {_where(by['REVERSED'])}.")
    if by["EQUIVALENT"]:
        margin = by["EQUIVALENT"][0].comparison.margin
        lines.append(f"- **Equivalent** within ±{margin:g} {unit} at {_where(by['EQUIVALENT'])}.")
    if by["UNRESOLVED"]:
        detect = max(c.comparison.detectable for c in by["UNRESOLVED"])
        lines.append(
            f"- **Unresolved** at {_where(by['UNRESOLVED'])}: these seeds would have resolved "
            f"differences of about {detect:.2f} {unit} or more."
        )
    lines.append(_holm_line(grid, treated))
    return "\n".join(lines)


def _holm_line(grid: list[Cell], treated: str) -> str:
    """The map's verdicts after Holm's correction over its cells (the book's rule for a family)."""
    from ..stats import holm

    corrected = holm([c.comparison for c in grid])
    stand = {v: [c for c, h in zip(grid, corrected) if h == v] for v in ("REPRODUCED", "REVERSED", "EQUIVALENT")}
    words = {"REPRODUCED": f"{treated} pays", "REVERSED": f"{treated} costs", "EQUIVALENT": "equivalent"}
    kept = [
        f"{words[v]} at " + "; ".join(f"E = {c.local_epochs:g}, ρ = {c.rho:g}" for c in cs)
        for v, cs in stand.items()
        if cs
    ]
    cells_text = f"{len(grid)} cell{'s' if len(grid) != 1 else ''}"
    return f"- **After Holm's correction** over the map's {cells_text}: " + (
        "; ".join(kept) + ", every other cell unresolved." if kept else "every cell is unresolved."
    )
