"""Datasets are a registry: one :class:`DatasetSpec` entry in :data:`DATASETS` holds everything about one.

The proof that one entry suffices: a tiny dataset registered by monkeypatching
``DATASETS`` alone is listed by the CLI, validated by ``Config``, loaded by
``load_dataset`` (subsets, ``data_dir`` checks) and trained on by ``Simulation``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from dfl_core import Config, Simulation
from dfl_core.data import DATASETS, DataError, Dataset, DatasetSpec, dataset_shape, load_dataset


def test_every_entry_is_a_spec_named_by_its_key_and_consistent():
    assert set(DATASETS) == {"digits", "fashion-mnist", "mnist", "emnist", "cifar10", "cifar100"}
    for name, spec in DATASETS.items():
        assert isinstance(spec, DatasetSpec) and spec.name == name
        assert dataclasses.is_dataclass(spec) and spec.__dataclass_params__.frozen
        assert dataset_shape(name) == (spec.input_shape, spec.num_classes)
        assert "\n" not in spec.summary and f"{spec.num_classes} classes" in spec.summary
        assert f"{spec.train_size} train / {spec.test_size} test" in spec.summary
        assert len(spec.input_shape) == 3 and spec.train_size > 0 and spec.test_size > 0
    assert "byclass" in DATASETS["emnist"].summary and DATASETS["emnist"].num_classes == 62
    assert DATASETS["cifar10"].augmentation == DATASETS["cifar100"].augmentation == "crop-flip"
    assert DATASETS["digits"].files is None  # bundled: reads no files


def test_the_registered_sizes_are_the_loaded_sizes_and_tables_use_them():
    from dfl_book import tables
    from dfl_book.presets import get_preset

    digits = load_dataset("digits")
    spec = DATASETS["digits"]
    assert (len(digits.y_train), len(digits.y_test)) == (spec.train_size, spec.test_size) == (1438, 359)
    assert (digits.input_shape, digits.num_classes) == (spec.input_shape, spec.num_classes)
    # One definition of a client's samples (Config.samples_per_client): the tables' epochs use it.
    cfg = Config(dataset="digits", num_clients=20, batch_size=32)
    assert cfg.samples_per_client() == 1438 / 20 and tables._steps_per_epoch(cfg) == 3  # ⌈71.9 / 32⌉
    assert not hasattr(tables, "_samples_per_client") and not hasattr(tables, "_TRAIN_SIZES")
    preset = get_preset("dfedsam-table1-cifar10")
    full = preset.config("dfedavg", next(iter(preset.settings)))
    assert tables._epochs(preset, "dfedavg", next(iter(preset.settings))) == full.params.local_steps / -(
        -full.samples_per_client() // full.batch_size
    )


def test_a_reader_that_loads_other_sizes_than_declared_is_refused(monkeypatch):
    def forty(spec, folder):  # always the 40 + 10 samples TINY declares
        return read_tiny(TINY, folder)

    monkeypatch.setitem(DATASETS, "tiny", dataclasses.replace(TINY, train_size=41, reader=forty))
    with pytest.raises(DataError, match=r"Tiny blobs loaded 40 train / 10 test samples; its entry declares 41 / 10"):
        load_dataset("tiny")


def test_the_real_fashion_mnist_files_have_the_registered_sizes():
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("dataset-fashion-mnist is not installed")
    ds, spec = load_dataset("fashion-mnist"), DATASETS["fashion-mnist"]
    assert (len(ds.y_train), len(ds.y_test), ds.input_shape) == (spec.train_size, spec.test_size, spec.input_shape)


# ------------------------------------------------------------------ one entry is enough
def read_tiny(spec: DatasetSpec, folder: Path | None) -> Dataset:
    """Two Gaussian blobs, 2 x 3 x 3 'images'; the folder, when given, holds a scale factor."""
    scale = float((folder / "scale.txt").read_text()) if folder is not None else 1.0
    gen = torch.Generator().manual_seed(0)

    def split(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.arange(n) % spec.num_classes
        x = torch.randn(n, *spec.input_shape, generator=gen) + 3.0 * y.view(-1, 1, 1, 1)
        return scale * x, y

    x_train, y_train = split(spec.train_size)
    x_test, y_test = split(spec.test_size)
    return Dataset(spec.name, x_train, y_train, x_test, y_test, spec.num_classes, spec.input_shape)


TINY = DatasetSpec(
    name="tiny",
    title="Tiny blobs",
    description="two Gaussian blobs as 2x3x3 images",
    source="generated",
    input_shape=(2, 3, 3),
    num_classes=2,
    train_size=40,
    test_size=10,
    files="scale.txt (optional)",
    reader=read_tiny,
)


def test_one_registry_entry_is_a_whole_new_dataset(monkeypatch, tmp_path, capsys):
    from dfl_core.cli import main

    monkeypatch.setitem(DATASETS, "tiny", TINY)
    assert dataset_shape("tiny") == ((2, 3, 3), 2)
    ds = load_dataset("tiny", train_size=20, seed=1)
    assert ds.x_train.shape == (20, 2, 3, 3) and np.bincount(ds.y_train.numpy()).tolist() == [10, 10]
    (tmp_path / "scale.txt").write_text("2.0")
    scaled = load_dataset("tiny", data_dir=str(tmp_path))
    assert torch.allclose(scaled.x_train, 2.0 * load_dataset("tiny").x_train)
    with pytest.raises(DataError, match="does not exist"):
        load_dataset("tiny", data_dir=str(tmp_path / "absent"))
    assert main(["list"]) == 0 and "tiny" in capsys.readouterr().out
    sim = Simulation(Config(dataset="tiny", model="linear", algorithm="dfedavg", num_clients=4, rounds=2, device="cpu"))
    sim.run()
    assert sim.history.final["test_acc"] > 0.5


def test_a_reader_that_breaks_its_spec_is_caught_naming_the_dataset(monkeypatch):
    def wrong_shape(spec, folder):
        ds = read_tiny(spec, folder)
        return dataclasses.replace(ds, x_train=ds.x_train[:, :1])

    monkeypatch.setitem(DATASETS, "tiny", dataclasses.replace(TINY, reader=wrong_shape))
    with pytest.raises(DataError, match=r"Tiny blobs.*train images.*\(40, 1, 3, 3\).*expected .*\(N, 2, 3, 3\)"):
        load_dataset("tiny")

    def wrong_labels(spec, folder):
        ds = read_tiny(spec, folder)
        return dataclasses.replace(ds, y_test=ds.y_test + 5)

    monkeypatch.setitem(DATASETS, "tiny", dataclasses.replace(TINY, reader=wrong_labels))
    with pytest.raises(DataError, match=r"Tiny blobs test labels span 5\.\.6; expected 0\.\.1"):
        load_dataset("tiny")
