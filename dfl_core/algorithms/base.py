r"""What an algorithm is, and the narrow set of tools it may use.

An algorithm is a small, explicit object, :class:`Algorithm`:

* ``params``: a :func:`~dfl_core.settings.params` dataclass of the hyperparameters it reads, whose
  defaults are its paper's settings (``FedGFParams``); each is declared once, on the class that
  introduces it (ρ on :class:`SAMRadius`, see :mod:`dfl_core.settings`);
* ``local_rule(p, state, run) -> LocalRule``: the rule its K local steps follow, *declared*, e.g. DFedSAM's
  ``chain(sharpness_aware(p), sgd(run.weight_decay))`` (:mod:`dfl_core.local`); DFedSAM differs from
  DFedAvg in this rule, nothing else;
* ``init(x0, r) -> state``: its state before round 0, a NamedTuple of tensors (what a checkpoint keeps);
* ``round(state, r) -> state``: one round, written like the paper's Algorithm box.

``r`` is :class:`RoundTools`, all the engine (or the distributed backend) lends an algorithm in round t.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, NamedTuple, Protocol, TypeVar

from torch import Tensor

from ..errors import ConfigError
from ..local import SAM_VARIANTS, LocalRule, chain, sgd, sharpness_aware
from ..operators import ROUNDINGS
from ..settings import REQUIRED, Flag, Integer, Number, OneOf, params, setting
from ..topology import TOPOLOGIES

if TYPE_CHECKING:
    import torch

    from ..stacked import StackedModel
    from ..topology import MixingMatrix

__all__ = [
    "Algorithm",
    "RoundTools",
    "RunSettings",
    "REQUIRED",
    "ClientModels",
    "GlobalModel",
    "LocalParams",
    "DecentralizedParams",
    "GossipParams",
    "SampledParams",
    "CentralizedParams",
    "SAMRadius",
    "SAMParams",
    "HeavyBallParams",
    "sgd_rule",
    "heavy_ball_rule",
    "sam_rule",
]

State = TypeVar("State")
P = TypeVar("P")


class RunSettings(Protocol):
    """The run's own settings an algorithm may read (a :class:`dfl_core.config.Config`; its hyperparameters are
    the algorithm's ``params``)."""

    num_clients: int  # m
    rounds: int  # T
    seed: int
    weight_decay: float  # L2 weight decay of the local steps
    bits_per_param: int  # bits of one parameter on the wire


class RoundTools(Protocol[P]):
    """What an algorithm may use in round t (the engine's and the distributed backend's tools)."""

    params: P  # the algorithm's hyperparameters (r.params.server_lr, …)
    config: RunSettings  # the run's own settings (r.config.num_clients, …)
    t: int  # rounds completed before this one
    lr: float  # η_t = η · decay^t
    num_clients: int  # m
    model: StackedModel  # the parameter layout (d, names, shapes, offsets of the layers in a row)
    input_shape: tuple  # the shape of one input sample

    def local_train(
        self,
        x: Tensor,
        clients: Tensor | None = None,
        *,
        rule: LocalRule | None = None,
        gradient: Callable | None = None,
    ) -> Tensor:
        """K local steps from ``x`` (one row per client in ``clients``, default all) with the declared
        local rule (or ``rule``); ``gradient`` replaces the cross-entropy gradient (FedRobust)."""

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        """Each client's gradient over its whole train split at ``x`` (one row per client in ``clients``)."""

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        r"""Q gossip steps with this round's mixing matrices: :math:`W_t^Q x`; with ``quant_bits`` set (and no
        ``bits_per_message``), Q steps of compressed gossip against public copies, :math:`x + \gamma (W - I)\hat x`
        (CHOCO-Gossip, :meth:`~dfl_core.engine.SimulationTools.compressed_gossip`); ``bits_per_message`` given:
        exact mixing of an already quantized x, each message counted at that many bits (default d·bits_per_param)."""

    def matrices(self) -> list[MixingMatrix]:
        """This round's mixing matrices, one per gossip step."""

    def sample_clients(self) -> Tensor:
        """The clients taking part in this round (centralized FL), sorted."""

    def client_weights(self, clients: Tensor) -> Tensor:
        """Aggregation weights n_i / Σ n_j, shape ``(n, 1)``."""

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        """Record model-sized messages sent (centralized FL), each of d·bits_per_param bits by default."""

    def generator(self, purpose: str) -> torch.Generator:
        """This round's random stream for one purpose (a function of seed, purpose and t only)."""

    def record(self, **values: float) -> None:
        """Per-round quantities of the algorithm (e.g. FedGF's c), reported with the next evaluation."""


