"""The experiment configuration: one frozen dataclass, each field with its help and its allowed values.

Fields marked per-algorithm are ``None`` by default and take the running
algorithm's default, declared with the algorithm (its ``params``, e.g.
``dfl_core.algorithms.fedgf.FedGFParams``); setting one the algorithm does not
read is an error, so nothing the user asks for is silently ignored.
:meth:`Config.resolved` fills them in and validates every field, so every bad
value is refused with a clear message before any data is loaded or any
training starts. The CLI (``python -m dfl_core run --help``) is generated from
these fields.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import torch

from .algorithms import (ALGORITHMS, DISPFL_MASK_INIT, DISPFL_REGROW, FEDGF_C_READINGS, FEDSMOO_VARIANTS,
                         MOFEDSAM_VARIANTS, QUANT_MIXINGS, QUANT_ROUNDINGS, REQUIRED, SCAFFOLD_OPTIONS,
                         UNTRANSMITTABLE_MIXINGS)
from .data import DATASETS, DIRICHLET_METHODS, PARTITIONS
from .errors import ConfigError
from .local import FEDGF_READINGS, SAM_VARIANTS
from .models import MODELS
from .topology import TOPOLOGIES

__all__ = ["Config", "ConfigError", "ALGORITHM_FIELDS", "check_int", "OneOf", "Integer", "Number", "Flag"]


# ---------------------------------------------------------------- allowed values
@dataclass(frozen=True)
class OneOf:
    """A name from ``choices`` (a tuple, or a registry dict whose keys are the names)."""

    choices: Any

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise ConfigError(f"unknown {name} {value!r}; allowed: {', '.join(map(str, self.choices))}")


@dataclass(frozen=True)
class Integer:
    """An integer ≥ ``minimum`` (and ≤ ``maximum``, if given)."""

    minimum: int
    maximum: int | None = None

    def __call__(self, name: str, value: Any) -> None:
        check_int(name, value, self.minimum)
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{name} must be <= {self.maximum}, got {value}")


@dataclass(frozen=True)
class Number:
    """A finite number in an interval; ``low_open``/``high_open`` exclude the ends."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if (value <= self.low if self.low_open else value < self.low) or \
                (value >= self.high if self.high_open else value > self.high):
            interval = (f"{'(' if self.low_open else '['}{self.low}, {self.high}"
                        f"{')' if self.high_open or self.high == math.inf else ']'}")
            raise ConfigError(f"{name} must be in {interval}, got {value}")


@dataclass(frozen=True)
class Flag:
    """True or false."""

    def __call__(self, name: str, value: Any) -> None:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")


def _run(default: Any, help: str, allowed=None) -> Any:
    """A field of the run (not of one algorithm), with its help text and allowed values."""
    return field(default=default, metadata={"help": help, "allowed": allowed, "per_algorithm": False})


def _algo(help: str, allowed=None) -> Any:
    """A per-algorithm field: ``None`` means the algorithm's own default (see its ``params``)."""
    return field(default=None, metadata={"help": help, "allowed": allowed, "per_algorithm": True})


