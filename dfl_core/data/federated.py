"""A dataset split among m clients, stored as padded index tensors on the device.

The engine trains all clients at once, so it never builds m per-client datasets: each split keeps its samples once,
and an ``(m, n_max)`` index matrix says which rows belong to which client. A batch for every client is then one
gather, ``x[index[i, j]]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .datasets import DataError, Dataset
from .partition import partition, split_like

__all__ = ["ClientData", "FederatedData", "federate"]


@dataclass
class ClientData:
    """One split (train or test) of all m clients, resident on the device."""

    x: torch.Tensor  # (N, *input_shape) all of the split's samples
    y: torch.Tensor  # (N,) int64
    index: torch.Tensor  # (m, n_max) int64: row i = client i's sample indices, 0-padded past counts[i]
    counts: torch.Tensor  # (m,) int64

    @classmethod
    def from_parts(cls, x: torch.Tensor, y: torch.Tensor, parts: list[np.ndarray]) -> "ClientData":
        """Pack per-client index arrays into the padded ``(m, n_max)`` layout (on ``x``'s device)."""
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        index = np.zeros((len(parts), int(counts.max(initial=0))), dtype=np.int64)
        for i, part in enumerate(parts):
            index[i, : len(part)] = part
        return cls(x=x, y=y, index=torch.from_numpy(index).to(x.device), counts=torch.from_numpy(counts).to(x.device))

    @property
    def m(self) -> int:
        return self.index.shape[0]

    @property
    def n_max(self) -> int:
        return self.index.shape[1]

    def mask(self) -> torch.Tensor:
        """(m, n_max) bool: True where ``index`` holds a real sample, False on padding."""
        positions = torch.arange(self.n_max, device=self.index.device)
        return positions[None, :] < self.counts[:, None]

    def client_indices(self) -> list[np.ndarray]:
        """The per-client index arrays back as numpy (the inverse of :meth:`from_parts`)."""
        index, counts = self.index.cpu().numpy(), self.counts.cpu().numpy()
        return [index[i, : counts[i]].copy() for i in range(self.m)]

    def label_histogram(self, num_classes: int) -> np.ndarray:
        """(m, C) int64: how many samples of each class each client holds."""
        labels = self.y[self.index]  # (m, n_max)
        rows = torch.arange(self.m, device=labels.device)[:, None].expand_as(labels)
        flat = (rows * num_classes + labels)[self.mask()]
        return torch.bincount(flat, minlength=self.m * num_classes).reshape(self.m, num_classes).cpu().numpy()


@dataclass
class FederatedData:
    """A dataset and its per-client train and test splits."""

    dataset: Dataset
    train: ClientData
    test: ClientData


def federate(
    dataset: Dataset,
    m: int,
    *,
    scheme: str = "dirichlet",
    alpha: float | None = 0.3,
    shards_per_client: int = 2,
    dirichlet_method: str = "prior",
    rng: np.random.Generator,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> FederatedData:
    """Partition ``dataset``'s training set among m clients and give each a matching test set.

    Train: :func:`~dfl_core.data.partition.partition` by ``scheme`` (alpha is used only by "dirichlet"). Test:
    :func:`~dfl_core.data.partition.split_like`, so each client is evaluated on its own label distribution (DisPFL's
    protocol); the global test set stays available as ``dataset.x_test``.
    """
    if not isinstance(dataset, Dataset):
        raise DataError(f"dataset must be a dfl_core.data.Dataset (from load_dataset); got {type(dataset).__name__}")
    y_train, y_test = dataset.y_train.cpu().numpy(), dataset.y_test.cpu().numpy()
    train_parts = partition(
        y_train,
        m,
        scheme,
        rng=rng,
        alpha=alpha if scheme == "dirichlet" else None,
        shards_per_client=shards_per_client,
        dirichlet_method=dirichlet_method,
    )
    test_parts = split_like(train_parts, y_train, y_test, rng)

    def on_device(x: torch.Tensor, y: torch.Tensor, parts: list[np.ndarray]) -> ClientData:
        return ClientData.from_parts(x.to(device=device, dtype=dtype), y.to(device=device, dtype=torch.int64), parts)

    return FederatedData(
        dataset=dataset,
        train=on_device(dataset.x_train, dataset.y_train, train_parts),
        test=on_device(dataset.x_test, dataset.y_test, test_parts),
    )
