"""Folders of image files in the ImageFolder layout: found, checked, decoded once and cached as arrays.

The layout is torchvision's ``ImageFolder``, one folder per split and one sub-folder per class::

    DIR/train/<class>/<image>      e.g. DIR/train/cat/0001.jpg
    DIR/test/<class>/<image>

* **Classes** are the sub-folder names, sorted; label ``i`` is the ``i``-th name (as ``ImageFolder`` numbers
  them). ``train/`` and ``test/`` must hold the same class folders, and every class folder at least one image.
* **Images** are the files whose suffix is one of :data:`IMAGE_SUFFIXES` (any case); hidden files (``.DS_Store``)
  are skipped, any other file in a class folder is ignored, as ``ImageFolder`` does. An image directly in
  ``train/`` or ``test/``, outside a class folder, is refused.
* **Input size:** stated by the first training image (sorted by class, then file name); every other image must
  have the same width and height, else loading is refused naming the file, both sizes and the fix (resize the
  files beforehand). Nothing is resized, so no interpolation choice hides in the data.
* **Channels:** every image is converted to RGB (3 channels), as ``ImageFolder``'s loader does; ``channels=1``
  converts to greyscale instead.

**Decoding once.** Decoding every file is the slow part of loading a folder, so the decoded uint8 arrays are cached
as ``.npy`` files in :func:`cache_dir` (``$DFL_IMAGE_CACHE``, else ``~/.cache/dfl_book/image-folders``;
``DFL_IMAGE_CACHE=off`` turns the cache off), in a folder named after a hash of the image folder's path and of every
file's name, label, size and modification time. A later load only lists and stats the files and reads the arrays;
a changed, added or removed file makes a new key, so a stale cache is never read. The data folder itself is never
written to (it may be read-only).

Two dataset entries read folders this way: the built-in ``cifar10`` (its ``data_dir`` in this layout, e.g. the
CIFAR-10 JPEG copy) and the user's own folders registered by :mod:`.imagefolder`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError

__all__ = [
    "IMAGE_SUFFIXES",
    "SPLITS",
    "LAYOUT",
    "DEFAULT_CACHE",
    "FolderLayout",
    "scan_image_folder",
    "cache_dir",
    "read_image_folder",
    "channel_statistics",
]

#: Where decoded folders are cached without ``$DFL_IMAGE_CACHE``: beside the downloaded datasets
#: (:data:`.datasets.DEFAULT_ROOT`).
DEFAULT_CACHE = "~/.cache/dfl_book/image-folders"
#: The file suffixes read as images (compared in lower case); PIL decodes all of them.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp")
#: The two split folders, as named on disk.
SPLITS = ("train", "test")
#: What a folder of this kind must hold (for messages and ``DatasetSpec.files``).
LAYOUT = "train/<class>/<image> and test/<class>/<image> (the ImageFolder layout)"
#: Bumped when the cache's content changes meaning, so that old caches are not read.
_CACHE_VERSION = 1


@dataclass(frozen=True)
class FolderLayout:
    """What :func:`scan_image_folder` found: the classes and, per split, every image file with its label."""

    root: Path
    classes: tuple[str, ...]
    files: dict[str, list[tuple[Path, int]]]  # split -> [(file, label)], sorted by class then file name

    def size(self, split: str) -> int:
        return len(self.files[split])


def _visible(entries) -> list[os.DirEntry]:
    return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def scan_image_folder(root: str | os.PathLike) -> FolderLayout:
    """The classes and image files of ``root`` (see the module docstring); no image is opened.

    Raises :class:`DataError` naming what is missing: a ``train/`` or ``test/`` folder, class folders, images in
    a class folder, or class folders present in one split only.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(
            f"image folder {str(root)!r} {'is not a directory' if root.exists() else 'does not exist'};"
            f" give a folder holding {LAYOUT}"
        )
    classes: dict[str, tuple[str, ...]] = {}
    found: dict[str, dict[str, list[Path]]] = {}
    for split in SPLITS:  # both split folders first: the message then names all that is missing
        if not (root / split).is_dir():
            present = ", ".join(e.name + "/" for e in _visible(os.scandir(root)) if e.is_dir()) or "none"
            missing = " and ".join(f"{s}/" for s in SPLITS if not (root / s).is_dir())
            folders = "folders" if " and " in missing else "folder"
            raise DataError(
                f"image folder {str(root)!r} has no {missing} {folders} (sub-folders found: {present}); "
                f"expected {LAYOUT}"
            )
    for split in SPLITS:
        folder = root / split
        entries = _visible(os.scandir(folder))
        loose = [e.name for e in entries if e.is_file() and _is_image(e.name)]
        if loose:
            raise DataError(
                f"{str(folder)!r} holds images outside any class folder ({', '.join(loose[:3])}"
                f"{', ...' if len(loose) > 3 else ''}); put each image in {split}/<class>/"
            )
        class_dirs = [e for e in entries if e.is_dir()]
        if not class_dirs:
            raise DataError(
                f"{str(folder)!r} holds no class folders; expected {split}/<class>/<image>, one folder per class"
            )
        classes[split] = tuple(e.name for e in class_dirs)
        found[split] = {}
        for entry in class_dirs:
            images = [Path(e.path) for e in _visible(os.scandir(entry.path)) if e.is_file() and _is_image(e.name)]
            if not images:
                raise DataError(
                    f"class folder {str(Path(entry.path))!r} holds no images (files ending in "
                    f"{', '.join(IMAGE_SUFFIXES)}); every class needs at least one in each split"
                )
            found[split][entry.name] = images
    if classes["train"] != classes["test"]:
        only_train = sorted(set(classes["train"]) - set(classes["test"]))
        only_test = sorted(set(classes["test"]) - set(classes["train"]))
        raise DataError(
            f"image folder {str(root)!r}: train/ and test/ must hold the same class folders; only in "
            f"train/: {', '.join(only_train) or 'none'}; only in test/: {', '.join(only_test) or 'none'}"
        )
    names = classes["train"]
    files = {
        split: [(path, label) for label, name in enumerate(names) for path in found[split][name]] for split in SPLITS
    }
    return FolderLayout(root=root, classes=names, files=files)


