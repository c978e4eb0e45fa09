r"""FedGF (Lee & Yoon, "Rethinking the Flat Minima Searching in Federated Learning", ICML 2024).

The slides (seed 001) give eqs. (8)–(13), (15) and (16); (14) is missing. Clients take SAM steps towards an
interpolation, by an adaptive weight c, between their own perturbation and a global one built from the server's last
update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor

from ..local import FEDGF_READINGS, LocalRule, chain, fedgf_perturbation, sam, sam_perturbation, sgd
from ..settings import REQUIRED, Integer, Number, OneOf, params, setting
from .base import Algorithm, CentralizedParams, SAMRadius

if TYPE_CHECKING:
    from .base import RoundTools, RunSettings

__all__ = ["FedGFState", "fedgf_c", "fedgf_rule", "fedgf_round", "FEDGF", "FEDGF_C_READINGS"]

#: How c is read in the first W rounds, eq. (16): ``"window"`` divides by W from round 0 (rounds
#: before the first count as 0; c ramps 0, 1/W, 2/W, …); ``"seen"`` averages the indicators seen so
#: far (the official code's ``np.mean`` over its window; c is 0 in round 0, then 1, 1, … if every
#: indicator is 1). Both agree from round W on.
FEDGF_C_READINGS = ("window", "seen")


class FedGFState(NamedTuple):
    w: Tensor  # (d,) w^r, the global model
    previous: Tensor | None  # (d,) w^{r-1} (None before the first round)
    indicators: tuple[int, ...]  # 1[D^r > T_D] of the last W rounds, oldest first

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "FedGFState":
        return cls(x0[0].clone(), None, ())


def fedgf_c(p: FedGFParams, s: FedGFState) -> float:
    r"""The interpolation weight c of round r, eq. (16), from :math:`I^{r-W}, \dots, I^{r-1}`.

    Eq. (16)'s sum ends at :math:`I^r`, which needs this round's drift :math:`D^r`, itself computed by the training
    that uses c; so c of round r is read from the W rounds before it, as the official code's ``calc_c`` also does
    (it sets c for the next round). *Reconstructed*: a one-round shift of the printed index."""
    window = s.indicators[-p.fedgf_window :]
    if p.fedgf_c_reading == "seen":
        return sum(window) / len(window) if window else 0.0
    return sum(window) / p.fedgf_window


def fedgf_rule(p: FedGFParams, s: FedGFState, run: RunSettings) -> LocalRule:
    r"""The gradient at :math:`c\,\tilde w^r + (1-c)\,\tilde w_{i,k}`, eqs. (9)–(13) (:func:`fedgf_round`, 1.–2.); in
    round 0 there is no :math:`\Delta^r`, and the official code takes plain SAM steps, as here."""
    if s.previous is None:
        return chain(sam(p.rho), sgd(run.weight_decay))
    global_delta = sam_perturbation(s.previous - s.w, p.rho)  # (10)–(11)
    return chain(
        fedgf_perturbation(p.rho, fedgf_c(p, s), s.w + global_delta, global_delta, p.fedgf_reading),
        sgd(run.weight_decay),
    )


def fedgf_round(s: FedGFState, r: RoundTools) -> FedGFState:
    r"""FedGF (Lee & Yoon, ICML 2024; eqs. (8)–(16) of the slides).

    1. :math:`\Delta^r = w^{r-1} - w^r` (10), :math:`\tilde w^r = w^r + \rho \Delta^r/\lVert \Delta^r \rVert` (11)
    2. client i, step k: gradient at :math:`c\,\tilde w^r + (1-c)\,\tilde w_{i,k}` (12)–(13),
       :math:`\tilde w_{i,k}` the client's SAM point (9) (:func:`fedgf_rule`)
    3. drift :math:`D^r = \frac{1}{|S|} \sum_{i \in S} \lVert w^r - w^r_{i,K} \rVert_2` (15),
       indicator :math:`I^r = 1[D^r > T_D]`: *reconstructed* from the official code (``calc_c``), since the
       slides jump from (13) to (15) and define neither :math:`I^r` nor :math:`T_D`
    4. :math:`c` for the next round: :math:`\frac{1}{W} \sum` of the last W indicators (16)
       (:func:`fedgf_c`; ``fedgf_c_reading`` says how rounds before the first W count)
    5. :math:`w^{r+1} = w^r + \eta_g \sum_i p_i (w^r_{i,K} - w^r)`

    ``fedgf_reading`` chooses how (12) interpolates: ``"points"`` (as printed
    and as coded) or ``"vectors"`` (see :func:`dfl_core.local.fedgf_perturbation`).
    c and :math:`D^r` are recorded every round (``fedgf_c``, ``fedgf_drift``).
    """
    p, w = r.params, s.w
    clients = r.sample_clients()
    y = r.local_train(w.expand(len(clients), -1), clients)  # 1.–2.
    r.count_transmissions((2 if s.previous is None else 3) * len(clients))  # w (and w̃) down, y_i up
    drift = float(torch.linalg.vector_norm(y - w, dim=1).mean())  # 3., (15)
    r.record(fedgf_c=fedgf_c(p, s), fedgf_drift=drift)
    indicators = (*s.indicators, int(drift > p.fedgf_threshold))[-p.fedgf_window :]  # 4., (16)
    return FedGFState(w + p.server_lr * (r.client_weights(clients) * (y - w)).sum(0), w, indicators)  # 5.


@params
class FedGFParams(SAMRadius, CentralizedParams):
    """FedGF: ρ = 0.05, W = 30 (the public script); T_D has no published value and must be set."""

    rho: float = 0.05
    fedgf_threshold: float = setting(
        REQUIRED, "T_D, FedGF's drift threshold (required: the papers give no value)", Number(0.0)
    )
    fedgf_window: int = setting(30, "W_c, FedGF's window of rounds for c", Integer(1))
    fedgf_reading: str = setting(
        "points", "FedGF eq. (12): 'points' (as printed and coded) or 'vectors'", OneOf(FEDGF_READINGS)
    )
    fedgf_c_reading: str = setting(
        "window",
        "FedGF eq. (16) in the first W_c rounds: 'window' (sum of the "
        "indicators over W_c, missing rounds count 0) or 'seen' (mean of the rounds "
        "seen, as the official code)",
        OneOf(FEDGF_C_READINGS),
    )


FEDGF = Algorithm(
    "fedgf",
    "FedGF: local SAM towards a global perturbation, adaptive c (Lee & Yoon 2024)",
    FedGFParams,
    fedgf_rule,
    fedgf_round,
    FedGFState.init,
    kind="centralized",
)
