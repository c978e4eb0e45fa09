"""Tests for the torchvision datasets (MNIST, EMNIST, CIFAR-10/100) and crop-flip augmentation.

Every loader test writes tiny files in the dataset's real on-disk format (IDX files,
Python-2 pickled CIFAR batches) into a temporary directory, in the folder layout
torchvision 0.29 reads, and loads them through the real torchvision classes.
Downloads are patched to fail in every test, so nothing touches the network.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
import torchvision.transforms.v2.functional as TF

from dfl_core.data import (
    AUGMENTATIONS,
    DATASETS,
    DataError,
    Dataset,
    black_fill,
    crop_flip,
    crop_flip_params,
    load_dataset,
)
from dfl_core.data import datasets as datasets_module

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


# ---------------------------------------------------------------------------
# No network: every download fails loudly and is recorded
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def downloads(monkeypatch) -> list[str]:
    """Replace each class's ``download`` (EMNIST has its own) by one that records and raises."""
    calls: list[str] = []

    def offline(self):
        calls.append(type(self).__name__)
        raise RuntimeError("network disabled in tests")

    for cls in (tvd.MNIST, tvd.EMNIST, tvd.CIFAR10, tvd.CIFAR100):
        monkeypatch.setattr(cls, "download", offline)
    return calls


# ---------------------------------------------------------------------------
# Writers of the real formats, independent of the code under test
# ---------------------------------------------------------------------------


