r"""The algorithms, each written like its paper's Algorithm box.

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

__all__ = ["Algorithm", "ALGORITHMS", "RoundTools"]


class RoundTools(Protocol):
    """What the engine provides to an algorithm for one round t."""

    def local_train(self, x: Tensor) -> Tensor:
        """K steps of the local rule from ``x`` on every client; returns :math:`y^{t,K}`."""

    def gossip(self, x: Tensor) -> Tensor:
        """Q gossip steps with this round's mixing matrix: :math:`W_t^Q x`."""


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


from .decentralized import dfedavg, dfedsam, dpsgd  # noqa: E402  (they use RoundTools)

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
