r"""Curvature of the training loss: the top Hessian eigenvalue and the Hessian trace.

DFedSAM (Shi et al., ICML 2023, Figure 5) measures flatness by the largest eigenvalue of the Hessian of the training
loss at the consensus model, following PyHessian (Yao et al., 2020): the smaller it is, the flatter the minimum.
Both measures here need only Hessian-vector products

.. math::

    H v = \nabla_w \big( \nabla_w F(w)^\top v \big), \qquad
    F(w) = \frac1n \sum_{j=1}^n \ell\big(f(w; x_j), y_j\big),

a second backward pass through the first (Pearlmutter, 1994), so the ``d × d`` Hessian is never formed. The sum over
samples is split into chunks and accumulated, so F can be a client's or the union's whole train split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from ..metrics import evaluate_model
from ..stacked import StackedModel

__all__ = [
    "hessian_vector_product",
    "top_hessian_eigenvalue",
    "hessian_trace",
    "TraceEstimate",
    "SharpnessReport",
    "sharpness_report",
    "client_data",
    "union_data",
    "HVP_CHUNK",
]

#: Samples per double-backward pass (bounds memory, not results).
HVP_CHUNK = 1024


def _as_input(x: Tensor, like: Tensor) -> Tensor:
    """Inputs in the parameters' dtype and device (the model is evaluated functionally in that dtype)."""
    return x.to(device=like.device, dtype=like.dtype) if x.is_floating_point() else x.to(like.device)


def hessian_vector_product(
    model: StackedModel, params: Tensor, x: Tensor, y: Tensor, v: Tensor, *, chunk: int = HVP_CHUNK
) -> Tensor:
    r""":math:`H v` for the mean cross-entropy of the model ``params`` (``(d,)``) on ``(x, y)``.

    Each chunk contributes :math:`\nabla(\nabla F_c^\top v)` with :math:`F_c = \frac1n \sum_{j \in c} \ell_j`, so
    the chunks add up to the full-data product exactly. Works in the dtype of ``params`` (float32 or float64).
    """
    n = len(y)
    out = torch.zeros_like(params)
    leaves = model.leaves(params)  # {name: (*shape)} autograd leaves
    tangents = [t.detach() for t in model.unflatten(v.to(params)).values()]
    for a in range(0, n, chunk):
        with torch.enable_grad():
            logits = functional_call(model.template, leaves, (_as_input(x[a : a + chunk], params),))
            loss = F.cross_entropy(logits, y[a : a + chunk].to(params.device), reduction="sum") / n
            grads = torch.autograd.grad(loss, list(leaves.values()), create_graph=True)
            dot = sum((g * t).sum() for g, t in zip(grads, tangents))
            hv = torch.autograd.grad(dot, list(leaves.values()))
        out += torch.cat([h.reshape(-1) for h in hv])
    return out


def _lanczos_top(matvec: Callable[[Tensor], Tensor], q: Tensor, iters: int, tol: float) -> float:
    r"""Largest eigenvalue of a symmetric operator by Lanczos with full reorthogonalisation.

    After k steps the tridiagonal :math:`T_k = Q_k^\top H Q_k` has a largest Ritz value θ with residual
    :math:`\lVert H Q_k s - θ Q_k s\rVert = β_{k+1} |s_k|`, which bounds the distance from θ to an eigenvalue of H;
    stop when it is below ``tol·|θ|``. The Krylov basis is kept (``iters × d`` numbers) because in floating point
    Lanczos vectors lose orthogonality and produce ghost copies of converged eigenvalues without it (Golub & Van
    Loan, *Matrix Computations*, ch. 10).
    """
    d = q.numel()
    basis = torch.empty(iters, d, dtype=q.dtype, device=q.device)
    alphas: list[float] = []
    betas: list[float] = []
    q = q / torch.linalg.vector_norm(q)
    theta = 0.0
    for k in range(iters):
        basis[k] = q
        w = matvec(q)
        alpha = float(w @ q)
        alphas.append(alpha)
        Q = basis[: k + 1]
        for _ in range(2):  # "twice is enough" (Kahan/Parlett)
            w = w - Q.T @ (Q @ w)
        beta = float(torch.linalg.vector_norm(w))
        T = torch.diag(torch.tensor(alphas, dtype=torch.float64))
        if betas:
            off = torch.tensor(betas, dtype=torch.float64)
            T += torch.diag(off, 1) + torch.diag(off, -1)
        evals, evecs = torch.linalg.eigh(T)
        theta = float(evals[-1])
        residual = beta * abs(float(evecs[-1, -1]))
        if residual <= tol * max(abs(theta), 1e-30) or beta <= 1e-12 * max(abs(theta), 1e-30):
            break  # converged, or an invariant subspace
        betas.append(beta)
        q = w / beta
    return theta


def _power_top(matvec: Callable[[Tensor], Tensor], q: Tensor, iters: int, tol: float) -> float:
    """Dominant eigenvalue (largest in magnitude) by power iteration, PyHessian's stopping rule."""
    q = q / torch.linalg.vector_norm(q)
    eig = None
    for _ in range(iters):
        hv = matvec(q)
        new = float(hv @ q)  # Rayleigh quotient
        q = hv / torch.linalg.vector_norm(hv)
        if eig is not None and abs(new - eig) <= tol * (abs(eig) + 1e-30):
            return new
        eig = new
    return eig


