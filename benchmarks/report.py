"""RESULTS.md: the machine, the command, the performance targets (PASS/MISS, and what limits each miss), the tables."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .common import GIB, fmt_ratio, fmt_s, markdown_table, median

__all__ = ["Target", "evaluate_targets", "targets_table", "render"]


@dataclass
class Target:
    name: str
    limit: float
    measured: float  # the ratio (or GiB) compared with ``limit``; nan if not measured
    detail: str = ""  # what was compared
    limiting: str = ""  # for a MISS: what limits it, with its measurement

    @property
    def status(self) -> str:
        if not math.isfinite(self.measured):
            return "not measured"
        return "PASS" if self.measured <= self.limit else "MISS"


def _profile_hint(profiles, model: str) -> str:
    for p in profiles or []:
        if p.model == model and p.top:
            top = ", ".join(f"`{n}` {100 * sh:.0f}%" for n, _, _, sh in p.top[:3])
            moves = sum(sh for n, _, _, sh in p.top if n in ("aten::copy_", "aten::fill_"))
            return f" Profile (m = {p.m}): {top}; `copy_` + `fill_` {100 * moves:.0f}%."
    return ""


_CONV_OPS = ("aten::mkldnn_convolution", "aten::convolution_backward")
_DENSE_OPS = ("aten::mm", "aten::addmm")


def _shares(profiles, model: str, ops: tuple[str, ...]) -> float:
    """Share of the profiled round spent in ``ops`` (0 without a profile)."""
    for p in profiles or []:
        if p.model == model and p.top:
            return sum(sh for n, _, _, sh in p.top if n in ops)
    return 0.0


def _diagnose_round(r, target: str, profiles, limit: float = math.nan) -> str:
    """What limits the engine's round against ``target`` ("floor" or "lean", ``limit`` its ratio), from the measurements."""
    e, one, lean = r.med("engine"), r.med("one model"), r.med("lean")
    f = r.floor
    rate = max(a for a, _ in r.rates)
    achieved = f["flops"] / e
    facts = (
        f"engine {fmt_s(e)} = {f['flops'] / 1e9:.0f} GFLOP at {achieved / 1e9:.0f} GFLOP/s "
        f"({100 * achieved / rate:.0f}% of the {rate / 1e9:.0f} GFLOP/s matmul rate); floor {fmt_s(f['floor'])}, "
        f"{f['bound']}-bound"
    )
    if math.isfinite(one):
        facts += f"; one model on the same samples (c = {r.big_chunk}) {fmt_s(one)}"
    conv, dense = _shares(profiles, r.model, _CONV_OPS), _shares(profiles, r.model, _DENSE_OPS)
    if target == "lean" and conv > 0:
        shared = (conv + dense) * e / lean  # those kernels alone, as a fraction of the lean loop
        kind = (
            f"**kernels a per-client loop runs too**: the convolutions (`mkldnn_convolution` + "
            f"`convolution_backward`, {100 * conv:.0f}%) and dense layers (`mm` + `addmm`, {100 * dense:.0f}%) "
            f"take {100 * (conv + dense):.0f}% of the engine's profiled round, {shared:.2f}× the lean loop "
            f"({fmt_s(lean)}) on their own, so "
            + (
                f"the rest of the round (pooling, ReLU, gradient copies, the local rule; now "
                f"{e / lean - shared:.2f}×) would have to fit in {limit - shared:.2f}× for {limit:g}×; "
                if shared < limit
                else f"{limit:g}× is out of reach even if the rest cost nothing; "
            )
            + "convolving all clients at once (grouped convolutions, `batched`, or `vmap`) is slower on this CPU "
            "(strategy table)."
        )
    elif target == "lean" and e <= lean:
        kind = (
            f"**overhead**: the engine is {lean / e:.2f}× faster than the lean loop, not the {1 / limit:.2f}× "
            f"asked; its `{r.strategy}` forward at client_chunk {r.client_chunk} still pays per-chunk copies and "
            "element-wise passes over (chunk, d) tensors."
        )
    elif target == "lean":
        kind = (
            f"**overhead**: the engine's `{r.strategy}` forward (client_chunk {r.client_chunk}) runs the same "
            f"per-client kernels as the lean loop ({fmt_s(lean)}) plus extra copies of per-client gradients."
        )
    elif math.isfinite(one) and one >= 0.75 * e:
        kind = (
            "**compute**: one model on the same samples is about as slow, so the kernels themselves run below "
            "the matmul rate at these shapes (faster conv/GEMM kernels or a GPU are what would help)."
        )
    else:
        kind = (
            "**overhead**: one model on the same samples is faster, so the gap is per-client work in the round "
            "(gradient copies, element-wise passes, small kernels); batching more clients per kernel and fusing "
            "passes would close it."
        )
    return f"{kind} {facts}.{_profile_hint(profiles, r.model)}"


