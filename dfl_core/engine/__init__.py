"""The simulator: its parts and the one driver loop.

=============  ==============================================================
module         what it holds
=============  ==============================================================
simulation     :class:`Simulation` (the parts of one run, put together) and :func:`run`
loop           :func:`drive`, the driver loop; :class:`RunState`; :class:`Hooks`
tools          :class:`SimulationTools`, what an algorithm may use in one round; :func:`learning_rate` (η_t)
trainer        :class:`LocalTrainer`: batches, gradients, K local steps on all clients at once
evaluation     :class:`Evaluator` and :func:`history_record`: the history record of a round
data           the clients' data of a config, and :class:`DataCache`
allocator      :func:`retain_freed_memory`: glibc malloc keeps the step's freed memory for the next step
buffers        :class:`~.buffers.OutputBuffers`: output tensors of training and gossip, reused across rounds
=============  ==============================================================
"""
from ..errors import DivergenceError
from ..rng import PURPOSES, purpose_seed
from .data import DataCache, dataset_subset, federated_data
from .evaluation import history_record
from .loop import Hooks, RoundLog, RunState, drive, play_round
from .simulation import Checkpointing, ProgressBar, Simulation, run
from .tools import SimulationTools, learning_rate
from .trainer import LocalTrainer, RoundStreams, default_client_chunk

__all__ = ["Simulation", "run", "DivergenceError", "purpose_seed", "PURPOSES", "dataset_subset", "federated_data",
           "DataCache", "Hooks", "RoundLog", "RunState", "drive", "play_round", "SimulationTools", "learning_rate",
           "history_record", "LocalTrainer",
           "RoundStreams", "default_client_chunk", "Checkpointing", "ProgressBar"]
