"""The experiment configuration: the run's own settings, and the algorithm's typed hyperparameters.

A :class:`Config` holds what every run has (data, model, m, T, η, the device …), each a field declared with its help
text and allowed values, and ``params``: the running algorithm's hyperparameters, an instance of its params class
(``DFedSAMParams``, ``FedGFParams``, … in :mod:`dfl_core.algorithms`), where each hyperparameter is declared once
with its default. A config is checked when it is built, so every bad value is refused with a clear message before
any data is loaded or any training starts::

    Config(algorithm="dfedsam", rho=0.05)          # ρ goes to DFedSAMParams(rho=0.05)
    cfg.params.rho                                  # 0.05: the algorithm's hyperparameters live in params
    Config(algorithm="dfedavg", rho=0.05)           # ConfigError: dfedavg does not use rho

The CLI (``python -m dfl_core run --help``) is generated from the run's fields and every algorithm's params.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import torch

from .algorithms import ALGORITHMS, Algorithm
from .algorithms.base import SampledParams
from .data import DATASETS, DIRICHLET_METHODS, PARTITIONS
from .errors import ConfigError
from .models import MODELS, ModelError, build_model
from .settings import Flag, Integer, Number, OneOf, check_int, check_settings, setting
from .topology import TOPOLOGIES, TopologyError, check_topology

__all__ = [
    "Config",
    "ConfigError",
    "RUN_FIELDS",
    "algorithm_fields",
    "check_int",
    "OneOf",
    "Integer",
    "Number",
    "Flag",
]


@dataclass(frozen=True, init=False)
class Config:
    """One simulated run. Symbols follow the DFedSAM paper (m, T, K, Q, η, ρ).

    Build it with keywords: the run's fields below, and any of the algorithm's hyperparameters (its
    ``params``' fields), which go to ``params``. A hyperparameter given as ``None`` takes the algorithm's default.
    """

    # --- what to run
    algorithm: str = setting("dfedsam", "algorithm name", OneOf(ALGORITHMS))
    dataset: str = setting("digits", "dataset name", OneOf(DATASETS))
    model: str = setting("2nn", "model name", OneOf(MODELS))
    num_clients: int = setting(20, "m, the number of clients", Integer(1))
    rounds: int = setting(30, "T, communication rounds", Integer(0))
    seed: int = setting(0, "seed of every random stream of the run", Integer(0))
    # --- data and its partition over clients
    partition: str = setting("dirichlet", "partition scheme", OneOf(PARTITIONS))
    alpha: float = setting(
        0.3, "α, Dirichlet concentration of the label split (0 means one class per client)", Number(0.0)
    )
    dirichlet_method: str = setting(
        "prior", "'prior' (equal sizes, DisPFL/FedDyn) or 'per-class' (unequal sizes)", OneOf(DIRICHLET_METHODS)
    )
    shards_per_client: int = setting(
        2, "label-sorted shards per client for the 'shards' partition (so at most that many classes each)", Integer(1)
    )
    train_size: int | None = setting(None, "use a stratified subset of this many training samples", Integer(1))
    test_size: int | None = setting(None, "use a stratified subset of this many test samples", Integer(1))
    data_dir: str | None = setting(None, "folder with the dataset files (default: system copy or download)")
    # --- the algorithm's hyperparameters (declared on its params class)
    params: Any = field(default=None, metadata={"help": "the algorithm's hyperparameters"})
    # --- communication (decentralized): the topologies' options (each topology checks its own, TOPOLOGIES)
    fresh_matrix_per_gossip_step: bool = setting(
        False,
        "time-varying topologies: a new W for every gossip step (DFedSAM App. B.4); off: one W a round, "
        "used Q times (its Algorithm 1)",
        Flag(),
    )
    edge_probability: float = setting(0.2, "edge probability of 'erdos-renyi'", Number(0.0, 1.0, low_open=True))
    degree: int = setting(4, "degree of every client in 'random-regular'", Integer(1))
    max_degree: int = setting(10, "maximum degree of 'random-symmetric'", Integer(2))
    num_neighbors: int = setting(10, "neighbours each client draws in 'random-as-coded'", Integer(1))
    # --- local training
    local_epochs: float | None = setting(
        None,
        "E, local epochs per round, the papers' unit (instead of local_steps): K = E·⌈n_i/B⌉ steps (rounded, "
        "at least 1), n_i = train samples / m",
        Number(0.0, low_open=True),
    )
    batch_size: int = setting(32, "B, mini-batch size per client and step", Integer(1))
    full_batch: bool = setting(False, "each local step uses the client's whole train split (deterministic)", Flag())
    lr: float = setting(0.1, "η, local learning rate", Number(0.0, low_open=True), step_size=True)
    lr_decay: float = setting(
        0.998, "decay of η per round: η_t = η·lr_decay^t (DFedSAM App. B.3 uses 0.998)", Number(0.0, 1.0, low_open=True)
    )
    reset_momentum: bool = setting(True, "reset the momentum buffer at the start of every round", Flag())
    weight_decay: float = setting(0.0, "L2 weight decay added to the local gradient", Number(0.0))
    # --- runtime
    same_init: bool = setting(True, "all clients start from the same initial model", Flag())
    eval_every: int = setting(1, "evaluate every this many rounds (and after the last)", Integer(1))
    device: str = setting("auto", "'auto', 'cpu' or 'cuda'", OneOf(("auto", "cpu", "cuda")))
    dtype: str = setting("float32", "'float32' or 'float64'", OneOf(("float32", "float64")))
    precision: str = setting(
        "float32",
        "arithmetic of local training's forward and backward passes: 'float32' "
        "(the dtype's own), or mixed precision: 'bfloat16' (autocast) or 'float16' (autocast "
        "with loss scaling); parameters, SAM's norm and gossip stay in the dtype",
        OneOf(("float32", "bfloat16", "float16")),
    )
    channels_last: bool = setting(
        False,
        "channels-last layout of the convolutions' inputs and weights on the "
        "batched path (a CUDA speed option; never changes what is computed beyond "
        "rounding)",
        Flag(),
    )
    compile: bool = setting(
        False,
        "torch.compile local training's forward pass on the batched path (a CUDA speed "
        "option: fuses the norms, activations and casts; the first round pays for compiling "
        "them; the same function up to rounding)",
        Flag(),
    )
    cudnn_benchmark: bool = setting(
        False,
        "let cuDNN time its convolution algorithms for each shape in local "
        "training and keep the fastest (a CUDA speed option; the choice, and so the "
        "rounding, can differ between runs)",
        Flag(),
    )
    client_chunk: int | None = setting(
        None,
        "clients trained together (default: chosen for the device; changes results only by float rounding)",
        Integer(1),
    )
    gossip_mode: str = setting(
        "auto",
        "how W·x is computed: 'auto' (dense W: one product; sparse W: row sums on a "
        "CPU, a CSR product on a GPU), 'dense', 'rows' or 'csr' (see dfl_core.gossip)",
        OneOf(("auto", "dense", "rows", "csr")),
    )
    forward_strategy: str = setting(
        "auto",
        "'auto', 'mlp', 'batched', 'vmap' or 'loop' (see dfl_core.stacked)",
        OneOf(("auto", "mlp", "batched", "vmap", "loop")),
    )
    bits_per_param: int = setting(32, "bits per parameter on the wire, for byte counts", Integer(1))

    def __init__(self, algorithm: str = "dfedsam", params: Any = None, **settings: Any) -> None:
        hyperparameters = algorithm_fields()  # now: an algorithm registered since import counts
        unknown = sorted(set(settings) - set(RUN_FIELDS) - set(hyperparameters))
        if unknown:
            raise ConfigError(
                f"unknown config field(s) {unknown}; allowed: "
                f"{sorted({'algorithm', 'params', *RUN_FIELDS, *hyperparameters})}"
            )
        set_field = object.__setattr__.__get__(self)
        set_field("algorithm", algorithm)
        for name, f in RUN_FIELDS.items():
            set_field(name, settings.pop(name, f.default))
        set_field("params", None)  # built below, from the run's checked fields
        check_settings(self)  # (the algorithm's name first)
        algo = ALGORITHMS[algorithm]
        given = {k: v for k, v in settings.items() if v is not None}  # None: the algorithm's default
        if params is None:
            params = algorithm_params(self, algo, given)
        elif given or type(params) is not algo.params:  # a subclass carries fields the algorithm never reads
            raise ConfigError(
                f"params must be a {algo.params.__name__} for algorithm {algorithm!r}, given alone "
                f"(got {type(params).__name__}{' and ' + ', '.join(given) if given else ''})"
            )
        else:
            given = {f.name: getattr(params, f.name) for f in fields(params) if getattr(params, f.name) != f.default}
        set_field("params", params)
        set_field("_given", frozenset(given))  # what the user set, kept across replace(algorithm=…)
        self._check_run()

    # ------------------------------------------------------------------ helpers
    def __getattr__(self, name: str) -> Any:
        """Only for names that are not fields: a hyperparameter has one spelling, ``cfg.params.rho``."""
        if name.startswith("_") or name == "params":
            raise AttributeError(name)
        params = self.__dict__.get("params")
        if params is not None and hasattr(params, name):
            raise AttributeError(
                f"Config has no field {name!r}: it is a hyperparameter of algorithm "
                f"{self.__dict__.get('algorithm')!r}, read it as cfg.params.{name}"
            )
        raise AttributeError(
            f"algorithm {self.__dict__.get('algorithm')!r} has no hyperparameter {name!r}"
            if name in algorithm_fields()
            else f"Config has no field {name!r}"
        )

    def settings(self) -> dict[str, Any]:
        """What this config was built from: the run's fields and the hyperparameters set explicitly (the others
        are the algorithm's defaults), without ``algorithm``; ``Config(algorithm=a, **cfg.settings())`` rebuilds it."""
        return {name: getattr(self, name) for name in RUN_FIELDS} | {
            name: getattr(self.params, name) for name in sorted(self._given)
        }

    def replace(self, **changes: Any) -> "Config":
        """A copy with some fields or hyperparameters changed (unknown names raise :class:`ConfigError`).

        Changing the algorithm keeps the hyperparameters set explicitly (the others take the new one's defaults).
        """
        algorithm = changes.pop("algorithm", self.algorithm)
        if "params" in changes:
            return Config(algorithm=algorithm, **({name: getattr(self, name) for name in RUN_FIELDS} | changes))
        settings = self.settings()
        if self.local_epochs is not None:
            settings.pop("local_steps", None)  # K follows E
        return Config(algorithm=algorithm, **(settings | changes))

    def to_dict(self) -> dict[str, Any]:
        """The run's fields and the hyperparameters, flat, hyperparameters where ``params`` stands."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "params":
                out.update(dataclasses.asdict(self.params))
            else:
                out[f.name] = getattr(self, f.name)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Config":
        """A config from :meth:`to_dict`'s form (a file written by an earlier version: convert it first with
        ``python -m dfl_core convert-results``, :func:`dfl_core.results.convert_results`)."""
        return cls(**d)

    def topology_options(self) -> dict[str, Any]:
        """The options of this config's topology, by the topology's own option names."""
        topology = getattr(self.params, "topology", None)
        options = TOPOLOGIES[topology].options if topology in TOPOLOGIES else {}
        return {name: getattr(self, o.config_field) for name, o in options.items()}

    def step_sizes(self) -> list[str]:
        """The settings a too large value of which makes training diverge, as ``["lr=0.1", "rho=0.01"]`` (those
        not 0; a divergence error names them)."""
        found = [(f.name, getattr(self, f.name)) for f in fields(self) if f.metadata.get("step_size")]
        found += [(f.name, getattr(self.params, f.name)) for f in fields(self.params) if f.metadata.get("step_size")]
        return [f"{name}={value}" for name, value in found if value]

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    @property
    def torch_device(self) -> torch.device:
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError(
                "device='cuda' was asked for, but torch.cuda.is_available() is False; use device='auto' or 'cpu'"
            )
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def samples_per_client(self) -> float:
        """n, the mean train-split size of a client: the train samples used, over m (every client's size
        under the default Dirichlet ``prior`` split, which gives all clients equal shares)."""
        total = DATASETS[self.dataset].train_size
        if self.train_size is not None:
            total = min(total, self.train_size)
        return total / self.num_clients

    def clients_per_round_count(self) -> int:
        """The clients a centralized round samples: ``clients_per_round``, or ``client_fraction`` of m rounded
        (at least 1)."""
        p = self.params
        if not hasattr(p, "client_fraction"):
            raise ConfigError(f"{self.algorithm} is decentralized: every client trains every round, none is sampled")
        return p.clients_per_round or max(1, round(p.client_fraction * self.num_clients))

    # --------------------------------------------------------------- validation
    def _check_run(self) -> None:
        """The checks that involve both the run's fields and the hyperparameters."""
        if self.precision != "float32" and self.dtype != "float32":
            raise ConfigError(
                f"precision={self.precision!r} is mixed precision for float32 runs; dtype={self.dtype!r} "
                f"runs compute in their own dtype: use precision='float32'"
            )
        topology = getattr(self.params, "topology", None)
        if topology is not None:
            try:  # the topology's own check, so a grid of prime m fails here and not after the data are loaded
                check_topology(topology, self.num_clients, **self.topology_options())
            except TopologyError as e:
                raise ConfigError(str(e)) from None  # its message names the topology, the value and what is allowed
        count = getattr(self.params, "clients_per_round", None)
        if count is not None and count > self.num_clients:
            raise ConfigError(f"clients_per_round={count} exceeds num_clients={self.num_clients}")
        check_fits_data(self)


