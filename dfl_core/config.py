"""The experiment configuration: one frozen dataclass, validated in one place.

Fields left as ``None`` take the algorithm's default (its paper's setting),
listed in :data:`dfl_core.algorithms.ALGORITHMS`. :meth:`Config.resolved` fills
them in and validates everything, so every bad value is refused with a clear
message before any data is loaded or any training starts.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from .algorithms import ALGORITHMS, FEDSMOO_VARIANTS, MOFEDSAM_VARIANTS, REQUIRED, SCAFFOLD_OPTIONS
from .algorithms.dispfl import DISPFL_MASK_INIT, DISPFL_REGROW
from .local import FEDGF_READINGS
from .data import DATASETS, PARTITIONS
from .models import MODELS
from .topology import TOPOLOGIES

__all__ = ["Config", "ConfigError", "TOPOLOGY_OPTIONS", "ALGORITHM_FIELDS", "check_int"]

#: Optional fields (``None`` by default) that only some algorithms read; see
#: :class:`dfl_core.algorithms.Algorithm`.
ALGORITHM_FIELDS = (
    "topology", "gossip_steps", "local_steps", "momentum", "rho", "sam_variant", "asam_eta",
    "asam_scale_all", "client_fraction", "clients_per_round", "server_lr", "server_momentum", "prox_mu",
    "scaffold_option", "dyn_alpha", "fedcm_alpha", "fedsmoo_variant", "mofedsam_alpha",
    "mofedsam_variant", "fedgf_threshold", "fedgf_window", "fedgf_reading",
    "quant_bits", "quant_step", "quant_stochastic", "quant_mixing",
    "robust_lambda", "robust_ascent_lr",
    "dispfl_density", "dispfl_anneal", "dispfl_anneal_rounds", "dispfl_regrow", "dispfl_mask_init",
)


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names both."""


#: Which config field feeds which option of which topology.
TOPOLOGY_OPTIONS: dict[str, dict[str, str]] = {
    "erdos-renyi": {"p": "edge_probability"},
    "random-regular": {"k": "degree"},
    "random-symmetric": {"max_degree": "max_degree"},
    "random-as-coded": {"num_neighbors": "num_neighbors"},
}


def _help(text: str, default: Any = None, **kw) -> Any:
    return field(default=default, metadata={"help": text}, **kw)


