"""Interactive explorations for the book: a static figure everyone sees, sliders for whoever runs the cell.

Five explorations, each in three parts:

========================  =============================  ===========================  ============================
exploration               static figure (deterministic)  widget (ipywidgets)          one call for a chapter
========================  =============================  ===========================  ============================
FedAvg's drift vs K, η    :func:`fedavg_drift_figure`    :func:`fedavg_drift_widget`  :func:`explore_fedavg_drift`
λ against m and topology  :func:`lambda_figure`          :func:`lambda_widget`        :func:`explore_lambda`
DFedAvg vs K and graph    :func:`dfedavg_figure`         :func:`dfedavg_widget`       :func:`explore_dfedavg`
gossip contraction vs Q   :func:`gossip_figure`          :func:`gossip_widget`        :func:`explore_gossip`
SAM's step vs ρ           :func:`sam_figure`             :func:`sam_widget`           :func:`explore_sam`
========================  =============================  ===========================  ============================

The ``explore_*`` functions show the static figure first, so the MyST site,
the committed notebook and ``pytest --nbval`` all see the same picture, and
then add the sliders only when they can work: ipywidgets is importable, the
code runs in a live IPython kernel, and ``DFL_BOOK_STATIC`` is not set
(``tools/book.py execute`` and the book's tests set it, so no widget state
lands in a committed notebook). Every slider move recomputes in milliseconds:
λ is an eigenvalue of an m × m matrix, gossip is a few matrix products, SAM
is one step on a 2-D quadratic, FedAvg's drift is chapter 01's two clients with
one number each. DFedAvg is the engine's own (``Simulation``), on the bundled
digits with a linear model and 16 clients: a few tenths of a second per move on
a CPU (the first run also loads the data), and cached.

λ is the engine's own: ``make_topology(name, m).matrix(0).lam`` (chapter 02).
"""

from __future__ import annotations

import functools
import os
import sys

import matplotlib.pyplot as plt
import numpy as np

from .plots import legend_outside, style
from dfl_core.topology import TopologyError, make_topology

__all__ = [
    "live",
    "TOPOLOGIES_SHOWN",
    "lam",
    "lambda_figure",
    "lambda_widget",
    "explore_lambda",
    "contraction",
    "gossip_figure",
    "gossip_widget",
    "explore_gossip",
    "sam_figure",
    "sam_widget",
    "explore_sam",
    "TWO_CLIENTS",
    "minimiser",
    "fedavg_fixed_point",
    "fedavg_iterates",
    "fedavg_drift_figure",
    "fedavg_drift_widget",
    "explore_fedavg_drift",
    "DFEDAVG_TOPOLOGIES",
    "dfedavg_run",
    "dfedavg_figure",
    "dfedavg_widget",
    "explore_dfedavg",
]

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

    return widgets.interactive(
        draw,
        topology=widgets.Dropdown(options=list(topologies), value="ring"),
        m=widgets.IntSlider(value=16, min=4, max=100, step=4, description="m"),
    )


def explore_lambda(topologies=TOPOLOGIES_SHOWN) -> None:
    """Chapter 02 (and 10): how λ depends on m and the topology. Static figure, then sliders when live."""
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


def gossip_figure(
    topologies=("ring", "grid", "torus", "exponential-mh"),
    m: int = 16,
    steps: int = 20,
    seed: int = 0,
    Q: int | None = None,
):
    """Disagreement left after q gossip steps (solid), and the bound λ^q (dashed), per topology.

    ``Q`` marks the number of gossip steps of one DFedSAM-MGS round.
    """
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    q = np.arange(steps + 1)
    for i, name in enumerate(topologies):
        props = style(i, steps + 1)
        value = lam(name, m)
        ax.semilogy(q, np.maximum(contraction(name, m, steps, seed), 1e-16), label=f"{name} (λ = {value:.3f})", **props)
        ax.semilogy(q, np.maximum(value**q, 1e-16), color=props["color"], linestyle=":", linewidth=1)
    if Q is not None:
        ax.axvline(Q, color="black", linewidth=1)
        ax.set_title(f"m = {m}; the black line is Q = {Q} gossip steps", fontsize=10)
    ax.set(xlabel="gossip steps q", ylabel=r"$\|W^q x - \bar x\| \,/\, \|x - \bar x\|$ (log scale)", ylim=(1e-6, 1.5))
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

    return widgets.interactive(
        draw,
        m=widgets.IntSlider(value=16, min=4, max=100, step=4, description="m"),
        Q=widgets.IntSlider(value=4, min=1, max=20, description="Q"),
        seed=widgets.IntSlider(value=0, min=0, max=9, description="seed"),
    )


