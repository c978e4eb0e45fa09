"""Datasets, partitions among clients, the device-resident per-client layout, augmentation."""

from .augment import AUGMENTATIONS, black_fill, crop_flip, crop_flip_params
from .datasets import (
    DATASETS,
    DataError,
    Dataset,
    DatasetSpec,
    dataset_shape,
    load_dataset,
    read_idx,
    stratified_subset,
)
from .imagefiles import read_image_folder, scan_image_folder
from .imagefolder import image_folder_spec, register_image_folder
from .federated import ClientData, FederatedData, federate
from .partition import DIRICHLET_METHODS, PARTITIONS, dirichlet, iid, partition, shards, split_like

__all__ = [
    "AUGMENTATIONS",
    "black_fill",
    "crop_flip",
    "crop_flip_params",
    "DATASETS",
    "DataError",
    "Dataset",
    "DatasetSpec",
    "dataset_shape",
    "load_dataset",
    "read_idx",
    "stratified_subset",
    "ClientData",
    "FederatedData",
    "federate",
    "DIRICHLET_METHODS",
    "PARTITIONS",
    "dirichlet",
    "iid",
    "partition",
    "shards",
    "split_like",
    "image_folder_spec",
    "read_image_folder",
    "register_image_folder",
    "scan_image_folder",
]
