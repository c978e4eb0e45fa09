r"""Centralized FL whose clients keep state across rounds: SCAFFOLD, FedGAMMA, FedDyn, FedSMOO.

Each client's state is one row of an ``(m, d)`` tensor in the algorithm's state (SCAFFOLD's :math:`c_i`, FedDyn's
:math:`\nabla L_i(\theta_i^{t-1})`, FedSMOO's :math:`\mu_i`), read by the local rule through the step's client ids
(``step.clients``) and replaced row-wise after the round; only sampled clients' rows change. These algorithms
average with :math:`1/|S|` as their papers do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor

from ..local import (
    LocalRule,
    add_decayed_weights,
    chain,
    clip_by_global_norm,
    control_variate,
    corrected_sam,
    proximal,
    sam_perturbation,
    sgd,
    sharpness_aware,
)
from ..settings import Number, OneOf, params, setting
from .base import Algorithm, CentralizedParams, SampledParams, SAMParams, SAMRadius

if TYPE_CHECKING:
    from .base import RoundTools, RunSettings

__all__ = [
    "controlled_round",
    "feddyn_round",
    "fedsmoo_round",
    "SCAFFOLD",
    "FEDGAMMA",
    "FEDDYN",
    "FEDSMOO",
    "SCAFFOLD_OPTIONS",
    "FEDSMOO_VARIANTS",
]

#: SCAFFOLD's two ways of refreshing c_i (Algorithm 1, l.12).
SCAFFOLD_OPTIONS = ("I", "II")
#: FedSMOO as published (reconstructed) and the two simplified public versions.
FEDSMOO_VARIANTS = ("paper", "fl-simulator", "no-regularizer")


# -------------------------------------------------------------- SCAFFOLD, FedGAMMA
class ControlVariates(NamedTuple):
    w: Tensor  # (d,) the global model
    c: Tensor  # (d,) the server's control variate
    c_clients: Tensor  # (m, d) row i: client i's c_i

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "ControlVariates":
        return cls(x0[0].clone(), torch.zeros_like(x0[0]), torch.zeros_like(x0))


def scaffold_rule(p: ScaffoldParams, s: ControlVariates, run: RunSettings) -> LocalRule:
    r"""SCAFFOLD's corrected local step :math:`y \leftarrow y - \eta_l\,(g_i(y) - c_i + c)` (l.10)."""
    return chain(control_variate(s.c_clients, s.c), sgd(run.weight_decay))


def fedgamma_rule(p: FedGAMMAParams, s: ControlVariates, run: RunSettings) -> LocalRule:
    r"""FedGAMMA's local step: the SAM gradient, corrected as SCAFFOLD's, :math:`\nabla F_i(y + \delta) - c_i + c`."""
    return chain(sharpness_aware(p), control_variate(s.c_clients, s.c), sgd(run.weight_decay))


