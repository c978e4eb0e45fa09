"""Datasets, partitions among clients, and the device-resident per-client layout."""
from .datasets import DATASETS, DataError, Dataset, load_dataset, read_idx, stratified_subset
from .federated import ClientData, FederatedData, federate
from .partition import DIRICHLET_METHODS, PARTITIONS, dirichlet, iid, partition, shards, split_like

__all__ = [
    "DATASETS", "DataError", "Dataset", "load_dataset", "read_idx", "stratified_subset",
    "ClientData", "FederatedData", "federate",
    "DIRICHLET_METHODS", "PARTITIONS", "dirichlet", "iid", "partition", "shards", "split_like",
]
