"""The book's figure helpers (dfl_book.plots): labelled axes, distinct styles, legends that hide no data."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dfl_book import plots  # noqa: E402
from dfl_core.results import History  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def crowded_runs(seeds: int = 3, points: int = 31) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Curves that fill the whole axes: no corner is free for a legend inside."""
    rounds = np.arange(points)
    rng = np.random.default_rng(0)
    shapes = {
        "rising": np.linspace(0, 1, points),
        "falling": np.linspace(1, 0, points),
        "flat high": np.full(points, 0.97),
        "flat low": np.full(points, 0.03),
        "middle": np.full(points, 0.5),
    }
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
    assert labels[: len(runs)] == list(runs) and labels[-1] == "shaded: 95% CI of the mean over 3 seeds"
    assert len({(str(l.get_linestyle()), l.get_marker()) for l in lines}) == len(lines)


def test_a_legend_outside_covers_no_data_where_the_default_one_did():
    rounds, runs = crowded_runs()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    plots.curves(ax, rounds, runs, ylabel="accuracy (%)", legend=False)
    inside = ax.legend(fontsize=8)  # what plot_comparison used to do
    assert covered(ax, inside) > 0, "the crowded case must be one where an inside legend covers data"
    inside.remove()
    for where in ("right", "below"):
        outside = plots.legend_outside(ax, where=where)
        fig.tight_layout()
        assert covered(ax, outside) == 0, where
        outside.remove()


class Comparison:  # duck-typed like dfl_book.stats.PairedComparison
    def __init__(self, label, mean, low, high, verdict):
        self.label, self.mean, self.low, self.high, self.verdict = label, mean, low, high, verdict


def test_paired_differences_one_row_per_comparison_with_zero_line_and_verdicts():
    comparisons = [
        Comparison("DFedSAM − DFedAvg", 1.2, 0.4, 2.0, "better in every seed"),
        Comparison("MGS − DFedSAM", 0.1, -0.5, 0.7, "not distinguishable"),
    ]
    fig, ax = plt.subplots()
    drawn = plots.paired_differences(ax, comparisons, xlabel="accuracy difference (points)")
    assert len(drawn) == 2
    top_first = sorted(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()]), reverse=True)
    assert [label for _, label in top_first] == ["DFedSAM − DFedAvg", "MGS − DFedSAM"]  # in the order given
    assert {t.get_text() for t in ax.texts} == {"better in every seed", "not distinguishable"}
    assert any(np.allclose(line.get_xdata(), 0) for line in ax.get_lines())
    assert ax.get_xlabel() == "accuracy difference (points)"


def test_paired_differences_shows_the_band_the_papers_number_and_the_corrected_verdicts():
    comparisons = [
        Comparison("a", 1.2, 0.4, 2.0, "REPRODUCED"),
        Comparison("b", 0.3, 0.05, 0.55, "REPRODUCED"),
        Comparison("c", 0.0, -0.2, 0.2, "EQUIVALENT"),
    ]
    fig, ax = plt.subplots()
    plots.paired_differences(
        ax, comparisons, margin=0.5, paper=[2.4, None, None], corrected=["REPRODUCED", "UNRESOLVED", "EQUIVALENT"]
    )
    band = [p for p in ax.patches if p.get_label().startswith("equivalence band")]
    assert len(band) == 1 and np.allclose(band[0].get_bbox().intervalx, [-0.5, 0.5])
    crosses = [line for line in ax.get_lines() if line.get_label() == "the paper's difference"]
    assert len(crosses) == 1 and np.allclose(crosses[0].get_xdata(), [2.4])
    assert [t.get_text() for t in ax.texts] == ["REPRODUCED", "REPRODUCED → UNRESOLVED", "EQUIVALENT"]
    with pytest.raises(ValueError, match="paper needs one entry per comparison"):
        plots.paired_differences(ax, comparisons, paper=[1.0])


def test_paired_differences_names_the_intervals_confidence_in_its_legend():
    from types import SimpleNamespace

    fig, ax = plt.subplots()
    plots.paired_differences(ax, [Comparison("a", 1.2, 0.4, 2.0, "REPRODUCED")])
    at_90 = SimpleNamespace(label="b", mean=1.0, low=0.5, high=1.5, verdict="REPRODUCED", confidence=0.9)
    fig, ax90 = plt.subplots()
    plots.paired_differences(ax90, [at_90])
    labels = [[h.get_label() for h in a.get_legend_handles_labels()[0]] for a in (ax, ax90)]
    assert labels == [["mean and 95% CI"], ["mean and 90% CI"]]


