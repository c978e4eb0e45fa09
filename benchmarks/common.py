"""Helpers shared by the benchmarks: interleaved timing, machine facts, the hardware floor.

Timing rules (used by every benchmark):

* everything compared in one table is timed in the same process;
* contenders are *interleaved*: each repeat runs every contender once, in an
  order rotated from repeat to repeat, so a burst of load from another process
  hits all of them alike;
* the reported number is the median over repeats.

The floor of a round is ``max(FLOPs / matmul rate, bytes / copy bandwidth)``
with both rates measured here, in the same process, inside the same repeats.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

__all__ = [
    "sync",
    "Contender",
    "interleaved",
    "median",
    "machine_info",
    "matmul_rate",
    "copy_bandwidth",
    "LayerCost",
    "ModelCost",
    "model_cost",
    "round_floor",
    "fmt_s",
    "fmt_ratio",
    "markdown_table",
    "GIB",
    "MIB",
]

GIB, MIB = 1 << 30, 1 << 20


def sync(device: torch.device | str = "cpu") -> None:
    """Wait for queued GPU work (a no-op on CPU), so a timer measures finished work."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Contender:
    """One thing to time: ``fn()`` after an untimed ``setup()``.

    ``scale`` multiplies the measured time (e.g. 10 when 100 of 1000 clients
    are timed). With ``measures``, ``fn`` itself returns the seconds to record
    (a bound computed from rates it measured, such as the floor).
    """

    name: str
    fn: Callable[[], object]
    setup: Callable[[], object] | None = None
    scale: float = 1.0
    measures: bool = False


def interleaved(
    contenders: list[Contender],
    repeats: int,
    warmup: bool = True,
    device: torch.device | str = "cpu",
    log: Callable[[str], None] | None = None,
) -> dict[str, list[float]]:
    """Time every contender ``repeats`` times, interleaved; returns the (scaled) seconds per contender.

    Repeat r runs the contenders in the order rotated by r. With ``warmup``
    each contender runs once, untimed, first (allocator, caches, lazy init).
    """
    times: dict[str, list[float]] = {c.name: [] for c in contenders}
    if warmup:
        for c in contenders:
            if c.measures:
                continue
            if c.setup:
                c.setup()
            c.fn()
            sync(device)
    n = len(contenders)
    for r in range(repeats):
        for j in range(n):
            c = contenders[(j + r) % n]
            if c.setup:
                c.setup()
            sync(device)
            t0 = time.perf_counter()
            value = c.fn()
            sync(device)
            dt = (float(value) if c.measures else time.perf_counter() - t0) * c.scale
            del value  # free a big result before the next contender
            times[c.name].append(dt)
            if log:
                log(f"    {c.name:<28} {fmt_s(dt)}")
    return times


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


# ---------------------------------------------------------------------------- machine
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _total_memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return int(line.split()[1]) * 1024 / GIB
    except OSError:
        pass
    return math.nan