def cache_dir() -> Path | None:
    """Where decoded image folders are cached: ``$DFL_IMAGE_CACHE``, else ``~/.cache/dfl_book/image-folders``;
    None when ``$DFL_IMAGE_CACHE`` is ``off`` (or ``0``, ``no``, ``false``)."""
    value = os.environ.get("DFL_IMAGE_CACHE")
    if value is not None and value.strip().lower() in ("off", "0", "no", "false"):
        return None
    return Path(value or DEFAULT_CACHE).expanduser()


def _cache_key(layout: FolderLayout, channels: int) -> str:
    """A hash of the folder's path and of every image's relative name, label, size and modification time."""
    digest = hashlib.sha256(f"v{_CACHE_VERSION} channels={channels} {layout.root.resolve()}\n".encode())
    for split in SPLITS:
        for path, label in layout.files[split]:
            stat = path.stat()
            digest.update(f"{path.relative_to(layout.root)}\t{label}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def _decode(
    files: list[tuple[Path, int]],
    size: tuple[int, int] | None,
    channels: int,
) -> tuple[np.ndarray, tuple[int, int]]:
    """uint8 (N, C, H, W) of ``files``, each converted to RGB (or greyscale); ``size`` (width, height) is the
    stated size, or None to take the first image's."""
    from PIL import Image, UnidentifiedImageError  # deferred: PIL comes with torchvision, needed only here

    mode = {3: "RGB", 1: "L"}[channels]
    out: np.ndarray | None = None
    first = None
    for i, (path, _) in enumerate(files):
        try:
            with Image.open(path) as image:
                found = image.size
                pixels = np.asarray(image.convert(mode)) if size in (None, found) else None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            raise DataError(f"cannot read image {str(path)!r} ({type(e).__name__}: {e}); delete or replace it") from e
        if size is None:
            size, first = found, path
        if pixels is None:
            raise DataError(
                f"{str(path)!r} is {found[0]}x{found[1]} pixels but the dataset's input size is {size[0]}x{size[1]} "
                f"(width x height, {'set by ' + repr(str(first)) if first else 'that of the train split'}); every "
                "image must have the input size: resize the files beforehand (e.g. PIL's Image.resize), nothing is "
                "resized on loading"
            )
        if out is None:
            out = np.empty((len(files), size[1], size[0], channels), dtype=np.uint8)
        out[i] = pixels.reshape(size[1], size[0], channels)
    if out is None:
        raise DataError("no image files to decode")  # scan_image_folder refuses empty classes before this
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2)), size


