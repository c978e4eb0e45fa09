r"""Decentralized algorithms: D-PSGD, DFedAvg(M), quantized DFedAvgM, DFedSAM(-MGS).

Every client keeps its own model; the state is :class:`~.base.ClientModels`, ``x`` of shape ``(m, d)``. DFedAvg,
DFedAvgM, DFedSAM and DFedSAM-MGS share one round, :func:`local_steps_then_gossip`; they differ only in their
declared local rule (SGD, heavy-ball SGD, SAM) and in their defaults (Q = 4 for MGS). Each of them (and D-PSGD)
sends compressed messages when ``quant_bits`` is set: ``r.gossip`` then gossips against public copies (CHOCO-Gossip,
:meth:`dfl_core.engine.SimulationTools.compressed_gossip`), so the round's code does not change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..operators import message_bits, quantize
from ..settings import OneOf, params, setting
from .base import (
    QUANT_ROUNDINGS,
    Algorithm,
    ClientModels,
    GossipParams,
    HeavyBallParams,
    SAMParams,
    heavy_ball_rule,
    sam_rule,
    sgd_rule,
)

if TYPE_CHECKING:
    from .base import RoundTools

__all__ = [
    "QUANT_ROUNDINGS",
    "dpsgd_round",
    "local_steps_then_gossip",
    "quantized_dfedavgm_round",
    "DPSGD",
    "DFEDAVG",
    "DFEDAVGM",
    "DFEDAVGM_Q",
    "DFEDSAM",
    "DFEDSAM_MGS",
    "QUANT_MIXINGS",
    "UNTRANSMITTABLE_MIXINGS",
]


def dpsgd_round(s: ClientModels, r: RoundTools) -> ClientModels:
    r"""D-PSGD (Lian et al. 2017, Algorithm 1): one SGD step per round, mixed with the neighbours.

    .. math::
        x^{t+1}(i) = \sum_j w_{ij}\, x^t(j) \;-\; \eta\, \nabla F_i(x^t(i); \xi_i)

    The gradient is taken at the client's own model before mixing, as in
    Lian et al.; DFedAvgM's eq. (3) reorders it into DFedAvg with K = 1.
    """
    step = r.local_train(s.x) - s.x  # -η ∇F_i(x^t(i); ξ), one local step (K = 1)
    return ClientModels(r.gossip(s.x) + step)


def local_steps_then_gossip(s: ClientModels, r: RoundTools) -> ClientModels:
    r"""DFedSAM and DFedSAM-MGS (Shi et al., ICML 2023, Algorithm 1); DFedAvg and DFedAvgM (Sun et al.).

    1. :math:`y^{t,0}(i) = x^t(i)`
    2. for k = 0..K-1 (l.3–4): :math:`y^{t,k+1}(i) = y^{t,k}(i) + u^{t,k}(i)`, the declared local rule:
       SAM, eq. (3): :math:`\delta = \rho\, g/\lVert g \rVert_2`, :math:`u = -\eta \nabla F_i(y^{t,k} + \delta; \xi)`;
       DFedAvg(M), Sun et al. eq. (4): :math:`u = -\eta \nabla F_i(y^{t,k}; \xi) + \theta\,(y^{t,k} - y^{t,k-1})`
    3. :math:`z^{t,0}(i) = y^{t,K}(i)` (l.5)
    4. for q = 0..Q-1: :math:`z^{t,q+1}(i) = \sum_l w_{il} z^{t,q}(l)` (l.6–7, eq. (5))
    5. :math:`x^{t+1}(i) = z^{t,Q}(i)` (l.8)

    Q = 1 is DFedSAM (eq. (4)) or DFedAvg (Sun et al. eq. (5)); Q > 1 is DFedSAM-MGS.
    DFedAvgM's heavy-ball form of eq. (4) is *reconstructed* from the paper's wording ("SGD with heavy-ball") and
    DFedSAM's Algorithm 1 l.3 (:math:`y^{t,-1} = y^{t,0}`), see :func:`dfl_core.local.trace`.
    """
    z = r.local_train(s.x)  # l.2–5: K steps of the declared local rule
    return ClientModels(r.gossip(z))  # l.6–8: Q gossip steps


#: dfedavgm-q's three readings of its gossip: the default sends what it counts; see quantized_dfedavgm_round.
QUANT_MIXINGS = ("public-copies", "differences-only", "exact-neighbour-models")
#: The readings whose messages cannot be sent as counted (a run says so on stderr and in its results).
UNTRANSMITTABLE_MIXINGS = ("exact-neighbour-models",)


def quantized_dfedavgm_round(s: ClientModels, r: RoundTools) -> ClientModels:
    r"""Quantized DFedAvgM (Sun et al., "Decentralized Federated Averaging", §3.2, eqs. (6)–(7)), three readings.

    1. :math:`z^t(i) = y^{t,K}(i)`: K heavy-ball steps from :math:`x^t(i)` (eq. (4), as DFedAvgM);
    2. then, by ``quant_mixing``:

       * ``"public-copies"`` (the default; a variant, not the paper's eq. (7)): compressed gossip (:meth:`~dfl_core.engine.SimulationTools.compressed_gossip`,
         CHOCO-Gossip): client i sends :math:`q = \mathcal Q(z^t(i) - \hat x_i)` and everyone mixes the public
         copies :math:`\hat x`, which the messages alone build. It sends exactly what it counts, and with exact
         messages it is DFedAvgM. It is the default because the paper's own reading below never
         averages the clients' disagreement away.
       * ``"differences-only"``: client i sends :math:`\mathcal Q(z^t(i) - x^t(i))` and
         :math:`x^{t+1}(i) = x^t(i) + \sum_l w_{il}\, \mathcal Q(z^t(l) - x^t(l))`: eq. (7) as read from the
         paper's words ("quantizes the difference of parameters"). Sendable, but with exact
         messages it is :math:`x^{t+1} = W z^t + (I - W) x^t`: the clients' disagreement is carried over,
         never averaged away (DFedAvgM only where the clients agree: round 0, the complete graph).
       * ``"exact-neighbour-models"``: :math:`x^{t+1} = W(x^t + \mathcal Q(z^t - x^t))`, DFedAvgM when
         :math:`\mathcal Q` is the identity; but client i needs every neighbour's exact :math:`x^t(l)`,
         which no message carried. The bits it counts are not what it would have to send.

    *Reconstructed.* §3.2 describes neither CHOCO's public copies nor exact formulas; the last two readings are
    rebuilt from its words, and :func:`~dfl_core.operators.quantize` says how the quantizer is. Stochastic rounding
    (``quant_stochastic``) draws from the round's ``"quantize"`` stream. One gossip step a round.
    """
    p, x = r.params, s.x
    z = r.local_train(x)  # (4): K heavy-ball steps
    if p.quant_mixing == "public-copies":
        return ClientModels(r.gossip(z))  # compressed gossip of z
    gen = r.generator("quantize") if p.quant_stochastic else None
    q = quantize(z - x, **p.quantizer, generator=gen)  # (6): a message per row
    bits = message_bits(x.shape[1], p.quant_bits)
    if p.quant_mixing == "exact-neighbour-models":  # W (x + Q(z − x)): DFedAvgM when Q = id
        return ClientModels(r.gossip(x + q, bits_per_message=bits))
    return ClientModels(x + r.gossip(q, bits_per_message=bits))  # (7)


# --------------------------------------------------------------- hyperparameters
@params
class DPSGDParams(GossipParams):
    """D-PSGD: one SGD step per round."""

    local_steps: int = 1


@params
class DFedAvgMParams(HeavyBallParams, GossipParams):
    """DFedAvgM: heavy-ball momentum θ = 0.9 (DFedSAM App. B.3)."""


@params
class QuantizedDFedAvgMParams(DFedAvgMParams):
    """Quantized DFedAvgM: b = 16 bits, the step s chosen per message, gossip that sends what it counts."""

    quant_bits: int = 16
    quant_mixing: str = setting(
        "public-copies",
        "dfedavgm-q's gossip: 'public-copies' (CHOCO: sends 𝒬(z − x̂)), "
        "'differences-only' x + W·𝒬(z − x) (eq. (7) as read here; the clients' "
        "disagreement is never averaged), or 'exact-neighbour-models' "
        "W·(x + 𝒬(z − x)) (needs the neighbours' exact x: cannot be sent as counted)",
        OneOf(QUANT_MIXINGS),
    )

    @property
    def uses_public_copies(self) -> bool:
        return self.quant_bits is not None and self.quant_mixing == "public-copies"

    @property
    def transmission_notes(self) -> tuple[str, ...]:
        """dfedavgm-q's reading that cannot be sent as counted says so (:attr:`LocalParams.transmission_notes`)."""
        if self.quant_mixing not in UNTRANSMITTABLE_MIXINGS:
            return ()
        return (
            f"quant_mixing={self.quant_mixing!r} cannot be sent as counted: client i mixes its "
            f"neighbours' x^t(l) + Q(z^t(l) - x^t(l)), which needs their exact x^t(l), but only the "
            f"{self.quant_bits}-bit Q(z^t(l) - x^t(l)) is counted. For compressed gossip that sends what "
            f"it counts use quant_mixing='public-copies' (the default)",
        )


