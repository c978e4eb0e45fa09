"""The book's recurring data figures, drawn the same way in every chapter and in the CLI.

Every function draws on a matplotlib ``Axes`` you pass (so a chapter keeps
control of its layout) and returns what it drew. The conventions they enforce:

- every method gets its own colour *and* its own line style and marker
  (:func:`style`), so two methods whose curves coincide stay visible, and the
  figure survives greyscale printing and colour blindness (Okabe–Ito colours);
- a shaded band always says in the legend what it is ("± std over 3 seeds",
  "95% CI over 3 seeds"), never just "mean ± something";
- axes carry a label with units, which the caller passes (``ylabel=``);
- legends go outside the axes (:func:`legend_outside`), where they cannot
  cover data.

Typical use in a chapter::

    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    plots.curves(ax, rounds, {"DFedAvg": acc_avg, "DFedSAM": acc_sam},   # arrays (seeds, rounds)
                 ylabel="test accuracy (%)", band="ci")
    plt.show()

The CLI's comparison figure (``python -m dfl_core run``) is
:func:`plot_comparison`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "COLORS",
    "LINESTYLES",
    "MARKERS",
    "style",
    "mean_band",
    "curves",
    "legend_outside",
    "paired_differences",
    "bars_with_intervals",
    "comparison_figure",
    "plot_comparison",
    # chapters' figures (grouped by the chapters that use them, at the end of this file)
    "label_mix",
    "per_seed_points",
    "gossip_decay",
    "grouped_bars",
    "paired_map",
    "regime_map",
    "sam_toys",
    "landscape_lines",
    "consensus_against_theory",
    "paired_maps",
    "phi_against_q",
    "measured_against_bounds",
    "claims_overview",
    "VERDICT_STYLE",
    "committed_table",
    "claim_counts",
    "verdict_bars",
    "claims_summary",
    "COST_AXES",
    "cumulative_costs",
    "showcase_costs",
    "showcase_against_cost",
]

# Okabe & Ito's colour-blind-safe palette, then distinct dash patterns and markers.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 1)), (0, (3, 1, 3, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (then the normal's 1.96).
_T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def style(i: int, points: int | None = None) -> dict[str, Any]:
    """Line properties of the ``i``-th method: colour, dash pattern and marker all differ.

    With ``points`` (the number of x values) markers are spread to about eight per line.
    """
    props = {
        "color": COLORS[i % len(COLORS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
        "markersize": 5,
        "linewidth": 1.6,
    }
    if points:
        # shift each method's markers a little, so coinciding lines show all their markers
        step = max(1, points // 8)
        props["markevery"] = (i % step, step)
    return props


def _t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def mean_band(runs: Any, band: str = "std") -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Mean over seeds and the band around it: ``(mean, low, high, legend text)``.

    ``runs`` has shape ``(seeds, points)``. ``band="std"`` is mean ± the sample
    standard deviation; ``band="ci"`` is the 95% t-interval of the mean,
    mean ± t(0.975, n−1)·s/√n; ``band="none"`` draws no band. One seed has no band.
    """
    runs = np.atleast_2d(np.asarray(runs, dtype=float))
    n = runs.shape[0]
    mean = runs.mean(0)
    if band not in ("std", "ci", "none"):
        raise ValueError(f"band must be 'std', 'ci' or 'none', not {band!r}")
    if n < 2 or band == "none":
        return mean, mean, mean, f"{n} seed{'s' if n > 1 else ''}, no band" if band != "none" else ""
    sd = runs.std(0, ddof=1)
    half = sd if band == "std" else _t975(n - 1) * sd / math.sqrt(n)
    text = f"± std over {n} seeds" if band == "std" else f"95% CI of the mean over {n} seeds"
    return mean, mean - half, mean + half, text


def curves(
    ax,
    rounds: Sequence[float],
    runs_by_method: Mapping[str, Any],
    *,
    ylabel: str,
    xlabel: str = "communication round",
    band: str = "std",
    log: bool = False,
    legend: bool | str = "right",
    alpha: float = 0.18,
) -> list:
    """One mean line per method with a shaded band, in distinct colours, dashes and markers.

    Args:
        ax: the axes to draw on.
        rounds: the x values, shape ``(points,)``.
        runs_by_method: ``{method: values}`` with values of shape ``(seeds, points)``
            (a single run may be 1-D).
        ylabel: the y label, with its unit ("test accuracy (%)").
        xlabel: the x label (default "communication round").
        band: ``"std"``, ``"ci"`` (95% t-interval of the mean) or ``"none"`` (:func:`mean_band`).
        log: a logarithmic y axis.
        legend: ``"right"`` or ``"below"`` (outside the axes, :func:`legend_outside`),
            ``"inside"`` (matplotlib's best place) or ``False``.

    Returns the mean lines. The legend ends with one grey patch that says what
    the bands are.
    """
    from matplotlib.patches import Patch

    rounds = np.asarray(rounds, dtype=float)
    lines, band_text = [], ""
    for i, (name, runs) in enumerate(runs_by_method.items()):
        mean, low, high, band_text = mean_band(runs, band)
        (line,) = ax.plot(rounds, mean, label=name, zorder=3 + 0.01 * i, **style(i, len(rounds)))
        if band_text and band != "none" and np.any(high > low):
            ax.fill_between(rounds, low, high, color=line.get_color(), alpha=alpha, linewidth=0, zorder=2)
        lines.append(line)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if legend:
        handles = list(lines)
        if band != "none" and band_text:
            handles.append(Patch(color="0.5", alpha=0.35, label=f"shaded: {band_text}"))
        if legend == "inside":
            ax.legend(handles=handles, fontsize=8)
        else:
            legend_outside(ax, handles=handles, where=legend)
    return lines


def _label_categories(ax, x, labels, ylabel: str, xlabel: str | None) -> None:
    """A categorical axis's finish: one tick per category, the axis labels, horizontal grid lines, the legend."""
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.grid(True, axis="y", alpha=0.3)
    legend_outside(ax)


def legend_outside(ax, where: str = "right", handles: list | None = None, **kwargs):
    """Put ``ax``'s legend outside the axes, so that it cannot cover data.

    ``where="right"`` stacks the entries to the right of the axes;
    ``where="below"`` lays them out in rows under the x label. Call
    ``fig.tight_layout()`` or use ``layout="constrained"`` afterwards (or
    ``savefig(..., bbox_inches="tight")``) so the figure makes room for it.
    """
    kwargs.setdefault("fontsize", 8)
    kwargs.setdefault("frameon", False)
    if handles is not None:
        kwargs["handles"] = handles
    if where == "right":
        return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)
    if where == "below":
        count = len(handles) if handles is not None else len(ax.get_legend_handles_labels()[0])
        kwargs.setdefault("ncol", min(4, max(1, count)))
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), borderaxespad=0.0, **kwargs)
    raise ValueError(f"where must be 'right' or 'below', not {where!r}")