def check_fits_data(cfg: Config) -> None:
    """The checks of ``cfg`` against its dataset's entry (the split sizes and the input shape), so that a run the
    data cannot hold is refused when its Config is built, before any data are loaded or any other run of a
    comparison trains."""
    spec, m = DATASETS[cfg.dataset], cfg.num_clients
    subsets = {"train": (spec.train_size, cfg.train_size), "test": (spec.test_size, cfg.test_size)}
    held = {split: min(whole, subset or whole) for split, (whole, subset) in subsets.items()}  # samples used
    for split, n in held.items():
        if m > n:
            subset = subsets[split][1]
            raise ConfigError(
                f"num_clients={m} but the {split} split holds {n} samples"
                f"{f' ({split}_size={subset})' if subset else ''}: every client needs at least one"
            )
    if cfg.partition == "shards" and m * cfg.shards_per_client > held["train"]:
        raise ConfigError(
            f"num_clients={m} x shards_per_client={cfg.shards_per_client} = {m * cfg.shards_per_client} shards, "
            f"more than the train split's {held['train']} samples"
        )
    refusal = _model_refusal(cfg.model, spec.input_shape, spec.num_classes)
    if refusal:
        raise ConfigError(f"model={cfg.model!r} on dataset={cfg.dataset!r}: {refusal}")


