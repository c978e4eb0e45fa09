"""Tests for dfl_core.data: IDX reading, dataset loading, partitions, the padded client layout."""

from __future__ import annotations

import dataclasses
import gzip
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from dfl_core.data import (
    DATASETS,
    PARTITIONS,
    ClientData,
    DataError,
    Dataset,
    dirichlet,
    federate,
    iid,
    load_dataset,
    partition,
    read_idx,
    shards,
    split_like,
)
from dfl_core.data import datasets as datasets_module
from dfl_core.data.partition import _sample_by_priors

SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file's bytes, written independently of the reader under test."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def declare_sizes(monkeypatch, name: str, n_train: int, n_test: int) -> None:
    """Make the entry ``name`` declare the tiny files' sizes: an entry's sizes are checked against what it loads
    (test_a_copy_of_other_sizes_is_refused)."""
    monkeypatch.setitem(DATASETS, name, dataclasses.replace(DATASETS[name], train_size=n_train, test_size=n_test))


def write_fashion_files(directory: Path, n_train: int, n_test: int, *, gz: bool, seed: int = 0):
    """Tiny, format-faithful Fashion-MNIST IDX files; returns the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.arange(n_train, dtype=np.uint8) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test, dtype=np.uint8) * 3) % 10,
    }
    directory.mkdir(parents=True, exist_ok=True)
    for stem, array in arrays.items():
        data = idx_bytes(array)
        if gz:
            (directory / (stem + ".gz")).write_bytes(gzip.compress(data))
        else:
            (directory / stem).write_bytes(data)
    return arrays


def balanced_labels(num_classes: int = 10, per_class: int = 600, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(num_classes), per_class))


def histograms(labels: np.ndarray, parts: list[np.ndarray], num_classes: int) -> np.ndarray:
    return np.array([np.bincount(labels[p], minlength=num_classes) for p in parts])


def assert_disjoint_sorted(parts: list[np.ndarray], n: int, *, covering: bool):
    for p in parts:
        assert p.dtype.kind == "i"
        assert np.all(np.diff(p) > 0), "each client's indices must be sorted and unique"
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything), "clients overlap"
    assert everything.min() >= 0 and everything.max() < n
    if covering:
        assert len(everything) == n


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_dataset("digits")


# ---------------------------------------------------------------------------
# read_idx
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("shape", [(7,), (3, 5, 4)])
def test_read_idx_round_trip(tmp_path, gz, shape):
    array = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    data = idx_bytes(array)
    path = tmp_path / ("f.idx.gz" if gz else "f.idx")
    path.write_bytes(gzip.compress(data) if gz else data)
    out = read_idx(path)
    assert out.dtype == np.uint8 and out.shape == shape
    np.testing.assert_array_equal(out, array)


def test_read_idx_detects_gzip_by_magic_not_name(tmp_path):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    path = tmp_path / "no-extension"
    path.write_bytes(gzip.compress(idx_bytes(array)))
    np.testing.assert_array_equal(read_idx(path), array)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"\x12\x34\x08\x01\x00\x00\x00\x01\x05", "magic"),  # not 00 00
        (b"", "magic"),
        (bytes([0, 0, 0x0D, 1, 0, 0, 0, 1]) + b"\x00" * 4, "type code"),  # float32: not supported
        (bytes([0, 0, 0x08, 3, 0, 0, 0, 2]), "truncated"),  # header cut short
        (bytes([0, 0, 0x08, 1, 0, 0, 0, 5]) + b"\x01\x02", "truncated"),  # data cut short
    ],
)
def test_read_idx_rejects_bad_files(tmp_path, content, words):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(DataError, match=words):
        read_idx(path)


def test_read_idx_rejects_truncated_gzip(tmp_path):
    packed = gzip.compress(idx_bytes(np.zeros((10, 28, 28), dtype=np.uint8)))
    path = tmp_path / "cut.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(DataError, match="gzip"):
        read_idx(path)


def test_read_idx_missing_file(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        read_idx(tmp_path / "nope.gz")


# ---------------------------------------------------------------------------
# Fashion-MNIST
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_from_data_dir(tmp_path, gz, monkeypatch):
    declare_sizes(monkeypatch, "fashion-mnist", 50, 20)
    arrays = write_fashion_files(tmp_path, 50, 20, gz=gz)
    ds = load_dataset("fashion-mnist", data_dir=str(tmp_path))
    assert ds.name == "fashion-mnist" and ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    assert ds.x_train.shape == (50, 1, 28, 28) and ds.x_test.shape == (20, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    np.testing.assert_array_equal(ds.y_train.numpy(), arrays["train-labels-idx1-ubyte"])
    np.testing.assert_array_equal(ds.y_test.numpy(), arrays["t10k-labels-idx1-ubyte"])
    expected = (arrays["t10k-images-idx3-ubyte"][:, None] / 255.0 - 0.2860) / 0.3530
    np.testing.assert_allclose(ds.x_test.numpy(), expected, rtol=0, atol=1e-5)
    # Pixel 0 and 255 map to the two ends of the normalized range.
    lo, hi = (0 - 0.2860) / 0.3530, (1 - 0.2860) / 0.3530
    assert ds.x_train.min().item() == pytest.approx(lo, abs=1e-5)
    assert ds.x_train.max().item() == pytest.approx(hi, abs=1e-5)


def test_fashion_mnist_subsets_are_stratified(tmp_path, monkeypatch):
    declare_sizes(monkeypatch, "fashion-mnist", 50, 20)
    write_fashion_files(tmp_path, 50, 20, gz=True)
    ds = load_dataset("fashion-mnist", data_dir=str(tmp_path), train_size=20, test_size=10, seed=3)
    assert len(ds.y_train) == 20 and len(ds.y_test) == 10
    np.testing.assert_array_equal(np.bincount(ds.y_train.numpy(), minlength=10), np.full(10, 2))
    again = load_dataset("fashion-mnist", data_dir=str(tmp_path), train_size=20, test_size=10, seed=3)
    assert torch.equal(ds.x_train, again.x_train)
    other = load_dataset("fashion-mnist", data_dir=str(tmp_path), train_size=20, test_size=10, seed=4)
    assert not torch.equal(ds.x_train, other.x_train)


def test_fashion_mnist_reads_torchvision_layout_in_data_dir(tmp_path, monkeypatch):
    declare_sizes(monkeypatch, "fashion-mnist", 30, 10)
    write_fashion_files(tmp_path / "FashionMNIST" / "raw", 30, 10, gz=True)
    ds = load_dataset("fashion-mnist", data_dir=str(tmp_path))
    assert ds.x_train.shape == (30, 1, 28, 28)


def test_fashion_mnist_download_failure_explains(tmp_path, monkeypatch):
    import torchvision.datasets

    class Offline:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("no network")

    monkeypatch.setattr(datasets_module, "SYSTEM_FASHION_MNIST_DIR", str(tmp_path / "absent"))
    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", Offline)
    with pytest.raises(DataError, match="apt-get install dataset-fashion-mnist") as info:
        load_dataset("fashion-mnist")
    assert "data_dir=" in str(info.value) and "no network" in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no network") as info:
        load_dataset("fashion-mnist", data_dir=str(tmp_path / "empty"))
    assert str(tmp_path / "empty") in str(info.value) and "train-images-idx3-ubyte" in str(info.value)


def test_fashion_mnist_download_path_reads_torchvision_tensors(tmp_path, monkeypatch):
    import torchvision.datasets

    calls = []

    class FakeFashionMNIST:  # what torchvision exposes after a download: uint8 data, int64 targets
        def __init__(self, root, train, download):
            calls.append((root, train, download))
            n = 40 if train else 10
            self.data = torch.full((n, 28, 28), 255, dtype=torch.uint8)
            self.targets = torch.arange(n) % 10

    monkeypatch.setattr(datasets_module, "SYSTEM_FASHION_MNIST_DIR", str(tmp_path / "absent"))
    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", FakeFashionMNIST)
    declare_sizes(monkeypatch, "fashion-mnist", 40, 10)
    (tmp_path / "cache").mkdir()
    ds = load_dataset("fashion-mnist", data_dir=str(tmp_path / "cache"))
    assert calls == [(str(tmp_path / "cache"), True, True), (str(tmp_path / "cache"), False, True)]
    assert ds.x_train.shape == (40, 1, 28, 28) and ds.y_test.dtype == torch.int64
    assert ds.x_train[0, 0, 0, 0].item() == pytest.approx((1 - 0.2860) / 0.3530, abs=1e-5)


def test_a_data_dir_that_does_not_exist_is_refused_not_replaced_by_the_system_copy(tmp_path, monkeypatch):
    system = tmp_path / "system"
    write_fashion_files(system, 30, 10, gz=True)  # a system copy that must not be used
    monkeypatch.setattr(datasets_module, "SYSTEM_FASHION_MNIST_DIR", str(system))
    declare_sizes(monkeypatch, "fashion-mnist", 30, 10)
    assert load_dataset("fashion-mnist").x_train.shape == (30, 1, 28, 28)  # no data_dir: the system copy
    absent = tmp_path / "absent" / "path"
    with pytest.raises(DataError) as info:
        load_dataset("fashion-mnist", data_dir=str(absent))
    message = str(info.value)
    assert f"data_dir={str(absent)!r} does not exist" in message, message
    assert "train-images-idx3-ubyte" in message  # what the folder must hold
    assert not (tmp_path / "absent").exists()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(DataError, match="is not a directory"):
        load_dataset("fashion-mnist", data_dir=str(tmp_path / "a-file"))


def test_a_named_folder_without_the_files_is_where_fashion_mnist_is_downloaded(tmp_path, monkeypatch):
    """An existing folder the user named is used (or downloaded into), never silently swapped for the system copy."""
    import torchvision.datasets

    write_fashion_files(tmp_path / "system", 30, 10, gz=True)
    monkeypatch.setattr(datasets_module, "SYSTEM_FASHION_MNIST_DIR", str(tmp_path / "system"))
    roots = []

    class FakeFashionMNIST:
        def __init__(self, root, train, download):
            roots.append(root)
            self.data = torch.zeros((20 if train else 10, 28, 28), dtype=torch.uint8)
            self.targets = torch.arange(20 if train else 10) % 10

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", FakeFashionMNIST)
    declare_sizes(monkeypatch, "fashion-mnist", 20, 10)
    (tmp_path / "mine").mkdir()
    ds = load_dataset("fashion-mnist", data_dir=str(tmp_path / "mine"))
    assert roots == [str(tmp_path / "mine")] * 2 and len(ds.y_train) == 20


def test_a_copy_of_other_sizes_is_refused(tmp_path):
    """The entry's declared sizes are checked against the files: a partial copy would change K (local_epochs)."""
    write_fashion_files(tmp_path, 50, 20, gz=True)
    with pytest.raises(
        DataError,
        match=r"Fashion-MNIST loaded 50 train / 20 test samples; its entry declares "
        r"60000 / 10000",
    ):
        load_dataset("fashion-mnist", data_dir=str(tmp_path))


