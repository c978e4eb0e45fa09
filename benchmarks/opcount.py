"""Operator calls per round on the GPU's code path, measured on the CPU.

On a GPU every operator call is (at least) one kernel launch, so a round whose
number of calls grows with m is a per-client loop in disguise. The engine's
GPU path is: all m clients in one chunk (``client_chunk = m``; on CUDA the
default when they fit), the batched strategy (the hand-written ``mlp`` for the
2NN, grouped convolutions for the CNNs: what ``choose_strategy`` picks on
CUDA), and gossip as one CSR product (``gossip_mode="csr"``). This module
forces that path on the CPU and counts the top-level operator calls of one
round with ``torch.profiler`` (calls nested inside an operator, such as the
per-matrix loop of a CPU ``bmm``, are the kernel's business, not the engine's).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

from dfl_core.engine import Simulation
from dfl_core.models import build_model
from dfl_core.stacked import choose_strategy

from .common import markdown_table
from .round import engine_config, synthetic_data

__all__ = ["gpu_path_config", "operator_calls", "run", "table"]


def gpu_path_config(
    model: str,
    m: int,
    input_shape: tuple[int, ...],
    algorithm: str = "dfedsam",
    K: int = 2,
    B: int = 4,
    strategy: str | None = None,
):
    """The config of the engine's CUDA code path, on the CPU: one chunk, CUDA's strategy, CSR gossip."""
    strategy = strategy or choose_strategy(build_model(model, input_shape, 10), torch.device("cuda"))
    return engine_config(
        model,
        algorithm,
        m,
        K=K,
        B=B,
        device="cpu",
        client_chunk=m,
        forward_strategy=strategy,
        gossip_mode="csr",
        eval_every=10**6,
    )


def operator_calls(
    model: str,
    m: int,
    input_shape: tuple[int, ...] = (1, 28, 28),
    algorithm: str = "dfedsam",
    strategy: str | None = None,
) -> Counter:
    """Top-level operator calls of one round (the second; the first builds W's CSR form) on the GPU path
    (``strategy`` replaces CUDA's, e.g. ``"loop"`` to see a path that does grow with m)."""
    cfg = gpu_path_config(model, m, input_shape, algorithm, strategy=strategy)
    sim = Simulation(cfg, data=synthetic_data(input_shape, m, n_train=2 * cfg.batch_size, n_test=2))
    sim.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sim.step()
    return Counter(e.name for e in prof.events() if e.cpu_parent is None)


def run(cases=(("2nn", (1, 28, 28)), ("cnn-mnist", (1, 8, 8))), sizes=(10, 100, 1000)) -> list[dict]:
    rows = []
    for model, shape in cases:
        for m in sizes:
            calls = operator_calls(model, m, shape)
            rows.append(
                {
                    "model": model,
                    "input": "×".join(map(str, shape)),
                    "m": m,
                    "calls": sum(calls.values()),
                    "distinct": len(calls),
                }
            )
    return rows


def table(rows: list[dict]) -> str:
    return markdown_table(
        ["model", "input", "m", "operator calls per round", "distinct operators"],
        [[r["model"], r["input"], r["m"], r["calls"], r["distinct"]] for r in rows],
    )
