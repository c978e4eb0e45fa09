"""Round benchmark: one training round (K local steps, SGD or SAM, then one ring gossip step).

For each model and m, four contenders are timed interleaved in one process:

* ``engine``: ``Simulation.step()`` (ring, no evaluation), the engine's defaults;
* ``lean``: :func:`benchmarks.loops.lean_round`;
* ``reference``: :class:`benchmarks.loops.ReferenceLoop`, one round *and* its
  every-round evaluation, as the public code does;
* ``floor``: max(FLOPs / matmul rate, bytes / copy bandwidth), with both rates
  measured in the same repeat (:func:`benchmarks.common.round_floor`).

Also timed: ``one model``, a single model taking the same K steps on one big
batch of m·B samples, split into chunks of c·B samples at the best c.

The data are random tensors of the real input shapes (1×28×28 for the 2NN and
the MNIST CNN, 3×32×32 for the CIFAR CNN), ``n_train`` samples per client
(IID), ``n_test`` test samples per client; the global test set is the union of
the clients' test samples. At m larger than ``sample`` the loops run on the
first ``sample`` clients (a ring among them) and their time is multiplied by
m / sample: every part of a loop's round (training, mixing, per-client and
average-model evaluation on m·n_test test samples) grows linearly in m.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from dfl_core.config import Config
from dfl_core.data import Dataset, FederatedData, federate
from dfl_core.engine import Simulation
from dfl_core.models import build_model
from dfl_core.topology import make_topology

from .common import (
    GIB,
    Contender,
    fmt_ratio,
    fmt_s,
    interleaved,
    markdown_table,
    median,
    model_cost,
    round_floor,
    copy_bandwidth,
    matmul_rate,
)
from .loops import LocalSpec, ReferenceLoop, client_tensors, lean_round

__all__ = [
    "MODEL_SHAPES",
    "ALGOS",
    "RoundSettings",
    "synthetic_data",
    "engine_config",
    "run",
    "tables",
    "strategy_sweep",
    "strategy_table",
    "engine_bytes_estimate",
]

MODEL_SHAPES = {"2nn": (1, 28, 28), "cnn-mnist": (1, 28, 28), "cnn-cifar": (3, 32, 32)}
ALGOS = {"SGD": "dfedavg", "SAM": "dfedsam"}
NUM_CLASSES = 10


@dataclass
class RoundSettings:
    models: tuple[str, ...] = tuple(MODEL_SHAPES)
    sizes: tuple[int, ...] = (10, 100, 1000)
    algos: tuple[str, ...] = tuple(ALGOS)
    K: int = 5
    B: int = 32
    lr: float = 0.1
    n_train: int = 64  # samples per client (the DisPFL splits hold 500; only K·B are touched)
    n_test: int = 20  # test samples per client
    sample: int = 100  # clients the loops run at larger m
    repeats: int = 3
    cheap_repeats: int = 7  # repeats where a round is cheap (the 2NN up to m = 100): its ratios to the
    # loops moved by up to 0.3 between runs of 3 repeats on a shared 2-core VM
    budget_gib: float = 8.0  # skip the engine where its estimated memory exceeds this
    device: str = "cpu"
    chunks: tuple[int, ...] = (1, 10, 100)  # clients per chunk tried for "one model, one big batch"


def synthetic_data(
    input_shape: tuple[int, ...],
    m: int,
    n_train: int,
    n_test: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> FederatedData:
    """Random inputs and labels of a real shape, split IID: n_train / n_test samples per client."""
    g = torch.Generator().manual_seed(seed)
    ds = Dataset(
        name="synthetic",
        x_train=torch.randn(m * n_train, *input_shape, generator=g),
        y_train=torch.randint(0, NUM_CLASSES, (m * n_train,), generator=g),
        x_test=torch.randn(m * n_test, *input_shape, generator=g),
        y_test=torch.randint(0, NUM_CLASSES, (m * n_test,), generator=g),
        num_classes=NUM_CLASSES,
        input_shape=tuple(input_shape),
    )
    return federate(ds, m, scheme="iid", rng=np.random.default_rng(seed), device=device, dtype=dtype)


def engine_config(model: str, algorithm: str, m: int, K: int = 5, B: int = 32, lr: float = 0.1, **overrides) -> Config:
    """The engine's config for a round benchmark: ring, IID, the engine's default strategy and chunk."""
    dataset = "cifar10" if MODEL_SHAPES.get(model, (1,))[0] == 3 else "fashion-mnist"
    return Config(
        algorithm=algorithm,
        model=model,
        num_clients=m,
        dataset=dataset,
        partition="iid",
        local_steps=K,
        batch_size=B,
        lr=lr,
        **overrides,
    )


def engine_bytes_estimate(d: int, m: int, data_bytes: int = 0, bytes_per_value: int = 4) -> int:
    """Resident bytes of an engine round: x0, x, the local-training output and the gossip output."""
    return 4 * m * d * bytes_per_value + data_bytes


# ------------------------------------------------------------------ one model, one big batch
def _big_batch_step_fn(
    model: str, m: int, s: RoundSettings, sam: bool, c: int, x: torch.Tensor, y: torch.Tensor
) -> Callable[[], None]:
    """K steps of one model on m·B samples per step, c·B samples per forward pass."""
    net = build_model(model, MODEL_SHAPES[model], NUM_CLASSES).to(x.device)
    params = list(net.parameters())
    opt = torch.optim.SGD(params, lr=s.lr)
    n, total, chunk = len(y), m * s.B, c * s.B
    gen = torch.Generator().manual_seed(1)

    def grad_pass(xb, yb):
        for a in range(0, total, chunk):
            (F.cross_entropy(net(xb[a : a + chunk]), yb[a : a + chunk], reduction="sum") / total).backward()

    def fn():
        for _ in range(s.K):
            idx = torch.randint(0, n, (total,), generator=gen)
            xb, yb = x[idx], y[idx]
            opt.zero_grad()
            grad_pass(xb, yb)
            if sam:
                with torch.no_grad():
                    grads = [p.grad for p in params]
                    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
                    old = [p.detach().clone() for p in params]
                    torch._foreach_add_(params, torch._foreach_mul(grads, 0.01 / (norm + 1e-12)))
                opt.zero_grad()
                grad_pass(xb, yb)
                with torch.no_grad():
                    torch._foreach_copy_(params, old)
            opt.step()

    return fn


def _best_chunk(model: str, m: int, s: RoundSettings, x, y) -> tuple[int, dict[int, float]]:
    """Clients per chunk (c) with the lowest time for one SGD step (probe, untimed in the tables)."""
    probe = replace(s, K=1)
    per = {}
    for c in [c for c in s.chunks if c <= m] or [m]:
        fn = _big_batch_step_fn(model, m, probe, False, c, x, y)
        fn()  # warm-up
        best = math.inf
        for _ in range(2):  # best of 2: probes are short and noisy
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        per[c] = best
    return min(per, key=per.get), per


# ------------------------------------------------------------------------------ the run
@dataclass
class RoundResult:
    model: str
    algo: str
    m: int
    d: int
    times: dict[str, list[float]] = field(default_factory=dict)
    floor: dict[str, float] = field(default_factory=dict)
    rates: list[tuple[float, float]] = field(default_factory=list)
    ref_parts: dict[str, list[float]] = field(default_factory=dict)
    strategy: str = ""
    client_chunk: int = 0
    big_chunk: int = 0
    loops_scale: float = 1.0
    repeats: int = 0
    notes: list[str] = field(default_factory=list)

    def med(self, name: str) -> float:
        return median(self.times.get(name, []))


def run(s: RoundSettings, log: Callable[[str], None] = print) -> list[RoundResult]:
    results: list[RoundResult] = []
    sample_cache: dict[tuple[str, str], RoundResult] = {}
    for model in s.models:
        shape = MODEL_SHAPES[model]
        template = build_model(model, shape, NUM_CLASSES).to(s.device)
        cost = model_cost(template, shape)
        for m in s.sizes:
            data_bytes = m * (s.n_train + s.n_test) * math.prod(shape) * 4
            need = engine_bytes_estimate(cost.d, m, data_bytes)
            engine_fits = need <= s.budget_gib * GIB
            n_loop = min(m, s.sample)
            scale = m / n_loop
            reuse = not engine_fits and all((model, a) in sample_cache for a in s.algos)
            # data only where something runs on it (the loops reuse their 100-client timings otherwise)
            data = (
                synthetic_data(shape, m if engine_fits else n_loop, s.n_train, s.n_test, device=s.device)
                if not reuse
                else None
            )
            tensors = client_tensors(data, range(n_loop)) if data is not None else None
            W_loop = make_topology("ring", n_loop).matrix(0).W
            nnz = 3 * m if m > 2 else m * m  # ring: self + 2 neighbours
            # one model, one big batch: the best chunk, probed once per (model, m)
            xs, ys = (data.train.x, data.train.y) if data is not None else (None, None)
            best_c, probes = _best_chunk(model, m, s, xs, ys) if engine_fits else (0, {})
            for algo in s.algos:
                sam = algo == "SAM"
                res = RoundResult(model, algo, m, cost.d, loops_scale=scale, big_chunk=best_c)
                log(f"  round: {model} {algo} m={m}")
                spec = LocalSpec(lr=s.lr, K=s.K, B=s.B, rho=0.01 if sam else 0.0)
                contenders: list[Contender] = []
                if engine_fits:
                    sim = Simulation(engine_config(model, ALGOS[algo], m, s.K, s.B, s.lr, device=s.device), data=data)
                    res.strategy, res.client_chunk = sim.model.strategy, sim.client_chunk

                    def reset(sim=sim):
                        sim.restart()

                    contenders.append(Contender("engine", sim.step, setup=reset))
                else:
                    res.notes.append(
                        f"engine not run: needs ≈ {need / GIB:.1f} GiB (4 m×d tensors + data) "
                        f"> budget {s.budget_gib:g} GiB"
                    )
                # loops: measured here when the engine runs (interleaved with it), otherwise reused
                key = (model, algo)
                loops_here = engine_fits or key not in sample_cache
                if loops_here:
                    states0 = [{k: v.clone() for k, v in template.state_dict().items()} for _ in range(n_loop)]
                    gen = torch.Generator().manual_seed(0)
                    contenders.append(
                        Contender(
                            "lean", lambda: lean_round(template, states0, W_loop, spec, tensors, gen=gen), scale=scale
                        )
                    )
                    ref = ReferenceLoop(template, tensors, W_loop, spec)

                    def ref_setup(ref=ref, states0=states0):
                        ref.states, ref.t = [{k: v.clone() for k, v in s_.items()} for s_ in states0], 0

                    def ref_round(ref=ref, res=res):
                        t0 = time.perf_counter()
                        ref.train_round()
                        t1 = time.perf_counter()
                        ref.evaluate()
                        t2 = time.perf_counter()
                        res.ref_parts.setdefault("train+mix", []).append((t1 - t0) * scale)
                        res.ref_parts.setdefault("evaluate", []).append((t2 - t1) * scale)

                    contenders.append(Contender("reference", ref_round, setup=ref_setup, scale=scale))
                if best_c:
                    contenders.append(Contender("one model", _big_batch_step_fn(model, m, s, sam, best_c, xs, ys)))

                def floor_fn(res=res, sam=sam, m=m, nnz=nnz):
                    rate, bw = matmul_rate(device=s.device), copy_bandwidth(device=s.device)
                    res.rates.append((rate, bw))
                    return round_floor(cost, m, s.K, s.B, sam, nnz, rate, bw)["floor"]

                contenders.append(Contender("floor", floor_fn, measures=True))
                cheap = cost.forward_flops * m * s.K * s.B < 2e10
                repeats = max(s.repeats, s.cheap_repeats) if cheap else s.repeats
                res.repeats = repeats
                res.times = interleaved(contenders, repeats, warmup=cheap, device=s.device, log=lambda line: log(line))
                if cheap:  # drop the warm-up call's split
                    res.ref_parts = {k: v[1:] for k, v in res.ref_parts.items()}
                # The floor is a lower bound: use the best rates seen in any repeat (load only lowers them).
                res.floor = round_floor(
                    cost, m, s.K, s.B, sam, nnz, max(r for r, _ in res.rates), max(b for _, b in res.rates)
                )
                res.times["floor"] = [res.floor["floor"]]
                if not loops_here:
                    cached = sample_cache[key]
                    for name in ("lean", "reference"):
                        res.times[name] = [t * scale / cached.loops_scale for t in cached.times[name]]
                    res.ref_parts = {
                        k: [t * scale / cached.loops_scale for t in v] for k, v in cached.ref_parts.items()
                    }
                    res.notes.append(f"loops: the {n_loop}-client timings of m = {cached.m}, × {scale:g}")
                elif scale > 1:
                    res.notes.append(f"loops: {n_loop} of {m} clients timed, × {scale:g}")
                if loops_here and n_loop == s.sample:
                    sample_cache.setdefault(key, res)
                if probes:
                    res.notes.append(
                        "one model: c·B samples per pass, c = "
                        + ", ".join(f"{c}: {fmt_s(t)}/step" for c, t in probes.items())
                    )
                results.append(res)
                if engine_fits:
                    del sim
    return results


def _ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def tables(results: list[RoundResult]) -> str:
    """Medians and ratios, one row per (model, algorithm, m)."""
    rows = []
    for r in results:
        e, lean, ref, big, fl = (r.med(n) for n in ("engine", "lean", "reference", "one model", "floor"))
        rows.append(
            [
                r.model,
                r.algo,
                r.m,
                f"{r.d:,}",
                f"{r.strategy or '–'}/{r.client_chunk or '–'}",
                r.repeats,
                fmt_s(e),
                fmt_s(lean),
                fmt_s(ref),
                fmt_s(big) + (f" (c={r.big_chunk})" if r.big_chunk else ""),
                fmt_s(fl) + (f" ({r.floor.get('bound', '')})" if r.floor else ""),
                fmt_ratio(_ratio(e, lean)),
                fmt_ratio(_ratio(e, ref)),
                fmt_ratio(_ratio(e, fl)),
                fmt_ratio(_ratio(e, big)),
            ]
        )
    head = [
        "model",
        "rule",
        "m",
        "d",
        "strategy/chunk",
        "repeats",
        "engine",
        "lean loop",
        "reference loop",
        "one model, big batch",
        "floor",
        "engine/lean",
        "engine/ref",
        "engine/floor",
        "engine/one model",
    ]
    out = [markdown_table(head, rows)]
    # floor details and the reference loop's split
    rows = []
    for r in results:
        if not r.floor:
            continue
        rate, bw = max(a for a, _ in r.rates), max(b for _, b in r.rates)
        parts = {k: median(v) for k, v in r.ref_parts.items()}
        rows.append(
            [
                r.model,
                r.algo,
                r.m,
                f"{r.floor['flops'] / 1e9:.1f}",
                f"{r.floor['bytes'] / 1e9:.2f}",
                f"{rate / 1e9:.0f}",
                f"{bw / 1e9:.1f}",
                fmt_s(r.floor["t_compute"]),
                fmt_s(r.floor["t_memory"]),
                " / ".join(f"{fmt_s(v)}" for v in parts.values()) or "–",
            ]
        )
    out.append(
        "Floor inputs (the best matmul rate and copy bandwidth measured in the repeats: the floor is a lower "
        "bound, and load only lowers the rates) and the reference loop's split (training + mixing / "
        "evaluation):\n\n"
        + markdown_table(
            [
                "model",
                "rule",
                "m",
                "GFLOP",
                "GB moved",
                "matmul GFLOP/s",
                "copy GB/s",
                "compute time",
                "memory time",
                "reference: train+mix / evaluate",
            ],
            rows,
        )
    )
    notes = [f"- {r.model} {r.algo} m={r.m}: {n}" for r in results for n in r.notes]
    if notes:
        out.append("Notes:\n\n" + "\n".join(notes))
    return "\n\n".join(out)


# --------------------------------------------------------------- strategy sweep
def strategy_sweep(s: RoundSettings, m: int = 100, algo: str = "SAM", log: Callable[[str], None] = print) -> list[dict]:
    """The engine's round under each forward strategy and a few client chunks (to pick the defaults).

    One :class:`Simulation` is alive at a time: each contender builds its own
    in its (untimed) setup, replacing the previous one.
    """
    out = []
    for model in s.models:
        shape = MODEL_SHAPES[model]
        data = synthetic_data(shape, m, s.n_train, s.n_test, device=s.device)
        auto = Simulation(engine_config(model, ALGOS[algo], m, s.K, s.B, s.lr, device=s.device), data=data)
        default = f"{auto.model.strategy}/{auto.client_chunk}"
        del auto
        holder: dict[str, Simulation] = {}
        contenders, seen = [], set()
        for strategy in ("mlp", "batched", "vmap", "loop"):
            # None: the engine's default chunk; all m at once; for the loop, a 10-client chunk
            for chunk in dict.fromkeys((None, 10) if strategy == "loop" else (None, m)):
                cfg = engine_config(
                    model,
                    ALGOS[algo],
                    m,
                    s.K,
                    s.B,
                    s.lr,
                    device=s.device,
                    forward_strategy=strategy,
                    client_chunk=chunk,
                )
                try:
                    probe = Simulation(cfg, data=data)
                except ValueError as err:  # e.g. 'batched' on a non-Sequential model
                    log(f"    {model} {strategy}: {err}")
                    break
                name = f"{strategy}/{probe.client_chunk}"
                del probe
                if name in seen:
                    continue
                seen.add(name)

                def setup(cfg=cfg):
                    holder.clear()
                    holder["sim"] = Simulation(cfg, data=data)

                contenders.append(Contender(name, lambda: holder["sim"].step(), setup=setup))
        log(f"  strategies: {model} {algo} m={m}: {', '.join(c.name for c in contenders)}")
        # one pass over all; further repeats only for those within 2x of the best (grouped convolutions on a
        # CPU can take minutes and are not close)
        times = interleaved(contenders, 1, warmup=False, device=s.device, log=log)
        if s.repeats > 1:
            best_t = min(median(v) for v in times.values())
            close = [c for c in contenders if median(times[c.name]) <= 2 * best_t]
            for name, ts in interleaved(close, s.repeats - 1, warmup=False, device=s.device, log=log).items():
                times[name] += ts
        holder.clear()
        best = min(times, key=lambda n: median(times[n]))
        out.append({"model": model, "algo": algo, "m": m, "times": times, "best": best, "default": default})
    return out


def strategy_table(sweep: list[dict]) -> str:
    rows = []
    for r in sweep:
        best = median(r["times"][r["best"]])
        for name, ts in sorted(r["times"].items(), key=lambda kv: median(kv[1])):
            rows.append(
                [
                    r["model"],
                    r["algo"],
                    r["m"],
                    name,
                    fmt_s(median(ts)),
                    len(ts),
                    fmt_ratio(median(ts) / best),
                    "**default**" if name == r["default"] else "",
                ]
            )
    return (
        markdown_table(
            ["model", "rule", "m", "strategy/client_chunk", "round (median)", "runs", "vs best", "engine default"], rows
        )
        + "\n\nEvery candidate runs once; those within 2× of the best run again (interleaved)."
    )
