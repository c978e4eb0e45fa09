"""The clients' data of a config: the dataset (or its subset), split over the clients, and a cache."""

from __future__ import annotations

import numpy as np

from ..data import FederatedData, federate, load_dataset
from ..rng import purpose_seed

__all__ = ["dataset_subset", "federated_data", "DataCache"]


def dataset_subset(cfg):
    """The dataset (or stratified subset) of ``cfg``, drawn with the run's ``partition`` seed."""
    return load_dataset(
        cfg.dataset,
        data_dir=cfg.data_dir,
        train_size=cfg.train_size,
        test_size=cfg.test_size,
        seed=purpose_seed(cfg.seed, "partition"),
    )


def federated_data(cfg, dataset=None) -> FederatedData:
    """The clients' data of ``cfg``, as :class:`~dfl_core.engine.Simulation` builds it (``dataset``: :func:`dataset_subset`)."""
    part_seed = purpose_seed(cfg.seed, "partition")
    if dataset is None:
        dataset = dataset_subset(cfg)
    return federate(
        dataset,
        cfg.num_clients,
        scheme=cfg.partition,
        alpha=cfg.alpha,
        shards_per_client=cfg.shards_per_client,
        dirichlet_method=cfg.dirichlet_method,
        rng=np.random.default_rng(part_seed),
        device=cfg.torch_device,
        dtype=cfg.torch_dtype,
    )


class DataCache:
    """:func:`federated_data` with memory: runs that differ only in the algorithm share their data.

    Loading and splitting a dataset is often the slowest part of a short run; a chapter that runs many algorithms
    over a few seeds loads each seed's subset once (``Simulation(cfg, data=cache(cfg))`` is then exactly
    ``Simulation(cfg)``).
    """

    DATA_FIELDS = ("dataset", "data_dir", "train_size", "test_size", "seed")
    SPLIT_FIELDS = ("num_clients", "partition", "alpha", "shards_per_client", "dirichlet_method", "device", "dtype")

    def __init__(self):
        self._datasets: dict[tuple, object] = {}
        self._splits: dict[tuple, FederatedData] = {}

    def __call__(self, cfg) -> FederatedData:
        key_data = tuple(getattr(cfg, f) for f in self.DATA_FIELDS)
        key = key_data + tuple(getattr(cfg, f) for f in self.SPLIT_FIELDS)
        if key not in self._splits:
            if key_data not in self._datasets:
                self._datasets[key_data] = dataset_subset(cfg)
            self._splits[key] = federated_data(cfg, self._datasets[key_data])
        return self._splits[key]
