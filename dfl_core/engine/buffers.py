"""Output tensors reused from round to round: where local training and gossip write their results.

The trainer writes the round's local models :math:`y^{t,K}`, and gossip every mixed model, into an
:class:`OutputBuffers` pool rather than a fresh tensor each round (see the class for why); the engine owns the
pools, so they live here rather than with the gossip arithmetic (:mod:`dfl_core.gossip`).
"""

from __future__ import annotations

import sys

import torch
from torch import Tensor

__all__ = ["OutputBuffers"]


def _storage_users(t: Tensor) -> int:
    """How many tensors share ``t``'s memory (+1 for the storage handle asked here); large if unknown."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(t.untyped_storage()._cdata) if count is not None else sys.maxsize


class OutputBuffers:
    """Output tensors reused from round to round, once nothing else refers to them.

    Local training and gossip write all m·d numbers of their output; on a CPU a fresh ``(m, d)`` tensor costs more
    than that arithmetic (its pages are faulted in on first touch: most of a ring gossip's time at m = 1000 in
    ``benchmarks/RESULTS.md``). A buffer handed out before is handed out again only when this pool holds the only
    reference to it and no view shares its memory, so a model kept by the caller (``old = sim.x``, or ``sim.x[0]``)
    is never overwritten.
    """

    def __init__(self, keep: int = 3):
        self.keep = keep
        self._buffers: list[Tensor] = []

    def take(self, like: Tensor) -> Tensor:
        """A tensor of ``like``'s shape, dtype and device that nobody else uses (new if none is free)."""
        for i in range(len(self._buffers)):
            b = self._buffers[i]
            if b.shape == like.shape and b.dtype == like.dtype and b.device == like.device:
                del b  # (the loop variable is a reference too)
                if sys.getrefcount(self._buffers[i]) == 2 and _storage_users(self._buffers[i]) <= 2:
                    return self._buffers[i]
        fresh = torch.empty_like(like, memory_format=torch.contiguous_format)
        self._buffers = [*self._buffers[-(self.keep - 1) :], fresh] if self.keep > 1 else [fresh]
        return fresh