def test_digits_reads_no_files_so_a_data_dir_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"'digits' .*reads no files.*data_dir="):
        load_dataset("digits", data_dir=str(tmp_path))


def test_fashion_mnist_real_files():
    if not SYSTEM_DIR.is_dir():
        reason = f"{SYSTEM_DIR} missing: apt-get install dataset-fashion-mnist"
        if os.environ.get("DFL_REQUIRE_ALL") == "1":
            pytest.fail(reason + " (DFL_REQUIRE_ALL=1 forbids skipping)")
        pytest.skip(reason)
    ds = load_dataset("fashion-mnist")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    np.testing.assert_array_equal(np.bincount(ds.y_train.numpy()), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(ds.y_test.numpy()), np.full(10, 1000))
    # The standard constants are the train set's own statistics.
    assert abs(ds.x_train.mean().item()) < 1e-3 and abs(ds.x_train.std().item() - 1) < 1e-3


# ---------------------------------------------------------------------------
# digits
# ---------------------------------------------------------------------------


def test_digits_split(digits):
    assert digits.input_shape == (1, 8, 8) and digits.num_classes == 10
    assert digits.x_train.shape == (1438, 1, 8, 8) and digits.x_test.shape == (359, 1, 8, 8)
    assert digits.x_train.dtype == torch.float32 and digits.y_test.dtype == torch.int64
    # Standardized with the train split's own scalar mean/std.
    assert abs(digits.x_train.mean().item()) < 1e-5 and digits.x_train.std().item() == pytest.approx(1, abs=1e-4)
    # Stratified: every class has 20% of its samples in test, to the nearest integer.
    test_counts = np.bincount(digits.y_test.numpy(), minlength=10)
    total = test_counts + np.bincount(digits.y_train.numpy(), minlength=10)
    assert np.all(np.abs(test_counts - 0.2 * total) < 1)


