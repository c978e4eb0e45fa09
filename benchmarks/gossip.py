"""Gossip benchmark: one x ← W x on ``(m, d)`` float32 parameters.

Contenders, interleaved for each (d, m):

* ``engine <topology>``: :class:`dfl_core.gossip.MixingOperator` (on a CPU, row
  sums over W's nonzeros when W is sparse; a dense product otherwise), for
  ring, exponential and complete graphs;
* ``dense``: ``torch.mm`` of the dense (m×m) W and the (m×d) parameters, the
  O(m²·d) product a sparse graph must not cost;
* ``copy``: ``out.copy_(x)`` into a preallocated tensor, the memory floor
  (every parameter read once and written once);
* ``clone``: ``x.clone()``, the same copy into freshly allocated memory (what
  any out-of-place product pays for its output);
* ``CSR <topology>`` (sparse graphs only): torch's sparse CSR @ dense product,
  what the engine uses for sparse graphs on a GPU (on a CPU it uses the row
  sums, ``engine <topology> (rows)``).

A sparse product should cost O(nnz·d), nnz = m·(degree + 1): the table gives
the time per nonzero and parameter, which should stay flat across m and graphs.
Sizes whose x, output and the CSR product's temporary (measured: torch's CSR @ dense
allocates one more (m, d) tensor besides its output) exceed the memory budget are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from dfl_core.gossip import MixingOperator
from dfl_core.topology import make_topology

from .common import GIB, Contender, fmt_ratio, fmt_s, interleaved, markdown_table, median

__all__ = ["GossipSettings", "run", "tables"]


@dataclass
class GossipSettings:
    sizes: tuple[int, ...] = (100, 1000)
    dims: dict[str, int] = field(default_factory=lambda: {"2NN": 199_210, "VGG-11": 9_231_114})
    topologies: tuple[str, ...] = ("ring", "exponential", "complete")
    repeats: int = 3
    budget_gib: float = 8.0
    device: str = "cpu"


@dataclass
class GossipResult:
    dim_name: str
    d: int
    m: int
    times: dict[str, list[float]]
    nnz: dict[str, int]
    sparse: dict[str, str]  # the engine operator's mode per topology


def run(s: GossipSettings, log: Callable[[str], None] = print) -> tuple[list[GossipResult], list[str]]:
    results, skipped = [], []
    for dim_name, d in s.dims.items():
        for m in s.sizes:
            need = 3 * m * d * 4  # x, the output, and the CSR product's temporary of x's size
            if need > s.budget_gib * GIB:
                skipped.append(
                    f"{dim_name} (d = {d:,}) at m = {m}: x, the output and the CSR product's "
                    f"temporary need {need / GIB:.1f} GiB > {s.budget_gib:g} GiB"
                )
                continue
            log(f"  gossip: {dim_name} d={d:,} m={m}")
            x = torch.randn(m, d, device=s.device)
            buf: dict[str, torch.Tensor] = {}
            ops, nnz, sparse, csr = {}, {}, {}, {}
            for topo in s.topologies:
                W = make_topology(topo, m).matrix(0).W
                ops[topo] = MixingOperator(W, s.device, torch.float32)
                nnz[topo], sparse[topo] = int(np.count_nonzero(W)), ops[topo].mode
                if ops[topo].mode == "rows":
                    csr[topo] = MixingOperator(W, s.device, torch.float32, mode="csr")
            dense = torch.as_tensor(make_topology("ring", m).matrix(0).W, dtype=torch.float32, device=s.device)

            def copy_setup():
                buf["out"] = torch.empty_like(x)
                buf["out"].copy_(x)  # touch the pages

            def copy_fn():
                buf["out"].copy_(x)

            def clone_setup():
                buf.clear()

            contenders = [
                Contender("copy", copy_fn, setup=copy_setup),
                Contender("clone", lambda: x.clone(), setup=clone_setup),
                Contender("dense", lambda: torch.mm(dense, x), setup=clone_setup),
            ]
            contenders += [Contender(f"engine {t}", (lambda op=op: op(x)), setup=clone_setup) for t, op in ops.items()]
            contenders += [Contender(f"CSR {t}", (lambda op=op: op(x)), setup=clone_setup) for t, op in csr.items()]
            # what a Simulation does: gossip into an output buffer reused from round to round (OutputBuffers)
            contenders += [
                Contender(f"reused {t}", (lambda op=op: op(x, out=buf["out"])), setup=copy_setup)
                for t, op in ops.items()
                if op.mode != "csr"
            ]
            times = interleaved(contenders, s.repeats, warmup=True, device=s.device, log=log)
            buf.clear()
            results.append(GossipResult(dim_name, d, m, times, nnz, sparse))
            x = None  # free the tensor before the next size
    return results, skipped


def tables(results: list[GossipResult], skipped: list[str]) -> str:
    rows = []
    for r in results:
        copy = median(r.times["copy"])
        dense = median(r.times["dense"])
        rows.append(
            [
                r.dim_name,
                r.m,
                "dense (m×m)·(m×d)",
                f"{r.m * r.m:,}",
                fmt_s(dense),
                fmt_ratio(dense / copy),
                f"{dense / (r.m * r.m * r.d) * 1e9:.3f}",
            ]
        )
        for name, ts in r.times.items():
            if not name.startswith(("engine ", "CSR ", "reused ")):
                continue
            topo = name.rsplit(" ", 1)[1]
            t = median(ts)
            label = {
                "engine": f"engine {topo} ({r.sparse[topo]}), fresh output",
                "reused": f"engine {topo} ({r.sparse[topo]}), reused output (a Simulation's rounds)",
                "CSR": f"sparse CSR product, {topo}",
            }[name.split(" ", 1)[0]]
            rows.append(
                [
                    r.dim_name,
                    r.m,
                    label,
                    f"{r.nnz[topo]:,}",
                    fmt_s(t),
                    fmt_ratio(t / copy),
                    f"{t / (r.nnz[topo] * r.d) * 1e9:.3f}",
                ]
            )
        rows.append(
            [
                r.dim_name,
                r.m,
                "clone (alloc + copy)",
                "–",
                fmt_s(median(r.times["clone"])),
                fmt_ratio(median(r.times["clone"]) / copy),
                "–",
            ]
        )
        rows.append([r.dim_name, r.m, "**copy floor**", "–", fmt_s(copy), "1.00×", "–"])
    text = markdown_table(["d", "m", "product", "nonzeros of W", "time", "vs copy floor", "ns per nonzero·param"], rows)
    if skipped:
        text += "\n\nSkipped (memory): " + "; ".join(skipped) + "."
    return text
