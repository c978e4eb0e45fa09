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

__all__ = ["COLORS", "LINESTYLES", "MARKERS", "style", "mean_band", "curves", "legend_outside",
           "paired_differences", "bars_with_intervals", "comparison_figure", "plot_comparison"]

# Okabe & Ito's colour-blind-safe palette, then distinct dash patterns and markers.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 1)), (0, (3, 1, 3, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (then the normal's 1.96).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]


def style(i: int, points: int | None = None) -> dict[str, Any]:
    """Line properties of the ``i``-th method: colour, dash pattern and marker all differ.

    With ``points`` (the number of x values) markers are spread to about eight per line.
    """
    props = {"color": COLORS[i % len(COLORS)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
             "marker": MARKERS[i % len(MARKERS)], "markersize": 5, "linewidth": 1.6}
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


def curves(ax, rounds: Sequence[float], runs_by_method: Mapping[str, Any], *, ylabel: str,
           xlabel: str = "communication round", band: str = "std", log: bool = False,
           legend: bool | str = "right", alpha: float = 0.18) -> list:
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


def paired_differences(ax, comparisons: Iterable[Any], *, xlabel: str = "paired difference",
                       zero: float = 0.0, verdicts: bool = True) -> list:
    """A forest plot: one row per comparison, its mean paired difference and 95% interval.

    Each comparison is any object with attributes ``label``, ``mean``, ``low``,
    ``high`` and ``verdict`` (e.g. ``dfl_core.stats.PairedComparison``; only the
    attributes are used). A vertical line marks ``zero`` (no difference); an
    interval that crosses it is drawn hollow. The verdict is written to the
    right of the axes, outside the data. Rows run top to bottom in the order given.

    Returns the error-bar containers.
    """
    comparisons = list(comparisons)
    ys = np.arange(len(comparisons))[::-1]
    drawn = []
    for y, c in zip(ys, comparisons):
        crosses = c.low <= zero <= c.high
        drawn.append(ax.errorbar([c.mean], [y], xerr=[[c.mean - c.low], [c.high - c.mean]], fmt="o",
                                 color="0.45" if crosses else COLORS[0], capsize=4, markersize=6,
                                 markerfacecolor="white" if crosses else COLORS[0], zorder=3))
        if verdicts:
            ax.annotate(str(c.verdict), xy=(1.02, y), xycoords=("axes fraction", "data"),
                        va="center", ha="left", fontsize=8)
    ax.axvline(zero, color="0.3", linewidth=1, linestyle="--", zorder=1)
    ax.set_yticks(ys, [str(c.label) for c in comparisons])
    ax.set_ylim(-0.7, len(comparisons) - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    return drawn


def bars_with_intervals(ax, labels: Sequence[str], means: Sequence[float], lows: Sequence[float] | None = None,
                        highs: Sequence[float] | None = None, *, ylabel: str,
                        interval: str = "95% CI", colors: Sequence[str] | None = None,
                        values: bool = True, fmt: str = "{:.1f}"):
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
        bar.set_hatch(hatch)          # distinct in greyscale too
    if lows is not None and highs is not None:
        lows, highs = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
        ax.errorbar(x, means, yerr=[means - lows, highs - means], fmt="none", ecolor="black", capsize=4, zorder=3)
        legend_outside(ax, handles=[Line2D([], [], color="black", marker="|", markersize=10, linestyle="none",
                                           label=f"whiskers: {interval}")], where="below")
    if values:
        tops = highs if highs is not None else means
        for xi, top, mean in zip(x, tops, means):
            ax.annotate(fmt.format(mean), (xi, top), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
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
    cd = {name: np.array([h.series("consensus_distance") for h in hs], dtype=float)[:, later]
          for name, hs in results.items()}
    positive = all(np.all(v > 0) for v in cd.values())      # a server-based run has no disagreement to log
    curves(ax_acc, rounds, acc, ylabel="test accuracy of the average model (%)", legend=False)
    curves(ax_cd, rounds[later], cd, ylabel="consensus distance (rounds ≥ 1" + (", log scale)" if positive else ")"),
           log=positive, legend="right")
    cfg = histories[0].config
    fig.suptitle(f"{cfg['dataset']}, m = {cfg['num_clients']}, {cfg['topology'] or 'server'}, "
                 f"{cfg['partition']} α = {cfg['alpha']}, {cfg['model']}", fontsize=10)
    return fig


def plot_comparison(results: Mapping[str, list], path: str | Path) -> Path:
    """Save :func:`comparison_figure` of ``results`` (``{algorithm: [History per seed]}``) to ``path``."""
    path = Path(path)
    comparison_figure(results).savefig(path, dpi=120)
    return path


# --- chapters 03, 03b ---


def showcase_curves(ax, result, arms: Sequence[str], metric: str = "test_acc", *, scale: float = 100.0,
                    ylabel: str = "test accuracy of the average model (%)", band: str = "std",
                    log: bool = False, legend: bool | str = "right", labels: Mapping[str, str] | None = None) -> list:
    """The curves of a showcase result (``dfl_core.showcase.load``): ``metric`` × ``scale`` at each evaluation,
    one mean line per arm with a band over the result's seeds (:func:`curves`). ``labels`` renames arms in the
    legend. Returns the mean lines."""
    rounds, labels = result.curve(arms[0], metric)[0], labels or {}
    runs = {labels.get(arm, arm): scale * np.asarray(result.curve(arm, metric)[1], dtype=float) for arm in arms}
    return curves(ax, rounds, runs, ylabel=ylabel, band=band, log=log, legend=legend)


def consensus_curves(ax, rounds: Sequence[float], runs_by_name: Mapping[str, Any], *, exact: float = 1e-9,
                     ylabel: str = "consensus distance (1/m) Σ‖x_i − x̄‖²") -> list:
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


def per_seed_lines(ax, xs: Sequence[float], values_by_name: Mapping[str, Any], *, xlabel: str, ylabel: str,
                   log_x: bool = False) -> list:
    """Mean over seeds against ``xs`` (a line per name) with every seed as a dot.

    ``values_by_name`` maps a name to an array of shape ``(len(xs), seeds)``. Returns the mean lines.
    """
    lines = []
    for i, (name, values) in enumerate(values_by_name.items()):
        values = np.asarray(values, dtype=float)
        (line,) = ax.plot(xs, values.mean(1), label=f"{name} (mean)", **style(i))
        ax.plot(np.repeat(np.asarray(xs, dtype=float), values.shape[1]), values.ravel(), ".",
                color=line.get_color(), alpha=0.5, label=f"{name}: each of {values.shape[1]} seeds")
        lines.append(line)
    if log_x:
        ax.set_xscale("log")
    ax.set_xticks(list(xs), [str(x) for x in xs])
    ax.minorticks_off()
    ax.set(xlabel=xlabel, ylabel=ylabel)
    legend_outside(ax)
    return lines


def scatter_by_arm(ax, points_by_arm: Mapping[str, tuple], *, xlabel: str, ylabel: str,
                   legend: bool = True) -> list:
    """One point per run, one colour and marker per arm: ``{arm: (xs, ys)}`` with one x and y per seed.
    Returns the scatter collections."""
    drawn = []
    for i, (arm, (xs, ys)) in enumerate(points_by_arm.items()):
        st = style(i)
        drawn.append(ax.scatter(xs, ys, color=st["color"], marker=st.get("marker", "o"), s=40, zorder=3,
                                label=f"{arm} ({len(xs)} seeds)"))
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    if legend:
        legend_outside(ax)
    return drawn


def no_difference_summary(verdicts, digits: int = 2, unit: str = "points"):
    """Markdown bullets for claims of *no* difference ("b bits match 32-bit floats"), worded from the verdicts.

    Each verdict compares the reference with the variant (reference − variant). An interval that contains 0
    (UNRESOLVED) reads "no difference detected", with the smallest difference the design could have detected;
    an interval on one side of 0 reads as a detected difference, in its direction.
    """
    from .showcase.report import _markdown

    fmt = f"{{:+.{digits}f}}"
    lines = []
    for v in verdicts:
        interval = f"{fmt.format(v.mean)} [{fmt.format(v.low)}, {fmt.format(v.high)}] {unit}"
        if v.verdict == "UNRESOLVED":
            text = (f"no difference detected ({interval}); the design could have detected a difference of "
                    f"about {v.detectable:.{digits}f} {unit}")
        elif v.verdict == "REPRODUCED":
            text = f"a difference detected: the reference is ahead ({interval}), so the two do not match"
        else:
            text = f"a difference detected: the variant is ahead ({interval}), so the two do not match"
        lines.append(f"- **{v.label}**: {text}.")
    return _markdown("\n".join(lines))


def curves_own_x(ax, xs_by_name: Mapping[str, Any], runs_by_name: Mapping[str, Any], *, xlabel: str, ylabel: str,
                 log_x: bool = False, band: str = "std", legend: bool | str = "right") -> list:
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