@params
class DFedSAMParams(SAMParams, GossipParams):
    """DFedSAM: ρ = 0.01 (Shi et al. 2023, App. B.3); a ring, Q = 1, K = 5 steps (the engine's defaults)."""


@params
class DFedSAMMGSParams(DFedSAMParams):
    """DFedSAM-MGS: Q = 4 gossip steps per round."""

    gossip_steps: int = 4


DPSGD = Algorithm(
    "dpsgd",
    "D-PSGD: one local SGD step, then gossip (Lian et al. 2017)",
    DPSGDParams,
    sgd_rule,
    dpsgd_round,
    ClientModels.init,
    fixed={"local_steps": 1},
    distributable=True,
)
DFEDAVG = Algorithm(
    "dfedavg",
    "DFedAvg: K local SGD steps, then gossip (Sun et al. 2022)",
    GossipParams,
    sgd_rule,
    local_steps_then_gossip,
    ClientModels.init,
    distributable=True,
)
DFEDAVGM = Algorithm(
    "dfedavgm",
    "DFedAvgM: K local heavy-ball SGD steps, then gossip (Sun et al. 2022)",
    DFedAvgMParams,
    heavy_ball_rule,
    local_steps_then_gossip,
    ClientModels.init,
    distributable=True,
)
DFEDAVGM_Q = Algorithm(
    "dfedavgm-q",
    "Quantized DFedAvgM: K heavy-ball steps, then gossip of b-bit messages (Sun et al. 2022, §3.2; reconstructed; "
    "default gossip: CHOCO's public copies, see quant_mixing)",
    QuantizedDFedAvgMParams,
    heavy_ball_rule,
    quantized_dfedavgm_round,
    ClientModels.init,
    fixed={"gossip_steps": 1},
    distributable=True,
)
DFEDSAM = Algorithm(
    "dfedsam",
    "DFedSAM: K local SAM steps, then one gossip step (Shi et al. 2023)",
    DFedSAMParams,
    sam_rule,
    local_steps_then_gossip,
    ClientModels.init,
    distributable=True,
)
DFEDSAM_MGS = Algorithm(
    "dfedsam-mgs",
    "DFedSAM-MGS: DFedSAM with Q gossip steps per round (Shi et al. 2023)",
    DFedSAMMGSParams,
    sam_rule,
    local_steps_then_gossip,
    ClientModels.init,
    distributable=True,
)
