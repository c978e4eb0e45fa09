"""The interactive explorations (dfl_core.explore): static figures always, widgets when ipywidgets is there."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dfl_core import explore  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_lambda_is_the_engines_and_nan_where_a_graph_does_not_exist():
    from dfl_core.topology import make_topology

    assert explore.lam("ring", 16) == make_topology("ring", 16).matrix(0).lam
    assert np.isnan(explore.lam("grid", 17))            # a prime m has no grid


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
    assert not explore.live()                  # pytest is not a kernel
    monkeypatch.setenv("DFL_BOOK_STATIC", "1")
    assert not explore.live()
    explore.explore_lambda(("ring",))          # shows (here: closes) the static figure, adds no widget


def test_widgets_build_when_ipywidgets_is_installed():
    widgets = pytest.importorskip("ipywidgets")
    for build in (lambda: explore.lambda_widget(("ring", "grid")), explore.gossip_widget, explore.sam_widget):
        w = build()
        assert isinstance(w, widgets.interactive)
        assert [c.description for c in w.children[:-1]]       # sliders and dropdowns, then the output area
