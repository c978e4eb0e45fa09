"""What a chapter shows of a showcase experiment: curves, paired verdicts, and sentences built from them.

The chapters never type a showcase number into their prose. They ask this
module for the verdict table and for the summary sentences, both computed from
the committed results file, so that the prose cannot contradict the evidence:

.. code-block:: python

    result = showcase.load("dfedsam")
    claims = [Claim("DFedSAM beats DFedAvg on the ring", "DFedSAM, ρ = 0.01", "DFedAvg")]
    verdicts = judge(result, claims)
    verdict_table(verdicts)          # Markdown: claim | mean Δ | 95% CI | detectable | verdict
    summary(verdicts)                # Markdown bullets: what reproduced, what reversed, what stayed open
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..display import Markdown
from .runner import ShowcaseResult, load

__all__ = [
    "ENDPOINT",
    "Claim",
    "judge",
    "verdict_table",
    "summary",
    "rerun_matches",
    "provenance_line",
    "regeneration_hours",
    "paper_difference",
    "regime",
]


@dataclass(frozen=True)
class Claim:
    """A paper's claim as a comparison of two arms: ``better`` beats ``worse`` on ``metric`` (× ``scale``).

    ``expect="less"`` for quantities where lower is the paper's direction (λ_max, the generalization gap).
    ``measure=True`` reads a per-run measure (e.g. ``lambda_max``) instead of a history metric.
    """

    text: str
    better: str
    worse: str
    metric: str = "test_acc"
    expect: str = "greater"
    scale: float = 100.0
    measure: bool = False
    unit: str = "points"
    paper: tuple[float, str] | None = None  # the paper's own difference and where it is (:func:`paper_difference`)


#: How a label writes a row's key (``split="Dir0.3"`` → "Dirichlet 0.3") and a column that is a place, not a
#: metric (Table 2's graphs).
_SPLIT_TEXT = {"Dir0.3": "Dirichlet 0.3", "Dir0.6": "Dirichlet 0.6"}
_WHERE_TEXT = {
    "split": lambda v: _SPLIT_TEXT.get(v, v),
    "setting": lambda v: _SPLIT_TEXT.get(v, v),
    "dirichlet_alpha": lambda v: f"α = {v}",
    "clients_per_round": lambda v: f"{v} clients a round",
}
_GRAPH_COLUMNS = {"ring": "ring", "grid": "grid", "exp": "exponential graph", "full": "complete graph"}


def paper_difference(
    table: str, better: str, worse: str, column: str = "validation", **where: str
) -> tuple[float, str]:
    """The paper's own difference ``better − worse`` in a transcribed table (:mod:`theory.tables`), and where
    it is, in words: ``paper_difference("dfedsam_table1", "DFedSAM", "DFedAvg", task="CIFAR-10", split="Dir0.3")``
    is ``(8.49, "DFedSAM paper, Table 1, CIFAR-10, 100 clients, Dirichlet 0.3")``; ``column="ring"`` of
    ``dfedsam_table2`` names the graph."""
    from theory.tables import load_table

    t = load_table(table)
    diff = float(t.one(algorithm=better, **where)[column]) - float(t.one(algorithm=worse, **where)[column])
    paper, number = table.split("_table")
    papers = {"dfedsam": "DFedSAM", "fedsam": "FedSAM", "fedgf": "FedGF"}
    parts = [where.pop("task")] if "task" in where else []
    parts += [t.setting] if t.setting else []  # what the table measured in no column (its "# setting:" line)
    parts += [_WHERE_TEXT.get(k, str)(v) for k, v in where.items()]
    parts += [_GRAPH_COLUMNS[column]] if column in _GRAPH_COLUMNS else []
    return diff, ", ".join([f"{papers.get(paper, paper)} paper", f"Table {number}", *parts])


#: The book's endpoint (chapter "Judging a claim"): a run's test accuracy is the mean of its last five
#: evaluations, which averages out the evaluation-to-evaluation noise of the last one.
ENDPOINT = "test accuracy, the mean of each seed's last five evaluations"
#: The other quantities a claim can compare, as a caption names them: history metrics are the mean of the
#: last five evaluations, like the endpoint; measures (``Claim.measure``) are taken once, after the last round.
_LAST_FIVE = "the mean of each seed's last five evaluations"
_QUANTITIES = {
    "test_acc": "test accuracy",
    "train_acc": "train accuracy",
    "gen_error": "generalization gap (train − test accuracy of x̄)",
    "test_loss": "test loss",
    "lambda_max": "λ_max of the train-loss Hessian at x̄",
    "hessian_trace": "the trace of the train-loss Hessian at x̄",
    "membership_gap": "the attacked clients' member − non-member accuracy gap",
    "membership_auc": "the membership attack's AUC",
}


def endpoint_of(claim: Claim) -> str:
    """What ``claim`` compares, in words: ``"train accuracy, the mean of each seed's last five evaluations"``."""
    quantity = _QUANTITIES.get(claim.metric, claim.metric)
    return f"{quantity}, {'after the last round' if claim.measure else _LAST_FIVE}"


#: How a regime names the models (the configs' names are for the command line).
_MODEL_NAMES = {
    "2nn": "2NN",
    "cnn-mnist": "CNN",
    "cnn-cifar": "CNN",
    "vgg11-gn": "VGG-11-GN",
    "resnet18-gn": "ResNet-18-GN",
    "linear": "softmax regression",
}


def _data_text(cfg, spec) -> str:
    """The data, its split and the model: ``"Fashion-MNIST (Dirichlet 0.3), 2NN"`` (``spec``: the dataset's entry)."""
    split = {
        "iid": "IID",
        "dirichlet": f"Dirichlet {cfg.alpha:g}",
        "shards": f"{cfg.shards_per_client} label shards per client",
    }.get(cfg.partition, cfg.partition)
    return f"{spec.title if spec else cfg.dataset} ({split}), {_MODEL_NAMES.get(cfg.model, cfg.model)}"


def regime(result: ShowcaseResult, arm: str, versus: str | None = None) -> str:
    """Where ``arm`` was measured, in parts separated by "; ": the data and model; the clients and the graph
    (or the server); the local work (E = K/⌈n/B⌉ local epochs a round) and rounds; the test set; and the arm's
    own train accuracy and train − test gap (means over seeds of the last five evaluations).
    :func:`verdict_table` states once, in its caption, the parts every row shares.

    ``versus`` is the arm it is compared with: where the two differ in local work or rounds (a compute-matched
    baseline, D-SGD's one step against many), each arm's is named, and where they run on different graphs, both
    graphs are (``versus``'s first)."""
    from dfl_core.config import Config
    from dfl_core.data.datasets import DATASETS
    from ..tables import local_work

    cfg = Config.from_dict(result.runs[(arm, result.seeds[0])]["config"])
    train, test = (sum(v) / len(v) for v in (result.per_seed(arm, "train_acc"), result.per_seed(arm)))
    other = Config.from_dict(result.runs[(versus, result.seeds[0])]["config"]) if versus is not None else None
    graph = getattr(cfg.params, "topology", None)
    if other is not None:
        other_graph = getattr(other.params, "topology", None)
        graph = graph if other_graph == graph else f"{other_graph or 'a server'} against {graph or 'a server'}"
    clients = f"m = {cfg.num_clients}, " + (f"graph: {graph}" if graph else "with a server")
    spec = DATASETS.get(cfg.dataset)  # None for a folder of images registered in another process
    test_size = cfg.test_size or (spec.test_size if spec else None)
    work = local_work(cfg)
    if other is not None:
        other_work = local_work(other)
        work = work if other_work == work else f"{versus}: {other_work}; {arm}: {work}"
    parts = [_data_text(cfg, spec), clients, work]
    parts += [f"test on {test_size:,} images"] if test_size else []
    parts += [f"{arm}: train {train:.1f}%, train−test gap {train - test:.1f} points".replace("gap -", "gap −")]
    return "; ".join(parts)


def judge(result: ShowcaseResult, claims: list[Claim], margin: float | None = None):
    """One :class:`~dfl_book.stats.PairedComparison` per claim (95% t-interval over the seeds), carrying the
    paper's own difference (if the claim names one) and the regime of the claim's ``worse`` arm, with the
    ``better`` arm's local work where it differs (:func:`regime`).
    ``margin`` turns on the equivalence test (EQUIVALENT within ±margin)."""
    import dataclasses

    from ..stats import compare_paired, signed

    out = []
    for c in claims:
        if c.measure:
            a = [c.scale * v for v in result.measure(c.better, c.metric)]
            b = [c.scale * v for v in result.measure(c.worse, c.metric)]
        else:
            a, b = result.per_seed(c.better, c.metric, scale=c.scale), result.per_seed(c.worse, c.metric, scale=c.scale)
        comparison = compare_paired(a, b, expect=c.expect, label=c.text, margin=margin)
        paper = f"{signed(c.paper[0], 2)} ({c.paper[1]})" if c.paper else None
        out.append(
            dataclasses.replace(
                comparison, paper=paper, regime=regime(result, c.worse, versus=c.better), endpoint=endpoint_of(c)
            )
        )
    return out


def _rows_text(rows: list[int]) -> str:
    names = [str(k + 1) for k in rows]
    return f"row {names[0]}" if len(names) == 1 else f"rows {', '.join(names[:-1])} and {names[-1]}"


def _endpoint_caption(endpoints: list[str]) -> str:
    """ "Endpoint: X." when every row compares the same quantity, else each quantity with its rows."""
    distinct = list(dict.fromkeys(endpoints))
    if len(distinct) == 1:
        return f"Endpoint: {distinct[0]}."
    groups = [f"{_rows_text([k for k, e in enumerate(endpoints) if e == d])}, {d}" for d in distinct]
    return f"Endpoints: {'; '.join(groups)}."


def _shared_regime(verdicts) -> tuple[list[str], list]:
    """The regime parts (separated by "; ") that every row carries, and the verdicts with only their own parts
    left in the regime column (None where nothing is left)."""
    import dataclasses

    parts = [v.regime.split("; ") if v.regime else None for v in verdicts]
    if any(p is None for p in parts) or not parts:
        return [], verdicts
    shared = [part for part in parts[0] if all(part in p for p in parts[1:])]
    return shared, [
        dataclasses.replace(v, regime="; ".join(x for x in p if x not in shared) or None)
        for v, p in zip(verdicts, parts)
    ]


def _after_holm(verdicts: list, family) -> tuple[list, list[str] | None]:
    """The family (``family``, or the verdicts themselves) and each verdict's verdict after Holm's correction
    over it; None when the family is one comparison, which has nothing to correct."""
    from ..stats import holm

    family = list(family) if family is not None else verdicts
    missing = [v.label for v in verdicts if not any(v is f for f in family)]
    if missing:
        raise ValueError(f"verdicts not in the family given: {missing} (every verdict must be in the family given)")
    if len(family) < 2:
        return family, None
    after = holm(family)
    return family, [next(a for f, a in zip(family, after) if f is v) for v in verdicts]


def verdict_table(verdicts, digits: int = 2, unit: str = "points", endpoint: str | None = None, family=None):
    """The verdicts as a Markdown table (claim, mean paired difference, 95% interval, detectable effect, verdict,
    the verdict after Holm's correction for the family, the paper's own difference and the regime), captioned
    with the endpoint compared, the unit, the seeds, the regime every row shares and the family.

    The endpoint is each verdict's own (:func:`judge` names what its claim compares), ``endpoint`` when given,
    else :data:`ENDPOINT`. The family is the table's rows, or ``family`` when the table shows part of a larger
    one (e.g. its comparisons in one unit): each verdict then stands beside the one that survives Holm's
    correction over the whole family (:func:`dfl_book.stats.holm`).
    """
    from ..stats import markdown_table

    verdicts = list(verdicts)
    family, corrected = _after_holm(verdicts, family)
    margin = next((v.margin for v in verdicts if v.margin), None)
    equivalence = f" EQUIVALENT: within ±{margin:g} {unit} (two one-sided tests)." if margin else ""
    if corrected is not None:
        shown = (
            f"these {len(family)} comparisons"
            if len(family) == len(verdicts)
            else f"these {len(verdicts)} and {len(family) - len(verdicts)} more comparisons, {len(family)} in all"
        )
        family_text = f' Family: {shown}, corrected by Holm\'s method ("after Holm").'
    else:
        family_text = " One comparison: no family to correct."
    endpoints = [endpoint or v.endpoint or ENDPOINT for v in verdicts]
    shared, rows = _shared_regime(verdicts)
    regime_text = f" Regime of every row: {'; '.join(shared)}." if shared else ""
    return Markdown(
        markdown_table(rows, digits=digits, corrected=corrected)
        + f"\n\n{_endpoint_caption(endpoints)} Differences in {unit}; 95% t-intervals over {verdicts[0].n} "
        f"seeds, paired by seed.{equivalence}{regime_text}{family_text}"
    )


def _sentence(v, digits: int) -> str:
    interval = v.interval(digits)
    small = f", by less than the ±{v.margin:g} margin" if v.within_margin else ""
    if v.verdict == "REPRODUCED":
        return f"**{v.label}**: reproduced{small} ({interval})."
    if v.verdict == "REVERSED":
        return f"**{v.label}**: reversed, the opposite holds{small} ({interval})."
    if v.verdict == "EQUIVALENT":
        return f"**{v.label}**: equivalent, the difference lies within ±{v.margin:g} ({interval})."
    detect = f"{v.detectable:.{digits}f}" if math.isfinite(v.detectable) else "∞"
    return (
        f"**{v.label}**: unresolved ({interval}); with these seeds only a difference of about {detect} or "
        f"more would have shown."
    )


def summary(verdicts, digits: int = 2, family=None):
    """One Markdown bullet per verdict, worded from the verdict itself, and what Holm's correction over the
    family (the verdicts, or ``family`` when they are part of a larger one) leaves of each resolved verdict."""
    verdicts = list(verdicts)
    family, corrected = _after_holm(verdicts, family)
    lines = []
    for v, c in zip(verdicts, corrected or [None] * len(verdicts)):
        note = ""
        if corrected is not None and v.verdict != "UNRESOLVED":
            note = (
                f" It stands after Holm's correction over the family of {len(family)}."
                if c == v.verdict
                else f" After Holm's correction over the family of {len(family)}: {c.lower()}."
            )
        lines.append(f"- {_sentence(v, digits)}{note}")
    return Markdown("\n".join(lines))


def rerun_matches(name: str, arm: str, seed: int = 0, rounds: int = 10, tolerance: float = 0.005) -> dict:
    """Rerun one committed run live up to its first evaluation at or after round ``rounds``, and compare its
    test accuracy there.

    Training drifts in the last bits across CPUs and torch builds, so the
    comparison has a margin: ``tolerance`` in accuracy (0.005 = half a point).
    Returns the round, the committed and the rerun value and whether they agree.
    """
    from dfl_core.engine import Simulation
    from ..profiles import get_profile
    from .experiments import EXPERIMENTS

    result = load(name)
    prof = get_profile(result.doc["profile"])
    at, committed = next((r["round"], r["test_acc"]) for r in result.history(arm, seed) if r["round"] >= rounds)
    cfg = EXPERIMENTS[result.name].config(arm, seed, prof).replace(rounds=at, eval_every=at)
    rerun = Simulation(cfg, data=prof.data(cfg)).run().final["test_acc"]
    return {"round": at, "committed": committed, "rerun": rerun, "agree": abs(rerun - committed) <= tolerance}


def provenance_line(result: ShowcaseResult) -> str:
    """Where the numbers come from, in one line: command, seeds, machine, date and CPU hours of training."""
    p = result.provenance
    return (
        f"{result.name}: `{p['command']}`, seeds {', '.join(map(str, p['seeds']))}, {p['machine']}, "
        f"{p['date']}, {result.cpu_time_s() / 3600:.2f} CPU hours of training"
        + (f". {p['note']}" if p.get("note") else "")
    )


def regeneration_hours(names: list[str]) -> float:
    """CPU hours of the named experiments' committed runs (one thread each; ``--jobs 2`` runs two at once)."""
    return sum(load(n).cpu_time_s() for n in names) / 3600
