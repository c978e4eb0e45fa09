"""Pieces of the float64 per-client references (test_algorithms.py, test_centralized.py), written from the papers.

SAM's and ASAM's perturbed point, one client's parameters at a time as a list of tensors, the norm as a Python sum
over them: the same equations as ``dfl_core/local.py``, in a form that shares no code with it. A client's gradient on
its samples: its whole split, or one of the engine's mini-batches drawn for it alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def norm(vs: list[torch.Tensor]) -> float:
    """‖v‖ over a list of tensors."""
    return math.sqrt(sum(float((v**2).sum()) for v in vs))


def sam_point(y: list[torch.Tensor], g: list[torch.Tensor], names: list[str], params) -> list[torch.Tensor]:
    """y + δ, the point whose gradient SAM (or ASAM, ``params.sam_variant == "asam"``) descends along.

    SAM: δ = ρ g/‖g‖. ASAM: δ = ρ T(Tg)/‖Tg‖ with T = |y| + η, per weight tensor (every tensor when
    ``asam_scale_all``, else T = 1 for the biases).
    """
    rho = params.rho
    if getattr(params, "sam_variant", "sam") == "asam":
        eta, scale_all = params.asam_eta, params.asam_scale_all
        T = [yj.abs() + eta if scale_all or "weight" in n else torch.ones_like(yj) for n, yj in zip(names, y)]
        tg = [tj * gj for tj, gj in zip(T, g)]
        size = norm(tg)
        return [yj + rho * tj * v / (size + 1e-12) for yj, tj, v in zip(y, T, tg)]
    size = norm(g)
    return [yj + rho * gj / (size + 1e-12) for yj, gj in zip(y, g)]


def client_samples(train, part, batch=None) -> tuple[torch.Tensor, torch.Tensor]:
    """A client's inputs and labels: its whole train split (sample ids ``part``), or ``batch``, one engine mini-batch
    ``(inputs, labels, weights)`` drawn for this client alone (one row), without the padding of a client with fewer
    than B samples."""
    if batch is None:
        idx = torch.as_tensor(part)
        return train.x[idx], train.y[idx]
    inputs, labels, weights = (b[0] for b in batch)
    return inputs[weights > 0], labels[weights > 0]


def gradient(net: torch.nn.Module, params: list[torch.Tensor], inputs, labels) -> list[torch.Tensor]:
    """The gradient of ``net``'s mean cross-entropy on (inputs, labels) at ``params``, one tensor per parameter."""
    with torch.no_grad():
        for p, v in zip(net.parameters(), params):
            p.copy_(v)
    loss = F.cross_entropy(net(inputs), labels)
    return [g.detach() for g in torch.autograd.grad(loss, list(net.parameters()))]
