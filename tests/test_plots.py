"""The book's figure helpers (dfl_core.plots): labelled axes, distinct styles, legends that hide no data."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dfl_core import plots  # noqa: E402
from dfl_core.results import History  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def crowded_runs(seeds: int = 3, points: int = 31) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Curves that fill the whole axes: no corner is free for a legend inside."""
    rounds = np.arange(points)
    rng = np.random.default_rng(0)
    shapes = {"rising": np.linspace(0, 1, points), "falling": np.linspace(1, 0, points),
              "flat high": np.full(points, 0.97), "flat low": np.full(points, 0.03), "middle": np.full(points, 0.5)}
    return rounds, {k: v + 0.01 * rng.standard_normal((seeds, points)) for k, v in shapes.items()}


def data_points_in_display(ax) -> np.ndarray:
    points = [line.get_xydata() for line in ax.get_lines() if len(line.get_xydata())]
    return ax.transData.transform(np.concatenate(points))


def covered(ax, legend) -> int:
    """How many plotted data points lie under the legend's box."""
    ax.figure.canvas.draw()
    box = legend.get_window_extent()
    xy = data_points_in_display(ax)
    return int(np.sum((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)))


def test_styles_differ_in_colour_dashes_and_marker():
    first = [plots.style(i) for i in range(6)]
    for key in ("color", "linestyle", "marker"):
        assert len({str(s[key]) for s in first}) == 6, key


def test_mean_band_std_and_ci():
    runs = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    mean, low, high, text = plots.mean_band(runs, "std")
    assert np.allclose(mean, [3, 4]) and np.allclose(high - mean, 2.0) and text == "± std over 3 seeds"
    mean, low, high, text = plots.mean_band(runs, "ci")
    assert np.allclose(high - mean, 4.303 * 2.0 / np.sqrt(3)) and text == "95% CI of the mean over 3 seeds"
    assert plots.mean_band(runs[:1], "std")[3] == "1 seed, no band"
    with pytest.raises(ValueError):
        plots.mean_band(runs, "sem")


def test_curves_label_axes_and_say_what_the_band_is():
    rounds, runs = crowded_runs()
    fig, ax = plt.subplots()
    lines = plots.curves(ax, rounds, runs, ylabel="test accuracy (%)", band="ci")
    assert len(lines) == len(runs)
    assert ax.get_xlabel() == "communication round" and ax.get_ylabel() == "test accuracy (%)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:len(runs)] == list(runs) and labels[-1] == "shaded: 95% CI of the mean over 3 seeds"
    assert len({(str(l.get_linestyle()), l.get_marker()) for l in lines}) == len(lines)


def test_a_legend_outside_covers_no_data_where_the_default_one_did():
    rounds, runs = crowded_runs()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    plots.curves(ax, rounds, runs, ylabel="accuracy (%)", legend=False)
    inside = ax.legend(fontsize=8)                     # what plot_comparison used to do
    assert covered(ax, inside) > 0, "the crowded case must be one where an inside legend covers data"
    inside.remove()
    for where in ("right", "below"):
        outside = plots.legend_outside(ax, where=where)
        fig.tight_layout()
        assert covered(ax, outside) == 0, where
        outside.remove()


class Comparison:   # duck-typed like dfl_core.stats.PairedComparison
    def __init__(self, label, mean, low, high, verdict):
        self.label, self.mean, self.low, self.high, self.verdict = label, mean, low, high, verdict


def test_paired_differences_one_row_per_comparison_with_zero_line_and_verdicts():
    comparisons = [Comparison("DFedSAM − DFedAvg", 1.2, 0.4, 2.0, "better in every seed"),
                   Comparison("MGS − DFedSAM", 0.1, -0.5, 0.7, "not distinguishable")]
    fig, ax = plt.subplots()
    drawn = plots.paired_differences(ax, comparisons, xlabel="accuracy difference (points)")
    assert len(drawn) == 2
    top_first = sorted(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()]), reverse=True)
    assert [label for _, label in top_first] == ["DFedSAM − DFedAvg", "MGS − DFedSAM"]   # in the order given
    assert {t.get_text() for t in ax.texts} == {"better in every seed", "not distinguishable"}
    assert any(np.allclose(line.get_xdata(), 0) for line in ax.get_lines())
    assert ax.get_xlabel() == "accuracy difference (points)"


def test_bars_with_intervals():
    fig, ax = plt.subplots()
    bars = plots.bars_with_intervals(ax, ["a", "b", "c"], [80, 85, 90], [78, 84, 88], [82, 86, 92],
                                     ylabel="test accuracy (%)", interval="95% CI over 3 seeds")
    assert len(bars) == 3 and ax.get_ylabel() == "test accuracy (%)"
    assert ax.get_legend().get_texts()[0].get_text() == "whiskers: 95% CI over 3 seeds"
    assert len({b.get_hatch() for b in bars}) == 3


def history(name: str, acc: list[float], cd: list[float], rounds: list[int]) -> History:
    config = {"dataset": "digits", "num_clients": 20, "topology": "ring", "partition": "dirichlet",
              "alpha": 0.3, "model": "2nn", "algorithm": name, "gossip_steps": 1}
    return History(config=config, records=[{"round": r, "test_acc": a, "consensus_distance": c}
                                           for r, a, c in zip(rounds, acc, cd)])


def test_plot_comparison_separates_coinciding_methods_and_starts_consensus_at_round_1(tmp_path: Path):
    rounds = [0, 5, 10, 15, 20]
    same = [0.1, 0.6, 0.8, 0.85, 0.9]
    cd = [1e-12, 2e-2, 3e-2, 3e-2, 3e-2]           # all clients start equal
    results = {name: [history(name, same, cd, rounds), history(name, same, cd, rounds)]
               for name in ("dfedavg", "dfedsam")}
    path = plots.plot_comparison(results, tmp_path / "comparison.png")
    assert path.exists() and path.stat().st_size > 10_000
    fig = plots.comparison_figure(results)
    fig.canvas.draw()
    ax_acc, ax_cd = fig.axes
    avg, sam = ax_acc.get_lines()[:2]
    assert np.allclose(avg.get_ydata(), sam.get_ydata())                 # the curves coincide...
    assert (avg.get_linestyle(), avg.get_marker()) != (sam.get_linestyle(), sam.get_marker())   # ...but look different
    assert ax_cd.get_yscale() == "log" and ax_cd.get_ylim()[0] > 1e-12 * 100
    assert "rounds ≥ 1" in ax_cd.get_ylabel() and "%" in ax_acc.get_ylabel()
    assert min(line.get_xdata().min() for line in ax_cd.get_lines()) >= 1
    assert ax_cd.get_legend() is not None


def test_cli_uses_the_plots_module():
    from dfl_core import cli

    assert cli.plot_comparison is plots.plot_comparison
