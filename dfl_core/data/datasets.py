"""The datasets the book trains on, as in-memory normalized tensors.

* ``digits``: the 8x8 handwritten digits bundled with scikit-learn (1797 images,
  no download), small enough for every cell of the book to run in seconds.
* ``fashion-mnist``: Xiao et al. (2017), 60000/10000 images 28x28, the
  drop-in MNIST replacement. Read from the original IDX files, which the Debian
  package ``dataset-fashion-mnist`` installs in ``/usr/share/datasets/fashion-mnist``.
* ``mnist``, ``emnist``, ``cifar10``, ``cifar100``: the seed papers' datasets at
  full scale, read (and downloaded once, e.g. in Colab) through torchvision:
  MNIST for DFedAvgM, EMNIST ("byclass", 62 classes) for FedSAM/MoFedSAM,
  CIFAR-10/100 for DFedSAM, FedSAM/MoFedSAM and FedGF. CIFAR carries the
  ``crop-flip`` augmentation of the papers' code (:mod:`dfl_core.data.augment`).

Every bad input raises :class:`DataError`, whose message names the value and
what is allowed.
"""
from __future__ import annotations

import gzip
import zlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .augment import AUGMENTATIONS, black_fill

__all__ = [
    "DataError", "Dataset", "DATASETS", "dataset_shape", "load_dataset", "read_idx",
    "stratified_subset", "SYSTEM_FASHION_MNIST_DIR", "DEFAULT_ROOT", "EMNIST_SPLIT",
]


class DataError(ValueError):
    """A bad dataset name, size, file or partition argument."""


