"""Start N local processes of ``dfl_core.distributed`` without torchrun, bound to one address only.

``python -m dfl_core.distributed.launch --nproc-per-node 4 [--master-addr 127.0.0.1] [--master-port P] -- OPTIONS``
sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process as torchrun would; rank 0 then hosts the
rendezvous store on a socket bound to that address alone (torchrun's agent listens on every interface). Tests and
the book launch through :func:`spawn`. The launcher does not kill the other processes when one fails: they stop by
themselves within ``--timeout-s``, naming the rank and round they lost.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["spawn", "free_port", "config_args", "run_configs", "main"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def config_args(cfg: "Config") -> list[str]:
    """The command-line options that give ``cfg`` to ``python -m dfl_core.distributed``: the algorithm and the
    seed, and ``--field value`` for every other field that differs from its default."""
    from ..config import Config

    default = Config().to_dict()
    args = ["--algorithm", cfg.algorithm, "--seed", str(cfg.seed)]
    for key, value in cfg.to_dict().items():
        if key not in ("algorithm", "seed") and value != default[key]:
            args += ["--" + key.replace("_", "-"), str(value)]
    return args


def spawn(
    nproc: int,
    args: Sequence[str],
    host: str = "127.0.0.1",
    port: int | None = None,
    env: dict[str, str] | None = None,
    module: str = "dfl_core.distributed",
    **popen,
) -> list[subprocess.Popen]:
    """Start ranks 0..nproc-1 of ``python -m MODULE ARGS`` on this machine (``popen``: for subprocess.Popen)."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be an integer >= 1, got {nproc!r}")
    port = free_port(host) if port is None else port
    base = {
        **os.environ,
        **(env or {}),
        "WORLD_SIZE": str(nproc),
        "MASTER_ADDR": host,
        "MASTER_PORT": str(port),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    base.pop("TORCHELASTIC_RUN_ID", None)
    return [
        subprocess.Popen(
            [sys.executable, "-m", module, *args], env={**base, "RANK": str(r), "LOCAL_RANK": str(r)}, **popen
        )
        for r in range(nproc)
    ]


def run_configs(
    nproc: int,
    configs: dict[str, "Config"],
    out: str | os.PathLike,
    timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
) -> None:
    """Run ``{name: Config}`` in turn over ``nproc`` local processes into ``out/<name>`` (:mod:`.batch`).

    Raises RuntimeError with the ranks' messages if any rank fails.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "configs.json"
    spec.write_text(json.dumps({name: cfg.to_dict() for name, cfg in configs.items()}))
    procs = spawn(
        nproc,
        [str(spec), str(out), str(timeout_s)],
        env=env,
        module="dfl_core.distributed.batch",
        stderr=subprocess.PIPE,
        text=True,
    )
    errors = [p.communicate()[1] for p in procs]
    failed = {
        r: e.strip().splitlines()[-1] if e.strip() else ""
        for r, (p, e) in enumerate(zip(procs, errors))
        if p.returncode != 0
    }
    if failed:
        raise RuntimeError(f"ranks failed: {failed}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dfl_core.distributed.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc-per-node", type=int, required=True, metavar="N")
    parser.add_argument("--master-addr", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--master-port", type=int, default=None, help="default: a free port")
    parser.add_argument(
        "options", nargs=argparse.REMAINDER, help="after --: the options of python -m dfl_core.distributed"
    )
    args = parser.parse_args(argv)
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be >= 1, got {args.nproc_per_node}")
    options = args.options[1:] if args.options[:1] == ["--"] else args.options
    procs = spawn(args.nproc_per_node, options, host=args.master_addr, port=args.master_port)
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
