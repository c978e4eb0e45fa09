"""``torchrun --nproc_per_node=N -m dfl_core.distributed [options]``: one run over N processes.

Takes the config options of ``python -m dfl_core run`` (shared through :func:`dfl_core.cli.add_config_arguments`),
one algorithm and one seed, plus ``--timeout-s`` and ``--backend``. Rank 0 writes ``OUT/results.json`` (the
simulator's schema, with each rank's bytes added to every record) and prints a summary; every rank writes its
checkpoints under ``OUT/checkpoints/rank<r>``. A folder an earlier run used is refused unless ``--resume`` continues
that run or ``--overwrite`` replaces it.

Exit codes: 0 done, 2 bad configuration or checkpoint, 3 divergence,
4 a neighbouring rank died or stopped answering (the message names it and the round).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Sequence

import torch

from ..checkpoint import CheckpointError
from ..cli import (
    add_config_arguments,
    check_out_options,
    config_overrides,
    configs_from_options,
    make_out_folder,
    used_folder_refusal,
)
from ..config import Config, ConfigError, check_int
from ..errors import DivergenceError
from ..results import write_results
from .data import block_of

__all__ = ["main", "build_parser", "BACKENDS", "torchrun_command", "init_process_group"]

#: gloo only: the evaluation and barrier tensors live on the CPU (nccl would need them on the GPU).
BACKENDS = ("gloo",)
#: The longest --timeout-s taken (a week): far longer than any round, and within what the backend's timeouts hold.
MAX_TIMEOUT_S = 7 * 24 * 3600


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N -m dfl_core.distributed",
        description="Run one decentralized algorithm over N processes (torch.distributed), each holding "
        "m/N clients; with the same options it trains the simulator's models. Its test numbers are over the "
        "clients' own test splits and its transmissions are the rows the ranks send each other (both recorded "
        "under execution in results.json).",
    )
    parser.add_argument("--algorithm", default=Config.algorithm, help="algorithm name (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=Config.seed, help="seed of the run (default: %(default)s)")
    parser.add_argument("--preset", default=None, help="start from a paper's setting (python -m dfl_core list)")
    parser.add_argument("--setting", default=None, help="the preset's column, e.g. dir0.6 or iid")
    parser.add_argument(
        "--out",
        default="dfl_results_distributed",
        help="folder for results.json and checkpoints/ (default: %(default)s)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar (shown on rank 0)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=10,
        metavar="N",
        help="every rank saves its block every N rounds (default: %(default)s)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest round every rank has saved under OUT/checkpoints",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results and checkpoints an earlier run left in OUT (without it, or --resume, such a "
        "folder is refused)",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=120.0,
        metavar="S",
        help="stop when a neighbouring rank does not answer within S seconds; the wait "
        "includes the neighbour's local training, so S must exceed a round "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--backend", default="gloo", help=f"torch.distributed backend: {', '.join(BACKENDS)} (default: %(default)s)"
    )
    add_config_arguments(parser)
    return parser


def torchrun_command(
    nproc: int, args: Sequence[str], port: int, host: str = "127.0.0.1", module: str = "dfl_core.distributed"
) -> list[str]:
    """The torchrun command line for ``nproc`` processes on this machine at ``host:port``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--nnodes=1",
        f"--master-addr={host}",
        f"--master-port={port}",
        "-m",
        module,
        *args,
    ]


_LISTENING: list[socket.socket] = []  # rank 0's store socket, kept open for the run


def init_process_group(backend: str, rank: int, world_size: int, timeout_s: float) -> None:
    """Join the process group at ``MASTER_ADDR:MASTER_PORT`` (default 127.0.0.1:29500).

    Under torchrun its agent hosts the rendezvous store (and listens on every interface, which torch does not let us
    change: see docs/distributed_backend.md on trusted networks). Launched without torchrun (:mod:`.launch`, or RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT set by hand), rank 0 hosts the store on a socket bound to MASTER_ADDR only. On a
    loopback address gloo's own sockets are kept on the loopback interface too (``GLOO_SOCKET_IFNAME=lo``).
    """
    import torch.distributed as dist  # deferred: see _run

    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "29500"))
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        loopback = False
    if loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout = timedelta(seconds=timeout_s)
    if "TORCHELASTIC_RUN_ID" in os.environ:
        dist.init_process_group(backend, timeout=timeout)
        return
    if rank == 0:
        listening = socket.create_server((host, port), backlog=max(128, world_size))
        _LISTENING.append(listening)
        store = dist.TCPStore(
            host, port, world_size, True, timeout=timeout, wait_for_workers=False, master_listen_fd=listening.fileno()
        )
    else:
        store = dist.TCPStore(host, port, world_size, False, timeout=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)


def _error(rank: int, code: int, err: BaseException) -> int:
    sys.stderr.write(f"error: rank {rank}: {err}\n")
    sys.stderr.flush()
    return code


