r"""Centralized FL with client sampling: FedAvg, FedSAM/FedASAM, FedProx, FedAvgM, FedCM, MoFedSAM, MimeLite.

A server holds the global model :math:`w^t` (state field ``w``, shape ``(d,)``). ``r.sample_clients()`` draws the
round's clients S, ``r.local_train(x, S)`` runs their K local steps of the declared rule at once, and the state
carries what the server keeps between rounds (FedAvgM's velocity, FedCM's Δ …). Aggregation weights are the clients'
sample counts, :math:`p_i = n_i / \sum_{j \in S} n_j` (equal when, as by default, all clients hold the same number
of samples), except where a paper averages with :math:`1/|S|` (MimeLite here; SCAFFOLD, FedDyn and FedSMOO in
:mod:`.controlled`). FedGF is in :mod:`.fedgf`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import torch
from torch import Tensor

from ..local import LocalRule, blend_direction, chain, clip_by_global_norm, proximal, sgd, sharpness_aware
from ..settings import Number, OneOf, params, setting
from .base import Algorithm, CentralizedParams, GlobalModel, SampledParams, SAMParams, sam_rule, sgd_rule

if TYPE_CHECKING:
    from .base import RoundTools, RunSettings

__all__ = [
    "average_client_update",
    "fedavg_round",
    "fedavgm_round",
    "client_momentum_round",
    "mimelite_round",
    "FEDAVG",
    "FEDSAM",
    "FEDASAM",
    "FEDPROX",
    "FEDAVGM",
    "FEDCM",
    "MOFEDSAM",
    "MIMELITE",
    "MOFEDSAM_VARIANTS",
]

#: MoFedSAM's server step: the paper's rule (reconstructed) and the public codes.
MOFEDSAM_VARIANTS = ("paper", "official-fedgf", "fl-simulator")


def _server_init(state: type) -> Callable[[Tensor, RoundTools], Any]:
    """``init`` of a server state ``(w, buffer)``: w⁰ is x⁰'s first row, the ``(d,)`` buffer 0."""
    return lambda x0, r: state(x0[0].clone(), torch.zeros_like(x0[0]))


def average_client_update(w: Tensor, r: RoundTools, messages_per_client: int = 2) -> Tensor:
    r"""Sample :math:`S_t`, run K local steps from :math:`w^t` on each client, return :math:`\sum_{i \in S_t} p_i (y_i^K - w^t)`.

    Each sampled client sends and receives ``messages_per_client`` model-sized messages (w down, y_i up).
    """
    clients = r.sample_clients()
    y = r.local_train(w.expand(len(clients), -1), clients)
    r.count_transmissions(messages_per_client * len(clients))
    return (r.client_weights(clients) * (y - w)).sum(0)


# ---------------------------------------------------------------- FedAvg family
def fedavg_round(s: GlobalModel, r: RoundTools) -> GlobalModel:
    r"""FedAvg (McMahan et al. 2017, Algorithm 1) with a server learning rate; FedSAM, FedASAM and FedProx.

    1. :math:`S_t` ← a random subset of the clients
    2. each :math:`i \in S_t`: :math:`y_i^{K}` ← K local steps from :math:`w^t` of the declared rule
       (SGD; FedSAM: SAM, Qu et al. 2022 eq. (4); FedASAM: ASAM; FedProx: SGD on
       :math:`F_i(y) + \frac{\mu}{2}\lVert y - w^t\rVert^2`, Li et al. 2020 eq. (2))
    3. :math:`w^{t+1} = w^t + \eta_g \sum_{i \in S_t} p_i\, (y_i^K - w^t)`
    """
    update = average_client_update(s.w, r)  # 1.–2., Σ p_i (y_i − w)
    return GlobalModel(s.w + r.params.server_lr * update)  # 3.


