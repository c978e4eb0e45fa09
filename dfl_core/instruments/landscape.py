r"""Loss landscapes in 1-D and 2-D with filter normalisation (Li et al., 2018).

A landscape plots the loss on a line or a plane through the parameter space,

.. math::

    \alpha \mapsto F(w + \alpha\, d), \qquad (\alpha, \beta) \mapsto F(w + \alpha\, d_1 + \beta\, d_2),

with random directions d that are *filter-normalised* (:func:`random_direction`). Without it, a network's
scale invariances (a ReLU layer multiplied by c and the next one divided by c is the same function) make
plots of different networks incomparable; with it, the width of a basin says something about flatness (Li
et al., §4). DFedSAM (Figure 2) uses such plots to show that decentralized training finds sharper minima than
centralized training. :func:`interpolation_line` is the second picture: a bump on the segment between two
clients' models means they sit in different basins, which is what inconsistency among clients looks like.

Every point is one forward pass of a whole model, so several points of a line are evaluated at once by treating them
as the "clients" of :meth:`~dfl_core.stacked.StackedModel.forward`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..metrics import EVAL_CHUNK
from ..stacked import StackedModel
from .hessian import union_data

__all__ = [
    "random_direction",
    "loss_line",
    "loss_surface",
    "interpolation_line",
    "evaluate_points",
    "landscape_around_average",
    "LossLine",
    "LossSurface",
]

#: Memory for the stacked parameter copies of one group of points (bounds memory, not results).
POINTS_BYTES = 64 << 20


def random_direction(model: StackedModel, params: Tensor, seed: int = 0) -> Tensor:
    r"""A filter-normalised Gaussian direction ``(d,)`` around ``params`` (Li et al., 2018, §4).

    For every weight tensor with two or more dimensions, each *filter* :math:`d_{k}` — a slice along the output
    dimension: a row of a ``Linear`` weight, an output channel of a ``Conv2d`` weight — is rescaled to the norm of
    the same filter of ``params``:

    .. math::

        d_{k} \leftarrow \frac{d_{k}}{\lVert d_{k} \rVert} \lVert w_{k} \rVert.

    One-dimensional parameters (biases, GroupNorm weights and biases) are set to zero, as Li et al. do for biases
    and BatchNorm ("ignore biasbn" in their code). The draw depends on ``seed`` only, not on the dtype or device.

    References:
        Li, Xu, Taylor, Studer & Goldstein, "Visualizing the Loss Landscape of Neural Nets", NeurIPS 2018.
    """
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randn(model.d, generator=gen, dtype=torch.float64)
    w = params.detach().to("cpu", torch.float64)
    out = torch.zeros(model.d, dtype=torch.float64)
    for shape, o in zip(model.shapes, model.offsets):
        n = shape.numel()
        if len(shape) <= 1:  # bias / norm parameter: not perturbed
            continue
        d_f = raw[o : o + n].view(shape[0], -1)  # (filters, fan-in)
        w_f = w[o : o + n].view(shape[0], -1)
        scale = w_f.norm(dim=1, keepdim=True) / (d_f.norm(dim=1, keepdim=True) + 1e-10)
        out[o : o + n] = (d_f * scale).reshape(-1)
    return out.to(params)


@torch.no_grad()
def evaluate_points(
    model: StackedModel,
    points: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    chunk: int = EVAL_CHUNK,
    point_chunk: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy and accuracy of each model in ``points`` (``(P, d)``) on all of ``(x, y)``.

    Returns two ``(P,)`` float64 tensors. ``point_chunk`` models go through one stacked forward pass (default: as
    many as fit in :data:`POINTS_BYTES`), with about ``chunk`` samples per pass shared among them.
    """
    P, n = points.shape[0], len(y)
    if point_chunk is None:
        point_chunk = max(1, min(32, POINTS_BYTES // (model.d * points.element_size())))
    loss = torch.zeros(P, dtype=torch.float64)
    correct = torch.zeros(P, dtype=torch.float64)
    x = x.to(device=points.device, dtype=points.dtype) if x.is_floating_point() else x.to(points.device)
    y = y.to(points.device)
    for g in range(0, P, point_chunk):
        pts = points[g : g + point_chunk]  # (k, d)
        k = pts.shape[0]
        per = max(1, chunk // k)  # samples per point per pass
        for a in range(0, n, per):
            xb, yb = x[a : a + per], y[a : a + per]
            logits = model.forward(pts, xb.unsqueeze(0).expand(k, *xb.shape))  # (k, b, C)
            ce = F.cross_entropy(logits.flatten(0, 1), yb.repeat(k), reduction="none").view(k, -1)
            loss[g : g + k] += ce.sum(1).double().cpu()
            correct[g : g + k] += (logits.argmax(-1) == yb).sum(1).double().cpu()
    return loss / max(n, 1), correct / max(n, 1)


@dataclass(frozen=True)
class LossLine:
    """Loss and accuracy at the points ``coords`` of a line (α or t)."""

    coords: np.ndarray  # (P,)
    loss: np.ndarray  # (P,) mean cross-entropy
    acc: np.ndarray  # (P,) accuracy


@dataclass(frozen=True)
class LossSurface:
    """Loss and accuracy on the grid ``alphas × betas``; ``loss[i, j]`` is at ``(alphas[i], betas[j])``."""

    alphas: np.ndarray  # (A,)
    betas: np.ndarray  # (B,)
    loss: np.ndarray  # (A, B)
    acc: np.ndarray  # (A, B)


def _coords(values) -> Tensor:
    return torch.as_tensor(np.asarray(values, dtype=np.float64))


def loss_line(
    model: StackedModel, params: Tensor, direction: Tensor, x: Tensor, y: Tensor, alphas, *, chunk: int = EVAL_CHUNK
) -> LossLine:
    r"""The 1-D landscape :math:`F(w + \alpha d)` at each α in ``alphas`` (Li et al., 2018, §3)."""
    a = _coords(alphas)
    points = params.detach() + a.to(params)[:, None] * direction.to(params)  # (P, d)
    loss, acc = evaluate_points(model, points, x, y, chunk=chunk)
    return LossLine(coords=a.numpy(), loss=loss.numpy(), acc=acc.numpy())


def loss_surface(
    model: StackedModel,
    params: Tensor,
    d1: Tensor,
    d2: Tensor,
    x: Tensor,
    y: Tensor,
    alphas,
    betas,
    *,
    chunk: int = EVAL_CHUNK,
) -> LossSurface:
    r"""The 2-D landscape :math:`F(w + \alpha d_1 + \beta d_2)` on the grid ``alphas × betas``.

    The grid is evaluated one row of α at a time, so only ``len(betas)`` parameter copies exist at once.
    """
    a, b = _coords(alphas), _coords(betas)
    w, d1, d2 = params.detach(), d1.to(params), d2.to(params)
    loss = np.empty((len(a), len(b)))
    acc = np.empty((len(a), len(b)))
    for i, alpha in enumerate(a.tolist()):
        points = (w + alpha * d1) + b.to(params)[:, None] * d2  # (B, d)
        li, ai = evaluate_points(model, points, x, y, chunk=chunk)
        loss[i], acc[i] = li.numpy(), ai.numpy()
    return LossSurface(alphas=a.numpy(), betas=b.numpy(), loss=loss, acc=acc)


def interpolation_line(
    model: StackedModel,
    params_a: Tensor,
    params_b: Tensor,
    x: Tensor,
    y: Tensor,
    ts=np.linspace(-0.25, 1.25, 31),
    *,
    chunk: int = EVAL_CHUNK,
) -> LossLine:
    r"""The loss along the straight line :math:`(1 - t)\, w_a + t\, w_b` between two models.

    t = 0 is ``params_a``, t = 1 is ``params_b``; values outside [0, 1] extrapolate (the default grid goes a quarter
    beyond each end, as in Goodfellow et al., 2015). Linear interpolation between two solutions is the oldest
    landscape picture: a barrier in between means the models lie in different basins.

    References:
        Goodfellow, Vinyals & Saxe, "Qualitatively characterizing neural network optimization problems", ICLR 2015.
    """
    t = _coords(ts)
    a, b = params_a.detach(), params_b.detach().to(params_a)
    t_ = t.to(a)[:, None]
    points = (1 - t_) * a + t_ * b  # (P, d); exactly w_a at t = 0 and w_b at t = 1
    loss, acc = evaluate_points(model, points, x, y, chunk=chunk)
    return LossLine(coords=t.numpy(), loss=loss.numpy(), acc=acc.numpy())


def landscape_around_average(
    sim, alphas, betas=None, *, seed: int = 0, split: str = "train", chunk: int = EVAL_CHUNK
) -> LossLine | LossSurface:
    r"""The landscape of the union's loss around the average model :math:`\bar x` of a Simulation.

    One filter-normalised direction (seed ``seed``) gives a :class:`LossLine` over ``alphas``; with ``betas`` a
    second one (seed ``seed + 1``) gives a :class:`LossSurface`, the picture of DFedSAM Figure 2.
    """
    w = sim.x.mean(0)
    x, y = union_data(sim, split)
    d1 = random_direction(sim.model, w, seed)
    if betas is None:
        return loss_line(sim.model, w, d1, x, y, alphas, chunk=chunk)
    d2 = random_direction(sim.model, w, seed + 1)
    return loss_surface(sim.model, w, d1, d2, x, y, alphas, betas, chunk=chunk)
