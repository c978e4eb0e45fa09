"""Conceptual pictures of the book, drawn in code: where a student would rather look than read.

Every function returns a matplotlib ``Figure`` (made with pyplot, so a chapter
shows it with ``plt.show()``), needs no data file, and is deterministic: the
same call draws the same picture on every machine (fixed seeds, explicit
layouts). Each docstring names the chapter it serves. Where a picture shows
numbers (λ, the weights of W, a gossip step), they are computed from the
engine's own objects (:func:`dfl_core.topology.make_topology`), not typed in.

Artists a test may want to count carry a ``gid``: ``"wrap-edge"`` (torus),
``"message"`` (a row sent between ranks), ``"chapter"`` and ``"depends"``
(the chapter map), ``"client"``.

========================  ==========================================================
chapter                   diagram
========================  ==========================================================
00 preface                :func:`chapter_map`
01 federated learning     :func:`dirichlet_split`, :func:`fl_vs_dfl_round`
02 server to graph        :func:`fl_vs_dfl_round`, :func:`gossip_step`, :func:`topology_gallery`
03 distributed            :func:`rank_layout`
04 decentralized FedAvg   :func:`round_timelines`
05 compression            :func:`quantizer_levels`, :func:`public_copies`
06 privacy                :func:`membership_inference`
07 flat minima            :func:`sam_geometry`
08 DFedSAM(-MGS)          :func:`mgs_contraction`
09 flatness discrepancy   :func:`flatness_discrepancy`
10 theory                 :func:`lambda_ruler`
11 reproducing            :func:`reproduction_pipeline`
12 tutorial               :func:`engine_loop`
90 notation               :func:`round_notation`
========================  ==========================================================
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, PathPatch, Rectangle
from matplotlib.path import Path as MplPath

from .plots import COLORS

__all__ = [
    "CHAPTERS",
    "CHAPTER_DEPENDENCIES",
    "BY_CHAPTER",
    "chapter_map",
    "fl_vs_dfl_round",
    "dirichlet_split",
    "gossip_step",
    "topology_gallery",
    "rank_layout",
    "round_timelines",
    "quantizer_levels",
    "public_copies",
    "membership_inference",
    "sam_geometry",
    "mgs_contraction",
    "flatness_discrepancy",
    "lambda_ruler",
    "reproduction_pipeline",
    "engine_loop",
    "round_notation",
]

BLUE, ORANGE, GREEN, PINK, YELLOW, SKY, BLACK = COLORS[:7]

#: The chapters (their file numbers, ``book/NN_name.md``), with the short titles the map uses.
CHAPTERS = {
    "00": "Preface",
    "01": "Federated learn-\ning, heterogeneity",
    "02": "From a server\nto a graph",
    "03": "One process\nto many",
    "035": "Judging\na claim",
    "04": "Decentralized\nFedAvg(M)",
    "05": "Compression\nof messages",
    "06": "Privacy: member-\nship inference",
    "07": "Flat minima:\nSAM, FedSAM",
    "08": "DFedSAM,\nDFedSAM-MGS",
    "085": "D-SGD as\nimplicit SAM",
    "09": "Flatness\ndiscrepancy, FedGF",
    "10": "What the\ntheory says",
    "11": "Reproducing\nthe papers",
    "12": "Tutorial: your\nown algorithm",
    "90": "Notation\n(appendix)",
}
#: chapter -> the chapters to read first.
CHAPTER_DEPENDENCIES = {
    "01": ["00"],
    "02": ["01"],
    "03": ["02"],
    "035": ["01"],
    "04": ["02", "035"],
    "05": ["04"],
    "06": ["04"],
    "07": ["01", "035"],
    "08": ["04", "07"],
    "09": ["07"],
    "10": ["02", "08"],
    "11": ["08", "09"],
    "12": ["08"],
    "085": ["08"],
}
#: chapter -> the diagrams drawn for it (the table above).
BY_CHAPTER = {
    "00": ["chapter_map"],
    "01": ["dirichlet_split", "fl_vs_dfl_round"],
    "02": ["fl_vs_dfl_round", "gossip_step", "topology_gallery"],
    "03": ["rank_layout"],
    "04": ["round_timelines"],
    "05": ["quantizer_levels", "public_copies"],
    "06": ["membership_inference"],
    "07": ["sam_geometry"],
    "08": ["mgs_contraction"],
    "09": ["flatness_discrepancy"],
    "10": ["lambda_ruler"],
    "11": ["reproduction_pipeline"],
    "12": ["engine_loop"],
    "90": ["round_notation"],
}


# --------------------------------------------------------------------------------------------- helpers


def _canvas(figsize, title: str | None = None, xlim=(0, 10), ylim=(0, 5)):
    fig, ax = plt.subplots(figsize=figsize)
    ax.set(xlim=xlim, ylim=ylim, aspect="equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=11)
    return fig, ax


def _box(ax, xy, text, width=2.0, height=0.9, color=SKY, fontsize=9, gid=None, alpha=0.25):
    x, y = xy
    patch = FancyBboxPatch(
        (x - width / 2, y - height / 2),
        width,
        height,
        boxstyle="round,pad=0.05,rounding_size=0.15",
        facecolor=color,
        alpha=alpha,
        edgecolor=color,
        linewidth=1.5,
        gid=gid,
    )
    ax.add_patch(patch)
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            facecolor="none",
            edgecolor=color,
            boxstyle="round,pad=0.05,rounding_size=0.15",
            linewidth=1.5,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return patch


def _arrow(
    ax,
    a,
    b,
    color="0.25",
    text=None,
    rad=0.0,
    style="-|>",
    lw=1.4,
    gid=None,
    fontsize=8,
    shrink=4,
    linestyle="-",
    text_offset=(0, 0),
):
    arrow = FancyArrowPatch(
        a,
        b,
        arrowstyle=style,
        mutation_scale=12,
        color=color,
        linewidth=lw,
        gid=gid,
        connectionstyle=f"arc3,rad={rad}",
        shrinkA=shrink,
        shrinkB=shrink,
        linestyle=linestyle,
    )
    ax.add_patch(arrow)
    if text:
        mx, my = (a[0] + b[0]) / 2 + text_offset[0], (a[1] + b[1]) / 2 + text_offset[1]
        ax.text(
            mx,
            my,
            text,
            ha="center",
            va="center",
            fontsize=fontsize,
            color=color,
            bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85),
        )
    return arrow


def _node(ax, xy, text="", r=0.3, color=BLUE, gid="client", fontsize=9, fill=0.25):
    ax.add_patch(Circle(xy, r, facecolor=color, alpha=fill, edgecolor=color, linewidth=1.5, gid=gid))
    ax.add_patch(Circle(xy, r, facecolor="none", edgecolor=color, linewidth=1.5))
    if text != "":
        ax.text(*xy, text, ha="center", va="center", fontsize=fontsize)


def _loop(ax, center, outward, r: float = 0.3, color=ORANGE):
    """A small self-loop arrow on the outer side of a node (a client's local steps)."""

    def turn(v, degrees):
        a = math.radians(degrees)
        return np.array([v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a)])

    start, end = center + r * turn(outward, 40), center + r * turn(outward, -40)
    ax.add_patch(
        FancyArrowPatch(
            start, end, connectionstyle="arc3,rad=-1.9", arrowstyle="-|>", mutation_scale=9, color=color, linewidth=1.2
        )
    )


