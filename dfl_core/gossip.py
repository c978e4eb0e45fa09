r"""Gossip: :math:`X \leftarrow W X`, applied Q times (DFedSAM eqs. (4)–(5)), and the state compressed gossip keeps.

One gossip step is a matrix product (:mod:`dfl_core.topology` builds ``W``; this module only multiplies by it). When
most of W's entries are zero only its nonzeros are used, so a ring costs O(m·degree·d) rather than O(m²·d).

Compressed gossip (``quant_bits``, CHOCO-Gossip: :meth:`dfl_core.engine.SimulationTools.compressed_gossip`) keeps
state across rounds, the public copies :math:`\hat x`; :func:`initial_gossip_state` is that state before round 0.
The run carries it as ``RunState.gossip_state`` and checkpoints it as it does the local rule's state.
"""

from __future__ import annotations

import warnings
import numpy as np
import torch
from torch import Tensor

__all__ = ["MixingOperator", "SPARSE_DENSITY", "initial_gossip_state"]

#: Below this fraction of nonzeros, W is treated as sparse.
SPARSE_DENSITY = 0.25


def initial_gossip_state(params, x0: Tensor, same_init: bool) -> Tensor | None:
    r"""What gossip keeps across rounds, before round 0: ``None`` for exact gossip; compressed gossip's public copies
    :math:`\hat x^0` (``params.uses_public_copies``, an ``(m, d)`` tensor): x⁰ when every client starts from the same
    model, which each can compute from the seed at no cost, else 0 (CHOCO-Gossip's start)."""
    if not getattr(params, "uses_public_copies", False):
        return None
    return x0.clone() if same_init else torch.zeros_like(x0)


class MixingOperator:
    """A mixing matrix on the device, ready to multiply ``(m, d)`` parameters.

    Three ways to compute ``W @ x`` (``mode``), chosen from W's density and the device unless ``mode`` is given:

    * ``"dense"``: one matrix product (dense graphs; O(m²·d));
    * ``"rows"`` (sparse W on a CPU): each output row is written once as the weighted sum of the rows it mixes,
      ``out[i] = Σ_j w_ij x[j]`` over the nonzeros of row i: O(nnz·d) arithmetic and no temporary, where a sparse
      CSR product on CPU zero-fills its output and allocates an (m, d) temporary (see ``benchmarks/``);
    * ``"csr"`` (sparse W on a GPU): one sparse CSR product, so the number of kernel launches does not grow with m.
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
            self.rows = [
                (cols.tolist(), W[i, cols].tolist()) for i, cols in enumerate(np.flatnonzero(row) for row in W)
            ]
            return
        dense = torch.as_tensor(W, dtype=dtype, device=device)
        if self.mode == "csr":
            with warnings.catch_warnings():  # "sparse CSR support is in beta": we rely only on CSR @ dense
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