def declare_sizes(monkeypatch, name: str, n_train: int, n_test: int) -> None:
    """Make the entry ``name`` declare the tiny files' sizes: an entry's sizes are checked against what it loads
    (a tiny copy under the real entry is refused, see test_dataset_registry.py)."""
    monkeypatch.setitem(DATASETS, name, dataclasses.replace(DATASETS[name], train_size=n_train, test_size=n_test))


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file: 0, 0, type 0x08 (ubyte), ndim, big-endian uint32 sizes, C-order data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_idx_set(directory: Path, names: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for key, filename in names.items():
        (directory / filename).write_bytes(idx_bytes(arrays[key]))


def mnist_arrays(n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "train_images": rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "train_labels": np.arange(n_train, dtype=np.uint8) % 10,
        "test_images": rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "test_labels": (np.arange(n_test, dtype=np.uint8) * 3) % 10,
    }


# torchvision 0.29 mnist.py: MNIST._load_data reads <root>/MNIST/raw/{train,t10k}-*-ubyte (unzipped);
# EMNIST reads <root>/EMNIST/raw/emnist-<split>-{train,test}-*-ubyte (its download unzips gzip.zip there).
MNIST_NAMES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
EMNIST_NAMES = {
    f"{s}_{kind}": f"emnist-byclass-{s}-{kind}-{'idx3' if kind == 'images' else 'idx1'}-ubyte"
    for s in ("train", "test")
    for kind in ("images", "labels")
}


class Py2Pickler(pickle._Pickler):
    """Pickles ``str`` and ``bytes`` as Python 2 byte strings (SHORT_BINSTRING / BINSTRING).

    The CIFAR python batches were written by Python 2's cPickle (protocol 2): their keys
    are byte strings, which load as ``"data"`` with ``encoding="latin1"`` (as torchvision
    loads them) and as ``b"data"`` with ``encoding="bytes"`` (as the CIFAR web page does).
    A Python 3 pickle of ``{"data": ...}`` would not reproduce that, so we write the opcodes.
    """

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_string(self, obj):
        raw = obj.encode("latin1") if isinstance(obj, str) else bytes(obj)
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[str] = save_py2_string
    dispatch[bytes] = save_py2_string


def py2_pickle(obj) -> bytes:
    buffer = io.BytesIO()
    Py2Pickler(buffer, protocol=2).dump(obj)
    return buffer.getvalue()


def cifar_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 3072) uint8 rows: 1024 red, 1024 green, 1024 blue values, each 32x32 row-major."""
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)


def write_cifar10(root: Path, monkeypatch, per_batch: int = 2, n_test: int = 3) -> dict:
    """Tiny cifar-10-batches-py/ with data_batch_1..5, test_batch, batches.meta."""
    rng = np.random.default_rng(1)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = []
    for b in range(1, 6):
        data = cifar_rows(per_batch, rng)
        labels = [(b * per_batch + i) % 10 for i in range(per_batch)]
        batches.append((data, labels))
        (folder / f"data_batch_{b}").write_bytes(
            py2_pickle(
                {
                    "batch_label": f"training batch {b} of 5",
                    "labels": labels,
                    "data": data,
                    "filenames": [f"img_{b}_{i}.png" for i in range(per_batch)],
                }
            )
        )
    test_data, test_labels = cifar_rows(n_test, rng), [9, 0, 4][:n_test]
    (folder / "test_batch").write_bytes(
        py2_pickle(
            {
                "batch_label": "testing batch 1 of 1",
                "labels": test_labels,
                "data": test_data,
                "filenames": [f"test_{i}.png" for i in range(n_test)],
            }
        )
    )
    (folder / "batches.meta").write_bytes(
        py2_pickle(
            {
                "num_cases_per_batch": per_batch,
                "num_vis": 3072,
                "label_names": [
                    "airplane",
                    "automobile",
                    "bird",
                    "cat",
                    "deer",
                    "dog",
                    "frog",
                    "horse",
                    "ship",
                    "truck",
                ],
            }
        )
    )
    register_checksums(monkeypatch, tvd.CIFAR10, folder)
    declare_sizes(monkeypatch, "cifar10", 5 * per_batch, n_test)
    return {
        "x_train": np.concatenate([d for d, _ in batches]),
        "y_train": sum((l for _, l in batches), []),
        "x_test": test_data,
        "y_test": test_labels,
    }


def write_cifar100(root: Path, monkeypatch, n_train: int = 6, n_test: int = 4) -> dict:
    """Tiny cifar-100-python/ with train, test, meta (fine and coarse labels)."""
    rng = np.random.default_rng(2)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    splits = {}
    for name, n, fine in (
        ("train", n_train, [0, 99, 42, 7, 63, 99][:n_train]),
        ("test", n_test, [5, 0, 99, 12][:n_test]),
    ):
        data = cifar_rows(n, rng)
        splits[name] = (data, fine)
        (folder / name).write_bytes(
            py2_pickle(
                {
                    "filenames": [f"{name}_{i}.png" for i in range(n)],
                    "batch_label": f"{name}ing batch 1 of 1",
                    "fine_labels": fine,
                    "coarse_labels": [f // 5 for f in fine],
                    "data": data,
                }
            )
        )
    (folder / "meta").write_bytes(
        py2_pickle(
            {
                "fine_label_names": [f"fine_{i}" for i in range(100)],
                "coarse_label_names": [f"coarse_{i}" for i in range(20)],
            }
        )
    )
    register_checksums(monkeypatch, tvd.CIFAR100, folder)
    declare_sizes(monkeypatch, "cifar100", n_train, n_test)
    return {
        "x_train": splits["train"][0],
        "y_train": splits["train"][1],
        "x_test": splits["test"][0],
        "y_test": splits["test"][1],
    }


def register_checksums(monkeypatch, cls, folder: Path) -> None:
    """Tell torchvision the md5 sums of *our* tiny files.

    torchvision's CIFAR classes check every batch (``_check_integrity``) and the meta
    file (``_load_meta``) against the md5 of the real archives, which tiny files cannot
    match. Rather than switching the check off, we swap in the true md5 of each file we
    wrote, so torchvision's own integrity check still runs (and would catch a file we
    failed to write or wrote twice).
    """

    def md5(name: str) -> str:
        return hashlib.md5((folder / name).read_bytes()).hexdigest()

    monkeypatch.setattr(cls, "train_list", [[name, md5(name)] for name, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[name, md5(name)] for name, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5(cls.meta["filename"])})


# ---------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------


def test_new_datasets_are_listed():
    assert {"mnist", "emnist", "cifar10", "cifar100"} <= set(DATASETS)
    assert "byclass" in DATASETS["emnist"].summary and "62" in DATASETS["emnist"].summary


def test_mnist_torchvision_layout(tmp_path, downloads, monkeypatch):
    arrays = mnist_arrays()
    declare_sizes(monkeypatch, "mnist", 20, 10)
    write_idx_set(tmp_path / "MNIST" / "raw", MNIST_NAMES, arrays)
    ds = load_dataset("mnist", data_dir=str(tmp_path))
    assert downloads == []
    assert ds.name == "mnist" and ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (10, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.y_train.tolist() == arrays["train_labels"].tolist()
    assert ds.y_test.tolist() == arrays["test_labels"].tolist()
    expected = (arrays["train_images"].astype(np.float64) / 255 - MNIST_MEAN) / MNIST_STD
    np.testing.assert_allclose(ds.x_train[:, 0].numpy(), expected, atol=1e-5)
    assert ds.augmentation is None and ds.mean == (MNIST_MEAN,) and ds.std == (MNIST_STD,)


def test_mnist_flat_idx_folder(tmp_path, downloads, monkeypatch):
    """The four IDX files directly in data_dir, gzipped (the Debian package layout)."""
    import gzip

    declare_sizes(monkeypatch, "mnist", 20, 10)
    arrays = mnist_arrays(seed=3)
    for key, name in MNIST_NAMES.items():
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress(idx_bytes(arrays[key])))
    ds = load_dataset("mnist", data_dir=str(tmp_path))
    assert downloads == []
    assert ds.y_test.tolist() == arrays["test_labels"].tolist()
    assert ds.x_test[3, 0, 4, 5].item() == pytest.approx(
        (arrays["test_images"][3, 4, 5] / 255 - MNIST_MEAN) / MNIST_STD, abs=1e-5
    )


def test_mnist_subsets_are_stratified(tmp_path, monkeypatch):
    declare_sizes(monkeypatch, "mnist", 20, 10)
    write_idx_set(tmp_path / "MNIST" / "raw", MNIST_NAMES, mnist_arrays())
    ds = load_dataset("mnist", data_dir=str(tmp_path), train_size=10, test_size=5, seed=1)
    assert ds.x_train.shape == (10, 1, 28, 28) and len(ds.y_test) == 5
    assert sorted(ds.y_train.tolist()) == list(range(10))  # 2 of each class -> 1 of each


def upright_glyph() -> np.ndarray:
    """An 'L': a vertical stroke and a foot to its right; not symmetric under transposition."""
    glyph = np.zeros((28, 28), dtype=np.uint8)
    glyph[4:22, 8] = 255  # vertical stroke in column 8
    glyph[21, 8:18] = 200  # foot along row 21
    return glyph


def test_emnist_byclass_upright(tmp_path, downloads, monkeypatch):
    declare_sizes(monkeypatch, "emnist", 6, 3)
    glyph = upright_glyph()
    rng = np.random.default_rng(4)
    train_images = rng.integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    train_images[0] = glyph.T  # EMNIST stores each image transposed
    arrays = {
        "train_images": train_images,
        "train_labels": np.array([0, 61, 10, 36, 61, 9], dtype=np.uint8),
        "test_images": rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8),
        "test_labels": np.array([35, 0, 61], dtype=np.uint8),
    }
    write_idx_set(tmp_path / "EMNIST" / "raw", EMNIST_NAMES, arrays)
    ds = load_dataset("emnist", data_dir=str(tmp_path))
    assert downloads == []
    assert ds.num_classes == 62 and ds.input_shape == (1, 28, 28)
    assert ds.y_train.tolist() == [0, 61, 10, 36, 61, 9] and ds.y_test.tolist() == [35, 0, 61]
    pixels = ds.x_train[0, 0] * MNIST_STD + MNIST_MEAN  # back to [0, 1]
    upright = torch.from_numpy(glyph / 255.0).float()
    assert torch.allclose(pixels, upright, atol=1e-5), "EMNIST image not transposed back upright"
    assert pixels[10, 8] > 0.99 and pixels[8, 10] < 0.01  # the stroke is vertical, in column 8
    # Every image, not just the first, is transposed.
    expected = (np.swapaxes(arrays["test_images"], 1, 2) / 255 - MNIST_MEAN) / MNIST_STD
    np.testing.assert_allclose(ds.x_test[:, 0].numpy(), expected, atol=1e-5)


def check_cifar(ds: Dataset, written: dict, mean, std, num_classes: int) -> None:
    n, n_test = len(written["y_train"]), len(written["y_test"])
    assert ds.x_train.shape == (n, 3, 32, 32) and ds.x_test.shape == (n_test, 3, 32, 32)
    assert ds.x_train.dtype == torch.float32 and ds.y_test.dtype == torch.int64
    assert ds.x_train.is_contiguous()
    assert ds.num_classes == num_classes and ds.input_shape == (3, 32, 32)
    assert ds.y_train.tolist() == list(written["y_train"]) and ds.y_test.tolist() == list(written["y_test"])
    assert ds.augmentation == "crop-flip" and ds.mean == mean and ds.std == std
    # One pixel by hand: row 0 of the file, green plane (offset 1024), image row 5, column 7.
    value = written["x_train"][0, 1024 + 5 * 32 + 7]
    assert ds.x_train[0, 1, 5, 7].item() == pytest.approx((value / 255 - mean[1]) / std[1], abs=1e-5)
    # All pixels: each row of the file is the R, G, B planes, each 32x32 row-major.
    for x, rows in ((ds.x_train, written["x_train"]), (ds.x_test, written["x_test"])):
        planes = rows.reshape(-1, 3, 32, 32) / 255.0
        expected = (planes - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
        np.testing.assert_allclose(x.numpy(), expected, atol=1e-5)


def test_cifar10_python_batches(tmp_path, monkeypatch, downloads):
    written = write_cifar10(tmp_path, monkeypatch)
    # The files are faithful: read as the CIFAR page says, the keys are bytes.
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        assert set(pickle.load(f, encoding="bytes")) == {b"batch_label", b"labels", b"data", b"filenames"}
    ds = load_dataset("cifar10", data_dir=str(tmp_path))
    assert downloads == []
    check_cifar(ds, written, CIFAR10_MEAN, CIFAR10_STD, 10)


def test_cifar100_python_batches(tmp_path, monkeypatch, downloads):
    written = write_cifar100(tmp_path, monkeypatch)
    with open(tmp_path / "cifar-100-python" / "train", "rb") as f:
        assert b"fine_labels" in pickle.load(f, encoding="bytes")
    ds = load_dataset("cifar100", data_dir=str(tmp_path), test_size=4)
    assert downloads == []
    check_cifar(ds, written, CIFAR100_MEAN, CIFAR100_STD, 100)


def test_cifar_checksum_still_checked(tmp_path, monkeypatch, downloads):
    """torchvision's md5 check stays live: a file changed after registering is refused."""
    write_cifar10(tmp_path, monkeypatch)
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_3", "ab") as f:
        f.write(b"\0")
    with pytest.raises(DataError, match="CIFAR-10"):
        load_dataset("cifar10", data_dir=str(tmp_path))
    assert downloads == ["CIFAR10"]  # corrupt -> torchvision would fetch a fresh copy


