"""The history of a run and the JSON results file.

Results schema ``dfl-book/results/v1`` (one file per CLI invocation)::

    {
      "schema": "dfl-book/results/v1",
      "created": "2026-11-22T03:04:05+00:00",       # UTC, ISO 8601
      "versions": {"dfl_core": "...", "torch": "...", "python": "..."},
      "command": "python -m dfl_core run ...",      # may be null (API use)
      "runs": [
        {
          "config": {...},        # the resolved Config (every field, no None left for algorithm defaults)
          "wall_time_s": 1.23,
          "notes": ["..."],       # only if some messages could not be sent as counted (the params' transmission_notes)
          "execution": {          # how the run computed: what "auto" and unset settings resolved to
            "device": "cpu",                 # where it ran: "cpu", or "cuda:0" and the GPU's name in device_name
            "dtype": "float32",              # the parameters' dtype
            "precision": "float32",          # local training's arithmetic: float32 (the dtype's), bfloat16, float16
            "forward_strategy": "mlp",       # mlp, batched, vmap or loop (dfl_core.stacked)
            "client_chunk": 10,              # clients trained together
            "world_size": 2,                 # the distributed backend only: the processes of the run,
            "test_set": "...",               # ... the test set of x̄'s test numbers (the clients' own splits),
            "transmissions": "..."           # ... and what transmissions count (rows sent between ranks)
          },
          "history": [            # one record per evaluation, in round order
            {
              "round": 0,                    # rounds completed when measured (0 = initial models)
              "lr": 0.1,                     # η_t used in the last round
              "test_acc": 0.1, "test_loss": 2.3,     # average model x̄ on the whole test set
              "train_acc": 0.1, "train_loss": 2.3,   # x̄ on the union of the clients' train splits
              "gen_error": 0.0,              # train_acc - test_acc (DFedSAM Table 1)
              "client_test_acc": [...],  "client_test_loss": [...],   # client i's model on its own test split
              "client_train_acc": [...], "client_train_loss": [...],  # ... on its own train split
              "client_test_acc_mean": 0.1, "client_train_acc_mean": 0.1,
              "consensus_distance": 0.0,     # (1/m) Σ_i ||x_i - x̄||²
              "transmissions": 0,            # models sent so far (one per nonzero off-diagonal w_ij per gossip step)
              "bits_sent": 0,                # bits of all messages so far: d · bits_per_param per model
                                             # (32 by default), d · b + 32 per b-bit quantized message (quant_bits)
              "bits_last_round": 0,          # bits sent in the last round (0 before the first)
              "bytes_sent": 0,               # bits_sent // 8 (= transmissions · d · bits_per_param / 8 unquantized)
              "wall_time_s": 0.0,            # seconds since the run started
              "fedgf_c": 0.0, "fedgf_drift": 0.0   # FedGF only: the c used and the drift D of the last round
            }, ...
          ]
        }, ...
      ]
    }

Accuracies are fractions in [0, 1].

Files written by earlier versions hold their configs in an earlier form (every algorithm's hyperparameters, ``None``
or 0 where the run's algorithm did not read them; fields added since missing; quant_mixing's readings under their
first names). Convert such a file once with ``python -m dfl_core convert-results OLD.json [-o NEW.json]``
(:func:`convert_results`); this version reads only configs in :meth:`Config.to_dict`'s form.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from . import __version__
from .checkpoint import write_atomic

__all__ = [
    "History",
    "SCHEMA",
    "write_results",
    "read_results",
    "versions",
    "convert_config",
    "convert_results",
    "convert_results_file",
]

SCHEMA = "dfl-book/results/v1"


@dataclass
class History:
    """Evaluation records of one run, in round order, plus its config (``Config.to_dict``)."""

    config: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)  # what could not be sent as counted (the params' transmission_notes)
    execution: dict[str, Any] = field(default_factory=dict)  # how the run computed (device, strategy, chunk, ...)

    @property
    def final(self) -> dict[str, Any]:
        """The last record (after the final round)."""
        return self.records[-1]

    def series(self, key: str) -> list[Any]:
        """One metric over the evaluated rounds, e.g. ``h.series("test_acc")``."""
        if self.records and key not in self.records[0]:
            raise KeyError(f"{key!r} is not measured in this history; allowed: {', '.join(self.records[0])}")
        return [r[key] for r in self.records]

    @property
    def rounds(self) -> list[int]:
        return self.series("round")

    def to_dict(self) -> dict[str, Any]:
        return (
            {"config": self.config, "wall_time_s": self.wall_time_s, "history": self.records}
            | ({"notes": list(self.notes)} if self.notes else {})
            | ({"execution": dict(self.execution)} if self.execution else {})
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "History":
        return cls(
            config=d["config"],
            records=d["history"],
            wall_time_s=d.get("wall_time_s", 0.0),
            notes=list(d.get("notes", [])),
            execution=dict(d.get("execution", {})),
        )


def versions() -> dict[str, str]:
    return {
        "dfl_core": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_results(path: str | os.PathLike, histories: list[History], command: str | None = None) -> Path:
    """Write ``histories`` as a results file, atomically (:func:`dfl_core.checkpoint.write_atomic`)."""
    doc = {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "command": command,
        "runs": [h.to_dict() for h in histories],
    }
    return write_atomic(path, json.dumps(doc, indent=1).encode())


def read_results(path: str | os.PathLike) -> list[History]:
    """Read a results file written by :func:`write_results`; a file that is not one raises a ValueError that names
    the path and what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except ValueError as err:  # not JSON (json.JSONDecodeError), or not text (UnicodeDecodeError)
        raise ValueError(f"{path} is not a results file: not valid JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a results file: it holds a JSON {type(doc).__name__}, not an object")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema')!r} is not {SCHEMA!r}")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise ValueError(f"{path} is not a results file: 'runs' is {'missing' if runs is None else 'not a list'}")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ValueError(f"{path}: runs[{i}] is not an object")
        for key, kind in (("config", dict), ("history", list)):
            if not isinstance(run.get(key), kind):
                what = "missing" if key not in run else f"not a{'n object' if kind is dict else ' list'}"
                raise ValueError(f"{path}: runs[{i}] {key!r} is {what}")
        missing = [k for k in ("algorithm", "seed") if k not in run["config"]]
        if missing:
            raise ValueError(f"{path}: runs[{i}]'s config has no {missing[0]!r}")
    return [History.from_dict(r) for r in runs]


