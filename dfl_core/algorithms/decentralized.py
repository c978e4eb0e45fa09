"""Decentralized algorithms: D-PSGD, DFedAvg(M), DFedSAM(-MGS).

Each is the round function of an :class:`~dfl_core.algorithms.Algorithm`; the
local rule (SGD, momentum, SAM) is built by the engine from the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from . import RoundTools

__all__ = ["dpsgd", "dfedavg", "dfedsam"]


def dpsgd(x: Tensor, r: RoundTools) -> Tensor:
    r"""D-PSGD (Lian et al. 2017, Algorithm 1): one SGD step per round, mixed with the neighbours.

    .. math::
        x^{t+1}(i) = \sum_j w_{ij}\, x^t(j) \;-\; \eta\, \nabla F_i(x^t(i); \xi_i)

    The gradient is taken at the client's own model before mixing, as in
    Lian et al.; DFedAvgM's eq. (3) reorders it into DFedAvg with K = 1.
    """
    step = r.local_train(x) - x       # -η ∇F_i(x^t(i); ξ), one local step (K = 1)
    return r.gossip(x) + step


def dfedavg(x: Tensor, r: RoundTools) -> Tensor:
    r"""DFedAvg and DFedAvgM (Sun et al., "Decentralized Federated Averaging", eqs. (4)–(5)).

    1. :math:`y^{t,0}(i) = y^{t,-1}(i) = x^t(i)`
    2. for k = 0..K-1: :math:`y^{t,k+1}(i) = y^{t,k}(i) - \eta \nabla F_i(y^{t,k}(i); \xi)
       + \theta\,(y^{t,k}(i) - y^{t,k-1}(i))`   (eq. (4); θ = 0 is DFedAvg)
    3. :math:`z^t(i) = y^{t,K}(i)`, :math:`x^{t+1}(i) = \sum_l w_{il} z^t(l)`   (eq. (5))

    Eq. (4) lost its symbols in the seed text; the heavy-ball form above is
    *reconstructed* from the paper's wording ("SGD with heavy-ball") and
    DFedSAM's Algorithm 1 line 3 (:math:`y^{t,-1} = y^{t,0}`). With Q > 1 the
    gossip is repeated, as in DFedSAM-MGS.
    """
    z = r.local_train(x)              # l.2: K steps of (momentum) SGD
    return r.gossip(z)                # l.3: x^{t+1} = W z^t


def dfedsam(x: Tensor, r: RoundTools) -> Tensor:
    r"""DFedSAM and DFedSAM-MGS (Shi et al., ICML 2023, Algorithm 1).

    1. :math:`y^{t,0}(i) = x^t(i)`
    2. for k = 0..K-1 (l.3–4, eq. (3)):
       :math:`g = \nabla F_i(y^{t,k}; \xi)`, :math:`\delta = \rho\, g/\lVert g \rVert_2`,
       :math:`y^{t,k+1}(i) = y^{t,k}(i) - \eta \nabla F_i(y^{t,k} + \delta; \xi)`
    3. :math:`z^{t,0}(i) = y^{t,K}(i)` (l.5)
    4. for q = 0..Q-1: :math:`z^{t,q+1}(i) = \sum_l w_{il} z^{t,q}(l)` (l.6–8, eq. (5))
    5. :math:`x^{t+1}(i) = z^{t,Q}(i)` (l.9)

    Q = 1 is DFedSAM (eq. (4)); Q > 1 is DFedSAM-MGS.
    """
    z = r.local_train(x)              # l.3–5: K SAM steps
    return r.gossip(z)                # l.6–9: Q gossip steps with the same W
