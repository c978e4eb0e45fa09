r"""Gossip: :math:`X \leftarrow W X`, applied Q times (DFedSAM eqs. (4)–(5)).

Row i of ``X`` (shape ``(m, d)``) is client i's model, so one gossip step is a
matrix product. When most of W's entries are zero only its nonzeros are used,
so a ring costs O(m·degree·d) rather than O(m²·d). Gossip never sees a graph: the
topology module builds ``W``, this module only multiplies by it.
"""
from __future__ import annotations

import sys
import warnings
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["MixingOperator", "OutputBuffers", "mix", "SPARSE_DENSITY"]

#: Below this fraction of nonzeros, W is treated as sparse.
SPARSE_DENSITY = 0.25


class MixingOperator:
    """A mixing matrix on the device, ready to multiply ``(m, d)`` parameters.

    Three ways to compute ``W @ x`` (``mode``), chosen from W's density and the device
    unless ``mode`` is given:

    * ``"dense"``: one matrix product (dense graphs; O(m²·d));
    * ``"rows"`` (sparse W on a CPU): each output row is written once as the
      weighted sum of the rows it mixes, ``out[i] = Σ_j w_ij x[j]`` over the
      nonzeros of row i: O(nnz·d) arithmetic and no temporary; measured 2–3×
      faster than a sparse CSR product on CPU, which zero-fills its output
      and allocates an (m, d) temporary (``benchmarks/``);
    * ``"csr"`` (sparse W on a GPU): one sparse CSR product, so the number of
      kernel launches does not grow with m.
    """

    MODES = ("dense", "rows", "csr")

    def __init__(self, W: np.ndarray, device: torch.device | str, dtype: torch.dtype, mode: str | None = None):
        device = torch.device(device)
        density = float(np.count_nonzero(W)) / W.size
        self.sparse = density < SPARSE_DENSITY
        if mode is not None and mode not in self.MODES:
            raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(self.MODES)} (or None to choose)")
        self.mode = mode or ("dense" if not self.sparse else ("rows" if device.type == "cpu" else "csr"))
        if self.mode == "rows":
            self.rows = [(cols.tolist(), W[i, cols].tolist()) for i, cols in
                         enumerate(np.flatnonzero(row) for row in W)]
            return
        dense = torch.as_tensor(W, dtype=dtype, device=device)
        if self.mode == "csr":
            with warnings.catch_warnings():      # "sparse CSR support is in beta": we rely only on CSR @ dense
                warnings.simplefilter("ignore", UserWarning)
                self.matrix = dense.to_sparse_csr()
        else:
            self.matrix = dense

    def __call__(self, x: Tensor, out: Tensor | None = None) -> Tensor:
        """:math:`W x`, written into ``out`` if given (``"rows"`` and ``"dense"``), else into a new tensor."""
        if self.mode == "csr":
            return self.matrix @ x
        if self.mode == "dense":
            return torch.mm(self.matrix, x, out=out) if out is not None else self.matrix @ x
        out = torch.empty_like(x) if out is None else out
        for i, (cols, weights) in enumerate(self.rows):
            row = out[i]
            torch.mul(x[cols[0]], weights[0], out=row)
            for j, w in zip(cols[1:], weights[1:]):
                row.add_(x[j], alpha=w)
        return out


def _storage_users(t: Tensor) -> int:
    """How many tensors share ``t``'s memory (+1 for the storage handle asked here); large if unknown."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(t.untyped_storage()._cdata) if count is not None else sys.maxsize


class OutputBuffers:
    """Output tensors reused from round to round, once nothing else refers to them.

    A gossip step writes all m·d numbers of its output; on a CPU a fresh
    ``(m, d)`` tensor costs more than that arithmetic (its pages are faulted in
    on first touch: 206 ms of a 317 ms ring gossip at m = 1000 in
    ``benchmarks/RESULTS.md``). A buffer handed out before is handed out again
    only when this pool holds the only reference to it and no view shares its
    memory, so a model kept by the caller (``old = sim.x``, or ``sim.x[0]``) is
    never overwritten.
    """

    def __init__(self, keep: int = 3):
        self.keep = keep
        self._buffers: list[Tensor] = []

    def take(self, like: Tensor) -> Tensor:
        """A tensor of ``like``'s shape, dtype and device that nobody else uses (new if none is free)."""
        for i in range(len(self._buffers)):
            b = self._buffers[i]
            if b.shape == like.shape and b.dtype == like.dtype and b.device == like.device:
                del b                                              # (the loop variable is a reference too)
                if sys.getrefcount(self._buffers[i]) == 2 and _storage_users(self._buffers[i]) <= 2:
                    return self._buffers[i]
        fresh = torch.empty_like(like, memory_format=torch.contiguous_format)
        self._buffers = [*self._buffers[-(self.keep - 1):], fresh] if self.keep > 1 else [fresh]
        return fresh


def mix(x: Tensor, operators: Sequence[MixingOperator]) -> Tensor:
    r"""One gossip step per operator: :math:`x^{t,q+1} = W_q\, x^{t,q}` (DFedSAM eq. (5))."""
    for op in operators:
        x = op(x)
    return x
