"""dfl_core: a fast, checkable simulator of decentralized federated learning.

The public API::

    from dfl_core import Config, run, Simulation
    history = run(Config(algorithm="dfedsam-mgs", topology="ring", rounds=30))
    history.final["test_acc"], history.series("consensus_distance")

See the README for the results schema and ``python -m dfl_core run --help``.
"""
__version__ = "0.1.0"

from .algorithms import ALGORITHMS, Algorithm
from .config import Config, ConfigError
from .engine import DivergenceError, Simulation, run
from .results import History, read_results, write_results

__all__ = ["Config", "ConfigError", "run", "Simulation", "History", "DivergenceError",
           "ALGORITHMS", "Algorithm", "read_results", "write_results", "__version__"]