@dataclass(frozen=True)
class Algorithm(Generic[State, P]):
    """One algorithm: its hyperparameters, its declared local rule, its state and its round.

    ``kind`` is ``"decentralized"`` (the state holds every client's model, ``state.x`` of shape ``(m, d)``) or
    ``"centralized"`` (a server's global model, ``state.w`` of shape ``(d,)``). ``fixed`` lists hyperparameters that
    must take one value (D-PSGD's single local step). ``distributable``: its state is only ``x`` and its round uses
    only local training and gossip, so a rank of the distributed backend (:mod:`dfl_core.distributed`) can run it on
    its block of rows.
    """

    name: str
    summary: str
    params: type[P]  # its hyperparameters: a @params dataclass
    local_rule: Callable[[P, State, RunSettings], LocalRule]  # (params, state at the round's start, run) -> rule
    round: Callable[[State, RoundTools[P]], State]  # (state, tools) -> state
    init: Callable[[Tensor, RoundTools[P]], State]  # (x0 (m, d), tools) -> state before round 0
    kind: str = "decentralized"
    fixed: Mapping[str, object] = field(default_factory=dict)
    distributable: bool = False

    @property
    def defaults(self) -> dict[str, object]:
        """The hyperparameters this algorithm reads, with their defaults (``params``' fields)."""
        return {f.name: f.default for f in fields(self.params)}

    def client_models(self, state: State, num_clients: int) -> Tensor:
        """Every client's model, ``(m, d)`` (the global model repeated, for centralized FL)."""
        return state.x if self.kind == "decentralized" else state.w.expand(num_clients, -1)


# ------------------------------------------------------------------ common states
class ClientModels(NamedTuple):
    """Decentralized FL: row i is client i's model :math:`x^t(i)`."""

    x: Tensor  # (m, d)

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "ClientModels":
        return cls(x0)


class GlobalModel(NamedTuple):
    """Centralized FL: the server's model :math:`w^t`."""

    w: Tensor  # (d,)

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "GlobalModel":
        return cls(x0[0].clone())


# ------------------------------------------------------ hyperparameter families (subclasses change defaults only)
@params
class LocalParams:
    """Every algorithm's local work: K = 5 local steps a round (the engine's default; DFedSAM App. B.3's
    5 are epochs, ``local_epochs=5``)."""

    local_steps: int = setting(5, "K, local steps per round", Integer(1))

    @property
    def transmission_notes(self) -> tuple[str, ...]:
        """What about this run's messages could not be sent as counted: nothing, unless an algorithm's params
        say otherwise (dfedavgm-q's other readings of its gossip); a run prints these and keeps them."""
        return ()


@params
class GraphParams:
    """A communication graph and Q gossip steps a round: a ring, Q = 1 (the engine's defaults; DFedSAM's main
    runs use a random graph of at most 10 neighbours, App. B.4, and its Table 2 a ring among others)."""

    topology: str = setting("ring", "communication graph / mixing scheme (decentralized)", OneOf(TOPOLOGIES))
    gossip_steps: int = setting(1, "Q, gossip steps per round (decentralized)", Integer(1))


@params
class DecentralizedParams(LocalParams, GraphParams):
    """The decentralized family: a ring, one gossip step per round, K = 5 (the engine's defaults)."""


#: The deterministic roundings (``quant_stochastic`` selects unbiased stochastic rounding instead).
QUANT_ROUNDINGS = tuple(r for r in ROUNDINGS if r != "stochastic")