def _graph(W: np.ndarray) -> nx.Graph:
    A = (W - np.diag(np.diag(W))) > 0
    return nx.from_numpy_array(A.astype(int), create_using=nx.DiGraph if not np.array_equal(A, A.T) else nx.Graph)


# --------------------------------------------------------------------------------------------- 00 preface


#: The size of a chapter's box on the map, (width, height), without its rounded padding of 0.05.
CHAPTER_BOX = (2.2, 0.85)


def chapter_positions() -> dict[str, tuple[float, float]]:
    """The centre of each chapter's box on :func:`chapter_map`.

    A chapter's column is the length of its longest chain of prerequisites, so
    every arrow points right; chapter 09 moves one column further, beside the
    chapters it sits between (07 and 11), so that its arrow to 11 crosses no
    box. The rows are chosen by hand, for the same reason (tests/test_diagrams.py
    checks that no arrow crosses a box).
    """
    G = nx.DiGraph([(d, c) for c, ds in CHAPTER_DEPENDENCIES.items() for d in ds])
    column = {n: 0 for n in G}
    for n in nx.topological_sort(G):
        column[n] += n == "09"  # before its successors are placed, so that 11 stays right of it
        for s in G.successors(n):
            column[s] = max(column[s], column[n] + 1)
    rows = {
        "00": 2.0,
        "01": 2.0,
        "02": 3.0,
        "035": 0.0,
        "07": 1.0,
        "03": 4.2,
        "04": 2.4,
        "05": 4.6,
        "06": 3.6,
        "08": 2.0,
        "09": 0.0,
        "085": 1.1,
        "10": 3.1,
        "12": 4.1,
        "11": 2.0,
    }
    pos = {n: (1.25 + 2.5 * column[n], 1.2 + 1.1 * rows[n]) for n in G}
    pos["90"] = (1.25, 1.2 + 1.1 * 4.4)
    return pos


def chapter_map():
    """Chapter 00 (preface): which chapter to read before which, as a layered map.

    An arrow a → b means "read a first". Chapters are placed in columns by the
    longest chain of prerequisites (:func:`chapter_positions`), so every arrow
    points right; the notation appendix stands apart, to be looked up at any
    time. Colours group the parts: foundations, decentralized training, flat
    minima, theory and practice.
    """
    part = {
        "00": BLUE,
        "01": BLUE,
        "02": BLUE,
        "03": BLUE,
        "035": BLUE,
        "04": GREEN,
        "05": GREEN,
        "06": GREEN,
        "07": ORANGE,
        "08": ORANGE,
        "085": ORANGE,
        "09": ORANGE,
        "10": PINK,
        "11": PINK,
        "12": PINK,
        "90": "0.4",
    }
    pos, (width, height) = chapter_positions(), CHAPTER_BOX
    fig, ax = _canvas((14, 5.4), None, xlim=(0, 17.6), ylim=(0, 6.9))
    for n, (x, y) in pos.items():
        _box(ax, (x, y), f"{n}  {CHAPTERS[n]}", width=width, height=height, color=part[n], fontsize=8, gid="chapter")
    for b, first in CHAPTER_DEPENDENCIES.items():
        for a in first:
            (xa, ya), (xb, yb) = pos[a], pos[b]
            _arrow(ax, (xa + width / 2, ya), (xb - width / 2, yb), color="0.35", gid="depends", shrink=2)
    legend = [
        ("foundations", BLUE),
        ("decentralized training", GREEN),
        ("flat minima", ORANGE),
        ("theory and practice", PINK),
    ]
    for i, (label, color) in enumerate(legend):
        ax.add_patch(Rectangle((3.0 + 3.3 * i, 0.12), 0.3, 0.3, facecolor=color, alpha=0.4, edgecolor=color))
        ax.text(3.4 + 3.3 * i, 0.27, label, va="center", fontsize=9)
    ax.text(16.8, 6.6, "an arrow a → b: read a before b", ha="right", va="center", fontsize=9, color="0.3")
    return fig


# --------------------------------------------------------------------------------------------- 01 / 02