def read_image_folder(
    root: str | os.PathLike,
    channels: int = 3,
) -> tuple[tuple[str, ...], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``(classes, {split: (uint8 images (N, C, H, W), int64 labels (N,))})`` of an image folder.

    Decoded once, then read from the cache (:func:`cache_dir`, see the module docstring). The test split must
    have the train split's input size.
    """
    if channels not in (1, 3):
        raise DataError(f"channels={channels!r} is not allowed; allowed: 3 (RGB) or 1 (greyscale)")
    layout = scan_image_folder(root)
    folder = cache_dir()
    cached = None
    if folder is not None:
        cached = folder / f"{layout.root.resolve().name}-{_cache_key(layout, channels)}"
        if (cached / "meta.json").is_file():
            try:
                meta = json.loads((cached / "meta.json").read_text())
                if tuple(meta["classes"]) == layout.classes:
                    return layout.classes, {
                        split: (np.load(cached / f"x_{split}.npy"), np.load(cached / f"y_{split}.npy"))
                        for split in SPLITS
                    }
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache is decoded afresh and rewritten
    x_train, size = _decode(layout.files["train"], None, channels)
    x_test, _ = _decode(layout.files["test"], size, channels)
    arrays = {
        split: (x, np.array([label for _, label in layout.files[split]], dtype=np.int64))
        for split, x in (("train", x_train), ("test", x_test))
    }
    if cached is not None:
        _write_cache(cached, layout, arrays)
    return layout.classes, arrays


def _write_cache(cached: Path, layout: FolderLayout, arrays: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """The decoded arrays into ``cached`` (a fresh folder, renamed into place, so no half-written cache is read);
    a cache that cannot be written (read-only home, full disk) only costs the next load its decoding."""
    tmp = cached.with_name(f"{cached.name}.tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for split, (x, y) in arrays.items():
            np.save(tmp / f"x_{split}.npy", x)
            np.save(tmp / f"y_{split}.npy", y)
        (tmp / "meta.json").write_text(
            json.dumps(
                {
                    "root": str(layout.root.resolve()),
                    "classes": layout.classes,
                    "sizes": {s: layout.size(s) for s in SPLITS},
                }
            )
        )
        os.replace(tmp, cached)
    except OSError:
        pass
    finally:
        if tmp.exists():
            for f in tmp.iterdir():
                f.unlink()
            tmp.rmdir()


def channel_statistics(x: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (population) std of uint8 images ``x`` (N, C, H, W), as pixels / 255.

    Exact and without a float copy of the images: from each channel's 256-bin histogram.
    """
    levels = np.arange(256, dtype=np.float64) / 255.0
    means, stds = [], []
    for c in range(x.shape[1]):
        counts = np.bincount(x[:, c].reshape(-1), minlength=256).astype(np.float64)
        mean = float(counts @ levels / counts.sum())
        var = float(counts @ (levels - mean) ** 2 / counts.sum())
        means.append(mean)
        stds.append(var**0.5)
    return tuple(means), tuple(stds)