def fedprox_rule(p: FedProxParams, s: GlobalModel, run: RunSettings) -> LocalRule:
    r"""FedProx's local steps (Li et al., MLSys 2020, Algorithm 2): SGD on :math:`F_i(y) + \frac{\mu}{2}\lVert y - w^t\rVert^2`.

    The gradient is :math:`\nabla F_i(y) + \mu (y - w^t)`; μ is ``prox_mu`` (μ = 0 is FedAvg). The paper's variable
    local work of stragglers (γ-inexactness) is not modelled: every client takes the same K steps.
    """
    return chain(proximal(p.prox_mu, s.w), sgd(run.weight_decay))


class ServerMomentum(NamedTuple):
    w: Tensor  # (d,) the global model
    velocity: Tensor  # (d,) v^t, 0 at first


def fedavgm_round(s: ServerMomentum, r: RoundTools) -> ServerMomentum:
    r"""FedAvgM, FedAvg with server momentum (Hsu, Qi and Brown 2019, §3).

    1. :math:`S_t`, and K local SGD steps from :math:`w^t` on each client, as FedAvg
    2. pseudo-gradient :math:`\Delta^t = \sum_{i \in S_t} p_i\,(w^t - y_i^K)`
    3. :math:`v^{t+1} = \theta_g\, v^t + \Delta^t` (:math:`v^0 = 0`), :math:`w^{t+1} = w^t - \eta_g\, v^{t+1}`

    θ_g is ``server_momentum`` (the paper's β); with θ_g = 0 this is FedAvg.
    """
    delta = -average_client_update(s.w, r)  # Δ^t
    v = r.params.server_momentum * s.velocity + delta
    return ServerMomentum(s.w - r.params.server_lr * v, v)


# ------------------------------------------------------ client momentum: FedCM, MoFedSAM
class ServerDirection(NamedTuple):
    w: Tensor  # (d,) the global model
    delta: Tensor  # (d,) Δ^t, the server's last update direction, 0 at first


def fedcm_rule(p: FedCMParams, s: ServerDirection, run: RunSettings) -> LocalRule:
    r"""FedCM's local direction :math:`v = \alpha\, g + (1-\alpha)\, \Delta^t` (α = ``fedcm_alpha``), then SGD."""
    return chain(blend_direction(p.fedcm_alpha, s.delta), sgd(run.weight_decay))


def mofedsam_rule(p: MoFedSAMParams, s: ServerDirection, run: RunSettings) -> LocalRule:
    r"""MoFedSAM's local direction :math:`v = \alpha\, \tilde g + (1-\alpha)\, \Delta^t`, :math:`\tilde g` the SAM gradient.

    ``mofedsam_variant="fl-simulator"`` also clips v to norm 10, as that code does.
    """
    clip = (clip_by_global_norm(10.0),) if p.mofedsam_variant == "fl-simulator" else ()
    return chain(sharpness_aware(p), blend_direction(p.mofedsam_alpha, s.delta), *clip, sgd(run.weight_decay))