def test_bars_with_intervals():
    fig, ax = plt.subplots()
    bars = plots.bars_with_intervals(
        ax,
        ["a", "b", "c"],
        [80, 85, 90],
        [78, 84, 88],
        [82, 86, 92],
        ylabel="test accuracy (%)",
        interval="95% CI over 3 seeds",
    )
    assert len(bars) == 3 and ax.get_ylabel() == "test accuracy (%)"
    assert ax.get_legend().get_texts()[0].get_text() == "whiskers: 95% CI over 3 seeds"
    assert len({b.get_hatch() for b in bars}) == 3


def history(name: str, acc: list[float], cd: list[float], rounds: list[int]) -> History:
    config = {
        "dataset": "digits",
        "num_clients": 20,
        "topology": "ring",
        "partition": "dirichlet",
        "alpha": 0.3,
        "model": "2nn",
        "algorithm": name,
        "gossip_steps": 1,
    }
    return History(
        config=config,
        records=[{"round": r, "test_acc": a, "consensus_distance": c} for r, a, c in zip(rounds, acc, cd)],
    )


def test_plot_comparison_separates_coinciding_methods_and_starts_consensus_at_round_1(tmp_path: Path):
    rounds = [0, 5, 10, 15, 20]
    same = [0.1, 0.6, 0.8, 0.85, 0.9]
    cd = [1e-12, 2e-2, 3e-2, 3e-2, 3e-2]  # all clients start equal
    results = {
        name: [history(name, same, cd, rounds), history(name, same, cd, rounds)] for name in ("dfedavg", "dfedsam")
    }
    path = plots.plot_comparison(results, tmp_path / "comparison.png")
    assert path.exists() and path.stat().st_size > 10_000
    fig = plots.comparison_figure(results)
    fig.canvas.draw()
    ax_acc, ax_cd = fig.axes
    avg, sam = ax_acc.get_lines()[:2]
    assert np.allclose(avg.get_ydata(), sam.get_ydata())  # the curves coincide...
    assert (avg.get_linestyle(), avg.get_marker()) != (sam.get_linestyle(), sam.get_marker())  # ...but look different
    assert ax_cd.get_yscale() == "log" and ax_cd.get_ylim()[0] > 1e-12 * 100
    assert "rounds ≥ 1" in ax_cd.get_ylabel() and "%" in ax_acc.get_ylabel()
    assert min(line.get_xdata().min() for line in ax_cd.get_lines()) >= 1
    assert ax_cd.get_legend() is not None


def test_cli_uses_the_plots_module():
    from dfl_book.cli import EXTENSION
    from dfl_core.cli import cli_extensions

    assert EXTENSION.plot_comparison is plots.plot_comparison
    assert EXTENSION in cli_extensions()  # the engine's CLI finds the book by entry point


def test_cumulative_costs_count_messages_and_gradient_steps():
    ring = plots.cumulative_costs([0, 1, 5], topology="ring", num_clients=20, local_steps=5)
    assert ring["messages"].tolist() == [0, 40, 200]  # 20 clients, each sends to its 2 neighbours
    assert ring["gradient_steps"].tolist() == [0, 5, 25] and ring["round"].tolist() == [0, 1, 5]
    dpsgd = plots.cumulative_costs([0, 1, 5], topology="ring", num_clients=20, local_steps=1)
    assert dpsgd["messages"].tolist() == [0, 40, 200] and dpsgd["gradient_steps"].tolist() == [0, 1, 5]
    mgs = plots.cumulative_costs([2], topology="ring", num_clients=20, local_steps=5, gossip_steps=4)
    assert mgs["messages"].tolist() == [2 * 4 * 40]
    assert plots.cumulative_costs([3], topology="complete", num_clients=10, local_steps=1)["messages"].tolist() == [270]