@dataclass
class Dataset:
    """A dataset as normalized tensors: train and test split, channel-first."""

    name: str
    x_train: torch.Tensor  # (N, *input_shape) float32, normalized
    y_train: torch.Tensor  # (N,) int64
    x_test: torch.Tensor  # (N_test, *input_shape) float32
    y_test: torch.Tensor  # (N_test,) int64
    num_classes: int
    input_shape: tuple[int, ...]  # (C, H, W)
    # Name of the training augmentation in dfl_core.data.augment.AUGMENTATIONS, or None.
    augmentation: str | None = None
    # Per-channel constants the pixels (in [0, 1]) were normalized with: x = (p - mean) / std.
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def augment(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """``x`` (..., C, H, W) through this dataset's augmentation (``x`` itself if none).

        Pads with the normalized value of black, ``-mean/std``, so the result equals
        torchvision's transform on the raw image followed by normalization.
        """
        if self.augmentation is None:
            return x
        fill = black_fill(self.mean, self.std) if self.mean is not None else 0.0
        return AUGMENTATIONS[self.augmentation](x, generator, fill=fill)


DATASETS: dict[str, str] = {
    "digits": "scikit-learn's 8x8 handwritten digits, 10 classes, 1438 train / 359 test (bundled, no download)",
    "fashion-mnist": "Fashion-MNIST 28x28 grey images, 10 classes, 60000 train / 10000 test "
                     "(Debian package dataset-fashion-mnist, --data-dir, or download)",
    "mnist": "MNIST 28x28 grey digits, 10 classes, 60000 train / 10000 test (--data-dir or torchvision download)",
    "emnist": "EMNIST split 'byclass' (digits and upper/lower-case letters, the 62 classes of the FedSAM/MoFedSAM "
              "paper), 28x28 grey, 697932 train / 116323 test (--data-dir or torchvision download)",
    "cifar10": "CIFAR-10 32x32 colour images, 10 classes, 50000 train / 10000 test, crop-flip augmentation "
               "(--data-dir or torchvision download)",
    "cifar100": "CIFAR-100 32x32 colour images, 100 (fine) classes, 50000 train / 10000 test, crop-flip "
                "augmentation (--data-dir or torchvision download)",
}

# (C, H, W) and classes of the datasets that are not read through torchvision.
_BUNDLED_SHAPES = {"digits": ((1, 8, 8), 10), "fashion-mnist": ((1, 28, 28), 10)}

# Where the torchvision datasets are kept (and downloaded to) when no data_dir is given.
DEFAULT_ROOT = "~/.cache/dfl_book"
# FedSAM/MoFedSAM (Qu et al. 2022) App. E.1: "EMNIST ... is a 62-class image classification
# dataset" -- of EMNIST's splits only "byclass" has 62 classes (Cohen et al. 2017, Table II).
EMNIST_SPLIT = "byclass"

# Where the Debian package dataset-fashion-mnist puts the four .gz IDX files.
SYSTEM_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
# The mean and std of the Fashion-MNIST training pixels after /255 (the values
# every reference implementation normalizes with).
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530
# Per-channel mean and std of each training set's pixels after /255. MNIST: the constants
# of pytorch/examples mnist/main.py. EMNIST uses MNIST's too: its own statistics differ
# a little, the seeds state none, and a fixed affine rescaling of the input does not
# change what a network can learn. CIFAR: DisPFL's transforms
# (fedml_api/data_preprocessing/cifar10|cifar100/data_loader.py), to 4 digits.
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
# The digits train/test split is part of the dataset's definition, so it uses
# its own fixed seed, not the run's.
DIGITS_SPLIT_SEED, DIGITS_TEST_FRACTION = 0, 0.2

_IDX_DTYPES = {0x08: np.dtype(np.uint8)}  # the only type the (Fashion-)MNIST files use
_FASHION_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


# ---------------------------------------------------------------------------
# IDX files
# ---------------------------------------------------------------------------

def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (LeCun's MNIST format), gzipped or plain.

    Layout: two zero bytes, a type code (0x08 = unsigned byte), the number of
    dimensions d, then d big-endian uint32 sizes and the data in C order.
    Gzip is recognized by its magic bytes, whatever the file is called.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"cannot read IDX file {str(path)!r}: {e}") from e
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"IDX file {str(path)!r} is a corrupt or truncated gzip file: {e}") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DataError(f"{str(path)!r} is not an IDX file: bad magic number {raw[:4].hex() or '(empty)'}, "
                        "expected 0000 then a type byte and a dimension count")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise DataError(f"IDX file {str(path)!r} has type code 0x{type_code:02x}; "
                        f"supported: {', '.join(f'0x{c:02x}' for c in _IDX_DTYPES)} (unsigned byte)")
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise DataError(f"IDX file {str(path)!r} is truncated: its header announces {ndim} dimensions "
                        f"but the file has {len(raw)} bytes")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(f"IDX file {str(path)!r} is truncated or padded: shape {shape} needs {expected} "
                        f"data bytes, found {len(raw) - header}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).copy()


def _find_idx_files(directory: Path) -> dict[str, Path] | None:
    """The four Fashion-MNIST IDX files in ``directory`` (``.gz`` or plain), or None."""
    found = {}
    for key, stem in _FASHION_FILES.items():
        for name in (stem + ".gz", stem):
            if (directory / name).is_file():
                found[key] = directory / name
                break
        else:
            return None
    return found


# ---------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------

def _load_digits() -> Dataset:
    """scikit-learn's digits: 0..16 -> [0, 1], then standardized with the train mean/std."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.data.astype(np.float32).reshape(-1, 1, 8, 8) / 16.0
    y = bunch.target.astype(np.int64)
    n_test = round(DIGITS_TEST_FRACTION * len(y))
    test_idx = stratified_subset(y, n_test, np.random.default_rng(DIGITS_SPLIT_SEED))
    is_test = np.zeros(len(y), dtype=bool)
    is_test[test_idx] = True
    x_train, y_train, x_test, y_test = x[~is_test], y[~is_test], x[is_test], y[is_test]
    # One scalar mean/std, from the train split only (no test statistics leak in).
    mean, std = x_train.mean(), x_train.std()
    return Dataset(
        name="digits",
        x_train=torch.from_numpy((x_train - mean) / std),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy((x_test - mean) / std),
        y_test=torch.from_numpy(y_test),
        input_shape=_BUNDLED_SHAPES["digits"][0],
        num_classes=_BUNDLED_SHAPES["digits"][1],
        mean=(float(mean),),
        std=(float(std),),
    )


def _fashion_from_arrays(x_train: np.ndarray, y_train: np.ndarray,
                         x_test: np.ndarray, y_test: np.ndarray) -> Dataset:
    """uint8 images (N, 28, 28) and labels -> a normalized :class:`Dataset`."""
    for name, x in (("train", x_train), ("test", x_test)):
        if x.ndim != 3 or x.shape[1:] != (28, 28):
            raise DataError(f"Fashion-MNIST {name} images have shape {x.shape}; expected (N, 28, 28)")
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if y.shape != (len(x),):
            raise DataError(f"Fashion-MNIST {name} labels have shape {y.shape}; expected ({len(x)},)")
        if y.size and y.max() > 9:
            raise DataError(f"Fashion-MNIST {name} labels contain {int(y.max())}; expected 0..9")

    def normalize(x: np.ndarray) -> torch.Tensor:
        x = x.astype(np.float32)[:, None] / 255.0  # (N, 1, 28, 28)
        return torch.from_numpy((x - FASHION_MNIST_MEAN) / FASHION_MNIST_STD)

    return Dataset(
        name="fashion-mnist",
        x_train=normalize(x_train),
        y_train=torch.from_numpy(y_train.astype(np.int64)),
        x_test=normalize(x_test),
        y_test=torch.from_numpy(y_test.astype(np.int64)),
        input_shape=_BUNDLED_SHAPES["fashion-mnist"][0],
        num_classes=_BUNDLED_SHAPES["fashion-mnist"][1],
        mean=(FASHION_MNIST_MEAN,),
        std=(FASHION_MNIST_STD,),
    )


def _load_fashion_mnist(data_dir: str | None) -> Dataset:
    """Fashion-MNIST from, in order: ``data_dir``; the Debian package's directory; a download."""
    candidates = []
    if data_dir is not None:
        # Also look where an earlier torchvision download left the raw files.
        candidates += [Path(data_dir).expanduser(), Path(data_dir).expanduser() / "FashionMNIST" / "raw"]
    candidates.append(Path(SYSTEM_FASHION_MNIST_DIR))
    for directory in candidates:
        files = _find_idx_files(directory)
        if files is not None:
            arrays = {key: read_idx(path) for key, path in files.items()}
            return _fashion_from_arrays(arrays["train_images"], arrays["train_labels"],
                                        arrays["test_images"], arrays["test_labels"])
    # Last resort, for users online (e.g. Colab): torchvision downloads the same IDX files.
    root = Path(data_dir or "~/.cache/dfl_book").expanduser()
    try:
        from torchvision.datasets import FashionMNIST

        train = FashionMNIST(root=str(root), train=True, download=True)
        test = FashionMNIST(root=str(root), train=False, download=True)
    except Exception as e:  # no torchvision, no network, a mirror down: all mean the same to the user
        raise DataError(
            f"Fashion-MNIST not found in {', '.join(str(c) for c in candidates)} and the download to "
            f"{str(root)!r} failed ({type(e).__name__}: {e}). Install it with "
            "'apt-get install dataset-fashion-mnist' (Debian/Ubuntu), or pass data_dir= a directory holding "
            + ", ".join(f"{s}.gz" for s in _FASHION_FILES.values())
        ) from e
    return _fashion_from_arrays(train.data.numpy(), train.targets.numpy(),
                                test.data.numpy(), test.targets.numpy())


@dataclass(frozen=True)
class _TorchvisionSpec:
    """How to read one torchvision dataset and what it becomes."""

    title: str  # for messages
    cls: str  # class name in torchvision.datasets
    options: dict  # extra constructor arguments (the EMNIST split)
    input_shape: tuple[int, int, int]  # (C, H, W)
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    augmentation: str | None
    files: str  # what data_dir must hold, for the error message


_TORCHVISION = {
    "mnist": _TorchvisionSpec(
        "MNIST", "MNIST", {}, (1, 28, 28), 10, MNIST_MEAN, MNIST_STD, None,
        "MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (torchvision's layout), "
        "or those four files, plain or .gz, directly"),
    "emnist": _TorchvisionSpec(
        f"EMNIST ({EMNIST_SPLIT})", "EMNIST", {"split": EMNIST_SPLIT}, (1, 28, 28), 62, MNIST_MEAN, MNIST_STD,
        None, f"EMNIST/raw/emnist-{EMNIST_SPLIT}-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte"),
    "cifar10": _TorchvisionSpec(
        "CIFAR-10", "CIFAR10", {}, (3, 32, 32), 10, CIFAR10_MEAN, CIFAR10_STD, "crop-flip",
        "cifar-10-batches-py/ (unpacked from cifar-10-python.tar.gz)"),
    "cifar100": _TorchvisionSpec(
        "CIFAR-100", "CIFAR100", {}, (3, 32, 32), 100, CIFAR100_MEAN, CIFAR100_STD, "crop-flip",
        "cifar-100-python/ (unpacked from cifar-100-python.tar.gz)"),
}


def dataset_shape(name: str) -> tuple[tuple[int, int, int], int]:
    """``(input_shape, num_classes)`` of a dataset of :data:`DATASETS`, without loading it."""
    if name in _BUNDLED_SHAPES:
        return _BUNDLED_SHAPES[name]
    if name in _TORCHVISION:
        return _TORCHVISION[name].input_shape, _TORCHVISION[name].num_classes
    raise DataError(f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}")


def _normalize_images(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 images (N, C, H, W), possibly a strided view -> float32 ``(x/255 - mean) / std``.

    Written into one fresh contiguous float32 tensor and then updated in place, so the
    50000 CIFAR images cost one 600 MB buffer, not three.
    """
    out = torch.empty(x.shape, dtype=torch.float32).copy_(x)
    c = x.shape[1]
    mean_t = torch.tensor(mean, dtype=torch.float32).reshape(1, c, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).reshape(1, c, 1, 1)
    return out.div_(255.0).sub_(mean_t).div_(std_t)


def _from_uint8(name: str, spec: _TorchvisionSpec, x_train: torch.Tensor, y_train: torch.Tensor,
                x_test: torch.Tensor, y_test: torch.Tensor) -> Dataset:
    """uint8 images (N, C, H, W) and integer labels -> a normalized :class:`Dataset`, checked."""
    for split, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.dtype != torch.uint8 or tuple(x.shape[1:]) != spec.input_shape:
            raise DataError(f"{spec.title} {split} images are {x.dtype} of shape {tuple(x.shape)}; "
                            f"expected uint8 (N, {', '.join(map(str, spec.input_shape))})")
        if tuple(y.shape) != (len(x),):
            raise DataError(f"{spec.title} {split} labels have shape {tuple(y.shape)}; expected ({len(x)},)")
        if y.numel() and not (0 <= int(y.min()) and int(y.max()) < spec.num_classes):
            raise DataError(f"{spec.title} {split} labels span {int(y.min())}..{int(y.max())}; "
                            f"expected 0..{spec.num_classes - 1}")
    return Dataset(
        name=name,
        x_train=_normalize_images(x_train, spec.mean, spec.std),
        y_train=y_train.to(torch.int64),
        x_test=_normalize_images(x_test, spec.mean, spec.std),
        y_test=y_test.to(torch.int64),
        num_classes=spec.num_classes,
        input_shape=spec.input_shape,
        augmentation=spec.augmentation,
        mean=spec.mean,
        std=spec.std,
    )


def _images_labels(name: str, split) -> tuple[torch.Tensor, torch.Tensor]:
    """A torchvision dataset's stored arrays as (uint8 (N, C, H, W), int64 (N,)); no DataLoader."""
    if name in ("mnist", "emnist"):
        x = split.data  # uint8 tensor (N, 28, 28) exactly as stored in the IDX file
        if name == "emnist":
            # The EMNIST IDX files were converted from NIST's column-major MATLAB arrays,
            # so every image is stored transposed (Cohen et al. 2017; torchvision leaves
            # .data as stored). Transpose back so characters stand upright, as in MNIST.
            x = x.transpose(1, 2)
        return x[:, None], split.targets.to(torch.int64)
    # CIFAR: a numpy uint8 array (N, 32, 32, 3), channels last, and a list of ints.
    return torch.from_numpy(split.data).permute(0, 3, 1, 2), torch.as_tensor(split.targets, dtype=torch.int64)


def _load_torchvision(name: str, data_dir: str | None) -> Dataset:
    """One of MNIST, EMNIST, CIFAR-10/100 through torchvision, from disk if present, else downloaded.

    ``data_dir`` (default :data:`DEFAULT_ROOT`) is torchvision's ``root``. The files
    are tried with ``download=False`` first, so a copy already on disk is used without
    touching the network; MNIST also accepts the four IDX files directly in
    ``data_dir`` (the layout of the Debian Fashion-MNIST package).
    """
    spec = _TORCHVISION[name]
    root = Path(data_dir or DEFAULT_ROOT).expanduser()
    try:
        import torchvision.datasets as tv_datasets
    except ImportError as e:
        raise DataError(f"dataset {name!r} is read through torchvision, which is not installed: "
                        "pip install torchvision") from e
    cls = getattr(tv_datasets, spec.cls)

    def both(download: bool):
        return [cls(root=str(root), train=train, download=download, **spec.options) for train in (True, False)]

    try:
        splits = both(download=False)
    except RuntimeError as e:  # torchvision's "Dataset not found (or corrupted)"
        absent = e
    except Exception as e:  # present but unreadable (truncated IDX, bad pickle, ...)
        raise DataError(f"{spec.title} files under {str(root)!r} could not be read ({type(e).__name__}: {e}); "
                        "delete them to download afresh, or pass data_dir= a directory holding "
                        f"{spec.files}") from e
    else:
        return _from_uint8(name, spec, *_images_labels(name, splits[0]), *_images_labels(name, splits[1]))

    if name == "mnist" and data_dir is not None:
        files = _find_idx_files(Path(data_dir).expanduser())
        if files is not None:
            arrays = {key: torch.from_numpy(read_idx(path)) for key, path in files.items()}
            return _from_uint8(name, spec, arrays["train_images"][:, None], arrays["train_labels"],
                               arrays["test_images"][:, None], arrays["test_labels"])
    # Not on disk: download (users online, e.g. in Colab, get it once into root).
    try:
        splits = both(download=True)
    except Exception as e:  # no network, a mirror down, a bad checksum: all mean the same to the user
        raise DataError(
            f"{spec.title} is not in {str(root)!r} ({absent}) and the download failed "
            f"({type(e).__name__}: {e}). Run once with network access (e.g. in Colab) to download it to "
            f"{DEFAULT_ROOT}, or pass data_dir= a directory holding {spec.files}"
        ) from e
    return _from_uint8(name, spec, *_images_labels(name, splits[0]), *_images_labels(name, splits[1]))


_LOADERS = {"digits": lambda data_dir: _load_digits(), "fashion-mnist": _load_fashion_mnist,
            **{name: (lambda data_dir, name=name: _load_torchvision(name, data_dir)) for name in _TORCHVISION}}


def stratified_subset(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``size`` samples, each class kept in proportion to its count.

    Per-class counts are ``size * n_c / N`` rounded by largest remainder (ties broken
    at random), so they add up to exactly ``size``; samples within a class are random.
    """
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    quota = size * counts / len(labels)
    take = np.floor(quota).astype(np.int64)
    short = size - int(take.sum())
    if short:
        # Largest remainder first; a random key breaks ties without favouring low labels.
        order = np.lexsort((rng.random(len(classes)), -(quota - take)))
        take[order[:short]] += 1
    chosen = [rng.choice(np.flatnonzero(labels == c), size=k, replace=False)
              for c, k in zip(classes, take)]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def _check_size(value, available: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DataError(f"{what}={value!r} must be an integer in 1..{available} (or None for all)")
    if not 1 <= value <= available:
        raise DataError(f"{what}={value} is not available: allowed 1..{available} (or None for all)")
    return int(value)


def load_dataset(name: str, *, data_dir: str | None = None, train_size: int | None = None,
                 test_size: int | None = None, seed: int = 0) -> Dataset:
    """Load a dataset of :data:`DATASETS` as normalized tensors.

    ``data_dir``: where the files are (for the torchvision datasets, torchvision's
    ``root``, default :data:`DEFAULT_ROOT`, where a missing dataset is downloaded to).

    ``train_size`` / ``test_size`` take a stratified random subset of each split
    (seeded by ``seed``), for fast runs; they must not exceed what is available.
    """
    if name not in _LOADERS:
        raise DataError(f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}")
    ds = _LOADERS[name](data_dir)
    rng = np.random.default_rng(seed)
    if train_size is not None:
        k = _check_size(train_size, len(ds.y_train), "train_size")
        idx = torch.from_numpy(stratified_subset(ds.y_train.numpy(), k, rng))
        ds.x_train, ds.y_train = ds.x_train[idx], ds.y_train[idx]
    if test_size is not None:
        k = _check_size(test_size, len(ds.y_test), "test_size")
        idx = torch.from_numpy(stratified_subset(ds.y_test.numpy(), k, rng))
        ds.x_test, ds.y_test = ds.x_test[idx], ds.y_test[idx]
    return ds
