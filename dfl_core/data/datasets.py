"""The two datasets the book trains on, as in-memory tensors.

* ``digits``: the 8x8 handwritten digits bundled with scikit-learn (1797 images,
  no download), small enough for every cell of the book to run in seconds.
* ``fashion-mnist``: Xiao et al. (2017), 60000/10000 images 28x28, the
  drop-in MNIST replacement. Read from the original IDX files, which the Debian
  package ``dataset-fashion-mnist`` installs in ``/usr/share/datasets/fashion-mnist``.

Every bad input raises :class:`DataError`, whose message names the value and
what is allowed.
"""
from __future__ import annotations

import gzip
import zlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "DataError", "Dataset", "DATASETS", "load_dataset", "read_idx",
    "stratified_subset", "SYSTEM_FASHION_MNIST_DIR",
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


DATASETS: dict[str, str] = {
    "digits": "scikit-learn's 8x8 handwritten digits, 10 classes, 1438 train / 359 test (bundled, no download)",
    "fashion-mnist": "Fashion-MNIST 28x28 grey images, 10 classes, 60000 train / 10000 test "
                     "(Debian package dataset-fashion-mnist, --data-dir, or download)",
}

# Where the Debian package dataset-fashion-mnist puts the four .gz IDX files.
SYSTEM_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
# The mean and std of the Fashion-MNIST training pixels after /255 (the values
# every reference implementation normalizes with).
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530
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
        num_classes=10,
        input_shape=(1, 8, 8),
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
        num_classes=10,
        input_shape=(1, 28, 28),
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


_LOADERS = {"digits": lambda data_dir: _load_digits(), "fashion-mnist": _load_fashion_mnist}


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