@dataclass(frozen=True)
class Config:
    """One simulated run. Symbols follow the DFedSAM paper (m, T, K, Q, η, ρ)."""

    # --- what to run
    algorithm: str = _run("dfedsam", "algorithm name", OneOf(ALGORITHMS))
    dataset: str = _run("digits", "dataset name", OneOf(DATASETS))
    model: str = _run("2nn", "model name", OneOf(MODELS))
    num_clients: int = _run(20, "m, the number of clients", Integer(1))
    rounds: int = _run(30, "T, communication rounds", Integer(0))
    seed: int = _run(0, "seed of every random stream of the run", Integer(0))
    # --- data and its partition over clients
    partition: str = _run("dirichlet", "partition scheme", OneOf(PARTITIONS))
    alpha: float = _run(0.3, "α, Dirichlet concentration of the label split (0 means one class per client)", Number(0.0))
    dirichlet_method: str = _run("prior", "'prior' (equal sizes, DisPFL/FedDyn) or 'hsu' (per-class split)",
                                 OneOf(DIRICHLET_METHODS))
    shards_per_client: int = _run(2, "classes per client for the 'shards' partition", Integer(1))
    train_size: int | None = _run(None, "use a stratified subset of this many training samples", Integer(1))
    test_size: int | None = _run(None, "use a stratified subset of this many test samples", Integer(1))
    data_dir: str | None = _run(None, "folder with the dataset files (default: system copy or download)")
    # --- communication (decentralized)
    topology: str | None = _algo("communication graph / mixing scheme (decentralized)", OneOf(TOPOLOGIES))
    gossip_steps: int | None = _algo("Q, gossip steps per round (decentralized)", Integer(1))
    fresh_matrix_per_gossip_step: bool = _run(
        False, "time-varying topologies: draw a new W for every gossip step (DFedSAM App. B.4)", Flag())
    edge_probability: float = _run(0.2, "edge probability of 'erdos-renyi'", Number(0.0, 1.0, low_open=True))
    # (the topology checks its own options: dfl_core.topology.TOPOLOGIES)
    degree: int = _run(4, "degree of every client in 'random-regular'")
    max_degree: int = _run(10, "maximum degree of 'random-symmetric'")
    num_neighbors: int = _run(10, "neighbours each client draws in 'random-as-coded'")
    # --- server (centralized)
    client_fraction: float | None = _algo("C, fraction of clients sampled per round (centralized)",
                                          Number(0.0, 1.0, low_open=True))
    clients_per_round: int | None = _algo("|S_t|, number of clients sampled per round (centralized; "
                                          "instead of a fraction)", Integer(1))
    server_lr: float | None = _algo("η_g, server learning rate (centralized)", Number(0.0, low_open=True))
    server_momentum: float | None = _algo("θ_g, server momentum of fedavgm and mimelite",
                                          Number(0.0, 1.0, high_open=True))
    prox_mu: float | None = _algo("μ, proximal coefficient of fedprox", Number(0.0))
    scaffold_option: str | None = _algo("SCAFFOLD's refresh of c_i: 'I' (gradient at w over the local data) "
                                        "or 'II' (from the local update)", OneOf(SCAFFOLD_OPTIONS))
    dyn_alpha: float | None = _algo("α_dyn, dynamic regularization coefficient of feddyn and fedsmoo",
                                    Number(0.0, low_open=True))
    # --- local training
    local_steps: int | None = _algo("K, local steps per round", Integer(1))
    local_epochs: float | None = _run(
        None, "E, local epochs per round, the papers' unit (instead of local_steps): K = E·⌈n_i/B⌉ steps (rounded, "
        "at least 1), n_i = train samples / m", Number(0.0, low_open=True))
    batch_size: int = _run(32, "B, mini-batch size per client and step", Integer(1))
    full_batch: bool = _run(False, "each local step uses the client's whole train split (deterministic)", Flag())
    lr: float = _run(0.1, "η, local learning rate", Number(0.0, low_open=True))
    lr_decay: float = _run(0.998, "decay of η per round: η_t = η·lr_decay^t (DFedSAM App. B.3 uses 0.998)", Number(0.0, 1.0, low_open=True))
    momentum: float | None = _algo("θ, heavy-ball momentum of the local steps", Number(0.0, 1.0, high_open=True))
    reset_momentum: bool = _run(True, "reset the momentum buffer at the start of every round", Flag())
    weight_decay: float = _run(0.0, "L2 weight decay added to the local gradient", Number(0.0))
    rho: float | None = _algo("ρ, SAM perturbation radius", Number(0.0))
    sam_variant: str | None = _algo("'sam' or 'asam' (adaptive SAM, Kwon et al. 2021)", OneOf(SAM_VARIANTS))
    asam_eta: float | None = _algo("ASAM's offset: it scales each parameter w by |w| + asam_eta (the ASAM paper's η)", Number(0.0))
    asam_scale_all: bool | None = _algo("ASAM scales every parameter (paper); false: only weights (code)", Flag())
    # --- algorithm-specific
    mofedsam_alpha: float | None = _algo("α_Mo, MoFedSAM's weight of the SAM gradient: α_Mo·g_SAM + (1 − α_Mo)·Δ", Number(0.0, 1.0))
    mofedsam_variant: str | None = _algo("MoFedSAM server step: " + ", ".join(MOFEDSAM_VARIANTS),
                                         OneOf(MOFEDSAM_VARIANTS))
    fedcm_alpha: float | None = _algo("α_CM, FedCM's weight of the gradient: α_CM·g + (1 − α_CM)·Δ", Number(0.0, 1.0))
    fedsmoo_variant: str | None = _algo("FedSMOO: " + ", ".join(FEDSMOO_VARIANTS)
                                        + " (see dfl_core.algorithms.controlled)", OneOf(FEDSMOO_VARIANTS))
    fedgf_threshold: float | None = _algo("T_D, FedGF's drift threshold (required: the papers give no value)",
                                          Number(0.0))
    fedgf_window: int | None = _algo("W_c, FedGF's window of rounds for c", Integer(1))
    fedgf_reading: str | None = _algo("FedGF eq. (12): 'points' (as printed and coded) or 'vectors'",
                                      OneOf(FEDGF_READINGS))
    fedgf_c_reading: str | None = _algo("FedGF eq. (16) in the first W_c rounds: 'window' (sum of the indicators "
                                        "over W_c, missing rounds count 0) or 'seen' (mean of the rounds seen, as "
                                        "the official code)", OneOf(FEDGF_C_READINGS))
    quant_bits: int | None = _algo("b, bits per coordinate of a gossip message (decentralized; none: 32-bit floats). "
                                   "dfedsam, dfedavg, …: compressed gossip with public copies (CHOCO)", Integer(2, 32))
    quant_step: float | None = _algo("h, quantization step (none: max|v|/(2^(b-1)-1) per message)",
                                     Number(0.0, low_open=True))
    quant_rounding: str | None = _algo("rounding to a level: 'nearest' or 'floor' (round down; the DFedAvgM "
                                       "seed's text copy lost the bracket that says which)", OneOf(QUANT_ROUNDINGS))
    quant_stochastic: bool | None = _algo("unbiased stochastic rounding instead", Flag())
    consensus_step: float | None = _algo("γ, compressed gossip's step toward the neighbours' public copies: "
                                         "x + γ(W − I)x̂ (CHOCO-Gossip)", Number(0.0, 1.0, low_open=True))
    quant_mixing: str | None = _algo("dfedavgm-q's gossip: 'public-copies' (CHOCO: sends 𝒬(z − x̂)), "
                                     "'differences-only' x + W·𝒬(z − x) (eq. (7) as read here; the clients' "
                                     "disagreement is never averaged), or 'exact-neighbour-models' "
                                     "W·(x + 𝒬(z − x)) (needs the neighbours' exact x: cannot be sent as counted)",
                                     OneOf(QUANT_MIXINGS))
    robust_lambda: float | None = _algo("γ_R, fedrobust's penalty γ_R·(‖Λ_i − I‖_F² + ‖δ_i‖²) on the clients' "
                                        "affine shifts", Number(0.0))
    robust_ascent_lr: float | None = _algo("η_R, fedrobust's ascent step on (Λ_i, δ_i) (0: FedAvg)", Number(0.0))
    dispfl_density: float | None = _algo("DisPFL: density of every client's mask, ERK over layers",
                                         Number(0.0, 1.0, low_open=True))
    dispfl_anneal: float | None = _algo("DisPFL: fraction of each layer's mask updated per round, annealed: "
                                        "dispfl_anneal/2·(1 + cos(πt/dispfl_anneal_rounds)) in round t", Number(0.0, 1.0))
    dispfl_anneal_rounds: int | None = _algo("DisPFL: the rounds over which that cosine falls to 0 (default: rounds)", Integer(1))
    dispfl_regrow: str | None = _algo("DisPFL regrowth: 'gradient' (largest |gradient|, the code's default) or "
                                      "'random' (the published scripts)", OneOf(DISPFL_REGROW))
    dispfl_mask_init: str | None = _algo("DisPFL initial masks: 'independent' per client (the published "
                                         "scripts) or 'shared' by all (the code's default)", OneOf(DISPFL_MASK_INIT))
    # --- runtime
    same_init: bool = _run(True, "all clients start from the same initial model", Flag())
    eval_every: int = _run(1, "evaluate every this many rounds (and after the last)", Integer(1))
    device: str = _run("auto", "'auto', 'cpu' or 'cuda'", OneOf(("auto", "cpu", "cuda")))
    dtype: str = _run("float32", "'float32' or 'float64'", OneOf(("float32", "float64")))
    client_chunk: int | None = _run(None, "clients trained together (default: chosen for the device; never "
                                    "changes results)", Integer(1))
    gossip_mode: str = _run("auto", "how W·x is computed: 'auto' (dense W: one product; sparse W: row sums on a CPU, "
                            "a CSR product on a GPU), 'dense', 'rows' or 'csr' (see dfl_core.gossip)",
                            OneOf(("auto", "dense", "rows", "csr")))
    forward_strategy: str = _run("auto", "'auto', 'mlp', 'batched', 'vmap' or 'loop' (see dfl_core.stacked)",
                                 OneOf(("auto", "mlp", "batched", "vmap", "loop")))
    bits_per_param: int = _run(32, "bits per parameter on the wire, for byte counts", Integer(1))

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
    def from_dict(cls, d: Mapping[str, Any]) -> "Config":
        """A config from :meth:`to_dict`'s form; values an earlier version wrote under another name are renamed."""
        d = dict(d)
        if d.get("quant_mixing") in FORMER_QUANT_MIXINGS:
            d["quant_mixing"] = FORMER_QUANT_MIXINGS[d["quant_mixing"]]
        return cls().replace(**d)

    @classmethod
    def upgraded(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        """A resolved config as an earlier version wrote it, as this version resolves it: the fields and
        defaults added since filled in (a checkpoint or results file of then still matches a run of now)."""
        return cls.from_dict(d).resolved().to_dict()

    @property
    def transmission_notes(self) -> tuple[str, ...]:
        """What about this run's messages could not be sent as counted (empty when everything can); a run
        prints these on stderr and keeps them with its results."""
        if self.quant_mixing not in UNTRANSMITTABLE_MIXINGS:
            return ()
        return (f"quant_mixing={self.quant_mixing!r} cannot be sent as counted: client i mixes its neighbours' "
                f"x^t(l) + Q(z^t(l) - x^t(l)), which needs their exact x^t(l), but only the {self.quant_bits}-bit "
                f"Q(z^t(l) - x^t(l)) is counted. For compressed gossip that sends what it counts use "
                f"quant_mixing='public-copies' (the default)",)

    @property
    def quantizer(self) -> dict[str, Any]:
        """The b-bit quantizer's arguments from this resolved config, for :func:`dfl_core.operators.quantize`
        and :func:`~dfl_core.operators.encode`: ``bits``, ``step``, ``rounding`` and ``stochastic``."""
        return dict(bits=self.quant_bits, step=self.quant_step, rounding=self.quant_rounding,
                    stochastic=self.quant_stochastic)

    @property
    def uses_public_copies(self) -> bool:
        """Whether gossip sends compressed messages against public copies x̂ (a resolved config's quant_bits,
        in every reading but dfedavgm-q's other two)."""
        return self.quant_bits is not None and self.quant_mixing in (None, "public-copies")

    def topology_options(self) -> dict[str, Any]:
        """The options of this config's topology, by the topology's own option names."""
        options = TOPOLOGIES[self.topology].options if self.topology in TOPOLOGIES else {}
        return {name: getattr(self, o.config_field) for name, o in options.items()}

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
        """Fill the algorithm's defaults into its ``None`` fields and validate every field."""
        OneOf(ALGORITHMS)("algorithm", self.algorithm)
        algo = ALGORITHMS[self.algorithm]
        defaults = algo.defaults
        for name in ALGORITHM_FIELDS:
            value = getattr(self, name)
            off = name in ("momentum", "rho") and value == 0              # 0 = off, harmless
            if value is not None and name not in defaults and not off:
                users = [a.name for a in ALGORITHMS.values() if name in a.defaults]
                raise ConfigError(f"{name}={value} is not used by algorithm {self.algorithm!r}; "
                                  f"algorithms that use it: {', '.join(users)}")
        if self.client_fraction is not None and self.clients_per_round is not None:
            raise ConfigError(f"give client_fraction ({self.client_fraction}) or clients_per_round "
                              f"({self.clients_per_round}), not both")
        filled = {k: v for k, v in defaults.items() if getattr(self, k) is None}
        if self.local_epochs is not None:
            filled["local_steps"] = self._steps_for_epochs(algo)
        if self.clients_per_round is not None:
            filled.pop("client_fraction", None)
        missing = [k for k, v in filled.items() if v == REQUIRED]
        if missing:
            raise ConfigError(f"algorithm {self.algorithm!r} needs {', '.join(missing)}, which has no "
                              f"default (the papers give none); set it explicitly")
        cfg = dataclasses.replace(self, **filled)
        cfg = dataclasses.replace(cfg, momentum=cfg.momentum or 0.0, rho=cfg.rho or 0.0)
        if cfg.quant_bits is None:
            idle = [f"{k}={getattr(self, k)!r}" for k in QUANTIZER_FIELDS
                    if getattr(self, k) is not None and getattr(self, k) != defaults.get(k)]
            if idle:
                raise ConfigError(f"{', '.join(idle)} set, but quant_bits is not: messages are exact 32-bit floats; "
                                  f"give quant_bits (2..32) to compress them")
        for name, value in algo.fixed.items():
            if getattr(cfg, name) != value:
                raise ConfigError(f"{name}={getattr(cfg, name)} is not allowed for algorithm "
                                  f"{self.algorithm!r}, which requires {name}={value}")
        cfg._validate()
        return cfg

    def samples_per_client(self) -> float:
        """n, the mean train-split size of a client: the train samples used, over m (every client's size
        under the default Dirichlet ``prior`` split, which gives all clients equal shares)."""
        total = DATASETS[self.dataset].train_size
        if self.train_size is not None:
            total = min(total, self.train_size)
        return total / self.num_clients

    def clients_per_round_count(self) -> int:
        """The clients a centralized round samples: ``clients_per_round``, or ``client_fraction`` of m rounded
        (at least 1). Needs a resolved centralized config."""
        return self.clients_per_round or max(1, round(self.client_fraction * self.num_clients))

    def _steps_for_epochs(self, algo) -> int:
        """K for ``local_epochs`` E: E passes over a client's n samples in batches of B, as the papers' data
        loaders take them (⌈n/B⌉ batches an epoch, the last one smaller there, a full B here)."""
        if "local_steps" not in algo.defaults or "local_steps" in algo.fixed:
            raise ConfigError(f"local_epochs={self.local_epochs} is not used by algorithm {self.algorithm!r}, "
                              f"which takes {algo.fixed.get('local_steps', 'no')} local step(s) a round")
        OneOf(DATASETS)("dataset", self.dataset)
        check_int("num_clients", self.num_clients, 1)
        check_int("batch_size", self.batch_size, 1)
        Number(0.0, low_open=True)("local_epochs", self.local_epochs)
        n = self.samples_per_client()
        per_epoch = 1 if self.full_batch else math.ceil(n / self.batch_size)
        steps = max(1, math.floor(self.local_epochs * per_epoch + 0.5))      # rounded half up
        if self.local_steps is not None and self.local_steps != steps:
            raise ConfigError(f"local_steps={self.local_steps} disagrees with local_epochs={self.local_epochs}: "
                              f"{self.local_epochs} epochs of ⌈{n:g}/{self.batch_size}⌉ = {per_epoch} steps make "
                              f"K = {steps}; give one of the two")
        return steps

    def _validate(self) -> None:
        """Every field within its allowed values (``None`` is allowed where it is the default), then the pairs."""
        for f in fields(self):
            value, allowed = getattr(self, f.name), f.metadata.get("allowed")
            if allowed is not None and not (value is None and f.default is None):
                allowed(f.name, value)
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device='cuda' was asked for, but torch.cuda.is_available() is False; "
                              "use device='auto' or 'cpu'")
        if self.quant_stochastic and self.quant_rounding == "floor":
            raise ConfigError("quant_stochastic=True rounds at random (up or down, unbiased); it cannot be combined "
                              "with quant_rounding='floor'")
        if self.uses_public_copies and self.topology in TOPOLOGIES and TOPOLOGIES[self.topology].time_varying:
            raise ConfigError(f"quant_bits={self.quant_bits} with the time-varying topology {self.topology!r}: "
                              f"compressed gossip keeps public copies of the neighbours' models, which a client "
                              f"meeting a new neighbour does not hold; use a static topology "
                              f"({', '.join(k for k, v in TOPOLOGIES.items() if not v.time_varying)})")
        if self.clients_per_round is not None and self.clients_per_round > self.num_clients:
            raise ConfigError(f"clients_per_round={self.clients_per_round} exceeds num_clients={self.num_clients}")


#: The quantizer's settings, which mean nothing without quant_bits.
QUANTIZER_FIELDS = ("quant_step", "quant_rounding", "quant_stochastic", "consensus_step")
#: quant_mixing's former names (results files and checkpoints written before the readings were renamed).
FORMER_QUANT_MIXINGS = {"difference": "differences-only", "models": "exact-neighbour-models"}

#: The per-algorithm fields (``None`` by default, the algorithm's own default when resolved).
ALGORITHM_FIELDS = tuple(f.name for f in fields(Config) if f.metadata["per_algorithm"])
