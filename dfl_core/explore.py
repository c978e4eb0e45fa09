"""Interactive explorations for the book: a static figure everyone sees, sliders for whoever runs the cell.

Three explorations, each in three parts:

========================  ===============================  =========================  ==========================
exploration               static figure (deterministic)    widget (ipywidgets)        one call for a chapter
========================  ===============================  =========================  ==========================
λ against m and topology  :func:`lambda_figure`            :func:`lambda_widget`      :func:`explore_lambda`
gossip contraction vs Q   :func:`gossip_figure`            :func:`gossip_widget`      :func:`explore_gossip`
SAM's step vs ρ           :func:`sam_figure`               :func:`sam_widget`         :func:`explore_sam`
========================  ===============================  =========================  ==========================

The ``explore_*`` functions show the static figure first, so the MyST site,
the committed notebook and ``pytest --nbval`` all see the same picture, and
then add the sliders only when they can work: ipywidgets is importable, the
code runs in a live IPython kernel, and ``DFL_BOOK_STATIC`` is not set
(``tools/book.py execute`` and the book's tests set it, so no widget state
lands in a committed notebook). Every slider move recomputes in milliseconds:
λ is an eigenvalue of an m × m matrix, gossip is a few matrix products, SAM
is one step on a 2-D quadratic.

λ is the engine's own: ``make_topology(name, m).matrix(0).lam`` (chapter 02).
"""
from __future__ import annotations

import os
import sys

import matplotlib.pyplot as plt
import numpy as np

from .plots import legend_outside, style
from .topology import TopologyError, make_topology

__all__ = ["live", "TOPOLOGIES_SHOWN", "lam", "lambda_figure", "lambda_widget", "explore_lambda",
           "contraction", "gossip_figure", "gossip_widget", "explore_gossip", "sam_figure", "sam_widget",
           "explore_sam"]

#: The static topologies the explorations offer (time-varying ones have no single λ).
TOPOLOGIES_SHOWN = ("ring", "grid", "torus", "exponential-mh", "star", "complete")


