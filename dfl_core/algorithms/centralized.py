r"""Centralized FL with client sampling: FedAvg, FedAvgM, FedProx, SCAFFOLD, FedDyn, FedCM, MimeLite,
FedSAM/FedASAM, MoFedSAM, FedSMOO, FedGAMMA, FedGF.

Each is the round function ``round(w, r) -> w`` of an
:class:`~dfl_core.algorithms.Algorithm` of kind ``"centralized"``: ``w`` is the
global model (shape ``(d,)``). ``r.sample_clients()`` draws the round's
clients S, ``r.local_train(x, S, head)`` runs their K local steps at once, and
``r.server`` keeps the server's state between rounds. Aggregation weights are
the clients' sample counts, :math:`p_i = n_i / \sum_{j \in S} n_j` (equal when,
as by default, all clients hold the same number of samples), except where a
paper averages with :math:`1/|S|` (SCAFFOLD, FedDyn, MimeLite, FedSMOO).
Per-client state that persists across rounds (control variates, dual
variables) lives in ``r.server`` as ``(m, d)`` tensors, one row per client,
so it is checkpointed with the run.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..local import (SAM_EPS, add_decayed_weights, blend_direction, clip_by_global_norm, control_variate,
                     corrected_sam, fedgf_perturbation, proximal)

if TYPE_CHECKING:
    from . import RoundTools

__all__ = ["client_update", "fedavg", "fedavgm", "fedprox", "scaffold", "feddyn", "fedcm", "mimelite",
           "mofedsam", "fedsmoo", "fedgamma", "fedgf", "MOFEDSAM_VARIANTS", "FEDSMOO_VARIANTS", "SCAFFOLD_OPTIONS"]

#: MoFedSAM's server step: the paper's rule (reconstructed) and the public codes.
MOFEDSAM_VARIANTS = ("paper", "official-fedgf", "fl-simulator")
#: FedSMOO as published (reconstructed) and the two simplified public versions.
FEDSMOO_VARIANTS = ("paper", "fl-simulator", "no-regularizer")
#: SCAFFOLD's two ways of refreshing c_i (Algorithm 1, l.12).
SCAFFOLD_OPTIONS = ("I", "II")


def per_client_state(r: RoundTools, name: str, like: Tensor) -> Tensor:
    """The ``(m, d)`` tensor ``r.server[name]`` (zeros at first): one row of state per client."""
    if name not in r.server:
        r.server[name] = torch.zeros(r.config.num_clients, like.numel(), dtype=like.dtype, device=like.device)
    return r.server[name]


def _server_vector(r: RoundTools, name: str, like: Tensor) -> Tensor:
    """``r.server[name]``, a ``(d,)`` vector that starts at 0."""
    return r.server[name] if name in r.server else torch.zeros_like(like)


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
    v = r.config.server_momentum * _server_vector(r, "velocity", w) + delta
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
    clip = (clip_by_global_norm(10.0),) if cfg.mofedsam_variant == "fl-simulator" else ()
    update = _client_momentum_update(w, r, cfg.mofedsam_alpha, clip)   # l.1, ū
    if cfg.mofedsam_variant == "official-fedgf":
        return w - cfg.server_lr * r.server["delta"]
    return w + cfg.server_lr * update                               # l.2


def _client_momentum_update(w: Tensor, r: RoundTools, alpha: float, extra=()) -> Tensor:
    r"""FedCM/MoFedSAM clients: K steps along :math:`\alpha g + (1-\alpha)\Delta^t`; returns ū, stores :math:`\Delta^{t+1}`."""
    delta = _server_vector(r, "delta", w)                          # Δ^0 = 0
    head = (*r.default_head, blend_direction(alpha, delta), *extra)
    update = client_update(w, r, head, messages_per_client=3)     # w and Δ down, y_i up
    r.server["delta"] = -update / (r.lr * r.config.local_steps)    # Δ^{t+1}
    return update


def fedcm(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedCM, federated learning with client-level momentum (Xu, Wang, Wang and Yang 2021, Algorithm 1).

    1. client i, step k: :math:`v = \alpha\, g_{i,k} + (1-\alpha)\, \Delta^t`,
       :math:`y^{k+1}_i = y^k_i - \eta_l\, v` (:math:`\Delta^0 = 0`)
    2. :math:`\Delta^{t+1} = \frac{1}{\eta_l K} \sum_{i \in S} p_i\, (w^t - y^K_i)`
    3. :math:`w^{t+1} = w^t - \eta_g\, \eta_l K\, \Delta^{t+1} = w^t + \eta_g \sum_i p_i (y^K_i - w^t)`

    α is ``fedcm_alpha`` (the paper's 0.1 by default); α = 1 is FedAvg. The
    server step is the one FL-Simulator codes (``server/FedCM.py``); MoFedSAM
    is this algorithm with SAM gradients (:func:`mofedsam`).
    """
    update = _client_momentum_update(w, r, r.config.fedcm_alpha)
    return w + r.config.server_lr * update


