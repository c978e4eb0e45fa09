"""``python -m benchmarks``: run the benchmarks, print the tables, write RESULTS.md.

python -m benchmarks                         # everything (tens of minutes on 2 cores)
python -m benchmarks --quick --out /tmp/r.md # the CI smoke run (m = 10, one repeat, tiny sizes)
python -m benchmarks --only round,gossip --repeats 5
python -m benchmarks --gpu --out gpu.json    # issue 32's GPU round (benchmarks/gpu.py; ~5 min on one GPU)
python -m benchmarks --gpu --quick           # its CPU smoke run (tiny sizes)
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # quiet torch.profiler's device-probing messages
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

from dfl_core.config import Config
from dfl_core.data import DataError, load_dataset

from . import e2e as e2e_bench
from . import gossip as gossip_bench
from . import gpu as gpu_bench
from . import memory as memory_bench
from . import opcount as opcount_bench
from . import profiling
from . import report
from . import round as round_bench
from .common import machine_info

BENCHMARKS = ("round", "opcount", "strategy", "profile", "e2e", "gossip", "memory")
DEFAULT_ONLY = BENCHMARKS
#: What was tried to make the round faster, and what each gave (measurements made while changing the engine;
#: the tables below measure the result).
TRIED = Path(__file__).resolve().parent / "TRIED.md"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
GPU_RESULTS = Path(__file__).resolve().parent / "GPU_RESULTS.json"


def _fashion_available() -> bool:
    try:
        load_dataset("fashion-mnist", train_size=100, test_size=100)
        return True
    except (DataError, OSError, RuntimeError):
        return False


def settings(quick: bool, repeats: int | None, budget: float, device: str):
    """The settings of every benchmark: the full run, or the tiny smoke run."""
    r = repeats or (1 if quick else 3)
    if not quick:
        return dict(
            round=round_bench.RoundSettings(repeats=r, budget_gib=budget, device=device),
            strategy=round_bench.RoundSettings(repeats=2 if repeats is None else r, device=device),
            profile=profiling.ProfileSettings(device=device),
            e2e=e2e_bench.E2ESettings(repeats=r),
            # gossip calls are cheap and their ratios to the copy floor moved between runs of 3 repeats
            gossip=gossip_bench.GossipSettings(
                repeats=max(r, 5) if repeats is None else r, budget_gib=budget, device=device
            ),
            memory=memory_bench.MemorySettings(budget_gib=budget),
        )
    fashion = _fashion_available()
    mgs = Config(
        algorithm="dfedsam-mgs",
        dataset="fashion-mnist" if fashion else "digits",
        model="2nn",
        num_clients=10,
        rounds=2,
        eval_every=1,
        train_size=1000 if fashion else None,
        test_size=200 if fashion else None,
    )
    return dict(
        round=round_bench.RoundSettings(
            sizes=(10,),
            K=2,
            B=8,
            n_train=16,
            n_test=4,
            repeats=r,
            cheap_repeats=r,
            chunks=(1, 10),
            budget_gib=budget,
            device=device,
        ),
        strategy=round_bench.RoundSettings(models=("2nn",), K=2, B=8, n_train=16, n_test=4, repeats=1, device=device),
        profile=profiling.ProfileSettings(models=("2nn",), m=10, count_sizes=(5, 10), K=2, B=8, device=device),
        e2e=e2e_bench.E2ESettings(
            cli_base=Config(rounds=2),
            cli_seeds=(0,),
            mgs=mgs,
            ref_rounds=1,
            ref_evals=1,
            repeats=r,
            label_cli="default CLI comparison, 2 rounds, seed 0 (quick)",
            label_mgs=f"DFedSAM-MGS, m = 10, 2 rounds, {mgs.dataset} subset (quick)",
        ),
        gossip=gossip_bench.GossipSettings(
            sizes=(10,), dims={"2NN": 199_210}, repeats=r, budget_gib=budget, device=device
        ),
        memory=memory_bench.MemorySettings(
            models=("2nn",), sizes=(10,), K=2, B=8, n_train=16, n_test=4, budget_gib=budget
        ),
    )


def _settings_text(st: dict, only: tuple[str, ...]) -> str:
    s = st["round"]
    return (
        f"Round benchmark sizes: models {', '.join(s.models)}; m ∈ {{{', '.join(map(str, s.sizes))}}}; "
        f"K = {s.K}, B = {s.B}; {s.n_train} train / {s.n_test} test samples per client; loops sampled at "
        f"{s.sample} clients above that; {s.repeats} repeat(s); memory budget {s.budget_gib:g} GiB. "
        f"Benchmarks run: {', '.join(only)}."
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="CI smoke run: m = 10, one repeat, tiny sizes")
    p.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join(BENCHMARKS)} (default: all)")
    p.add_argument("--repeats", type=int, default=None, help="repeats per measurement (default 3; quick 1)")
    p.add_argument(
        "--out",
        default=None,
        help="where to write the results (default benchmarks/RESULTS.md; with --quick a temp file)",
    )
    p.add_argument(
        "--budget-gib",
        type=float,
        default=8.0,
        help="skip configurations whose estimated memory exceeds this (default 8)",
    )
    p.add_argument(
        "--device", default="auto", choices=("auto", "cpu", "cuda"), help="'auto' (cuda if available), 'cpu' or 'cuda'"
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    g = p.add_argument_group("--gpu: one DFedSAM-MGS round of the CIFAR models on one GPU (benchmarks/gpu.py)")
    g.add_argument(
        "--gpu",
        action="store_true",
        help="run the GPU benchmark instead (with --quick: its CPU smoke run); --out FILE is its JSON "
        "(the markdown table goes beside it, FILE with suffix .md; default benchmarks/GPU_RESULTS.json)",
    )
    g.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(gpu_bench.MODELS)}")
    g.add_argument("--clients", type=int, default=None, help="m (default 100; quick 2)")
    g.add_argument(
        "--precision",
        default="float32",
        choices=gpu_bench.PRECISIONS,
        help="local training's precision (Config.precision)",
    )
    g.add_argument("--channels-last", action="store_true", help="channels-last convolutions (Config.channels_last)")
    g.add_argument(
        "--strategy",
        default="auto",
        choices=gpu_bench.STRATEGY_TOKENS,
        help="the engine's forward_strategy (default: its own choice)",
    )
    g.add_argument(
        "--compare-precisions",
        action="store_true",
        help="run float32 and bfloat16 (or --precision, if not float32) in the same process",
    )
    g.add_argument(
        "--variants",
        default=None,
        help="comma-separated variants, each '+'-joined tokens: a precision, 'cl', a strategy, "
        "'cudnn-benchmark' (e.g. float32,bfloat16,bfloat16+cl+batched); overrides the three above",
    )
    g.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="skip jobs predicted to end later than this many seconds after the start (default 270)",
    )
    g.add_argument(
        "--loop-clients",
        type=int,
        default=None,
        help="clients the per-client loop runs, its time scaled to m (default 10)",
    )
    args = p.parse_args(argv)
    for flag in ("repeats", "threads", "clients"):
        if getattr(args, flag, None) is not None and getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.gpu:
        return _gpu_main(p, args, argv)
    only = tuple(b.strip() for b in (args.only or ",".join(DEFAULT_ONLY)).split(",") if b.strip())
    bad = [b for b in only if b not in BENCHMARKS]
    if bad:
        p.error(f"unknown benchmark(s) {bad}; allowed: {', '.join(BENCHMARKS)}")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    out = _out_path(p, args, RESULTS, "--quick")

    def log(line: str) -> None:
        print(line, flush=True)

    st = settings(args.quick, args.repeats, args.budget_gib, device)
    machine = machine_info(device)
    command = "python -m benchmarks" + (
        ""
        if not (argv if argv is not None else sys.argv[1:])
        else " " + shlex.join(argv if argv is not None else sys.argv[1:])
    )
    log(f"benchmarks: {', '.join(only)} on {machine['CPU']} ({machine['torch threads']} threads) -> {out}")
    t0 = time.perf_counter()
    sections: dict[str, str] = {}
    rounds = e2e = gossip = memory = profiles = opcounts = None
    if TRIED.exists():
        sections["tried"] = TRIED.read_text().strip()
    if "round" in only:
        log("round benchmark")
        rounds = round_bench.run(st["round"], log)
        sections["round"] = (
            f"One round, medians of {st['round'].repeats} interleaved repeat(s), "
            f"{max(st['round'].repeats, st['round'].cheap_repeats)} where a round is cheap (the "
            "`repeats` column). Ratios < 1 mean the engine is faster.\n\n" + round_bench.tables(rounds)
        )
        print(sections["round"], flush=True)
    if "opcount" in only:
        log("operator counts on the CUDA code path")
        opcounts = opcount_bench.run(sizes=(10, 20) if args.quick else (10, 100, 1000))
        sections["opcount"] = (
            "Top-level operator calls of one SAM round (K = 2, B = 4) on the code path CUDA takes "
            "(all clients in one chunk, CUDA's strategy, CSR gossip), forced and counted on this CPU "
            "with `torch.profiler` (`benchmarks/opcount.py`). Equal counts at every m: no per-client "
            "kernel launches.\n\n" + opcount_bench.table(opcounts)
        )
        print(sections["opcount"], flush=True)
    if "strategy" in only:
        log("engine strategy sweep")
        sweep = round_bench.strategy_sweep(st["strategy"], m=10 if args.quick else 100, log=log)
        sections["strategy"] = (
            "The engine's SAM round at m = "
            f"{10 if args.quick else 100} under each `forward_strategy` and a few "
            "`client_chunk` values (what its defaults should pick); medians of "
            f"{st['strategy'].repeats} interleaved repeat(s).\n\n" + round_bench.strategy_table(sweep)
        )
        print(sections["strategy"], flush=True)
    if "profile" in only:
        log("engine profile")
        profiles = profiling.run(st["profile"], log)
        sections["profile"] = profiling.tables(profiles)
        print(sections["profile"], flush=True)
    if "e2e" in only:
        log("end-to-end benchmark")
        e2e = e2e_bench.run(st["e2e"], log)
        sections["e2e"] = e2e_bench.tables(e2e, st["e2e"])
        print(sections["e2e"], flush=True)
    if "gossip" in only:
        log("gossip benchmark")
        gossip, skipped = gossip_bench.run(st["gossip"], log)
        sections["gossip"] = gossip_bench.tables(gossip, skipped)
        print(sections["gossip"], flush=True)
    if "memory" in only:
        log("memory benchmark")
        memory, skipped = memory_bench.run(st["memory"], log)
        sections["memory"] = memory_bench.tables(memory, skipped)
        print(sections["memory"], flush=True)
    wall = time.perf_counter() - t0
    targets = report.evaluate_targets(rounds, e2e, gossip, memory, profiles, opcounts)
    try:
        load_end = os.getloadavg()
    except OSError:
        load_end = None
    text = report.render(
        machine=machine,
        command=command,
        wall_s=wall,
        load_end=load_end,
        quick=args.quick,
        targets=targets,
        sections=sections,
        settings_text=_settings_text(st, only),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(report.targets_table(targets))
    log(f"\nwrote {out} ({wall:.1f} s)")
    return 0


def _out_path(p: argparse.ArgumentParser, args: argparse.Namespace, committed: Path, quick_flags: str) -> Path:
    """``--out``; else a temporary file for a smoke run, else the committed results file (which a smoke run
    never overwrites)."""
    if args.out:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.mkdtemp(prefix="dfl-bench-")) / committed.name
    else:
        out = committed
    if args.quick and out.resolve() == committed:
        p.error(f"{quick_flags} does not overwrite benchmarks/{committed.name}; give another --out")
    return out


def _gpu_main(p: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--gpu``: the checks of the command line, then :func:`benchmarks.gpu.main`."""
    if args.device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cpu" and not args.quick:
            p.error(
                "--gpu: no CUDA device here; --gpu --quick is the CPU smoke run (or --device cpu for the "
                "full sizes on the CPU, hours)"
            )
    else:
        device = args.device
    if args.variants:
        try:
            variants = tuple(gpu_bench.parse_variant(v) for v in args.variants.split(",") if v.strip())
        except ValueError as err:
            p.error(str(err))
    else:
        precisions = [args.precision]
        if args.compare_precisions:
            precisions = ["float32", "bfloat16" if args.precision == "float32" else args.precision]
        variants = tuple(gpu_bench.Variant(pr, args.channels_last, args.strategy) for pr in precisions)
    models = tuple(m.strip() for m in args.models.split(",") if m.strip()) if args.models else None
    try:
        st = gpu_bench.settings(
            args.quick,
            device,
            models=models,
            clients=args.clients,
            variants=variants,
            repeats=args.repeats,
            budget_s=args.budget_s,
            loop_clients=args.loop_clients,
        )
    except ValueError as err:
        p.error(str(err))
    out = _out_path(p, args, GPU_RESULTS, "--gpu --quick")
    raw = argv if argv is not None else sys.argv[1:]
    return gpu_bench.main(st, out, "python -m benchmarks " + shlex.join(raw), log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