def machine_info(device: torch.device | str = "cpu") -> dict[str, str]:
    """What the numbers were measured on."""
    info = {
        "CPU": _cpu_model(),
        "cores (os.cpu_count)": str(os.cpu_count()),
        "memory": f"{_total_memory_gib():.1f} GiB",
        "torch": torch.__version__,
        "torch threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "device": str(device),
    }
    if torch.device(device).type == "cuda":
        info["GPU"] = torch.cuda.get_device_name(device)
    try:
        info["load average at start"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        pass
    return info


# ---------------------------------------------------------------------- floor rates
def matmul_rate(
    n: int = 2048, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", calls: int = 3
) -> float:
    """FLOP/s of one large square ``torch.mm`` (2 n³ FLOPs per call); the best of ``calls``."""
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    out = torch.empty(n, n, dtype=dtype, device=device)
    torch.mm(a, b, out=out)  # warm up
    best = math.inf
    for _ in range(calls):
        sync(device)
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def copy_bandwidth(nbytes: int = 512 * MIB, device: str | torch.device = "cpu", calls: int = 3) -> float:
    """Bytes read + written per second by a large ``dst.copy_(src)``; the best of ``calls``.

    A copy of N bytes reads N and writes N, so this is 2N / time, the same
    accounting as the byte counts of :func:`round_floor`.
    """
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages
    best = math.inf
    for _ in range(calls):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


# ----------------------------------------------------------------- analytic cost
@dataclass
class LayerCost:
    name: str
    kind: str
    flops: int  # forward FLOPs per sample (multiply + add = 2)
    activations: int  # output elements per sample


@dataclass
class ModelCost:
    """Per-sample forward FLOPs and activation sizes of a model, layer by layer."""

    d: int
    input_numel: int
    layers: list[LayerCost] = field(default_factory=list)

    @property
    def forward_flops(self) -> int:
        return sum(layer.flops for layer in self.layers)

    @property
    def activations(self) -> int:
        return sum(layer.activations for layer in self.layers)


def model_cost(module: nn.Module, input_shape: tuple[int, ...]) -> ModelCost:
    """Count forward FLOPs (Linear, Conv2d) and activation elements of every leaf module.

    Done with forward hooks on one sample, so it works for any module made of
    the usual layers. Element-wise layers (ReLU, pooling, norms) count their
    outputs as activations and no FLOPs (they are bandwidth, not compute).
    """
    cost = ModelCost(d=sum(p.numel() for p in module.parameters()), input_numel=math.prod(input_shape))
    hooks = []

    def hook(mod: nn.Module, inputs, output, name: str):
        out = output.numel()  # batch of 1
        if isinstance(mod, nn.Linear):
            flops = 2 * mod.in_features * mod.out_features
        elif isinstance(mod, nn.Conv2d):
            kh, kw = mod.kernel_size
            flops = 2 * (mod.in_channels // mod.groups) * kh * kw * out
        else:
            flops = 0
        if isinstance(mod, nn.Flatten):
            out = 0  # a view, moves nothing
        cost.layers.append(LayerCost(name, type(mod).__name__, flops, out))

    for name, mod in module.named_modules():
        if len(list(mod.children())) == 0:
            hooks.append(mod.register_forward_hook(lambda m_, i, o, n=name: hook(m_, i, o, n)))
    was_training = module.training
    with torch.no_grad():
        p = next(module.parameters())
        module(torch.zeros(1, *input_shape, dtype=p.dtype, device=p.device))
    module.train(was_training)
    for h in hooks:
        h.remove()
    return cost


def round_floor(
    cost: ModelCost,
    m: int,
    K: int,
    B: int,
    sam: bool,
    gossip_nnz: int,
    flop_rate: float,
    bandwidth: float,
    bytes_per_value: int = 4,
) -> dict[str, float]:
    """The lower bound on one round's time, and the two counts it is made of.

    FLOPs: forward + backward ≈ 3 × forward per sample; SAM evaluates two
    gradients per step; gossip adds 2 FLOPs per nonzero of W per parameter.

    Bytes read or written per client and local step (s = bytes per value):

    * a gradient evaluation reads the parameters twice (forward, backward),
      writes the gradient (3·d·s), writes every activation in the forward and
      reads it in the backward, and writes and reads its gradient (4·A·s per
      sample), and reads the inputs;
    * the SGD update reads x and g and writes x (3·d·s);
    * SAM's perturbation reads g for the norm, then reads x and g and writes
      the perturbed point (4·d·s), and adds a second gradient evaluation;
    * gossip reads the nonzero-many source rows and writes m rows: (nnz + m)·d·s.
    """
    s, d = bytes_per_value, cost.d
    grad_evals = 2 if sam else 1
    samples = m * K * B
    flops = samples * 3 * cost.forward_flops * grad_evals + 2 * gossip_nnz * d
    grad_eval_bytes = 3 * d * s + B * (4 * cost.activations + cost.input_numel) * s
    step_bytes = grad_evals * grad_eval_bytes + 3 * d * s + (4 * d * s if sam else 0)
    nbytes = m * K * step_bytes + (gossip_nnz + m) * d * s
    t_compute, t_memory = flops / flop_rate, nbytes / bandwidth
    return {
        "flops": flops,
        "bytes": nbytes,
        "t_compute": t_compute,
        "t_memory": t_memory,
        "floor": max(t_compute, t_memory),
        "bound": "compute" if t_compute >= t_memory else "bandwidth",
    }


# ------------------------------------------------------------------- formatting
def fmt_s(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds >= 100:
        return f"{seconds:.0f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def fmt_ratio(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    return f"{x:.2f}×" if x < 100 else f"{x:.0f}×"


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