def _check_out_folder(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to write into a folder an earlier run used unless asked to continue or replace that run: a fresh run
    there would mix its checkpoints with the earlier ones (each rank keeps its two newest rounds)."""
    check_out_options(out, resume, overwrite)
    files = [name for name in ["results.json"] if (out / name).exists()]
    checkpoints = sorted(out.glob("checkpoints/rank*/round*.pt"))
    if (files or checkpoints) and not (resume or overwrite):
        raise ConfigError(used_folder_refusal(out, files, checkpoints))


def _remove_earlier_run(out: Path, rank: int, world_size: int) -> None:
    """--overwrite: each rank removes its own checkpoints; rank 0 also the results file and the folders of ranks
    that this run does not have (an earlier run over more processes)."""
    for old in (out / "checkpoints" / f"rank{rank}").glob("round*.pt"):
        old.unlink()
    if rank == 0:
        (out / "results.json").unlink(missing_ok=True)
        numbered = [f for f in out.glob("checkpoints/rank*") if f.name.removeprefix("rank").isdigit()]
        for folder in [f for f in numbered if int(f.name.removeprefix("rank")) >= world_size]:
            shutil.rmtree(folder)  # the run's checkpoints are read back rank folder by rank folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        parser.error(
            "RANK and WORLD_SIZE are not set: launch with torchrun --nproc_per_node=N -m dfl_core.distributed ..."
        )
    overrides = config_overrides(args)
    algorithm = overrides.pop("algorithm")  # (a preset's row, passed as such)
    try:
        if args.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {args.backend!r}; allowed: {', '.join(BACKENDS)}")
        check_int("--checkpoint-every", args.checkpoint_every, 1)
        _check_out_folder(Path(args.out), args.resume, args.overwrite)
        if not 0 < args.timeout_s <= MAX_TIMEOUT_S:  # (also refuses nan) inf overflows the backend's timedelta
            raise ConfigError(
                f"--timeout-s must be > 0 and finite (seconds, at most {MAX_TIMEOUT_S}: a week), got {args.timeout_s}"
            )
        (cfg,) = configs_from_options(args.preset, args.setting, [algorithm], overrides).values()
        from .rank import check_distributable  # deferred: .rank loads torch.distributed (see _run)

        check_distributable(cfg.algorithm)
        block_of(rank, world_size, cfg.num_clients)  # nproc must divide m
        make_out_folder(Path(args.out))  # every rank writes its checkpoints there
    except (ConfigError, ValueError) as err:
        return _error(rank, 2, err)
    return _run(args, cfg, rank, world_size)


def _run(args, cfg: Config, rank: int, world_size: int) -> int:
    # Deferred: torch.distributed (and .exchange and .rank, built on it) loads only once a rank runs, so that
    # building and checking the command line (--help, a bad option, torchrun_command) does without it.
    import torch.distributed as dist

    from .exchange import EXIT_PEER_FAILURE, Exchange, PeerFailure, Watchdog
    from .rank import run_rank

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    watchdog = Watchdog(rank, args.timeout_s)
    watchdog.arm("joining the process group")
    init_process_group(args.backend, rank, world_size, args.timeout_s)
    watchdog.disarm()
    exchange = Exchange(rank, world_size, args.timeout_s, watchdog)
    out = Path(args.out)
    if args.overwrite:
        _remove_earlier_run(out, rank, world_size)
        exchange.barrier("removing the earlier run's files")  # before any rank saves a checkpoint of this run
    try:
        history = run_rank(
            cfg,
            rank,
            world_size,
            exchange,
            out,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            progress=not args.no_progress,
        )
    except (ConfigError, CheckpointError) as err:
        code = _error(rank, 2, err)
    except DivergenceError as err:
        code = _error(rank, 3, err)
    except PeerFailure as err:
        code = _error(rank, EXIT_PEER_FAILURE, err)
    else:
        if rank == 0:
            write_results(
                out / "results.json", [history], command=" ".join(["torchrun -m dfl_core.distributed", *sys.argv[1:]])
            )
            final = history.final
            per_round = [b / max(cfg.rounds, 1) for b in final["rank_bytes_sent"]]
            print(
                f"{cfg.algorithm} on {world_size} processes, m = {cfg.num_clients}, {cfg.params.topology}: "
                f"test acc {100 * final['test_acc']:.2f} %, consensus distance "
                f"{final['consensus_distance']:.3e}, {history.wall_time_s:.2f} s"
            )
            print("bytes sent per round by rank: " + ", ".join(f"{b:.0f}" for b in per_round))
            print(f"results: {out / 'results.json'}")
        dist.destroy_process_group()
        return 0
    # A failed rank does not wait for the others to shut down cleanly (that could hang). Rank 0 hosting
    # the store lingers briefly, so that the others can still read which ranks fell behind.
    sys.stdout.flush()
    if _LISTENING:
        time.sleep(min(3.0, args.timeout_s))
    os._exit(code)
