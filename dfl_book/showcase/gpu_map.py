r"""The DFedSAM regime map on CIFAR-10 with a CNN, sized for one GPU call: ``python -m dfl_book.showcase.gpu_map``.

The book's regime maps (:mod:`.regime`) run Fashion-MNIST with a 2NN, whose DFedAvg ends 4.5 points above its test
accuracy in train accuracy; the DFedSAM paper's CIFAR-10 runs have a 26-point gap. This map asks whether SAM's gain
grows with the gap, at the paper's local training on the paper's kind of data and model:

* CIFAR-10 (the JPEG copy ``cifar10-jpeg.tar.gz``, read by the ``cifar10`` entry from its ImageFolder layout: not
  bit-exact, JPEG quality 75; the results file names the archive and its sha256), ``cnn-cifar``, m = 20 clients of
  500 images (a stratified 10,000 of the 50,000), Dirichlet α = 0.3, ring, tested on the full 10,000-image test
  split;
* the paper's local training (App. B.3): batch B = 128, weight decay 5e-4, lr 0.1·0.998^t, E ∈ {1, 5} local epochs
  (K = E·⌈500/128⌉ = 4E steps);
* DFedAvg against DFedSAM at ρ ∈ {0.01, 0.05}, and the **compute-matched** arm ``DFedAvg, E = 10``: DFedSAM at
  E = 5 takes K = 20 steps a round, each with two forward-backward passes (the gradient that sets the perturbation,
  then the gradient at the perturbed point), 40 in all; DFedAvg at E = 10 takes K = 40 steps of one pass each.
  Matched means: the same number of mini-batch forward-backward passes per client per round (40), the same rounds,
  gossip and learning-rate schedule. Not matched: DFedAvg draws 40 mini-batches (10 epochs) where DFedSAM draws 20,
  each used twice. Whatever DFedSAM gains over it is not bought with more gradient evaluations.
* 5 seeds, always (a verdict needs them, :data:`dfl_book.stats.MIN_SEEDS`).

**Sized to the budget.** One call on the device machine may last 10 minutes. The script first unpacks the archive
and decodes the images once, then measures one round and one evaluation of every arm (seed 0, the second of two
rounds, after a warm-up round), and then picks the number of rounds T (at most ``--max-rounds``) so that all arms
× 5 seeds fit the budget (``--budget-min``, default 9 minutes for everything, the script's start included), with a
safety margin. If fewer than ``--min-rounds`` would fit, it drops arms, in this order: DFedSAM ρ = 0.05 at E = 1,
DFedSAM ρ = 0.01 at E = 1, DFedAvg at E = 1, DFedSAM ρ = 0.05 at E = 5; the core arms (DFedAvg, DFedSAM ρ = 0.01
and the compute-matched DFedAvg at E = 5) are kept, and seeds are never cut. The results file records the
measurements, the plan (T, the arms dropped, the predicted time) and whether DFedAvg's E = 5 test curve ended flat
(:data:`.regime.FLAT_SLOPE`).

**Partial results, resumable.** Runs are made seed by seed (every arm of seed 0, then of seed 1, …), and the results
file is rewritten after every finished run, so a call cut short leaves complete seeds of every arm; a seed the
measurements say would end after ``--stop-min`` (default 9.5 minutes) is not started. ``--resume FILE`` starts from
an earlier call's results file: its finished runs are kept when their configs match (give the same ``--rounds`` as
that file's plan, which the script prints, and the same ``--workdir``, whose path is in each run's ``data_dir``).

**Speed options** (recorded in every run's config and in the provenance): ``--precision bfloat16`` (default on a GPU:
autocast of local training's forward and backward passes; parameters, SAM's norm and gossip stay float32) and cuDNN's
autotuner; ``--compile`` adds torch.compile.

How to run it on a machine with one GPU and no network: copy the CIFAR-10 images as an archive of the
ImageFolder layout (``train/<class>/*.jpg``, ``test/<class>/*.jpg``, e.g. a JPEG copy ``cifar10-jpeg.tar.gz``)
into a folder git ignores, take that folder along with the working tree, and run from the repository's root::

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 -m dfl_book.showcase.gpu_map \
        --archive gpu_data/cifar10-jpeg.tar.gz --out OUT 2>&1 | tee OUT/log.txt

then copy ``OUT/dfedsam-cifar-regime.json`` to ``dfl_book/showcase/results/gpu/`` and commit it.

``--plan-only`` stops after the measurements and prints the plan. On a CPU, ``--device cpu`` with a tiny
``--train-size`` runs the same code (the test suite's smoke run, tests/test_gpu_map.py).

The map is not in :data:`.experiments.EXPERIMENTS` (whose showcase runs are Fashion-MNIST on a CPU): it is
:data:`CIFAR_MAP`, its results file ``dfl_book/showcase/results/gpu/dfedsam-cifar-regime.json``, read with
``load(CIFAR_MAP.name, RESULTS_DIR / "gpu")`` and :func:`.regime.cells`.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Sequence

from dfl_core.checkpoint import write_atomic

from .experiments import PAPER_LOCAL_TRAINING
from .regime import FLAT_SLOPE, RegimeMap, curve_slope
from .runner import RESULTS_DIR, Experiment, results_path
from .runner import run as run_experiment

__all__ = ["CIFAR_MAP", "MATCHED_ARM", "CORE_ARMS", "DROP_ORDER", "GPU_RESULTS_DIR", "plan_rounds", "main"]

#: Where the committed results of the GPU map live (beside, not among, the CPU showcase's files).
GPU_RESULTS_DIR = RESULTS_DIR / "gpu"

#: The compute-matched arm: DFedAvg at twice DFedSAM's local steps (see the module docstring).
MATCHED_ARM = "DFedAvg, E = 10 (compute-matched to DFedSAM at E = 5)"

_CIFAR_BASE = {k: v for k, v in PAPER_LOCAL_TRAINING.items() if k != "local_epochs"} | dict(
    dataset="cifar10",
    model="cnn-cifar",
    num_clients=20,
    train_size=10_000,
    test_size=None,
    partition="dirichlet",
    alpha=0.3,
    rounds=100,
    eval_every=5,
)

CIFAR_MAP = RegimeMap(
    "dfedsam-cifar-regime",
    "08",
    "Does DFedSAM's gain over DFedAvg grow with the generalization gap? CIFAR-10 (JPEG copy) with a CNN, ring, "
    "m = 20 clients of 500 images, Dirichlet 0.3, the paper's batch 128, weight decay 5e-4 and lr 0.1·0.998^t, "
    "E = 1 and 5, ρ = 0.01 and 0.05, and DFedAvg at E = 10, which matches DFedSAM's 40 forward-backward passes a "
    "round at E = 5; rounds as many as one GPU call allows.",
    "DFedAvg",
    "DFedSAM",
    dict(algorithm="dfedavg", topology="ring"),
    dict(algorithm="dfedsam", topology="ring"),
    (1, 5),
    (0.01, 0.05),
    base=_CIFAR_BASE,
    extra_arms={MATCHED_ARM: dict(algorithm="dfedavg", topology="ring", local_epochs=10)},
)

#: Kept whatever the budget: the E = 5 comparison the chapter needs.
CORE_ARMS = (CIFAR_MAP.baseline_arm(5), CIFAR_MAP.treated_arm(5, 0.01), MATCHED_ARM)
#: Dropped first to last when T would fall below --min-rounds.
DROP_ORDER = (
    CIFAR_MAP.treated_arm(1, 0.05),
    CIFAR_MAP.treated_arm(1, 0.01),
    CIFAR_MAP.baseline_arm(1),
    CIFAR_MAP.treated_arm(5, 0.05),
)


def _ordered_arms() -> dict[str, dict[str, Any]]:
    """The map's arms, the core ones first (so that they run first within each seed)."""
    arms = CIFAR_MAP.arms()
    return {a: arms[a] for a in CORE_ARMS} | {a: c for a, c in arms.items() if a not in CORE_ARMS}


