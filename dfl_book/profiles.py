"""The book's three profiles and the set-up every chapter runs first.

``DFL_PROFILE=fast`` (the default) runs every chapter in seconds on a CPU, on
real data (a Fashion-MNIST subset, or the bundled digits where a chapter needs
seconds); the committed notebooks are executed under it. ``showcase`` is the
scale at which the chapters' central comparisons separate: all 60,000
Fashion-MNIST images (CIFAR-10 with ``DFL_SHOWCASE_DATASET=cifar10`` where its
files are on disk), 100 clients, 5 seeds, 100 rounds of K = 5 steps of batch 32
(about a quarter of a local epoch a round, far less than the papers' 5 epochs;
the test curves still rise slowly at round 100); its experiments are
precomputed (:mod:`dfl_book.showcase`), and its regime maps
(:mod:`dfl_book.showcase.regime`) run the papers' local work at a smaller size.
``DFL_PROFILE=full`` uses the papers' settings (:mod:`dfl_book.presets`) and is
meant for a GPU. All three run the same code: a chapter reads its sizes from the profile.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = ["Profile", "PROFILES", "get_profile", "setup_notebook", "checkpoint_dir"]

_DATA = None  # one DataCache for every chapter run in this process


def checkpoint_dir() -> Path:
    """Where the full profile keeps its runs' checkpoints: ``$DFL_CHECKPOINTS``, else ``~/.cache/dfl-book``."""
    return Path(os.environ.get("DFL_CHECKPOINTS", Path.home() / ".cache" / "dfl-book" / "checkpoints"))


@dataclass(frozen=True)
class Profile:
    """Sizes a chapter's experiments take under one profile."""

    name: str
    dataset: str  # the main dataset of the training chapters
    train_size: int | None  # stratified subset of the training set (None: all of it)
    test_size: int | None
    model: str
    num_clients: int  # m
    rounds: int  # T
    seeds: tuple[int, ...]  # every training claim is checked over these seeds
    eval_every: int
    presets: dict[str, str] = field(default_factory=dict)  # chapter experiment -> paper preset (full only)

    def config(self, **changes):
        """A :class:`dfl_core.Config` with this profile's sizes, then ``changes``."""
        from dfl_core.config import Config

        base = dict(
            dataset=self.dataset,
            train_size=self.train_size,
            test_size=self.test_size,
            model=self.model,
            num_clients=self.num_clients,
            rounds=self.rounds,
            eval_every=self.eval_every,
        )
        return Config().replace(**{**base, **changes})

    def data(self, cfg):
        """The clients' data of ``cfg``, built once per dataset subset and split (a :class:`DataCache`)."""
        global _DATA
        if _DATA is None:
            from dfl_core.engine import DataCache

            _DATA = DataCache()
        return _DATA(cfg)

    def run(self, cfg, progress: bool = False):
        """Run ``cfg`` to the end on cached data; returns its :class:`~dfl_core.results.History`.

        Under ``full`` every run checkpoints every 10 rounds into
        :func:`checkpoint_dir`, named by a hash of its config, and
        resumes from there: a chapter rerun after a disconnected Colab session
        continues where it stopped, and finished runs are not recomputed.
        """
        from dfl_core.engine import run

        checkpoint = None
        if self.name == "full":
            key = json.dumps(cfg.to_dict(), sort_keys=True)
            checkpoint = checkpoint_dir() / f"{cfg.algorithm}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"
        return run(cfg, progress=progress, checkpoint=checkpoint, resume=True, data=self.data(cfg))


#: The showcase's dataset: Fashion-MNIST (committed results), or CIFAR-10 for users who have its files.
_SHOWCASE_DATASET = os.environ.get("DFL_SHOWCASE_DATASET", "fashion-mnist")

PROFILES: dict[str, Profile] = {
    "fast": Profile(
        "fast",
        dataset="fashion-mnist",
        train_size=6000,
        test_size=1000,
        model="2nn",
        num_clients=20,
        rounds=30,
        seeds=(0, 1, 2),
        eval_every=5,
    ),
    "showcase": Profile(
        "showcase",
        dataset=_SHOWCASE_DATASET,
        train_size=None,
        test_size=None,
        model="cnn-cifar" if _SHOWCASE_DATASET == "cifar10" else "2nn",
        num_clients=100,
        rounds=100,
        seeds=(0, 1, 2, 3, 4),
        eval_every=5,
    ),
    "full": Profile(
        "full",
        dataset="cifar10",
        train_size=None,
        test_size=None,
        model="vgg11-gn",
        num_clients=100,
        rounds=1000,
        seeds=(0, 1, 2, 3, 4),
        eval_every=10,
        presets={"table1": "dfedsam-table1-cifar10", "table2": "dfedsam-table2-cifar10"},
    ),
}


def get_profile(name: str | None = None) -> Profile:
    """The profile named ``name``, else ``$DFL_PROFILE``, else ``fast``."""
    name = name or os.environ.get("DFL_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r} (from DFL_PROFILE); allowed: {', '.join(PROFILES)}")
    return PROFILES[name]


def setup_notebook(seed: int = 0, threads: int = 1) -> Profile:
    """Seed every generator, fix print precision and threads, quiet progress bars; print and return the profile.

    Deterministic outputs (theory numbers, graphs, configs) are then identical
    on every machine, which is what lets ``pytest --nbval`` compare them strictly.
    One thread by default: the book's problems are small, and on a shared
    2-core machine two threads mostly wait on each other (a theory run took
    0.74 s with one thread and 6.9 s with two); it also keeps reductions in
    one order whatever the core count.
    """
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)  # numpy's BLAS (eigenvalues of W)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    np.set_printoptions(precision=4, suppress=True)
    torch.set_printoptions(precision=4, sci_mode=False)
    os.environ["TQDM_DISABLE"] = "1"
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    profile = get_profile()
    print(f"profile: {profile.name}")
    return profile
