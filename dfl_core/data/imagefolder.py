"""Your own images as a dataset: an image folder registered as an entry of :data:`~.datasets.DATASETS`.

:func:`register_image_folder` scans a folder in the ImageFolder layout (:mod:`.imagefiles`: ``DIR/train/<class>/``,
``DIR/test/<class>/``; classes from the folder names, one input size for every image, never resized) and adds it
to the registry under a name of your choice, with its classes, split sizes and input size as declared sizes (only
its listing and first image are read: no decoding). ``Config(dataset=name)`` then validates it (``local_epochs``
turns the declared train size into K) and ``load_dataset(name)`` reads it, decoded once and cached. On the command
line ``--dataset imagefolder --data-dir DIR`` registers DIR as ``imagefolder`` (``python -m dfl_core run --help``).

A registered folder is an ordinary entry: every partition scheme applies, and it takes

* ``normalization``: ``(pixel/255 - mean) / std`` per channel, with ``mean``/``std`` computed from the train split
  (``"train"``, the default: no test statistics leak in), given as two tuples, or ``"none"`` (pixels in [0, 1]);
* ``augmentation``: None (the default) or a key of :data:`~.augment.AUGMENTATIONS` (``"crop-flip"``, the CIFAR
  papers' random crop and flip);
* ``channels``: 3 (RGB, the default, as ``ImageFolder`` loads) or 1 (greyscale).

CIFAR-10 as image files needs no registration: the built-in ``cifar10`` entry reads the same layout from its
``data_dir`` (with its own class names, sizes, constants and augmentation).

The registry lives in the process: a worker process that builds configs itself must register the folder too.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import torch

from .augment import AUGMENTATIONS
from .datasets import DATASETS, DataError, Dataset, DatasetSpec, normalize_images
from .imagefiles import LAYOUT, channel_statistics, read_image_folder, scan_image_folder

__all__ = ["image_folder_spec", "register_image_folder"]


def _read_registered(
    root: Path,
    classes: tuple[str, ...],
    channels: int,
    normalization: str | tuple,
    spec: DatasetSpec,
    folder: Path | None,
) -> Dataset:
    """The reader of a :func:`register_image_folder` entry: ``folder`` (a data_dir) if given, else ``root``; its
    classes must be those the entry was registered with (its sizes are checked by ``DatasetSpec.load``)."""
    found, arrays = read_image_folder(folder if folder is not None else root, channels)
    (x_train, y_train), (x_test, y_test) = arrays["train"], arrays["test"]
    if found != classes:
        raise DataError(
            f"{spec.title}: {str(folder)!r} holds the classes {', '.join(found)}; the entry was "
            f"registered from {str(root)!r} with {', '.join(classes)}"
        )
    if normalization == "train":
        mean, std = channel_statistics(x_train)
        if min(std) == 0.0:
            raise DataError(
                f"{spec.title}: a channel of the train images is constant (std {std}), so "
                "normalization='train' cannot scale it; use normalization='none'"
            )
    elif normalization == "none":
        mean, std = (0.0,) * channels, (1.0,) * channels
    else:
        mean, std = normalization
    to_torch = torch.from_numpy
    return Dataset(
        name=spec.name,
        x_train=normalize_images(to_torch(x_train), mean, std),
        y_train=to_torch(y_train),
        x_test=normalize_images(to_torch(x_test), mean, std),
        y_test=to_torch(y_test),
        num_classes=spec.num_classes,
        input_shape=spec.input_shape,
        augmentation=spec.augmentation,
        mean=tuple(mean),
        std=tuple(std),
    )


def _check_normalization(normalization, channels: int) -> str | tuple[tuple[float, ...], tuple[float, ...]]:
    if normalization in ("train", "none"):
        return normalization
    try:
        mean, std = (tuple(float(v) for v in part) for part in normalization)
    except (TypeError, ValueError):
        mean = std = ()
    if len(mean) != channels or len(std) != channels or min(std, default=0.0) <= 0:
        raise DataError(
            f"normalization={normalization!r} is not allowed; allowed: 'train' (per-channel mean and "
            f"std of the train split), 'none' (pixels in [0, 1]) or (mean, std), {channels} values "
            "each, std > 0"
        )
    return mean, std


def image_folder_spec(
    root: str | os.PathLike,
    name: str = "imagefolder",
    *,
    channels: int = 3,
    normalization: str | tuple = "train",
    augmentation: str | None = None,
    title: str | None = None,
) -> DatasetSpec:
    """A :class:`~.datasets.DatasetSpec` for the image folder ``root``: its classes, split sizes and input size
    as scanned now (only the first training image is opened), read by :func:`read_image_folder`.

    ``normalization``: ``"train"``, ``"none"`` or ``(mean, std)`` (module docstring); ``augmentation``: None or a
    key of :data:`~.augment.AUGMENTATIONS` (``"crop-flip"``).
    """
    from PIL import Image

    if augmentation is not None and augmentation not in AUGMENTATIONS:
        raise DataError(f"augmentation={augmentation!r} is not allowed; allowed: none, {', '.join(AUGMENTATIONS)}")
    if channels not in (1, 3):
        raise DataError(f"channels={channels!r} is not allowed; allowed: 3 (RGB) or 1 (greyscale)")
    normalization = _check_normalization(normalization, channels)
    layout = scan_image_folder(root)
    first = layout.files["train"][0][0]
    try:
        with Image.open(first) as image:
            width, height = image.size
    except Exception as e:
        raise DataError(f"cannot read image {str(first)!r} ({type(e).__name__}: {e}); delete or replace it") from e
    root = layout.root.resolve()
    return DatasetSpec(
        name=name,
        title=title or f"image folder {str(root)!r}",
        description=f"your images from {root}, {channels}x{height}x{width}",
        source=f"{root}, {LAYOUT}",
        input_shape=(channels, height, width),
        num_classes=len(layout.classes),
        train_size=layout.size("train"),
        test_size=layout.size("test"),
        reader=partial(_read_registered, root, layout.classes, channels, normalization),
        files=f"{LAYOUT}, with the classes {', '.join(layout.classes[:5])}{', ...' * (len(layout.classes) > 5)}",
        default_place=str(root),
        augmentation=augmentation,
        mean=normalization[0] if isinstance(normalization, tuple) else None,
        std=normalization[1] if isinstance(normalization, tuple) else None,
    )


#: The entries a registration may not replace: the built-in datasets.
_BUILT_IN = frozenset(DATASETS)


def register_image_folder(root: str | os.PathLike, name: str = "imagefolder", **options) -> DatasetSpec:
    """Add the image folder ``root`` to :data:`~.datasets.DATASETS` as ``name`` (:func:`image_folder_spec`, whose
    keyword ``options`` it takes) and return its entry; registering a name again replaces that folder.

    Then ``Config(dataset=name, ...)`` and ``load_dataset(name)`` use it like any built-in dataset. The registry
    lives in this process: a worker process that builds the config itself must register the folder too.
    """
    if name in _BUILT_IN:
        raise DataError(
            f"dataset name {name!r} is a built-in dataset; register the folder under another name "
            f"(built-in: {', '.join(sorted(_BUILT_IN))})"
        )
    if not name or not isinstance(name, str) or name != name.strip():
        raise DataError(f"dataset name {name!r} is not allowed; give a non-empty name without surrounding spaces")
    spec = image_folder_spec(root, name, **options)
    DATASETS[name] = spec
    return spec