def live() -> bool:
    """True when sliders can work: ipywidgets importable, a live IPython kernel, ``DFL_BOOK_STATIC`` unset."""
    if os.environ.get("DFL_BOOK_STATIC"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _show_figure(fig) -> None:
    if "ipykernel" in sys.modules:
        plt.show()
    else:
        plt.close(fig)


# --------------------------------------------------------------------------------------------- λ

def lam(topology: str, m: int) -> float:
    """λ of the engine's ``topology`` at ``m`` clients, or NaN where it does not exist (a prime m for a grid)."""
    try:
        return make_topology(topology, m).matrix(0).lam
    except TopologyError:
        return float("nan")


def lambda_figure(topologies=TOPOLOGIES_SHOWN, ms=range(4, 101, 4), mark: tuple[str, int] | None = None):
    """λ (and the spectral gap 1 − λ) against the number of clients m, one line per topology.

    ``mark=(topology, m)`` circles one point, for the widget.
    """
    ms = np.asarray(list(ms))
    fig, (ax, ax_gap) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    for i, name in enumerate(topologies):
        values = np.array([lam(name, int(m)) for m in ms])
        ok = ~np.isnan(values)
        ax.plot(ms[ok], values[ok], label=name, **style(i, int(ok.sum())))
        ax_gap.semilogy(ms[ok], np.maximum(1 - values[ok], 1e-16), **style(i, int(ok.sum())))
    if mark is not None:
        value = lam(*mark)
        ax.plot([mark[1]], [value], "o", markersize=14, markerfacecolor="none", markeredgecolor="black")
        ax.set_title(f"{mark[0]}, m = {mark[1]}: λ = {value:.4f}", fontsize=10)
    ax.set(xlabel="number of clients m", ylabel="λ (second-largest |eigenvalue| of W)", ylim=(-0.03, 1.03))
    ax_gap.set(xlabel="number of clients m", ylabel="spectral gap 1 − λ (log scale)")
    for a in (ax, ax_gap):
        a.grid(True, alpha=0.3)
    legend_outside(ax_gap, handles=[line for line in ax.get_lines() if not line.get_label().startswith("_")])
    return fig


def lambda_widget(topologies=TOPOLOGIES_SHOWN):
    """Sliders for :func:`lambda_figure`: pick a topology and m, see its λ on the curves."""
    import ipywidgets as widgets

    def draw(topology, m):
        lambda_figure(topologies, mark=(topology, m))
        plt.show()
    return widgets.interactive(draw, topology=widgets.Dropdown(options=list(topologies), value="ring"),
                               m=widgets.IntSlider(value=16, min=4, max=100, step=4, description="m"))


def explore_lambda(topologies=TOPOLOGIES_SHOWN) -> None:
    """Chapter 02 (and 07): how λ depends on m and the topology. Static figure, then sliders when live."""
    _show_figure(lambda_figure(topologies))
    if live():
        from IPython.display import display
        display(lambda_widget(topologies))


# --------------------------------------------------------------------------------------------- gossip

def contraction(topology: str, m: int, steps: int, seed: int = 0, d: int = 20) -> np.ndarray:
    """‖W^q x − x̄‖ / ‖x − x̄‖ for q = 0 … steps, from a seeded random start x of shape (m, d)."""
    W = make_topology(topology, m).matrix(0).W
    x = np.random.default_rng(seed).normal(size=(m, d))
    start = np.linalg.norm(x - x.mean(0))
    out = [1.0]
    for _ in range(steps):
        x = W @ x
        out.append(np.linalg.norm(x - x.mean(0)) / start)
    return np.array(out)


def gossip_figure(topologies=("ring", "grid", "torus", "exponential-mh"), m: int = 16, steps: int = 20,
                  seed: int = 0, Q: int | None = None):
    """Disagreement left after q gossip steps (solid), and the bound λ^q (dashed), per topology.

    ``Q`` marks the number of gossip steps of one DFedSAM-MGS round.
    """
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    q = np.arange(steps + 1)
    for i, name in enumerate(topologies):
        props = style(i, steps + 1)
        value = lam(name, m)
        ax.semilogy(q, np.maximum(contraction(name, m, steps, seed), 1e-16), label=f"{name} (λ = {value:.3f})",
                    **props)
        ax.semilogy(q, np.maximum(value ** q, 1e-16), color=props["color"], linestyle=":", linewidth=1)
    if Q is not None:
        ax.axvline(Q, color="black", linewidth=1)
        ax.set_title(f"m = {m}; the black line is Q = {Q} gossip steps", fontsize=10)
    ax.set(xlabel="gossip steps q", ylabel=r"$\|W^q x - \bar x\| \,/\, \|x - \bar x\|$ (log scale)",
           ylim=(1e-6, 1.5))
    ax.plot([], [], color="0.3", linestyle=":", label=r"bound $\lambda^q$ (dotted)")
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
    return fig


def gossip_widget(topologies=("ring", "grid", "torus", "exponential-mh")):
    """Sliders for :func:`gossip_figure`: m and Q (the seed of the random start too)."""
    import ipywidgets as widgets

    def draw(m, Q, seed):
        gossip_figure(topologies, m=m, Q=Q, seed=seed)
        plt.show()
    return widgets.interactive(draw, m=widgets.IntSlider(value=16, min=4, max=100, step=4, description="m"),
                               Q=widgets.IntSlider(value=4, min=1, max=20, description="Q"),
                               seed=widgets.IntSlider(value=0, min=0, max=9, description="seed"))


def explore_gossip(topologies=("ring", "grid", "torus", "exponential-mh")) -> None:
    """Chapter 05: how fast Q gossip steps contract the disagreement. Static figure, then sliders when live."""
    _show_figure(gossip_figure(topologies, Q=4))
    if live():
        from IPython.display import display
        display(gossip_widget(topologies))


# --------------------------------------------------------------------------------------------- SAM

def sam_figure(rho: float = 0.3, lr: float = 0.2):
    """SAM's step against SGD's on a 2-D quadratic for radius ρ (:func:`dfl_core.diagrams.sam_geometry`)."""
    from .diagrams import sam_geometry

    return sam_geometry(rho=rho, lr=lr)


def sam_widget():
    """A slider for ρ (and the learning rate η) of :func:`sam_figure`."""
    import ipywidgets as widgets

    def draw(rho, lr):
        sam_figure(rho, lr)
        plt.show()
    return widgets.interactive(draw, rho=widgets.FloatSlider(value=0.3, min=0.0, max=0.8, step=0.05, description="ρ"),
                               lr=widgets.FloatSlider(value=0.2, min=0.05, max=0.3, step=0.05, description="η"))


def explore_sam() -> None:
    """Chapter 04: how SAM's ascent radius ρ changes its step. Static figure, then sliders when live."""
    _show_figure(sam_figure())
    if live():
        from IPython.display import display
        display(sam_widget())