def top_hessian_eigenvalue(
    model: StackedModel,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    iters: int = 100,
    tol: float = 1e-4,
    seed: int = 0,
    chunk: int = HVP_CHUNK,
    method: str = "lanczos",
) -> float:
    r"""Largest eigenvalue :math:`\lambda_{\max}(\nabla^2 F(w))` of the mean cross-entropy on ``(x, y)``.

    ``method="lanczos"`` (default) returns the largest *algebraic* eigenvalue, stopping when the Ritz residual is
    below ``tol`` relative (usually after 10–40 Hessian-vector products); it stores the Krylov basis, ``iters × d``
    numbers. ``method="power"`` is PyHessian's power iteration (Yao et al., 2020): no basis, but it finds the
    eigenvalue largest in *magnitude* and stops on a relative change below ``tol``, which can be early when the top
    eigenvalues are close. Near a minimum the Hessian is almost positive semi-definite and the two agree.

    Args:
        model: the model layout; ``params`` is one model, shape ``(d,)``.
        x, y: the samples F averages over (e.g. :func:`union_data`).
        iters: at most this many Hessian-vector products (full passes over the data).
        seed: seeds the random start vector.
        chunk: samples per double-backward pass.

    References:
        Yao, Gholami, Keutzer & Mahoney, "PyHessian: Neural networks through
        the lens of the Hessian", IEEE Big Data 2020.
    """
    if method not in ("lanczos", "power"):
        raise ValueError(f"unknown method {method!r}; allowed: lanczos, power")
    params = params.detach()
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(model.d, generator=gen, dtype=torch.float64).to(params)
    matvec = lambda v: hessian_vector_product(model, params, x, y, v, chunk=chunk)  # noqa: E731
    return (_lanczos_top if method == "lanczos" else _power_top)(matvec, q, iters, tol)


@dataclass(frozen=True)
class TraceEstimate:
    """A Hutchinson estimate of tr H with its standard error (std of the samples / √samples)."""

    value: float
    stderr: float
    samples: int

    def __float__(self) -> float:
        return self.value


def hessian_trace(
    model: StackedModel,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    samples: int = 100,
    seed: int = 0,
    chunk: int = HVP_CHUNK,
) -> TraceEstimate:
    r"""Hutchinson's estimate of :math:`\operatorname{tr} \nabla^2 F(w)` with Rademacher vectors.

    .. math::

        \operatorname{tr} H = \mathbb{E}_v\, v^\top H v, \qquad v_k \in \{-1, +1\} \text{ uniform},

    averaged over ``samples`` draws; the variance of one draw is :math:`2 \sum_{k \neq l} H_{kl}^2`, the smallest
    among i.i.d. choices of v (Hutchinson, 1990). Each draw costs one Hessian-vector product.

    References:
        Hutchinson, "A stochastic estimator of the trace of the influence matrix for Laplacian smoothing splines",
        Comm. Stat. Sim. Comp. 1990; the PyHessian trace (Yao et al., 2020).
    """
    if samples < 2:
        raise ValueError(f"samples must be at least 2 (for a standard error), got {samples}")
    params = params.detach()
    gen = torch.Generator().manual_seed(seed)
    draws = []
    for _ in range(samples):
        v = (torch.randint(0, 2, (model.d,), generator=gen) * 2 - 1).to(params)
        draws.append(float(v @ hessian_vector_product(model, params, x, y, v, chunk=chunk)))
    t = torch.tensor(draws, dtype=torch.float64)
    return TraceEstimate(value=float(t.mean()), stderr=float(t.std() / samples**0.5), samples=samples)


def _split(sim, split: str):
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return getattr(sim.data, split)


def client_data(sim, i: int, split: str = "train") -> tuple[Tensor, Tensor]:
    """Client i's samples ``(x, y)`` of a :class:`~dfl_core.engine.Simulation`'s train (or test) split."""
    part = _split(sim, split)
    idx = part.index[i, : int(part.counts[i])]
    return part.x[idx], part.y[idx]


def union_data(sim, split: str = "train") -> tuple[Tensor, Tensor]:
    """The union of all clients' samples of a split, as the engine's train metrics use it.

    Its mean loss is :math:`F = \\sum_i \\frac{n_i}{n} F_i`, the global objective.
    """
    part = _split(sim, split)
    idx = part.index[part.mask()]
    return part.x[idx], part.y[idx]


@dataclass(frozen=True)
class SharpnessReport:
    """DFedSAM Figure 5's measure and a second one, for one model on one data set."""

    top_eigenvalue: float  # λ_max of the Hessian of the mean training loss
    trace: TraceEstimate  # Hutchinson estimate of its trace
    loss: float  # the mean training loss itself
    samples: int  # how many samples the loss averages over


def sharpness_report(
    sim,
    params: Tensor | None = None,
    *,
    split: str = "train",
    iters: int = 100,
    tol: float = 1e-4,
    trace_samples: int = 50,
    seed: int = 0,
    chunk: int = HVP_CHUNK,
) -> SharpnessReport:
    r"""Top Hessian eigenvalue and trace of the union's loss at the average model :math:`\bar x`.

    This is DFedSAM Figure 5's flatness measure (the consensus model, all clients' training data). ``params``
    replaces :math:`\bar x` by another model (e.g. one client's row ``sim.x[i]``). For a centralized run every row
    is the global model, so the average is the global model.
    """
    w = (sim.x.mean(0) if params is None else params).detach()
    x, y = union_data(sim, split)
    _, loss = evaluate_model(sim.model, w, _as_input(x, w), y.to(w.device), chunk=chunk)
    return SharpnessReport(
        top_eigenvalue=top_hessian_eigenvalue(sim.model, w, x, y, iters=iters, tol=tol, seed=seed, chunk=chunk),
        trace=hessian_trace(sim.model, w, x, y, samples=trace_samples, seed=seed, chunk=chunk),
        loss=loss,
        samples=len(y),
    )
