"""The interactive explorations (dfl_book.explore): static figures always, widgets when ipywidgets is there."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dfl_book import explore  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_lambda_is_the_engines_and_nan_where_a_graph_does_not_exist():
    from dfl_core.topology import make_topology

    assert explore.lam("ring", 16) == make_topology("ring", 16).matrix(0).lam
    assert np.isnan(explore.lam("grid", 17))  # a prime m has no grid


def test_static_figures_build_with_labelled_axes():
    for fig in (explore.lambda_figure(ms=range(4, 33, 4)), explore.gossip_figure(steps=8, Q=4), explore.sam_figure()):
        for ax in fig.axes:
            if ax.get_visible() and ax.lines:
                assert ax.get_xlabel() and ax.get_ylabel()
    fig = explore.lambda_figure(("ring", "complete"), ms=[4, 8, 16], mark=("ring", 16))
    assert "λ = " in fig.axes[0].get_title()


def test_gossip_contraction_stays_below_the_lambda_bound():
    for name in ("ring", "grid", "exponential-mh"):
        measured = explore.contraction(name, 16, 20, seed=1)
        bound = explore.lam(name, 16) ** np.arange(21)
        assert np.all(measured <= bound * (1 + 1e-9)) and measured[0] == 1.0


def test_no_widgets_outside_a_live_kernel(monkeypatch):
    assert not explore.live()  # pytest is not a kernel
    monkeypatch.setenv("DFL_BOOK_STATIC", "1")
    assert not explore.live()
    explore.explore_lambda(("ring",))  # shows (here: closes) the static figure, adds no widget


def test_widgets_build_when_ipywidgets_is_installed():
    widgets = pytest.importorskip("ipywidgets")
    for build in (lambda: explore.lambda_widget(("ring", "grid")), explore.gossip_widget, explore.sam_widget):
        w = build()
        assert isinstance(w, widgets.interactive)
        assert [c.description for c in w.children[:-1]]  # sliders and dropdowns, then the output area


# --------------------------------------------------------------------------------------------- chapter 01


def test_fedavg_rounds_settle_on_the_fixed_point_of_eq_4():
    x_star = explore.minimiser()
    assert x_star == pytest.approx(1.4)  # (0.5·1·(−1) + 0.5·4·2) / 2.5
    for K in (1, 2, 5, 20):
        w = explore.fedavg_iterates(K, 0.1, 400)
        assert w[0] == 0.0 and len(w) == 401
        assert w[-1] == pytest.approx(explore.fedavg_fixed_point(K, 0.1), abs=1e-10)
    assert explore.fedavg_fixed_point(1, 0.1) == pytest.approx(x_star)  # one local step: no drift
    assert explore.fedavg_fixed_point(2000, 0.1) == pytest.approx(0.5)  # K → ∞: Σ p_i c_i
    drift = [abs(explore.fedavg_fixed_point(K, 0.1) - x_star) for K in (1, 2, 5, 20, 100)]
    assert drift == sorted(drift) and drift[-1] > 0.8  # the error grows with K
    # the server learning rate changes the speed, not the fixed point (chapter 01, exercise 1)
    assert explore.fedavg_iterates(5, 0.1, 400, eta_g=0.5)[-1] == pytest.approx(explore.fedavg_fixed_point(5, 0.1))


def test_fedavg_drift_rejects_bad_arguments():
    with pytest.raises(ValueError, match="local steps diverge"):
        explore.fedavg_fixed_point(5, 0.5)  # η ≥ 2 / max a_i = 0.5
    with pytest.raises(ValueError, match="K"):
        explore.fedavg_iterates(0, 0.1, 10)
    with pytest.raises(ValueError, match="K"):
        explore.fedavg_fixed_point(2.5, 0.1)
    with pytest.raises(ValueError, match="rounds"):
        explore.fedavg_iterates(5, 0.1, -1)
    with pytest.raises(ValueError, match="sum to 1"):
        explore.fedavg_fixed_point(5, 0.1, p=(0.5, 0.6))
    with pytest.raises(ValueError, match="one number per client"):
        explore.fedavg_fixed_point(5, 0.1, a=(1.0, 4.0, 2.0))
    with pytest.raises(ValueError, match="> 0"):
        explore.minimiser(a=(1.0, -4.0))


def test_fedavg_drift_figure_shows_iterates_fixed_points_and_the_minimiser():
    fig = explore.fedavg_drift_figure(K=5, eta=0.1, rounds=30, Ks=range(1, 21))
    ax, ax_k = fig.axes[:2]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        "$w^t$, K = 5",
        "$w_K$ of eq. (4), K = 5",
        "$w^t$, K = 1",
        "$w_K$ of eq. (4), K = 1",
        r"$x^\star$, the minimiser of $f$",
    ]
    assert ax.get_lines()[0].get_ydata()[-1] == pytest.approx(explore.fedavg_fixed_point(5, 0.1), abs=1e-3)
    assert ax.get_lines()[4].get_ydata()[0] == pytest.approx(1.4)
    assert len(ax_k.get_lines()[0].get_xdata()) == 20 and ax_k.get_xscale() == "log"
    assert all(a.get_xlabel() and a.get_ylabel() for a in (ax, ax_k))
    assert "-0.322" in fig._suptitle.get_text()  # w_5 − x* of chapter 01
    assert len(explore.fedavg_drift_figure(K=1).axes[0].get_lines()) == 3  # K = 1 needs no reference


# --------------------------------------------------------------------------------------------- chapter 04


def test_dfedavg_run_is_the_engines_and_counts_the_messages():
    from dfl_book.plots import cumulative_costs

    for topology in ("ring", "grid"):
        run = explore.dfedavg_run(topology, 2, rounds=3)
        assert run["round"].tolist() == [0, 1, 2, 3]
        costs = cumulative_costs(run["round"], topology=topology, num_clients=16, local_steps=2)
        assert run["transmissions"].tolist() == costs["messages"].tolist()  # the engine's count = the arithmetic
        assert not run["test_acc"].flags.writeable  # cached arrays cannot be changed
    assert explore.dfedavg_run("complete", 2, rounds=3)["consensus_distance"].max() < 1e-9
    assert explore.dfedavg_run("ring", 2, rounds=3)["consensus_distance"][1:].min() > 1e-6


def test_dfedavg_figure_axes_and_references():
    from dfl_book.plots import COST_AXES

    for x in COST_AXES:
        fig = explore.dfedavg_figure("ring", 3, x, rounds=3)
        ax, ax_cd = fig.axes[:2]
        assert ax.get_xlabel() == ax_cd.get_xlabel() == COST_AXES[x]
        assert [line.get_label() for line in ax.get_lines()] == ["ring, K = 3", "ring, K = 1", "complete, K = 3"]
        assert len(ax_cd.get_lines()) == 2 and ax_cd.get_yscale() == "log"  # the complete graph's 0 is a note
        plt.close(fig)
    fig = explore.dfedavg_figure("ring", 3, "gradient_steps", rounds=3)
    assert fig.axes[0].get_lines()[0].get_xdata().tolist() == [0, 3, 6, 9]
    assert len(explore.dfedavg_figure("complete", 1, rounds=3).axes[0].get_lines()) == 1


def test_dfedavg_exploration_rejects_bad_arguments():
    with pytest.raises(ValueError, match="x must be one of"):
        explore.dfedavg_figure("ring", 3, "seconds", rounds=3)
    with pytest.raises(ValueError, match="K"):
        explore.dfedavg_run("ring", 0, rounds=3)
    with pytest.raises(ValueError, match="static graphs"):
        explore.dfedavg_run("random-symmetric", 2, rounds=3)
    with pytest.raises(ValueError):
        explore.dfedavg_run("no-such-graph", 2, rounds=3)


def test_new_explorations_show_no_widgets_outside_a_live_kernel(monkeypatch):
    monkeypatch.setenv("DFL_BOOK_STATIC", "1")
    explore.explore_fedavg_drift()
    explore.explore_dfedavg(rounds=3)
    assert not explore.live()


def test_new_widgets_build_when_ipywidgets_is_installed():
    widgets = pytest.importorskip("ipywidgets")
    drift = explore.fedavg_drift_widget()
    assert [c.description for c in drift.children[:-1]] == ["K", "η"]
    assert drift.children[1].max < 0.5  # below 2 / max a_i: local steps converge
    graph = explore.dfedavg_widget(rounds=3)
    assert isinstance(graph, widgets.interactive)
    assert [c.description for c in graph.children[:-1]] == ["graph", "K", "x axis"]
    assert graph.children[2].options[0][1] == "round"