def client_momentum_round(s: ServerDirection, r: RoundTools) -> ServerDirection:
    r"""FedCM (Xu, Wang, Wang and Yang 2021, Algorithm 1) and MoFedSAM (Qu et al., ICML 2022, eq. (6); *reconstructed*).

    1. client i, step k: :math:`y^{k+1}_i = y^k_i - \eta_l\, v`, the declared direction
       :math:`v = \alpha\, g + (1-\alpha)\, \Delta^t` (MoFedSAM: g the SAM gradient), :math:`\Delta^0 = 0`
    2. :math:`\bar u = \sum_{i \in S} p_i\, (y^K_i - w^t)`, :math:`\Delta^{t+1} = -\bar u / (\eta_l K)`
    3. :math:`w^{t+1} = w^t + \eta_g\, \bar u` (= :math:`w^t - \eta_g\, \eta_l K\, \Delta^{t+1}`)

    MoFedSAM's eq. (6) is *reconstructed* from its paper's words: "momentum rate α", "if α = 1, MoFedSAM is
    equivalent to FedSAM", Δ "aggregates the global model information of participating clients" and approximates the
    global gradient, and the explicit debt to FedCM. Together they fix it as FedCM's update with a SAM gradient. FedCM's server
    step (3.) is the one FL-Simulator codes (``server/FedCM.py``): *reconstructed* from that code, not from FedCM's paper. ``mofedsam_variant`` selects the public codes' server
    step: ``"paper"`` (3.); ``"fl-simulator"`` (the same, with the clipped direction of :func:`mofedsam_rule`);
    ``"official-fedgf"`` (hwan-sig/Official-FedGF ``mofedsam.py``: :math:`w^{t+1} = w^t - \eta_g \Delta^{t+1}`, a
    step of :math:`\eta_g \bar u / (\eta_l K)`, larger than FedAvg's by :math:`1/(\eta_l K)`).
    """
    p = r.params
    update = average_client_update(s.w, r, messages_per_client=3)  # 1.–2.: w and Δ down, y_i up
    delta = -update / (r.lr * p.local_steps)  # Δ^{t+1}
    if getattr(p, "mofedsam_variant", None) == "official-fedgf":  # (FedCM has only the paper's step)
        return ServerDirection(s.w - p.server_lr * delta, delta)
    return ServerDirection(s.w + p.server_lr * update, delta)  # 3.


# -------------------------------------------------------------------- MimeLite
class ServerStatistics(NamedTuple):
    w: Tensor  # (d,) the global model
    momentum: Tensor  # (d,) m, the server's momentum, 0 at first


def mimelite_rule(p: MimeLiteParams, s: ServerStatistics, run: RunSettings) -> LocalRule:
    r"""MimeLite's local direction :math:`(1-\beta)\, \nabla f_i(y; \zeta) + \beta\, m`, m fixed during the round."""
    return chain(blend_direction(1 - p.server_momentum, s.momentum), sgd(run.weight_decay))


def mimelite_round(s: ServerStatistics, r: RoundTools) -> ServerStatistics:
    r"""MimeLite with SGD-momentum as the base optimizer (Karimireddy et al. 2020, "Mime", Algorithm 1).

    The server's momentum :math:`m` stays fixed during the round; clients mimic a centralized momentum step with it.

    1. each :math:`i \in S`: :math:`c_i = \nabla f_i(w)` over the whole local split;
       K steps :math:`y_i \leftarrow y_i - \eta\, ((1-\theta_g)\, \nabla f_i(y_i; \xi) + \theta_g\, m)`
    2. :math:`m \leftarrow (1-\theta_g) \frac{1}{|S|}\sum_{i \in S} c_i + \theta_g\, m`,
       :math:`w \leftarrow \frac{1}{|S|}\sum_{i \in S} y_i`

    θ_g is ``server_momentum`` (the paper's β, 0.9 by default). Each client receives (w, m) and sends (y_i, c_i).
    """
    beta = r.params.server_momentum
    clients = r.sample_clients()
    start = s.w.expand(len(clients), -1)
    y = r.local_train(start, clients)  # 1., the declared direction
    full_grads = r.full_gradient(start, clients)  # c_i, at the round's start point
    r.count_transmissions(4 * len(clients))
    return ServerStatistics(y.mean(0), (1 - beta) * full_grads.mean(0) + beta * s.momentum)


# --------------------------------------------------------------- hyperparameters
@params
class FedSAMParams(SAMParams, CentralizedParams):
    """FedSAM (Qu et al. 2022): ρ = 0.05."""

    rho: float = 0.05


@params
class FedASAMParams(FedSAMParams):
    """FedASAM (Caldarola et al. 2022): adaptive SAM with ρ = 0.7, η = 0.2 (CIFAR-10 heterogeneous)."""

    rho: float = 0.7
    sam_variant: str = "asam"