@pytest.mark.parametrize(
    "name, hint",
    [
        ("mnist", "MNIST/raw/"),
        ("emnist", "emnist-byclass-"),
        ("cifar10", "cifar-10-batches-py"),
        ("cifar100", "cifar-100-python"),
    ],
)
def test_missing_files_offline_explain(tmp_path, downloads, name, hint):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as info:
        load_dataset(name, data_dir=str(tmp_path / "empty"))
    message = str(info.value)
    assert "data_dir=" in message and hint in message and str(tmp_path / "empty") in message
    assert "network disabled in tests" in message  # the download's own error is shown
    assert len(downloads) == 1  # tried from disk first, then exactly one download attempt


@pytest.mark.parametrize("name", ["mnist", "emnist", "cifar10", "cifar100"])
def test_a_data_dir_that_does_not_exist_is_refused_before_anything_is_created(tmp_path, downloads, name):
    absent = tmp_path / "nonexistent" / "path"
    with pytest.raises(DataError) as info:
        load_dataset(name, data_dir=str(absent))
    message = str(info.value)
    assert f"data_dir={str(absent)!r} does not exist" in message, message
    assert "~/.cache" not in message.split("or no data_dir=")[0]  # names the folder given, not the cache
    assert not (tmp_path / "nonexistent").exists()  # torchvision never ran: nothing created
    assert downloads == []


