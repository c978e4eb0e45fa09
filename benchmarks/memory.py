"""Memory benchmark: peak resident memory of one engine round, one subprocess per configuration.

``tracemalloc`` does not see torch's allocations, so every configuration runs
in a fresh ``python -m benchmarks.memory --child …`` that builds the data and
the :class:`~dfl_core.engine.Simulation`, reads its resident set size (RSS),
runs one round and reports its peak RSS (setup included; the round is what
sets it).

The peak is ``VmHWM`` of ``/proc/self/status``, the high-water mark of the
child's own address space. ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is
reported next to it but not used: on Linux it survives ``fork`` + ``exec``, so
a child started by a large parent reports at least the parent's peak (seen
here: 1.4 GiB for a 0.65 GiB child).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .common import GIB, MIB, markdown_table

__all__ = ["MemorySettings", "run", "tables"]

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class MemorySettings:
    models: tuple[str, ...] = ("2nn", "cnn-mnist", "cnn-cifar")
    sizes: tuple[int, ...] = (10, 100, 1000)
    algos: tuple[str, ...] = ("SAM",)
    K: int = 5
    B: int = 32
    n_train: int = 64
    n_test: int = 20
    budget_gib: float = 8.0
    timeout_s: float = 1800


def _status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` in bytes (``VmRSS``: now, ``VmHWM``: peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _rss_bytes() -> int:
    return _status_bytes("VmRSS")


def child(model: str, algo: str, m: int, K: int, B: int, n_train: int, n_test: int) -> dict:
    import torch

    from dfl_core.engine import Simulation

    from .round import ALGOS, MODEL_SHAPES, engine_config, synthetic_data

    base = _rss_bytes()
    data = synthetic_data(MODEL_SHAPES[model], m, n_train, n_test)
    sim = Simulation(engine_config(model, ALGOS[algo], m, K, B), data=data)
    setup = _rss_bytes()
    peak_setup = _status_bytes("VmHWM")
    sim.step()
    peak = _status_bytes("VmHWM")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    data_bytes = sum(t.numel() * t.element_size() for t in (data.train.x, data.test.x))
    return {
        "model": model,
        "algo": algo,
        "m": m,
        "d": sim.model.d,
        "strategy": sim.model.strategy,
        "client_chunk": sim.client_chunk,
        "rss_import": base,
        "rss_setup": setup,
        "peak_setup": peak_setup,
        "peak": peak,
        "ru_maxrss": maxrss,
        "params": m * sim.model.d * sim.x.element_size(),
        "data": data_bytes,
        "threads": torch.get_num_threads(),
    }


def run(s: MemorySettings, log: Callable[[str], None] = print) -> tuple[list[dict], list[str]]:
    from dfl_core.models import build_model

    from .round import MODEL_SHAPES, engine_bytes_estimate

    out, skipped = [], []
    for model in s.models:
        d = sum(p.numel() for p in build_model(model, MODEL_SHAPES[model], 10).parameters())
        for m in s.sizes:
            data_bytes = m * (s.n_train + s.n_test) * 4 * math.prod(MODEL_SHAPES[model])
            need = engine_bytes_estimate(d, m, data_bytes)
            for algo in s.algos:
                if need > s.budget_gib * GIB:
                    skipped.append(
                        f"{model} {algo} m = {m}: estimated {need / GIB:.1f} GiB "
                        f"(4 m×d float32 tensors + data) > {s.budget_gib:g} GiB"
                    )
                    continue
                log(f"  memory: {model} {algo} m={m}")
                cmd = [
                    sys.executable,
                    "-m",
                    "benchmarks.memory",
                    "--child",
                    model,
                    algo,
                    str(m),
                    str(s.K),
                    str(s.B),
                    str(s.n_train),
                    str(s.n_test),
                ]
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=s.timeout_s)
                if proc.returncode != 0:
                    skipped.append(f"{model} {algo} m = {m}: child failed: {proc.stderr.strip().splitlines()[-1:]}")
                    continue
                rec = json.loads(proc.stdout.strip().splitlines()[-1])
                log(f"    peak {rec['peak'] / GIB:.2f} GiB (ru_maxrss {rec['ru_maxrss'] / GIB:.2f} GiB)")
                out.append(rec)
    return out, skipped


def tables(records: list[dict], skipped: list[str]) -> str:
    rows = []
    for r in records:
        rows.append(
            [
                r["model"],
                r["algo"],
                r["m"],
                f"{r['d']:,}",
                f"{r['strategy']}/{r['client_chunk']}",
                f"{r['params'] / MIB:,.0f} MiB",
                f"{r['data'] / MIB:,.0f} MiB",
                f"{r['rss_import'] / MIB:,.0f} MiB",
                f"{r['rss_setup'] / MIB:,.0f} MiB",
                f"**{r['peak'] / GIB:.2f} GiB**",
                f"{(r['peak'] - r['rss_setup']) / max(r['params'], 1):.2f}",
                f"{r['ru_maxrss'] / GIB:.2f} GiB",
            ]
        )
    text = markdown_table(
        [
            "model",
            "rule",
            "m",
            "d",
            "strategy/chunk",
            "one m×d tensor",
            "data",
            "RSS after import",
            "RSS after setup",
            "peak RSS (VmHWM)",
            "(peak − setup) / m×d tensor",
            "ru_maxrss",
        ],
        rows,
    )
    text += (
        "\n\nPeak = `VmHWM` of the child (one fresh process per row). `ru_maxrss` is shown for reference: "
        "on Linux it keeps the parent's high-water mark across fork + exec, so it overstates small children."
    )
    if skipped:
        text += "\n\nNot run: " + "; ".join(skipped) + "."
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    p.add_argument("--child", nargs=7, metavar=("MODEL", "ALGO", "M", "K", "B", "N_TRAIN", "N_TEST"), required=True)
    a = p.parse_args(argv)
    model, algo, m, K, B, n_train, n_test = a.child
    print(json.dumps(child(model, algo, int(m), int(K), int(B), int(n_train), int(n_test))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
