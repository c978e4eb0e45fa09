"""``python -m benchmarks --gpu``: one DFedSAM-MGS round of the CIFAR models on one GPU (issue 32).

The setting of the issue: m = 100 clients, B = 128, K = 20 local SAM steps (5 epochs of 500 images per
client), Q = 4 gossip steps on a ring, 500 synthetic CIFAR-shaped (3×32×32) samples per client. For each
model and each *variant* of the engine's options (precision, channels-last, forward strategy) it measures:

* **engine**: one ``Simulation.step()`` (no evaluation), timed after a warm-up, with the device
  synchronised before and after. The warm-up is a separate simulation of the same configuration with
  K = 1, stepped twice (once in the quick run): it runs every kernel the timed round runs (cuDNN's choices and the allocator's
  pools are per shape, not per K) at a twentieth of the cost, and its second round predicts the timed
  one (K times it), which is how a variant that would overrun the time budget is skipped, not started;
* **peak memory**: ``torch.cuda.max_memory_allocated`` over the timed round (the data and every resident
  tensor of the simulation included);
* **per-client loop**: :func:`benchmarks.loops.lean_round` (deep-copied model, new optimizer, SAM the usual
  two-pass way, Q state-dict gossip steps) on ``loop_clients`` of the m clients (a ring among them), its
  time multiplied by m / loop_clients (every part of its round grows linearly in m), in the variant's
  precision (the same ``torch.autocast``); measured once per model and precision;
* **FLOPs**: ``torch.utils.flop_counter.FlopCounterMode`` on one client's forward and backward pass
  (multiply + add = 2 FLOPs; convolutions and matrix products only), × 2 for SAM's two passes × B × K × m
  for the round; achieved TFLOP/s = round FLOPs / round time.

Variants are strings of ``+``-joined tokens: a precision (``float32``, ``bfloat16``, ``float16``), ``cl``
(channels-last), a strategy (``batched``, ``vmap``, ``loop``; default the engine's ``auto``),
``cudnn-benchmark`` (``torch.backends.cudnn.benchmark = True`` for that variant), ``compile``
(``Config.compile``: the timed simulation then runs one untimed round first, since a new model compiles
anew) and ``chunkN`` (``Config.client_chunk = N``; default the engine's choice for the device). Jobs run variant by
variant, each over all models, so that when the budget runs out the first variants are complete. The
results are written (JSON, and a markdown table beside it) after every job, so a run cut short still
leaves what it measured.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from dfl_core.config import Config
from dfl_core.engine import Simulation
from dfl_core.models import build_model
from dfl_core.stacked import AUTOCAST_DTYPES
from dfl_core.topology import make_topology

from .common import GIB, fmt_s, machine_info, markdown_table, sync
from .loops import LocalSpec, client_tensors, lean_round
from .round import synthetic_data

__all__ = [
    "GpuSettings",
    "Variant",
    "Row",
    "parse_variant",
    "settings",
    "config",
    "flops_per_sample",
    "run",
    "table",
    "render",
    "write",
    "main",
    "probes",
    "MODELS",
    "PRECISIONS",
    "ISSUE_H200",
]

INPUT_SHAPE = (3, 32, 32)
MODELS = ("cnn-cifar", "vgg11-gn", "resnet18-gn")
PRECISIONS = tuple(AUTOCAST_DTYPES)
STRATEGY_TOKENS = ("auto", "batched", "vmap", "loop")
#: Issue 32's measurements on one H200 with main (float32): round, peak memory, the per-client loop.
ISSUE_H200 = {
    "cnn-cifar": ("2.37 s", "14.4 GiB", "10.3 s"),
    "vgg11-gn": ("15.2 s", "54 GiB", "25.1 s"),
    "resnet18-gn": ("33.1 s", "69 GiB", "not measured"),
}


@dataclass(frozen=True)
class Variant:
    """One setting of the engine's speed options."""

    precision: str = "float32"
    channels_last: bool = False
    strategy: str = "auto"
    cudnn_benchmark: bool = False
    compile: bool = False
    client_chunk: int | None = None  # None: the engine's default for the device

    @property
    def label(self) -> str:
        return "+".join(
            [self.precision]
            + (["cl"] if self.channels_last else [])
            + ([self.strategy] if self.strategy != "auto" else [])
            + (["cudnn-benchmark"] if self.cudnn_benchmark else [])
            + (["compile"] if self.compile else [])
            + ([f"chunk{self.client_chunk}"] if self.client_chunk else [])
        )


