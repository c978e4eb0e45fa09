"""Where the engine's round spends its time: ``torch.profiler`` over one ``Simulation.step()``.

Two views:

* the top operators by self CPU time for a model at one m;
* the number of operator calls per round at two values of m: on a GPU every
  call is (at least) one kernel launch, so this count should not grow with m.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from dfl_core.engine import Simulation

from .common import fmt_s, markdown_table
from .round import ALGOS, MODEL_SHAPES, engine_config, synthetic_data

__all__ = ["ProfileSettings", "run", "tables"]


@dataclass
class ProfileSettings:
    models: tuple[str, ...] = ("2nn", "cnn-mnist", "cnn-cifar")
    m: int = 100
    count_sizes: tuple[int, ...] = (10, 100)
    algo: str = "SAM"
    K: int = 5
    B: int = 32
    top: int = 12
    device: str = "cpu"


@dataclass
class ProfileResult:
    model: str
    m: int
    strategy: str
    client_chunk: int
    total_s: float
    top: list[tuple[str, int, float, float]] = field(default_factory=list)  # name, calls, self s, share
    op_calls: dict[int, int] = field(default_factory=dict)


def _profiled_step(model: str, m: int, s: ProfileSettings):
    data = synthetic_data(MODEL_SHAPES[model], m, 64, 20, device=s.device)
    sim = Simulation(engine_config(model, ALGOS[s.algo], m, s.K, s.B, device=s.device), data=data)
    sim.step()  # warm-up
    sim.restart()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(s.device).type == "cuda" else [])
    with profile(activities=acts) as prof:
        sim.step()
    return sim, prof


def run(s: ProfileSettings, log: Callable[[str], None] = print) -> list[ProfileResult]:
    out = []
    for model in s.models:
        log(f"  profile: {model} {s.algo} m={s.m}")
        sim, prof = _profiled_step(model, s.m, s)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events) / 1e6
        res = ProfileResult(model, s.m, sim.model.strategy, sim.client_chunk, total)
        for e in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: s.top]:
            res.top.append((e.key, e.count, e.self_cpu_time_total / 1e6, e.self_cpu_time_total / 1e6 / total))
        for m in s.count_sizes:
            if m == s.m:
                res.op_calls[m] = sum(e.count for e in events if e.key.startswith("aten::"))
                continue
            _, p = _profiled_step(model, m, s)
            res.op_calls[m] = sum(e.count for e in p.key_averages() if e.key.startswith("aten::"))
        out.append(res)
    return out


def tables(results: list[ProfileResult]) -> str:
    parts = []
    for r in results:
        rows = [[f"`{name}`", calls, fmt_s(t), f"{100 * share:.1f}%"] for name, calls, t, share in r.top]
        parts.append(
            f"**{r.model}**, m = {r.m}, strategy {r.strategy}, client_chunk {r.client_chunk}; "
            f"profiled self CPU time {fmt_s(r.total_s)} (profiler overhead included)\n\n"
            + markdown_table(["operator", "calls", "self CPU", "share"], rows)
        )
    sizes = sorted({m for r in results for m in r.op_calls})
    rows = [[r.model, r.strategy] + [f"{r.op_calls.get(m, 0):,}" for m in sizes] for r in results]
    parts.append(
        "aten operator calls per round (each is at least one kernel launch on a GPU):\n\n"
        + markdown_table(["model", "strategy"] + [f"m = {m}" for m in sizes], rows)
    )
    return "\n\n".join(parts)
