"""Regime maps: the grid of paired comparisons, the flatness of a curve, and the map figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from dfl_book import plots  # noqa: E402
from dfl_book.profiles import get_profile  # noqa: E402
from dfl_book.showcase import load, run_experiment  # noqa: E402
from dfl_book.showcase.experiments import EXPERIMENTS, PAPER_LOCAL_TRAINING, REGIME_MAPS  # noqa: E402
from dfl_book.showcase.regime import FLAT_SLOPE, Cell, RegimeMap, cells, curve_slope  # noqa: E402
from dfl_book.stats import compare_paired  # noqa: E402


def test_curve_slope_is_points_per_100_rounds_over_the_last_fifth():
    rounds = list(range(0, 101, 5))
    assert curve_slope(rounds, [0.5 * r for r in rounds]) == pytest.approx(50)
    # a curve that rose and then stayed flat over its last fifth
    values = [min(r, 70) for r in rounds]
    assert curve_slope(rounds, values) == pytest.approx(0) and curve_slope(rounds, values) < FLAT_SLOPE
    assert curve_slope(rounds, values, fraction=1.0) > FLAT_SLOPE
    with pytest.raises(ValueError, match="at least 2"):
        curve_slope([1], [1.0])


def test_the_maps_rows_are_the_papers_local_work():
    """At the showcase size (500 images a client, batch 128) E = 0.25, 1, 5 are K = 1, 4, 20 steps."""
    profile = get_profile("showcase")
    rmap = REGIME_MAPS["dfedsam-regime"]
    exp = EXPERIMENTS["dfedsam-regime"]
    assert set(exp.arms) == set(rmap.arms())
    steps = {e: exp.config(rmap.baseline_arm(e), 0, profile).params.local_steps for e in rmap.local_epochs}
    assert steps == {0.25: 1, 1: 4, 5: 20}
    protocol = exp.config(rmap.treated_arm(5, 0.01), 0, profile)
    assert {k: getattr(protocol, k) for k in PAPER_LOCAL_TRAINING} == PAPER_LOCAL_TRAINING
    assert (protocol.algorithm, protocol.params.rho, protocol.params.topology) == ("dfedsam", 0.01, "ring")
    for e in rmap.local_epochs:  # each cell differs from its row's baseline in one thing
        base = exp.config(rmap.baseline_arm(e), 0, profile).to_dict()
        for rho in rmap.rhos:
            cell = exp.config(rmap.treated_arm(e, rho), 0, profile).to_dict()
            changed = {k for k in base if base[k] != cell[k]}  # the run's fields and DFedAvg's hyperparameters
            assert changed == {"algorithm"} and cell["rho"] == rho  # DFedSAM adds SAM's, ρ among them


TINY_MAP = RegimeMap(
    "tiny-map",
    "test",
    "Does a tiny map run?",
    "DFedAvg",
    "DFedSAM",
    dict(algorithm="dfedavg"),
    dict(algorithm="dfedsam"),
    local_epochs=(0.25, 2),
    rhos=(0.05,),
    base=dict(dataset="digits", train_size=None, test_size=None, num_clients=4, rounds=2, eval_every=1, batch_size=32),
    seeds=(0, 1, 2),
)


def test_cells_are_the_paired_comparisons_of_each_row_with_its_regime(tmp_path, monkeypatch):
    monkeypatch.setitem(EXPERIMENTS, "tiny-map", TINY_MAP.experiment())
    run_experiment("tiny-map", "fast", out=tmp_path, checkpoints=tmp_path / "ck", progress=False)
    result = load("tiny-map", tmp_path)
    grid = cells(result, TINY_MAP, margin=0.5)
    assert [(c.local_epochs, c.rho, c.local_steps) for c in grid] == [
        (0.25, 0.05, 3),
        (2, 0.05, 24),
    ]  # ⌈359.5/32⌉ = 12 a epoch
    for c in grid:
        treated, base = TINY_MAP.treated_arm(c.local_epochs, c.rho), TINY_MAP.baseline_arm(c.local_epochs)
        expected = compare_paired(result.per_seed(treated), result.per_seed(base), margin=0.5)
        assert (c.comparison.mean, c.comparison.low, c.comparison.verdict) == (
            expected.mean,
            expected.low,
            expected.verdict,
        )
        train, test = result.per_seed(base, "train_acc"), result.per_seed(base)
        assert c.baseline_train_acc == pytest.approx(sum(train) / 3)
        assert c.baseline_gap == pytest.approx(sum(train) / 3 - sum(test) / 3)
        assert c.lambda_max_baseline is None  # this map measures no Hessian


def _cell(e, rho, mean, low, high, verdict):
    comparison = compare_paired([mean] * 2, [0.0] * 2)
    comparison = comparison.__class__(
        **{**comparison.__dict__, "mean": mean, "low": low, "high": high, "verdict": verdict}
    )
    return Cell(e, int(4 * e) or 1, rho, comparison, 90.0, 2.0, 89.0, 1.0, 0.2)


def test_the_map_fills_resolved_cells_and_marks_the_boundary():
    grid = [
        _cell(0.25, 0.01, -0.5, -0.8, -0.2, "REVERSED"),
        _cell(0.25, 0.2, -2.0, -3.0, -1.0, "REVERSED"),
        _cell(5, 0.01, 1.0, 0.4, 1.6, "REPRODUCED"),
        _cell(5, 0.2, 0.1, -0.5, 0.7, "UNRESOLVED"),
    ]
    fig, ax = plt.subplots()
    plots.regime_map(ax, grid, treated="DFedSAM")
    squares = {(round(p.get_x() + 0.45), round(p.get_y() + 0.45)): p for p in ax.patches}
    assert squares[(0, 1)].get_facecolor()[:3] != (1.0, 1.0, 1.0)  # E = 5, ρ = 0.01: filled
    assert squares[(1, 1)].get_facecolor()[:3] == (1.0, 1.0, 1.0)  # E = 5, ρ = 0.2: hollow
    # the solid boundary surrounds the one paying cell: below it (to E = 0.25) and right of it (to ρ = 0.2);
    # the dashed one lies between the costing row E = 0.25 and the row above it
    solid = sorted(
        (tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines if line.get_linestyle() == "-"
    )
    dashed = sorted(
        (tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines if line.get_linestyle() == "--"
    )
    assert solid == [((-0.5, 0.5), (0.5, 0.5)), ((0.5, 0.5), (0.5, 1.5))]
    assert dashed == [((-0.5, 0.5), (0.5, 0.5)), ((0.5, 1.5), (0.5, 0.5))]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.2"]
    assert ax.get_yticklabels()[1].get_text().startswith("E = 5 (K = 20)")
    assert "still rising" not in ax.get_yticklabels()[1].get_text()  # slope 0.2 < FLAT_SLOPE: flat
    plt.close(fig)


def test_the_map_summary_reports_the_verdicts_that_survive_holm():
    """The map's cells are one family: a summary ends with what stands after Holm's correction over them."""
    from dfl_book.showcase.regime import summary

    zero = [0.0] * 5
    strong = compare_paired([1.0, 1.1, 0.9, 1.05, 0.95], zero)  # p ≈ 1e-6: stands after Holm
    weak = compare_paired([1.0, 0.1, 0.9, 0.2, 0.8], zero)  # p ≈ 0.03: one of 3 tests, falls
    noise = compare_paired([0.3, -0.2, 0.1, -0.1, 0.0], zero)
    grid = [
        Cell(e, 4, rho, c, 90.0, 2.0, 89.0, 1.0, 0.2)
        for (e, rho), c in zip([(5, 0.01), (5, 0.2), (1, 0.01)], [strong, weak, noise])
    ]
    text = summary(grid, "DFedSAM", "DFedAvg")
    assert "**DFedSAM pays** (beats DFedAvg, 95% CI above 0) at E = 5, ρ = 0.01" in text and "ρ = 0.2 (" in text
    assert text.splitlines()[-1] == (
        "- **After Holm's correction** over the map's 3 cells: DFedSAM pays at "
        "E = 5, ρ = 0.01, every other cell unresolved."
    )
    assert summary(grid[2:], "DFedSAM", "DFedAvg").endswith("over the map's 1 cell: every cell is unresolved.")
