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
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

from torch import Tensor

if TYPE_CHECKING:
    import torch

    from ..config import Config
    from ..stacked import StackedModel

__all__ = ["Algorithm", "ALGORITHMS", "RoundTools", "REQUIRED", "MOFEDSAM_VARIANTS", "FEDSMOO_VARIANTS",
           "SCAFFOLD_OPTIONS"]


class RoundTools(Protocol):
    """What the engine (:class:`dfl_core.engine.Simulation`) provides to an algorithm for round t."""

    config: "Config"        # the resolved config (hyperparameters such as server_lr)
    t: int                  # rounds completed before this one
    lr: float               # η_t
    server: dict            # a centralized algorithm's state, kept across rounds
    default_head: tuple     # the config's gradient-forming local pieces (SAM or ASAM, or none)
    model: "StackedModel"   # parameter layout (names, shapes, offsets of the layers in a row of x)

    def matrices(self, t: int) -> list:
        """The mixing matrices (:class:`~dfl_core.topology.MixingMatrix`) of round t, one per gossip step."""

    def local_train(self, x: Tensor, clients: Tensor | None = None, head=None) -> Tensor:
        """K steps of the local rule from ``x`` (one row per client in ``clients``); returns y^{t,K}."""

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        """Each client's gradient over its whole train split at ``x`` (one row per client in ``clients``)."""

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        """Q gossip steps with this round's mixing matrix: :math:`W_t^Q x` (messages of ``bits_per_message``
        bits each; default d·bits_per_param)."""

    def sample_clients(self) -> Tensor:
        """The clients taking part in this round (centralized FL)."""

    def client_weights(self, clients: Tensor) -> Tensor:
        """Aggregation weights n_i / Σ n_j, shape ``(n, 1)``."""

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        """Record model-sized messages sent (centralized FL), each of d·bits_per_param bits by default."""

    def round_generator(self, purpose: str) -> torch.Generator:
        """This round's random stream for one purpose (a function of seed, purpose and t only)."""


#: Marks a config field an algorithm needs but has no default for.
REQUIRED = "<required>"


@dataclass(frozen=True)
class Algorithm:
    """An algorithm's round function and the optional config fields it reads.

    ``defaults`` lists exactly the optional (``None`` by default) config fields
    this algorithm uses, with the value each takes when left unset (its paper's
    setting, or :data:`REQUIRED`). Setting any other optional field is an error,
    so nothing the user asked for is silently ignored.
    """

    name: str
    round: Callable[[Tensor, RoundTools], Tensor]
    summary: str
    kind: str = "decentralized"       # or "centralized": round(w (d,), r) -> w
    defaults: Mapping[str, object] = field(default_factory=dict)
    fixed: Mapping[str, object] = field(default_factory=dict)      # fields that must take this value

    @property
    def uses_sam(self) -> bool:
        return "rho" in self.defaults

    @property
    def uses_momentum(self) -> bool:
        return "momentum" in self.defaults


from .centralized import (FEDSMOO_VARIANTS, MOFEDSAM_VARIANTS, SCAFFOLD_OPTIONS, fedavg, fedavgm,  # noqa: E402
                          fedcm, feddyn, fedgamma, fedgf, fedprox, fedsmoo, mimelite, mofedsam, scaffold)
from .decentralized import dfedavg, dfedavgm_q, dfedsam, dpsgd  # noqa: E402
from .fedrobust import fedrobust  # noqa: E402
from .dispfl import dispfl  # noqa: E402

# Defaults shared by families (sources: DFedSAM App. B.3; FedGF slides; notes in the docs).
_DECENTRALIZED = {"topology": "ring", "gossip_steps": 1, "local_steps": 5}
_CENTRALIZED = {"local_steps": 5, "client_fraction": 0.1, "clients_per_round": None, "server_lr": 1.0}
_NO_SERVER_LR = {k: v for k, v in _CENTRALIZED.items() if k != "server_lr"}   # papers whose server has no η_g
_SAM = {"rho": 0.01, "sam_variant": "sam", "asam_eta": 0.2, "asam_scale_all": True}
# DisPFL's public code (rong-dai/DisPFL main_dispfl.py and scripts): density 0.5, anneal 0.5, 10 random neighbours
_DISPFL = {"topology": "random-as-coded", "gossip_steps": 1, "local_steps": 5, "dispfl_density": 0.5,
           "dispfl_anneal": 0.5, "dispfl_anneal_rounds": None, "dispfl_regrow": "gradient",
           "dispfl_mask_init": "independent"}
