"""Decentralized algorithms: D-PSGD, DFedAvg(M), quantized DFedAvgM, DFedSAM(-MGS).

Each is the round function of an :class:`~dfl_core.algorithms.Algorithm`; the
local rule (SGD, momentum, SAM) is built by the engine from the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from . import RoundTools

__all__ = ["dpsgd", "dfedavg", "dfedavgm_q", "dfedsam"]


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


def dfedavgm_q(x: Tensor, r: RoundTools) -> Tensor:
    r"""Quantized DFedAvgM (Sun et al., "Decentralized Federated Averaging", §3.2, eqs. (6)–(7)); *reconstructed*.

    1. :math:`z^t(i) = y^{t,K}(i)`: K heavy-ball steps from :math:`x^t(i)` (eq. (4), as DFedAvgM)
    2. client i sends :math:`Q(z^t(i) - x^t(i))` to its neighbours: b-bit integers
       and one 32-bit step s, :math:`d \cdot b + 32` bits (:func:`~dfl_core.instruments.quantize.message_bits`)
    3. :math:`x^{t+1}(i) = x^t(i) + \sum_l w_{il}\, Q(z^t(l) - x^t(l))`   (eq. (7))

    Q is :func:`~dfl_core.instruments.quantize.quantize` with ``quant_bits``,
    ``quant_step`` (``None``: s = max|v|/(2^{b-1}-1) per message, our choice)
    and ``quant_stochastic``; stochastic rounding draws from the round's
    ``"quantize"`` stream. The seed text lost every symbol of §3.2; the update
    above is rebuilt from its words ("quantizes the difference of parameters",
    "after receiving ... updates its local parameters"). With Q the identity it
    is :math:`x^{t+1} = W z^t + (I - W) x^t`: DFedAvgM's average
    :math:`\bar x^{t+1} = \bar z^t`, and exactly DFedAvgM whenever the
    clients agree (:math:`W x^t = x^t`: round 0 from a common initialisation;
    every round on the complete graph), but otherwise the disagreement of the
    :math:`x^t(i)` is carried over rather than averaged away.
    ``quant_mixing="models"`` is the other reading: every client rebuilds its
    neighbours' models from the messages, :math:`x^t(l) + Q(z^t(l) - x^t(l))`,
    and averages those, :math:`x^{t+1} = W(x^t + Q(z^t - x^t))`, which is
    exactly DFedAvgM when Q is the identity (it assumes a client knows its
    neighbours' :math:`x^t(l)`, as it does after a round of exact gossip).
    One gossip step per round (``gossip_steps = 1``).
    """
    from ..instruments.quantize import message_bits, quantize   # lazy: instruments may import the engine

    cfg = r.config
    z = r.local_train(x)                                             # (4): K heavy-ball steps
    gen = r.round_generator("quantize") if cfg.quant_stochastic else None
    q = quantize(z - x, cfg.quant_bits, cfg.quant_step,              # (6): one message per row
                 stochastic=cfg.quant_stochastic, generator=gen)
    bits = message_bits(x.shape[1], cfg.quant_bits)
    if cfg.quant_mixing == "models":                                 # W (x + Q(z − x)): DFedAvgM when Q = id
        return r.gossip(x + q, bits_per_message=bits)
    return x + r.gossip(q, bits_per_message=bits)                    # (7)


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