def test_default_root_is_the_book_cache(monkeypatch, tmp_path, downloads):
    monkeypatch.setattr(datasets_module, "DEFAULT_ROOT", str(tmp_path / "cache"))
    declare_sizes(monkeypatch, "mnist", 20, 10)
    write_idx_set(tmp_path / "cache" / "MNIST" / "raw", MNIST_NAMES, mnist_arrays())
    assert load_dataset("mnist").x_train.shape == (20, 1, 28, 28)


# ---------------------------------------------------------------------------
# crop_flip
# ---------------------------------------------------------------------------


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_crop_flip_shape_and_dtype():
    x = torch.randn(3, 4, 2, 8, 6, dtype=torch.float64)  # (m, B, C, H, W), not square
    y = crop_flip(x, gen())
    assert y.shape == x.shape and y.dtype == x.dtype
    top, left, flip = crop_flip_params(x.shape, gen(), 4)
    assert top.shape == left.shape == flip.shape == (3, 4)
    assert AUGMENTATIONS["crop-flip"] is crop_flip


def test_crop_flip_without_padding_or_flip_is_identity():
    x = torch.randn(5, 7, 3, 9, 9)
    assert torch.equal(crop_flip(x, gen(), padding=0, flip_p=0.0), x)
    assert torch.equal(crop_flip(x, gen(), padding=0, flip_p=1.0), x.flip(-1))


