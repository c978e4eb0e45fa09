"""Folders of image files as a dataset (dfl_core.data.imagefolder): the ImageFolder layout, read and refused.

Every test writes real PNG or JPEG files with PIL into ``tmp_path``; the decoded-array cache goes to a folder under
``tmp_path`` too (``DFL_IMAGE_CACHE``), so nothing outside the test's folder is read or written.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dfl_core import Config, Simulation
from dfl_core.data import DATASETS, DataError, load_dataset, register_image_folder, scan_image_folder
from dfl_core.data import imagefiles
from dfl_core.data.datasets import CIFAR10_CLASSES, CIFAR10_MEAN, CIFAR10_STD

CLASSES = ("ant", "bee", "cat")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """The cache under tmp_path, and the registry as it was after each test (registrations are global)."""
    monkeypatch.setenv("DFL_IMAGE_CACHE", str(tmp_path / "cache"))
    saved = dict(DATASETS)
    yield
    DATASETS.clear()
    DATASETS.update(saved)


def pixels(label: int, index: int, size=(6, 4), channels: int = 3) -> np.ndarray:
    """A deterministic (H, W, C) uint8 image, different for every class and index."""
    rng = np.random.default_rng(100 * label + index)
    return rng.integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)


def write_folder(root: Path, counts=None, *, suffix: str = ".png", size=(6, 4), classes=CLASSES) -> dict:
    """root/{train,test}/<class>/NNN<suffix>; returns {split: (images (N, H, W, 3), labels)} in file order."""
    counts = counts or {"train": (3, 2, 4), "test": (1, 2, 1)}
    written = {}
    for split, per_class in counts.items():
        images, labels = [], []
        for label, (name, n) in enumerate(zip(classes, per_class)):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                image = pixels(label, i + (1000 if split == "test" else 0), size)
                Image.fromarray(image).save(root / split / name / f"{i:03d}{suffix}")
                images.append(image)
                labels.append(label)
        written[split] = (np.stack(images), np.array(labels))
    return written


# ------------------------------------------------------------------------------------------ reading
def test_a_registered_folder_loads_with_classes_labels_pixels_and_train_statistics(tmp_path):
    written = write_folder(tmp_path / "pics")
    (tmp_path / "pics" / "train" / "bee" / "notes.txt").write_text("not an image")  # ignored, as ImageFolder does
    (tmp_path / "pics" / "train" / "bee" / ".DS_Store").write_bytes(b"\0")
    spec = register_image_folder(tmp_path / "pics", "pics")
    assert DATASETS["pics"] is spec
    assert (spec.input_shape, spec.num_classes, spec.train_size, spec.test_size) == ((3, 4, 6), 3, 9, 4)
    ds = load_dataset("pics")
    assert ds.x_train.shape == (9, 3, 4, 6) and ds.x_test.shape == (4, 3, 4, 6)
    assert ds.y_train.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2] and ds.y_test.tolist() == [0, 1, 1, 2]
    # Per-channel mean and std of the train pixels only, computed here independently.
    train = written["train"][0].astype(np.float64) / 255.0
    mean, std = train.mean(axis=(0, 1, 2)), train.std(axis=(0, 1, 2))
    np.testing.assert_allclose(ds.mean, mean, rtol=1e-9)
    np.testing.assert_allclose(ds.std, std, rtol=1e-9)
    for split, x in (("train", ds.x_train), ("test", ds.x_test)):  # PNG is lossless: exact pixels
        expected = (written[split][0].transpose(0, 3, 1, 2) / 255.0 - mean[:, None, None]) / std[:, None, None]
        np.testing.assert_allclose(x.numpy(), expected, atol=1e-5)
    assert ds.augmentation is None and ds.x_train.dtype == torch.float32


def test_jpeg_files_grey_conversion_and_normalization_options(tmp_path):
    written = write_folder(tmp_path / "jpg", suffix=".JPG")
    rgb = load_dataset(register_image_folder(tmp_path / "jpg", "jpg", normalization="none").name)
    assert rgb.x_train.shape == (9, 3, 4, 6) and rgb.mean == (0.0,) * 3 and rgb.std == (1.0,) * 3
    # JPEG is lossy: the decoded pixels are near, not equal to, what was written.
    error = np.abs(rgb.x_train.numpy() - written["train"][0].transpose(0, 3, 1, 2) / 255.0)
    assert 0 < error.mean() < 0.2 and 0.0 <= rgb.x_train.min() and rgb.x_train.max() <= 1.0
    grey = load_dataset(
        register_image_folder(tmp_path / "jpg", "grey", channels=1, normalization=((0.5,), (0.25,))).name
    )
    assert grey.x_train.shape == (9, 1, 4, 6) and grey.mean == (0.5,) and grey.std == (0.25,)
    with Image.open(tmp_path / "jpg" / "train" / "ant" / "000.JPG") as image:
        first = np.asarray(image.convert("L")) / 255.0
    np.testing.assert_allclose(grey.x_train[0, 0].numpy(), (first - 0.5) / 0.25, atol=1e-5)


def test_a_registered_folder_trains_with_local_epochs_every_partition_and_crop_flip(tmp_path):
    counts = {"train": (12, 12, 12), "test": (2, 2, 2)}
    write_folder(tmp_path / "pics", counts, size=(8, 8))
    register_image_folder(tmp_path / "pics", "pics", augmentation="crop-flip")
    cfg = Config(
        dataset="pics",
        model="linear",
        algorithm="dfedavg",
        num_clients=4,
        rounds=2,
        local_epochs=1,
        batch_size=3,
        device="cpu",
    )
    assert cfg.samples_per_client() == 9 and cfg.params.local_steps == 3  # 36 images / 4 clients, ⌈9/3⌉
    for partition in ("iid", "dirichlet", "shards"):
        sim = Simulation(cfg.replace(partition=partition))
        assert sim.data.dataset.augmentation == "crop-flip"
        sim.run()
        assert len(sim.history.records) >= 2


# --------------------------------------------------------------------------------------- refusals
def test_missing_split_no_classes_empty_class_and_loose_images_are_named(tmp_path):
    root = tmp_path / "bad"
    (root / "train").mkdir(parents=True)
    with pytest.raises(DataError, match=r"has no test/ folder \(sub-folders found: train/\)"):
        scan_image_folder(root)
    (root / "test").mkdir()
    with pytest.raises(DataError, match=r"train'? holds no class folders"):
        scan_image_folder(root)
    (root / "train" / "cat").mkdir()
    (root / "test" / "cat").mkdir()
    with pytest.raises(DataError, match=r"class folder .*train/cat'? holds no images"):
        scan_image_folder(root)
    Image.fromarray(pixels(0, 0)).save(root / "train" / "cat" / "a.png")
    Image.fromarray(pixels(0, 1)).save(root / "train" / "loose.png")
    with pytest.raises(DataError, match=r"images outside any class folder \(loose.png\)"):
        scan_image_folder(root)
    with pytest.raises(DataError, match="does not exist"):
        scan_image_folder(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"has no train/ and test/ folders \(sub-folders found: none\)"):
        register_image_folder(empty, "empty")


def test_mismatched_classes_are_named(tmp_path):
    write_folder(tmp_path / "pics")
    (tmp_path / "pics" / "test" / "cat").rename(tmp_path / "pics" / "test" / "cow")
    with pytest.raises(DataError, match=r"same class folders; only in train/: cat; only in test/: cow"):
        register_image_folder(tmp_path / "pics", "pics")


def test_unreadable_and_truncated_files_are_named(tmp_path):
    write_folder(tmp_path / "pics")
    bad = tmp_path / "pics" / "train" / "bee" / "001.png"
    bad.write_bytes(b"this is not a PNG")
    register_image_folder(tmp_path / "pics", "pics")  # registering opens the first image only
    with pytest.raises(DataError, match=r"cannot read image .*bee/001.png.*delete or replace it"):
        load_dataset("pics")
    write_folder(tmp_path / "cut")
    cut = tmp_path / "cut" / "test" / "cat" / "000.png"
    cut.write_bytes(cut.read_bytes()[:40])
    with pytest.raises(DataError, match=r"cannot read image .*cat/000.png"):
        load_dataset(register_image_folder(tmp_path / "cut", "cut").name)


def test_mixed_sizes_are_refused_not_resized(tmp_path):
    write_folder(tmp_path / "pics")
    Image.fromarray(pixels(1, 9, size=(5, 4))).save(tmp_path / "pics" / "test" / "bee" / "big.png")
    register_image_folder(tmp_path / "pics", "pics")
    with pytest.raises(
        DataError,
        match=r"big.png'? is 5x4 pixels but the dataset's input size is 6x4 .*"
        r"resize the files beforehand",
    ):
        load_dataset("pics")


def test_bad_options_and_built_in_names_are_refused(tmp_path):
    write_folder(tmp_path / "pics")
    with pytest.raises(DataError, match=r"built-in dataset; register the folder under another name"):
        register_image_folder(tmp_path / "pics", "cifar10")
    with pytest.raises(DataError, match=r"augmentation='blur' is not allowed; allowed: none, crop-flip"):
        register_image_folder(tmp_path / "pics", "pics", augmentation="blur")
    with pytest.raises(DataError, match=r"normalization='mean' is not allowed; allowed: 'train'"):
        register_image_folder(tmp_path / "pics", "pics", normalization="mean")
    with pytest.raises(DataError, match=r"3 values each"):
        register_image_folder(tmp_path / "pics", "pics", normalization=((0.5,), (0.2,)))
    with pytest.raises(DataError, match=r"channels=2 is not allowed"):
        register_image_folder(tmp_path / "pics", "pics", channels=2)


def test_a_changed_folder_under_a_registered_name_is_refused(tmp_path):
    write_folder(tmp_path / "pics")
    register_image_folder(tmp_path / "pics", "pics")
    Image.fromarray(pixels(0, 7)).save(tmp_path / "pics" / "train" / "ant" / "new.png")
    with pytest.raises(DataError, match=r"loaded 10 train / 4 test samples; its entry declares 9 / 4"):
        load_dataset("pics")


# ----------------------------------------------------------------------------------------- caching
def test_decoded_once_then_read_from_the_cache_until_a_file_changes(tmp_path, monkeypatch):
    write_folder(tmp_path / "pics")
    register_image_folder(tmp_path / "pics", "pics")
    first = load_dataset("pics")
    assert len(list((tmp_path / "cache").iterdir())) == 1
    decoded = []
    real_decode = imagefiles._decode
    monkeypatch.setattr(imagefiles, "_decode", lambda *a: decoded.append(1) or real_decode(*a))
    again = load_dataset("pics")
    assert decoded == [] and torch.equal(first.x_train, again.x_train) and torch.equal(first.y_test, again.y_test)
    changed = tmp_path / "pics" / "train" / "cat" / "000.png"
    Image.fromarray(pixels(5, 5)).save(changed)
    os.utime(changed, ns=(1, 1))  # a new mtime, whatever the clock's resolution
    fresh = load_dataset("pics")
    assert decoded == [1, 1] and not torch.equal(first.x_train, fresh.x_train)  # train and test decoded again


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    write_folder(tmp_path / "pics")
    monkeypatch.setenv("DFL_IMAGE_CACHE", "off")
    load_dataset(register_image_folder(tmp_path / "pics", "pics").name)
    assert not (tmp_path / "cache").exists()


# ------------------------------------------------------------------------- CIFAR-10 as image files
def declare_sizes(monkeypatch, name: str, n_train: int, n_test: int) -> None:
    monkeypatch.setitem(DATASETS, name, dataclasses.replace(DATASETS[name], train_size=n_train, test_size=n_test))


def test_cifar10_reads_the_image_folder_layout_with_its_own_constants(tmp_path, monkeypatch):
    counts = {"train": (2,) * 10, "test": (1,) * 10}
    written = write_folder(tmp_path / "cifar10-jpeg", counts, size=(32, 32), classes=CIFAR10_CLASSES)
    with pytest.raises(
        DataError,
        match=r"CIFAR-10 loaded 20 train / 10 test samples; its entry declares "
        r"50000 / 10000",
    ):
        load_dataset("cifar10", data_dir=str(tmp_path / "cifar10-jpeg"))  # a partial copy is refused
    declare_sizes(monkeypatch, "cifar10", 20, 10)
    ds = load_dataset("cifar10", data_dir=str(tmp_path / "cifar10-jpeg"))
    assert ds.y_train.tolist() == [c for c in range(10) for _ in range(2)] and ds.y_test.tolist() == list(range(10))
    assert ds.augmentation == "crop-flip" and ds.mean == CIFAR10_MEAN and ds.std == CIFAR10_STD
    mean, std = np.array(CIFAR10_MEAN)[:, None, None], np.array(CIFAR10_STD)[:, None, None]
    expected = (written["train"][0].transpose(0, 3, 1, 2) / 255.0 - mean) / std
    np.testing.assert_allclose(ds.x_train.numpy(), expected, atol=1e-5)


def test_cifar10_folders_need_its_class_names(tmp_path, monkeypatch):
    classes = CIFAR10_CLASSES[:9] + ("lorry",)
    write_folder(tmp_path / "c10", {"train": (1,) * 10, "test": (1,) * 10}, size=(32, 32), classes=classes)
    declare_sizes(monkeypatch, "cifar10", 10, 10)
    with pytest.raises(DataError, match=r"CIFAR-10 from .*the class folders are .*lorry.*needs exactly .*truck"):
        load_dataset("cifar10", data_dir=str(tmp_path / "c10"))


# ---------------------------------------------------------------------------------- command line
def test_the_command_line_reads_an_image_folder(tmp_path, capsys):
    from dfl_core.cli import main

    write_folder(tmp_path / "pics", {"train": (8, 8, 8), "test": (2, 2, 2)}, size=(8, 8))
    common = [
        "run",
        "--algorithms",
        "dfedavg",
        "--seeds",
        "0",
        "--rounds",
        "1",
        "--model",
        "linear",
        "--num-clients",
        "3",
        "--device",
        "cpu",
        "--no-plot",
        "--no-progress",
    ]
    assert (
        main(
            common
            + [
                "--dataset",
                "imagefolder",
                "--data-dir",
                str(tmp_path / "pics"),
                "--local-epochs",
                "1",
                "--image-augmentation",
                "crop-flip",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    assert DATASETS["imagefolder"].train_size == 24 and DATASETS["imagefolder"].augmentation == "crop-flip"
    assert "results:" in capsys.readouterr().out
    assert main(common + ["--dataset", "imagefolder", "--out", str(tmp_path / "out2")]) == 2
    assert "--dataset imagefolder needs --data-dir a folder holding train/<class>/<image>" in capsys.readouterr().err
    assert main(common + ["--image-normalization", "none", "--out", str(tmp_path / "out3")]) == 2
    assert "apply to --dataset imagefolder only" in capsys.readouterr().err
    assert main(["list"]) == 0 and "--dataset imagefolder --data-dir DIR" in capsys.readouterr().out


def test_the_default_cache_sits_beside_the_downloaded_datasets(monkeypatch):
    from dfl_core.data.datasets import DEFAULT_ROOT

    monkeypatch.delenv("DFL_IMAGE_CACHE")
    assert imagefiles.DEFAULT_CACHE.startswith(DEFAULT_ROOT + "/")
    assert imagefiles.cache_dir() == Path(imagefiles.DEFAULT_CACHE).expanduser()


# ------------------------------------------------------------------------------------------ augmentation
def augmented_trainer(tmp_path):
    write_folder(tmp_path / "pics", {"train": (8, 8, 8), "test": (2, 2, 2)}, size=(8, 8))
    register_image_folder(tmp_path / "pics", "pics", augmentation="crop-flip")
    cfg = Config(dataset="pics", model="linear", algorithm="dfedavg", num_clients=4, local_steps=3, batch_size=4)
    return Simulation(cfg.replace(device="cpu")).trainer


def test_a_clients_augmented_batches_do_not_depend_on_the_other_clients(tmp_path):
    """Crops and flips are drawn for all m clients and indexed by id, like the permutations (a subset = a rank's block)."""
    from dfl_core.engine.trainer import RoundStreams

    trainer = augmented_trainer(tmp_path)
    full = trainer.batches(torch.arange(4), RoundStreams(0, 1))
    for subset in ([2, 3], [0, 1], [3, 0], [1]):
        ids = torch.tensor(subset)
        part = trainer.batches(ids, RoundStreams(0, 1))
        for (x, y, w), (px, py, pw) in zip(full, part):
            assert torch.equal(x[ids], px) and torch.equal(y[ids], py) and torch.equal(w[ids], pw), subset


def test_full_participation_augments_as_one_draw_over_the_whole_tensor(tmp_path, monkeypatch):
    """With every client in order the draws are those of crop_flip on the whole (m, B, C, H, W) tensor, as before."""
    from dfl_core.data.augment import black_fill, crop_flip
    from dfl_core.engine.trainer import RoundStreams

    trainer = augmented_trainer(tmp_path)
    ds, clients = trainer.data.dataset, torch.arange(4)
    batches = trainer.batches(clients, RoundStreams(7, 2))
    monkeypatch.setattr(trainer, "_augment", lambda inputs, *args: inputs)  # the same batches, un-augmented
    plain = trainer.batches(clients, RoundStreams(7, 2))
    replay = RoundStreams(7, 2)  # the old way: one generator per batch tensor, drawing for all n·B images in order
    for (x, y, _), (px, py, _) in zip(batches, plain, strict=True):
        assert torch.equal(y, py)
        assert torch.equal(x, crop_flip(px, replay.next_augment_generator(), fill=black_fill(ds.mean, ds.std)))
        assert not torch.equal(x, px)


def test_each_client_chunk_draws_only_its_own_batches_and_trains_as_the_whole(tmp_path, monkeypatch):
    """Local training gathers one chunk's K batches at a time (memory grows with client_chunk, not m); each chunk
    replays the round's augmentation streams, so the chunked round trains every client on the same batches."""
    write_folder(tmp_path / "pics", {"train": (8, 8, 8), "test": (2, 2, 2)}, size=(8, 8))
    register_image_folder(tmp_path / "pics", "pics", augmentation="crop-flip")
    base = Config(dataset="pics", model="linear", algorithm="dfedavg", num_clients=4, local_steps=3, batch_size=4)
    base = base.replace(device="cpu", rounds=2, dtype="float64")
    whole, chunked = Simulation(base.replace(client_chunk=4)), Simulation(base.replace(client_chunk=3))
    drawn = []
    batches = chunked.trainer.batches
    monkeypatch.setattr(chunked.trainer, "batches", lambda ids, *a: drawn.append(ids.tolist()) or batches(ids, *a))
    whole.run(), chunked.run()
    assert drawn == [[0, 1, 2], [3]] * 2  # per chunk, per round
    assert float((whole.x - chunked.x).abs().max()) < 1e-12
