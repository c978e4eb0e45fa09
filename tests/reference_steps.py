"""Pieces of the float64 per-client references (test_algorithms.py, test_centralized.py), written from the papers.

SAM's and ASAM's perturbed point, one client's parameters at a time as a list of tensors, the norm as a Python sum
over them: the same equations as ``dfl_core/local.py``, in a form that shares no code with it.
"""

from __future__ import annotations

import math

import torch


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
