r"""Paired comparisons over seeds: is method A better than method B, and could we have told?

Two runs with the same seed share the initial model, the data split and the
mini-batches, so two methods are compared seed by seed. For seeds
s = 1, ..., n with values a_s and b_s (e.g. final test accuracy, %):

    d_s = a_s − b_s,    d̄ = (1/n) Σ d_s,    s_d = sqrt( Σ (d_s − d̄)² / (n − 1) ).

**Interval** (``method="t"``, the default): the Student t-interval at
confidence 1 − α,

    d̄ ± t_{1−α/2, n−1} · s_d / √n,

exact when the d_s are independent and normal. ``method="bootstrap"`` is the
percentile bootstrap: :data:`BOOTSTRAP_RESAMPLES` resamples of the n
differences with replacement, drawn by ``numpy.random.default_rng(BOOTSTRAP_SEED)``
(so the same data always give the same interval), and the α/2 and 1 − α/2
quantiles of the resampled means. With few seeds the percentile bootstrap is
too narrow (its standard error is s_d·sqrt((n − 1)/n)/√n and it never
reaches beyond the most extreme d_s); prefer the t-interval below about 20 seeds.

**Verdict**, for a claim with a direction (``expect="greater"``: the paper says
a > b; ``"less"``: a < b):

* REPRODUCED: the interval excludes 0 on the claimed side;
* REVERSED: it excludes 0 on the other side;
* EQUIVALENT (only with a ``margin`` δ > 0): the interval contains 0 and the
  two one-sided tests (TOST) both reject, i.e. the 1 − 2α interval lies inside
  (−δ, δ): the difference is smaller than the margin in either direction. With
  95% confidence that is the 90% interval, at α = 0.05 per side;
* UNRESOLVED: neither; too few seeds (or too much spread) to tell. This is
  *not* "no effect", and it is not "equivalent": only the equivalence test can
  say that two methods match.

A margin is a statement about what matters (half a point of accuracy, say), so
the caller states it and the book justifies it; without one no comparison is
called EQUIVALENT. A REPRODUCED or REVERSED difference can also lie inside the
margin: ``within_margin`` says so (real, but smaller than what matters).

**Detectable effect** (minimum detectable effect, MDE): the smallest true mean
difference that this design (n seeds, this spread) would resolve with
probability ``power`` (default 0.8) at this confidence. For the t design, the
standard approximation

    MDE = (t_{1−α/2, n−1} + t_{power, n−1}) · s_d / √n,

which treats the t statistic under the alternative as a shifted central t
(ignoring non-centrality and the chance of rejecting on the wrong side); it
plugs in the observed s_d for the unknown σ, so it is itself an estimate. At
n = 5, α = 0.05 the exact power at this MDE (non-central t) is 0.79, and it
tends to 0.80 as n grows. For the bootstrap the normal version with the
bootstrap's standard error SE* (the standard deviation of the resampled means):
MDE = (z_{1−α/2} + z_{power}) · SE*.

**Degenerate case**: if every d_s is the same (s_d = 0, e.g. two methods that
give identical runs), both methods give the interval [d̄, d̄], the verdict is
the sign of d̄ (UNRESOLVED when d̄ = 0) and the detectable effect is 0: no
spread, so any difference would have shown.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

__all__ = [
    "PairedComparison",
    "compare_paired",
    "summarize",
    "markdown_table",
    "signed",
    "VERDICTS",
    "METHODS",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "MIN_SEEDS",
    "p_value",
    "tost_p_value",
    "holm_adjust",
    "holm",
]

VERDICTS = ("REPRODUCED", "REVERSED", "EQUIVALENT", "UNRESOLVED")
METHODS = ("t", "bootstrap")
EXPECTS = ("greater", "less")
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
#: The book's rule: a verdict needs at least this many seeds (fewer still give an interval, just a wide one).
MIN_SEEDS = 5


@dataclass(frozen=True)
class PairedComparison:
    """The per-seed paired difference a − b, its confidence interval and verdict (see the module docstring)."""

    n: int
    diffs: tuple[float, ...]
    mean: float
    std: float  # sample standard deviation of the differences
    low: float
    high: float
    detectable: float  # smallest true difference resolved with probability `power`
    expect: str  # "greater": the claim is a > b; "less": a < b
    verdict: str  # one of VERDICTS
    method: str  # one of METHODS
    confidence: float = 0.95
    power: float = 0.8
    label: str | None = None
    margin: float | None = None  # the equivalence margin δ (same unit as the values), if tested
    within_margin: bool | None = None  # TOST: the 1 − 2α interval lies inside (−δ, δ); None without a margin
    paper: str | None = None  # the paper's own difference for this comparison, with its source
    regime: str | None = None  # where it was measured: data, model, clients, graph, local work, test size, fit
    endpoint: str | None = None  # the quantity compared, e.g. "test accuracy, the mean of ... last five evaluations"

    def interval(self, digits: int = 2) -> str:
        """The mean and its interval: ``+1.23 [+0.40, +2.06]`` (typographic minus signs)."""
        return f"{signed(self.mean, digits)} [{signed(self.low, digits)}, {signed(self.high, digits)}]"

    def verdict_note(self, digits: int = 2) -> str:
        """The verdict with what qualifies it: ``UNRESOLVED (could detect ≥ 0.87)``, ``REVERSED (but within ±0.5)``."""
        if self.verdict == "UNRESOLVED":
            return self.verdict + (
                " (identical in every seed)"
                if self.std == 0 and self.mean == 0
                else f" (could detect ≥ {self.detectable:.{digits}f})"
            )
        if self.verdict == "EQUIVALENT":
            return f"{self.verdict} (within ±{self.margin:g})"
        return self.verdict + (f" (but within ±{self.margin:g})" if self.within_margin else "")

    def format(self, digits: int = 2, label: bool = True) -> str:
        """One line: ``+1.23 [+0.40, +2.06], n=5, REPRODUCED`` (with ``label: `` in front if set)."""
        text = f"{self.interval(digits)}, n={self.n}, {self.verdict_note(digits)}"
        return f"{self.label}: {text}" if label and self.label else text

    def __str__(self) -> str:
        return self.format()


def signed(x: float, digits: int) -> str:
    """``x`` with its sign and ``digits`` decimals, a typographic minus: ``signed(-1.234, 2) == "−1.23"``."""
    return f"{x:+.{digits}f}".replace("-", "−")  # a typographic minus, as in the book's text


@lru_cache(maxsize=None)
def _t_quantile(q: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(q, df))


def _floats(name: str, values: Sequence[float]) -> list[float]:
    out = [float(v) for v in values]
    for i, v in enumerate(out):
        if not math.isfinite(v):
            raise ValueError(f"{name}[{i}] is {v}; every value must be a finite number")
    return out


def _check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


def _check_probability(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ValueError(f"{name} must be a number strictly between 0 and 1; got {value!r}")


def compare_paired(
    a: Sequence[float],
    b: Sequence[float],
    *,
    expect: str = "greater",
    confidence: float = 0.95,
    power: float = 0.8,
    method: str = "t",
    label: str | None = None,
    margin: float | None = None,
) -> PairedComparison:
    """Compare per-seed values ``a`` and ``b`` (same seeds, same order) by their paired differences a − b.

    ``expect`` is the claim's direction ("greater": a > b, "less": a < b); the
    interval has coverage ``confidence``, the detectable effect is at
    ``power``; ``method`` is "t" (Student t-interval) or "bootstrap"
    (percentile bootstrap). ``margin`` δ > 0 adds the equivalence test (TOST):
    an interval that contains 0 is EQUIVALENT when the 1 − 2α interval lies
    inside (−δ, δ). Raises ValueError on unequal lengths, fewer than 2 pairs,
    non-finite values or a bad option.
    """
    _check_choice("expect", expect, EXPECTS)
    _check_choice("method", method, METHODS)
    _check_probability("confidence", confidence)
    _check_probability("power", power)
    if margin is not None and (
        isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin <= 0
    ):
        raise ValueError(f"margin must be a finite number > 0 (the equivalence margin δ), or None; got {margin!r}")
    a, b = _floats("a", a), _floats("b", b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have one value per seed for the same seeds; got {len(a)} and {len(b)} values")
    if len(a) < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds (the book's rule: {MIN_SEEDS}); got {len(a)}")
    diffs = tuple(x - y for x, y in zip(a, b))
    for i, d in enumerate(diffs):
        if not math.isfinite(d):
            raise ValueError(f"a[{i}] − b[{i}] overflows to {d}; the values must be finite and of moderate size")
    n, mean, std = len(diffs), statistics.fmean(diffs), statistics.stdev(diffs)
    alpha = 1 - confidence
    if std == 0:  # degenerate: see the module docstring
        low = high = tost_low = tost_high = mean
        detectable = 0.0
    elif method == "t":
        se = std / math.sqrt(n)
        half = _t_quantile(1 - alpha / 2, n - 1) * se
        low, high = mean - half, mean + half
        tost_half = _t_quantile(1 - alpha, n - 1) * se  # the 1 − 2α interval of the two one-sided tests
        tost_low, tost_high = mean - tost_half, mean + tost_half
        detectable = (_t_quantile(1 - alpha / 2, n - 1) + _t_quantile(power, n - 1)) * se
    else:
        import numpy as np

        rng = np.random.default_rng(BOOTSTRAP_SEED)
        means = np.asarray(diffs)[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
        low, high, tost_low, tost_high = (
            float(q) for q in np.quantile(means, [alpha / 2, 1 - alpha / 2, alpha, 1 - alpha])
        )
        z = statistics.NormalDist().inv_cdf
        detectable = (z(1 - alpha / 2) + z(power)) * float(means.std(ddof=1))
    within_margin = None if margin is None else (-margin < tost_low and tost_high < margin)
    sign = 1 if expect == "greater" else -1  # the claimed side of 0
    if sign * low > 0 and sign * high > 0:
        verdict = "REPRODUCED"
    elif sign * low < 0 and sign * high < 0:
        verdict = "REVERSED"
    elif within_margin:
        verdict = "EQUIVALENT"
    else:
        verdict = "UNRESOLVED"
    return PairedComparison(
        n=n,
        diffs=diffs,
        mean=mean,
        std=std,
        low=low,
        high=high,
        detectable=detectable,
        expect=expect,
        verdict=verdict,
        method=method,
        confidence=confidence,
        power=power,
        label=label,
        margin=margin,
        within_margin=within_margin,
    )


def _t_tail(x: float, df: int) -> float:
    """P(T > x) for Student's t with ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.sf(x, df))