def reference_crop_flip(x: torch.Tensor, top, left, flip, padding: int, fill) -> torch.Tensor:
    """One image at a time with torchvision's functional ops: pad, crop, maybe flip."""
    *batch, c, h, w = x.shape
    flat, out = x.reshape(-1, c, h, w), torch.empty(x.reshape(-1, c, h, w).shape, dtype=x.dtype)
    for k, (t, l, f) in enumerate(zip(top.reshape(-1).tolist(), left.reshape(-1).tolist(), flip.reshape(-1).tolist())):
        image = TF.pad(flat[k], [padding], fill=fill)
        image = TF.crop(image, t, l, h, w)
        out[k] = TF.horizontal_flip(image) if f else image
    return out.reshape(x.shape)


def test_crop_flip_matches_per_sample_reference():
    x = torch.randn(3, 5, 3, 8, 7)
    fill = (-1.0, 0.5, 2.0)
    y = crop_flip(x, gen(7), padding=3, fill=fill)
    top, left, flip = crop_flip_params(x.shape, gen(7), 3)
    assert 0 < flip.sum() < flip.numel() and len(set(top.reshape(-1).tolist())) > 2  # the draws vary
    # torchvision's pad takes one fill value per call; pad each channel with its own.
    expected = torch.cat(
        [reference_crop_flip(x[..., ch : ch + 1, :, :], top, left, flip, 3, fill[ch]) for ch in range(3)], dim=-3
    )
    assert torch.equal(y, expected)


def test_crop_flip_with_black_fill_equals_torchvision_on_raw_images():
    """Pad with -mean/std after normalizing == torchvision's RandomCrop (black padding) before it."""
    raw = torch.randint(0, 256, (2, 6, 3, 32, 32), generator=gen(1)).float() / 255  # pixels in [0, 1]
    mean, std = torch.tensor(CIFAR10_MEAN)[:, None, None], torch.tensor(CIFAR10_STD)[:, None, None]
    top, left, flip = crop_flip_params(raw.shape, gen(2), 4)
    expected = (reference_crop_flip(raw, top, left, flip, 4, 0.0) - mean) / std
    ours = crop_flip((raw - mean) / std, gen(2), 4, fill=black_fill(CIFAR10_MEAN, CIFAR10_STD))
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    # With the default fill (0 = the channel mean) the border is grey, not black.
    assert not torch.allclose(crop_flip((raw - mean) / std, gen(2), 4), expected, atol=1e-3)


def test_dataset_augment_pads_black(tmp_path, monkeypatch):
    write_cifar10(tmp_path, monkeypatch)
    ds = load_dataset("cifar10", data_dir=str(tmp_path))
    x = ds.x_train[None]  # one client holding every sample
    y = ds.augment(x, gen(5))
    assert torch.equal(y, crop_flip(x, gen(5), fill=black_fill(CIFAR10_MEAN, CIFAR10_STD)))
    plain = load_dataset("digits", test_size=10)
    assert plain.augmentation is None and plain.augment(plain.x_test, gen()) is plain.x_test