def _diagnose_e2e(r) -> str:
    """Which part of a whole experiment keeps the engine above 0.2 × the reference loop."""
    es, rs = r.engine_split, r.ref_split
    if not es or not rs:
        return "; ".join(r.notes)
    parts = [
        f"{name}: engine {fmt_s(es[k])} vs reference {fmt_s(rs[k])} ({fmt_ratio(es[k] / rs[k])})"
        for k, name in (("rounds", "rounds"), ("evals", "evaluations"), ("setup", "setup and data"))
        if rs.get(k)
    ]
    total = sum(es.values())
    worst = max(("rounds", "evals"), key=lambda k: es[k])
    share = es[worst] / total if total else math.nan
    what = "the training rounds" if worst == "rounds" else "the evaluations"
    return (
        f"**{what}** ({100 * share:.0f}% of the engine's time) — "
        + "; ".join(parts)
        + ". "
        + (
            "The per-round cost is the round benchmark's: for small models each round is a few thousand small "
            "kernels plus gradient copies and unfused element-wise passes (see the profile), so the engine's "
            "round is only a small factor faster than a per-client loop; 0.2× needs the round itself ≥ 5× "
            "faster than the reference's."
            if worst == "rounds"
            else "Evaluating every client on its train and test split dominates; evaluating less often or on a "
            "subset would be the lever."
        )
    )


