r"""The showcase scale: each chapter's central comparison, at a size where the methods can separate.

At the ``fast`` profile's size accuracies saturate and the papers' orderings
come out as ties. The ``showcase`` profile (:data:`dfl_book.profiles.PROFILES`)
trains on all 60,000 Fashion-MNIST images (CIFAR-10 instead where its files are
on disk, ``DFL_SHOWCASE_DATASET=cifar10``), m = 100 clients, 100 rounds of about
a quarter of a local epoch each, and 5 seeds; the regime maps
(:mod:`.regime`) add the papers' own local work (5 epochs of batch 128) on 20
clients. Those runs take hours on a CPU, so they are precomputed:

* an :class:`Experiment` (:data:`EXPERIMENTS`, defined in :mod:`.experiments`)
  is a set of arms (configs that differ in one thing) run over the same seeds;
* ``python -m dfl_core showcase NAME`` runs every arm × seed of experiment NAME
  under a profile (``showcase`` by default, ``fast`` for a quick check) with
  checkpoints, and writes ``dfl_book/showcase/results/NAME.json`` after every
  finished run (rerunning the command continues an interrupted regeneration);
* the chapters :func:`load` those files, plot the curves and judge each claim
  by the per-seed paired difference (:meth:`ShowcaseResult.compare`, a 95%
  t-interval from :mod:`dfl_book.stats`).

Two runs with the same seed share the initial model, the data split and the
mini-batches (:mod:`dfl_core.rng`), which is what makes the paired difference
the right comparison. Every results file records its command, seeds, versions,
machine and wall time.
"""

from __future__ import annotations

from pathlib import Path

from dfl_core.errors import ConfigError
from .experiments import EXPERIMENTS
from .runner import KEPT_METRICS, RESULTS_DIR, SCHEMA, Experiment, ShowcaseResult, final_value, load, results_path, run

__all__ = [
    "Experiment",
    "EXPERIMENTS",
    "RESULTS_DIR",
    "SCHEMA",
    "KEPT_METRICS",
    "ShowcaseResult",
    "load",
    "run_experiment",
    "final_value",
    "results_path",
]


def run_experiment(name: str, profile: str = "showcase", **kwargs) -> Path:
    """Run every arm × seed of experiment ``name`` (:data:`EXPERIMENTS`) and write its
    results file (:func:`~.runner.run`, which takes ``jobs``, ``out``, ``checkpoints``, ``seeds``, ``progress``,
    ``command``)."""
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown showcase experiment {name!r}; allowed: {', '.join(EXPERIMENTS)}")
    return run(EXPERIMENTS[name], profile, **kwargs)