def scaffold(w: Tensor, r: RoundTools) -> Tensor:
    r"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1): local steps corrected by control variates.

    Server :math:`c`, clients :math:`c_i`, all 0 at the start.

    1. each :math:`i \in S`: :math:`y_i \leftarrow w`, K steps :math:`y_i \leftarrow y_i - \eta_l\,(g_i(y_i) - c_i + c)` (l.8–10)
    2. :math:`c_i^+ =` option I: :math:`\nabla f_i(w)` over the whole local split; option II:
       :math:`c_i - c + \frac{1}{K \eta_l}(w - y_i)` (l.12)
    3. :math:`\Delta y_i = y_i - w`, :math:`\Delta c_i = c_i^+ - c_i`, :math:`c_i \leftarrow c_i^+` (l.13)
    4. :math:`w \leftarrow w + \frac{\eta_g}{|S|} \sum_{i \in S} \Delta y_i`,
       :math:`c \leftarrow c + \frac{1}{N} \sum_{i \in S} \Delta c_i` (l.16–17)

    ``scaffold_option`` picks l.12 ("II" by default, what the paper's experiments favour).
    Each client receives (w, c) and sends (Δy_i, Δc_i): four model-sized messages.
    """
    return _controlled_round(w, r, r.config.scaffold_option)


def _controlled_round(w: Tensor, r: RoundTools, option: str) -> Tensor:
    """SCAFFOLD's round (Algorithm 1) with the config's local pieces (FedGAMMA: SAM) before the correction."""
    cfg = r.config
    c_local = per_client_state(r, "control_variates", w)          # c_i
    c = _server_vector(r, "control_variate", w)                    # c
    clients = r.sample_clients()
    rows = clients.to(c_local.device)
    start = w.expand(len(clients), -1)
    y = r.local_train(start, clients, (*r.default_head, control_variate(c_local, c)))   # l.8–10
    if option == "I":
        c_new = r.full_gradient(start, clients)                                      # l.12, option I
    else:
        c_new = c_local[rows] - c + (w - y) / (cfg.local_steps * r.lr)              # l.12, option II
    r.server["control_variate"] = c + (c_new - c_local[rows]).sum(0) / cfg.num_clients   # l.17
    c_local[rows] = c_new
    r.count_transmissions(4 * len(clients))
    return w + cfg.server_lr * (y - w).mean(0)                                        # l.16


def feddyn(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedDyn, dynamic regularization (Acar et al., ICLR 2021, Algorithm 1), K SGD steps as the local solver.

    1. each :math:`k \in P_t`: :math:`\theta_k^t \approx \arg\min_\theta L_k(\theta) - \langle \nabla L_k(\theta_k^{t-1}), \theta \rangle
       + \frac{\alpha}{2}\lVert \theta - \theta^{t-1} \rVert^2`: K steps along
       :math:`\nabla L_k(\theta; \xi) - \nabla L_k(\theta_k^{t-1}) + \alpha(\theta - \theta^{t-1})`
    2. :math:`\nabla L_k(\theta_k^t) = \nabla L_k(\theta_k^{t-1}) - \alpha(\theta_k^t - \theta^{t-1})` (kept by the client, 0 at first)
    3. :math:`h^t = h^{t-1} - \frac{\alpha}{m} \sum_{k \in P_t} (\theta_k^t - \theta^{t-1})`
    4. :math:`\theta^t = \frac{1}{|P_t|} \sum_{k \in P_t} \theta_k^t - \frac{1}{\alpha} h^t`

    α is ``dyn_alpha``. The paper solves step 1 with SGD epochs, as here; FL-Simulator's
    ``feddyn.py`` computes the same update and also clips the gradient at norm 10.
    """
    cfg, alpha = r.config, r.config.dyn_alpha
    prev_grads = per_client_state(r, "local_gradients", w)        # ∇L_k(θ_k^{t-1})
    clients = r.sample_clients()
    rows = clients.to(prev_grads.device)
    head = (*r.default_head, control_variate(prev_grads), proximal(alpha, w))
    theta = r.local_train(w.expand(len(clients), -1), clients, head)            # 1.
    prev_grads[rows] -= alpha * (theta - w)                                     # 2.
    h = _server_vector(r, "h", w) - alpha * (theta - w).sum(0) / cfg.num_clients   # 3.
    r.server["h"] = h
    r.count_transmissions(2 * len(clients))
    return theta.mean(0) - h / alpha                                            # 4.


def mimelite(w: Tensor, r: RoundTools) -> Tensor:
    r"""MimeLite with SGD-momentum as the base optimizer (Karimireddy et al. 2020, "Mime", Algorithm 1).

    The server's momentum :math:`m` stays fixed during the round; clients mimic
    a centralized momentum step with it.

    1. each :math:`i \in S`: :math:`c_i = \nabla f_i(w)` over the whole local split;
       K steps :math:`y_i \leftarrow y_i - \eta\, ((1-\beta)\, \nabla f_i(y_i; \zeta) + \beta\, m)`
    2. :math:`m \leftarrow (1-\beta) \frac{1}{|S|}\sum_{i \in S} c_i + \beta\, m`,
       :math:`w \leftarrow \frac{1}{|S|}\sum_{i \in S} y_i`

    β is ``server_momentum`` (0.9 by default). Each client receives (w, m) and sends (y_i, c_i).
    """
    beta = r.config.server_momentum
    momentum = _server_vector(r, "momentum", w)
    clients = r.sample_clients()
    start = w.expand(len(clients), -1)
    y = r.local_train(start, clients, (*r.default_head, blend_direction(1 - beta, momentum)))
    full_grads = r.full_gradient(start, clients)                   # c_i, at the round's start point
    r.server["momentum"] = (1 - beta) * full_grads.mean(0) + beta * momentum
    r.count_transmissions(4 * len(clients))
    return y.mean(0)


def fedgamma(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedGAMMA, SAM with SCAFFOLD's control variates (Dai et al., IEEE TNNLS 2023); local step *reconstructed*.

    1. each :math:`i \in S`, step k: :math:`\delta = \rho\, g/\lVert g \rVert`,
       :math:`y_i \leftarrow y_i - \eta_l\,(\nabla F_i(y_i + \delta; \xi) - c_i + c)`
    2. :math:`c_i^+ = c_i - c + \frac{1}{K\eta_l}(w - y_i)`, then :math:`w` and :math:`c` as SCAFFOLD
       option II (:func:`scaffold`, l.12–17)

    The paper is not among the seeds; the local step is the one both public
    codes run (FL-Simulator ``client/fedgamma.py``, Official-FedGF
    ``fedGamma.py``): the ascent uses the plain gradient, only the descent
    is corrected. Official-FedGF updates :math:`c` by the data-weighted mean
    of :math:`\Delta c_i` divided by N (|S| times smaller than SCAFFOLD's sum / N).
    """
    return _controlled_round(w, r, "II")         # SCAFFOLD option II, with the config's SAM head


def fedsmoo(w: Tensor, r: RoundTools) -> Tensor:
    r"""FedSMOO, dynamic regularization with a global SAM perturbation (Sun et al., ICML 2023); *reconstructed*.

    Client state: FedDyn's :math:`\nabla L_i(\theta_i^{t-1})` and the perturbation dual :math:`\mu_i`;
    server state: FedDyn's :math:`h` and the global perturbation :math:`s`; all 0 at first.

    1. each :math:`i \in S`, step k (:func:`~dfl_core.local.corrected_sam`):
       :math:`\hat s_i = \rho\,\frac{g - \mu_i - s}{\lVert g - \mu_i - s\rVert}`, :math:`\mu_i \leftarrow \mu_i + \hat s_i - s`,
       :math:`\theta \leftarrow \theta - \eta\,(\nabla F_i(\theta + \hat s_i; \xi) - \nabla L_i(\theta_i^{t-1}) + \lambda(\theta - \theta^t))`
    2. FedDyn's dual and server steps with :math:`\alpha = \lambda` (:func:`feddyn`, 2.–4.)
    3. :math:`s = \rho\, \bar s / \lVert \bar s \rVert` with
       :math:`\bar s = \frac{1}{|S|}\sum_{i \in S} (\mu_i - \hat s_{i,K})`

    The paper text is not among the seeds. Steps 1–2 are read off the authors'
    code (FL-Simulator ``optimizer/DRegSAM.py``, ``server/FedSMOO.py``), whose
    comment says its server "simplifies" s "by ignoring the :math:`\hat s_{i,K}`
    term"; step 3 keeps that term as Official-FedGF's re-implementation does.
    ``fedsmoo_variant`` selects: ``"paper"`` (above), ``"fl-simulator"``
    (:math:`\bar s = \frac{1}{|S|}\sum \mu_i`, and the descent direction before
    the :math:`\lambda\theta` term clipped to norm 10, as coded) or
    ``"no-regularizer"`` (Official-FedGF's ``fedSMOO_woReg``: steps 1 and 3
    without FedDyn's terms, and a FedAvg server). λ is ``dyn_alpha``.
    """
    cfg, lam, variant = r.config, r.config.dyn_alpha, r.config.fedsmoo_variant
    duals = per_client_state(r, "perturbation_duals", w)          # μ_i
    last = per_client_state(r, "last_perturbations", w)           # ŝ_{i,K}
    prev_grads = per_client_state(r, "local_gradients", w)        # ∇L_i(θ_i^{t-1})
    s = _server_vector(r, "global_perturbation", w)
    clients = r.sample_clients()
    rows = clients.to(duals.device)
    head = [corrected_sam(cfg.rho, duals, s, last)]
    if variant != "no-regularizer":                               # − ∇L_i(θ_i^{t-1}) − λθ^t, then + λθ
        head.append(control_variate(prev_grads, -lam * w))
        if variant == "fl-simulator":
            head.append(clip_by_global_norm(10.0))
        head.append(add_decayed_weights(lam))
    theta = r.local_train(w.expand(len(clients), -1), clients, tuple(head))
    s_bar = duals[rows].mean(0) if variant == "fl-simulator" else (duals[rows] - last[rows]).mean(0)
    r.server["global_perturbation"] = cfg.rho * s_bar / (torch.linalg.vector_norm(s_bar) + SAM_EPS)
    r.count_transmissions(4 * len(clients))                       # (θ, s) down, (θ_i, μ_i) up
    if variant == "no-regularizer":
        return (r.client_weights(clients) * theta).sum(0)
    prev_grads[rows] -= lam * (theta - w)
    h = _server_vector(r, "h", w) - lam * (theta - w).sum(0) / cfg.num_clients
    r.server["h"] = h
    return theta.mean(0) - h / lam




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