def paired_differences(
    ax,
    comparisons: Iterable[Any],
    *,
    xlabel: str = "paired difference",
    zero: float = 0.0,
    verdicts: bool = True,
    margin: float | None = None,
    paper: Sequence[float | None] | None = None,
    corrected: Sequence[str] | None = None,
) -> list:
    """A forest plot: one row per comparison, its mean paired difference and 95% interval.

    Each comparison is any object with attributes ``label``, ``mean``, ``low``,
    ``high`` and ``verdict`` (e.g. ``dfl_book.stats.PairedComparison``; only the
    attributes are used). A vertical line marks ``zero`` (no difference); an
    interval that crosses it is drawn hollow. The verdict is written to the
    right of the axes, outside the data. Rows run top to bottom in the order given.
    ``margin`` δ shades the equivalence band (−δ, δ); ``paper`` gives the paper's own
    difference per row (None where it has none), drawn as a cross; ``corrected``
    gives the family's verdicts after its correction (``dfl_book.stats.holm``),
    written beside the uncorrected ones ("REPRODUCED → UNRESOLVED").

    Returns the error-bar containers.
    """
    comparisons = list(comparisons)
    for name, extra in (("paper", paper), ("corrected", corrected)):
        if extra is not None and len(extra) != len(comparisons):
            raise ValueError(f"{name} needs one entry per comparison ({len(comparisons)}); got {len(extra)}")
    ys = np.arange(len(comparisons))[::-1]
    drawn = []
    if margin is not None:
        ax.axvspan(
            zero - margin, zero + margin, color=COLORS[2], alpha=0.15, zorder=0, label=f"equivalence band ±{margin:g}"
        )
    for k, (y, c) in enumerate(zip(ys, comparisons)):
        crosses = c.low <= zero <= c.high
        drawn.append(
            ax.errorbar(
                [c.mean],
                [y],
                xerr=[[c.mean - c.low], [c.high - c.mean]],
                fmt="o",
                color="0.45" if crosses else COLORS[0],
                capsize=4,
                markersize=6,
                markerfacecolor="white" if crosses else COLORS[0],
                zorder=3,
                label=f"mean and {getattr(c, 'confidence', 0.95):.0%} CI" if k == 0 else None,
            )
        )
        if paper is not None and paper[k] is not None:
            ax.plot(
                [paper[k]],
                [y],
                "x",
                color=COLORS[1],
                markersize=8,
                zorder=4,
                label="the paper's difference" if not any(p is not None for p in paper[:k]) else None,
            )
        if verdicts:
            text = str(c.verdict) if corrected is None or corrected[k] == c.verdict else f"{c.verdict} → {corrected[k]}"
            ax.annotate(text, xy=(1.02, y), xycoords=("axes fraction", "data"), va="center", ha="left", fontsize=8)
    ax.axvline(zero, color="0.3", linewidth=1, linestyle="--", zorder=1)
    ax.set_yticks(ys, [str(c.label) for c in comparisons])
    ax.set_ylim(-0.7, len(comparisons) - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    return drawn


def bars_with_intervals(
    ax,
    labels: Sequence[str],
    means: Sequence[float],
    lows: Sequence[float] | None = None,
    highs: Sequence[float] | None = None,
    *,
    ylabel: str,
    interval: str = "95% CI",
    colors: Sequence[str] | None = None,
    values: bool = True,
    fmt: str = "{:.1f}",
):
    """Bars with error bars from ``lows`` to ``highs``, the interval named in the legend.

    ``interval`` says what the whiskers are ("95% CI over 3 seeds", "min–max
    over seeds"). With ``values`` each bar is labelled with its mean. Returns
    the bar container.
    """
    from matplotlib.lines import Line2D

    x = np.arange(len(labels))
    means = np.asarray(means, dtype=float)
    colors = list(colors) if colors is not None else [COLORS[i % len(COLORS)] for i in range(len(labels))]
    bars = ax.bar(x, means, color=colors, alpha=0.85, edgecolor="black", linewidth=0.6, zorder=2)
    for bar, hatch in zip(bars, ["", "//", "..", "xx", "\\\\", "++", "oo", "--"] * 4):
        bar.set_hatch(hatch)  # distinct in greyscale too
    if lows is not None and highs is not None:
        lows, highs = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
        ax.errorbar(x, means, yerr=[means - lows, highs - means], fmt="none", ecolor="black", capsize=4, zorder=3)
        legend_outside(
            ax,
            handles=[
                Line2D(
                    [], [], color="black", marker="|", markersize=10, linestyle="none", label=f"whiskers: {interval}"
                )
            ],
            where="below",
        )
    if values:
        tops = highs if highs is not None else means
        for xi, top, mean in zip(x, tops, means):
            ax.annotate(
                fmt.format(mean),
                (xi, top),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    return bars


def comparison_figure(results: Mapping[str, list]):
    """The CLI's figure: test accuracy and consensus distance over rounds, mean ± std over seeds.

    ``results`` maps an algorithm's name to its runs (``dfl_core.results.History``,
    one per seed). Each method has its own colour, dashes and marker, so
    DFedAvg stays visible under DFedSAM when their curves coincide. The
    consensus panel starts at round 1: at round 0 every client holds the same
    model, so the distance there is rounding noise (about 1e-12) that would
    stretch the log axis over ten decades. Drawn without pyplot, so it works
    with any backend. Returns the ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.0), layout="constrained")
    ax_acc, ax_cd = fig.subplots(1, 2)
    histories = next(iter(results.values()))
    rounds = np.asarray(histories[0].rounds)
    later = rounds >= 1
    acc = {name: 100 * np.array([h.series("test_acc") for h in hs], dtype=float) for name, hs in results.items()}
    cd = {
        name: np.array([h.series("consensus_distance") for h in hs], dtype=float)[:, later]
        for name, hs in results.items()
    }
    positive = all(np.all(v > 0) for v in cd.values())  # a server-based run has no disagreement to log
    curves(ax_acc, rounds, acc, ylabel="test accuracy of the average model (%)", legend=False)
    curves(
        ax_cd,
        rounds[later],
        cd,
        ylabel="consensus distance (rounds ≥ 1" + (", log scale)" if positive else ")"),
        log=positive,
        legend="right",
    )
    cfg = histories[0].config
    fig.suptitle(
        f"{cfg['dataset']}, m = {cfg['num_clients']}, {cfg['topology'] or 'server'}, "
        f"{cfg['partition']} α = {cfg['alpha']}, {cfg['model']}",
        fontsize=10,
    )
    return fig


def plot_comparison(results: Mapping[str, list], path: str | Path) -> Path:
    """Save :func:`comparison_figure` of ``results`` (``{algorithm: [History per seed]}``) to ``path``."""
    path = Path(path)
    comparison_figure(results).savefig(path, dpi=120)
    return path


# --- chapters 00–03 ---


def label_mix(histograms: Mapping[str, Any], *, ncols: int = 3, title: str | None = None):
    """Chapter 01: the label mix of every client, one stacked-bar panel per split.

    ``histograms`` maps a split's name to its label counts, shape ``(clients, classes)``.
    Each bar is one client; its segments are the shares of its samples in each
    class (so every bar reaches 1). The class legend sits right of the panels,
    where it covers nothing. Returns the figure.
    """
    import matplotlib.pyplot as plt

    names = list(histograms)
    rows = math.ceil(len(names) / ncols)
    width = 4.4 * ncols + 1.4
    fig, axes = plt.subplots(rows, ncols, figsize=(width, 2.8 * rows), sharey=True, squeeze=False)
    for ax, name in zip(axes.flat, names):
        h = np.asarray(histograms[name], dtype=float)
        share = h / h.sum(1, keepdims=True)
        colors = plt.cm.tab10(np.arange(h.shape[1]) % 10)
        bottom = np.zeros(len(h))
        for k in range(h.shape[1]):
            ax.bar(np.arange(len(h)), share[:, k], bottom=bottom, color=colors[k], width=0.85, label=f"class {k}")
            bottom += share[:, k]
        ax.set(title=name, xlabel="client", xticks=range(0, len(h), 5))
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of the client's samples")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="center right", fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1 - 1.3 / width, 1))
    return fig


def per_seed_points(
    ax, labels: Sequence[str], values: Any, *, seeds: Sequence[int], ylabel: str, xlabel: str | None = None
) -> None:
    """Chapter 01: one point per seed and a black bar at their mean, one column per setting.

    ``values`` has shape ``(settings, seeds)``. Points of different seeds are
    shifted a little sideways so that equal values stay visible; the legend,
    outside the axes, names the seeds and the mean.
    """
    values = np.asarray(values, dtype=float)
    x = np.arange(len(labels))
    for j, seed in enumerate(seeds):
        shift = (j - (len(seeds) - 1) / 2) * 0.08
        ax.plot(
            x + shift,
            values[:, j],
            linestyle="none",
            marker=MARKERS[j % len(MARKERS)],
            color=COLORS[j % len(COLORS)],
            alpha=0.8,
            label=f"seed {seed}",
        )
    ax.plot(
        x,
        values.mean(1),
        linestyle="none",
        marker="_",
        markersize=22,
        markeredgewidth=2,
        color="black",
        label=f"mean of {len(seeds)} seeds",
    )
    _label_categories(ax, x, labels, ylabel, xlabel)


def gossip_decay(ax, distances: Mapping[str, Any], lams: Mapping[str, float], *, floor: float = 1e-12) -> None:
    """Chapter 02: consensus distance of pure gossip (solid) against the bound d₀ λ^(2t) (dashed), log scale.

    ``distances`` maps a topology to its consensus distance after 0, 1, ... gossip
    steps; ``lams`` to its λ. Values below ``floor`` (exact consensus) are
    clipped to the bottom of the axis.
    """
    from matplotlib.lines import Line2D

    handles = []
    for i, (name, dist) in enumerate(distances.items()):
        dist = np.asarray(dist, dtype=float)
        t = np.arange(len(dist))
        color = COLORS[i % len(COLORS)]
        (line,) = ax.semilogy(t, np.maximum(dist, floor / 10), color=color, label=f"{name} (λ = {lams[name]:.3f})")
        ax.semilogy(
            t, np.maximum(dist[0] * lams[name] ** (2 * t), floor / 10), color=color, linestyle="--", linewidth=0.9
        )
        handles.append(line)
    handles.append(Line2D([], [], color="0.4", linestyle="--", linewidth=0.9, label="dashed: bound d₀ λ^(2t)"))
    ax.set(xlabel="gossip step t", ylabel="consensus distance (squared norm)", ylim=(floor, None))
    ax.grid(True, alpha=0.3)
    legend_outside(ax, handles=handles)


def grouped_bars(
    ax,
    groups: Sequence[str],
    values_by_series: Mapping[str, Sequence[float]],
    *,
    ylabel: str,
    xlabel: str | None = None,
    fmt: str = "{:.2f}",
) -> None:
    """Chapter 03: bars grouped by ``groups`` (x), one colour and hatch per series, each labelled with its value.

    ``values_by_series`` maps a series (the legend) to one value per group. The
    values are exact counts, so there are no whiskers.
    """
    series = list(values_by_series)
    width = 0.8 / len(series)
    x = np.arange(len(groups))
    for k, name in enumerate(series):
        bars = ax.bar(
            x + (k - (len(series) - 1) / 2) * width,
            values_by_series[name],
            width=width * 0.95,
            color=COLORS[k % len(COLORS)],
            alpha=0.85,
            edgecolor="black",
            linewidth=0.6,
            hatch=["", "//", "..", "xx"][k % 4],
            label=name,
            zorder=2,
        )
        for bar, value in zip(bars, values_by_series[name]):
            ax.annotate(
                fmt.format(value),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    _label_categories(ax, x, groups, ylabel, xlabel)


# --- chapters 11, 12, 90 ---
#: Chapter 11: the colour and hatch of each paired verdict (green reproduced, vermillion reversed, grey open).
VERDICT_STYLE = {
    "REPRODUCED": ("#009E73", ""),
    "REVERSED": ("#D55E00", "//"),
    "EQUIVALENT": ("#56B4E9", "\\\\"),
    "UNRESOLVED": ("0.85", ".."),
}
TABLES_URL = "https://raw.githubusercontent.com/dfl-book/dfl-book/main/book/_tables/"


def committed_table(name: str, tag: str = "", folder: str | Path | None = None, profile: str = "fast"):
    """Chapter 11: the committed table ``book/_tables/NAME-PROFILE[-TAG].csv`` as a ``TableResult``.

    Looks in ``folder``, else in ``_tables`` (a notebook runs in ``book/``) or
    ``book/_tables``; where neither exists (Colab has the notebook, not the
    folder) it downloads the file from the repository first. The per-seed
    values are the CSV's, rounded to 0.01 (:func:`dfl_book.tables.read_result`).
    """
    from .tables import read_result

    file = f"{name}-{profile}{'-' + tag if tag else ''}.csv"
    candidates = [Path(folder)] if folder is not None else [Path("_tables"), Path("book/_tables")]
    where = next((p for p in candidates if (p / file).exists()), candidates[0])
    if not (where / file).exists():
        import urllib.request

        where.mkdir(parents=True, exist_ok=True)
        urllib.request.urlretrieve(TABLES_URL + file, where / file)
    return read_result(where / file)


def claim_counts(comparisons: Iterable[Any]) -> dict[str, dict[str, int]]:
    """Chapter 11: verdict counts per claim over the columns of a table.

    ``comparisons`` are ``PairedComparison`` objects labelled ``"setting: claim"``
    (as :func:`dfl_book.tables.check_claims` labels them); the result maps each
    claim, in order of first appearance, to ``{"REPRODUCED": k, "REVERSED": k, "UNRESOLVED": k}``.
    """
    from .stats import VERDICTS

    counts: dict[str, dict[str, int]] = {}
    for c in comparisons:
        claim = str(c.label).split(": ", 1)[-1]
        counts.setdefault(claim, dict.fromkeys(VERDICTS, 0))[c.verdict] += 1
    return counts


def verdict_bars(ax, counts: Mapping[str, Mapping[str, int]], *, xlabel: str, share: bool = False):
    """Chapter 11: one horizontal stacked bar per row of ``counts`` (``{row: {verdict: k}}``).

    Green for REPRODUCED, vermillion and hatched for REVERSED, grey and dotted
    for UNRESOLVED; with ``share`` each bar is scaled to 1 (shares, not counts).
    The legend goes below the axes (:func:`legend_outside`), so it covers no bar.
    Rows run top to bottom in the order given. Returns the bar containers.
    """
    labels = list(counts)
    ys = np.arange(len(labels))[::-1]
    left = np.zeros(len(labels))
    drawn = []
    for verdict, (color, hatch) in VERDICT_STYLE.items():
        widths = np.array([counts[r].get(verdict, 0) for r in labels], dtype=float)
        if share:
            widths = widths / np.maximum(1, [sum(counts[r].values()) for r in labels])
        drawn.append(
            ax.barh(ys, widths, left=left, color=color, hatch=hatch, edgecolor="0.3", linewidth=0.5, label=verdict)
        )
        left += widths
    ax.set_yticks(ys, labels)
    ax.set_xlabel(xlabel)
    if share:
        ax.set_xlim(0, 1)
    legend_outside(ax, where="below")
    return drawn


def claims_summary(by_table: Mapping[str, Iterable[Any]]) -> str:
    """Chapter 11: Markdown bullets that sort the named claims by their verdicts over a table's columns.

    ``by_table`` maps a table's title to its claims' comparisons (labelled
    ``"setting: claim"``). Each claim goes to one bullet: reproduced in every
    column; reproduced in some column and reversed in none; reversed in at
    least one column; or resolved in no column (with the largest detectable
    effect among its columns, in points). Every word comes from the verdicts.
    """
    groups: dict[str, list[str]] = {"all": [], "some": [], "reversed": [], "open": []}
    for table, comparisons in by_table.items():
        comparisons = list(comparisons)
        for claim, k in claim_counts(comparisons).items():
            n = sum(k.values())
            mine = [c for c in comparisons if str(c.label).split(": ", 1)[-1] == claim]
            if k["REVERSED"]:
                groups["reversed"].append(f"{claim} ({table}, {k['REVERSED']} of {n})")
            elif k["REPRODUCED"] == n:
                groups["all"].append(f"{claim} ({table}, {n} of {n})")
            elif k["REPRODUCED"]:
                groups["some"].append(f"{claim} ({table}, {k['REPRODUCED']} of {n})")
            else:
                groups["open"].append(f"{claim} ({table}, detectable up to {max(c.detectable for c in mine):.1f})")
    titles = {
        "all": "Reproduced in every column",
        "some": "Reproduced in some columns, reversed in none",
        "reversed": "Reversed in at least one column",
        "open": "Resolved in no column",
    }
    return "\n".join(
        f"- **{titles[g]}**: " + ("; ".join(items) if items else "none") + "." for g, items in groups.items()
    )


# --- chapters 09, 10, 91 ---


def phi_against_q(ax, rows, qs: Sequence[int], m: int, q_mark: int, near_one: float = 1.1) -> list:
    """Chapter 10: Φ(λ, m, Q) against Q on log–log axes, one line per topology of ``rows``.

    ``rows`` are :func:`theory.phi_table` rows (``.name``, ``.lam``), drawn from the largest λ down.
    A dotted line marks Φ = ``near_one`` ("close to 1"), a dashed one Q = ``q_mark``. Returns the lines.
    """
    from theory.phi import phi

    lines = []
    for i, row in enumerate(sorted(rows, key=lambda r: -r.lam)):
        (line,) = ax.loglog(
            qs,
            phi(row.lam, m, np.asarray(qs)),
            label=f"{row.name} (λ = {row.lam:.4f})",
            **(style(i) | {"marker": None}),
        )
        lines.append(line)
    ax.axhline(near_one, color="k", ls=":", lw=0.8, label=f"Φ = {near_one}")
    ax.axvline(q_mark, color="k", ls="--", lw=0.8, label=f"Q = {q_mark}")
    ax.set(xlabel="gossip steps per round Q", ylabel="Φ(λ, m, Q) (dimensionless)", title=f"Φ against Q, m = {m}")
    legend_outside(ax)  # nine topologies: the legend names each line
    return lines


# --- chapters 04, 05, 06 ---


def showcase_curves(
    ax,
    result,
    arms: Sequence[str],
    metric: str = "test_acc",
    *,
    scale: float = 100.0,
    ylabel: str = "test accuracy of the average model (%)",
    band: str = "std",
    log: bool = False,
    legend: bool | str = "right",
    labels: Mapping[str, str] | None = None,
) -> list:
    """The curves of a showcase result (``dfl_book.showcase.load``): ``metric`` × ``scale`` at each evaluation,
    one mean line per arm with a band over the result's seeds (:func:`curves`). ``labels`` renames arms in the
    legend. Returns the mean lines."""
    rounds, labels = result.curve(arms[0], metric)[0], labels or {}
    runs = {labels.get(arm, arm): scale * np.asarray(result.curve(arm, metric)[1], dtype=float) for arm in arms}
    return curves(ax, rounds, runs, ylabel=ylabel, band=band, log=log, legend=legend)


#: The x axes of :func:`showcase_against_cost`: the key of :func:`cumulative_costs` and its axis label.
COST_AXES = {
    "round": "communication round",
    "messages": "messages sent, all clients together (models)",
    "gradient_steps": "local gradient steps per client",
}


def cumulative_costs(
    rounds: Sequence[int], *, topology: str, num_clients: int, local_steps: int, gossip_steps: int = 1
) -> dict[str, np.ndarray]:
    """What a decentralized run has spent after each of ``rounds`` (rounds completed), as arrays like ``rounds``.

    - ``"round"``: the rounds themselves;
    - ``"messages"``: models sent by all the clients together, the topology's ``num_messages`` (one per
      nonzero off-diagonal :math:`w_{ij}`) per gossip step, ``gossip_steps`` steps per round; the engine counts
      the same in a history's ``transmissions``;
    - ``"gradient_steps"``: local gradient steps of one client, ``local_steps`` (K) per round (D-PSGD: 1).

    Static topologies only: a time-varying graph sends a different number of messages every step (read the
    engine's ``transmissions`` instead). Raises ``ValueError`` on negative rounds or non-positive step counts.
    """
    from dfl_core.topology import make_topology

    rounds = np.asarray(rounds)
    if rounds.size and (not np.issubdtype(rounds.dtype, np.integer) or rounds.min() < 0):
        raise ValueError(f"rounds must be whole numbers >= 0 (rounds completed), got {rounds.tolist()!r}")
    for name, value in (("num_clients", num_clients), ("local_steps", local_steps), ("gossip_steps", gossip_steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    graph = make_topology(topology, int(num_clients))
    if graph.time_varying:
        raise ValueError(
            f"topology {topology!r} draws a new graph every gossip step, so its messages per round "
            "vary: read the engine's recorded 'transmissions' instead"
        )
    per_round = graph.matrix(0).num_messages * int(gossip_steps)
    return {
        "round": rounds.astype(int),
        "messages": per_round * rounds.astype(int),
        "gradient_steps": int(local_steps) * rounds.astype(int),
    }


def showcase_costs(result, arm: str) -> dict[str, np.ndarray]:
    """:func:`cumulative_costs` at a showcase arm's evaluation rounds, from its config (the same in every seed).

    Checked against the engine: where the history records ``transmissions``, they must equal the
    ``"messages"`` computed here in every seed, or a ``ValueError`` says where they differ.
    """
    rounds = result.curve(arm)[0]
    cfg = result.runs[arm, result.seeds[0]]["config"]
    costs = cumulative_costs(
        rounds,
        topology=cfg.get("topology"),
        num_clients=cfg["num_clients"],
        local_steps=cfg["local_steps"],
        gossip_steps=cfg["gossip_steps"],
    )
    expected = dict(zip(costs["round"].tolist(), costs["messages"].tolist()))
    for seed in result.seeds:
        for record in result.history(arm, seed):
            if (
                "transmissions" in record
                and record["round"] in expected
                and record["transmissions"] != expected[record["round"]]
            ):
                raise ValueError(
                    f"{arm!r}, seed {seed}, round {record['round']}: the engine recorded "
                    f"{record['transmissions']} messages, the topology's count gives "
                    f"{expected[record['round']]}"
                )
    return costs


def showcase_against_cost(
    ax,
    result,
    arms: Sequence[str],
    cost: str = "messages",
    metric: str = "test_acc",
    *,
    scale: float = 100.0,
    ylabel: str = "test accuracy of the average model (%)",
    band: str = "std",
    log_x: bool = False,
    legend: bool | str = "below",
    labels: Mapping[str, str] | None = None,
) -> list:
    """:func:`showcase_curves` with another x axis: ``cost`` is ``"messages"`` (all clients' messages so far),
    ``"gradient_steps"`` (one client's local steps so far) or ``"round"`` (:data:`COST_AXES`, computed by
    :func:`showcase_costs`). Each arm gets its own x values (:func:`curves_own_x`). Returns the mean lines."""
    if cost not in COST_AXES:
        raise ValueError(f"cost must be one of {sorted(COST_AXES)}, not {cost!r}")
    labels = labels or {}
    xs = {labels.get(arm, arm): showcase_costs(result, arm)[cost] for arm in arms}
    runs = {labels.get(arm, arm): scale * np.asarray(result.curve(arm, metric)[1], dtype=float) for arm in arms}
    if log_x:  # round 0 (nothing spent yet) has no place on a log axis
        runs = {name: values[:, xs[name] > 0] for name, values in runs.items()}
        xs = {name: x[x > 0] for name, x in xs.items()}
    return curves_own_x(
        ax,
        xs,
        runs,
        xlabel=COST_AXES[cost] + (" (log scale)" if log_x else ""),
        ylabel=ylabel,
        log_x=log_x,
        band=band,
        legend=legend,
    )


def consensus_curves(
    ax,
    rounds: Sequence[float],
    runs_by_name: Mapping[str, Any],
    *,
    exact: float = 1e-9,
    ylabel: str = "consensus distance (1/m) Σ‖x_i − x̄‖²",
) -> list:
    """Consensus distance per round on a log axis: mean over seeds with a min–max band.

    A method whose runs all stay below ``exact`` (the complete graph: the clients agree after every round)
    cannot be drawn on a log axis; it gets a legend entry that says so instead of a line.
    """
    from matplotlib.lines import Line2D

    lines, extra = [], []
    for i, (name, runs) in enumerate(runs_by_name.items()):
        runs = np.atleast_2d(np.asarray(runs, dtype=float))
        if runs.max() < exact:
            extra.append(Line2D([], [], linestyle="none", label=f"{name}: at most {runs.max():.0e} (0 up to rounding)"))
            continue
        (line,) = ax.semilogy(rounds, runs.mean(0), label=name, **style(i, len(rounds)))
        ax.fill_between(rounds, runs.min(0), runs.max(0), color=line.get_color(), alpha=0.18, linewidth=0)
        lines.append(line)
    ax.set(xlabel="round", ylabel=ylabel)
    band = Line2D([], [], color="0.6", linewidth=6, alpha=0.4, label=f"band: min–max over {runs.shape[0]} seeds")
    legend_outside(ax, handles=lines + extra + [band], where="below", ncol=2)
    return lines


def per_seed_lines(
    ax, xs: Sequence[float], values_by_name: Mapping[str, Any], *, xlabel: str, ylabel: str, log_x: bool = False
) -> list:
    """Mean over seeds against ``xs`` (a line per name) with every seed as a dot.

    ``values_by_name`` maps a name to an array of shape ``(len(xs), seeds)``. Returns the mean lines.
    """
    lines = []
    for i, (name, values) in enumerate(values_by_name.items()):
        values = np.asarray(values, dtype=float)
        (line,) = ax.plot(xs, values.mean(1), label=f"{name} (mean)", **style(i))
        ax.plot(
            np.repeat(np.asarray(xs, dtype=float), values.shape[1]),
            values.ravel(),
            ".",
            color=line.get_color(),
            alpha=0.5,
            label=f"{name}: each of {values.shape[1]} seeds",
        )
        lines.append(line)
    if log_x:
        ax.set_xscale("log")
    ax.set_xticks(list(xs), [str(x) for x in xs])
    ax.minorticks_off()
    ax.set(xlabel=xlabel, ylabel=ylabel)
    legend_outside(ax)
    return lines


def measured_against_bounds(axes, reports: Mapping[str, dict]) -> None:
    """Chapter 10: for each ``{label: measure_against_bounds report}``, the gradient norm ‖∇f(x̄ᵗ)‖² (left)
    and the consensus distance (right) against the round, with the report's bound as a dashed line of the
    same colour. The consensus panel starts at round 2 (at round 1 all clients hold the same model)."""
    from theory.bounds import consensus_lemma

    left, right = axes
    for i, (label, r) in enumerate(reports.items()):
        color = COLORS[i % len(COLORS)]
        rounds = np.arange(1, len(r["grad_norm_sq"]) + 1)
        left.semilogy(rounds, r["grad_norm_sq"], color=color, label=label)
        left.axhline(
            r["predictions"]["min_grad_norm_sq_bound"], color=color, ls="--", lw=0.8, label=f"{label}: Theorem 4.5"
        )
        right.semilogy(rounds[1:], r["consensus"][1:], color=color, label=label)
        right.axhline(
            r["predictions"]["consensus_distance_bound"],
            color=color,
            ls="--",
            lw=0.8,
            label=f"{label}: Lemma {consensus_lemma(r['Q'])}",  # D.5 for one gossip step a round, D.6 for Q > 1
        )
    left.set(xlabel="round t", ylabel="‖∇f(x̄ᵗ)‖² (squared loss units)", title="gradient norm of the average model")
    right.set(xlabel="round t", ylabel="consensus distance (squared parameter units)", title="disagreement")
    legend_outside(left, where="below", ncol=2)  # each panel its own legend: Theorem 4.5 left, Lemma D.5/D.6 right
    legend_outside(right)


def paired_maps(
    ax,
    xs: Sequence[float],
    verdicts_by_series: Mapping[str, Sequence[Any]],
    *,
    xlabel: str,
    ylabel: str,
    log_x: bool = True,
    spread: float = 0.06,
) -> list:
    """Chapter 09: :func:`paired_map` for several series on one axes, one per variant.

    ``verdicts_by_series`` maps a label to comparisons, one per x in ``xs`` (a series may be shorter: it is
    drawn at the first x values). The series are shifted a little sideways (by ``spread`` in log10 units on
    a log axis) so that whiskers do not overlap. Returns the series' lines.
    """
    from matplotlib.lines import Line2D

    n, lines = len(verdicts_by_series), []
    for i, (label, comps) in enumerate(verdicts_by_series.items()):
        shift = (i - (n - 1) / 2) * spread
        lines.append(
            paired_map(
                ax,
                xs[: len(comps)],
                comps,
                xlabel=xlabel,
                ylabel=ylabel,
                label=label,
                index=i,
                offset=10**shift - 1 if log_x else shift,
                log_x=log_x,
            )
        )
    ax.set_xticks(list(xs), [f"{x:g}" for x in xs])  # a shorter series set only its own ticks
    whiskers = Line2D(
        [],
        [],
        color="black",
        marker="|",
        markersize=10,
        linestyle="none",
        label="whiskers: 95% CI over seeds; hollow: the interval contains 0",
    )
    legend_outside(ax, handles=lines + [whiskers])
    return lines


def claims_overview(ax, claims: Iterable[Any]) -> dict:
    """Appendix 91: how many claims of each seed paper hold, fail, or cannot be checked, as stacked bars.

    ``claims`` are :class:`theory.claims.Claim` records (``.location``, ``.verdict``); a claim belongs to
    the paper whose source file its location names first (``seeds/003…`` → "DFedSAM (Shi et al. 2023)").
    Returns ``{paper: {verdict: count}}``.
    """
    import re

    names = {
        "003": "DFedSAM (Shi et al. 2023)",
        "000": "DFedSAM's poster",
        "004": "DFedAvgM (Sun et al. 2022)",
        "002": "FedSAM (Qu et al. 2022)",
        "001": "FedGF (Lee & Yoon 2024)",
    }
    verdicts = ("HOLDS", "FAILS", "NOT CHECKABLE")
    counts: dict[str, dict[str, int]] = {}
    for c in claims:
        found = re.search(r"seeds/(\d{3})", c.location)
        paper = names.get(found.group(1), "other") if found else "other"
        counts.setdefault(paper, dict.fromkeys(verdicts, 0))[c.verdict] += 1
    order = [*names.values(), "other"]
    papers = sorted(counts, key=order.index)
    left = np.zeros(len(papers))
    for i, v in enumerate(verdicts):
        widths = np.array([counts[p][v] for p in papers], dtype=float)
        ax.barh(
            papers,
            widths,
            left=left,
            color=COLORS[i],
            hatch=["", "//", ".."][i],
            edgecolor="black",
            linewidth=0.5,
            label=v,
        )
        left += widths
    ax.invert_yaxis()
    ax.set(xlabel="number of claims", ylabel="paper")
    ax.grid(True, axis="x", alpha=0.3)
    legend_outside(ax)
    return counts


# --- chapters 07, 08 ---


def paired_map(
    ax,
    xs: Sequence[float],
    comparisons: Sequence[Any],
    *,
    xlabel: str,
    ylabel: str,
    label: str | None = None,
    index: int = 0,
    offset: float = 0.0,
    log_x: bool = False,
    xticklabels: Sequence[str] | None = None,
):
    """A paired difference against a setting (ρ, Q, m): the mean and its 95% interval at each ``xs``.

    ``comparisons`` holds one object per x with ``mean``, ``low``, ``high`` and
    ``verdict`` (a :class:`dfl_book.stats.PairedComparison`). A dashed line
    marks zero (no difference); an interval that crosses zero is drawn hollow.
    ``index`` picks the colour and marker, so several maps can share one axes;
    ``offset`` shifts the points sideways (a fraction of each x on a log axis)
    so that their whiskers do not hide each other. Returns the line.
    """
    comparisons = list(comparisons)
    x = np.asarray(xs, dtype=float)
    x = x * (1 + offset) if log_x else x + offset
    mean = np.array([c.mean for c in comparisons])
    low, high = np.array([c.low for c in comparisons]), np.array([c.high for c in comparisons])
    st = style(index)
    color = st["color"]
    (line,) = ax.plot(x, mean, color=color, linestyle=st.get("linestyle", "-"), linewidth=1, label=label)
    for xi, m, lo, hi in zip(x, mean, low, high):
        hollow = lo <= 0 <= hi
        ax.errorbar(
            [xi],
            [m],
            yerr=[[m - lo], [hi - m]],
            fmt=st.get("marker", "o"),
            color=color,
            capsize=4,
            markerfacecolor="white" if hollow else color,
            zorder=3,
        )
    ax.axhline(0, color="0.3", linewidth=1, linestyle="--", zorder=1)
    if log_x:
        ax.set_xscale("log")
    ax.set_xticks(np.asarray(xs, dtype=float), list(xticklabels) if xticklabels is not None else [f"{v:g}" for v in xs])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return line


def regime_map(ax, cells: Sequence[Any], *, treated: str = "SAM", limit: float | None = None, detail: bool = True):
    """Chapters 07 and 08: a regime map, local epochs E (rows) × ρ (columns), one square per cell.

    ``cells`` are :class:`dfl_book.showcase.regime.Cell` records (``local_epochs``, ``rho``, ``comparison``,
    the baseline's fit). A square's colour is the paired difference treated − baseline in test accuracy
    (blue: the treated method pays, orange: it costs; ``limit`` fixes the colour scale's ±end). A resolved
    difference (REPRODUCED or REVERSED) is a filled square; an UNRESOLVED or EQUIVALENT one is hollow,
    its colour on the edge only. A thick black line marks the measured boundary between cells where the
    treated method pays (REPRODUCED) and the others, a dashed one that between the cells where it costs
    (REVERSED) and the others. With ``detail`` each square prints its mean and 95%
    interval, and each row the baseline's train accuracy, train − test gap and whether its curve had
    flattened. Returns the colour-bar mappable.
    """
    import matplotlib as mpl
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    cells = list(cells)
    epochs = sorted({c.local_epochs for c in cells})
    rhos = sorted({c.rho for c in cells})
    by = {(c.local_epochs, c.rho): c for c in cells}
    limit = limit or max(abs(c.comparison.mean) for c in cells) or 1.0
    norm = mpl.colors.TwoSlopeNorm(vmin=-limit, vcenter=0.0, vmax=limit)
    cmap = mpl.colormaps["PuOr"]  # orange below 0 (costs), purple-blue above (pays)
    pays, costs = {}, {}
    for (e, rho), c in by.items():
        i, j = epochs.index(e), rhos.index(rho)
        v = c.comparison
        shade = float(norm(max(-limit, min(limit, v.mean))))
        colour = cmap(shade)
        resolved = v.verdict in ("REPRODUCED", "REVERSED")
        # a hollow square's edge is at least a mid-strength shade of its side, so that it stays visible
        edge = cmap(0.5 + math.copysign(max(0.25, abs(shade - 0.5)), shade - 0.5))
        ax.add_patch(
            Rectangle(
                (j - 0.45, i - 0.45),
                0.9,
                0.9,
                facecolor=colour if resolved else "white",
                edgecolor="0.4" if resolved else edge,
                linewidth=0.5 if resolved else 3,
                hatch=None if resolved else ("\\\\" if v.verdict == "EQUIVALENT" else None),
            )
        )
        pays[(i, j)] = v.verdict == "REPRODUCED"
        costs[(i, j)] = v.verdict == "REVERSED"
        if detail:
            dark = resolved and abs(norm(v.mean) - 0.5) > 0.3
            ax.text(
                j,
                i + 0.08,
                f"{v.mean:+.2f}".replace("-", "−"),
                ha="center",
                va="center",
                fontsize=11,
                weight="bold",
                color="white" if dark else "black",
            )
            ax.text(
                j,
                i - 0.2,
                f"[{v.low:+.2f}, {v.high:+.2f}]".replace("-", "−"),
                ha="center",
                va="center",
                fontsize=8,
                color="white" if dark else "black",
            )
    # the boundaries: edges between paying cells and the others (solid), costing cells and the others (dashed)
    for region, dashes in ((pays, "-"), (costs, "--")):
        for (i, j), inside in region.items():
            for di, dj in ((1, 0), (0, 1)):
                other = region.get((i + di, j + dj))
                if other is not None and other != inside:
                    xs, ys = (
                        ([j - 0.5, j + 0.5], [i + 0.5, i + 0.5]) if di else ([j + 0.5, j + 0.5], [i - 0.5, i + 0.5])
                    )
                    ax.plot(xs, ys, color="black", linewidth=3.5 if dashes == "-" else 2.5, linestyle=dashes, zorder=4)
    ax.set_xlim(-0.5, len(rhos) - 0.5)
    ax.set_ylim(-0.5, len(epochs) - 0.5)
    ax.set_xticks(range(len(rhos)), [f"{r:g}" for r in rhos])
    rows = []
    for e in epochs:
        c = by[(e, rhos[0])]
        label = f"E = {e:g} (K = {c.local_steps})"
        if detail:
            label += f"\nbaseline train {c.baseline_train_acc:.1f}%,\ngap {c.baseline_gap:.1f}, ".replace("-", "−") + (
                "flat" if c.flat else "still rising"
            )
        rows.append(label)
    ax.set_yticks(range(len(epochs)), rows)
    ax.set_xlabel(f"ρ, {treated}'s perturbation radius")
    ax.set_ylabel("local work a round")
    handles = [
        Patch(facecolor=cmap(0.85), edgecolor="0.4", label="filled: the 95% CI excludes 0"),
        Patch(facecolor="white", edgecolor=cmap(0.75), linewidth=2, label="hollow: unresolved"),
        Patch(
            facecolor="white",
            edgecolor=cmap(0.75),
            linewidth=2,
            hatch="\\\\",
            label="hatched: equivalent within the margin",
        ),
        Line2D([], [], color="black", linewidth=3, label=f"boundary: {treated} pays | does not"),
        Line2D([], [], color="black", linewidth=2.5, linestyle="--", label=f"boundary: {treated} costs | does not"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
    return mpl.cm.ScalarMappable(norm=norm, cmap=cmap)


def sam_toys(grid, loss, loss_sam, rho: float, starts, paths: Mapping[str, Any], valley_loss, top_eig):
    """Chapter 07's two toy problems in three panels.

    Left: a 1-D loss ``loss`` on ``grid`` and its SAM objective ``loss_sam`` (radius
    ``rho``), each minimiser marked. Middle: the paths ``paths[name]`` (shape
    ``(steps + 1, starts, 2)``) of GD and SAM on the valley loss ``valley_loss``
    (whose minima are the hyperbola uv = 1, dotted), from ``starts`` (crosses).
    Right: ``top_eig`` (λ_max of the Hessian) along every path, against the step.
    Returns the figure.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for values, name, i in [(loss, "F", 0), (loss_sam, f"$F^{{SAM}}$, ρ = {rho}", 1)]:
        ax.plot(grid, values, label=name, **style(i, len(grid)))
        ax.plot(grid[np.argmin(values)], np.min(values), "o", color=style(i)["color"], markersize=8)
    ax.set(xlabel="w (parameter, no unit)", ylabel="loss", title="The SAM objective picks the wide well")
    ax.legend(fontsize=8)
    ax = axes[1]
    u, v = np.meshgrid(np.linspace(-2.7, 2.7, 301), np.linspace(-2.7, 2.7, 301))
    ax.contour(u, v, valley_loss(np.stack([u, v], -1)), levels=[0.02, 0.1, 0.3, 1, 3], colors="0.8")
    branch = np.linspace(0.37, 2.7, 200)
    for sign in (1, -1):
        ax.plot(sign * branch, sign / branch, "k:", linewidth=1)
    for i, (name, path) in enumerate(paths.items()):
        for j in range(path.shape[1]):
            ax.plot(
                *path[:, j].T,
                color=COLORS[i],
                linewidth=4 - 2.8 * i,
                alpha=0.6 + 0.4 * i,
                label=name if j == 0 else None,
            )
            ax.plot(*path[-1, j], "o", color=COLORS[i], markersize=4)
    ax.plot(*np.asarray(starts).T, "kx", label="starts")
    ax.set(
        xlim=(-2.7, 2.7),
        ylim=(-2.7, 2.7),
        xlabel="u",
        ylabel="v",
        aspect="equal",
        title="Valley of minima uv = 1 (dotted)",
    )
    ax.legend(fontsize=8)
    ax = axes[2]
    for i, (name, path) in enumerate(paths.items()):
        for j in range(path.shape[1]):
            ax.plot(
                np.arange(1, len(path) + 1),
                top_eig(path[:, j]),
                color=COLORS[i],
                linewidth=1,
                label=name if j == 0 else None,
            )
    ax.axhline(2, color="k", linestyle=":", linewidth=1, label="flattest minimum (2)")
    ax.set(xscale="log", xlabel="step + 1 (log scale)", ylabel="λ_max of the Hessian", title="Sharpness along the way")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def landscape_lines(alphas, lines: Mapping[str, Any], seeds: Sequence[int]):
    """Chapter 07: the training loss along one filter-normalised direction, per seed and method.

    ``lines[name]`` has one loss curve per seed (shape ``(seeds, len(alphas))``).
    One panel per seed; each legend gives the curve's *rise*, the mean of its
    two ends minus its middle. Returns the figure.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(seeds), figsize=(4.2 * len(seeds), 3.4), sharey=True, squeeze=False)
    for j, (ax, s) in enumerate(zip(axes[0], seeds)):
        for i, (name, curves_) in enumerate(lines.items()):
            c = np.asarray(curves_[j])
            rise = (c[0] + c[-1]) / 2 - c[len(c) // 2]
            ax.plot(alphas, c, label=f"{name} (rise {rise:.3f})", **style(i, len(alphas)))
        ax.set(xlabel="step τ along d (filter-normalised)", title=f"seed {s}")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("training loss F(w + τd)")
    fig.tight_layout()
    return fig


def consensus_against_theory(ax, qs: Sequence[int], measured, predictions: Mapping[str, Sequence[float]]):
    """Chapter 08: the consensus distance at Q gossip steps over its value at Q = 1, against predictions.

    ``measured`` has shape ``(len(qs), seeds)``: one ratio per seed (drawn as
    dots) and their mean (a line). ``predictions`` maps a name to one ratio per
    Q (dashed). Log y axis. Returns the axes.
    """
    measured = np.asarray(measured, dtype=float)
    qs = np.asarray(qs)
    ax.plot(qs, measured.mean(1), color="k", marker="o", label=f"measured, mean of {measured.shape[1]} seeds")
    ax.plot(np.repeat(qs, measured.shape[1]), measured.ravel(), "k.", alpha=0.35, label="measured, one seed")
    for i, (name, values) in enumerate(predictions.items()):
        ax.plot(qs, values, linestyle="--", marker="s^v"[i % 3], color=COLORS[i + 1], label=name)
    ax.set(xlabel="gossip steps per round Q", ylabel="consensus distance / its value at Q = 1", yscale="log", xticks=qs)
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
    return ax


def scatter_by_arm(
    ax,
    points_by_arm: Mapping[str, tuple],
    *,
    xlabel: str,
    ylabel: str,
    legend: bool = True,
    chance: float | None = None,
) -> list:
    """One point per run, one colour and marker per arm: ``{arm: (xs, ys)}`` with one x and y per seed.
    ``chance``: a y value to draw as a labelled dotted line (0.5 for an attack's AUC), kept inside the axis so
    that a reader sees how far the points are from it. Returns the scatter collections."""
    drawn = []
    if chance is not None:
        ax.axhline(chance, color="k", lw=0.9, ls=":", zorder=2, label=f"chance ({chance:g})")
    for i, (arm, (xs, ys)) in enumerate(points_by_arm.items()):
        st = style(i)
        drawn.append(
            ax.scatter(
                xs,
                ys,
                color=st["color"],
                marker=st.get("marker", "o"),
                s=40,
                zorder=3,
                label=f"{arm} ({len(xs)} seeds)",
            )
        )
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    if legend:
        legend_outside(ax)
    return drawn


def curves_own_x(
    ax,
    xs_by_name: Mapping[str, Any],
    runs_by_name: Mapping[str, Any],
    *,
    xlabel: str,
    ylabel: str,
    log_x: bool = False,
    band: str = "std",
    legend: bool | str = "right",
) -> list:
    """Like :func:`curves`, but each method has its own x values (e.g. the bits it has sent after each round).

    ``xs_by_name[name]`` has shape ``(points,)``, ``runs_by_name[name]`` shape ``(seeds, points)``. Returns the
    mean lines; the legend ends with a patch that says what the bands are.
    """
    from matplotlib.patches import Patch

    lines, band_text = [], ""
    for i, (name, runs) in enumerate(runs_by_name.items()):
        x = np.asarray(xs_by_name[name], dtype=float)
        mean, low, high, band_text = mean_band(runs, band)
        (line,) = ax.plot(x, mean, label=name, **style(i, len(x)))
        if band != "none" and np.any(high > low):
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
        lines.append(line)
    if log_x:
        ax.set_xscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    if legend:
        handles = lines + ([Patch(color="0.6", alpha=0.4, label=f"band: {band_text}")] if band != "none" else [])
        legend_outside(ax, handles=handles, where=legend if legend in ("right", "below") else "right")
    return lines