def controlled_round(s: ControlVariates, r: RoundTools) -> ControlVariates:
    r"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1): local steps corrected by control variates.

    Server :math:`c`, clients :math:`c_i`, all 0 at the start.

    1. each :math:`i \in S`: :math:`y_i \leftarrow w`, K steps :math:`y_i \leftarrow y_i - \eta_l\,(g_i(y_i) - c_i + c)` (l.8–10)
    2. :math:`c_i^+ =` option I: :math:`\nabla f_i(w)` over the whole local split; option II:
       :math:`c_i - c + \frac{1}{K \eta_l}(w - y_i)` (l.12)
    3. :math:`\Delta y_i = y_i - w`, :math:`\Delta c_i = c_i^+ - c_i`, :math:`c_i \leftarrow c_i^+` (l.13)
    4. :math:`w \leftarrow w + \frac{\eta_g}{|S|} \sum_{i \in S} \Delta y_i`,
       :math:`c \leftarrow c + \frac{1}{N} \sum_{i \in S} \Delta c_i` (l.16–17)

    ``scaffold_option`` picks l.12 ("II" by default, what the paper's experiments favour). FedGAMMA (Dai et al.,
    IEEE TNNLS 2023; local step *reconstructed*), which has no such option, is this round with option II and a SAM
    gradient (:func:`fedgamma_rule`): the paper is not among the seeds, and both public codes (FL-Simulator
    ``client/fedgamma.py``, Official-FedGF ``fedGamma.py``) take the ascent with the plain gradient and correct only
    the descent. Official-FedGF updates :math:`c` by the data-weighted mean of :math:`\Delta c_i` divided by N (|S|
    times smaller than SCAFFOLD's sum / N). Each client receives (w, c) and sends (Δy_i, Δc_i): four model-sized
    messages.
    """
    p, w = r.params, s.w
    clients = r.sample_clients()
    rows = clients.to(s.c_clients.device)
    start = w.expand(len(clients), -1)
    y = r.local_train(start, clients)  # l.8–10
    if getattr(p, "scaffold_option", None) == "I":  # FedGAMMA has no option: always II
        c_new = r.full_gradient(start, clients)  # l.12, option I
    else:
        c_new = s.c_clients[rows] - s.c + (w - y) / (p.local_steps * r.lr)  # l.12, option II
    r.count_transmissions(4 * len(clients))  # l.5 and l.13: (w, c) down, (Δy_i, Δc_i) up
    w_new = w + p.server_lr * (y - w).mean(0)  # l.16–17: x ← x + η_g Δx
    c = s.c + (c_new - s.c_clients[rows]).sum(0) / r.config.num_clients  # l.16–17: c ← c + (|S|/N) Δc
    return ControlVariates(w_new, c, s.c_clients.index_copy(0, rows, c_new))  # l.14: c_i ← c_i⁺


# ---------------------------------------------------------------------- FedDyn
class DynamicRegularization(NamedTuple):
    w: Tensor  # (d,) θ^t, the global model
    h: Tensor  # (d,) the server's h, 0 at first
    local_grads: Tensor  # (m, d) row k: ∇L_k(θ_k^{t-1}), 0 at first

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "DynamicRegularization":
        return cls(x0[0].clone(), torch.zeros_like(x0[0]), torch.zeros_like(x0))


def feddyn_rule(p: FedDynParams, s: DynamicRegularization, run: RunSettings) -> LocalRule:
    r"""FedDyn's local steps along :math:`\nabla L_k(\theta; \xi) - \nabla L_k(\theta_k^{t-1}) + \alpha(\theta - \theta^{t-1})`."""
    return chain(control_variate(s.local_grads), proximal(p.dyn_alpha, s.w), sgd(run.weight_decay))


def feddyn_round(s: DynamicRegularization, r: RoundTools) -> DynamicRegularization:
    r"""FedDyn, dynamic regularization (Acar et al., ICLR 2021, Algorithm 1), K SGD steps as the local solver.

    1. each :math:`k \in P_t`: :math:`\theta_k^t \approx \arg\min_\theta L_k(\theta) - \langle \nabla L_k(\theta_k^{t-1}), \theta \rangle
       + \frac{\alpha}{2}\lVert \theta - \theta^{t-1} \rVert^2`: K steps of :func:`feddyn_rule`
    2. :math:`\nabla L_k(\theta_k^t) = \nabla L_k(\theta_k^{t-1}) - \alpha(\theta_k^t - \theta^{t-1})` (kept by the client)
    3. :math:`h^t = h^{t-1} - \frac{\alpha}{m} \sum_{k \in P_t} (\theta_k^t - \theta^{t-1})`
    4. :math:`\theta^t = \frac{1}{|P_t|} \sum_{k \in P_t} \theta_k^t - \frac{1}{\alpha} h^t`

    α is ``dyn_alpha``. The paper solves step 1 with SGD epochs, as here; FL-Simulator's
    ``feddyn.py`` computes the same update and also clips the gradient at norm 10.
    """
    alpha, w = r.params.dyn_alpha, s.w
    clients = r.sample_clients()
    rows = clients.to(s.local_grads.device)
    theta = r.local_train(w.expand(len(clients), -1), clients)  # 1.
    local_grads = s.local_grads.index_copy(0, rows, s.local_grads[rows] - alpha * (theta - w))  # 2.
    h = s.h - alpha * (theta - w).sum(0) / r.config.num_clients  # 3.
    r.count_transmissions(2 * len(clients))
    return DynamicRegularization(theta.mean(0) - h / alpha, h, local_grads)  # 4.


# ---------------------------------------------------------------------- FedSMOO
class FedSMOOState(NamedTuple):
    w: Tensor  # (d,) θ^t, the global model
    h: Tensor  # (d,) FedDyn's h
    local_grads: Tensor  # (m, d) FedDyn's ∇L_i(θ_i^{t-1})
    duals: Tensor  # (m, d) the perturbation duals μ_i
    last_perturbations: Tensor  # (m, d) each client's last ŝ_{i,K}
    s: Tensor  # (d,) the global perturbation

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "FedSMOOState":
        zero, rows = torch.zeros_like(x0[0]), torch.zeros_like(x0)
        return cls(x0[0].clone(), zero, rows, rows.clone(), rows.clone(), zero.clone())


def fedsmoo_rule(
    p: FedSMOOParams, s: FedSMOOState, run: RunSettings, duals: Tensor | None = None, last: Tensor | None = None
) -> LocalRule:
    r"""FedSMOO's local step: SAM with the corrected perturbation, then FedDyn's terms (see :func:`fedsmoo_round`).

    :func:`~dfl_core.local.corrected_sam` updates each client's :math:`\mu_i`
    and records its :math:`\hat s_i` at every step, in place, in ``duals`` and
    ``last``: the round passes this round's copies (default: fresh copies of the state's).
    """
    duals = s.duals.clone() if duals is None else duals
    last = s.last_perturbations.clone() if last is None else last
    pieces = [corrected_sam(p.rho, duals, s.s, last)]
    if p.fedsmoo_variant != "no-regularizer":  # − ∇L_i(θ_i^{t-1}) − λθ^t, then + λθ
        pieces.append(control_variate(s.local_grads, -p.dyn_alpha * s.w))
        if p.fedsmoo_variant == "fl-simulator":
            pieces.append(clip_by_global_norm(10.0))
        pieces.append(add_decayed_weights(p.dyn_alpha))
    return chain(*pieces, sgd(run.weight_decay))


def fedsmoo_round(s: FedSMOOState, r: RoundTools) -> FedSMOOState:
    r"""FedSMOO, dynamic regularization with a global SAM perturbation (Sun et al., ICML 2023); *reconstructed*.

    Client state: FedDyn's :math:`\nabla L_i(\theta_i^{t-1})` and the perturbation dual :math:`\mu_i`;
    server state: FedDyn's :math:`h` and the global perturbation :math:`s`; all 0 at first.

    1. each :math:`i \in S`, step k (:func:`~dfl_core.local.corrected_sam`):
       :math:`\hat s_i = \rho\,\frac{g - \mu_i - s}{\lVert g - \mu_i - s\rVert}`, :math:`\mu_i \leftarrow \mu_i + \hat s_i - s`,
       :math:`\theta \leftarrow \theta - \eta\,(\nabla F_i(\theta + \hat s_i; \xi) - \nabla L_i(\theta_i^{t-1}) + \lambda(\theta - \theta^t))`
    2. FedDyn's dual and server steps with :math:`\alpha = \lambda` (:func:`feddyn_round`, 2.–4.)
    3. :math:`s = \rho\, \bar s / \lVert \bar s \rVert` with
       :math:`\bar s = \frac{1}{|S|}\sum_{i \in S} (\mu_i - \hat s_{i,K})`

    The paper text is not among the seeds. Steps 1–2 are read off the authors' code (FL-Simulator
    ``optimizer/DRegSAM.py``, ``server/FedSMOO.py``), whose comment says its server "simplifies" s "by ignoring the
    :math:`\hat s_{i,K}` term"; step 3 keeps that term as Official-FedGF's re-implementation does.
    ``fedsmoo_variant`` selects: ``"paper"`` (above), ``"fl-simulator"`` (:math:`\bar s = \frac{1}{|S|}\sum \mu_i`,
    and the descent direction before the :math:`\lambda\theta` term clipped to norm 10, as coded) or
    ``"no-regularizer"`` (Official-FedGF's ``fedSMOO_woReg``: steps 1 and 3 without FedDyn's terms, and a FedAvg
    server). λ is ``dyn_alpha``.
    """
    p, w = r.params, s.w
    lam, variant = p.dyn_alpha, p.fedsmoo_variant
    clients = r.sample_clients()
    rows = clients.to(s.duals.device)
    duals, last = s.duals.clone(), s.last_perturbations.clone()  # this round's μ_i, ŝ_i (written by the rule)
    theta = r.local_train(w.expand(len(clients), -1), clients, rule=fedsmoo_rule(p, s, r.config, duals, last))  # 1.
    s_bar = duals[rows].mean(0) if variant == "fl-simulator" else (duals[rows] - last[rows]).mean(0)
    r.count_transmissions(4 * len(clients))  # (θ, s) down, (θ_i, μ_i) up
    kept = dict(duals=duals, last_perturbations=last, s=sam_perturbation(s_bar, p.rho))  # 3.
    if variant == "no-regularizer":
        return s._replace(w=(r.client_weights(clients) * theta).sum(0), **kept)
    local_grads = s.local_grads.index_copy(0, rows, s.local_grads[rows] - lam * (theta - w))  # 2.
    h = s.h - lam * (theta - w).sum(0) / r.config.num_clients
    return FedSMOOState(theta.mean(0) - h / lam, h, local_grads, **kept)


# --------------------------------------------------------------- hyperparameters
@params
class ScaffoldParams(CentralizedParams):
    """SCAFFOLD: option II for c_i (what the paper's experiments favour)."""

    scaffold_option: str = setting(
        "II",
        "SCAFFOLD's refresh of c_i: 'I' (gradient at w over the local data) or 'II' (from the local update)",
        OneOf(SCAFFOLD_OPTIONS),
    )


@params
class FedGAMMAParams(SAMParams, CentralizedParams):
    """FedGAMMA: ρ = 0.05, SCAFFOLD's option II."""

    rho: float = 0.05


@params
class DynamicRegularizationParams:
    """FedDyn's α = 0.01."""

    dyn_alpha: float = setting(
        0.01, "α_dyn, dynamic regularization coefficient of feddyn and fedsmoo", Number(0.0, low_open=True)
    )


@params
class FedDynParams(DynamicRegularizationParams, SampledParams):
    """FedDyn: α = 0.01; its server step has no η_g."""


@params
class FedSMOOParams(DynamicRegularizationParams, SAMRadius, SampledParams):
    """FedSMOO: ρ = 0.1 and λ = 0.1 (FL-Simulator's defaults), the paper's server."""

    rho: float = 0.1
    dyn_alpha: float = 0.1
    fedsmoo_variant: str = setting(
        "paper",
        "FedSMOO: " + ", ".join(FEDSMOO_VARIANTS) + " (see dfl_core.algorithms.controlled)",
        OneOf(FEDSMOO_VARIANTS),
    )


SCAFFOLD = Algorithm(
    "scaffold",
    "SCAFFOLD: local steps corrected by control variates c − c_i, option I or II (Karimireddy et al. 2020)",
    ScaffoldParams,
    scaffold_rule,
    controlled_round,
    ControlVariates.init,
    kind="centralized",
)
FEDGAMMA = Algorithm(
    "fedgamma",
    "FedGAMMA: local SAM steps with SCAFFOLD control variates (Dai et al. 2023)",
    FedGAMMAParams,
    fedgamma_rule,
    controlled_round,
    ControlVariates.init,
    kind="centralized",
)
FEDDYN = Algorithm(
    "feddyn",
    "FedDyn: local steps on a dynamically regularized objective (Acar et al. 2021)",
    FedDynParams,
    feddyn_rule,
    feddyn_round,
    DynamicRegularization.init,
    kind="centralized",
)
FEDSMOO = Algorithm(
    "fedsmoo",
    "FedSMOO: FedDyn with a globally corrected SAM perturbation (Sun et al. 2023; reconstructed)",
    FedSMOOParams,
    fedsmoo_rule,
    fedsmoo_round,
    FedSMOOState.init,
    kind="centralized",
)