def evaluate_targets(rounds=None, e2e=None, gossip=None, memory=None, profiles=None, opcounts=None) -> list[Target]:
    """The targets of the performance issue: PASS or MISS, and what limits each miss."""
    out: list[Target] = []
    rounds = rounds or []
    at100 = [r for r in rounds if r.m == 100]
    for r in at100:
        e, lean, floor = r.med("engine"), r.med("lean"), r.med("floor")
        if r.model == "2nn":
            t = Target(
                f"m = 100, 2nn, {r.algo}: engine ≤ 0.5 × lean loop", 0.5, e / lean, f"{fmt_s(e)} / {fmt_s(lean)}"
            )
            if t.status == "MISS":
                t.limiting = _diagnose_round(r, "lean", profiles, 0.5)
            out.append(t)
            t = Target(f"m = 100, 2nn, {r.algo}: engine ≤ 1.5 × floor", 1.5, e / floor, f"{fmt_s(e)} / {fmt_s(floor)}")
            if t.status == "MISS":
                t.limiting = _diagnose_round(r, "floor", profiles)
            out.append(t)
        else:
            t = Target(
                f"m = 100, {r.model}, {r.algo}: engine ≤ 0.8 × lean loop", 0.8, e / lean, f"{fmt_s(e)} / {fmt_s(lean)}"
            )
            if t.status == "MISS":
                t.limiting = _diagnose_round(r, "lean", profiles, 0.8)
            out.append(t)
    if not at100:
        out.append(Target("m = 100: 2NN engine ≤ 0.5 × lean loop and ≤ 1.5 × floor; CNNs ≤ 0.8 × lean", 1.0, math.nan))
    for r in e2e or []:
        e, ref = median(r.times["engine"]), median(r.times["reference"])
        t = Target(f"end to end, {r.name}: engine ≤ 0.2 × reference loop", 0.2, e / ref, f"{fmt_s(e)} / {fmt_s(ref)}")
        if t.status == "MISS":
            t.limiting = _diagnose_e2e(r)
        out.append(t)
    if not e2e:
        out.append(Target("end to end: engine ≤ 0.2 × reference loop", 0.2, math.nan))
    for model in sorted({r["model"] for r in opcounts or []}):
        rows = {r["m"]: r["calls"] for r in opcounts if r["model"] == model}
        small, large = rows[min(rows)], rows[max(rows)]
        t = Target(
            f"operator calls per round on the CUDA path, {model}: m = {max(rows)} equals m = {min(rows)}",
            1.0,
            large / small,
            f"{large} / {small} calls",
        )
        out.append(t)
    mem = [r for r in memory or [] if r["model"] == "2nn" and r["algo"] == "SAM" and r["m"] == 1000]
    if mem:
        r = mem[0]
        t = Target(
            "m = 1000, 2nn, SAM: a round fits in 4 GiB of resident memory",
            4.0,
            r["peak"] / GIB,
            f"peak RSS {r['peak'] / GIB:.2f} GiB",
        )
        if t.status == "MISS":
            t.limiting = (
                f"**memory held by the engine**: one m×d float32 tensor is {r['params'] / GIB:.2f} GiB; "
                f"RSS after setup {r['rss_setup'] / GIB:.2f} GiB (torch {r['rss_import'] / GIB:.2f} GiB, "
                f"data {r['data'] / GIB:.2f} GiB, x; x0 is one row), and the round adds "
                f"{(r['peak'] - r['rss_setup']) / GIB:.2f} GiB ≈ "
                f"{(r['peak'] - r['rss_setup']) / r['params']:.1f} m×d tensors (local-training output, "
                "gossip output). Writing the round's output in place, or drawing each step's batches "
                "lazily, would save most of one."
            )
        out.append(t)
    else:
        out.append(Target("m = 1000, 2nn, SAM: a round fits in 4 GiB of resident memory", 4.0, math.nan))
    gos = [g for g in (gossip or []) if g.m == 1000 and "engine ring" in g.times]
    for g in gos:
        ring = median(g.times.get("reused ring", g.times["engine ring"]))  # the path a Simulation takes
        copy = median(g.times["copy"])
        t = Target(
            f"ring gossip, m = 1000, d = {g.d:,}: within 2 × the memory-copy floor",
            2.0,
            ring / copy,
            f"{fmt_s(ring)} / {fmt_s(copy)}",
        )
        if t.status == "MISS":
            nbytes = (g.nnz["ring"] + g.m) * g.d * 4
            t.limiting = (
                f"**bandwidth and allocation**: the engine's {g.sparse['ring']} gossip reads "
                f"{g.nnz['ring']:,} rows and writes {g.m:,} ({nbytes / 1e9:.2f} GB, "
                f"{nbytes / ring / 1e9:.1f} GB/s achieved vs {2 * g.m * g.d * 4 / copy / 1e9:.1f} GB/s for "
                f"the copy); a fresh output costs {fmt_s(median(g.times['clone']))} by itself (clone). "
                "Its arithmetic floor is (nnz + m)/(2m) × copy."
            )
        out.append(t)
    if not gos:
        out.append(Target("ring gossip at m = 1000: within 2 × the memory-copy floor", 2.0, math.nan))
    return out


def targets_table(targets: list[Target]) -> str:
    """The targets as a Markdown table (target, measured, status), then what limits each miss."""
    rows = []
    for t in targets:
        measured = (
            "–"
            if not math.isfinite(t.measured)
            else (f"{t.measured:.2f} GiB" if "GiB" in t.name else fmt_ratio(t.measured))
        )
        rows.append(
            [
                t.name,
                measured + (f" ({t.detail})" if t.detail else ""),
                f"**{t.status}**" if t.status != "not measured" else t.status,
            ]
        )
    text = markdown_table(["target", "measured", "status"], rows)
    misses = [t for t in targets if t.status == "MISS"]
    if misses:
        text += "\n\nWhat limits each miss:\n\n" + "\n".join(f"- *{t.name}*: {t.limiting}" for t in misses)
    return text


