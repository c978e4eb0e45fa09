"""Checkpoints: the whole state of a :class:`~dfl_core.engine.Simulation`, written atomically.

A checkpoint is a ``torch.save`` file of plain containers (dicts, lists,
numbers, strings, tensors), so it loads with ``torch.load(..., weights_only=True)``
and never unpickles code. It holds the run's :class:`~dfl_core.engine.RunState`,
everything a run carries from one round to the next (format ``dfl-book/checkpoint/v3``)::

    {"format": ..., "config": {...},      # the resolved Config
     "t": 12,                             # rounds completed
     "state": {"x": tensor (m, d)} or     # the algorithm's state, field by field
              {"w": tensor (d,), "c": ..., "c_clients": ...},
     "rule_state": None or (...),         # the local rule's state kept across rounds, as plain tuples
     "gossip_state": None or ...,         # gossip's state kept across rounds (compressed gossip: x̂, (m, d))
     "counters": {"transmissions", "bits_sent", "bits_last_round"},
     "round_record": {...},               # the algorithm's quantities of the last round
     "history": [records...], "elapsed_s": 3.2}

The local rule's typed state is stored as plain tuples (:func:`dfl_core.local.typed_state` types it again).
Randomness needs no state (:mod:`dfl_core.rng`): a resumed run ends with bit-for-bit the same parameters
and history as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any, BinaryIO, Callable

import torch

__all__ = [
    "FORMAT",
    "CheckpointError",
    "RESUMABLE_CHANGES",
    "write_atomic",
    "save_atomic",
    "load",
    "check_compatible",
    "pack",
    "unpack",
    "to_cpu",
    "to_device",
]

FORMAT = "dfl-book/checkpoint/v3"
#: Formats of earlier versions, which this one does not read (a run started with them starts again).
EARLIER_FORMATS = ("dfl-book/checkpoint/v1", "dfl-book/checkpoint/v2")

#: Config fields a resumed run may change: they do not alter the rounds already run (``rounds`` only where no
#: schedule reads it: DisPFL's does, unless ``dispfl_anneal_rounds`` is set; ``client_chunk``, ``gossip_mode`` and
#: ``forward_strategy`` change only how a round is computed, up to float rounding; ``data_dir`` is only where files
#: live).
RESUMABLE_CHANGES = ("rounds", "eval_every", "client_chunk", "data_dir", "gossip_mode", "forward_strategy")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that belongs to another configuration."""


def write_atomic(path: str | os.PathLike, content: bytes | Callable[[BinaryIO], Any]) -> Path:
    """Write ``content`` (bytes, or a function writing to a binary file) to ``path`` atomically.

    A temporary file in the same folder, fsync, then :func:`os.replace`: a crash at any moment leaves either the
    previous file or the new one, never a half-written file, and a failed write leaves no temporary file behind. The
    file gets the mode the user's umask gives a new file (0644 under umask 022): the temporary file is created with
    ``os.open(..., 0o666)``, not ``tempfile.mkstemp``, whose private 0600 would outlive the rename.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:  # another writer drew the same name: draw again
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename made durable too (POSIX; where folders open)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def save_atomic(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """``torch.save`` ``state`` to ``path`` by :func:`write_atomic` (never a half-written checkpoint)."""
    return write_atomic(path, lambda f: torch.save(state, f))


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True`` (no code is unpickled); tensors land on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a torch file, or foreign objects
        raise CheckpointError(
            f"{str(path)!r} is not a readable checkpoint ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        older = " (written by an older dfl_core; start the run again)" if found in EARLIER_FORMATS else ""
        raise CheckpointError(f"{str(path)!r} has format {found!r}; expected {FORMAT!r}{older}")
    return state


def check_compatible(
    saved: dict[str, Any], wanted: dict[str, Any], rounds_done: int, path: str | os.PathLike = ""
) -> None:
    """Refuse to resume a checkpoint into a different run (only :data:`RESUMABLE_CHANGES` may differ)."""
    diff = sorted(k for k in set(saved) | set(wanted) if k not in RESUMABLE_CHANGES and saved.get(k) != wanted.get(k))
    if diff:
        pairs = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {wanted.get(k)!r}" for k in diff)
        raise CheckpointError(
            f"checkpoint {str(path)!r} belongs to another run ({pairs}); only "
            f"{', '.join(RESUMABLE_CHANGES)} may change on resume"
        )
    if (
        "dispfl_anneal_rounds" in saved
        and saved["dispfl_anneal_rounds"] is None
        and saved["rounds"] != wanted["rounds"]
    ):
        # DisPFL's mask schedule anneals over the run's horizon: more rounds would change the rounds already run
        raise CheckpointError(
            f"checkpoint {str(path)!r}: DisPFL anneals its masks over rounds={saved['rounds']} "
            f"(dispfl_anneal_rounds unset), so rounds cannot change to {wanted['rounds']} on resume; "
            f"start afresh, or set dispfl_anneal_rounds in a new run to fix the schedule's length"
        )
    if wanted["rounds"] < rounds_done:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has {rounds_done} rounds done, more than rounds={wanted['rounds']}"
        )


def to_device(obj, device):
    """``obj`` (tensors nested in dicts, lists, tuples and NamedTuples) with every tensor moved to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        parts = [to_device(v, device) for v in obj]
        return type(obj)(*parts) if hasattr(obj, "_fields") else type(obj)(parts)  # a NamedTuple keeps its type
    return obj


def to_cpu(obj):
    """A CPU copy of ``obj`` (tensors nested in dicts, lists and tuples), safe to write while training goes on.

    Plain containers only, as a checkpoint file must be: a NamedTuple becomes a tuple of its fields.
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return (tuple if isinstance(obj, tuple) else list)(to_cpu(v) for v in obj)
    return obj


def pack(config: dict[str, Any], run, elapsed_s: float) -> dict[str, Any]:
    """A run's state (a :class:`~dfl_core.engine.RunState`) as a checkpoint: plain containers, tensors on the CPU."""
    return {
        "format": FORMAT,
        "config": config,
        "t": run.t,
        "state": to_cpu(run.state._asdict()),
        "rule_state": to_cpu(run.rule_state),
        "gossip_state": to_cpu(run.gossip_state),
        "counters": {
            "transmissions": run.transmissions,
            "bits_sent": run.bits_sent,
            "bits_last_round": run.bits_last_round,
        },
        "round_record": dict(run.round_record),
        "history": list(run.history),
        "elapsed_s": elapsed_s,
    }


def unpack(saved: dict[str, Any], like_state, device) -> dict[str, Any]:
    """The :class:`~dfl_core.engine.RunState` fields of a checkpoint (``like_state``: a state of the same algorithm)."""
    counters = saved["counters"]
    return dict(
        t=saved["t"],
        state=type(like_state)(**to_device(saved["state"], device)),
        rule_state=to_device(saved["rule_state"], device),
        gossip_state=to_device(saved["gossip_state"], device),
        transmissions=counters["transmissions"],
        bits_sent=counters["bits_sent"],
        bits_last_round=counters["bits_last_round"],
        round_record=dict(saved["round_record"]),
        history=tuple(saved["history"]),
    )