def _check_t(c: PairedComparison) -> None:
    if c.method != "t":
        raise ValueError(f"p-values are defined here for the t-interval only; this comparison used {c.method!r}")


def p_value(c: PairedComparison) -> float:
    """The two-sided p-value of the paired t-test of a mean difference of 0.

    It agrees with the interval: p < 1 − confidence exactly when the interval excludes 0, so a verdict of
    REPRODUCED or REVERSED is p < 0.05 at 95% confidence. Degenerate (s_d = 0): 0 if d̄ ≠ 0, else 1.
    """
    _check_t(c)
    if c.std == 0:
        return 0.0 if c.mean != 0 else 1.0
    return min(1.0, 2 * _t_tail(abs(c.mean) / (c.std / math.sqrt(c.n)), c.n - 1))


def tost_p_value(c: PairedComparison) -> float:
    """The p-value of the two one-sided tests of equivalence within the comparison's margin δ.

    H0: |true difference| ≥ δ. Each one-sided test rejects its half of H0 (difference ≤ −δ, difference ≥ δ);
    the TOST p-value is the larger of the two, and p < α exactly when the 1 − 2α interval lies inside (−δ, δ).
    """
    _check_t(c)
    if c.margin is None:
        raise ValueError("this comparison has no margin: equivalence is tested within a stated margin δ")
    if c.std == 0:
        return 0.0 if abs(c.mean) < c.margin else 1.0
    se = c.std / math.sqrt(c.n)
    above_low = _t_tail((c.mean + c.margin) / se, c.n - 1)  # P-value of H0: difference ≤ −δ
    below_high = _t_tail((c.margin - c.mean) / se, c.n - 1)  # P-value of H0: difference ≥ δ
    return max(above_low, below_high)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: reject hypothesis k at level α when its adjusted p < α.

    Sort the m p-values, p_(1) ≤ … ≤ p_(m); the adjusted p_(i) is max_{j ≤ i} min(1, (m − j + 1)·p_(j)).
    This controls the chance of any false rejection in the family at α, for any dependence between the tests
    (Holm, 1979), and rejects at least what Bonferroni's m·p ≤ α rejects.
    """
    p = _floats("p_values", p_values)
    for i, x in enumerate(p):
        if not 0 <= x <= 1:
            raise ValueError(f"p_values[{i}] is {x}; a p-value lies in [0, 1]")
    m, order, adjusted, running = len(p), sorted(range(len(p)), key=lambda i: p[i]), [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def holm(comparisons: Sequence[PairedComparison]) -> list[str]:
    """The family's verdicts after Holm's correction, one per comparison, in the same order.

    The book's rule within a map or a table: a difference (REPRODUCED or REVERSED) stands when its
    Holm-adjusted two-sided p-value is below 1 − confidence; an EQUIVALENT verdict stands when its
    Holm-adjusted TOST p-value (over the comparisons that test equivalence) is below 1 − confidence; every
    other comparison is UNRESOLVED. The uncorrected verdicts are each comparison's own ``verdict``.
    """
    comparisons = list(comparisons)
    if not comparisons:
        return []
    alpha = 1 - comparisons[0].confidence
    if any(c.confidence != comparisons[0].confidence for c in comparisons):
        raise ValueError("a family is corrected at one confidence level; these comparisons mix levels")
    differ = holm_adjust([p_value(c) for c in comparisons])
    tested = [k for k, c in enumerate(comparisons) if c.margin is not None]
    equivalent = dict(zip(tested, holm_adjust([tost_p_value(comparisons[k]) for k in tested])))
    out = []
    for k, c in enumerate(comparisons):
        if c.verdict in ("REPRODUCED", "REVERSED") and differ[k] < alpha:
            out.append(c.verdict)
        elif c.verdict == "EQUIVALENT" and equivalent[k] < alpha:
            out.append(c.verdict)
        else:
            out.append("UNRESOLVED")
    return out


def summarize(comparisons: Iterable[PairedComparison]) -> dict[str, int]:
    """How many comparisons got each verdict: {"REPRODUCED": k, "REVERSED": k, "EQUIVALENT": k, "UNRESOLVED": k}."""
    counts = dict.fromkeys(VERDICTS, 0)
    for c in comparisons:
        counts[c.verdict] += 1
    return counts


def markdown_table(
    comparisons: Sequence[PairedComparison], digits: int = 2, corrected: Sequence[str] | None = None
) -> str:
    """claim | mean Δ | CI | detectable | verdict, one row per comparison (its label names the claim); then
    the family's corrected verdicts (``corrected``, e.g. :func:`holm`'s) when given, and the paper's Δ and
    the regime when any comparison carries them."""
    comparisons = list(comparisons)
    if corrected is not None and len(corrected) != len(comparisons):
        raise ValueError(
            f"corrected has {len(corrected)} verdicts for {len(comparisons)} comparisons; "
            f"give one per comparison, in the same order"
        )
    level = f"{comparisons[0].confidence * 100:g}%" if comparisons else "95%"
    papers = any(c.paper for c in comparisons)  # the paper's Δ and the regime: columns when any row knows them
    regimes = any(c.regime for c in comparisons)
    lines = [
        f"| claim | mean Δ | {level} CI | detectable | verdict |"
        + (" after Holm |" if corrected else "")
        + (" paper's Δ |" if papers else "")
        + (" regime |" if regimes else ""),
        "|---|---:|---|---:|---|"
        + ("---|" if corrected else "")
        + ("---:|" if papers else "")
        + ("---|" if regimes else ""),
    ]
    for k, c in enumerate(comparisons):
        verdict = c.verdict + (" (within the margin)" if c.within_margin and c.verdict != "EQUIVALENT" else "")
        row = (
            f"| {c.label or ''} | {signed(c.mean, digits)} | [{signed(c.low, digits)}, "
            f"{signed(c.high, digits)}] | {c.detectable:.{digits}f} | {verdict} |"
        )
        row += f" {corrected[k]} |" if corrected else ""
        row += f" {c.paper or '—'} |" if papers else ""
        lines.append(row + (f" {c.regime or '—'} |" if regimes else ""))
    return "\n".join(lines)
