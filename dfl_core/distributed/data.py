"""Which clients a rank holds, and the data it keeps of them.

Rank r of P holds the contiguous block of clients ``r·m/P … (r+1)·m/P − 1``. Every rank computes the same
deterministic split as the simulator (:func:`dfl_core.engine.federated_data`: it loads the dataset file, which any
participant of a real deployment would not have, only to draw the partition) and then keeps only its own clients'
train and test samples (:func:`private_data`); the full tensors are dropped before training starts.
"""

from __future__ import annotations

import dataclasses

import torch

from ..config import ConfigError
from ..data import ClientData, FederatedData

__all__ = ["block_of", "private_data"]


def block_of(rank: int, world_size: int, num_clients: int) -> torch.Tensor:
    """The ids of the clients rank ``rank`` of ``world_size`` holds: a contiguous block of m / P."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"rank must be in [0, {world_size}), got {rank} (world size {world_size})")
    if num_clients % world_size:
        divisors = [p for p in range(1, num_clients + 1) if num_clients % p == 0]
        raise ConfigError(
            f"the number of processes ({world_size}) must divide num_clients={num_clients}; "
            f"allowed process counts: {', '.join(map(str, divisors))}"
        )
    size = num_clients // world_size
    return torch.arange(rank * size, (rank + 1) * size)


def _keep(split: ClientData, clients: torch.Tensor) -> ClientData:
    """``split`` with only ``clients``' samples; the other clients keep an empty row.

    The ``(m, n_max)`` index layout is kept so that the per-round batch draws (one key per slot of all m clients,
    :meth:`Simulation._batches`) consume the random stream exactly as in the simulator.
    """
    dev = split.index.device
    ids = clients.to(dev)
    counts = split.counts[ids]
    samples = split.index[ids][split.mask()[ids]]  # own clients' samples, client by client
    offsets = torch.cumsum(counts, 0) - counts
    index = torch.zeros_like(split.index)
    positions = torch.arange(split.n_max, device=dev)
    index[ids] = torch.where(positions[None, :] < counts[:, None], offsets[:, None] + positions[None, :], 0)
    all_counts = torch.zeros_like(split.counts)
    all_counts[ids] = counts
    return ClientData(x=split.x[samples].clone(), y=split.y[samples].clone(), index=index, counts=all_counts)


def private_data(data: FederatedData, clients: torch.Tensor) -> FederatedData:
    """The part of ``data`` a rank holding ``clients`` may keep: their train and test samples only.

    The dataset record keeps its shape information (input shape, classes, augmentation) but its sample tensors are
    replaced by the rank's own samples, so no tensor the rank holds refers to another client's data.
    """
    train, test = _keep(data.train, clients), _keep(data.test, clients)
    ds = dataclasses.replace(data.dataset, x_train=train.x, y_train=train.y, x_test=test.x, y_test=test.y)
    return FederatedData(dataset=ds, train=train, test=test)