# --------------------------------------------------------------------------------------- the data
def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack(archive: Path, workdir: Path) -> tuple[Path, str]:
    """The archive unpacked under ``workdir`` (once per sha256) and the folder in it that holds ``train/`` and
    ``test/``; returns (that folder, the archive's sha256)."""
    if not archive.is_file():
        raise SystemExit(
            f"error: --archive {str(archive)!r} is not a file; give the CIFAR-10 JPEG archive (cifar10-jpeg.tar.gz)"
        )
    sha = sha256_of(archive)
    dest = workdir / f"data-{sha[:16]}"
    if not (dest / ".unpacked").exists():
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")  # no absolute paths, links out or device files
        (dest / ".unpacked").write_text(sha)
    return find_image_folder(dest), sha


def find_image_folder(top: Path) -> Path:
    """``top`` or the one folder below it (up to two levels) that holds ``train/`` and ``test/``."""
    candidates = [top, *(p for pattern in ("*", "*/*") for p in sorted(top.glob(pattern)) if p.is_dir())]
    for folder in candidates:
        if (folder / "train").is_dir() and (folder / "test").is_dir():
            return folder
    raise SystemExit(f"error: no folder holding train/ and test/ under {str(top)!r}")


# ----------------------------------------------------------------------------------- measuring
def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_arm(experiment: Experiment, arm: str, profile, seed: int) -> dict[str, float]:
    """Seconds of one round (the second of two: the first warms cuDNN's choices and the allocator), of one
    evaluation, and of setting a run up (building it and the first round's extra), for ``arm`` at ``seed``."""
    from dfl_core.engine import Simulation

    cfg = experiment.config(arm, seed, profile).replace(rounds=2, eval_every=1)
    start = time.perf_counter()
    sim = Simulation(cfg, data=profile.data(cfg))
    built = time.perf_counter()
    sim.step()
    _sync(sim.device)
    first = time.perf_counter()
    sim.step()
    _sync(sim.device)
    second = time.perf_counter()
    sim.evaluate()
    _sync(sim.device)
    done = time.perf_counter()
    round_s = second - first
    return {
        "round_s": round_s,
        "eval_s": done - second,
        "setup_s": (built - start) + max(0.0, (first - built) - round_s),
        "local_steps": cfg.params.local_steps,
    }


