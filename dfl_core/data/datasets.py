"""The datasets the book trains on, as in-memory normalized tensors: a registry of specs.

:data:`DATASETS` maps each name to a :class:`DatasetSpec`, one frozen entry that holds everything about the dataset.
Adding a dataset is adding one entry: :func:`load_dataset`, the config, the CLI and the book's tables read the registry.

* ``digits``: the 8x8 handwritten digits bundled with scikit-learn (1797 images, no download), small enough for
  every cell of the book to run quickly on a CPU.
* ``fashion-mnist``: Xiao et al. (2017), 60000/10000 images 28x28, the drop-in MNIST replacement. Read from the
  original IDX files, which the Debian package ``dataset-fashion-mnist`` installs in
  ``/usr/share/datasets/fashion-mnist``.
* ``mnist``, ``emnist``, ``cifar10``, ``cifar100``: the seed papers' datasets at full scale, read (and downloaded
  once, e.g. in Colab) through torchvision: MNIST for DFedAvgM, EMNIST ("byclass", 62 classes) for FedSAM/MoFedSAM,
  CIFAR-10/100 for DFedSAM, FedSAM/MoFedSAM and FedGF. CIFAR carries the ``crop-flip`` augmentation of the papers'
  code (:mod:`dfl_core.data.augment`). ``cifar10`` also reads the ImageFolder layout (``train/<class>/*.jpg``,
  ``test/<class>/*.jpg``) from its ``data_dir``, e.g. the CIFAR-10 JPEG copy (:mod:`dfl_core.data.imagefiles`).
* Your own images: :func:`~dfl_core.data.imagefolder.register_image_folder` adds a folder in the ImageFolder layout
  as an entry of its own (on the command line, ``--dataset imagefolder --data-dir DIR``).

``data_dir``: a folder the user names must exist (it is never created and never silently replaced by another copy);
without one, Fashion-MNIST comes from the Debian package's folder and every downloadable dataset from (or is
downloaded to) :data:`DEFAULT_ROOT`. The bundled digits read no files and refuse a ``data_dir``.

Every bad input raises :class:`DataError`, whose message names the value and what is allowed. Messages spell
arguments as the Python API does (``data_dir=``); the command line rewrites them as its flags (``--data-dir``).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from .augment import AUGMENTATIONS, black_fill
from .errors import DataError
from .imagefiles import read_image_folder

__all__ = [
    "DataError",
    "Dataset",
    "DatasetSpec",
    "DATASETS",
    "dataset_shape",
    "load_dataset",
    "read_idx",
    "stratified_subset",
    "normalize_images",
    "SYSTEM_FASHION_MNIST_DIR",
    "DEFAULT_ROOT",
    "EMNIST_SPLIT",
    "CIFAR10_CLASSES",
]


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

    def augment(
        self,
        x: torch.Tensor,
        generator: torch.Generator,
        *,
        rows: torch.Tensor | None = None,
        num_rows: int | None = None,
    ) -> torch.Tensor:
        """``x`` (..., C, H, W) through this dataset's augmentation (``x`` itself if none), padded with black as
        torchvision pads the raw image (:func:`~.augment.crop_flip`'s ``fill``).

        ``rows``/``num_rows``: ``x`` is ``(n, ...)``, the rows ``rows`` of ``num_rows`` clients; the draws are made
        for all ``num_rows`` and indexed by ``rows``, so a client's augmentation does not depend on the others
        (:func:`~.augment.crop_flip`)."""
        if self.augmentation is None:
            return x
        fill = black_fill(self.mean, self.std) if self.mean is not None else 0.0
        return AUGMENTATIONS[self.augmentation](x, generator, fill=fill, rows=rows, num_rows=num_rows)


# Where the downloadable datasets are kept (and downloaded to) when no data_dir is given.
DEFAULT_ROOT = "~/.cache/dfl_book"
# FedSAM/MoFedSAM (Qu et al. 2022) App. E.1: "EMNIST ... is a 62-class image classification
# dataset" -- of EMNIST's splits only "byclass" has 62 classes (Cohen et al. 2017, Table II).
EMNIST_SPLIT = "byclass"

# Where the Debian package dataset-fashion-mnist puts the four .gz IDX files.
SYSTEM_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
# The mean and std of the Fashion-MNIST training pixels after /255 (the values
# every reference implementation normalizes with).
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530
# Per-channel mean and std of each training set's pixels after /255. MNIST: the constants of pytorch/examples
# mnist/main.py. EMNIST uses MNIST's too: its own statistics differ a little, the seeds state none, and a fixed
# affine rescaling of the input does not change what a network can learn. CIFAR: DisPFL's transforms
# (fedml_api/data_preprocessing/cifar10|cifar100/data_loader.py), to 4 digits.
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
# CIFAR-10's label names in label order (batches.meta), which is also their sorted order: an ImageFolder copy
# numbers its class folders the same way.
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# The digits train/test split is part of the dataset's definition, so it uses its own fixed seed, not the run's.
DIGITS_SPLIT_SEED, DIGITS_TEST_FRACTION = 0, 0.2

_IDX_DTYPES = {0x08: np.dtype(np.uint8)}  # the only type the (Fashion-)MNIST files use
_FASHION_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


# ---------------------------------------------------------------------------------------- IDX files
def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (LeCun's MNIST format), gzipped or plain.

    Layout: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions d, then d big-endian uint32
    sizes and the data in C order. Gzip is recognized by its magic bytes, whatever the file is called.
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
        raise DataError(
            f"{str(path)!r} is not an IDX file: bad magic number {raw[:4].hex() or '(empty)'}, "
            "expected 0000 then a type byte and a dimension count"
        )
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise DataError(
            f"IDX file {str(path)!r} has type code 0x{type_code:02x}; "
            f"supported: {', '.join(f'0x{c:02x}' for c in _IDX_DTYPES)} (unsigned byte)"
        )
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise DataError(
            f"IDX file {str(path)!r} is truncated: its header announces {ndim} dimensions "
            f"but the file has {len(raw)} bytes"
        )
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(
            f"IDX file {str(path)!r} is truncated or padded: shape {shape} needs {expected} "
            f"data bytes, found {len(raw) - header}"
        )
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


# ---------------------------------------------------------------------------- The spec of a dataset
#: How a spec reads its dataset: ``reader(spec, folder)`` returns the whole dataset, normalized; ``folder`` is the
#: existing directory the user named (``data_dir``), or None for the dataset's default place.
Reader = Callable[["DatasetSpec", "Path | None"], Dataset]


@dataclass(frozen=True)
class DatasetSpec:
    """Everything about one dataset: one entry of :data:`DATASETS`.

    :meth:`load` checks ``data_dir``, calls ``reader`` and checks that what it returns has this spec's shape,
    classes, dtypes, augmentation and split sizes, so an entry cannot silently disagree with the data it reads
    (``Config`` turns ``train_size`` into the steps K of a local epoch before anything is loaded).
    """

    name: str  # the key in DATASETS (--dataset NAME)
    title: str  # how messages name it, e.g. "CIFAR-10"
    description: str  # what it is: the start of `summary`
    source: str  # where it comes from: the end of `summary`
    input_shape: tuple[int, int, int]  # (C, H, W)
    num_classes: int
    train_size: int  # samples in the whole train split
    test_size: int  # samples in the whole test split
    reader: Reader = field(repr=False)
    files: str | None = None  # what a data_dir must hold; None: bundled, reads no files
    default_place: str = ""  # where the data comes from without a data_dir (for messages)
    augmentation: str | None = None  # training augmentation, a key of AUGMENTATIONS
    mean: tuple[float, ...] | None = None  # fixed per-channel normalization of pixels in [0, 1],
    std: tuple[float, ...] | None = None  # x = (p - mean) / std; None: the reader computes its own

    @property
    def summary(self) -> str:
        """The one-line description of ``python -m dfl_core list`` and ``run --help``."""
        augmentation = f", {self.augmentation} augmentation" if self.augmentation else ""
        return (
            f"{self.description}, {self.num_classes} classes, {self.train_size} train / {self.test_size} test"
            f"{augmentation} ({self.source})"
        )

    def load(self, data_dir: str | os.PathLike | None = None) -> Dataset:
        """The whole dataset, from ``data_dir`` (an existing folder) or, without one, from its default place."""
        dataset = self.reader(self, self._folder(data_dir))
        self._check(dataset)
        return dataset

    def _folder(self, data_dir: str | os.PathLike | None) -> Path | None:
        """``data_dir`` as an existing directory; refused before anything is read, created or downloaded."""
        if data_dir is None:
            return None
        if self.files is None:
            raise DataError(
                f"dataset {self.name!r} ({self.source}) reads no files, so data_dir={str(data_dir)!r} "
                "would be ignored; give no data_dir="
            )
        folder = Path(data_dir).expanduser()
        if not folder.is_dir():
            problem = "is not a directory" if folder.exists() else "does not exist"
            raise DataError(
                f"data_dir={str(data_dir)!r} {problem}; give an existing folder holding {self.files} "
                f"(or no data_dir= to use {self.default_place})"
            )
        return folder

    def _check(self, ds: Dataset) -> None:
        """What the reader returned matches this spec (a broken new entry fails here, naming itself)."""
        if not isinstance(ds, Dataset):
            raise DataError(f"the reader of {self.title} returned a {type(ds).__name__}, not a Dataset")
        shape = ", ".join(map(str, self.input_shape))
        for split, x, y in (("train", ds.x_train, ds.y_train), ("test", ds.x_test, ds.y_test)):
            if x.dtype != torch.float32 or tuple(x.shape[1:]) != self.input_shape:
                raise DataError(
                    f"{self.title} {split} images are {x.dtype} of shape {tuple(x.shape)}; "
                    f"expected float32 (N, {shape})"
                )
            if y.dtype != torch.int64 or tuple(y.shape) != (len(x),):
                raise DataError(
                    f"{self.title} {split} labels are {y.dtype} of shape {tuple(y.shape)}; expected int64 ({len(x)},)"
                )
            if y.numel() and not (0 <= int(y.min()) and int(y.max()) < self.num_classes):
                raise DataError(
                    f"{self.title} {split} labels span {int(y.min())}..{int(y.max())}; "
                    f"expected 0..{self.num_classes - 1}"
                )
        loaded = (len(ds.y_train), len(ds.y_test))
        if loaded != (self.train_size, self.test_size):
            raise DataError(
                f"{self.title} loaded {loaded[0]} train / {loaded[1]} test samples; its entry declares "
                f"{self.train_size} / {self.test_size}: the files read are not the whole dataset (or "
                "the entry's train_size/test_size are wrong)"
            )
        found = (ds.name, tuple(ds.input_shape), ds.num_classes, ds.augmentation)
        if found != (self.name, self.input_shape, self.num_classes, self.augmentation):
            raise DataError(
                f"the reader of {self.title} returned (name, input_shape, num_classes, augmentation) = "
                f"{found}; its spec says {(self.name, self.input_shape, self.num_classes, self.augmentation)}"
            )


# ------------------------------------------------------------------------------------------ Readers
def _read_digits(spec: DatasetSpec, folder: Path | None) -> Dataset:
    """scikit-learn's digits: 0..16 -> [0, 1], then standardized with the train mean/std."""
    from sklearn.datasets import load_digits  # deferred: a second to import; only digits needs it

    bunch = load_digits()
    x = bunch.data.astype(np.float32).reshape(-1, *spec.input_shape) / 16.0
    y = bunch.target.astype(np.int64)
    n_test = round(DIGITS_TEST_FRACTION * len(y))
    test_idx = stratified_subset(y, n_test, np.random.default_rng(DIGITS_SPLIT_SEED))
    is_test = np.zeros(len(y), dtype=bool)
    is_test[test_idx] = True
    x_train, y_train, x_test, y_test = x[~is_test], y[~is_test], x[is_test], y[is_test]
    # One scalar mean/std, from the train split only (no test statistics leak in).
    mean, std = x_train.mean(), x_train.std()
    return Dataset(
        name=spec.name,
        x_train=torch.from_numpy((x_train - mean) / std),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy((x_test - mean) / std),
        y_test=torch.from_numpy(y_test),
        num_classes=spec.num_classes,
        input_shape=spec.input_shape,
        mean=(float(mean),),
        std=(float(std),),
    )


def normalize_images(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 images (N, C, H, W), possibly a strided view -> float32 ``(x/255 - mean) / std``.

    Written into one fresh contiguous float32 tensor and then updated in place, so the
    50000 CIFAR images cost one 600 MB buffer, not three.
    """
    out = torch.empty(x.shape, dtype=torch.float32).copy_(x)
    c = x.shape[1]
    mean_t = torch.tensor(mean, dtype=torch.float32).reshape(1, c, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).reshape(1, c, 1, 1)
    return out.div_(255.0).sub_(mean_t).div_(std_t)


def _from_uint8(
    spec: DatasetSpec, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor
) -> Dataset:
    """uint8 images (N, C, H, W) and integer labels -> a :class:`Dataset` normalized by the spec's mean/std."""
    for split, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.dtype != torch.uint8 or tuple(x.shape[1:]) != spec.input_shape:
            raise DataError(
                f"{spec.title} {split} images are {x.dtype} of shape {tuple(x.shape)}; "
                f"expected uint8 (N, {', '.join(map(str, spec.input_shape))})"
            )
    return Dataset(
        name=spec.name,
        x_train=normalize_images(x_train, spec.mean, spec.std),
        y_train=y_train.to(torch.int64),
        x_test=normalize_images(x_test, spec.mean, spec.std),
        y_test=y_test.to(torch.int64),
        num_classes=spec.num_classes,
        input_shape=spec.input_shape,
        augmentation=spec.augmentation,
        mean=spec.mean,
        std=spec.std,
    )


def _from_idx_files(spec: DatasetSpec, files: dict[str, Path]) -> Dataset:
    """The four (Fashion-)MNIST IDX files found by :func:`_find_idx_files` -> a normalized :class:`Dataset`."""
    arrays = {key: torch.from_numpy(read_idx(path)) for key, path in files.items()}
    for key in ("train_images", "test_images"):
        if arrays[key].ndim != 3:
            raise DataError(
                f"{spec.title} {key.replace('_', ' ')} in {str(files[key])!r} have shape "
                f"{tuple(arrays[key].shape)}; expected (N, {spec.input_shape[1]}, {spec.input_shape[2]})"
            )
    return _from_uint8(
        spec,
        arrays["train_images"][:, None],
        arrays["train_labels"],
        arrays["test_images"][:, None],
        arrays["test_labels"],
    )


def _read_fashion_mnist(spec: DatasetSpec, folder: Path | None) -> Dataset:
    """Fashion-MNIST's IDX files.

    From the folder named (or its torchvision layout ``FashionMNIST/raw``), else downloaded into it; without one,
    from the Debian package's directory, else downloaded to :data:`DEFAULT_ROOT`. A folder the user named is never
    swapped for the system copy.
    """
    # (FashionMNIST/raw: where a torchvision download left them)
    candidates = [folder, folder / "FashionMNIST" / "raw"] if folder is not None else [Path(SYSTEM_FASHION_MNIST_DIR)]
    for directory in candidates:
        files = _find_idx_files(directory)
        if files is not None:
            return _from_idx_files(spec, files)
    # Last resort, for users online (e.g. Colab): torchvision downloads the same IDX files.
    root = folder if folder is not None else Path(DEFAULT_ROOT).expanduser()
    try:
        from torchvision.datasets import FashionMNIST  # deferred: optional; only this download needs it

        train = FashionMNIST(root=str(root), train=True, download=True)
        test = FashionMNIST(root=str(root), train=False, download=True)
    except Exception as e:  # no torchvision, no network, a mirror down: all mean the same to the user
        where = ", ".join(repr(str(c)) for c in candidates)
        if folder is not None:
            advice = (
                f"Put {spec.files} in {str(folder)!r}, or give no data_dir= to use the Debian package's copy "
                "('apt-get install dataset-fashion-mnist')"
            )
        else:
            advice = (
                "Install it with 'apt-get install dataset-fashion-mnist' (Debian/Ubuntu), or pass data_dir= "
                f"a directory holding {spec.files}"
            )
        raise DataError(
            f"Fashion-MNIST not found in {where} and the download to {str(root)!r} failed "
            f"({type(e).__name__}: {e}). {advice}"
        ) from e
    return _from_uint8(spec, train.data[:, None], train.targets, test.data[:, None], test.targets)


def _split_arrays(split, transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A torchvision dataset's stored arrays as (uint8 (N, C, H, W), int64 (N,)); no DataLoader."""
    if isinstance(split.data, np.ndarray):
        # CIFAR: a numpy uint8 array (N, 32, 32, 3), channels last, and a list of ints.
        return torch.from_numpy(split.data).permute(0, 3, 1, 2), torch.as_tensor(split.targets, dtype=torch.int64)
    x = split.data  # (E)MNIST: a uint8 tensor (N, 28, 28) exactly as stored in the IDX file
    if transposed:
        x = x.transpose(1, 2)
    return x[:, None], split.targets.to(torch.int64)


def _read_torchvision(
    cls_name: str,
    spec: DatasetSpec,
    folder: Path | None,
    *,
    options: dict | None = None,
    transposed: bool = False,
    flat_idx_files: bool = False,
) -> Dataset:
    """``torchvision.datasets.<cls_name>`` with ``root`` = the folder named, or :data:`DEFAULT_ROOT`.

    The files are tried with ``download=False`` first, so a copy already on disk is used without touching the
    network; then, with ``flat_idx_files``, the four IDX files directly in the folder named (the layout of the
    Debian Fashion-MNIST package); then a download into ``root``. ``transposed``: the images are stored transposed
    (EMNIST) and are turned upright.
    """
    root = folder if folder is not None else Path(DEFAULT_ROOT).expanduser()
    try:
        import torchvision.datasets as tv_datasets  # deferred: optional (the error below says so)
    except ImportError as e:
        raise DataError(
            f"dataset {spec.name!r} is read through torchvision, which is not installed: pip install torchvision"
        ) from e
    cls = getattr(tv_datasets, cls_name)

    def both(download: bool):
        return [cls(root=str(root), train=train, download=download, **(options or {})) for train in (True, False)]

    def dataset(splits) -> Dataset:
        return _from_uint8(spec, *_split_arrays(splits[0], transposed), *_split_arrays(splits[1], transposed))

    try:
        splits = both(download=False)
    except RuntimeError as e:  # torchvision's "Dataset not found (or corrupted)"
        absent = e
    except Exception as e:  # present but unreadable (truncated IDX, bad pickle, ...)
        raise DataError(
            f"{spec.title} files under {str(root)!r} could not be read ({type(e).__name__}: {e}); "
            f"delete them to download afresh, or pass data_dir= a directory holding {spec.files}"
        ) from e
    else:
        return dataset(splits)

    if flat_idx_files and folder is not None:
        files = _find_idx_files(folder)
        if files is not None:
            return _from_idx_files(spec, files)
    # Not on disk: download (users online, e.g. in Colab, get it once into root).
    try:
        splits = both(download=True)
    except Exception as e:  # no network, a mirror down, a bad checksum: all mean the same to the user
        raise DataError(
            f"{spec.title} is not in {str(root)!r} ({absent}) and the download failed "
            f"({type(e).__name__}: {e}). Run once with network access (e.g. in Colab) to download it to "
            f"{str(root)!r}, or pass data_dir= a directory holding {spec.files}"
        ) from e
    return dataset(splits)


def _read_cifar10(spec: DatasetSpec, folder: Path | None) -> Dataset:
    """CIFAR-10 from the ImageFolder layout when ``folder`` holds ``train/`` and ``test/`` (e.g. the JPEG copy),
    else torchvision's pickles (:func:`_read_torchvision`)."""
    if folder is not None and (folder / "train").is_dir() and (folder / "test").is_dir():
        return _read_cifar_folder(spec, folder, CIFAR10_CLASSES)
    return _read_torchvision("CIFAR10", spec, folder)


def _read_cifar_folder(spec: DatasetSpec, folder: Path, classes: Sequence[str]) -> Dataset:
    """A CIFAR entry's data from a folder in the ImageFolder layout (:mod:`.imagefiles`), e.g. the JPEG copy.

    The class folders must be exactly ``classes`` (the dataset's label names, whose sorted order is its label
    order); the images are normalized with the entry's own constants and get its augmentation; :meth:`DatasetSpec.load`
    checks the entry's sizes. A copy re-encoded as JPEG is not bit-exact: say which copy a result used.
    """
    found, arrays = read_image_folder(folder, spec.input_shape[0])
    if found != tuple(classes):
        raise DataError(
            f"{spec.title} from {str(folder)!r}: the class folders are {', '.join(found)}; "
            f"{spec.title} needs exactly {', '.join(classes)}"
        )
    (x_train, y_train), (x_test, y_test) = arrays["train"], arrays["test"]
    return _from_uint8(
        spec, torch.from_numpy(x_train), torch.from_numpy(y_train), torch.from_numpy(x_test), torch.from_numpy(y_test)
    )


# ------------------------------------------------------------------------------------- The registry
_DOWNLOADED = f"{DEFAULT_ROOT}, where it is downloaded on first use"

DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec(
            name="digits",
            title="scikit-learn's digits",
            description="scikit-learn's 8x8 handwritten digits",
            source="bundled, no download",
            input_shape=(1, 8, 8),
            num_classes=10,
            train_size=1438,
            test_size=359,
            reader=_read_digits,
        ),
        DatasetSpec(
            name="fashion-mnist",
            title="Fashion-MNIST",
            description="Fashion-MNIST 28x28 grey images",
            source="Debian package dataset-fashion-mnist, --data-dir, or download",
            input_shape=(1, 28, 28),
            num_classes=10,
            train_size=60_000,
            test_size=10_000,
            reader=_read_fashion_mnist,
            files=", ".join(f"{stem}.gz" for stem in _FASHION_FILES.values()) + " (or unzipped)",
            default_place=f"the Debian package's copy in {SYSTEM_FASHION_MNIST_DIR}, else a download to {DEFAULT_ROOT}",
            mean=(FASHION_MNIST_MEAN,),
            std=(FASHION_MNIST_STD,),
        ),
        DatasetSpec(
            name="mnist",
            title="MNIST",
            description="MNIST 28x28 grey digits",
            source="--data-dir or torchvision download",
            input_shape=(1, 28, 28),
            num_classes=10,
            train_size=60_000,
            test_size=10_000,
            reader=partial(_read_torchvision, "MNIST", flat_idx_files=True),
            files="MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (torchvision's layout), "
            "or those four files, plain or .gz, directly",
            default_place=_DOWNLOADED,
            mean=MNIST_MEAN,
            std=MNIST_STD,
        ),
        DatasetSpec(
            name="emnist",
            title=f"EMNIST ({EMNIST_SPLIT})",
            description=f"EMNIST split '{EMNIST_SPLIT}' (digits and upper/lower-case letters, the 62 classes of the "
            "FedSAM/MoFedSAM paper), 28x28 grey",
            source="--data-dir or torchvision download",
            input_shape=(1, 28, 28),
            num_classes=62,
            train_size=697_932,
            test_size=116_323,
            # The EMNIST IDX files were converted from NIST's column-major MATLAB arrays, so every
            # image is stored transposed (Cohen et al. 2017); torchvision leaves .data as stored.
            reader=partial(_read_torchvision, "EMNIST", options={"split": EMNIST_SPLIT}, transposed=True),
            files=f"EMNIST/raw/emnist-{EMNIST_SPLIT}-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte",
            default_place=_DOWNLOADED,
            mean=MNIST_MEAN,
            std=MNIST_STD,
        ),
        DatasetSpec(
            name="cifar10",
            title="CIFAR-10",
            description="CIFAR-10 32x32 colour images",
            source="--data-dir or torchvision download",
            input_shape=(3, 32, 32),
            num_classes=10,
            train_size=50_000,
            test_size=10_000,
            reader=_read_cifar10,
            files="cifar-10-batches-py/ (unpacked from cifar-10-python.tar.gz), or train/<class>/*.jpg and "
            "test/<class>/*.jpg with CIFAR-10's 10 class names (the ImageFolder layout)",
            default_place=_DOWNLOADED,
            augmentation="crop-flip",
            mean=CIFAR10_MEAN,
            std=CIFAR10_STD,
        ),
        DatasetSpec(
            name="cifar100",
            title="CIFAR-100",
            description="CIFAR-100 32x32 colour images, fine labels",
            source="--data-dir or torchvision download",
            input_shape=(3, 32, 32),
            num_classes=100,
            train_size=50_000,
            test_size=10_000,
            reader=partial(_read_torchvision, "CIFAR100"),
            files="cifar-100-python/ (unpacked from cifar-100-python.tar.gz)",
            default_place=_DOWNLOADED,
            augmentation="crop-flip",
            mean=CIFAR100_MEAN,
            std=CIFAR100_STD,
        ),
    ]
}


def dataset_shape(name: str) -> tuple[tuple[int, int, int], int]:
    """``(input_shape, num_classes)`` of a dataset of :data:`DATASETS`, without loading it."""
    return _spec(name).input_shape, _spec(name).num_classes


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]


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
    chosen = [rng.choice(np.flatnonzero(labels == c), size=k, replace=False) for c, k in zip(classes, take)]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def load_dataset(
    name: str,
    *,
    data_dir: str | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Load a dataset of :data:`DATASETS` as normalized tensors.

    ``data_dir``: an existing folder with the dataset's files (``DATASETS[name].files``; for the torchvision
    datasets, where a missing dataset is downloaded to), see the module's docstring for the default.
    ``train_size`` / ``test_size`` take a stratified random subset of each split (seeded by ``seed``), for
    fast runs; they must not exceed what is available.
    """
    ds = _spec(name).load(data_dir)
    rng = np.random.default_rng(seed)
    for split, size in (("train", train_size), ("test", test_size)):
        if size is not None:
            x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
                raise DataError(f"{split}_size={size!r} must be an integer in 1..{len(y)} (or None for all)")
            if not 1 <= size <= len(y):
                raise DataError(f"{split}_size={size} is not available: allowed 1..{len(y)} (or None for all)")
            idx = torch.from_numpy(stratified_subset(y.numpy(), int(size), rng))
            setattr(ds, f"x_{split}", x[idx])
            setattr(ds, f"y_{split}", y[idx])
    return ds
