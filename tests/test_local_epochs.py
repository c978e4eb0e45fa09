"""local_epochs: local work in the papers' unit, K = E·⌈n/B⌉ steps with n a client's train-split size."""

from __future__ import annotations

import math

import pytest
import torch

from dfl_core import Config
from dfl_core.config import ConfigError
from dfl_core.engine import Simulation
from dfl_core.engine.trainer import RoundStreams


@pytest.mark.parametrize(
    "epochs, batch, steps",
    [
        (5, 128, 20),  # the DFedSAM paper's protocol on 500 images a client: 5 · ⌈500/128⌉ = 5 · 4
        (1, 128, 4),
        (0.25, 128, 1),  # a quarter of an epoch: one step
        (0.1, 128, 1),  # never fewer than one step
        (0.5, 100, 3),  # 0.5 · 5 = 2.5, rounded half up
        (2, 50, 20),
    ],
)
def test_steps_follow_from_the_clients_size_and_the_batch(epochs, batch, steps):
    cfg = Config(
        algorithm="dfedsam",
        dataset="fashion-mnist",
        train_size=10_000,
        num_clients=20,
        local_epochs=epochs,
        batch_size=batch,
    )
    assert cfg.samples_per_client() == 500
    assert (cfg.local_epochs, cfg.params.local_steps) == (epochs, steps)
    assert cfg == cfg  # resolving again changes nothing


def test_full_batch_steps_are_epochs():
    cfg = Config(algorithm="dfedavg", local_epochs=3, full_batch=True)
    assert cfg.params.local_steps == 3


def test_every_sample_is_seen_about_e_times_a_round():
    """In one round each client's K·B draws walk its own permutation E times over (± the last partial batch)."""
    cfg = Config(algorithm="dfedavg", dataset="digits", num_clients=10, local_epochs=2, batch_size=16, rounds=1)
    sim = Simulation(cfg)
    assert sim.config.params.local_steps == 2 * math.ceil(1438 / 10 / 16) == 18
    train = sim.data.train
    clients = torch.arange(cfg.num_clients)
    batches = sim.trainer.batches(clients, RoundStreams(0, 0))
    assert len(batches) == sim.config.params.local_steps
    for i in range(cfg.num_clients):
        drawn = torch.cat([labels_idx[i] for labels_idx in _sample_ids(sim, batches, clients)])
        own = train.index[i, : train.counts[i]]
        seen = torch.stack([(drawn == j).sum() for j in own])
        assert seen.min() >= 2 and seen.max() <= 3, (i, seen.min(), seen.max())


def _sample_ids(sim, batches, clients):
    """The sample ids behind each step's inputs (matched by value: digits images are distinct enough)."""
    x = sim.data.train.x.flatten(1)
    out = []
    for inputs, _, _ in batches:
        flat = inputs.flatten(2)  # (n, B, d)
        out.append(torch.cdist(flat, x[None].expand(len(clients), -1, -1)).argmin(-1))
    return out


def test_a_run_records_e_and_k(tmp_path):
    cfg = Config(algorithm="dfedsam", num_clients=8, local_epochs=1, batch_size=32, rounds=1)
    history = Simulation(cfg).run()
    assert history.config["local_epochs"] == 1 and history.config["local_steps"] == math.ceil(1438 / 8 / 32)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            dict(
                local_epochs=5,
                local_steps=7,
                batch_size=128,
                num_clients=20,
                dataset="fashion-mnist",
                train_size=10_000,
            ),
            "local_steps=7 disagrees with local_epochs=5: 5 epochs of ⌈500/128⌉ = 4 steps make "
            "K = 20; give one of the two",
        ),
        (
            dict(algorithm="dpsgd", local_epochs=1),
            r"local_epochs=1 is not used by algorithm 'dpsgd', which takes 1 "
            r"local step\(s\) a round",
        ),
        (dict(local_epochs=0), r"local_epochs must be in \(0.0, inf\), got 0"),
        (dict(local_epochs=-1.0), r"local_epochs must be in \(0.0, inf\), got -1.0"),
        (dict(local_epochs="5"), "local_epochs must be a finite number, got '5'"),
    ],
)
def test_bad_local_epochs_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        Config(**{"algorithm": "dfedavg", **changes})


def test_agreeing_steps_and_epochs_are_accepted():
    cfg = Config(
        algorithm="dfedavg",
        dataset="fashion-mnist",
        train_size=10_000,
        num_clients=20,
        local_epochs=5,
        local_steps=20,
        batch_size=128,
    )
    assert cfg.params.local_steps == 20
