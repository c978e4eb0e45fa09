"""dfl_core: a fast, checkable simulator of decentralized federated learning.

The public API::

    from dfl_core import Config, run, Simulation
    history = run(Config(algorithm="dfedsam-mgs", topology="ring", rounds=30))
    history.final["test_acc"], history.series("consensus_distance")

See docs/results_file.md for the results schema and ``python -m dfl_core run --help``. The names below are imported on first
use, so ``import dfl_core.topology`` (as ``theory`` does) does not load the whole engine.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Config": ".config",
    "ConfigError": ".config",
    "Simulation": ".engine",
    "run": ".engine",
    "DivergenceError": ".errors",
    "Hooks": ".engine",
    "RunState": ".engine",
    "DataCache": ".engine",
    "CheckpointError": ".checkpoint",
    "History": ".results",
    "read_results": ".results",
    "write_results": ".results",
    "ALGORITHMS": ".algorithms",
    "Algorithm": ".algorithms",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'dfl_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