def explore_gossip(topologies=("ring", "grid", "torus", "exponential-mh")) -> None:
    """Chapter 08: how fast Q gossip steps contract the disagreement. Static figure, then sliders when live."""
    _show_figure(gossip_figure(topologies, Q=4))
    if live():
        from IPython.display import display

        display(gossip_widget(topologies))


# --------------------------------------------------------------------------------------------- SAM


def sam_figure(rho: float = 0.3, lr: float = 0.2):
    """SAM's step against SGD's on a 2-D quadratic for radius ρ (:func:`dfl_book.diagrams.sam_geometry`)."""
    from .diagrams import sam_geometry

    return sam_geometry(rho=rho, lr=lr)


def sam_widget():
    """A slider for ρ (and the learning rate η) of :func:`sam_figure`."""
    import ipywidgets as widgets

    def draw(rho, lr):
        sam_figure(rho, lr)
        plt.show()

    return widgets.interactive(
        draw,
        rho=widgets.FloatSlider(value=0.3, min=0.0, max=0.8, step=0.05, description="ρ"),
        lr=widgets.FloatSlider(value=0.2, min=0.05, max=0.3, step=0.05, description="η"),
    )


def explore_sam() -> None:
    """Chapter 07: how SAM's ascent radius ρ changes its step. Static figure, then sliders when live."""
    _show_figure(sam_figure())
    if live():
        from IPython.display import display

        display(sam_widget())


# --------------------------------------------------------------------------------------------- FedAvg's drift

#: Chapter 01's two clients, f_i(x) = a_i/2 (x − c_i)², weights p_i.
TWO_CLIENTS = {"a": (1.0, 4.0), "c": (-1.0, 2.0), "p": (0.5, 0.5)}