def test_cumulative_costs_reject_bad_arguments():
    with pytest.raises(ValueError, match="rounds"):
        plots.cumulative_costs([0, -1], topology="ring", num_clients=20, local_steps=5)
    with pytest.raises(ValueError, match="rounds"):
        plots.cumulative_costs([0.5], topology="ring", num_clients=20, local_steps=5)
    with pytest.raises(ValueError, match="local_steps"):
        plots.cumulative_costs([1], topology="ring", num_clients=20, local_steps=0)
    with pytest.raises(ValueError, match="gossip_steps"):
        plots.cumulative_costs([1], topology="ring", num_clients=20, local_steps=1, gossip_steps=1.5)
    with pytest.raises(ValueError, match="transmissions"):
        plots.cumulative_costs([1], topology="random-symmetric", num_clients=20, local_steps=1)
    with pytest.raises(ValueError):
        plots.cumulative_costs([1], topology="no-such-graph", num_clients=20, local_steps=1)


class FakeShowcase:  # duck-typed like dfl_book.showcase.runner.ShowcaseResult
    def __init__(self, arms: dict[str, dict], transmissions_off: int = 0):
        self.seeds, self.rounds = (0, 1), [0, 5, 10]
        self.runs = {(arm, s): {"config": cfg} for arm, cfg in arms.items() for s in self.seeds}
        self.off = transmissions_off

    def curve(self, arm, metric="test_acc"):
        return self.rounds, [[0.1, 0.5 + 0.01 * s, 0.7] for s in self.seeds]

    def history(self, arm, seed):
        cfg = self.runs[arm, seed]["config"]
        m = cfg["num_clients"]
        per_round = 2 * m if cfg["topology"] == "ring" else m * (m - 1)
        return [
            {"round": r, "transmissions": r * per_round * cfg["gossip_steps"] + (self.off if r else 0)}
            for r in self.rounds
        ]


ARMS = {
    "D-PSGD": dict(topology="ring", num_clients=20, local_steps=1, gossip_steps=1),
    "DFedAvg": dict(topology="ring", num_clients=20, local_steps=5, gossip_steps=1),
    "DFedAvg, complete": dict(topology="complete", num_clients=20, local_steps=5, gossip_steps=1),
}


def test_showcase_costs_agree_with_the_recorded_transmissions():
    result = FakeShowcase(ARMS)
    assert plots.showcase_costs(result, "DFedAvg")["messages"].tolist() == [0, 200, 400]
    assert plots.showcase_costs(result, "D-PSGD")["gradient_steps"].tolist() == [0, 5, 10]
    assert plots.showcase_costs(result, "DFedAvg, complete")["messages"].tolist() == [0, 1900, 3800]
    with pytest.raises(ValueError, match="the engine recorded"):
        plots.showcase_costs(FakeShowcase(ARMS, transmissions_off=1), "DFedAvg")


def test_showcase_against_cost_puts_each_arm_at_its_own_cost():
    result = FakeShowcase(ARMS)
    fig, (left, right) = plt.subplots(1, 2)
    lines = plots.showcase_against_cost(left, result, ["D-PSGD", "DFedAvg"], "gradient_steps")
    assert [line.get_xdata().tolist() for line in lines] == [[0, 5, 10], [0, 25, 50]]
    assert left.get_xlabel() == plots.COST_AXES["gradient_steps"] and "%" in left.get_ylabel()
    assert np.allclose(lines[0].get_ydata(), [10, 50.5, 70])  # percent, mean over the 2 seeds
    lines = plots.showcase_against_cost(
        right, result, ["DFedAvg", "DFedAvg, complete"], "messages", log_x=True, labels={"DFedAvg": "DFedAvg, ring"}
    )
    assert [line.get_xdata().tolist() for line in lines] == [[200, 400], [1900, 3800]]  # round 0 left out
    assert right.get_xscale() == "log" and "log scale" in right.get_xlabel()
    assert [t.get_text() for t in right.get_legend().get_texts()][:2] == ["DFedAvg, ring", "DFedAvg, complete"]
    with pytest.raises(ValueError, match="cost must be one of"):
        plots.showcase_against_cost(left, result, ["DFedAvg"], "seconds")


def test_the_committed_dfedavg_showcase_sent_what_its_topologies_say():
    from dfl_book import showcase

    try:
        result = showcase.load("dfedavg")
    except FileNotFoundError:  # before the experiments lost their chapter numbers
        result = showcase.load("ch03-dfedavg")
    for arm in result.arms:  # raises if the engine's transmissions disagree
        costs = plots.showcase_costs(result, arm)
        assert costs["messages"][-1] == result.history(arm, result.seeds[0])[-1]["transmissions"]
    assert plots.showcase_costs(result, "D-PSGD")["gradient_steps"][-1] == 100
    assert plots.showcase_costs(result, "DFedAvg")["gradient_steps"][-1] == 500