# quant_step None: the step is chosen per message (dfl_core.instruments.quantize.adaptive_step)
_QUANT = {"quant_bits": 16, "quant_step": None, "quant_stochastic": False, "quant_mixing": "difference"}

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("dpsgd", dpsgd, "D-PSGD: one local SGD step, then gossip (Lian et al. 2017)",
              defaults={**_DECENTRALIZED, "local_steps": 1}, fixed={"local_steps": 1}),
    Algorithm("dfedavg", dfedavg, "DFedAvg: K local SGD steps, then gossip (Sun et al. 2022)",
              defaults=_DECENTRALIZED),
    Algorithm("dfedavgm", dfedavg, "DFedAvgM: K local heavy-ball SGD steps, then gossip (Sun et al. 2022)",
              defaults={**_DECENTRALIZED, "momentum": 0.9}),
    Algorithm("dfedavgm-q", dfedavgm_q, "Quantized DFedAvgM: K heavy-ball steps, b-bit model differences "
              "gossiped (Sun et al. 2022, §3.2; reconstructed)",
              defaults={**_DECENTRALIZED, "momentum": 0.9, **_QUANT}, fixed={"gossip_steps": 1}),
    Algorithm("dfedsam", dfedsam, "DFedSAM: K local SAM steps, then one gossip step (Shi et al. 2023)",
              defaults={**_DECENTRALIZED, **_SAM}),
    Algorithm("dfedsam-mgs", dfedsam, "DFedSAM-MGS: DFedSAM with Q gossip steps per round (Shi et al. 2023)",
              defaults={**_DECENTRALIZED, **_SAM, "gossip_steps": 4}),
    Algorithm("dispfl", dispfl, "DisPFL: personalized sparse masks, masked aggregation and local steps, "
              "prune-and-regrow (Dai et al. 2022; reconstructed from the code)",
              defaults=_DISPFL, fixed={"gossip_steps": 1}),
    Algorithm("fedavg", fedavg, "FedAvg: sampled clients run K SGD steps, the server averages (McMahan et al. 2017)",
              kind="centralized", defaults=_CENTRALIZED),
    Algorithm("fedavgm", fedavgm, "FedAvgM: FedAvg with server momentum β (Hsu et al. 2019)",
              kind="centralized", defaults={**_CENTRALIZED, "server_momentum": 0.9}),
    Algorithm("fedprox", fedprox, "FedProx: local steps on F_i + μ/2 ||y - w||² (Li et al. 2020)",
              kind="centralized", defaults={**_CENTRALIZED, "prox_mu": 0.01}),
    Algorithm("scaffold", scaffold, "SCAFFOLD: local steps corrected by control variates c − c_i, option I or II "
              "(Karimireddy et al. 2020)", kind="centralized", defaults={**_CENTRALIZED, "scaffold_option": "II"}),
    Algorithm("feddyn", feddyn, "FedDyn: local steps on a dynamically regularized objective (Acar et al. 2021)",
              kind="centralized", defaults={**_NO_SERVER_LR, "dyn_alpha": 0.01}),
    Algorithm("fedcm", fedcm, "FedCM: local steps blend the gradient with the server's last update (Xu et al. 2021)",
              kind="centralized", defaults={**_CENTRALIZED, "fedcm_alpha": 0.1}),
    Algorithm("mimelite", mimelite, "MimeLite: local steps use the server's fixed momentum (Karimireddy et al. 2020)",
              kind="centralized", defaults={**_NO_SERVER_LR, "server_momentum": 0.9}),
    Algorithm("fedsam", fedavg, "FedSAM: FedAvg with local SAM steps (Qu et al. 2022)",
              kind="centralized", defaults={**_CENTRALIZED, **_SAM, "rho": 0.05}),
    Algorithm("fedasam", fedavg, "FedASAM: FedAvg with local adaptive SAM (Caldarola et al. 2022)",
              kind="centralized", defaults={**_CENTRALIZED, **_SAM, "sam_variant": "asam", "rho": 0.7}),
    Algorithm("mofedsam", mofedsam, "MoFedSAM: local SAM steps blended with the server's momentum (Qu et al. 2022)",
              kind="centralized", defaults={**_CENTRALIZED, **_SAM, "rho": 0.05,
                                            "mofedsam_alpha": 0.1, "mofedsam_variant": "paper"}),
    Algorithm("fedsmoo", fedsmoo, "FedSMOO: FedDyn with a globally corrected SAM perturbation (Sun et al. 2023; "
              "reconstructed)", kind="centralized",
              defaults={**_NO_SERVER_LR, "rho": 0.1, "dyn_alpha": 0.1, "fedsmoo_variant": "paper"}),
    Algorithm("fedgamma", fedgamma, "FedGAMMA: local SAM steps with SCAFFOLD control variates (Dai et al. 2023)",
              kind="centralized", defaults={**_CENTRALIZED, **_SAM, "rho": 0.05}),
    Algorithm("fedgf", fedgf, "FedGF: local SAM towards a global perturbation, adaptive c (Lee & Yoon 2024)",
              kind="centralized", defaults={**_CENTRALIZED, "rho": 0.05, "fedgf_threshold": REQUIRED,
                                            "fedgf_window": 30, "fedgf_reading": "points"}),
    # λ and η₂: not in the sources at hand (see dfl_core.algorithms.fedrobust); chosen so that on digits the
    # learnt ‖Λ_i − I‖_F is of the order of the evaluation radius 0.4 and 2λη₂ < 1 keeps the ascent stable.
    Algorithm("fedrobust", fedrobust, "FedRobust: local descent on w, ascent on each client's affine shift "
              "(Λ_i, δ_i) (Reisizadeh et al. 2020; reconstructed)",
              kind="centralized", defaults={**_CENTRALIZED, "robust_lambda": 1.0, "robust_ascent_lr": 0.1}),
]}