def run_seconds(probe: dict[str, float], rounds: int) -> float:
    """Predicted seconds of one run of ``rounds`` rounds (evaluations as the schedule makes them)."""
    evaluations = rounds // eval_every_for(rounds) + 2  # round 0, every eval_every, the last
    return probe["setup_s"] + rounds * probe["round_s"] + evaluations * probe["eval_s"]


def eval_every_for(rounds: int) -> int:
    """About 20 evaluations a run (enough for the curves and the flatness slope)."""
    return max(1, rounds // 20)


def plan_rounds(
    probes: dict[str, dict[str, float]],
    seeds: int,
    seconds: float,
    *,
    max_rounds: int,
    min_rounds: int,
    seed_data_s: float = 0.0,
) -> tuple[int, list[str], float]:
    """The most rounds T ≤ ``max_rounds`` at which every kept arm × ``seeds`` fits ``seconds``, dropping arms in
    :data:`DROP_ORDER` while T < ``min_rounds``; returns (T, the arms kept, the predicted seconds). ``seed_data_s``:
    loading one seed's data subset. T can fall below ``min_rounds`` (to 1) with the core arms alone: the budget is
    then too small, and the caller says so."""
    arms = list(probes)
    droppable = [a for a in DROP_ORDER if a in arms]
    while True:

        def total(t: int) -> float:
            return seeds * (seed_data_s + sum(run_seconds(probes[a], t) for a in arms))

        rounds = max_rounds
        while rounds > 1 and total(rounds) > seconds:
            rounds -= 1
        if rounds >= min_rounds or not droppable:
            return rounds, arms, total(rounds)
        arms.remove(droppable.pop(0))


# ------------------------------------------------------------------------------------- the run
def _environment(device: str) -> dict[str, Any]:
    import torch

    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        return {"gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}
    return {"gpu": None}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dfl_book.showcase.gpu_map",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0].split(": ``")[0] + ".",
        epilog=__doc__.split("\n\n", 1)[1],
    )
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--archive", type=Path, help="cifar10-jpeg.tar.gz (unpacked under --workdir, once)")
    data.add_argument("--data-dir", type=Path, help="an unpacked CIFAR-10 image folder (train/, test/) instead")
    parser.add_argument(
        "--out",
        type=Path,
        default=GPU_RESULTS_DIR,
        help="folder of the results file, written after every run (default: %(default)s)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/dfl-gpu-map"),
        help="where the archive is unpacked, the decoded images cached and checkpoints kept (default: %(default)s)",
    )
    parser.add_argument(
        "--budget-min",
        type=float,
        default=9.0,
        help="minutes for everything, from the script's start (default: %(default)s)",
    )
    parser.add_argument(
        "--stop-min",
        type=float,
        default=9.5,
        help="no seed is started that the measurements say would end after this many minutes from "
        "the script's start (the device call's limit is 10); the seeds done so far are kept "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="T, instead of sizing it to the budget (e.g. to resume an earlier call's plan)",
    )
    parser.add_argument(
        "--max-rounds", type=int, default=200, help="the most rounds sizing may pick (default: %(default)s)"
    )
    parser.add_argument(
        "--min-rounds", type=int, default=30, help="below this T, arms are dropped (default: %(default)s)"
    )
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (default: %(default)s)")
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="an earlier call's results file: its finished runs with matching configs are kept",
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument(
        "--precision",
        default=None,
        choices=("float32", "bfloat16"),
        help="local training's arithmetic (default: bfloat16 on a GPU, float32 on a CPU)",
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile local training (CUDA)")
    parser.add_argument(
        "--train-size",
        type=int,
        default=None,
        help="training images in all (default: the map's 10,000, i.e. 500 per client)",
    )
    parser.add_argument("--num-clients", type=int, default=None, help="m (default: the map's 20)")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="B, for smoke runs only (default: the paper's 128)"
    )
    parser.add_argument("--plan-only", action="store_true", help="measure, print the plan and stop")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    start = time.perf_counter()
    args = _parser().parse_args(argv)
    import torch

    from ..profiles import get_profile

    seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    if len(seeds) < 5:
        print(f"note: {len(seeds)} seed(s); a verdict needs 5 (dfl_book.stats.MIN_SEEDS)", file=sys.stderr)
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DFL_IMAGE_CACHE", str(args.workdir / "image-cache"))
    if args.archive is not None:
        data_dir, sha = unpack(args.archive, args.workdir)
        copy = {"archive": args.archive.name, "sha256": sha}
    else:
        data_dir, copy = find_image_folder(args.data_dir), {"folder": str(args.data_dir), "sha256": None}
    on_gpu = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    precision = args.precision or ("bfloat16" if on_gpu else "float32")
    speed = {"precision": precision, "cudnn_benchmark": on_gpu, "compile": args.compile, "device": args.device}
    sizes = {
        k: v
        for k, v in (
            ("train_size", args.train_size),
            ("num_clients", args.num_clients),
            ("batch_size", args.batch_size),
        )
        if v is not None
    }
    base = dict(CIFAR_MAP.base) | sizes | speed | {"data_dir": str(data_dir)}
    experiment = Experiment(
        CIFAR_MAP.name, CIFAR_MAP.chapter, CIFAR_MAP.question, arms=_ordered_arms(), base=base, seeds=seeds
    )
    profile = get_profile("showcase")

    # 1. The data (decoded once, then cached: the first seed's load decodes, the next one's reads the cache), and
    #    one round of every arm, measured in this call.
    first_arm = next(iter(experiment.arms))
    unpacked = time.perf_counter()
    profile.data(experiment.config(first_arm, seeds[0], profile))
    decoded = time.perf_counter()
    profile.data(experiment.config(first_arm, seeds[1 % len(seeds)] if len(seeds) > 1 else seeds[0], profile))
    seed_data_s = time.perf_counter() - decoded
    print(
        f"data: {str(data_dir)!r}, unpacked in {unpacked - start:.1f} s, decoded and loaded in "
        f"{decoded - unpacked:.1f} s, a further seed's subset loaded in {seed_data_s:.1f} s"
    )
    probes = {arm: measure_arm(experiment, arm, profile, seeds[0]) for arm in experiment.arms}
    for arm, p in probes.items():
        print(
            f"probe {arm:<55} K = {p['local_steps']:>3}  round {p['round_s']:.3f} s  evaluation "
            f"{p['eval_s']:.3f} s  set-up {p['setup_s']:.2f} s"
        )

    # 2. Rounds (and arms) sized to what is left of the budget, with a 10% margin.
    left = args.budget_min * 60 - (time.perf_counter() - start)
    if args.rounds is not None:
        rounds, arms = args.rounds, list(experiment.arms)
        predicted = len(seeds) * (seed_data_s + sum(run_seconds(probes[a], rounds) for a in arms))
    else:
        rounds, arms, predicted = plan_rounds(
            probes,
            len(seeds),
            0.9 * left,
            max_rounds=args.max_rounds,
            min_rounds=args.min_rounds,
            seed_data_s=seed_data_s,
        )
    dropped = [a for a in experiment.arms if a not in arms]
    eval_every = eval_every_for(rounds)
    print(
        f"plan: T = {rounds} rounds (evaluated every {eval_every}), {len(arms)} arms x {len(seeds)} seeds, "
        f"predicted {predicted:.0f} s of {left:.0f} s left" + (f"; dropped: {', '.join(dropped)}" if dropped else "")
    )
    if rounds < args.min_rounds:
        print(
            f"warning: only {rounds} rounds fit the budget (fewer than --min-rounds {args.min_rounds})", file=sys.stderr
        )
    plan = {
        "rounds": rounds,
        "eval_every": eval_every,
        "arms": arms,
        "dropped_arms": dropped,
        "budget_s": args.budget_min * 60,
        "predicted_s": round(predicted, 1),
        "unpack_s": round(unpacked - start, 1),
        "decode_and_load_s": round(decoded - unpacked, 1),
        "seed_data_s": round(seed_data_s, 2),
        "probe": {a: {k: round(v, 4) for k, v in p.items()} for a, p in probes.items()},
        "rounds_forced": args.rounds is not None,
    }
    if args.plan_only:
        print(json.dumps(plan, indent=1))
        return 0

    # 3. The runs, seed by seed, the results file rewritten after each.
    experiment = dataclasses.replace(
        experiment, arms={a: experiment.arms[a] for a in arms}, base=base | {"rounds": rounds, "eval_every": eval_every}
    )
    path = results_path(experiment.name, args.out)
    if args.resume is not None and args.resume.resolve() != path.resolve():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args.resume.read_text())
    provenance = {
        "gpu": _environment(args.device),
        "precision": precision,
        "speed_options": speed,
        "data_copy": copy,
        "plan": plan,
        "script_wall_time_s": None,
    }
    command = "python -m dfl_book.showcase.gpu_map " + " ".join(sys.argv[1:] if argv is None else argv)
    per_seed = predicted / len(seeds)
    for k in range(1, len(seeds) + 1):
        elapsed = time.perf_counter() - start
        if elapsed + per_seed > args.stop_min * 60:
            print(
                f"warning: stopped before seed {seeds[k - 1]}: {elapsed:.0f} s gone and a seed takes about "
                f"{per_seed:.0f} s, past --stop-min {args.stop_min}; rerun with --resume and --rounds {rounds} "
                "for the rest",
                file=sys.stderr,
            )
            provenance["stopped_before_seed"] = seeds[k - 1]
            break
        provenance["script_wall_time_s"] = round(elapsed, 1)
        run_experiment(
            experiment,
            "showcase",
            out=args.out,
            checkpoints=args.workdir / "checkpoints",
            seeds=seeds[:k],
            progress=not args.no_progress,
            command=command,
            provenance=provenance,
        )
    if not path.exists():
        return 1
    doc = json.loads(path.read_text())
    doc["provenance"]["script_wall_time_s"] = round(time.perf_counter() - start, 1)
    doc["provenance"]["dfedavg_e5_flat"] = _flat(doc, CIFAR_MAP.baseline_arm(5))
    write_atomic(path, json.dumps(doc, indent=1).encode())
    flat = {True: "ended flat", False: "was still rising", None: "is not in this file"}
    print(
        f"results: {path} ({doc['provenance']['script_wall_time_s']} s in all; DFedAvg's E = 5 test curve "
        f"{flat[doc['provenance']['dfedavg_e5_flat']]}, FLAT_SLOPE = {FLAT_SLOPE} points per 100 rounds)"
    )
    return 0


def _flat(doc: dict, arm: str) -> bool | None:
    """Whether ``arm``'s mean test curve over the seeds ended flat (:data:`.regime.FLAT_SLOPE`)."""
    from .runner import ShowcaseResult

    result = ShowcaseResult(doc)
    if arm not in result.arms or result.diverged(arm):
        return None
    rounds, curves = result.curve(arm)
    if len(rounds) < 2:
        return None
    slopes = [curve_slope(rounds, [100 * v for v in c]) for c in curves]
    return sum(slopes) / len(slopes) < FLAT_SLOPE


if __name__ == "__main__":
    sys.exit(main())