@params
class GossipParams(DecentralizedParams):
    r"""… whose rounds gossip with ``r.gossip``, which can send compressed messages (public copies, CHOCO-Gossip).

    ``quant_bits`` None (the default) gossips exact floats; b bits make every gossip step send
    :math:`Q(x_i - \hat x_i)` instead, b-bit integers and one scale (:mod:`dfl_core.gossip`, Koloskova et al. 2019).
    """

    quant_bits: int | None = setting(
        None,
        "b, bits per coordinate of a gossip message (decentralized; none: 32-bit floats). "
        "dfedsam, dfedavg, …: compressed gossip with public copies (CHOCO)",
        Integer(2, 32),
    )
    quant_step: float | None = setting(
        None, "h, quantization step (none: max|v|/(2^(b-1)-1) per message)", Number(0.0, low_open=True)
    )
    quant_rounding: str = setting(
        "nearest",
        "rounding to a level: 'nearest' (error <= h/2) or 'floor' (the k with kh <= v < (k+1)h); DFedAvgM §3.2 "
        "does not settle which, so both are offered (reconstructed: see dfl_core.operators)",
        OneOf(QUANT_ROUNDINGS),
    )
    quant_stochastic: bool = setting(False, "unbiased stochastic rounding instead", Flag())
    consensus_step: float = setting(
        1.0,
        "γ, compressed gossip's step toward the neighbours' public copies: x + γ(W − I)x̂ (CHOCO-Gossip)",
        Number(0.0, 1.0, low_open=True),
    )

    #: The quantizer's settings, which mean nothing without quant_bits.
    QUANTIZER_FIELDS = ("quant_step", "quant_rounding", "quant_stochastic", "consensus_step")

    def check(self) -> None:
        if self.quant_bits is None:
            idle = [
                f"{f.name}={getattr(self, f.name)!r}"
                for f in fields(self)
                if f.name in self.QUANTIZER_FIELDS and getattr(self, f.name) != f.default
            ]
            if idle:
                raise ConfigError(
                    f"{', '.join(idle)} set, but quant_bits is not: messages are exact 32-bit "
                    f"floats; give quant_bits (2..32) to compress them"
                )
        if self.quant_stochastic and self.quant_rounding == "floor":
            raise ConfigError(
                "quant_stochastic=True rounds at random (up or down, unbiased); it cannot be combined "
                "with quant_rounding='floor'"
            )
        if self.uses_public_copies and TOPOLOGIES[self.topology].time_varying:
            raise ConfigError(
                f"quant_bits={self.quant_bits} with the time-varying topology {self.topology!r}: "
                f"compressed gossip keeps public copies of the neighbours' models, which a client "
                f"meeting a new neighbour does not hold; use a static topology "
                f"({', '.join(k for k, v in TOPOLOGIES.items() if not v.time_varying)})"
            )

    @property
    def uses_public_copies(self) -> bool:
        """Whether gossip sends compressed messages against public copies x̂."""
        return self.quant_bits is not None

    @property
    def quantizer(self) -> dict[str, Any]:
        """The b-bit quantizer's arguments, for :func:`dfl_core.operators.quantize` and
        :func:`~dfl_core.operators.encode`: ``bits``, ``step`` and ``rounding`` (``"stochastic"`` when
        ``quant_stochastic``, else ``quant_rounding``)."""
        return dict(
            bits=self.quant_bits,
            step=self.quant_step,
            rounding="stochastic" if self.quant_stochastic else self.quant_rounding,
        )


@params
class SampledParams(LocalParams):
    """Centralized FL with client sampling: K = 5 local steps, 10% of the clients per round."""

    client_fraction: float | None = setting(
        0.1, "C, fraction of clients sampled per round (centralized)", Number(0.0, 1.0, low_open=True)
    )
    clients_per_round: int | None = setting(
        None, "|S_t|, number of clients sampled per round (centralized; instead of a fraction)", Integer(1)
    )


@params
class CentralizedParams(SampledParams):
    """… with a server learning rate η_g (1: the server takes the clients' average)."""

    server_lr: float = setting(1.0, "η_g, server learning rate (centralized)", Number(0.0, low_open=True))


@params
class SAMRadius:
    """SAM's radius ρ (DFedSAM App. B.3: ρ = 0.01), shared by every sharpness-aware algorithm."""

    rho: float = setting(0.01, "ρ, SAM perturbation radius", Number(0.0), step_size=True)


@params
class SAMParams(SAMRadius):
    """SAM's radius and variant (ASAM, Kwon et al. 2021: η = 0.2)."""

    sam_variant: str = setting("sam", "'sam' or 'asam' (adaptive SAM, Kwon et al. 2021)", OneOf(SAM_VARIANTS))
    asam_eta: float = setting(
        0.2, "ASAM's offset: it scales each parameter w by |w| + asam_eta (the ASAM paper's η)", Number(0.0)
    )
    asam_scale_all: bool = setting(True, "ASAM scales every parameter (paper); false: only weights (code)", Flag())


@params
class HeavyBallParams:
    """Heavy-ball momentum θ of the local steps (DFedAvgM: θ = 0.9, DFedSAM App. B.3)."""

    momentum: float = setting(0.9, "θ, heavy-ball momentum of the local steps", Number(0.0, 1.0, high_open=True))


# -------------------------------------------------------------- common local rules
def sgd_rule(p: LocalParams, s: Any, run: RunSettings) -> LocalRule:
    """K steps of SGD (with the run's weight decay)."""
    return sgd(run.weight_decay)


def heavy_ball_rule(p: HeavyBallParams, s: Any, run: RunSettings) -> LocalRule:
    """K steps of heavy-ball SGD (momentum θ = ``p.momentum``)."""
    return sgd(run.weight_decay, p.momentum)


def sam_rule(p: SAMParams, s: Any, run: RunSettings) -> LocalRule:
    """K steps of SAM (or ASAM): the gradient at the perturbed point, then SGD's descent."""
    return chain(sharpness_aware(p), sgd(run.weight_decay))
