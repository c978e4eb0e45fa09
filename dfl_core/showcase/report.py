"""What a chapter shows of a showcase experiment: curves, paired verdicts, and sentences built from them.

The chapters never type a showcase number into their prose. They ask this
module for the verdict table and for the summary sentences, both computed from
the committed results file, so that the prose cannot contradict the evidence:

.. code-block:: python

    result = showcase.load("ch05-dfedsam")
    claims = [Claim("DFedSAM beats DFedAvg on the ring", "DFedSAM, ρ = 0.01", "DFedAvg")]
    verdicts = judge(result, claims)
    verdict_table(verdicts)          # Markdown: claim | mean Δ | 95% CI | detectable | verdict
    summary(verdicts)                # Markdown bullets: what reproduced, what reversed, what stayed open
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .runner import ShowcaseResult, load

__all__ = ["Claim", "judge", "verdict_table", "summary", "rerun_matches", "provenance_line", "regeneration_hours"]


@dataclass(frozen=True)
class Claim:
    """A paper's claim as a comparison of two arms: ``better`` beats ``worse`` on ``metric`` (× ``scale``).

    ``expect="less"`` for quantities where lower is the paper's direction (λ_max, the generalization gap).
    ``measure=True`` reads a per-run measure (e.g. ``lambda_max``) instead of a history metric.
    """

    text: str
    better: str
    worse: str
    metric: str = "test_acc"
    expect: str = "greater"
    scale: float = 100.0
    measure: bool = False
    unit: str = "points"


def judge(result: ShowcaseResult, claims: list[Claim]):
    """One :class:`~dfl_core.stats.PairedComparison` per claim (95% t-interval over the seeds)."""
    from ..stats import compare_paired

    out = []
    for c in claims:
        if c.measure:
            a = [c.scale * v for v in result.measure(c.better, c.metric)]
            b = [c.scale * v for v in result.measure(c.worse, c.metric)]
        else:
            a, b = result.per_seed(c.better, c.metric, scale=c.scale), result.per_seed(c.worse, c.metric, scale=c.scale)
        out.append(compare_paired(a, b, expect=c.expect, label=c.text))
    return out


def _markdown(text: str):
    try:
        from IPython.display import Markdown
        return Markdown(text)
    except ImportError:                           # outside Jupyter the text itself
        return text


def verdict_table(verdicts, digits: int = 2, unit: str = "points"):
    """The verdicts as a Markdown table (claim, mean paired difference, 95% interval, detectable effect, verdict)."""
    from ..stats import markdown_table
    return _markdown(markdown_table(verdicts, digits=digits) + f"\n\nDifferences in {unit}; 95% t-intervals over "
                     f"{verdicts[0].n} seeds, paired by seed.")


def _sentence(v, digits: int) -> str:
    from ..stats import _signed                           # the typographic minus of the verdict tables

    interval = f"{_signed(v.mean, digits)} [{_signed(v.low, digits)}, {_signed(v.high, digits)}]"
    if v.verdict == "REPRODUCED":
        return f"**{v.label}**: reproduced ({interval})."
    if v.verdict == "REVERSED":
        return f"**{v.label}**: reversed, the opposite holds ({interval})."
    detect = f"{v.detectable:.{digits}f}" if math.isfinite(v.detectable) else "∞"
    return (f"**{v.label}**: unresolved ({interval}); with these seeds only a difference of about {detect} or "
            f"more would have shown.")


def summary(verdicts, digits: int = 2):
    """One Markdown bullet per verdict, worded from the verdict itself."""
    return _markdown("\n".join(f"- {_sentence(v, digits)}" for v in verdicts))


def rerun_matches(name: str, arm: str, seed: int = 0, rounds: int = 10, tolerance: float = 0.005) -> dict:
    """Rerun one committed run live up to its first evaluation at or after round ``rounds``, and compare its
    test accuracy there.

    Training drifts in the last bits across CPUs and torch builds, so the
    comparison has a margin: ``tolerance`` in accuracy (0.005 = half a point).
    Returns the round, the committed and the rerun value and whether they agree.
    """
    from ..engine import Simulation
    from ..profiles import get_profile
    from .experiments import EXPERIMENTS

    result = load(name)
    prof = get_profile(result.doc["profile"])
    at, committed = next((r["round"], r["test_acc"]) for r in result.history(arm, seed) if r["round"] >= rounds)
    cfg = EXPERIMENTS[name].config(arm, seed, prof).replace(rounds=at, eval_every=at)
    rerun = Simulation(cfg, data=prof.data(cfg)).run().final["test_acc"]
    return {"round": at, "committed": committed, "rerun": rerun, "agree": abs(rerun - committed) <= tolerance}


def provenance_line(result: ShowcaseResult) -> str:
    """Where the numbers come from, in one line: command, seeds, machine, date and CPU hours of training."""
    p = result.provenance
    return (f"{result.name}: `{p['command']}`, seeds {', '.join(map(str, p['seeds']))}, {p['machine']}, "
            f"{p['date']}, {result.cpu_time_s() / 3600:.2f} CPU hours of training")


def regeneration_hours(names: list[str]) -> float:
    """CPU hours of the named experiments' committed runs (one thread each; ``--jobs 2`` runs two at once)."""
    return sum(load(n).cpu_time_s() for n in names) / 3600


