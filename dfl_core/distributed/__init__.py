"""Real decentralized training across processes and machines with ``torch.distributed``.

Each process (rank) holds a block of m/P clients and trains them with the simulator's own vectorized code
(:mod:`.rank`); gossip sends only what the graph needs (:mod:`.exchange`): rows to neighbouring ranks point to point
on sparse graphs, ``all_gather`` on complete ones. A rank keeps only its own clients' samples (:mod:`.data`). Same
config and seed, ``full_batch=True`` and ``dtype="float64"``: the same final parameters as
:class:`dfl_core.Simulation`.

Launch: ``torchrun --nproc_per_node=4 -m dfl_core.distributed --algorithm dfedsam
--num-clients 8 --topology ring`` (options: :mod:`.cli`).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "block_of": ".data",
    "private_data": ".data",
    "GossipPlan": ".exchange",
    "Exchange": ".exchange",
    "PeerFailure": ".exchange",
    "RankTools": ".rank",
    "run_rank": ".rank",
    "load_final_params": ".rank",
    "main": ".cli",
    "torchrun_command": ".cli",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'dfl_core.distributed' has no attribute {name!r}")
