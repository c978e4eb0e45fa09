r"""What an algorithm is, and the narrow set of tools it may use.

An algorithm is a small, explicit object, :class:`Algorithm`:

* ``params``: a frozen dataclass of the hyperparameters it reads, whose
  defaults are its paper's settings (so what ``fedgf`` takes, and its
  defaults, stand in one place: ``FedGFParams``);
* ``local_rule(cfg, state) -> LocalRule``: the rule its K local steps follow,
  *declared*, e.g. DFedSAM's ``chain(sharpness_aware(cfg), sgd(cfg.weight_decay, cfg.momentum))``
  (:mod:`dfl_core.local`); DFedSAM differs from DFedAvg in this rule, nothing else;
* ``init(x0, r) -> state``: its state before round 0, a NamedTuple of tensors;
  the checkpoint of a run is this state plus the round number and counters;
* ``round(state, r) -> state``: one round, written like the paper's Algorithm box.

``r`` is :class:`RoundTools`, what the engine (:class:`dfl_core.engine.Simulation`)
or the distributed backend (:mod:`dfl_core.distributed`) lends for round t:
local training, gossip, client sampling, gradients over a client's data, the
round's random generators, and a place to record per-round quantities.
Nothing else of the engine is visible to an algorithm.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Protocol

from torch import Tensor

from ..local import LocalRule, chain, sgd, sharpness_aware

if TYPE_CHECKING:
    import torch

    from ..config import Config
    from ..stacked import StackedModel
    from ..topology import MixingMatrix

__all__ = ["Algorithm", "RoundTools", "REQUIRED", "ClientModels", "GlobalModel",
           "DecentralizedParams", "GossipParams", "SampledParams", "CentralizedParams", "SAMParams", "sgd_rule", "sam_rule"]

#: Marks a hyperparameter an algorithm needs but has no default for (the papers give none).
REQUIRED = "<required>"


class RoundTools(Protocol):
    """What an algorithm may use in round t (the engine's and the distributed backend's tools)."""

    config: Config          # the resolved config: the hyperparameters (r.config.rho, r.config.server_lr, …)
    t: int                  # rounds completed before this one
    lr: float               # η_t = η · decay^t
    num_clients: int        # m
    model: StackedModel     # the parameter layout (d, names, shapes, offsets of the layers in a row)
    input_shape: tuple      # the shape of one input sample

    def local_train(self, x: Tensor, clients: Tensor | None = None, *, rule: LocalRule | None = None,
                    gradient: Callable | None = None) -> Tensor:
        """K local steps from ``x`` (one row per client in ``clients``, default all) with the declared
        local rule (or ``rule``); ``gradient`` replaces the cross-entropy gradient (FedRobust)."""

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        """Each client's gradient over its whole train split at ``x`` (one row per client in ``clients``)."""

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        """Q gossip steps with this round's mixing matrices, :math:`W_t^Q x` (messages of
        ``bits_per_message`` bits each; default d·bits_per_param)."""

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
class Algorithm:
    """One algorithm: its hyperparameters, its declared local rule, its state and its round.

    ``kind`` is ``"decentralized"`` (the state holds every client's model,
    ``state.x`` of shape ``(m, d)``) or ``"centralized"`` (a server's global
    model, ``state.w`` of shape ``(d,)``). ``fixed`` lists config fields that
    must take one value (D-PSGD's single local step). ``distributable``: its
    state is only ``x`` and its round uses only local training and gossip, so
    a rank of the distributed backend (:mod:`dfl_core.distributed`) can run it
    on its block of rows.
    """

    name: str
    summary: str
    params: type                                    # frozen dataclass: the hyperparameters and their defaults
    local_rule: Callable[[Any, Any], LocalRule]     # (resolved config, state at the round's start) -> rule
    round: Callable[[Any, RoundTools], Any]         # (state, tools) -> state
    init: Callable[[Tensor, RoundTools], Any]       # (x0 (m, d), tools) -> state before round 0
    kind: str = "decentralized"
    fixed: Mapping[str, object] = field(default_factory=dict)
    distributable: bool = False

    @property
    def defaults(self) -> dict[str, object]:
        """The hyperparameters this algorithm reads, with their defaults (``params``' fields)."""
        return {f.name: f.default for f in fields(self.params)}

    def client_models(self, state, num_clients: int) -> Tensor:
        """Every client's model, ``(m, d)`` (the global model repeated, for centralized FL)."""
        return state.x if self.kind == "decentralized" else state.w.expand(num_clients, -1)


# ------------------------------------------------------------------ common states
class ClientModels(NamedTuple):
    """Decentralized FL: row i is client i's model :math:`x^t(i)`."""

    x: Tensor                                       # (m, d)

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "ClientModels":
        return cls(x0)


class GlobalModel(NamedTuple):
    """Centralized FL: the server's model :math:`w^t`."""

    w: Tensor                                       # (d,)

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "GlobalModel":
        return cls(x0[0].clone())


# ------------------------------------------------------ hyperparameter families
@dataclass(frozen=True)
class DecentralizedParams:
    """The decentralized family (DFedSAM App. B.3): a ring, one gossip step per round, K = 5."""

    topology: str = "ring"
    gossip_steps: int = 1                           # Q
    local_steps: int = 5                            # K


@dataclass(frozen=True)
class GossipParams(DecentralizedParams):
    r"""… whose rounds gossip with ``r.gossip``, which can send compressed messages (public copies, CHOCO-Gossip).

    ``quant_bits`` None (the default) gossips exact floats; b bits make every gossip step send
    :math:`Q(x_i - \hat x_i)` instead, b-bit integers and one scale (:mod:`dfl_core.gossip`, Koloskova et al. 2019).
    """

    quant_bits: int | None = None                   # b; None: exact (32-bit float) messages
    quant_step: float | None = None                 # s; None: max|v|/(2^(b-1)-1) per message
    quant_rounding: str = "nearest"                 # or "floor" (the two readings of DFedAvgM §3.2)
    quant_stochastic: bool = False                  # unbiased stochastic rounding instead
    consensus_step: float = 1.0                     # γ, the step toward the neighbours' public copies


@dataclass(frozen=True)
class SampledParams:
    """Centralized FL with client sampling: K = 5 local steps, 10% of the clients per round."""

    local_steps: int = 5
    client_fraction: float = 0.1
    clients_per_round: int | None = None            # a count instead of a fraction


@dataclass(frozen=True)
class CentralizedParams(SampledParams):
    """… with a server learning rate η_g (1: the server takes the clients' average)."""

    server_lr: float = 1.0


@dataclass(frozen=True)
class SAMParams:
    """SAM's radius and variant (DFedSAM App. B.3: ρ = 0.01; ASAM, Kwon et al. 2021: η = 0.2)."""

    rho: float = 0.01
    sam_variant: str = "sam"
    asam_eta: float = 0.2
    asam_scale_all: bool = True                     # the paper's ASAM; false: only "weight" tensors (the code)


# -------------------------------------------------------------- common local rules
def sgd_rule(cfg: Config, state=None) -> LocalRule:
    """K steps of SGD (with the config's weight decay and heavy-ball momentum, if any)."""
    return sgd(cfg.weight_decay, cfg.momentum)


def sam_rule(cfg: Config, state=None) -> LocalRule:
    """K steps of SAM (or ASAM): the gradient at the perturbed point, then SGD's descent."""
    return chain(sharpness_aware(cfg), sgd(cfg.weight_decay, cfg.momentum))