def parse_variant(text: str) -> Variant:
    """``"bfloat16+cl+batched"`` -> :class:`Variant`; unknown or repeated tokens raise ValueError."""
    precision, cl, strategy, bench, compiled, chunk = None, False, None, False, False, None
    for token in (t.strip() for t in text.split("+")):
        if token in PRECISIONS and precision is None:
            precision = token
        elif token == "cl" and not cl:
            cl = True
        elif token in STRATEGY_TOKENS and strategy is None:
            strategy = token
        elif token == "cudnn-benchmark" and not bench:
            bench = True
        elif token == "compile" and not compiled:
            compiled = True
        elif token.startswith("chunk") and token[5:].isdigit() and int(token[5:]) > 0 and chunk is None:
            chunk = int(token[5:])
        else:
            raise ValueError(
                f"variant {text!r}: token {token!r} unknown or repeated; allowed: one of "
                f"{', '.join(PRECISIONS)}, 'cl', one of {', '.join(STRATEGY_TOKENS)}, "
                "'cudnn-benchmark', 'compile', 'chunkN' (N clients trained together), joined by '+'"
            )
    return Variant(precision or "float32", cl, strategy or "auto", bench, compiled, chunk)


@dataclass
class GpuSettings:
    models: tuple[str, ...] = MODELS
    variants: tuple[Variant, ...] = (Variant(),)
    m: int = 100
    B: int = 128
    K: int = 20
    Q: int = 4
    n_train: int = 500  # samples per client (5 epochs at K = 20, B = 128 as in the issue)
    n_test: int = 2  # the test split is built but never evaluated (a round is step() only)
    lr: float = 0.1
    rho: float = 0.01  # dfedsam-mgs's defaults
    loop_clients: int = 10  # clients the per-client loop runs; its time is scaled to m
    repeats: int = 1  # timed rounds per job (after the warm-up)
    budget_s: float = 270.0  # skip a job whose predicted time would end the run later than this
    device: str = "cuda"
    quick: bool = False


def settings(
    quick: bool,
    device: str,
    *,
    models: tuple[str, ...] | None = None,
    clients: int | None = None,
    variants: tuple[Variant, ...] = (Variant(),),
    repeats: int | None = None,
    budget_s: float | None = None,
    loop_clients: int | None = None,
) -> GpuSettings:
    """The full run (the issue's sizes), or the CPU smoke run (tiny sizes, a few seconds a model)."""
    if quick:
        s = GpuSettings(
            models=models or MODELS,
            variants=variants,
            m=clients or 2,
            B=1,
            K=1,
            Q=1,
            n_train=2,
            loop_clients=min(loop_clients or 1, clients or 2),
            repeats=repeats or 1,
            budget_s=budget_s or 300.0,
            device=device,
            quick=True,
        )
    else:
        s = GpuSettings(
            models=models or MODELS,
            variants=variants,
            m=clients or 100,
            repeats=repeats or 1,
            budget_s=budget_s or 270.0,
            device=device,
        )
        s.loop_clients = min(loop_clients or s.loop_clients, s.m)
    bad = [name for name in s.models if name not in MODELS]
    if bad:
        raise ValueError(f"--models: {', '.join(bad)} not among the benchmark's models {', '.join(MODELS)}")
    if s.m < 2 or s.loop_clients < 1:
        raise ValueError(
            f"--clients {s.m} / --loop-clients {s.loop_clients}: the ring needs at least 2 clients and "
            "the loop at least 1"
        )
    return s


