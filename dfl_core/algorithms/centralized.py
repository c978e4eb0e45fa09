r"""Centralized FL with client sampling: FedAvg, FedAvgM, FedProx, FedSAM/FedASAM, MoFedSAM, FedGF.

Each is the round function ``round(w, r) -> w`` of an
:class:`~dfl_core.algorithms.Algorithm` of kind ``"centralized"``: ``w`` is the
global model (shape ``(d,)``). ``r.sample_clients()`` draws the round's
clients S, ``r.local_train(x, S, head)`` runs their K local steps at once, and
``r.server`` keeps the server's state between rounds. Aggregation weights are
the clients' sample counts, :math:`p_i = n_i / \sum_{j \in S} n_j` (equal when,
as by default, all clients hold the same number of samples).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..local import SAM_EPS, blend_direction, clip_by_global_norm, fedgf_perturbation, proximal

if TYPE_CHECKING:
    from . import RoundTools

__all__ = ["client_update", "fedavg", "fedavgm", "fedprox", "mofedsam", "fedgf", "MOFEDSAM_VARIANTS"]

#: MoFedSAM's server step: the paper's rule (reconstructed) and the public codes.
MOFEDSAM_VARIANTS = ("paper", "official-fedgf", "fl-simulator")


def client_update(w: Tensor, r: RoundTools, head=None, messages_per_client: int = 2) -> Tensor:
    r"""Sample :math:`S_t`, run K local steps from :math:`w^t` on each client, return :math:`\sum_{i \in S_t} p_i (y_i^K - w^t)`.

    ``head`` replaces the config's gradient-forming local pieces (see
    :meth:`~dfl_core.engine.Simulation.local_train`); each sampled client sends
    and receives ``messages_per_client`` model-sized messages (w down, y_i up).
    """
    clients = r.sample_clients()
    y = r.local_train(w.expand(len(clients), -1), clients, head)
    r.count_transmissions(messages_per_client * len(clients))
    return (r.client_weights(clients) * (y - w)).sum(0)


def fedavg(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedAvg (McMahan et al. 2017, Algorithm 1) with a server learning rate; FedSAM/FedASAM with SAM steps.

    1. :math:`S_t` ← a random subset of the clients
    2. each :math:`i \in S_t`: :math:`y_i^{K}` ← K local steps from :math:`w^t`
       (SGD; FedSAM: SAM, Qu et al. 2022 eq. (4); FedASAM: ASAM)
    3. :math:`w^{t+1} = w^t + \eta_g \sum_{i \in S_t} p_i\, (y_i^K - w^t)`
    """
    update = client_update(w, r)                                   # l.1–2, Σ p_i (y_i − w)
    return w + r.config.server_lr * update                          # l.3