@dataclass(frozen=True)
class Config:
    """One simulated run. Symbols follow the DFedSAM paper (m, T, K, Q, η, ρ)."""

    # --- what to run
    algorithm: str = _help("algorithm name", "dfedsam")
    dataset: str = _help("dataset name", "digits")
    model: str = _help("model name", "2nn")
    num_clients: int = _help("m, the number of clients", 20)
    rounds: int = _help("T, communication rounds", 30)
    seed: int = _help("seed of every random stream of the run", 0)
    # --- data and its partition over clients
    partition: str = _help("partition scheme", "dirichlet")
    alpha: float = _help("Dirichlet concentration α (0 means one class per client)", 0.3)
    dirichlet_method: str = _help("'prior' (equal sizes, DisPFL/FedDyn) or 'hsu' (per-class split)", "prior")
    shards_per_client: int = _help("classes per client for the 'shards' partition", 2)
    train_size: int | None = _help("use a stratified subset of this many training samples")
    test_size: int | None = _help("use a stratified subset of this many test samples")
    data_dir: str | None = _help("folder with the dataset files (default: system copy or download)")
    # --- communication (decentralized)
    topology: str | None = _help("communication graph / mixing scheme (decentralized; default ring)")
    gossip_steps: int | None = _help("Q, gossip steps per round (decentralized; default 1, dfedsam-mgs 4)")
    fresh_matrix_per_gossip_step: bool = _help(
        "time-varying topologies: draw a new W for every gossip step (DFedSAM App. B.4)", False)
    edge_probability: float = _help("edge probability p of 'erdos-renyi'", 0.2)
    degree: int = _help("degree k of 'random-regular'", 4)
    max_degree: int = _help("maximum degree of 'random-symmetric'", 10)
    num_neighbors: int = _help("neighbours each client draws in 'random-as-coded'", 10)
    # --- server (centralized)
    client_fraction: float | None = _help("fraction of clients sampled per round (centralized; default 0.1)")
    clients_per_round: int | None = _help("number of clients sampled per round (centralized; instead of a fraction)")
    server_lr: float | None = _help("η_g, server learning rate (centralized; default 1)")
    server_momentum: float | None = _help("β, server momentum of fedavgm and mimelite (default 0.9)")
    prox_mu: float | None = _help("μ, proximal coefficient of fedprox (default 0.01)")
    scaffold_option: str | None = _help("SCAFFOLD's refresh of c_i: 'I' (gradient at w over the local data) or "
                                        "'II' (from the local update; default)")
    dyn_alpha: float | None = _help("α of feddyn (default 0.01), λ of fedsmoo (default 0.1): dynamic "
                                    "regularization coefficient")
    # --- local training
    local_steps: int | None = _help("K, local steps per round (algorithm default: 5, dpsgd 1)")
    batch_size: int = _help("B, mini-batch size per client and step", 32)
    full_batch: bool = _help("each local step uses the client's whole train split (deterministic)", False)
    lr: float = _help("η, local learning rate", 0.1)
    lr_decay: float = _help("η_t = η·decay^t (DFedSAM App. B.3 uses 0.998)", 0.998)
    momentum: float | None = _help("θ, heavy-ball momentum (dfedavgm only; default 0.9)")
    reset_momentum: bool = _help("reset the momentum buffer at the start of every round", True)
    weight_decay: float = _help("L2 weight decay added to the local gradient", 0.0)
    rho: float | None = _help("ρ, SAM perturbation radius (SAM algorithms only)")
    sam_variant: str | None = _help("'sam' or 'asam' (adaptive SAM, Kwon et al. 2021) for SAM algorithms")
    asam_eta: float | None = _help("η of ASAM's T_w = |w| + η (default 0.2)")
    asam_scale_all: bool | None = _help("ASAM scales every parameter (paper); false: only weights (code)")
    # --- algorithm-specific
    mofedsam_alpha: float | None = _help("α of MoFedSAM: v = α·g_SAM + (1 − α)·Δ (default 0.1)")
    mofedsam_variant: str | None = _help("MoFedSAM server step: " + ", ".join(MOFEDSAM_VARIANTS))
    fedcm_alpha: float | None = _help("α of FedCM: v = α·g + (1 − α)·Δ (default 0.1)")
    fedsmoo_variant: str | None = _help("FedSMOO: " + ", ".join(FEDSMOO_VARIANTS) + " (see dfl_core.algorithms.fedsmoo)")
    fedgf_threshold: float | None = _help("T_D, FedGF's drift threshold (required: the papers give no value)")
    fedgf_window: int | None = _help("W, FedGF's window of rounds for c (default 30)")
    fedgf_reading: str | None = _help("FedGF eq. (12): 'points' (as printed and coded) or 'vectors'")
    quant_bits: int | None = _help("b, bits per coordinate of a quantized message (dfedavgm-q; default 16)")
    quant_step: float | None = _help("s, quantization step (dfedavgm-q; default none: max|v|/(2^(b-1)-1) "
                                     "per message)")
    quant_stochastic: bool | None = _help("unbiased stochastic rounding instead of nearest (dfedavgm-q; "
                                          "default false)")
    quant_mixing: str | None = _help("dfedavgm-q: 'difference' x + W·Q(z − x) (eq. (7) as read here) or "
                                     "'models' W·(x + Q(z − x)) (equals DFedAvgM without quantization)")
    robust_lambda: float | None = _help("λ, fedrobust's penalty λ‖Λ_i − I‖_F² + λ‖δ_i‖² on the clients' affine "
                                        "shifts (default 1)")
    robust_ascent_lr: float | None = _help("η₂, fedrobust's ascent step on (Λ_i, δ_i) (default 0.1; 0: FedAvg)")
    dispfl_density: float | None = _help("DisPFL: density of every client's mask, ERK over layers (default 0.5)")
    dispfl_anneal: float | None = _help("DisPFL: α of the fraction of each layer's mask updated per round, "
                                        "α/2·(1 + cos(πt/T)) (default 0.5)")
    dispfl_anneal_rounds: int | None = _help("DisPFL: T of that cosine (default: rounds)")
    dispfl_regrow: str | None = _help("DisPFL regrowth: 'gradient' (largest |gradient|, the code's default) or "
                                      "'random' (the published scripts)")
    dispfl_mask_init: str | None = _help("DisPFL initial masks: 'independent' per client (the published "
                                         "scripts) or 'shared' by all (the code's default)")
    # --- runtime
    same_init: bool = _help("all clients start from the same initial model", True)
    eval_every: int = _help("evaluate every this many rounds (and after the last)", 1)
    device: str = _help("'auto', 'cpu' or 'cuda'", "auto")
    dtype: str = _help("'float32' or 'float64'", "float32")
    client_chunk: int | None = _help("clients trained together (default: chosen for the device; never changes results)")
    forward_strategy: str = _help("'auto', 'batched', 'vmap' or 'loop' (see dfl_core.stacked)", "auto")
    bits_per_param: int = _help("bits per parameter on the wire, for byte counts", 32)

    # ------------------------------------------------------------------ helpers
    def replace(self, **changes: Any) -> "Config":
        """A copy with some fields changed (unknown names raise :class:`ConfigError`)."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown}; allowed: {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        return cls().replace(**d)

    def topology_options(self) -> dict[str, Any]:
        """The options of this config's topology, by the topology's own option names."""
        return {opt: getattr(self, f) for opt, f in TOPOLOGY_OPTIONS.get(self.topology, {}).items()}

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    @property
    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    # --------------------------------------------------------------- validation
    def resolved(self) -> "Config":
        """Fill algorithm defaults into ``None`` fields and validate every field."""
        _check_name("algorithm", self.algorithm, ALGORITHMS)
        algo = ALGORITHMS[self.algorithm]
        for name in ALGORITHM_FIELDS:
            value = getattr(self, name)
            off = name in ("momentum", "rho") and value == 0              # 0 = off, harmless
            if value is not None and name not in algo.defaults and not off:
                users = [a.name for a in ALGORITHMS.values() if name in a.defaults]
                raise ConfigError(f"{name}={value} is not used by algorithm {self.algorithm!r}; "
                                  f"algorithms that use it: {', '.join(users)}")
        if self.client_fraction is not None and self.clients_per_round is not None:
            raise ConfigError(f"give client_fraction ({self.client_fraction}) or clients_per_round "
                              f"({self.clients_per_round}), not both")
        filled = {k: v for k, v in algo.defaults.items() if getattr(self, k) is None}
        if self.clients_per_round is not None:
            filled.pop("client_fraction", None)
        missing = [k for k, v in filled.items() if v == REQUIRED]
        if missing:
            raise ConfigError(f"algorithm {self.algorithm!r} needs {', '.join(missing)}, which has no "
                              f"default (the papers give none); set it explicitly")
        cfg = dataclasses.replace(self, **filled)
        cfg = dataclasses.replace(cfg, momentum=cfg.momentum or 0.0, rho=cfg.rho or 0.0)
        for name, value in algo.fixed.items():
            if getattr(cfg, name) != value:
                raise ConfigError(f"{name}={getattr(cfg, name)} is not allowed for algorithm "
                                  f"{self.algorithm!r}, which requires {name}={value}")
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        _check_name("dataset", self.dataset, DATASETS)
        _check_name("model", self.model, MODELS)
        _check_name("partition", self.partition, PARTITIONS)
        if self.topology is not None:
            _check_name("topology", self.topology, TOPOLOGIES)
        if self.sam_variant is not None:
            _check_name("sam_variant", self.sam_variant, ("sam", "asam"))
        if self.mofedsam_variant is not None:
            _check_name("mofedsam_variant", self.mofedsam_variant, MOFEDSAM_VARIANTS)
        if self.scaffold_option is not None:
            _check_name("scaffold_option", self.scaffold_option, SCAFFOLD_OPTIONS)
        if self.fedsmoo_variant is not None:
            _check_name("fedsmoo_variant", self.fedsmoo_variant, FEDSMOO_VARIANTS)
        if self.quant_mixing is not None:
            _check_name("quant_mixing", self.quant_mixing, ("difference", "models"))
        if self.fedgf_reading is not None:
            _check_name("fedgf_reading", self.fedgf_reading, FEDGF_READINGS)
        if self.dispfl_regrow is not None:
            _check_name("dispfl_regrow", self.dispfl_regrow, DISPFL_REGROW)
        if self.dispfl_mask_init is not None:
            _check_name("dispfl_mask_init", self.dispfl_mask_init, DISPFL_MASK_INIT)
        _check_name("dirichlet_method", self.dirichlet_method, ("prior", "hsu"))
        _check_name("dtype", self.dtype, ("float32", "float64"))
        _check_name("device", self.device, ("auto", "cpu", "cuda"))
        _check_name("forward_strategy", self.forward_strategy, ("auto", "batched", "vmap", "loop"))
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device='cuda' was asked for, but torch.cuda.is_available() is False; "
                              "use device='auto' or 'cpu'")
        check_int("num_clients", self.num_clients, 1)
        check_int("rounds", self.rounds, 0)
        check_int("seed", self.seed, 0)
        check_int("local_steps", self.local_steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_int("eval_every", self.eval_every, 1)
        check_int("shards_per_client", self.shards_per_client, 1)
        check_int("bits_per_param", self.bits_per_param, 1)
        for name in ("train_size", "test_size", "client_chunk", "gossip_steps", "fedgf_window",
                     "dispfl_anneal_rounds"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.quant_bits is not None:
            check_int("quant_bits", self.quant_bits, 2)
            if self.quant_bits > 32:
                raise ConfigError(f"quant_bits must be <= 32, got {self.quant_bits}")
        if self.clients_per_round is not None:
            check_int("clients_per_round", self.clients_per_round, 1)
            if self.clients_per_round > self.num_clients:
                raise ConfigError(f"clients_per_round={self.clients_per_round} exceeds "
                                  f"num_clients={self.num_clients}")
        optional_ranges = {
            "client_fraction": dict(low=0.0, high=1.0, low_open=True),
            "server_lr": dict(low=0.0, low_open=True),
            "server_momentum": dict(low=0.0, high=1.0, high_open=True),
            "prox_mu": dict(low=0.0),
            "asam_eta": dict(low=0.0),
            "mofedsam_alpha": dict(low=0.0, high=1.0),
            "fedcm_alpha": dict(low=0.0, high=1.0),
            "dyn_alpha": dict(low=0.0, low_open=True),
            "fedgf_threshold": dict(low=0.0),
            "quant_step": dict(low=0.0, low_open=True),
            "robust_lambda": dict(low=0.0),
            "robust_ascent_lr": dict(low=0.0),
            "dispfl_density": dict(low=0.0, high=1.0, low_open=True),
            "dispfl_anneal": dict(low=0.0, high=1.0),
        }
        for name, bounds in optional_ranges.items():
            if getattr(self, name) is not None:
                _check_float(name, getattr(self, name), **bounds)
        _check_float("alpha", self.alpha, low=0.0)
        _check_float("lr", self.lr, low=0.0, low_open=True)
        _check_float("lr_decay", self.lr_decay, low=0.0, high=1.0, low_open=True)
        _check_float("momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        _check_float("rho", self.rho, low=0.0)
        _check_float("weight_decay", self.weight_decay, low=0.0)
        _check_float("edge_probability", self.edge_probability, low=0.0, high=1.0, low_open=True)
        for flag in ("full_batch", "reset_momentum", "same_init", "fresh_matrix_per_gossip_step",
                     "asam_scale_all", "quant_stochastic"):
            if flag in ("asam_scale_all", "quant_stochastic") and getattr(self, flag) is None:
                continue
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be true or false, got {getattr(self, flag)!r}")


def _check_name(what: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(map(str, allowed))}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")


def _check_float(name: str, value: Any, *, low: float, high: float = math.inf,
                 low_open: bool = False, high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    lo_bad = value <= low if low_open else value < low
    hi_bad = value >= high if high_open else value > high
    if lo_bad or hi_bad:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open or high == math.inf else ']'}"
        raise ConfigError(f"{name} must be in {interval}, got {value}")
