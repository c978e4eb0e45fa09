"""Paired comparisons over seeds (dfl_book.stats) on cases whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from dfl_book.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    PairedComparison,
    compare_paired,
    markdown_table,
    summarize,
)


def test_t_interval_by_hand():
    # d = 1, 2, 3, 4, 5: mean 3, s_d = sqrt(2.5), t_{0.975, 4} = 2.7764451 (printed tables)
    c = compare_paired([11, 12, 13, 14, 15], [10, 10, 10, 10, 10])
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)
    assert c.diffs == (1, 2, 3, 4, 5) and c.n == 5 and c.method == "t"
    assert (c.mean, c.std) == pytest.approx((3.0, math.sqrt(2.5)))
    assert (c.low, c.high) == pytest.approx((3 - half, 3 + half), abs=1e-6)
    assert (c.low, c.high) == pytest.approx((1.0368, 4.9632), abs=1e-4)
    assert c.verdict == "REPRODUCED" and c.expect == "greater"
    # the same interval as scipy's own
    lo, hi = sps.t.interval(0.95, 4, loc=3, scale=math.sqrt(2.5 / 5))
    assert (c.low, c.high) == pytest.approx((lo, hi))
    # confidence 0.90 uses t_{0.95, 4} = 2.1318468
    c90 = compare_paired([11, 12, 13, 14, 15], [10] * 5, confidence=0.90)
    assert c90.high - c90.mean == pytest.approx(2.1318468 * math.sqrt(0.5), abs=1e-6)


def test_symmetric_differences_give_an_interval_around_zero():
    c = compare_paired([1, -1, 2, -2, 0.5, -0.5], [0] * 6)
    assert c.mean == pytest.approx(0) and c.low < 0 < c.high
    assert c.low == pytest.approx(-c.high)
    assert c.verdict == "UNRESOLVED"
    assert c.detectable > c.high  # 80% power needs more than the half-width


def test_a_large_consistent_effect_is_reproduced_and_its_mirror_reversed():
    better = [90.1, 91.3, 89.7, 90.8, 90.5]
    worse = [85.0, 86.1, 84.9, 85.7, 85.2]
    c = compare_paired(better, worse)
    assert c.verdict == "REPRODUCED" and c.low > 4
    m = compare_paired(worse, better)
    assert m.verdict == "REVERSED" and m.high < -4
    # a claim that a < b: the mirror reproduces it, the original reverses it
    assert compare_paired(worse, better, expect="less").verdict == "REPRODUCED"
    assert compare_paired(better, worse, expect="less").verdict == "REVERSED"
    assert compare_paired([1, -1, 2, -2], [0] * 4, expect="less").verdict == "UNRESOLVED"


def test_pairing_matters_a_shared_seed_effect_cancels():
    # each seed shifts both methods alike; the unpaired spread is large, the paired one is small
    seed_effect = [0.0, 5.0, -4.0, 8.0, -6.0]
    a = [s + 1.0 + e for s, e in zip(seed_effect, [0.1, -0.1, 0.0, 0.05, -0.05])]
    c = compare_paired(a, seed_effect)
    assert c.verdict == "REPRODUCED" and c.std < 0.1


def test_mde_formula_and_power_by_monte_carlo():
    n, sigma = 5, 1.0
    # differences with mean 0 and sample sd exactly sigma
    base = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    base = base / base.std(ddof=1) * sigma
    c = compare_paired(base, np.zeros(n))
    t_crit, t_pow = sps.t.ppf(0.975, n - 1), sps.t.ppf(0.8, n - 1)
    mde = (t_crit + t_pow) * sigma / math.sqrt(n)
    assert c.detectable == pytest.approx(mde)
    assert c.detectable == pytest.approx((2.7764451 + 0.9409646) / math.sqrt(5), abs=1e-6)
    # independent check: the exact power at this effect (non-central t) is close to 0.8 ...
    exact = 1 - sps.nct.cdf(t_crit, n - 1, mde * math.sqrt(n) / sigma)
    assert exact == pytest.approx(0.791, abs=0.002)
    # ... and a simulated design with true effect = MDE is resolved about 80% of the time
    rng = np.random.default_rng(12345)
    trials = 5000  # about 1 s; Monte Carlo sd ≈ 0.006
    hits = sum(compare_paired(rng.normal(mde, sigma, n), np.zeros(n)).verdict == "REPRODUCED" for _ in range(trials))
    assert hits / trials == pytest.approx(exact, abs=0.025)  # ≈ 4 Monte Carlo sd (this seed: 0.784)
    assert hits / trials == pytest.approx(0.8, abs=0.03)


def test_mde_scales_like_one_over_root_n():
    rng = np.random.default_rng(0)
    d = rng.normal(0, 1, 400)
    small, large = compare_paired(d[:100], np.zeros(100)), compare_paired(d, np.zeros(400))
    assert small.detectable / large.detectable == pytest.approx(2 * small.std / large.std, rel=0.02)


def test_bootstrap_on_a_fixed_seed():
    a, b = [11, 12, 13, 14, 15], [10] * 5
    c = compare_paired(a, b, method="bootstrap")
    assert c.method == "bootstrap" and c == compare_paired(a, b, method="bootstrap")  # reproducible
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    d = np.array([1.0, 2, 3, 4, 5])
    means = d[rng.integers(0, 5, size=(BOOTSTRAP_RESAMPLES, 5))].mean(axis=1)
    assert (c.low, c.high) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    # percentile bootstrap is narrower than t with 5 seeds, and stays inside [min d, max d]
    t = compare_paired(a, b)
    assert t.low < c.low and c.high < t.high and 1 <= c.low and c.high <= 5
    assert c.detectable == pytest.approx((1.959964 + 0.841621) * means.std(ddof=1), rel=1e-5)
    assert c.verdict == "REPRODUCED"


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_all_differences_equal(method):
    c = compare_paired([3.0, 4.0, 5.0], [2.0, 3.0, 4.0], method=method)
    assert (c.mean, c.std, c.low, c.high, c.detectable, c.verdict) == (1, 0, 1, 1, 0, "REPRODUCED")
    assert compare_paired([2.0, 3.0], [3.0, 4.0], method=method).verdict == "REVERSED"
    same = compare_paired([96.66, 97.5], [96.66, 97.5], method=method)
    assert (same.low, same.high, same.verdict) == (0, 0, "UNRESOLVED")
    assert str(same) == "+0.00 [+0.00, +0.00], n=2, UNRESOLVED (identical in every seed)"


def test_one_line_format():
    c = compare_paired([11, 12, 13, 14, 15], [10] * 5)
    assert str(c) == "+3.00 [+1.04, +4.96], n=5, REPRODUCED"
    u = compare_paired([1, -1, 2, -2, 0.5], [0] * 5, label="ring: A > B")
    assert str(u) == "ring: A > B: +0.10 [−1.88, +2.08], n=5, UNRESOLVED (could detect ≥ 2.65)"
    assert u.format(label=False).startswith("+0.10 [−1.88")
    assert "−" in str(compare_paired([0, 0], [1, 1.5])) and "-" not in str(compare_paired([0, 0], [1, 1.5]))


def test_summarize_and_markdown_table():
    cs = [
        compare_paired([5, 6, 7], [1, 2, 3.5], label="A beats B"),
        compare_paired([1, 2, 3.5], [5, 6, 7], label="B beats A"),
        compare_paired([1, -1, 2], [0, 0, 0], label="C beats D"),
    ]
    assert summarize(cs) == {"REPRODUCED": 1, "REVERSED": 1, "EQUIVALENT": 0, "UNRESOLVED": 1}
    assert summarize([]) == {"REPRODUCED": 0, "REVERSED": 0, "EQUIVALENT": 0, "UNRESOLVED": 0}
    md = markdown_table(cs).splitlines()
    assert md[0] == "| claim | mean Δ | 95% CI | detectable | verdict |"
    assert len(md) == 5 and md[2] == "| A beats B | +3.83 | [+3.12, +4.55] | 0.89 | REPRODUCED |"
    assert md[3].startswith("| B beats A | −3.83 | [−4.55, −3.12] |")


def test_a_verdict_table_names_its_endpoint_and_corrects_its_family():
    """Two comparisons each just resolved alone: Holm's correction over the pair keeps neither, and the table
    shows both verdicts side by side, captioned with the endpoint and the family."""
    from dfl_book.showcase.report import ENDPOINT, verdict_table

    base = [0.0, 0.0, 0.0, 0.0, 0.0]
    weak = [compare_paired([1.0, 0.1, 0.9, 0.2, 0.8], base, label=f"claim {k}") for k in (1, 2)]
    assert [c.verdict for c in weak] == ["REPRODUCED", "REPRODUCED"] and holm(weak) == ["UNRESOLVED"] * 2
    md = getattr(verdict_table(weak), "data", None) or verdict_table(weak)
    assert "| verdict | after Holm |" in md and "| REPRODUCED | UNRESOLVED |" in md
    assert f"Endpoint: {ENDPOINT}." in md and "Family: these 2 comparisons, corrected by Holm's method" in md
    single = getattr(verdict_table(weak[:1]), "data", None) or verdict_table(weak[:1])
    assert "after Holm" not in single and "One comparison: no family to correct." in single
    part = getattr(verdict_table(weak[:1], family=weak), "data", None) or verdict_table(weak[:1], family=weak)
    assert "| REPRODUCED | UNRESOLVED |" in part and "these 1 and 1 more comparisons, 2 in all" in part
    with pytest.raises(ValueError, match="verdicts not in the family given"):
        verdict_table(weak, family=weak[:1])
    with pytest.raises(ValueError, match="corrected has 1 verdicts for 2 comparisons"):
        markdown_table(weak, corrected=["UNRESOLVED"])


def test_a_summary_says_what_survives_holms_correction():
    """Each resolved verdict's bullet says whether it stands after Holm over its family; unresolved ones add
    nothing; a single comparison has no family to correct."""
    from dfl_book.showcase.report import summary

    base = [0.0] * 5
    weak = [compare_paired([1.0, 0.1, 0.9, 0.2, 0.8], base, label=f"claim {k}") for k in (1, 2)]
    strong = compare_paired([3.0, 3.1, 2.9, 3.2, 2.8], base, label="strong")
    none = compare_paired([1.0, -1.0, 0.5, -0.5, 0.1], base, label="none")
    text = str(summary([*weak, strong, none]))
    lines = text.splitlines()
    assert len(lines) == 4 and all(line.startswith("- **") for line in lines)
    assert lines[0].endswith("After Holm's correction over the family of 4: unresolved.")
    assert lines[2].endswith("It stands after Holm's correction over the family of 4.")
    assert "Holm" not in lines[3] and "unresolved" in lines[3]
    assert "Holm" not in str(summary(weak[:1]))
    part = str(summary(weak[:1], family=[*weak, strong]))
    assert part.endswith("After Holm's correction over the family of 3: unresolved.")
    with pytest.raises(ValueError, match="every verdict must be in the family given"):
        summary([strong], family=weak)


def test_a_verdict_table_states_each_rows_endpoint_and_the_regime_its_rows_share():
    """Rows that compare different quantities name each one; the regime parts every row shares move to the
    caption, and the regime column keeps what differs (or disappears when nothing does)."""
    import dataclasses

    from dfl_book.showcase.report import verdict_table

    base = compare_paired([1.0, 1.1, 0.9, 1.2, 0.8], [0.0] * 5, label="A beats B")
    shared = "Fashion-MNIST (Dirichlet 0.3), 2NN; E = 5 (K = 20, B = 128), T = 100"
    rows = [
        dataclasses.replace(base, endpoint="test accuracy", regime=f"{shared}; B: train 88.3%, gap 4.5"),
        dataclasses.replace(base, endpoint="λ_max", regime=f"{shared}; C: train 90.0%, gap 5.0"),
        dataclasses.replace(base, endpoint="test accuracy", regime=f"{shared}; B: train 88.3%, gap 4.5"),
    ]
    md = str(verdict_table(rows))
    assert "Endpoints: rows 1 and 3, test accuracy; row 2, λ_max." in md
    assert f"Regime of every row: {shared}." in md
    assert "| regime |" in md and "| B: train 88.3%, gap 4.5 |" in md and "paper's Δ" not in md
    same = str(verdict_table(rows[:1] + rows[2:]))
    assert "| regime |" not in same and "Endpoint: test accuracy." in same and "B: train 88.3%, gap 4.5." in same
    assert "Endpoint: λ_max of x." in str(verdict_table(rows, endpoint="λ_max of x"))  # a stated endpoint wins


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(a=[1, 2, 3], b=[1, 2]), "one value per seed for the same seeds; got 3 and 2 values"),
        (dict(a=[1], b=[2]), "needs at least 2 seeds (the book's rule: 5); got 1"),
        (dict(a=[], b=[]), "needs at least 2 seeds"),
        (dict(a=[1, float("nan")], b=[1, 2]), "a[1] is nan; every value must be a finite number"),
        (dict(a=[1, 2], b=[float("inf"), 2]), "b[0] is inf; every value must be a finite number"),
        (dict(a=[1e308, 1], b=[-1e308, 2]), "a[0] − b[0] overflows to inf"),
        (dict(a=[1, 2], b=[2, 3], expect="bigger"), "expect must be one of 'greater', 'less'; got 'bigger'"),
        (dict(a=[1, 2], b=[2, 3], method="z"), "method must be one of 't', 'bootstrap'; got 'z'"),
        (dict(a=[1, 2], b=[2, 3], confidence=95), "confidence must be a number strictly between 0 and 1; got 95"),
        (dict(a=[1, 2], b=[2, 3], confidence=1.0), "confidence must be a number strictly between 0 and 1; got 1.0"),
        (dict(a=[1, 2], b=[2, 3], power=0), "power must be a number strictly between 0 and 1; got 0"),
        (dict(a=[1, 2], b=[2, 3], power="high"), "power must be a number strictly between 0 and 1; got 'high'"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, message):
    a, b = kwargs.pop("a"), kwargs.pop("b")
    with pytest.raises(ValueError) as err:
        compare_paired(a, b, **kwargs)
    assert message in str(err.value)


values = st.floats(-1000, 1000, allow_nan=False, allow_subnormal=False)


@settings(max_examples=150, deadline=None)
@given(
    pairs=st.lists(st.tuples(values, values), min_size=2, max_size=10),
    method=st.sampled_from(["t", "bootstrap"]),
    expect=st.sampled_from(["greater", "less"]),
)
def test_swapping_a_and_b_negates_the_difference_and_swaps_the_verdict(pairs, method, expect):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ab = compare_paired(a, b, method=method, expect=expect)
    ba = compare_paired(b, a, method=method, expect=expect)
    tol = 1e-9 * (1 + max(map(abs, ab.diffs)))
    assert ba.mean == pytest.approx(-ab.mean, abs=tol)
    assert (ba.low, ba.high) == pytest.approx((-ab.high, -ab.low), abs=tol)
    assert ba.detectable == pytest.approx(ab.detectable, abs=tol)
    swapped = {"REPRODUCED": "REVERSED", "REVERSED": "REPRODUCED", "UNRESOLVED": "UNRESOLVED"}
    assert ba.verdict == swapped[ab.verdict]
    assert isinstance(ab, PairedComparison) and ab.low <= ab.mean <= ab.high


# ---------------------------------------------------------------- equivalence (TOST)
def test_equivalent_known_case():
    """d = (+0.1, −0.1, +0.2, −0.2, 0): mean 0, s_d = sqrt(0.025) = 0.1581, se = 0.0707; t_{0.95,4} = 2.1318, so
    the 90% interval is ±0.1508: inside ±0.5 (EQUIVALENT), not inside ±0.1 (UNRESOLVED)."""
    a, b = [10.1, 9.9, 10.2, 9.8, 10.0], [10.0] * 5
    eq = compare_paired(a, b, margin=0.5)
    assert eq.verdict == "EQUIVALENT" and eq.within_margin is True
    assert eq.low < 0 < eq.high
    assert str(eq).endswith("EQUIVALENT (within ±0.5)")
    tight = compare_paired(a, b, margin=0.1)
    assert tight.verdict == "UNRESOLVED" and tight.within_margin is False
    assert compare_paired(a, b).verdict == "UNRESOLVED" and compare_paired(a, b).within_margin is None
    # the boundary: the 90% half-width is t_{0.95,4}·se = 2.131847·0.0707107 = 0.150745
    assert compare_paired(a, b, margin=0.1508).verdict == "EQUIVALENT"
    assert compare_paired(a, b, margin=0.1507).verdict == "UNRESOLVED"


def test_equivalence_needs_the_whole_one_sided_intervals():
    """A mean inside the margin is not enough: a wide spread stays UNRESOLVED, and a mean outside the margin
    with an interval through 0 can never be EQUIVALENT."""
    wide = compare_paired([2, -2, 1.5, -1.5, 0.2], [0] * 5, margin=0.5)
    assert abs(wide.mean) < 0.5 and wide.verdict == "UNRESOLVED"
    assert compare_paired([1.0, -0.2, 0.9, 1.1, -0.1], [0] * 5, margin=0.5).verdict == "UNRESOLVED"


def test_a_resolved_difference_inside_the_margin_keeps_its_direction():
    """+0.11 in every seed is REVERSED against a claimed "less", and flagged as smaller than the margin."""
    c = compare_paired([0.10, 0.12, 0.11, 0.10, 0.12], [0] * 5, expect="less", margin=0.5)
    assert c.verdict == "REVERSED" and c.within_margin is True
    assert str(c).endswith("REVERSED (but within ±0.5)")
    big = compare_paired([3.0, 3.2, 2.9, 3.1, 3.3], [0] * 5, margin=0.5)
    assert big.verdict == "REPRODUCED" and big.within_margin is False and str(big).endswith("REPRODUCED")


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_equivalence_identical_runs(method):
    same = compare_paired([96.0, 97.5, 95.0], [96.0, 97.5, 95.0], margin=0.5, method=method)
    assert same.verdict == "EQUIVALENT"


def test_bootstrap_equivalence_uses_the_alpha_quantiles():
    a, b = [10.1, 9.9, 10.2, 9.8, 10.0, 10.05, 9.95], [10.0] * 7
    assert compare_paired(a, b, margin=0.5, method="bootstrap").verdict == "EQUIVALENT"
    assert compare_paired(a, b, margin=0.01, method="bootstrap").verdict == "UNRESOLVED"


@pytest.mark.parametrize("margin", [0, -0.5, float("nan"), float("inf"), True, "0.5"])
def test_bad_margin(margin):
    with pytest.raises(ValueError, match="margin must be a finite number > 0"):
        compare_paired([1, 2, 3], [1, 2, 2], margin=margin)


# ------------------------------------------------------------------------------- p-values and Holm's correction
from hypothesis import assume  # noqa: E402

from dfl_book.stats import holm, holm_adjust, p_value, tost_p_value  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=5, max_size=8),
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=5, max_size=8),
    st.floats(0.05, 3),
)
def test_the_p_values_agree_with_the_intervals(a, b, margin):
    n = min(len(a), len(b))
    c = compare_paired(a[:n], b[:n], margin=margin)
    assume(c.std > 1e-6)
    p, q = p_value(c), tost_p_value(c)
    edge = 1e-9  # a p-value within rounding of α is either side
    if abs(p - 0.05) > edge:
        assert (p < 0.05) == (c.low > 0 or c.high < 0), (p, c)
    if abs(q - 0.05) > edge:
        assert (q < 0.05) == bool(c.within_margin), (q, c)


def test_p_value_by_hand():
    # d = (1, 2, 3): mean 2, s_d = 1, t = 2·√3 = 3.4641 on 2 degrees of freedom; two-sided p = 0.07418
    c = compare_paired([1, 2, 3], [0, 0, 0])
    assert p_value(c) == pytest.approx(0.0741799, abs=1e-6)


def test_holm_by_hand_and_its_properties():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4·0.005, 3·0.01, 2·0.03, max(that, 1·0.04)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm_adjust([]) == []
    with pytest.raises(ValueError, match=r"p_values\[1\] is 1.5"):
        holm_adjust([0.1, 1.5])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_holm_adjusted_p_values_are_monotone_and_between_raw_and_bonferroni(p):
    adjusted = holm_adjust(p)
    m = len(p)
    for raw, adj in zip(p, adjusted):
        assert raw - 1e-12 <= adj <= min(1.0, m * raw) + 1e-12
    order = sorted(range(m), key=lambda i: p[i])
    assert all(adjusted[i] <= adjusted[j] + 1e-12 for i, j in zip(order, order[1:]))


def test_holm_keeps_strong_differences_and_drops_weak_ones():
    strong = compare_paired([5.1, 5.3, 4.9, 5.2, 5.0], [0, 0, 0, 0, 0])  # p ≈ 1e-7
    weak = compare_paired([0.9, 0.1, 0.6, 0.3, 0.8], [0, 0, 0, 0, 0])  # p ≈ 0.02
    assert weak.verdict == "REPRODUCED" and 0.01 < p_value(weak) < 0.05
    nulls = [compare_paired([0.3, -0.2, 0.1, -0.4, 0.2], [0] * 5) for _ in range(8)]
    assert holm([strong, weak]) == ["REPRODUCED", "REPRODUCED"]  # a family of 2: 2·0.02 < 0.05
    assert holm([strong, weak, *nulls])[:2] == ["REPRODUCED", "UNRESOLVED"]  # of 10: 9·0.02 > 0.05
    with pytest.raises(ValueError, match="bootstrap"):
        p_value(compare_paired([1, 2, 3], [0, 0, 0], method="bootstrap"))