def fedavgm(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedAvgM, FedAvg with server momentum (Hsu, Qi and Brown 2019, §3).

    1. :math:`S_t`, and K local SGD steps from :math:`w^t` on each client, as FedAvg
    2. pseudo-gradient :math:`\Delta^t = \sum_{i \in S_t} p_i\,(w^t - y_i^K)`
    3. :math:`v^{t+1} = \beta\, v^t + \Delta^t` (:math:`v^0 = 0`), :math:`w^{t+1} = w^t - \eta_g\, v^{t+1}`

    β is ``server_momentum``; with β = 0 this is FedAvg.
    """
    delta = -client_update(w, r)                                    # Δ^t
    v = r.config.server_momentum * r.server.get("velocity", torch.zeros_like(w)) + delta
    r.server["velocity"] = v
    return w - r.config.server_lr * v


def fedprox(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedProx (Li et al., MLSys 2020, Algorithm 2) with K local steps as the inexact solver.

    Each sampled client takes K SGD steps on :math:`h_i(y) = F_i(y) + \frac{\mu}{2}\lVert y - w^t\rVert^2`
    (eq. (2); gradient :math:`\nabla F_i(y) + \mu (y - w^t)`), then the server averages as FedAvg.
    The paper's variable local work of stragglers (γ-inexactness) is not modelled: every client
    takes the same K steps. μ is ``prox_mu``; with μ = 0 this is FedAvg.
    """
    update = client_update(w, r, head=(*r.default_head, proximal(r.config.prox_mu, w)))
    return w + r.config.server_lr * update


def mofedsam(w: Tensor, r: RoundTools) -> Tensor:
    r"""MoFedSAM (Qu et al., ICML 2022, §4.1, eq. (6)); *reconstructed*.

    The seed text lost eq. (6). What survives — "momentum rate α", "if α = 1,
    MoFedSAM is equivalent to FedSAM", Δ "aggregates the global model
    information of participating clients" and approximates the global
    gradient, and the explicit debt to FedCM (Xu et al. 2021) — fixes it as
    FedCM's update with a SAM gradient:

    1. client i, step k: :math:`y^{k+1}_i = y^k_i - \eta_l\,(\alpha\, \tilde g^k_i + (1-\alpha)\, \Delta^t)`,
       :math:`\tilde g` the SAM gradient, :math:`\Delta^0 = 0`
    2. server: :math:`\bar u = \sum_i p_i (y^K_i - w^t)`, :math:`w^{t+1} = w^t + \eta_g \bar u`,
       :math:`\Delta^{t+1} = -\bar u / (\eta_l K)`

    ``mofedsam_variant`` selects the server step of the public code:
    ``"paper"`` (above); ``"fl-simulator"`` (woodenchild95/FL-Simulator: the
    same update, plus its clipping of the local direction to norm 10);
    ``"official-fedgf"`` (hwan-sig/Official-FedGF ``mofedsam.py``:
    :math:`w^{t+1} = w^t - \eta_g \Delta^{t+1}`, a step of
    :math:`\eta_g \bar u / (\eta_l K)`, larger than FedAvg's by :math:`1/(\eta_l K)`).
    """
    cfg = r.config
    delta = r.server.get("delta")
    if delta is None:
        delta = torch.zeros_like(w)                                # Δ^0 = 0
    head = (*r.default_head, blend_direction(cfg.mofedsam_alpha, delta))
    if cfg.mofedsam_variant == "fl-simulator":
        head = (*head, clip_by_global_norm(10.0))
    update = client_update(w, r, head, messages_per_client=3)     # l.1, ū (w and Δ down, y_i up)
    r.server["delta"] = -update / (r.lr * cfg.local_steps)         # Δ^{t+1}
    if cfg.mofedsam_variant == "official-fedgf":
        return w - cfg.server_lr * r.server["delta"]
    return w + cfg.server_lr * update                               # l.2


def fedgf(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedGF (Lee & Yoon, ICML 2024; eqs. (8)–(16) of the slides).

    1. :math:`\Delta^r = w^{r-1} - w^r` (10), :math:`\tilde w^r = w^r + \rho \Delta^r/\lVert \Delta^r \rVert` (11)
    2. client i, step k: gradient at :math:`c\,\tilde w^r + (1-c)\,\tilde w_{i,k}` (12)–(13),
       :math:`\tilde w_{i,k}` the client's SAM point (9); in round 0, with no
       :math:`\Delta`, plain SAM (as the official code)
    3. drift :math:`D^r = \frac{1}{|S|} \sum_{i \in S} \lVert w^r - w^r_{i,K} \rVert_2` (15),
       indicator :math:`I^r = 1[D^r > T_D]`
    4. :math:`c` for the next round: :math:`\frac{1}{W} \sum` of the last W indicators (16)
       (rounds before the first count as 0)
    5. :math:`w^{r+1} = w^r + \eta_g \sum_i p_i (w^r_{i,K} - w^r)`

    ``fedgf_reading`` chooses how (12) interpolates: ``"points"`` (as printed
    and as coded) or ``"vectors"`` (see :func:`dfl_core.local.fedgf_perturbation`).
    """
    cfg, s = r.config, r.server
    window = s.setdefault("indicators", [])
    c = sum(window[-cfg.fedgf_window:]) / cfg.fedgf_window        # (16), from completed rounds
    clients = r.sample_clients()
    head = None                                                    # round 0: plain SAM
    if "previous" in s:
        diff = s["previous"] - w                                   # (10)
        global_delta = cfg.rho * diff / (torch.linalg.vector_norm(diff) + SAM_EPS)
        head = (fedgf_perturbation(cfg.rho, c, w + global_delta, global_delta, cfg.fedgf_reading),)
    y = r.local_train(w.expand(len(clients), -1), clients, head)
    r.count_transmissions((3 if head else 2) * len(clients))      # w (and w̃) down, y_i up
    drift = float(torch.linalg.vector_norm(y - w, dim=1).mean())  # (15)
    window.append(int(drift > cfg.fedgf_threshold))
    s.setdefault("c", []).append(c)
    s.setdefault("drift", []).append(drift)
    s["record"] = {"fedgf_c": c, "fedgf_drift": drift}               # reported in the history
    s["previous"] = w
    return w + cfg.server_lr * (r.client_weights(clients) * (y - w)).sum(0)
