"""Randomness: one seeded stream per purpose, and per round.

Every source of randomness of a run has its own generator, seeded from ``(seed, purpose)``: ``init`` (the initial
models), ``partition`` (the data split and the dataset subsets), ``batches`` (each client's mini-batches),
``topology`` (random graphs and time-varying W), ``clients`` (the clients sampled in a round, centralized FL),
``augment`` (random crops and flips), ``quantize`` (stochastic rounding) and ``masks`` (DisPFL's masks). So changing
one part of a config does not reshuffle the others (a new topology keeps the data split, the initial model and the
mini-batches).

Per-round draws (batches, clients, augmentation, time-varying graphs) come from :func:`round_generator`, a function
of ``(seed, purpose, round)`` only, so round t's randomness does not depend on how the run got there: a resumed run,
or a run split over processes, draws exactly the same numbers. A checkpoint therefore needs no generator state.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

__all__ = ["PURPOSES", "purpose_seed", "round_generator"]

PURPOSES = ("init", "partition", "batches", "topology", "clients", "augment", "quantize", "masks")


def purpose_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose, derived from the run's seed."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; allowed: {PURPOSES}")
    state = np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def round_generator(seed: int, purpose: str, t: int) -> torch.Generator:
    """The CPU generator of one purpose in round t: a function of (seed, purpose, t) only."""
    round_seed = np.random.SeedSequence([purpose_seed(seed, purpose), t]).generate_state(1)[0]
    return torch.Generator(device="cpu").manual_seed(int(round_seed))
