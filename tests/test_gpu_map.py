"""The GPU regime map's script (dfl_book.showcase.gpu_map), end to end on the CPU at a tiny size.

A stand-in for the CIFAR-10 JPEG archive is written here: ten class folders with CIFAR-10's names, a few 32x32
JPEG files each, packed as a .tar.gz; the ``cifar10`` entry is told this copy's sizes (the real entry refuses a
partial copy). The script unpacks it, measures a round of every arm, runs 1 round of every arm for 2 seeds on 2
clients of 10 images with a batch of 10 (one step an epoch; the paper's 128 would cost the CPU a minute) and writes its results file with the
provenance the chapter needs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tarfile

import numpy as np
import pytest
from PIL import Image

from dfl_core.data import DATASETS
from dfl_core.data.datasets import CIFAR10_CLASSES
from dfl_book.showcase import gpu_map
from dfl_book.showcase.regime import cells
from dfl_book.showcase.runner import load


@pytest.fixture
def archive(tmp_path, monkeypatch):
    root = tmp_path / "src" / "cifar10-jpeg"
    rng = np.random.default_rng(0)
    for split, n in (("train", 4), ("test", 1)):
        for name in CIFAR10_CLASSES:
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
                Image.fromarray(image).save(root / split / name / f"{i:04d}.jpg", quality=75)
    path = tmp_path / "cifar10-jpeg.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(root, arcname="cifar10-jpeg")
    monkeypatch.setitem(DATASETS, "cifar10", dataclasses.replace(DATASETS["cifar10"], train_size=40, test_size=10))
    monkeypatch.setenv("DFL_IMAGE_CACHE", str(tmp_path / "cache"))
    return path


def test_the_map_runs_end_to_end_on_a_cpu_at_a_tiny_size(archive, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "--archive",
        str(archive),
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "work"),
        "--device",
        "cpu",
        "--train-size",
        "20",
        "--num-clients",
        "2",
        "--batch-size",
        "10",
        "--seeds",
        "0,1",
        "--rounds",
        "1",
        "--no-progress",
    ]
    assert gpu_map.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("probe ") == 7 and "plan: T = 1 rounds" in printed
    result = load(gpu_map.CIFAR_MAP.name, out)
    doc = result.doc
    assert result.seeds == (0, 1) and set(result.arms) == set(gpu_map.CIFAR_MAP.arms())
    assert list(result.arms)[:3] == list(gpu_map.CORE_ARMS)  # the core arms run first in each seed
    assert len(doc["runs"]) == 7 * 2
    provenance = doc["provenance"]
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert provenance["data_copy"] == {"archive": "cifar10-jpeg.tar.gz", "sha256": sha}
    assert provenance["precision"] == "float32" and provenance["gpu"] == {"gpu": None}
    assert provenance["script_wall_time_s"] > 0 and provenance["plan"]["rounds"] == 1
    assert set(provenance["plan"]["probe"]) == set(result.arms)
    # The paper's local training, the compute-matched arm at twice DFedSAM's steps, the full test split.
    config = {a: result.runs[(a, 0)]["config"] for a in result.arms}
    sam5 = config[gpu_map.CIFAR_MAP.treated_arm(5, 0.01)]
    matched = config[gpu_map.MATCHED_ARM]
    assert (sam5["weight_decay"], sam5["lr"], sam5["lr_decay"], sam5["batch_size"]) == (5e-4, 0.1, 0.998, 10)
    assert gpu_map.CIFAR_MAP.base["batch_size"] == 128 and gpu_map.CIFAR_MAP.base["num_clients"] == 20
    assert (sam5["dataset"], sam5["model"], sam5["alpha"], sam5["test_size"]) == ("cifar10", "cnn-cifar", 0.3, None)
    assert matched["algorithm"] == "dfedavg" and matched["local_steps"] == 2 * sam5["local_steps"]
    assert sam5["data_dir"].endswith("cifar10-jpeg") and all(r["history"][-1]["round"] == 1 for r in doc["runs"])
    grid = cells(result, gpu_map.CIFAR_MAP, last=1)  # the chapter's reading of the map works
    assert [(c.local_epochs, c.rho) for c in grid] == [(1, 0.01), (1, 0.05), (5, 0.01), (5, 0.05)]


def test_sizing_cuts_rounds_then_arms_never_seeds():
    probes = {arm: {"round_s": 1.0, "eval_s": 0.0, "setup_s": 0.0} for arm in gpu_map._ordered_arms()}
    rounds, arms, predicted = gpu_map.plan_rounds(probes, 5, 7 * 5 * 50 + 1, max_rounds=200, min_rounds=30)
    assert (rounds, len(arms)) == (50, 7) and predicted <= 7 * 5 * 50 + 1
    rounds, arms, _ = gpu_map.plan_rounds(probes, 5, 5 * 4 * 30, max_rounds=200, min_rounds=30)
    assert rounds == 30 and arms == [*gpu_map.CORE_ARMS, gpu_map.CIFAR_MAP.treated_arm(5, 0.05)]  # the E = 1 row went
    rounds, arms, _ = gpu_map.plan_rounds(probes, 5, 5 * 3 * 35, max_rounds=200, min_rounds=30)
    assert rounds == 35 and arms == list(gpu_map.CORE_ARMS)  # every droppable arm went, the core stays
    rounds, arms, _ = gpu_map.plan_rounds(probes, 5, 5 * 3 * 10, max_rounds=200, min_rounds=30)
    assert rounds == 10 and set(arms) == set(gpu_map.CORE_ARMS)  # too small a budget: fewer rounds, 5 seeds