def test_crop_flip_frequencies():
    n = 40_000
    top, left, flip = crop_flip_params((n, 1, 2, 2), gen(3), 4)
    assert abs(flip.float().mean().item() - 0.5) < 0.015
    for offsets in (top, left):
        counts = torch.bincount(offsets, minlength=9)
        assert len(counts) == 9 and counts.min() > 0  # all of 0..8, nothing else
        assert (counts.float() / n - 1 / 9).abs().max() < 0.015
    # The same through crop_flip: an image [0, 1] comes out [1, 0] about half the time.
    x = torch.tensor([0.0, 1.0]).expand(n, 1, 1, 2)
    flipped = crop_flip(x, gen(4), padding=0)[:, 0, 0, 0] == 1.0
    assert abs(flipped.float().mean().item() - 0.5) < 0.015


def test_crop_flip_same_seed_same_output():
    x = torch.randn(4, 8, 3, 16, 16)
    assert torch.equal(crop_flip(x, gen(11)), crop_flip(x, gen(11)))
    assert not torch.equal(crop_flip(x, gen(11)), crop_flip(x, gen(12)))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"padding": -1}, "padding"),
        ({"padding": 1.5}, "padding"),
        ({"flip_p": 1.5}, "flip_p"),
        ({"fill": (0.0, 1.0)}, "fill"),
    ],
)
def test_crop_flip_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        crop_flip(torch.zeros(2, 3, 4, 4), gen(), **kwargs)


def test_crop_flip_needs_images():
    with pytest.raises(ValueError, match="C, H, W"):
        crop_flip(torch.zeros(4, 4), gen())


def test_crop_flip_rows_draw_for_all_rows_and_select():
    """rows/num_rows: the draws for (num_rows, ...) indexed by rows; all rows in order is the plain call, bit for bit."""
    x = torch.randn(5, 3, 3, 8, 8)
    full = crop_flip(x, gen(4))
    assert torch.equal(crop_flip(x, gen(4), rows=torch.arange(5), num_rows=5), full)
    ids = torch.tensor([3, 1])
    assert torch.equal(crop_flip(x[ids], gen(4), rows=ids, num_rows=5), full[ids])
    assert torch.equal(crop_flip(x[ids], gen(4), rows=[3, 1], num_rows=5), full[ids])  # a list of ids too
    params = crop_flip_params(x.shape, gen(4))
    assert all(
        torch.equal(p[ids], q) for p, q in zip(params, crop_flip_params((2, 3, 3, 8, 8), gen(4), rows=ids, num_rows=5))
    )


@pytest.mark.parametrize(
    "x_shape, kwargs, words",
    [
        ((2, 3, 1, 4, 4), {"rows": torch.arange(2)}, "rows and num_rows together"),
        ((2, 3, 1, 4, 4), {"num_rows": 4}, "rows and num_rows together"),
        ((2, 3, 1, 4, 4), {"rows": torch.arange(2), "num_rows": 0}, r"num_rows=0 must be an integer >= 1"),
        ((2, 3, 1, 4, 4), {"rows": torch.arange(2), "num_rows": 2.0}, r"num_rows=2.0 must be an integer"),
        ((2, 3, 1, 4, 4), {"rows": torch.tensor([0.0, 1.0]), "num_rows": 4}, "1-D tensor of integer ids"),
        ((2, 3, 1, 4, 4), {"rows": torch.tensor([True, False]), "num_rows": 4}, "1-D tensor of integer ids"),
        ((2, 3, 1, 4, 4), {"rows": torch.zeros(2, 1, dtype=torch.long), "num_rows": 4}, "1-D tensor"),
        ((2, 3, 1, 4, 4), {"rows": torch.arange(3), "num_rows": 4}, "rows has 3 ids but x of shape"),
        ((1, 4, 4), {"rows": torch.arange(1), "num_rows": 4}, "no leading row dimension"),
        ((2, 3, 1, 4, 4), {"rows": torch.tensor([0, 4]), "num_rows": 4}, r"0\.\.3; got ids from 0 to 4"),
        ((2, 3, 1, 4, 4), {"rows": torch.tensor([-1, 2]), "num_rows": 4}, r"0\.\.3; got ids from -1 to 2"),
    ],
)
def test_crop_flip_rejects_bad_rows(x_shape, kwargs, words):
    with pytest.raises(ValueError, match=words):
        crop_flip(torch.zeros(x_shape), gen(), **kwargs)
