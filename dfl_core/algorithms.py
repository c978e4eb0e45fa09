r"""The decentralized algorithms, each written like its paper's Algorithm box.

Every algorithm is a function ``round(x, r) -> x`` from the clients' parameters
at the start of round t (``x``, shape ``(m, d)``, row i is :math:`x^t(i)`) to
those at the start of round t + 1. It uses two tools the engine hands it for
that round (:class:`RoundTools`):

* ``r.local_train(x)``: K local steps of the algorithm's local rule on every
  client at once (SGD, momentum, SAM … from :mod:`dfl_core.local`);
* ``r.gossip(x)``: Q gossip steps :math:`x \leftarrow W_t x`.

Which local rule an algorithm uses is declared in its :class:`Algorithm`
record (``uses_sam``, ``uses_momentum``); the engine builds it from the config.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from torch import Tensor

__all__ = ["Algorithm", "ALGORITHMS", "RoundTools", "dpsgd", "dfedavg", "dfedsam"]


class RoundTools(Protocol):
    """What the engine provides to an algorithm for one round t."""

    def local_train(self, x: Tensor) -> Tensor:
        """K steps of the local rule from ``x`` on every client; returns :math:`y^{t,K}`."""

    def gossip(self, x: Tensor) -> Tensor:
        """Q gossip steps with this round's mixing matrix: :math:`W_t^Q x`."""


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


@dataclass(frozen=True)
class Algorithm:
    """An algorithm's round function and what its local rule needs from the config."""

    name: str
    round: Callable[[Tensor, RoundTools], Tensor]
    summary: str
    uses_sam: bool = False            # the local rule perturbs with SAM(ρ)
    uses_momentum: bool = False       # the local rule uses heavy-ball momentum θ
    defaults: Mapping[str, object] = field(default_factory=dict)   # config fields left as None
    fixed: Mapping[str, object] = field(default_factory=dict)      # config fields that must take this value


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("dpsgd", dpsgd, "D-PSGD: one local SGD step, then gossip (Lian et al. 2017)",
              defaults={"local_steps": 1, "gossip_steps": 1}, fixed={"local_steps": 1}),
    Algorithm("dfedavg", dfedavg, "DFedAvg: K local SGD steps, then gossip (Sun et al. 2022)",
              defaults={"local_steps": 5, "gossip_steps": 1}),
    Algorithm("dfedavgm", dfedavg, "DFedAvgM: K local heavy-ball SGD steps, then gossip (Sun et al. 2022)",
              uses_momentum=True, defaults={"local_steps": 5, "gossip_steps": 1, "momentum": 0.9}),
    Algorithm("dfedsam", dfedsam, "DFedSAM: K local SAM steps, then one gossip step (Shi et al. 2023)",
              uses_sam=True, defaults={"local_steps": 5, "gossip_steps": 1, "rho": 0.01}),
    Algorithm("dfedsam-mgs", dfedsam, "DFedSAM-MGS: DFedSAM with Q gossip steps per round (Shi et al. 2023)",
              uses_sam=True, defaults={"local_steps": 5, "gossip_steps": 4, "rho": 0.01}),
]}