@params
class FedProxParams(CentralizedParams):
    """FedProx: proximal coefficient μ = 0.01."""

    prox_mu: float = setting(0.01, "μ, proximal coefficient of fedprox", Number(0.0))


@params
class ServerMomentumParams:
    """A server momentum θ_g = 0.9 (FedAvgM's and MimeLite's)."""

    server_momentum: float = setting(
        0.9, "θ_g, server momentum of fedavgm and mimelite", Number(0.0, 1.0, high_open=True)
    )


@params
class FedAvgMParams(ServerMomentumParams, CentralizedParams):
    """FedAvgM: server momentum θ_g = 0.9."""


@params
class FedCMParams(CentralizedParams):
    """FedCM: α_CM = 0.1 (the paper's α and default)."""

    fedcm_alpha: float = setting(0.1, "α_CM, FedCM's weight of the gradient: α_CM·g + (1 − α_CM)·Δ", Number(0.0, 1.0))


@params
class MoFedSAMParams(FedSAMParams):
    """MoFedSAM: ρ = 0.05, α_Mo = 0.1 (the paper's α), the paper's server step."""

    mofedsam_alpha: float = setting(
        0.1, "α_Mo, MoFedSAM's weight of the SAM gradient: α_Mo·g_SAM + (1 − α_Mo)·Δ", Number(0.0, 1.0)
    )
    mofedsam_variant: str = setting(
        "paper", "MoFedSAM server step: " + ", ".join(MOFEDSAM_VARIANTS), OneOf(MOFEDSAM_VARIANTS)
    )


@params
class MimeLiteParams(ServerMomentumParams, SampledParams):
    """MimeLite: server momentum θ_g = 0.9; its server takes the plain average (no η_g)."""


FEDAVG = Algorithm(
    "fedavg",
    "FedAvg: sampled clients run K SGD steps, the server averages (McMahan et al. 2017)",
    CentralizedParams,
    sgd_rule,
    fedavg_round,
    GlobalModel.init,
    kind="centralized",
)
FEDSAM = Algorithm(
    "fedsam",
    "FedSAM: FedAvg with local SAM steps (Qu et al. 2022)",
    FedSAMParams,
    sam_rule,
    fedavg_round,
    GlobalModel.init,
    kind="centralized",
)
FEDASAM = Algorithm(
    "fedasam",
    "FedASAM: FedAvg with local adaptive SAM (Caldarola et al. 2022)",
    FedASAMParams,
    sam_rule,
    fedavg_round,
    GlobalModel.init,
    kind="centralized",
)
FEDPROX = Algorithm(
    "fedprox",
    "FedProx: local steps on F_i + μ/2 ||y - w||² (Li et al. 2020)",
    FedProxParams,
    fedprox_rule,
    fedavg_round,
    GlobalModel.init,
    kind="centralized",
)
FEDAVGM = Algorithm(
    "fedavgm",
    "FedAvgM: FedAvg with server momentum θ_g (Hsu et al. 2019)",
    FedAvgMParams,
    sgd_rule,
    fedavgm_round,
    _server_init(ServerMomentum),
    kind="centralized",
)
FEDCM = Algorithm(
    "fedcm",
    "FedCM: local steps blend the gradient with the server's last update (Xu et al. 2021)",
    FedCMParams,
    fedcm_rule,
    client_momentum_round,
    _server_init(ServerDirection),
    kind="centralized",
)
MOFEDSAM = Algorithm(
    "mofedsam",
    "MoFedSAM: local SAM steps blended with the server's momentum (Qu et al. 2022)",
    MoFedSAMParams,
    mofedsam_rule,
    client_momentum_round,
    _server_init(ServerDirection),
    kind="centralized",
)
MIMELITE = Algorithm(
    "mimelite",
    "MimeLite: local steps use the server's fixed momentum (Karimireddy et al. 2020)",
    MimeLiteParams,
    mimelite_rule,
    mimelite_round,
    _server_init(ServerStatistics),
    kind="centralized",
)