def config(s: GpuSettings, model: str, v: Variant, K: int | None = None) -> Config:
    """The engine's configuration for one job: DFedSAM-MGS on a ring, the variant's options."""
    return Config(
        algorithm="dfedsam-mgs",
        model=model,
        dataset="cifar10",
        partition="iid",
        num_clients=s.m,
        local_steps=K or s.K,
        batch_size=s.B,
        gossip_steps=s.Q,
        lr=s.lr,
        rho=s.rho,
        device=s.device,
        precision=v.precision,
        channels_last=v.channels_last,
        forward_strategy=v.strategy,
        compile=v.compile,
        cudnn_benchmark=v.cudnn_benchmark,
        client_chunk=v.client_chunk,
        eval_every=10**6,
    )


def flops_per_sample(model: str) -> float:
    """FLOPs of one sample's forward and backward pass (one SAM pass), counted by ``FlopCounterMode``.

    Counted on PyTorch's meta device (shapes only, no arithmetic) on a batch of 2 (the count is linear in the
    batch); multiply + add = 2 FLOPs, and only convolutions and matrix products count (GroupNorm, ReLU and
    pooling are memory traffic, not FLOPs).
    """
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        net = build_model(model, INPUT_SHAPE, 10)
        x, y = torch.randn(2, *INPUT_SHAPE), torch.randint(0, 10, (2,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(net(x), y).backward()
    return counter.get_total_flops() / 2


def _autocast(device: str, precision: str):
    dtype = AUTOCAST_DTYPES[precision]
    return contextlib.nullcontext() if dtype is None else torch.autocast(torch.device(device).type, dtype=dtype)


def _free(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def _peak_reset(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: str) -> float:
    return torch.cuda.max_memory_allocated(device) / GIB if torch.device(device).type == "cuda" else math.nan


def _timed(fn: Callable[[], object], device: str) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


@dataclass
class Row:
    model: str
    variant: str
    strategy: str = ""
    client_chunk: int = 0
    round_s: float = math.nan
    rounds_timed: list[float] = field(default_factory=list)
    warmup_s: float = math.nan
    peak_gib: float = math.nan
    loop_s: float = math.nan  # the per-client loop's round, scaled to m
    loop_clients: int = 0
    gflop_per_sample: float = math.nan  # two forward+backward passes (SAM)
    round_tflop: float = math.nan
    engine_tflops: float = math.nan
    loop_tflops: float = math.nan
    notes: list[str] = field(default_factory=list)


def _loop_round(s: GpuSettings, model: str, precision: str, data, log) -> tuple[float, str]:
    """The per-client loop's round on ``s.loop_clients`` clients (after a one-client, one-step warm-up)."""
    n = s.loop_clients
    template = build_model(model, INPUT_SHAPE, 10).to(s.device)
    tensors = client_tensors(data, range(n))
    W = make_topology("ring", n).matrix(0).W
    states = [{k: v.clone() for k, v in template.state_dict().items()} for _ in range(n)]
    spec = LocalSpec(lr=s.lr, K=s.K, B=s.B, rho=s.rho)
    gen = torch.Generator().manual_seed(0)
    with _autocast(s.device, precision):
        one = LocalSpec(lr=s.lr, K=1, B=s.B, rho=s.rho)
        lean_round(template, states[:1], np.ones((1, 1)), one, tensors, gen=gen)  # warm-up: one client, one step
        t = _timed(lambda: lean_round(template, states, W, spec, tensors, gen=gen, gossip_steps=s.Q), s.device)
    return t, f"per-client loop: {n} of {s.m} clients timed ({fmt_s(t)}), × {s.m / n:g}"


def run(
    s: GpuSettings,
    log: Callable[[str], None] = print,
    on_row: Callable[[list[Row]], None] | None = None,
    clock_start: float | None = None,
) -> list[Row]:
    """Every (variant, model) job in order, within ``s.budget_s`` seconds of ``clock_start``.

    A job whose configuration (strategy resolved) an earlier variant already ran is not rerun; a job that
    fails (out of memory, or any error) is recorded with its error and the run goes on.
    """
    start = time.perf_counter() if clock_start is None else clock_start

    def left() -> float:
        return s.budget_s - (time.perf_counter() - start)

    log(f"gpu: data: {s.m} clients × {s.n_train} samples of {'×'.join(map(str, INPUT_SHAPE))} on {s.device}")
    data = synthetic_data(INPUT_SHAPE, s.m, s.n_train, s.n_test, device=s.device)
    flops = {model: flops_per_sample(model) for model in s.models}
    rows: list[Row] = []
    loops: dict[tuple[str, str], tuple[float, str]] = {}  # (model, precision) -> (seconds, note)
    done: dict[tuple, str] = {}  # what a job ran (strategy resolved) -> its variant
    for v in s.variants:
        for model in s.models:
            row = Row(
                model,
                v.label,
                gflop_per_sample=2 * flops[model] / 1e9,
                round_tflop=2 * flops[model] * s.B * s.K * s.m / 1e12,
            )
            rows.append(row)
            bench_before = torch.backends.cudnn.benchmark
            try:
                resolved = _resolved_strategy(s, model, v)
                key = (model, v.precision, v.channels_last, resolved, v.cudnn_benchmark, v.compile, v.client_chunk)
                if key in done:
                    row.strategy = resolved
                    row.notes.append(f"not rerun: the same configuration as {done[key]} (strategy {resolved})")
                    continue
                done[key] = v.label
                if left() <= 0:
                    row.notes.append("not run: the time budget was spent")
                    continue
                log(f"gpu: {model} {v.label}: warm-up (K = 1) [{left():.0f} s of budget left]")
                torch.backends.cudnn.benchmark = v.cudnn_benchmark or bench_before
                _job(s, model, v, row, data, left, log)
                _loop_job(s, model, v.precision, row, data, loops, left, log)
            except torch.cuda.OutOfMemoryError as err:
                row.notes.append(f"out of device memory: {str(err).splitlines()[0][:160]}")
            except Exception as err:  # one failing variant must not cost the run's other measurements
                row.notes.append(f"failed: {type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}")
                log(f"gpu: {model} {v.label}: FAILED\n{traceback.format_exc()}")
            finally:
                torch.backends.cudnn.benchmark = bench_before
                _free(s.device)
                log(
                    f"gpu: {model} {v.label}: round {fmt_s(row.round_s)}, peak {_gib(row.peak_gib)}, "
                    f"loop {fmt_s(row.loop_s)}, engine {_num(row.engine_tflops)} TFLOP/s "
                    f"({row.gflop_per_sample:.3f} GFLOP per sample, two passes); {'; '.join(row.notes)}"
                )
                if on_row is not None:
                    on_row(rows)
    return rows


def _loop_job(s: GpuSettings, model: str, precision: str, row: Row, data, loops: dict, left, log) -> None:
    """The per-client loop's round for ``row``: measured once per (model, precision), if the budget allows."""
    key = (model, precision)
    if key not in loops and math.isfinite(row.round_s):
        # a 10-client loop takes about 0.1-0.5 of the engine's m-client round (issue 32: the loop was 1.7-4.3x)
        if left() < 5 * row.round_s * s.loop_clients / s.m + 5:
            row.notes.append("per-client loop skipped: not enough of the budget left")
            return
        log(f"gpu: {model} {precision}: per-client loop on {s.loop_clients} clients")
        loops[key] = _loop_round(s, model, precision, data, log)
    if key in loops:
        t, note = loops[key]
        row.loop_s, row.loop_clients = t * s.m / s.loop_clients, s.loop_clients
        row.loop_tflops = row.round_tflop / row.loop_s
        row.notes.append(note)


def _resolved_strategy(s: GpuSettings, model: str, v: Variant) -> str:
    """The forward strategy the engine picks for this job (``auto`` resolved as on the device)."""
    from functools import partial

    from dfl_core.stacked import StackedModel

    return StackedModel(
        partial(build_model, model, INPUT_SHAPE, 10),
        v.strategy,
        s.device,
        autocast_dtype=AUTOCAST_DTYPES[v.precision],
        channels_last=v.channels_last,
        compile=v.compile,
    ).strategy


def _job(s: GpuSettings, model: str, v: Variant, row: Row, data, left, log) -> None:
    warm = Simulation(config(s, model, v, K=1), data=data)
    row.strategy, row.client_chunk = warm.model.strategy, warm.client_chunk
    if not s.quick:  # the first round pays for lazy initialisation; the second predicts
        _timed(warm.step, s.device)
    row.warmup_s = _timed(warm.step, s.device)
    del warm
    _free(s.device)
    predicted = row.warmup_s * s.K * (s.repeats + v.compile)  # compile: an untimed first round too
    if predicted > left():
        row.notes.append(
            f"engine skipped: predicted {fmt_s(predicted)} (K × the warm-up's round), "
            f"{max(left(), 0):.0f} s of the budget left"
        )
        return
    sim = Simulation(config(s, model, v), data=data)
    row.strategy, row.client_chunk = sim.model.strategy, sim.client_chunk
    if v.compile:  # a new model compiles anew: its first round is not the one timed
        log(f"gpu: {model} {v.label}: untimed first round (compiles)")
        row.notes.append(
            f"compiled: the timed simulation's first round, untimed, took "
            f"{fmt_s(_timed(sim.step, s.device))} (compiling)"
        )
    _peak_reset(s.device)
    for _ in range(s.repeats):
        log(f"gpu: {model} {v.label}: timed round (predicted {fmt_s(row.warmup_s * s.K)})")
        row.rounds_timed.append(_timed(sim.step, s.device))
    row.peak_gib = _peak_gib(s.device)
    row.round_s = sorted(row.rounds_timed)[len(row.rounds_timed) // 2]
    row.engine_tflops = row.round_tflop / row.round_s
    del sim


def _num(x: float) -> str:
    """3 significant digits, or – (not measured)."""
    return "–" if not math.isfinite(x) else f"{x:.3g}"


def _gib(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.1f} GiB"


def table(rows: list[Row]) -> str:
    """One row per (model, variant), models in the benchmark's order."""
    order = {name: i for i, name in enumerate(MODELS)}
    body = []
    for r in sorted(rows, key=lambda r: order.get(r.model, 99)):  # stable: variants stay in run order
        ratio = r.round_s / r.loop_s if math.isfinite(r.round_s) and math.isfinite(r.loop_s) else math.nan
        body.append(
            [
                r.model,
                r.variant,
                f"{r.strategy or '–'}/{r.client_chunk or '–'}",
                fmt_s(r.round_s),
                _gib(r.peak_gib),
                fmt_s(r.loop_s) + (f" ({r.loop_clients} timed)" if r.loop_clients else ""),
                "–" if not math.isfinite(ratio) else f"{ratio:.2f}×",
                f"{r.gflop_per_sample:.3f}",
                _num(r.round_tflop),
                _num(r.engine_tflops),
                _num(r.loop_tflops),
            ]
        )
    return markdown_table(
        [
            "model",
            "variant",
            "strategy/chunk",
            "round",
            "peak GPU memory",
            "same round as a per-client loop",
            "engine/loop",
            "GFLOP per sample (2 passes)",
            "round TFLOP",
            "engine TFLOP/s",
            "loop TFLOP/s",
        ],
        body,
    )


def probes(device: str) -> dict[str, str]:
    """Facts that explain the numbers: TF32 settings, cuDNN, and what autocast does to a convolution under vmap."""
    out = {
        "torch": torch.__version__,
        "matmul TF32 (torch.backends.cuda.matmul.allow_tf32)": str(torch.backends.cuda.matmul.allow_tf32),
        "cuDNN TF32 (torch.backends.cudnn.allow_tf32)": str(torch.backends.cudnn.allow_tf32),
        "cuDNN benchmark": str(torch.backends.cudnn.benchmark),
    }
    dev = torch.device(device)
    if dev.type == "cuda":
        out["GPU"] = torch.cuda.get_device_name(dev)
        out["cuDNN"] = str(torch.backends.cudnn.version())
        out["bfloat16 supported"] = str(torch.cuda.is_bf16_supported())
    w, x = torch.randn(2, 4, 3, 3, 3, device=dev), torch.randn(2, 1, 3, 8, 8, device=dev)
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        conv = torch.func.vmap(lambda w, x: F.conv2d(x, w))(w, x)
    out["dtype of a vmapped conv2d under bfloat16 autocast"] = str(conv.dtype).replace("torch.", "")
    return out


def render(
    s: GpuSettings, rows: list[Row], machine: dict[str, str], facts: dict[str, str], command: str, wall_s: float
) -> str:
    notes = [f"- {r.model} {r.variant}: {n}" for r in rows for n in r.notes]
    issue = markdown_table(
        ["model", "round", "peak GPU memory", "same round as a per-client loop"],
        [[m, *ISSUE_H200[m]] for m in s.models if m in ISSUE_H200],
    )
    return (
        "\n\n".join(
            [
                "# GPU benchmark: one DFedSAM-MGS round (issue 32)"
                + (" — QUICK CPU SMOKE RUN, sizes are not the issue's" if s.quick else ""),
                f"Command: `{command}`; {wall_s:.0f} s in all.",
                "Machine: " + "; ".join(f"{k}: {v}" for k, v in {**machine, **facts}.items()),
                f"Setting: m = {s.m}, B = {s.B}, K = {s.K} SAM steps (ρ = {s.rho}), Q = {s.Q} gossip steps on a ring, "
                f"{s.n_train} synthetic {'×'.join(map(str, INPUT_SHAPE))} samples per client; lr {s.lr}. *round*: one "
                "`Simulation.step()` after a K = 1 warm-up, device synchronised; *peak GPU memory*: "
                "`torch.cuda.max_memory_allocated` over the timed round; *per-client loop*: `benchmarks.loops.lean_round` "
                f"on {s.loop_clients} clients in the same precision, × m / {s.loop_clients}; FLOPs by `FlopCounterMode` "
                "(multiply + add = 2, convolutions and matrix products only), two forward+backward passes per sample "
                "(SAM). engine/loop < 1: the engine is faster.",
                table(rows),
                "Notes:\n\n" + ("\n".join(notes) if notes else "- none"),
                "For comparison, issue 32 on one H200 with main (float32; its FLOP count, 0.92 GFLOP per sample for "
                "VGG-11, is half of `FlopCounterMode`'s, i.e. it counted multiply-adds):\n\n" + issue,
            ]
        )
        + "\n"
    )


def _json_number(value):
    """A float that was not measured (NaN) as JSON's null; anything else unchanged."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write(
    out: Path,
    s: GpuSettings,
    rows: list[Row],
    machine: dict[str, str],
    facts: dict[str, str],
    command: str,
    wall_s: float,
) -> tuple[Path, Path]:
    """The results as JSON at ``out`` and as markdown beside it (``out`` with suffix ``.md``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    md = out.with_suffix(".md")
    payload = {
        "command": command,
        "wall_s": wall_s,
        "machine": machine,
        "facts": facts,
        "settings": {**asdict(s), "variants": [v.label for v in s.variants]},
        "rows": [{k: _json_number(v) for k, v in asdict(r).items()} for r in rows],
    }
    out.write_text(json.dumps(payload, indent=2, default=str, allow_nan=False) + "\n")
    md.write_text(render(s, rows, machine, facts, command, wall_s))
    return out, md


def main(s: GpuSettings, out: Path, command: str, log: Callable[[str], None] = print) -> int:
    """Run the benchmark, writing ``out`` (JSON) and its markdown twin after every job; print the table."""
    t0 = time.perf_counter()
    machine, facts = machine_info(s.device), probes(s.device)
    name = facts.get("GPU", machine["CPU"])
    log(
        f"gpu benchmark on {name} ({s.device}); models {', '.join(s.models)}; variants "
        f"{', '.join(v.label for v in s.variants)}; budget {s.budget_s:.0f} s -> {out}"
    )
    for k, v in facts.items():
        log(f"  {k}: {v}")

    def save(rows: list[Row]) -> None:
        write(out, s, rows, machine, facts, command, time.perf_counter() - t0)

    rows = run(s, log, on_row=save, clock_start=t0)
    json_path, md_path = write(out, s, rows, machine, facts, command, time.perf_counter() - t0)
    log("\n" + table(rows))
    log(f"\nwrote {json_path} and {md_path} ({time.perf_counter() - t0:.0f} s)")
    return 0