def _two_clients(a, c, p, eta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, c, p = (np.asarray(v, dtype=float) for v in (a, c, p))
    if not (a.ndim == c.ndim == p.ndim == 1 and len(a) == len(c) == len(p) >= 1):
        raise ValueError(f"a, c and p need one number per client, got {len(a)}, {len(c)} and {len(p)}")
    if np.any(a <= 0) or np.any(p <= 0):
        raise ValueError(f"curvatures a and weights p must be > 0, got a = {a.tolist()}, p = {p.tolist()}")
    if not abs(p.sum() - 1) < 1e-9:
        raise ValueError(f"the weights p must sum to 1, got {p.tolist()}")
    if not 0 < eta < 2 / a.max():
        raise ValueError(
            f"η = {eta} must lie in (0, 2 / max a_i) = (0, {2 / a.max():g}): beyond it the local steps diverge"
        )
    return a, c, p


def _check_k(K) -> int:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K (local steps) must be an int >= 1, got {K!r}")
    return int(K)


def minimiser(a=TWO_CLIENTS["a"], c=TWO_CLIENTS["c"], p=TWO_CLIENTS["p"]) -> float:
    """x* = Σ p_i a_i c_i / Σ p_i a_i, the minimiser of f = Σ p_i a_i/2 (x − c_i)²."""
    a, c, p = _two_clients(a, c, p, 1 / max(a))
    return float((p * a * c).sum() / (p * a).sum())


def fedavg_fixed_point(K: int, eta: float, a=TWO_CLIENTS["a"], c=TWO_CLIENTS["c"], p=TWO_CLIENTS["p"]) -> float:
    """Where FedAvg's rounds settle (chapter 01, eq. (4)): Σ p_i b_i c_i / Σ p_i b_i, b_i = 1 − (1 − η a_i)^K."""
    a, c, p = _two_clients(a, c, p, eta)
    b = 1 - (1 - eta * a) ** _check_k(K)
    return float((p * b * c).sum() / (p * b).sum())


def fedavg_iterates(
    K: int,
    eta: float,
    rounds: int,
    w0: float = 0.0,
    eta_g: float = 1.0,
    a=TWO_CLIENTS["a"],
    c=TWO_CLIENTS["c"],
    p=TWO_CLIENTS["p"],
) -> np.ndarray:
    """w^0 … w^rounds of FedAvg with every client, K exact gradient steps (eq. (2)), then the server step (3)."""
    a, c, p = _two_clients(a, c, p, eta)
    K = _check_k(K)
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise ValueError(f"rounds must be an int >= 0, got {rounds!r}")
    w = [float(w0)]
    for _ in range(rounds):
        y = np.full(len(a), w[-1])
        for _ in range(K):
            y = y - eta * a * (y - c)
        w.append(float(w[-1] + eta_g * (p * (y - w[-1])).sum()))
    return np.array(w)


def fedavg_drift_figure(
    K: int = 5,
    eta: float = 0.1,
    rounds: int = 40,
    a=TWO_CLIENTS["a"],
    c=TWO_CLIENTS["c"],
    p=TWO_CLIENTS["p"],
    Ks=range(1, 51),
):
    """Chapter 01's two clients: FedAvg's iterates for K local steps (left, with K = 1 for reference) and its
    fixed point w_K against K (right), both against the minimiser x* of f."""
    x_star, w_K, K = minimiser(a, c, p), fedavg_fixed_point(K, eta, a, c, p), _check_k(K)
    fig, (ax, ax_k) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    t = np.arange(rounds + 1)
    for i, k in enumerate([K] if K == 1 else [K, 1]):
        props = style(i, rounds + 1)
        ax.plot(t, fedavg_iterates(k, eta, rounds, a=a, c=c, p=p), label=f"$w^t$, K = {k}", **props)
        ax.axhline(
            fedavg_fixed_point(k, eta, a, c, p),
            color=props["color"],
            linestyle=":",
            linewidth=1,
            label=f"$w_K$ of eq. (4), K = {k}",
        )
    ax.axhline(x_star, color="black", linewidth=1, label=r"$x^\star$, the minimiser of $f$")
    ax.set(xlabel="round t", ylabel="server model $w^t$")
    fig.suptitle(f"η = {eta:g}, K = {K}: " + r"$w_K - x^\star$" + f" = {w_K - x_star:+.3f}", fontsize=11)
    Ks = np.asarray(list(Ks))
    ax_k.semilogx(
        Ks, [fedavg_fixed_point(int(k), eta, a, c, p) for k in Ks], label=f"$w_K$ at η = {eta:g}", **style(0, len(Ks))
    )
    ax_k.plot([K], [w_K], "o", markersize=14, markerfacecolor="none", markeredgecolor="black", label=f"K = {K}")
    ax_k.axhline(x_star, color="black", linewidth=1, label=r"$x^\star$")
    ax_k.axhline(float(np.dot(p, c)), color="0.4", linestyle="--", linewidth=1, label=r"$\Sigma_i\, p_i c_i$ (K → ∞)")
    ax_k.set(xlabel="local steps K (log scale)", ylabel="fixed point $w_K$")
    for each in (ax, ax_k):
        each.grid(True, alpha=0.3)
        legend_outside(each)
    return fig


def fedavg_drift_widget(a=TWO_CLIENTS["a"], c=TWO_CLIENTS["c"], p=TWO_CLIENTS["p"], eta: float = 0.1, K: int = 5):
    """Sliders for :func:`fedavg_drift_figure`: K and η (up to just below 2 / max a_i, where local steps diverge)."""
    import ipywidgets as widgets

    top = round(0.95 * 2 / max(a), 2)

    def draw(K, eta):
        fedavg_drift_figure(K, eta, a=a, c=c, p=p)
        plt.show()

    return widgets.interactive(
        draw,
        K=widgets.IntSlider(value=K, min=1, max=50, description="K"),
        eta=widgets.FloatSlider(value=eta, min=0.01, max=top, step=0.01, description="η"),
    )


def explore_fedavg_drift(
    a=TWO_CLIENTS["a"], c=TWO_CLIENTS["c"], p=TWO_CLIENTS["p"], eta: float = 0.1, K: int = 5
) -> None:
    """Chapter 01: where FedAvg settles on two clients as K and η change. Static figure, then sliders when live."""
    _show_figure(fedavg_drift_figure(K, eta, a=a, c=c, p=p))
    if live():
        from IPython.display import display

        display(fedavg_drift_widget(a, c, p, eta, K))


# --------------------------------------------------------------------------------------------- DFedAvg

#: The graphs of the DFedAvg exploration: static, and all defined at its m = 16 (a 4 × 4 grid).
DFEDAVG_TOPOLOGIES = ("ring", "grid", "exponential-mh", "complete")


@functools.lru_cache(maxsize=128)
def dfedavg_run(
    topology: str = "ring", K: int = 5, *, m: int = 16, rounds: int = 20, seed: int = 0, partition: str = "shards"
) -> dict[str, np.ndarray]:
    """The engine's DFedAvg on the bundled digits with a linear (softmax) model, on the CPU: a run of a fraction
    of a second. Returns read-only arrays per round 0 … rounds: ``test_acc`` and ``train_loss`` of the average
    model x̄, ``consensus_distance`` and ``transmissions`` (messages so far). Cached: a slider moved back is free.
    Runs on one torch thread, as the chapters do.
    """
    import torch

    from dfl_core.config import Config
    from dfl_core.engine.simulation import Simulation

    K = _check_k(K)
    if make_topology(topology, m).time_varying:
        raise ValueError(
            f"topology {topology!r} changes every step; the exploration offers static graphs, e.g. {DFEDAVG_TOPOLOGIES}"
        )
    cfg = Config(
        algorithm="dfedavg",
        dataset="digits",
        model="linear",
        num_clients=m,
        topology=topology,
        local_steps=K,
        rounds=rounds,
        partition=partition,
        seed=seed,
        eval_every=1,
        device="cpu",
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other (setup_notebook)
    try:
        records = Simulation(cfg).run().records
    finally:
        torch.set_num_threads(threads)
    out = {
        key: np.array([r[key] for r in records])
        for key in ("round", "test_acc", "train_loss", "consensus_distance", "transmissions")
    }
    for v in out.values():
        v.flags.writeable = False
    return out


def dfedavg_figure(
    topology: str = "ring",
    K: int = 5,
    x: str = "round",
    *,
    m: int = 16,
    rounds: int = 20,
    seed: int = 0,
    partition: str = "shards",
):
    """DFedAvg on ``topology`` with K local steps (:func:`dfedavg_run`), with K = 1 on the same graph and the
    same K on the complete graph for reference: test accuracy of x̄ (left) and consensus distance (right)
    against ``x``, one of :data:`dfl_book.plots.COST_AXES` ("round", "messages", "gradient_steps")."""
    from matplotlib.lines import Line2D

    from .plots import COST_AXES, cumulative_costs

    if x not in COST_AXES:
        raise ValueError(f"x must be one of {sorted(COST_AXES)}, not {x!r}")
    K = _check_k(K)
    shown = {f"{topology}, K = {K}": (topology, K)}
    if K != 1:
        shown[f"{topology}, K = 1"] = (topology, 1)
    if topology != "complete":
        shown[f"complete, K = {K}"] = ("complete", K)
    fig, (ax, ax_cd) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    notes = []
    for i, (label, (graph, k)) in enumerate(shown.items()):
        run = dfedavg_run(graph, k, m=m, rounds=rounds, seed=seed, partition=partition)
        xs = cumulative_costs(run["round"], topology=graph, num_clients=m, local_steps=k)[x]
        props = style(i, len(xs)) | ({"linewidth": 2.4} if i == 0 else {})
        ax.plot(xs, 100 * run["test_acc"], label=label, **props)
        cd = run["consensus_distance"][1:]
        if cd.max() < 1e-9:  # the complete graph: the clients agree after every round
            notes.append(Line2D([], [], linestyle="none", label=f"{label}: consensus distance 0 (rounding)"))
        else:
            ax_cd.semilogy(xs[1:], cd, **props)
    ax.set(xlabel=COST_AXES[x], ylabel="test accuracy of x̄ (%)")
    fig.suptitle(f"DFedAvg on the digits, linear model, m = {m}, {partition} split, seed {seed}", fontsize=11)
    ax_cd.set(xlabel=COST_AXES[x], ylabel="consensus distance (1/m) Σ‖x_i − x̄‖² (log)")
    for each in (ax, ax_cd):
        each.grid(True, alpha=0.3)
    legend_outside(ax_cd, handles=[line for line in ax.get_lines()] + notes)
    return fig


def dfedavg_widget(topologies=DFEDAVG_TOPOLOGIES, **run_options):
    """Sliders for :func:`dfedavg_figure`: the graph, K, and what the x axis counts (rounds, messages, steps)."""
    import ipywidgets as widgets

    from .plots import COST_AXES

    def draw(topology, K, x):
        dfedavg_figure(topology, K, x, **run_options)
        plt.show()

    return widgets.interactive(
        draw,
        topology=widgets.Dropdown(options=list(topologies), value=topologies[0], description="graph"),
        K=widgets.IntSlider(value=5, min=1, max=20, description="K"),
        x=widgets.Dropdown(
            options=[(label, key) for key, label in COST_AXES.items()], value="round", description="x axis"
        ),
    )


def explore_dfedavg(topologies=DFEDAVG_TOPOLOGIES, **run_options) -> None:
    """Chapter 04: DFedAvg's accuracy and consensus as K and the graph change. Static figure (ring, K = 5), then
    sliders when live."""
    _show_figure(dfedavg_figure(topologies[0], 5, **run_options))
    if live():
        from IPython.display import display

        display(dfedavg_widget(topologies, **run_options))