@functools.lru_cache(maxsize=64)
def _model_refusal(model: str, input_shape: tuple[int, ...], num_classes: int) -> str:
    """Why ``model`` cannot take inputs of ``input_shape`` ("" if it can): built once per shape on the meta device
    (shapes only, no memory)."""
    try:
        with torch.device("meta"):
            build_model(model, input_shape, num_classes)
    except ModelError as e:
        return str(e)
    return ""


def algorithm_params(run: Config, algo: Algorithm, given: dict[str, Any]) -> Any:
    """``algo``'s params from the hyperparameters ``given`` and the run's fields (K from ``local_epochs``);
    refuses a hyperparameter the algorithm does not read."""
    defaults = algo.defaults
    for name, value in given.items():
        if name not in defaults:
            users = ", ".join(a.name for a in ALGORITHMS.values() if name in a.defaults)
            raise ConfigError(f"{name}={value} is not used by algorithm {algo.name!r}; algorithms that use it: {users}")
    values = dict(given)
    if run.local_epochs is not None:
        values["local_steps"] = local_steps_for_epochs(run, algo, given.get("local_steps"))
    if issubclass(algo.params, SampledParams) and given.get("clients_per_round") is not None:
        if given.get("client_fraction") is not None:
            raise ConfigError(
                f"give client_fraction ({given['client_fraction']}) or clients_per_round "
                f"({given['clients_per_round']}), not both"
            )
        values["client_fraction"] = None  # the count replaces the fraction
    for name, value in algo.fixed.items():
        if values.get(name, defaults[name]) != value:
            raise ConfigError(
                f"{name}={values[name]} is not allowed for algorithm {algo.name!r}, which requires {name}={value}"
            )
    try:
        return algo.params(**values)
    except ConfigError as e:
        raise ConfigError(f"algorithm {algo.name!r}: {e}") from None


