"""A run's parts, built from its config in the order a reader checks them: the clients' data, the model and
x⁰, the communication graph, local training and evaluation. Errors in any part come here, before training.

:class:`~.simulation.Simulation` builds its parts with :func:`build_parts`, then runs the rounds.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor

from ..config import Config, ConfigError
from ..data import FederatedData
from ..models import build_model
from ..rng import purpose_seed
from ..stacked import AUTOCAST_DTYPES, StackedModel
from ..topology import Topology, make_topology
from .data import federated_data
from .evaluation import Evaluator
from .trainer import LocalTrainer, default_client_chunk

__all__ = ["RunParts", "build_parts"]


class RunParts(NamedTuple):
    data: FederatedData  # the clients' train and test splits
    model: StackedModel  # the parameter layout and the forward pass of all m models at once
    x0: Tensor  # the initial parameters, (m, d); an expanded view of one row when all start equal
    topology: Topology | None  # the communication graph (None for centralized FL)
    trainer: LocalTrainer  # local training: mini-batches and the clients' gradients
    evaluator: Evaluator  # test and train accuracy and loss of every client's model


def build_parts(cfg: Config, device: torch.device, centralized: bool, data: FederatedData | None = None) -> RunParts:
    """The parts of the run ``cfg`` on ``device`` (``data``: the clients' data, if already loaded)."""
    m, dtype = cfg.num_clients, cfg.torch_dtype
    # 1. data
    data = federated_data(cfg) if data is None else data
    if data.train.m != m:
        raise ConfigError(f"data has {data.train.m} clients but num_clients={m}")
    ds = data.dataset
    # 2. model and initial parameters
    model = StackedModel(
        partial(build_model, cfg.model, ds.input_shape, ds.num_classes),
        cfg.forward_strategy,
        device,
        autocast_dtype=AUTOCAST_DTYPES[cfg.precision],
        channels_last=cfg.channels_last,
        compile=cfg.compile,
        cudnn_benchmark=cfg.cudnn_benchmark,
    )
    same_init = cfg.same_init or centralized
    # equal rows are kept once: at m = 1000 a 2NN's (m, d) copy is 0.74 GiB (Simulation.restart clones what it needs)
    x0 = model.init_params(1 if same_init else m, purpose_seed(cfg.seed, "init"), same_init=same_init, dtype=dtype)
    # 3. communication graph (decentralized)
    topology = None
    if not centralized:
        topology = make_topology(
            cfg.params.topology, m, seed=purpose_seed(cfg.seed, "topology") % 2**32, **cfg.topology_options()
        )
    # 4. local training and evaluation
    trainer = LocalTrainer(
        model,
        data,
        local_steps=cfg.params.local_steps,
        batch_size=cfg.batch_size,
        full_batch=cfg.full_batch,
        client_chunk=cfg.client_chunk or m,
        dtype=dtype,
    )
    if cfg.client_chunk is None:
        trainer.client_chunk = default_client_chunk(model.d, m, device, trainer.bytes_per_client)
    evaluator = Evaluator(model, data, trainer.client_chunk)
    return RunParts(data, model, x0.expand(m, -1) if same_init else x0, topology, trainer, evaluator)
