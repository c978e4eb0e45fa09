r"""Gossip: :math:`X \leftarrow W X`, applied Q times (DFedSAM eqs. (4)–(5)).

Row i of ``X`` (shape ``(m, d)``) is client i's model, so one gossip step is a
matrix product. ``W`` is kept sparse when most of its entries are zero, so a
ring costs O(m·degree·d) rather than O(m²·d). Gossip never sees a graph: the
topology module builds ``W``, this module only multiplies by it.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["MixingOperator", "mix", "SPARSE_DENSITY"]

#: Below this fraction of nonzeros, W is stored sparse (CSR).
SPARSE_DENSITY = 0.25


class MixingOperator:
    """A mixing matrix on the device, ready to multiply ``(m, d)`` parameters."""

    def __init__(self, W: np.ndarray, device: torch.device | str, dtype: torch.dtype):
        dense = torch.as_tensor(W, dtype=dtype, device=device)
        density = float(np.count_nonzero(W)) / W.size
        self.sparse = density < SPARSE_DENSITY
        if self.sparse:
            with warnings.catch_warnings():      # "sparse CSR support is in beta": we rely only on CSR @ dense
                warnings.simplefilter("ignore", UserWarning)
                self.matrix = dense.to_sparse_csr()
        else:
            self.matrix = dense

    def __call__(self, x: Tensor) -> Tensor:
        return self.matrix @ x


def mix(x: Tensor, operators: Sequence[MixingOperator]) -> Tensor:
    r"""One gossip step per operator: :math:`x^{t,q+1} = W_q\, x^{t,q}` (DFedSAM eq. (5))."""
    for op in operators:
        x = op(x)
    return x