def local_steps_for_epochs(run: Config, algo: Algorithm, local_steps: int | None) -> int:
    """K for ``local_epochs`` E: E passes over a client's n samples in batches of B, as the papers' data
    loaders take them (⌈n/B⌉ batches an epoch, the last one smaller there, a full B here)."""
    if "local_steps" in algo.fixed:
        raise ConfigError(
            f"local_epochs={run.local_epochs} is not used by algorithm {algo.name!r}, "
            f"which takes {algo.fixed['local_steps']} local step(s) a round"
        )
    n = run.samples_per_client()
    per_epoch = 1 if run.full_batch else math.ceil(n / run.batch_size)
    steps = max(1, math.floor(run.local_epochs * per_epoch + 0.5))  # rounded half up
    if local_steps is not None and local_steps != steps:
        raise ConfigError(
            f"local_steps={local_steps} disagrees with local_epochs={run.local_epochs}: "
            f"{run.local_epochs} epochs of ⌈{n:g}/{run.batch_size}⌉ = {per_epoch} steps make "
            f"K = {steps}; give one of the two"
        )
    return steps


#: The run's own fields (all but ``algorithm`` and ``params``), by name.
RUN_FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in fields(Config) if f.name not in ("algorithm", "params")}


def algorithm_fields() -> dict[str, dataclasses.Field]:
    """Every algorithm's hyperparameters, by name, each as declared where it is introduced (help, allowed)."""
    found: dict[str, dataclasses.Field] = {}
    for algo in ALGORITHMS.values():
        for f in fields(algo.params):
            found.setdefault(f.name, f)
    return found
