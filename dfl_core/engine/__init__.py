"""The simulator: its parts and the one driver loop.

:mod:`.simulation` puts the parts of one run together (:class:`Simulation`, :func:`run`), :mod:`.loop` drives it
(:func:`drive`, :class:`RunState`, :class:`Hooks`) with a round's :mod:`.tools` (:class:`SimulationTools`), whose
local training is :mod:`.trainer`'s; :mod:`.evaluation`, :mod:`.data`, :mod:`.allocator` and :mod:`.buffers` hold
the history record, the clients' data, the malloc settings and the reused output tensors.
"""

from ..errors import DivergenceError
from ..rng import PURPOSES, purpose_seed
from .data import DataCache, dataset_subset, federated_data
from .evaluation import history_record
from .loop import Hooks, RoundLog, RunState, drive, play_round
from .simulation import Checkpointing, ProgressBar, Simulation, run
from .tools import SimulationTools, learning_rate
from .trainer import LocalTrainer, RoundStreams, default_client_chunk

__all__ = [
    "Simulation",
    "run",
    "DivergenceError",
    "purpose_seed",
    "PURPOSES",
    "dataset_subset",
    "federated_data",
    "DataCache",
    "Hooks",
    "RoundLog",
    "RunState",
    "drive",
    "play_round",
    "SimulationTools",
    "learning_rate",
    "history_record",
    "LocalTrainer",
    "RoundStreams",
    "default_client_chunk",
    "Checkpointing",
    "ProgressBar",
]