def fl_vs_dfl_round(m: int = 6):
    """Chapters 01 and 02: one round of federated learning (a server) beside one round of DFL (a graph).

    Left: the server sends the global model, every client takes K local steps,
    the server averages the results. Right: there is no server; every client
    takes K local steps and then averages with its neighbours on a ring (one
    gossip step, X ← WX).
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    angles = np.pi / 2 + 2 * np.pi * np.arange(m) / m
    ring = np.c_[2.0 * np.cos(angles), 2.0 * np.sin(angles)]
    for ax, title in ((left, "FL: one round with a server"), (right, "DFL: one round, no server")):
        ax.set(xlim=(-3.3, 3.3), ylim=(-3.1, 3.1), aspect="equal")
        ax.axis("off")
        ax.set_title(title, fontsize=11)
    _box(left, (0, 0), "server\n$w^t$", width=1.3, height=0.9, color=BLACK, alpha=0.08)
    for i, p in enumerate(ring):
        for ax in (left, right):
            _node(ax, p, f"{i + 1}")
            _loop(ax, p, p / np.linalg.norm(p))
        _arrow(left, (0.0, 0.0), tuple(p), color=BLUE, shrink=22, rad=0.18)
        _arrow(left, tuple(p), (0.0, 0.0), color=GREEN, shrink=22, rad=0.18)
        j = (i + 1) % m
        _arrow(right, p, ring[j], color=GREEN, style="<|-|>", shrink=12)
    left.text(
        0, -2.95, "1. send $w^t$ (blue)   2. K local steps (orange)   3. average (green)", ha="center", fontsize=9
    )
    right.text(
        0,
        -2.95,
        "1. K local steps (orange)   2. average with neighbours: $X \\leftarrow WX$ (green)",
        ha="center",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def dirichlet_split(alphas=(100.0, 1.0, 0.1), clients: int = 10, classes: int = 10, seed: int = 0):
    """Chapter 01: a Dirichlet(α) split as a clients × classes picture, for several α.

    Each row is one client, each column one class, and the shade is the share
    of the client's samples in that class, drawn as ``Dirichlet(α·1)`` (the
    "prior" method of ``dfl_core.data``; seed fixed). Large α: every client
    sees every class about equally (IID); small α: each client sees a few classes.
    """
    rng = np.random.default_rng(seed)
    fig, axes = plt.subplots(1, len(alphas), figsize=(3.4 * len(alphas) + 0.8, 3.6), layout="constrained")
    image = None
    for ax, alpha in zip(np.atleast_1d(axes), alphas):
        shares = rng.dirichlet(np.full(classes, alpha), size=clients)
        image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set(xlabel="class", ylabel="client", title=f"α = {alpha:g}", xticks=range(classes), yticks=range(clients))
        ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=axes, label="share of the client's samples")
    return fig


def gossip_step(m: int = 6, values=(9.0, 0.0, 0.0, 0.0, 0.0, 3.0)):
    """Chapter 02: one gossip step x ← Wx on a ring, with the weights of W on the arrows.

    Left: every client's number before the step; the arrows into client 1
    carry the Metropolis–Hastings weights of the engine's ring (1/3 each, for
    itself and its two neighbours). Right: the numbers after the step, computed
    as ``W @ x``; their sum (and so their average) is unchanged.
    """
    from dfl_core.topology import make_topology

    W = make_topology("ring", m).matrix(0).W
    x = np.asarray(values, dtype=float)[:m]
    after = W @ x
    angles = np.pi / 2 + 2 * np.pi * np.arange(m) / m
    pos = np.c_[1.8 * np.cos(angles), 1.8 * np.sin(angles)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
    for ax, vals, title in ((axes[0], x, "before: $x$"), (axes[1], after, "after one step: $Wx$")):
        ax.set(xlim=(-2.9, 2.9), ylim=(-3.2, 2.8), aspect="equal")
        ax.axis("off")
        ax.set_title(f"{title}   (sum = {vals.sum():g})", fontsize=11)
        for i in range(m):
            j = (i + 1) % m
            ax.plot(*zip(pos[i], pos[j]), color="0.75", linewidth=1.2, zorder=0)
        for i, v in enumerate(vals):
            _node(ax, pos[i], f"{v:g}", r=0.36, fontsize=10)
            ax.text(*(pos[i] * 1.42), f"client {i + 1}", ha="center", va="center", fontsize=8, color="0.35")
    for j in (m - 1, 1):
        _arrow(axes[0], pos[j], pos[0], color=ORANGE, text=f"{W[0, j]:.3g}", shrink=14, rad=0.25)
    axes[0].add_patch(
        FancyArrowPatch(
            pos[0] + (-0.3, -0.25),
            pos[0] + (0.3, -0.25),
            connectionstyle="arc3,rad=1.5",
            arrowstyle="-|>",
            mutation_scale=10,
            color=ORANGE,
        )
    )
    axes[0].text(pos[0][0], pos[0][1] - 0.95, f"keeps {W[0, 0]:.3g}", ha="center", fontsize=8, color=ORANGE)
    axes[1].text(
        0,
        -3.05,
        f"client 1: {W[0, m - 1]:.3g}·{x[m - 1]:g} + {W[0, 0]:.3g}·{x[0]:g} + "
        f"{W[0, 1]:.3g}·{x[1]:g} = {after[0]:g}; every client does the same at once",
        ha="center",
        fontsize=8.5,
    )
    fig.tight_layout()
    return fig


def _torus_wrap_edges(rows: int, cols: int) -> list[tuple[int, int]]:
    idx = np.arange(rows * cols).reshape(rows, cols)
    wraps = [(int(idx[r, 0]), int(idx[r, -1])) for r in range(rows)] if cols >= 3 else []
    return wraps + ([(int(idx[0, c]), int(idx[-1, c])) for c in range(cols)] if rows >= 3 else [])


def topology_gallery(names=("ring", "grid", "torus", "exponential", "star", "complete"), m: int = 16):
    """Chapter 02: the engine's graphs at m clients, each with its λ; the torus's wrap-around edges drawn.

    A torus is a grid whose rows and columns close into cycles. Drawn on the
    same square layout as the grid, its extra edges (client (r, 0) to
    (r, c−1), client (0, c) to (r−1, c)) are dashed orange arcs outside the
    square, so the two graphs no longer look alike. The directed exponential
    graph is drawn with arrows. λ is the engine's ``make_topology(name, m).matrix(0).lam``.
    """
    from dfl_core.topology import grid_shape, make_topology

    fig, axes = plt.subplots(1, len(names), figsize=(2.75 * len(names), 3.4))
    for ax, name in zip(np.atleast_1d(axes), names):
        M = make_topology(name, m).matrix(0)
        G = _graph(M.W)
        if name in ("grid", "torus"):
            rows, cols = grid_shape(m, name)
            pos = {i: (i % cols, -(i // cols)) for i in G}
            wraps = set(_torus_wrap_edges(rows, cols)) if name == "torus" else set()
        else:
            angles = np.pi / 2 - 2 * np.pi * np.arange(m) / m
            pos = {i: (math.cos(a), math.sin(a)) for i, a in zip(range(m), angles)}
            if name == "star":
                pos[0] = (0.0, 0.0)
            wraps = set()
        plain = [e for e in G.edges if tuple(sorted(e)) not in wraps]
        nx.draw_networkx_edges(
            G,
            pos,
            edgelist=plain,
            ax=ax,
            width=0.7,
            edge_color="0.45",
            node_size=60,
            **({"arrows": True, "arrowsize": 6} if M.directed else {"arrows": False}),
        )
        for a, b in sorted(wraps):
            (xa, ya), (xb, yb) = pos[a], pos[b]
            if ya == yb:  # a row closes: out to the left, round above the row, in from the right
                verts = [(xa, ya), (xa - 0.9, ya + 0.5), (xb + 0.9, yb + 0.5), (xb, yb)]
            else:  # a column closes: out at the top, round to the right, in at the bottom
                verts = [(xa, ya), (xa + 0.5, ya + 0.9), (xb + 0.5, yb - 0.9), (xb, yb)]
            ax.add_patch(
                PathPatch(
                    MplPath(verts, [MplPath.MOVETO] + [MplPath.CURVE4] * 3),
                    facecolor="none",
                    edgecolor=ORANGE,
                    linestyle="--",
                    linewidth=0.9,
                    gid="wrap-edge",
                )
            )
        nx.draw_networkx_nodes(G, pos, ax=ax, node_size=60, node_color=BLUE)
        ax.set_title(f"{name}\nλ = {M.lam:.3f}", fontsize=10)
        ax.set_aspect("equal")
        ax.margins(0.18)
        ax.axis("off")
        if wraps:
            ax.text(
                0.5,
                -0.02,
                "dashed: wrap-around edges",
                transform=ax.transAxes,
                ha="center",
                va="top",
                fontsize=8,
                color=ORANGE,
            )
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 03


def rank_layout(num_clients: int = 8, ranks: int = 4, topology: str = "ring"):
    """Chapter 03: processes (ranks) holding blocks of clients, and the rows they send each other.

    Rank r holds clients r·m/P … (r+1)·m/P − 1. An edge of the graph inside a
    block is averaging within one process (grey, no message); an edge between
    blocks is a row sent over the network (orange arrows, ``gid="message"``).
    The graph is the engine's ``make_topology(topology, num_clients)``.
    """
    from dfl_core.topology import make_topology

    W = make_topology(topology, num_clients).matrix(0).W
    per = num_clients // ranks
    block = {i: i // per for i in range(num_clients)}
    fig, ax = _canvas(
        (11, 3.6),
        f"{num_clients} clients on a {topology} over {ranks} processes",
        xlim=(-0.3, 3.0 * ranks),
        ylim=(-1.6, 2.1),
    )
    pos = {}
    for r in range(ranks):
        x0 = 3.0 * r + 0.2
        ax.add_patch(
            FancyBboxPatch(
                (x0, -0.05),
                2.3,
                1.4,
                boxstyle="round,pad=0.05,rounding_size=0.2",
                facecolor=SKY,
                alpha=0.15,
                edgecolor=SKY,
                linewidth=1.5,
            )
        )
        ax.text(x0 + 1.15, -0.4, f"rank {r}", ha="center", va="center", fontsize=10)
        clients = [i for i in range(num_clients) if block[i] == r]
        for k, i in enumerate(clients):
            pos[i] = (x0 + 2.3 * (k + 0.5) / len(clients), 0.65)
            _node(ax, pos[i], f"{i}", r=0.3)
    for i in range(num_clients):
        for j in range(i + 1, num_clients):
            if W[i, j] <= 0:
                continue
            if block[i] == block[j]:
                ax.plot(*zip(pos[i], pos[j]), color="0.5", linewidth=1.5, zorder=0)
            else:
                around = abs(block[i] - block[j]) > 1
                a, b = (pos[j], pos[i]) if around else (pos[i], pos[j])
                _arrow(ax, a, b, color=ORANGE, style="<|-|>", rad=0.22 if around else 0.0, gid="message", shrink=13)
    ax.text(
        1.5 * ranks - 0.15,
        -1.2,
        "grey: averaging inside one process (no message)    orange: a model row sent to another process",
        ha="center",
        fontsize=9,
    )
    return fig


# --------------------------------------------------------------------------------------------- 04


def round_timelines(K: int = 4, Q: int = 3):
    """Chapter 04 (also 08): what one round does, in order, for D-PSGD, DFedAvg(M) and DFedSAM-MGS.

    D-PSGD alternates one SGD step with one gossip step. DFedAvg takes K local
    steps and then gossips once; DFedAvgM is the same with heavy-ball steps.
    DFedSAM takes K SAM steps (two gradients each: ascend, then descend) and
    DFedSAM-MGS then gossips Q times.
    """
    rows = [
        ("D-PSGD", ["sgd", "gossip"] * 2),
        ("DFedAvg / DFedAvgM", ["sgd"] * K + ["gossip"]),
        (f"DFedSAM-MGS (Q = {Q})", ["sam"] * K + ["gossip"] * Q),
    ]
    colors = {"sgd": BLUE, "sam": ORANGE, "gossip": GREEN}
    labels = {
        "sgd": "local SGD / heavy-ball step",
        "sam": "local SAM step (2 gradients)",
        "gossip": "gossip step $X \\leftarrow WX$ (one message per edge)",
    }
    fig, ax = plt.subplots(figsize=(10, 2.9))
    for y, (name, steps) in enumerate(reversed(rows)):
        x = 0.0
        for kind in steps:
            width = 1.0 if kind != "sam" else 1.6
            ax.add_patch(
                FancyBboxPatch(
                    (x + 0.05, y - 0.3),
                    width - 0.1,
                    0.6,
                    boxstyle="round,pad=0.02",
                    facecolor=colors[kind],
                    alpha=0.75,
                    edgecolor="none",
                )
            )
            x += width
        ax.text(-0.2, y, name, ha="right", va="center", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, facecolor=colors[k], alpha=0.75, label=labels[k]) for k in colors]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False, fontsize=9)
    ax.set(xlim=(-4.2, K * 1.6 + Q + 0.5), ylim=(-0.6, len(rows) - 0.4))
    ax.set_xlabel("time within one round →  (D-PSGD: two of its rounds, one step each)", fontsize=9)
    ax.set_yticks([])
    ax.set_xticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 05 / 06


def quantizer_levels(bits: int = 2, value: float = 0.7, step: float = 1.0):
    """Chapter 05: a b-bit quantizer's levels, and where one value goes under each rounding.

    The 2^b levels k·h, k = −2^(b−1) … 2^(b−1) − 1, on a number line (h: the step). The value
    v between levels k·h and (k+1)·h goes to the nearer level (nearest
    rounding: error ≤ h/2, biased), to the lower one (rounding down: always
    biased downwards), or, stochastically, up with probability v/h − k and down
    otherwise (unbiased: the expected level is v).
    """
    L = 2 ** (bits - 1)
    levels = step * np.arange(-L, L)
    k = math.floor(value / step)
    low, high = k * step, (k + 1) * step
    frac = value / step - k
    nearest = high if frac >= 0.5 else low
    fig, ax = plt.subplots(figsize=(9, 4.2))
    rows = [("nearest", 2.0), ("round down", 1.0), ("stochastic", 0.0)]
    for name, y in rows:
        ax.plot([levels[0] - 0.5 * step, levels[-1] + 0.5 * step], [y, y], color="0.6", linewidth=1)
        ax.plot(levels, np.full_like(levels, y), "|", color=BLACK, markersize=14, gid="level")
        ax.plot([value], [y], "o", color=PINK, markersize=7, zorder=4)
        ax.text(levels[0] - 0.6 * step, y, name, ha="right", va="center", fontsize=10)
    _arrow(
        ax,
        (value, 2.0),
        (nearest, 2.0),
        color=BLUE,
        rad=0.7 if nearest > value else -0.7,
        shrink=2,
        text=f"to the nearer level: error {abs(nearest - value):.2g} ≤ h/2",
        text_offset=(0, 0.32),
    )
    _arrow(
        ax,
        (value, 1.0),
        (low, 1.0),
        color=ORANGE,
        rad=0.5,
        shrink=2,
        text=f"always down: error {value - low:.2g}, biased",
        text_offset=(0, 0.36),
    )
    _arrow(
        ax,
        (value, 0.0),
        (high, 0.0),
        color=GREEN,
        rad=0.7,
        shrink=2,
        text=f"up with p = {frac:.2g}",
        text_offset=(0, -0.3),
    )
    _arrow(
        ax,
        (value, 0.0),
        (low, 0.0),
        color=GREEN,
        rad=0.5,
        shrink=2,
        text=f"down with p = {1 - frac:.2g}: unbiased",
        text_offset=(0, 0.36),
    )
    ax.set_xticks(levels, [f"{lv:g}" for lv in levels])
    ax.set_xlabel(
        f"level k·s, s = {step:g} ({bits} bits: {2**bits} levels from −{L}s to {L - 1}s);  the dot is v = {value:g}"
    )
    ax.set(ylim=(-0.7, 2.6), yticks=[], xlim=(levels[0] - 2.0 * step, levels[-1] + 0.6 * step))
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def public_copies(bits: int = 8):
    r"""Chapter 05: what each client holds and sends in compressed gossip with public copies (CHOCO-Gossip).

    Three clients on a path, j — i — l. Client i holds its model :math:`z_i`, its own public copy
    :math:`\hat x_i` and the copies of its neighbours :math:`\hat x_j, \hat x_l`; every copy of
    :math:`\hat x_j` is built from j's messages alone, so all holders agree. A message carries
    :math:`q_j = \mathcal Q(z_j - \hat x_j)`: b-bit integers and one 32-bit step, d·b + 32 bits.
    """
    fig, ax = plt.subplots(figsize=(10, 3.6))
    centres = {"j": 1.6, "i": 5.0, "l": 8.4}
    holds = {
        "j": ["z_j", "\\hat x_j", "\\hat x_i"],
        "i": ["z_i", "\\hat x_i", "\\hat x_j,\\ \\hat x_l"],
        "l": ["z_l", "\\hat x_l", "\\hat x_i"],
    }
    for name, x in centres.items():
        own, public, copies = holds[name]
        _box(
            ax,
            (x, 1.1),
            f"client {name}\nmodel ${own}$ (private)\nown copy ${public}$\nneighbours' ${copies}$",
            width=2.5,
            height=1.5,
            color=BLUE if name == "i" else SKY,
            gid="client",
        )
    for a, b in (("j", "i"), ("i", "l")):
        xa, xb = centres[a] + 1.3, centres[b] - 1.3
        _arrow(
            ax, (xa, 1.45), (xb, 1.45), color=ORANGE, gid="message", text=f"$q_{a}$", rad=-0.25, text_offset=(0, 0.45)
        )
        _arrow(
            ax, (xb, 0.75), (xa, 0.75), color=ORANGE, gid="message", text=f"$q_{b}$", rad=-0.25, text_offset=(0, -0.45)
        )
    ax.text(
        5.0,
        2.75,
        f"each gossip step, each client sends $q = \\mathcal{{Q}}(z - \\hat x)$: {bits}-bit "
        f"integers and one 32-bit step (d·{bits} + 32 bits)",
        ha="center",
        fontsize=10,
    )
    ax.text(
        5.0,
        -0.45,
        "everyone who holds $\\hat x_j$ adds $q_j$ to it;  then "
        "$z_i \\leftarrow z_i + \\gamma\\sum_j w_{ij}(\\hat x_j - \\hat x_i)$",
        ha="center",
        fontsize=10,
    )
    ax.set(xlim=(0, 10), ylim=(-0.8, 3.1))
    ax.axis("off")
    fig.tight_layout()
    return fig


def membership_inference(gap: float = 1.2):
    """Chapter 06: why a model leaks membership — its loss is lower on the points it trained on.

    Schematic densities (not measurements) of a model's loss on its training
    points (members) and on unseen points (non-members). The simplest attack
    calls a point a member when its loss is below a threshold; the more the two
    densities separate (overfitting), the better any attack does, and the
    larger its ROC AUC (0.5: no leakage, 1: complete).
    """
    loss = np.linspace(0, 6, 400)

    def density(mean, sd):
        return np.exp(-0.5 * ((loss - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))

    members, others = density(1.5, 0.6), density(1.5 + gap, 0.8)
    threshold = 1.5 + gap / 2
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(loss, members, color=BLUE, label="members (training points)", linewidth=2)
    ax.plot(loss, others, color=ORANGE, linestyle="--", label="non-members (unseen points)", linewidth=2)
    ax.fill_between(loss, 0, members, where=loss <= threshold, color=BLUE, alpha=0.2)
    ax.fill_between(loss, 0, others, where=loss <= threshold, color=ORANGE, alpha=0.2)
    ax.axvline(threshold, color=BLACK, linewidth=1)
    top = 1.3 * max(members.max(), others.max())
    ax.text(threshold - 0.08, 0.93 * top, '← called "member"', ha="right", va="top", fontsize=9)
    ax.set(xlabel="the model's loss on a point (cross-entropy)", ylabel="density (schematic)", ylim=(0, top))
    ax.legend(loc="upper right", fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 07


def sam_geometry(rho: float = 0.3, lr: float = 0.2, w=(0.15, 1.0)):
    """Chapter 07: one SAM step on a 2-D loss, next to one SGD step from the same point.

    The loss is the quadratic F(w) = ½ wᵀAw with a sharp and a flat direction.
    From w, SAM ascends to w + δ with δ = ρ∇F(w)/‖∇F(w)‖ (the worst point of
    the ρ-ball to first order), takes the gradient there, and applies it at w:
    w − η∇F(w + δ). SGD steps along −η∇F(w). The dashed circle is the ρ-ball.
    """
    A = np.array([[6.0, 0.0], [0.0, 0.4]])
    w = np.asarray(w, dtype=float)
    grad = A @ w
    delta = rho * grad / np.linalg.norm(grad)
    grad_sam = A @ (w + delta)
    sgd, sam = w - lr * grad, w - lr * grad_sam
    u, v = np.meshgrid(np.linspace(-1.0, 1.4, 200), np.linspace(-0.2, 1.9, 200))
    loss = 0.5 * (A[0, 0] * u**2 + 2 * A[0, 1] * u * v + A[1, 1] * v**2)
    fig, ax = plt.subplots(figsize=(6.6, 5.8))
    contours = ax.contour(u, v, loss, levels=[0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2], colors="0.55", linewidths=0.8)
    ax.clabel(contours, fontsize=6, fmt="%.2g")
    ax.add_patch(Circle(w, rho, fill=False, linestyle="--", edgecolor="0.4"))
    ax.plot(*w, "o", color=BLACK, zorder=5)
    ax.annotate("$w$", w, xytext=(5, -16), textcoords="offset points", fontsize=12)
    ax.annotate("$w+\\delta$", w + delta, xytext=(6, 4), textcoords="offset points", fontsize=12)
    ax.plot(*(w + delta), "o", color=PINK, zorder=5)
    _arrow(ax, w, w + delta, color=PINK, shrink=0)
    _arrow(ax, w + delta, w + delta - lr * grad_sam, color=PINK, linestyle=":", shrink=0)
    _arrow(ax, w, sam, color=BLUE, shrink=0, lw=2.2)
    _arrow(ax, w, sgd, color=ORANGE, shrink=0, lw=2.2, linestyle="--")
    ax.plot(0, 0, "*", color=BLACK, markersize=10)
    handles = [
        plt.Line2D([], [], color=PINK, label="ascent δ = ρ∇F(w)/‖∇F(w)‖"),
        plt.Line2D([], [], color=PINK, linestyle=":", label="−η∇F(w+δ), the gradient taken at w+δ"),
        plt.Line2D([], [], color=BLUE, linewidth=2.2, label="SAM step: w − η∇F(w+δ)"),
        plt.Line2D([], [], color=ORANGE, linewidth=2.2, linestyle="--", label="SGD step: w − η∇F(w)"),
        plt.Line2D([], [], color="0.4", linestyle="--", label=f"the ρ-ball, ρ = {rho:g}"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8.5, frameon=False, ncol=2)
    ax.set(
        xlabel="weight $w_1$",
        ylabel="weight $w_2$",
        aspect="equal",
        title="one SAM step and one SGD step on $F(w) = \\frac{1}{2} w^\\top A w$\n"
        "(contours of F, A = diag(6, 0.4); ★ its minimum; the sharp direction is $w_1$)",
    )
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 08


def mgs_contraction(m: int = 8, Q: int = 4, seed: int = 0, topology: str = "ring"):
    """Chapter 08: Q gossip steps contract the clients' spread more than one (DFedSAM-MGS vs DFedSAM).

    Every client holds one number (seeded random start); each gossip step
    applies the engine's W of ``topology``. Lines follow each client; the
    shaded band is the spread (min to max). The round of DFedSAM stops after
    step 1, that of DFedSAM-MGS after step Q, with the spread printed at both.
    """
    from dfl_core.topology import make_topology

    W = make_topology(topology, m).matrix(0).W
    x = np.random.default_rng(seed).normal(size=m)
    steps = [x]
    for _ in range(Q):
        steps.append(W @ steps[-1])
    X = np.array(steps)  # (Q + 1, m)
    q = np.arange(Q + 1)
    fig, ax = plt.subplots(figsize=(7.5, 3.9))
    ax.fill_between(q, X.min(1), X.max(1), color=SKY, alpha=0.25, label="spread: min to max over clients")
    for i in range(m):
        ax.plot(
            q,
            X[:, i],
            color=BLUE,
            marker="o",
            markersize=4,
            linewidth=1,
            alpha=0.8,
            gid="client",
            label="one client's model" if i == 0 else None,
        )
    ax.axhline(x.mean(), color=BLACK, linestyle="--", linewidth=1, label="average (kept by every step)")
    for stop, name, color, side in (
        (1, "DFedSAM: Q = 1", ORANGE, "left"),
        (Q, f"DFedSAM-MGS: Q = {Q}", GREEN, "right"),
    ):
        ax.axvline(stop, color=color, linewidth=2, alpha=0.8)
        ax.text(
            stop + (0.06 if side == "left" else -0.06),
            X.max() * 1.02,
            f"{name}\nspread {np.ptp(X[stop]):.2f}",
            color=color,
            fontsize=9,
            va="bottom",
            ha=side,
        )
    ax.set(
        xlabel="gossip step q within one round",
        ylabel="a client's model (one coordinate)",
        xticks=q,
        ylim=(X.min() * 1.15, X.max() * 1.55),
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8, frameon=False)
    ax.set_title(f"{topology}, m = {m}: spread {np.ptp(X[0]):.2f} at the start of gossip", fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 09


def flatness_discrepancy(rho: float = 0.35):
    """Chapter 09: every client's minimum is flat, yet the global minimum is sharp.

    Two clients' losses (1-D, drawn from formulas): each has a flat basin at
    its own minimum (w = ∓1) and a steep wall on the other side of w = 0. The
    global loss is their average, whose minimum at w = 0 sits between the two
    walls and is sharp. Bars show, at each minimum, how much the loss can rise
    within ρ (the sharpness SAM penalises): small for the local minima, large
    for the global one. That gap is what FedGF calls the flatness discrepancy.
    """
    w = np.linspace(-2.3, 2.3, 600)

    def client(w, sign):
        return 0.1 * (w + sign) ** 2 + 4.0 * np.maximum(sign * w, 0) ** 2

    f1, f2 = client(w, 1.0), client(w, -1.0)
    f = (f1 + f2) / 2
    fig, ax = plt.subplots(figsize=(8.5, 4.0))
    ax.plot(w, f1, color=BLUE, label="client 1's loss $F_1$", linewidth=1.8)
    ax.plot(w, f2, color=ORANGE, linestyle="--", label="client 2's loss $F_2$", linewidth=1.8)
    ax.plot(w, f, color=BLACK, linewidth=2.4, label="global loss $F = (F_1 + F_2)/2$")
    for center, curve, color, name, offset in (
        (-1.0, f1, BLUE, "flat", (0, 12)),
        (1.0, f2, ORANGE, "flat", (0, 12)),
        (0.0, f, BLACK, "sharp", (95, 10)),
    ):
        inside = np.abs(w - center) <= rho
        low, high = curve[inside].min(), curve[inside].max()
        ax.add_patch(Rectangle((center - rho, low), 2 * rho, high - low, facecolor=color, alpha=0.18, edgecolor=color))
        ax.annotate(
            f"{name}: rises {high - low:.2f}\nwithin ±ρ",
            (center + (rho if offset[0] else 0), high),
            xytext=offset,
            textcoords="offset points",
            ha="center",
            fontsize=8.5,
            color=color,
            arrowprops=dict(arrowstyle="-", color=color, linewidth=0.8) if offset[0] else None,
        )
    ax.set(
        xlabel="model parameter $w$",
        ylabel="loss",
        ylim=(0, 1.6),
        title=f"local minima flat, global minimum sharp (ρ = {rho:g})",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=3, fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 10


def lambda_ruler(m: int = 16, names=("complete", "exponential-mh", "torus", "grid", "ring", "star")):
    """Chapter 10: where the engine's graphs sit on the scale of λ, and what 1 − λ means.

    λ ∈ [0, 1) is the factor by which one gossip step at least shrinks the
    clients' disagreement; the spectral gap 1 − λ is what the bounds divide by.
    Each topology is placed at its λ at m clients (the engine's W).
    """
    from dfl_core.topology import make_topology

    lams = {name: make_topology(name, m).matrix(0).lam for name in names}
    fig, ax = plt.subplots(figsize=(10, 2.9))
    ax.plot([0, 1], [0, 0], color=BLACK, linewidth=1.5)
    for t in np.linspace(0, 1, 11):
        ax.plot([t, t], [-0.05, 0.05], color=BLACK, linewidth=1)
        ax.text(t, -0.16, f"{t:.1f}", ha="center", va="top", fontsize=8)
    label_x = -1.0
    for i, (name, lam) in enumerate(sorted(lams.items(), key=lambda kv: kv[1])):
        label_x = max(lam, label_x + 0.12)  # keep close labels apart
        height = 0.4 + 0.35 * (i % 2)
        color = COLORS[i % len(COLORS)]
        ax.plot([lam, lam, label_x], [0, 0.22, height], color=color, linewidth=1.2)
        ax.plot(lam, 0, "o", color=color, markersize=7)
        ax.text(label_x, height + 0.03, f"{name}\nλ = {lam:.3f}", ha="center", va="bottom", fontsize=8.5)
    ring = lams.get("ring")
    if ring is not None:
        ax.annotate("", xy=(ring, -0.42), xytext=(1.0, -0.42), arrowprops=dict(arrowstyle="<->", color=PINK))
        ax.text(1.01, -0.42, f"ring's gap 1 − λ = {1 - ring:.3f}", va="center", fontsize=8.5, color=PINK)
    ax.text(0.0, -0.62, "← one gossip step reaches agreement", fontsize=9, color="0.3")
    ax.text(1.0, -0.62, "λ → 1: agreement never comes →", fontsize=9, color="0.3", ha="right")
    ax.set(xlim=(-0.05, 1.32), ylim=(-0.75, 1.35), title=f"λ of the engine's graphs at m = {m} clients")
    ax.axis("off")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- 11


def reproduction_pipeline():
    """Chapter 11: how a paper's table becomes a verdict in this book.

    A table cell of a paper is matched by a preset (its settings), run under a
    profile over several seeds, summarised per method, compared in pairs (the
    claim is about a difference: "A beats B"), and judged: reproduces, does not,
    or cannot tell at this scale. The claims checker reads the paper's own
    numbers before anything is run.
    """
    fig, ax = _canvas((12, 3.6), None, xlim=(0, 12.4), ylim=(0, 3.6))
    steps = [
        ("paper's table\n(a claim: A beats B)", BLUE),
        ("preset\n(dfl_book.presets)", SKY),
        ("runs over seeds\n(fast or full profile)", GREEN),
        ("mean ± CI\nper method", YELLOW),
        ("paired difference\nA − B per seed", ORANGE),
        ("verdict: reproduces,\ndoes not, can't tell", PINK),
    ]
    xs = np.linspace(1.05, 11.35, len(steps))
    for x, (text, color) in zip(xs, steps):
        _box(ax, (x, 2.1), text, width=1.85, height=1.1, color=color, fontsize=8.5)
    for a, b in zip(xs[:-1], xs[1:]):
        _arrow(ax, (a + 0.93, 2.1), (b - 0.93, 2.1), shrink=1)
    _box(
        ax,
        (xs[0], 0.55),
        "claims checker:\nthe paper's own numbers",
        width=1.95,
        height=0.85,
        color=BLACK,
        fontsize=8,
        alpha=0.08,
    )
    _arrow(ax, (xs[0], 0.98), (xs[0], 1.55), shrink=1)
    _arrow(
        ax,
        (xs[0] + 0.98, 0.55),
        (xs[-1], 1.55),
        rad=0.08,
        linestyle="--",
        text="a misprint is a verdict too",
        color="0.4",
    )
    return fig


# --------------------------------------------------------------------------------------------- 12


def engine_loop():
    """Chapter 12: the engine's loop, and the two places a new algorithm plugs in.

    The engine owns the loop over rounds: it hands the clients' parameters
    (in its state, e.g. ``ClientModels(x)`` with ``x`` an ``(m, d)`` tensor) and the round's tools ``r``
    to the algorithm's ``round(state, r) -> state``, which typically calls ``r.local_train(x)`` (K steps of
    the local rule on every client, on each client's own data) and
    ``r.gossip(x)`` (W applied Q times), and evaluates every ``eval_every``
    rounds. A new algorithm is a new ``round`` (or a new local rule).
    """
    fig, ax = _canvas((11, 4.6), None, xlim=(0, 11), ylim=(0, 4.6))
    _box(ax, (1.3, 2.3), "data:\neach client's split\n(held by the engine)", width=2.2, height=1.2, color=SKY)
    ax.add_patch(
        FancyBboxPatch(
            (3.1, 1.1),
            5.0,
            2.75,
            boxstyle="round,pad=0.05,rounding_size=0.25",
            facecolor="none",
            edgecolor=PINK,
            linewidth=2,
            linestyle="--",
        )
    )
    ax.text(5.6, 3.6, "your algorithm: round(state, r) -> state", ha="center", fontsize=10, color=PINK)
    _box(
        ax,
        (4.4, 2.3),
        "r.local_train(x)\nK steps of the local rule\n(SGD, momentum, SAM, …)",
        width=2.3,
        height=1.2,
        color=ORANGE,
    )
    _box(ax, (6.85, 2.3), "r.gossip(x)\n$X \\leftarrow W^Q X$", width=1.9, height=1.2, color=GREEN)
    _box(ax, (9.6, 2.3), "evaluate every\neval_every rounds:\naccuracy, consensus", width=2.2, height=1.2, color=YELLOW)
    _arrow(ax, (2.4, 2.3), (3.25, 2.3), shrink=1)
    _arrow(ax, (5.55, 2.3), (5.9, 2.3), shrink=1)
    _arrow(ax, (7.8, 2.3), (8.5, 2.3), shrink=1)
    _arrow(
        ax, (9.6, 1.7), (4.4, 1.7), rad=-0.35, shrink=1, text="next round t + 1", color="0.35", text_offset=(0, -1.05)
    )
    ax.text(
        5.6,
        0.2,
        "state: e.g. ClientModels(x), x an (m, d) tensor whose row i is client i's model",
        ha="center",
        fontsize=9,
        color="0.3",
    )
    return fig


# --------------------------------------------------------------------------------------------- 90


def round_notation(K: int = 3, Q: int = 2):
    """Chapter 90 (notation): the symbols of one round of DFedSAM-MGS, on the round itself.

    Client i starts round t from x^t(i), sets y^{t,0}(i) = x^t(i), takes K local
    steps (learning rate η, SAM radius ρ) to y^{t,K}(i), gossips
    z^{t,0}(i) = y^{t,K}(i) Q times with W, and ends at x^{t+1}(i) = z^{t,Q}(i).
    """
    fig, ax = _canvas((12, 3.4), None, xlim=(-1.2, 2.4 * (K + Q) + 1.2), ylim=(-0.9, 2.5))
    labels = (
        ["$x^t(i)$\n$= y^{t,0}(i)$"]
        + [f"$y^{{t,{k}}}(i)$" for k in range(1, K)]
        + ["$y^{t,K}(i)$\n$= z^{t,0}(i)$"]
        + [f"$z^{{t,{q}}}(i)$" for q in range(1, Q)]
        + ["$z^{t,Q}(i)$\n$= x^{t+1}(i)$"]
    )
    xs = np.arange(len(labels)) * 2.4
    for i, (x, text) in enumerate(zip(xs, labels)):
        ax.plot(x, 1.0, "o", color=BLUE if i <= K else GREEN, markersize=9)
        ax.text(x, 1.25, text, ha="center", va="bottom", fontsize=10)
    for i, (a, b) in enumerate(zip(xs[:-1], xs[1:])):
        local = i < K
        _arrow(
            ax,
            (a, 1.0),
            (b, 1.0),
            color=ORANGE if local else GREEN,
            shrink=6,
            text="SAM step (η, ρ)" if local else "gossip with W",
            text_offset=(0, -0.35),
        )
    ax.annotate("", xy=(xs[K], -0.35), xytext=(xs[0], -0.35), arrowprops=dict(arrowstyle="<->", color=ORANGE))
    ax.text(
        (xs[0] + xs[K]) / 2, -0.65, f"K local steps, k = 0 … K−1 (K = {K} here)", ha="center", fontsize=9, color=ORANGE
    )
    ax.annotate("", xy=(xs[-1], -0.35), xytext=(xs[K], -0.35), arrowprops=dict(arrowstyle="<->", color=GREEN))
    ax.text(
        (xs[K] + xs[-1]) / 2, -0.65, f"Q gossip steps, q = 0 … Q−1 (Q = {Q} here)", ha="center", fontsize=9, color=GREEN
    )
    ax.text(
        xs[-1] / 2,
        2.3,
        "round t of client i (DFedSAM-MGS; Q = 1 is DFedSAM, ρ = 0 is DFedAvg)",
        ha="center",
        fontsize=10,
    )
    return fig