def test_digits_split_is_fixed(digits):
    # The split belongs to the dataset: the run's seed does not move it.
    again = load_dataset("digits", seed=123)
    assert torch.equal(digits.x_train, again.x_train) and torch.equal(digits.y_test, again.y_test)


def test_digits_subsets(digits):
    small = load_dataset("digits", train_size=200, test_size=50, seed=1)
    assert len(small.y_train) == 200 and len(small.y_test) == 50
    counts = np.bincount(small.y_train.numpy(), minlength=10)
    assert counts.sum() == 200 and counts.min() >= 19 and counts.max() <= 21
    # A subset's rows are rows of the full split.
    full_rows = {tuple(r) for r in digits.x_train.reshape(len(digits.x_train), -1).numpy().round(5)}
    assert all(tuple(r) in full_rows for r in small.x_train.reshape(200, -1).numpy().round(5))


# ---------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------


def test_iid_equal_and_covering():
    labels = balanced_labels(per_class=101)  # N = 1010, not a multiple of m
    parts = iid(labels, 7, np.random.default_rng(0))
    assert_disjoint_sorted(parts, len(labels), covering=True)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_prior_equal_sizes():
    labels = balanced_labels()
    parts = dirichlet(labels, 13, 0.3, np.random.default_rng(0))
    assert_disjoint_sorted(parts, len(labels), covering=False)
    assert [len(p) for p in parts] == [len(labels) // 13] * 13


def test_dirichlet_alpha_controls_concentration():
    labels = balanced_labels(per_class=1000)
    big = histograms(labels, dirichlet(labels, 50, 1e4, np.random.default_rng(0)), 10)
    fractions = big / big.sum(1, keepdims=True)
    assert np.abs(fractions - 0.1).max() < 0.12  # 200 samples per client: within multinomial noise
    assert np.abs(fractions.mean(0) - 0.1).max() < 0.02
    # Half the data: class pools rarely run out, so a client keeps to its prior's top class.
    small = histograms(labels, dirichlet(labels, 100, 0.01, np.random.default_rng(0), client_size=50), 10)
    assert (small.max(1) / small.sum(1)).mean() > 0.9
    # All the data (DisPFL's setting): clients whose class runs out spill over, still concentrated.
    small = histograms(labels, dirichlet(labels, 100, 0.01, np.random.default_rng(0)), 10)
    medium = histograms(labels, dirichlet(labels, 100, 0.3, np.random.default_rng(0)), 10)
    assert (small.max(1) / small.sum(1)).mean() > 0.75 > 0.55 > (medium.max(1) / medium.sum(1)).mean()


def test_dirichlet_alpha_zero_one_class_per_client():
    labels = balanced_labels(per_class=120)
    hist = histograms(labels, dirichlet(labels, 30, 0.0, np.random.default_rng(0)), 10)
    assert np.all((hist > 0).sum(1) == 1)
    # Classes spread evenly: 30 clients over 10 classes, 3 each.
    np.testing.assert_array_equal((hist > 0).sum(0), np.full(10, 3))


def test_dirichlet_alpha_zero_respects_exhaustion():
    labels = balanced_labels(num_classes=3, per_class=10)
    parts = dirichlet(labels, 5, 0.0, np.random.default_rng(0))  # 5 clients x 6 > 10 per class
    assert_disjoint_sorted(parts, 30, covering=True)
    assert [len(p) for p in parts] == [6] * 5


def test_prior_sampler_matches_feddyn_loop():
    """The bulk sampler against FedDyn's one-sample-at-a-time loop, under heavy exhaustion."""
    labels = np.repeat(np.arange(4), 10)
    priors = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.6, 0.2, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    sizes = np.full(4, 10)

    def feddyn(rng):
        pool, need, counts = np.bincount(labels), sizes.copy(), np.zeros((4, 4), int)
        while need.sum():
            i = rng.integers(4)
            if need[i] == 0:
                continue
            while True:  # redraw while the class is used up
                c = np.argmax(rng.random() <= np.cumsum(priors[i]))
                if pool[c] > 0:
                    break
            pool[c] -= 1
            need[i] -= 1
            counts[i, c] += 1
        return counts

    rng, reps = np.random.default_rng(0), 1500
    reference = np.mean([feddyn(rng) for _ in range(reps)], axis=0)
    ours = np.mean(
        [histograms(labels, _sample_by_priors(labels, priors, sizes, rng, None), 4) for _ in range(reps)], axis=0
    )
    # Standard errors are about 0.04; a sampler that serves first choices first is off by ~0.35.
    np.testing.assert_allclose(ours, reference, atol=0.2)


def test_dirichlet_per_class_sizes_differ_and_classes_preserved():
    labels = balanced_labels()
    parts = dirichlet(labels, 10, 0.5, np.random.default_rng(0), method="per-class")
    assert_disjoint_sorted(parts, len(labels), covering=True)
    assert len({len(p) for p in parts}) > 1
    np.testing.assert_array_equal(histograms(labels, parts, 10).sum(0), np.bincount(labels))


def test_dirichlet_per_class_alpha_zero():
    labels = balanced_labels()
    hist = histograms(labels, dirichlet(labels, 4, 0, np.random.default_rng(0), method="per-class"), 10)
    assert np.all((hist > 0).sum(0) == 1)  # every class whole on one client
    assert sorted((hist > 0).sum(1)) == [2, 2, 3, 3]


def test_shards_pathological():
    labels = balanced_labels(per_class=100)  # shard size 1000 / 20 = 50 divides the class size
    parts = shards(labels, 10, 2, np.random.default_rng(0))
    assert_disjoint_sorted(parts, len(labels), covering=True)
    assert all(len(p) == 100 for p in parts)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    # DFedAvgM §6 layout: sorted labels cut into 40 shards of 1500, 2 per client.
    mnist_like = np.repeat(np.arange(10), 6000)
    parts = shards(mnist_like, 20, 2, np.random.default_rng(0))
    assert all(len(p) == 3000 and len(np.unique(mnist_like[p])) <= 2 for p in parts)


def test_split_like_follows_train_proportions(digits):
    y_train, y_test = digits.y_train.numpy(), digits.y_test.numpy()
    rng = np.random.default_rng(0)
    train_parts = dirichlet(y_train, 5, 0.5, rng)
    test_parts = split_like(train_parts, y_train, y_test, rng)
    assert_disjoint_sorted(test_parts, len(y_test), covering=False)
    assert [len(p) for p in test_parts] == [len(y_test) // 5] * 5
    p_train = histograms(y_train, train_parts, 10) / np.array([[len(p)] for p in train_parts])
    p_test = histograms(y_test, test_parts, 10) / (len(y_test) // 5)
    tv = 0.5 * np.abs(p_train - p_test).sum(1)
    assert tv.mean() < 0.2
    # Against an unrelated (iid) test split the distance is far larger.
    iid_test = iid(y_test, 5, rng, client_size=len(y_test) // 5)
    tv_iid = 0.5 * np.abs(p_train - histograms(y_test, iid_test, 10) / (len(y_test) // 5)).sum(1)
    assert tv_iid.mean() > tv.mean() + 0.1


def test_same_seed_same_partition():
    labels = balanced_labels()
    for scheme, kwargs in [
        ("iid", {}),
        ("dirichlet", {"alpha": 0.3}),
        ("dirichlet", {"alpha": 0.3, "dirichlet_method": "per-class"}),
        ("shards", {}),
    ]:
        a = partition(labels, 8, scheme, rng=np.random.default_rng(5), **kwargs)
        b = partition(labels, 8, scheme, rng=np.random.default_rng(5), **kwargs)
        c = partition(labels, 8, scheme, rng=np.random.default_rng(6), **kwargs)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_large_partition_is_fast():
    import time

    labels = balanced_labels(per_class=6000)
    start = time.process_time()  # CPU time of this process: a busy machine does not inflate it
    parts = dirichlet(labels, 1000, 0.1, np.random.default_rng(0))
    assert time.process_time() - start < 2.0  # about 0.03 s vectorized; a loop over samples takes far longer
    assert [len(p) for p in parts] == [60] * 1000


# ---------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [-1, float("nan"), float("inf"), None, "x"])
def test_bad_alpha(alpha):
    with pytest.raises(DataError, match="alpha"):
        partition(balanced_labels(), 5, "dirichlet", rng=np.random.default_rng(0), alpha=alpha)


def test_unknown_scheme_lists_allowed():
    with pytest.raises(DataError, match="unknown partition scheme 'dirchlet'") as info:
        partition(balanced_labels(), 5, "dirchlet", rng=np.random.default_rng(0))
    assert all(name in str(info.value) for name in PARTITIONS)
    with pytest.raises(DataError, match="prior, per-class"):
        dirichlet(balanced_labels(), 5, 0.3, np.random.default_rng(0), method="acar")


@pytest.mark.parametrize("scheme, kwargs", [("iid", {}), ("dirichlet", {"alpha": 0.3}), ("shards", {})])
def test_more_clients_than_samples(scheme, kwargs):
    labels = balanced_labels(per_class=1)  # N = 10
    with pytest.raises(DataError, match=r"m=11.*N=10"):
        partition(labels, 11, scheme, rng=np.random.default_rng(0), **kwargs)


def test_too_many_shards_and_empty_per_class_clients():
    labels = balanced_labels(per_class=1)
    with pytest.raises(DataError, match="shards"):
        shards(labels, 6, 2, np.random.default_rng(0))
    with pytest.raises(DataError, match="m=50"):  # 10 classes cannot reach 50 clients at tiny alpha
        dirichlet(balanced_labels(), 50, 0.001, np.random.default_rng(0), method="per-class")


def test_bad_counts_and_rng():
    labels = balanced_labels()
    with pytest.raises(DataError, match="m"):
        iid(labels, 0, np.random.default_rng(0))
    with pytest.raises(DataError, match="shards_per_client"):
        shards(labels, 5, 0, np.random.default_rng(0))
    with pytest.raises(DataError, match="Generator"):
        iid(labels, 5, 0)
    with pytest.raises(DataError, match="client_size"):
        iid(labels, 5, np.random.default_rng(0), client_size=10_000)


def test_unknown_dataset_and_sizes(digits):
    # (mnist is a real dataset now, see tests/test_datasets_torchvision.py)
    with pytest.raises(
        DataError, match="unknown dataset 'svhn'.*cifar10, cifar100, digits, emnist, fashion-mnist, mnist"
    ):
        load_dataset("svhn")
    assert set(DATASETS) == {"digits", "fashion-mnist", "mnist", "emnist", "cifar10", "cifar100"}
    with pytest.raises(DataError, match="train_size=5000.*1..1438"):
        load_dataset("digits", train_size=5000)
    with pytest.raises(DataError, match="test_size=0"):
        load_dataset("digits", test_size=0)


# ---------------------------------------------------------------------------
# ClientData / federate
# ---------------------------------------------------------------------------


def test_client_data_layout():
    x, y = torch.randn(10, 1, 2, 2), torch.arange(10) % 3
    parts = [np.array([1, 4, 7]), np.array([0]), np.array([2, 3, 5, 9])]
    cd = ClientData.from_parts(x, y, parts)
    assert cd.m == 3 and cd.n_max == 4
    np.testing.assert_array_equal(cd.counts.numpy(), [3, 1, 4])
    np.testing.assert_array_equal(cd.index.numpy(), [[1, 4, 7, 0], [0, 0, 0, 0], [2, 3, 5, 9]])
    np.testing.assert_array_equal(cd.mask().numpy(), [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    assert all(np.array_equal(a, b) for a, b in zip(cd.client_indices(), parts))
    np.testing.assert_array_equal(cd.label_histogram(3), [[0, 3, 0], [1, 0, 0], [2, 0, 2]])


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "shards"])
def test_federate(digits, scheme):
    fed = federate(digits, 10, scheme=scheme, alpha=0.5, rng=np.random.default_rng(0), dtype=torch.float64)
    assert fed.dataset is digits
    assert fed.train.x.dtype == torch.float64 and fed.train.y.dtype == torch.int64
    assert fed.train.x.shape == digits.x_train.shape and fed.test.x.shape == digits.x_test.shape
    for split, n in ((fed.train, len(digits.y_train)), (fed.test, len(digits.y_test))):
        parts = split.client_indices()
        assert_disjoint_sorted(parts, n, covering=False)
        assert split.mask().sum().item() == split.counts.sum().item() == sum(len(p) for p in parts)
        assert torch.all(split.index[~split.mask()] == 0)
        hist = split.label_histogram(10)
        np.testing.assert_array_equal(hist, histograms(split.y.numpy(), parts, 10))
    assert np.all(fed.test.counts.numpy() == len(digits.y_test) // 10)
    # Each client is tested mostly on the classes it trains on (all of them unless a
    # class's test pool runs out and the client takes random leftovers).
    train_h, test_h = fed.train.label_histogram(10), fed.test.label_histogram(10)
    on_own_classes = (test_h * (train_h > 0)).sum(1) / test_h.sum(1)
    assert on_own_classes.mean() > 0.9
