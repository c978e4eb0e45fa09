r"""FedGF's flatness discrepancy Δ_F (Lee & Yoon, ICML 2024).

Local SAM makes each client's model flat *for its own loss*; that does not
make the global model flat for the global loss. FedGF measures the gap as

.. math::

    \Delta_F = \Big|\,
    \underbrace{\max_{\lVert\delta\rVert \le \rho} F(w + \delta) - F(w)}_{\text{global sharpness}}
    \;-\; \underbrace{\sum_{i=1}^N \tfrac{m_i}{m} \Big[\max_{\lVert\delta_i\rVert \le \rho}
    F_i(w_i + \delta_i) - F_i(w_i)\Big]}_{\text{mean local sharpness}} \Big|,

with w the global model, F the global loss, :math:`w_i` the local models,
:math:`F_i` their losses and :math:`m_i / m` the data fractions.

Each inner maximum is computed twice: by SAM's one-step approximation :math:`\delta = \rho\, g / \lVert g \rVert`
(Foret et al., 2021), the one SAM and FedSAM optimise, and by projected gradient ascent on the ℓ2 ball started from
that point, the quantity the definition asks for. PGA keeps the best point it visits, so it never reports less than
the one-step value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..algorithms.centralized import fedavg_round
from ..local import SAM_EPS, sam_perturbation
from ..stacked import StackedModel

__all__ = ["ball_max", "BallMax", "flatness_discrepancy", "from_simulation", "FlatnessDiscrepancy", "FLATNESS_CHUNK"]

#: Samples (summed over the models evaluated together) per forward/backward pass.
FLATNESS_CHUNK = 2048

LossGrad = Callable[[Tensor, bool], tuple[Tensor, Tensor | None]]


@dataclass(frozen=True)
class BallMax:
    """:math:`\\max_{\\lVert\\delta\\rVert \\le \\rho} f(w + \\delta)` for each row of ``w``, two ways."""

    loss: Tensor  # (k,) f(w)
    one_step: Tensor  # (k,) f(w + ρ g/‖g‖), SAM's approximation
    pga: Tensor  # (k,) the best f(w + δ) projected gradient ascent found (≥ one_step)
    delta: Tensor  # (k, d) the δ attaining ``pga`` (‖δ‖ ≤ ρ)


def _row_norm(v: Tensor) -> Tensor:
    return torch.linalg.vector_norm(v, dim=1, keepdim=True)  # (k, 1)


def ball_max(
    loss_grad: LossGrad,
    w: Tensor,
    rho: float,
    *,
    steps: int = 10,
    step_size: float | Callable[[int], float] | None = None,
) -> BallMax:
    r"""Maximise :math:`f_i(w_i + \delta_i)` over :math:`\lVert\delta_i\rVert_2 \le \rho`, for every row i at once.

    .. math::

        \delta^0 = \rho \frac{g(w)}{\lVert g(w) \rVert}, \qquad
        \delta^{s+1} = \Pi_\rho\Big(\delta^s + \eta_s \frac{g(w + \delta^s)}{\lVert g(w + \delta^s) \rVert}\Big),
        \qquad \Pi_\rho(v) = v \min\Big(1, \frac{\rho}{\lVert v \rVert}\Big),

    with :math:`\eta_s` = ``step_size`` (a number, or a function of s), by default 2ρ for the first half of the S =
    ``steps`` steps, then decaying linearly to 2ρ/⌈S/2⌉ at the last. Long steps travel quickly over the sphere,
    where the maximum usually is (on a 10:1 quadratic with ρ = 1 and S = 10, a constant 2ρ/S reaches 86% of the
    maximum, this schedule all of it to a relative 4e-6); the short ones let PGA settle on a maximum inside the
    ball. The answer is the largest :math:`f(w + \delta^s)` over s = 0 … S; s = 0 is the one-step SAM point, so
    ``pga ≥ one_step``. The gradient is normalised because near a minimum its size says little about how far to
    move.

    Args:
        loss_grad: ``(p (k, d), need_grad) -> (f (k,), ∇f (k, d) or None)``; row i
            of ``p`` is evaluated on row i's loss.
        w: ``(k, d)`` centres of the balls.
        steps: ascent steps after the SAM point (``steps + 2`` loss evaluations).
    """
    if rho < 0:
        raise ValueError(f"rho must be non-negative, got {rho}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    loss, g = loss_grad(w, True)
    delta = sam_perturbation(g, rho)  # δ⁰: SAM's point, as the engine's SAM takes it
    best = torch.full_like(loss, -torch.inf)
    best_delta = delta.clone()
    one_step = None
    for s in range(steps + 1):
        last = s == steps
        value, g = loss_grad(w + delta, not last)
        if one_step is None:
            one_step = value
        better = value > best
        best = torch.where(better, value, best)
        best_delta[better] = delta[better]
        if last:
            break
        if step_size is None:  # 2ρ for s < ⌊S/2⌋, then linearly down to 2ρ/⌈S/2⌉ at s = S − 1
            eta = 2 * rho if s < steps // 2 else 2 * rho * (steps - s) / (steps - steps // 2)
        else:
            eta = step_size(s) if callable(step_size) else step_size
        delta = delta + sam_perturbation(g, eta)  # ascent step of length η
        delta = delta * (rho / (_row_norm(delta) + SAM_EPS)).clamp(max=1.0)  # back onto the ball
    return BallMax(loss=loss, one_step=one_step, pga=best, delta=best_delta)


class _Samples:
    """k weighted sample sets over one pool; row i's loss is :math:`\\sum_j s_{ij}\\, \\ell_{I_{ij}}`."""

    def __init__(self, x: Tensor, y: Tensor, index: Tensor, weights: Tensor):
        self.x, self.y = x, y  # (N, ...), (N,)
        self.index = index  # (k, n) int64 into x; padding has weight 0
        self.weights = weights  # (k, n)

    @classmethod
    def from_lists(cls, client_xy: Sequence[tuple[Tensor, Tensor]], fractions: Tensor) -> tuple["_Samples", "_Samples"]:
        """Per-client means (k rows) and their ``fractions``-weighted mixture (one row)."""
        xs, ys = zip(*client_xy)
        counts = [len(v) for v in ys]
        if min(counts) < 1:
            raise ValueError("every client needs at least one sample")
        x, y = torch.cat(xs), torch.cat(ys)
        starts = np.cumsum([0, *counts[:-1]])
        n_max = max(counts)
        index = torch.zeros(len(counts), n_max, dtype=torch.int64)
        weights = torch.zeros(len(counts), n_max, dtype=torch.float64)
        for i, (s, c) in enumerate(zip(starts, counts)):
            index[i, :c] = torch.arange(s, s + c)
            weights[i, :c] = 1.0 / c
        mask = weights > 0
        glob = cls(x, y, index[mask][None], (weights * fractions.double()[:, None])[mask][None])
        return cls(x, y, index, weights), glob

    def loss_grad(self, model: StackedModel, chunk: int) -> LossGrad:
        """The row losses of models ``p (k, d)`` and their gradients, accumulated over sample chunks."""

        def fn(p: Tensor, need_grad: bool) -> tuple[Tensor, Tensor | None]:
            k, n = self.index.shape
            if p.shape[0] != k:
                raise ValueError(f"{p.shape[0]} models for {k} sample sets")
            per = max(1, chunk // k)
            leaves = model.leaves(p) if need_grad else model.unflatten(p.detach())
            weights = self.weights.to(p)
            total = torch.zeros(k, dtype=p.dtype, device=p.device)
            grads = None
            for a in range(0, n, per):
                idx = self.index[:, a : a + per].to(self.x.device)  # (k, b)
                xb = self.x[idx].to(device=p.device, dtype=p.dtype)
                with torch.set_grad_enabled(need_grad):
                    logits = model.forward(leaves, xb)  # (k, b, C)
                    ce = F.cross_entropy(
                        logits.flatten(0, 1), self.y[idx].flatten().to(p.device), reduction="none"
                    ).view(k, -1)
                    part = (ce * weights[:, a : a + per]).sum(1)  # (k,)
                    if need_grad:
                        gs = torch.autograd.grad(part.sum(), list(leaves.values()))
                        grads = list(gs) if grads is None else [u + v for u, v in zip(grads, gs)]
                total += part.detach()
            return total, (model.gather_grads(tuple(grads), p) if need_grad else None)

        return fn


@dataclass(frozen=True)
class FlatnessDiscrepancy:
    """Δ_F and its two terms, by projected gradient ascent (PGA) and by SAM's one step."""

    delta_f: float  # Δ_F with PGA maxima
    delta_f_one_step: float  # Δ_F with one-step maxima
    global_sharpness: float  # max F(w+δ) − F(w), PGA
    global_sharpness_one_step: float
    local_sharpness: float  # Σ (m_i/m) [max F_i(w_i+δ_i) − F_i(w_i)], PGA
    local_sharpness_one_step: float
    global_loss: float  # F(w)
    rho: float
    steps: int
    # per client, and the maximisers (left out of the repr)
    client_sharpness: np.ndarray = field(repr=False)  # (n,) each client's PGA term
    client_sharpness_one_step: np.ndarray = field(repr=False)  # (n,)
    client_losses: np.ndarray = field(repr=False)  # (n,) F_i(w_i)
    weights: np.ndarray = field(repr=False)  # (n,) m_i/m
    global_delta: Tensor = field(repr=False)  # (d,) maximiser of the global term
    local_delta: Tensor = field(repr=False)  # (n, d) maximisers of the local terms


def _discrepancy(
    model: StackedModel,
    w: Tensor,
    local: Tensor,
    clients: _Samples,
    glob: _Samples,
    weights: Tensor,
    rho: float,
    steps: int,
    step_size,
    chunk: int,
) -> FlatnessDiscrepancy:
    g = ball_max(glob.loss_grad(model, chunk), w.detach()[None], rho, steps=steps, step_size=step_size)
    c = ball_max(clients.loss_grad(model, chunk), local.detach().to(w), rho, steps=steps, step_size=step_size)
    p = weights.to(torch.float64).cpu()
    glob_pga, glob_one = float(g.pga[0] - g.loss[0]), float(g.one_step[0] - g.loss[0])
    per_pga = (c.pga - c.loss).double().cpu()
    per_one = (c.one_step - c.loss).double().cpu()
    loc_pga, loc_one = float(p @ per_pga), float(p @ per_one)
    return FlatnessDiscrepancy(
        delta_f=abs(glob_pga - loc_pga),
        delta_f_one_step=abs(glob_one - loc_one),
        global_sharpness=glob_pga,
        global_sharpness_one_step=glob_one,
        local_sharpness=loc_pga,
        local_sharpness_one_step=loc_one,
        client_sharpness=per_pga.numpy(),
        client_sharpness_one_step=per_one.numpy(),
        global_loss=float(g.loss[0]),
        client_losses=c.loss.double().cpu().numpy(),
        weights=p.numpy(),
        rho=float(rho),
        steps=steps,
        global_delta=g.delta[0],
        local_delta=c.delta,
    )


def flatness_discrepancy(
    model: StackedModel,
    global_params: Tensor,
    local_params: Tensor,
    client_xy: Sequence[tuple[Tensor, Tensor]],
    weights=None,
    rho: float = 0.05,
    steps: int = 10,
    *,
    step_size: float | Callable[[int], float] | None = None,
    global_xy: tuple[Tensor, Tensor] | None = None,
    chunk: int = FLATNESS_CHUNK,
) -> FlatnessDiscrepancy:
    r"""FedGF's :math:`\Delta_F` for a global model ``(d,)`` and n local models ``(n, d)``.

    Args:
        client_xy: client i's samples ``(x_i, y_i)``; :math:`F_i` is their mean cross-entropy.
        weights: :math:`m_i/m`, normalised to sum to 1; default the sample fractions :math:`n_i / \sum_j n_j`.
        rho: the radius of the ball (FedGF and SAM's ρ).
        steps: PGA steps after the one-step point (FedGF's definition is the exact maximum; 10 steps is the default,
            5 the least this module is tested with).
        step_size: PGA's η, a number or a function of the step (default: the schedule of :func:`ball_max`).
        global_xy: the samples of the global loss F; default :math:`F = \sum_i \frac{m_i}{m} F_i`, the clients'
            weighted mixture (equal to the union's mean loss when the weights are the sample fractions).

    All clients' maxima run together through one stacked forward pass per step.

    References:
        Lee & Yoon, "Rethinking the Flat Minima Searching in Federated Learning", ICML 2024.
    """
    local_params = local_params.reshape(-1, model.d)
    if len(client_xy) != local_params.shape[0]:
        raise ValueError(f"{local_params.shape[0]} local models but {len(client_xy)} client data sets")
    p = torch.as_tensor([len(y) for _, y in client_xy] if weights is None else weights, dtype=torch.float64).reshape(-1)
    if len(p) != len(client_xy):
        raise ValueError(f"{len(p)} weights for {len(client_xy)} clients")
    if (p < 0).any() or p.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    p = p / p.sum()
    clients, glob = _Samples.from_lists(client_xy, p)
    if global_xy is not None:
        _, glob = _Samples.from_lists([global_xy], torch.ones(1))
    return _discrepancy(model, global_params, local_params, clients, glob, p, rho, steps, step_size, chunk)


def from_simulation(
    sim,
    rho: float | None = None,
    steps: int = 10,
    *,
    local_params: Tensor | None = None,
    clients: Tensor | None = None,
    step_size: float | Callable[[int], float] | None = None,
    chunk: int = FLATNESS_CHUNK,
) -> FlatnessDiscrepancy:
    r""":math:`\Delta_F` of a :class:`~dfl_core.engine.Simulation` on its clients' train splits.

    * Decentralized: w is the average model :math:`\bar x`, :math:`w_i` the rows of ``sim.x``, :math:`m_i/m = n_i/n`
      over all clients, and F the union's mean loss.
    * Centralized: w is the global model and F the union's loss over all clients. The local models are not kept
      between rounds, so pass them as ``local_params`` (``(n, d)``) with the ``clients`` they belong to. If they are
      omitted and the algorithm's round is FedAvg's (FedAvg, FedSAM, FedASAM, FedProx), they are recomputed with the
      next round's tools (``sim.tools()``): the round's sampled clients train from w exactly as
      :meth:`~dfl_core.engine.Simulation.step` would (same batches; nothing in ``sim`` changes). Weights are then
      :math:`n_i / \sum_{j \in S} n_j`.

    ``rho`` defaults to the run's ``config.params.rho`` (or 0.05 if it has none).
    """
    cfg, train = sim.config, sim.data.train
    rho = (getattr(cfg.params, "rho", None) or 0.05) if rho is None else rho
    if sim.centralized:
        w = sim.x[0]
        if local_params is None:
            if sim.algorithm.round is not fedavg_round:
                raise ValueError(
                    f"{cfg.algorithm}: pass the local models (local_params) and their clients; "
                    "they can only be recomputed for FedAvg's round (FedAvg, FedSAM, FedASAM, FedProx)"
                )
            tools = sim.tools()  # the next round's, computed aside
            clients = tools.sample_clients()
            local_params = tools.local_train(w.expand(len(clients), -1), clients)
        elif clients is None:
            raise ValueError("pass the clients the local models belong to")
    else:
        w = sim.x.mean(0)
        local_params = sim.x if local_params is None else local_params
        clients = torch.arange(train.m) if clients is None else clients
    clients = torch.as_tensor(clients).cpu().reshape(-1)
    if local_params.shape[0] != len(clients):
        raise ValueError(f"{local_params.shape[0]} local models for {len(clients)} clients")
    rows = clients.to(train.index.device)
    counts = train.counts[rows].cpu()
    index = train.index[rows]
    mask = train.mask()[rows]
    per_sample = mask.double() / counts.clamp(min=1).double().to(mask.device)[:, None]  # 1/n_i
    local = _Samples(train.x, train.y, index, per_sample)
    union = train.index[train.mask()]
    glob = _Samples(train.x, train.y, union[None], torch.full((1, len(union)), 1.0 / len(union), dtype=torch.float64))
    p = counts.double() / counts.sum()
    return _discrepancy(sim.model, w, local_params, local, glob, p, rho, steps, step_size, chunk)
