"""What a round is measured by: accuracy and loss, consensus, communication.

Accuracy and loss are reported for the *average model* x̄ = (1/m) Σ x_i, on the whole test set and on the union of
the clients' train splits (DFedSAM Table 1's "Train" and "Validation"), and for *each client's own model* on its own
train and test splits. Every function evaluates all clients at once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .data import ClientData
from .stacked import StackedModel

__all__ = ["consensus_distance", "evaluate_model", "evaluate_clients", "EVAL_CHUNK"]

#: Samples per forward pass during evaluation (bounds memory, not results).
EVAL_CHUNK = 2048


def consensus_distance(x: Tensor) -> float:
    r""":math:`\frac1m \sum_i \lVert x_i - \bar x \rVert^2`, for ``x`` of shape ``(m, d)``."""
    return float(((x - x.mean(0)) ** 2).sum(1).mean())


@torch.no_grad()
def evaluate_model(
    model: StackedModel, flat: Tensor, x: Tensor, y: Tensor, chunk: int = EVAL_CHUNK
) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of one model ``flat`` (``(d,)``) on ``(x, y)``."""
    correct, loss = 0.0, 0.0
    for a in range(0, len(y), chunk):
        logits = model.forward_one(flat, x[a : a + chunk])
        loss += float(F.cross_entropy(logits, y[a : a + chunk], reduction="sum"))
        correct += float((logits.argmax(1) == y[a : a + chunk]).sum())
    n = max(len(y), 1)
    return correct / n, loss / n


@torch.no_grad()
def evaluate_clients(
    model: StackedModel, x: Tensor, split: ClientData, client_chunk: int | None = None, chunk: int = EVAL_CHUNK
) -> tuple[Tensor, Tensor]:
    """Each client's model on its own samples of ``split``: accuracy and loss, each ``(m,)``.

    Clients are evaluated ``client_chunk`` at a time (all at once by default),
    with about ``chunk`` samples per forward pass.
    """
    m = x.shape[0]
    client_chunk = client_chunk or m
    acc, loss = torch.zeros(m, dtype=torch.float64), torch.zeros(m, dtype=torch.float64)
    mask = split.mask()
    counts = split.counts.clamp(min=1).to(torch.float64).cpu()
    for lo in range(0, m, client_chunk):
        rows = slice(lo, lo + client_chunk)
        n = x[rows].shape[0]
        per_step = max(1, chunk // n)  # samples per client per forward pass
        correct = torch.zeros(n, dtype=torch.float64, device=x.device)
        total = torch.zeros(n, dtype=torch.float64, device=x.device)
        for a in range(0, split.n_max, per_step):
            idx = split.index[rows, a : a + per_step]  # (n, b)
            valid = mask[rows, a : a + per_step].to(torch.float64)  # (n, b)
            logits = model.forward(x[rows], split.x[idx])  # (n, b, C)
            labels = split.y[idx]
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view_as(valid)
            total += (ce.to(torch.float64) * valid).sum(1)
            correct += ((logits.argmax(-1) == labels).to(torch.float64) * valid).sum(1)
        acc[rows], loss[rows] = correct.cpu() / counts[rows], total.cpu() / counts[rows]
    return acc, loss