def render(
    *,
    machine: dict,
    command: str,
    wall_s: float,
    load_end: tuple[float, ...] | None,
    quick: bool,
    targets: list[Target],
    sections: dict[str, str | None],
    settings_text: str,
) -> str:
    """The whole RESULTS.md."""
    lines = ["# Benchmark results", ""]
    load = machine.get("load average at start", "")
    cores = os.cpu_count() or 1
    noisy = load_end is not None and (max(load_end) > 0.5 or any(float(v) > 0.5 for v in load.split()))
    lines.append(
        "> Every timing here is a median over interleaved repeats within one run; compare ratios, not "
        "absolute times, across machines."
        + (
            f" Load average {load} at start and "
            f"{' '.join(f'{v:.2f}' for v in load_end)} at the end "
            f"on {cores} cores (the benchmark's own threads count)."
            if noisy
            else ""
        )
    )
    if quick:
        lines.append(
            "> This is a `--quick` smoke run (m = 10, one repeat, tiny sizes): it checks that the "
            "harness works; its numbers mean nothing. Regenerate real numbers with `python -m benchmarks`."
        )
    lines += [
        "",
        "## Machine",
        "",
        markdown_table(["", ""], [[k, v] for k, v in machine.items()]),
        "",
        "## Command",
        "",
        "```",
        command,
        "```",
        "",
        f"Wall time of the whole run: {fmt_s(wall_s)}.",
        "",
        settings_text,
        "",
        "## Targets",
        "",
        targets_table(targets),
        "",
    ]
    titles = {
        "tried": "What was tried",
        "round": "Round",
        "opcount": "Operator calls on the GPU path",
        "strategy": "Engine strategies",
        "profile": "Engine profile",
        "e2e": "End to end",
        "gossip": "Gossip",
        "memory": "Memory",
    }
    for key, title in titles.items():
        body = sections.get(key)
        lines += [f"## {title}", "", body if body else "(not run in this invocation)", ""]
    lines += ["## Method", "", METHOD]
    return "\n".join(lines) + "\n"


METHOD = """\
* **Timing.** Every table compares contenders timed in one process, interleaved (each repeat runs every
  contender once, in an order rotated from repeat to repeat) and reports the median over repeats. The floor's
  two rates (a 2048² float32 `torch.mm` and a 512 MiB tensor copy, best of 3 calls each) are measured inside the
  same repeats, and the floor uses the best rate seen in any repeat (it is a lower bound; load only lowers rates).
* **Round** (full-run sizes; `--quick` shrinks them, see the line under Command). One round = K = 5 local steps (SGD, or SAM with ρ = 0.01) with B = 32 on every client, then one
  gossip step on a ring. Data are random tensors of the real shapes (1×28×28; 3×32×32 for cnn-cifar),
  64 train and 20 test samples per client, IID. *engine*: `Simulation.step()` with the engine's defaults (no
  evaluation). *lean loop*: per client `copy.deepcopy(model)`, a new `torch.optim.SGD`, K steps on in-memory
  tensors (SAM: ascent to w + ρg/‖g‖, second gradient, restore), then state-dict mixing with W.
  *reference loop*: the DisPFL/DFedSAM structure — one shared model, `copy.deepcopy` of state dicts before and
  after training, a `DataLoader(shuffle=True)` and a new optimizer (davda54 `SAM` wrapper) per client, mixing by
  DisPFL's `_aggregate_func` state-dict arithmetic, then every round the evaluation of every client's model on
  its local test data and of the average model on the test set. At m = 1000 the loops run 100 clients (a ring
  among them) and are scaled × 10 (all their parts grow linearly in m); the engine runs all 1000 clients where
  its memory estimate fits the budget. *one model*: a single model taking the same K steps on m·B samples per
  step, c·B samples per forward pass, best c of {1, 10, 100} (each probed with one step, best of 2).
  `tests/test_benchmarks.py` checks that the engine and both loops compute the same parameters (float64, 1e-10).
* **Floor** = max(FLOPs / matmul rate, bytes / copy bandwidth). FLOPs: forward FLOPs per sample counted per
  layer (2·in·out per Linear, 2·C_in·k²·(output elements) per Conv2d), × 3 for forward + backward, × 2 for SAM,
  × m·K·B, plus 2·nnz(W)·d for gossip. Bytes (float32, read or written), per client and step: each gradient
  evaluation reads the parameters twice and writes the gradient (3d), writes and reads every activation and its
  gradient (4 × activations per sample × B) and reads the inputs; the SGD update reads x, g and writes x (3d);
  SAM adds the norm and the perturbed point (4d) and a second gradient evaluation; gossip reads nnz(W) rows and
  writes m rows. The copy bandwidth counts read + write bytes, like this model. The floor ignores that
  convolutions run below the matmul rate, so a compute-bound floor is optimistic for the CNNs.
* **End to end.** Engine runs are complete; the reference loop's time is estimated from its timed setup, a few
  timed rounds and evaluations (it evaluates the same things the engine's `evaluate` does).
* **Gossip.** One x ← W x on random float32 (m, d) parameters; see the section for the contenders.
* **Memory.** One subprocess per configuration; peak = `VmHWM` (the child's own peak RSS) after one round.
"""
