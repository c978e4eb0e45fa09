"""The simulator: its parts and the one driver loop.

=============  ==============================================================
module         what it holds
=============  ==============================================================
simulation     :class:`Simulation` (the parts of one run, put together) and :func:`run`
loop           :func:`drive`, the driver loop; :class:`RunState`; :class:`Hooks`
tools          :class:`SimulationTools`, what an algorithm may use in one round
trainer        :class:`LocalTrainer`: batches, gradients, K local steps on all clients at once
evaluation     :class:`Evaluator`: the history record of a round
data           the clients' data of a config, and :class:`DataCache`
allocator      :func:`retain_freed_memory`: glibc malloc keeps the step's freed memory for the next step
=============  ==============================================================
"""
from ..errors import DivergenceError
from ..rng import PURPOSES, purpose_seed
from .data import DataCache, dataset_subset, federated_data
from .loop import Hooks, RoundLog, RunState, drive, play_round
from .simulation import Checkpointing, ProgressBar, Simulation, run
from .tools import SimulationTools
from .trainer import LocalTrainer, RoundStreams, default_client_chunk

__all__ = ["Simulation", "run", "DivergenceError", "purpose_seed", "PURPOSES", "dataset_subset", "federated_data",
           "DataCache", "Hooks", "RoundLog", "RunState", "drive", "play_round", "SimulationTools", "LocalTrainer",
           "RoundStreams", "default_client_chunk", "Checkpointing", "ProgressBar"]