# ------------------------------------------------------------- files of earlier versions, converted once

#: quant_mixing's readings by the names files written before their renaming use.
RENAMED_QUANT_MIXINGS = {"difference": "differences-only", "models": "exact-neighbour-models"}
#: What files written before the typed params hold for a hyperparameter the run's algorithm does not read:
#: ``None``, or 0 for ρ and θ, which every run carried then.
UNREAD_VALUES = {"rho": (None, 0, 0.0), "momentum": (None, 0, 0.0)}


def convert_config(old: dict[str, Any]) -> dict[str, Any]:
    """A config as an earlier version wrote it, in :meth:`Config.to_dict`'s form: the hyperparameters the
    algorithm does not read dropped (refused if set to a real value), quant_mixing's former names renamed, and the
    fields added since filled in with their defaults. A config already in the current form comes back unchanged."""
    from .algorithms import ALGORITHMS
    from .config import Config, algorithm_fields

    d = dict(old)
    algo = ALGORITHMS.get(d.get("algorithm", "dfedsam"))
    if algo is not None:
        for name in algorithm_fields():
            if name in d and name not in algo.defaults and d[name] in UNREAD_VALUES.get(name, (None,)):
                del d[name]
    if d.get("quant_mixing") in RENAMED_QUANT_MIXINGS:
        d["quant_mixing"] = RENAMED_QUANT_MIXINGS[d["quant_mixing"]]
    return Config(**d).to_dict()


def convert_results(doc: dict[str, Any]) -> dict[str, Any]:
    """A results document (this module's schema, or the book's showcase schema: both keep each run's config in
    ``runs[i]["config"]``) with every run's config converted by :func:`convert_config`; the rest is kept as is."""
    if not isinstance(doc.get("runs"), list):
        raise ValueError(f"not a results file: no list of runs (keys: {sorted(doc)})")
    return doc | {"runs": [run | {"config": convert_config(run["config"])} for run in doc["runs"]]}


def convert_results_file(path: str | os.PathLike, out: str | os.PathLike | None = None) -> tuple[Path, int]:
    """Convert the results file ``path`` (:func:`convert_results`) and write it to ``out`` (default: in place,
    atomically); returns the path written and how many run configs changed."""
    doc = json.loads(Path(path).read_text())
    new = convert_results(doc)
    changed = sum(a["config"] != b["config"] for a, b in zip(doc["runs"], new["runs"]))
    return write_atomic(out if out is not None else path, json.dumps(new, indent=1).encode()), changed
