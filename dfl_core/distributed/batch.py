"""Several runs one after another in one process group: pay the processes' start-up once.

``python -m dfl_core.distributed.batch CONFIGS.json OUT`` (under a launcher: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) runs every ``{name: config dict}`` of the file into ``OUT/<name>`` as
``python -m dfl_core.distributed`` would (rank 0 writes ``results.json``, every rank its checkpoints). The book and
the tests use it through :func:`dfl_core.distributed.launch.run_configs`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..config import Config
from ..results import write_results
from .cli import init_process_group
from .exchange import Exchange, Watchdog
from .rank import run_rank


def main(argv: list[str]) -> int:
    configs, out = json.loads(Path(argv[0]).read_text()), Path(argv[1])
    timeout_s = float(argv[2]) if len(argv) > 2 else 60.0
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init_process_group("gloo", rank, world_size, timeout_s)
    watchdog = Watchdog(rank, timeout_s)
    for name, cfg in configs.items():
        history = run_rank(
            Config.from_dict(cfg),
            rank,
            world_size,
            Exchange(rank, world_size, timeout_s, watchdog),
            out / name,
            checkpoint_every=10**9,
        )
        if rank == 0:
            write_results(out / name / "results.json", [history], command=None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
