"""Named configs for the experiments of the seed papers' tables ("paper presets").

A :class:`Preset` is one table (or figure group) of one paper:

* ``base``: the :class:`~dfl_core.config.Config` fields the whole table shares;
* ``settings``: the table's columns (data splits, topologies, participation ...);
* ``algorithms``: the table's rows that :data:`dfl_core.algorithms.ALGORITHMS`
  implements, in table order, with ``per_algorithm`` overrides for single rows;
* ``not_implemented``: the rows dfl_core does not have (yet);
* ``notes``: where every value the paper does *not* state comes from.

``preset.config(algorithm, setting)`` builds ``base + settings[setting] +
per_algorithm[algorithm] + changes``. Algorithm-specific fields of ``base`` and
of the setting (``topology`` for the decentralized rows, ``client_fraction`` for
the centralized rows, ...; see :func:`dfl_core.config.algorithm_fields`) go only
to the rows that use them, as in a comparison on the command line; the
per-algorithm values and the caller's ``changes`` are applied as given, so a
field an algorithm does not use is still refused there.

Conventions used in the values below:

* ``K`` (``local_steps``) counts local *steps* in dfl_core, while the papers
  count local *epochs*. "E epochs at batch B with n samples per client" is
  ``K = E * ceil(n / B)`` (:func:`epochs_to_steps`); each conversion is written
  next to its value.
* Every value carries a comment with its source. "paper" means the paper's
  text; "public code" means a value the paper's text lost or never gave, filled
  from the authors' public code (rong-dai/DisPFL, the DFedSAM and FedGF code
  bases), and is repeated in the preset's ``notes``.
* Presets are at the papers' full scale (CIFAR, 100 clients, 1000+ rounds): they
  are meant for a GPU. The book derives its fast profiles from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from dfl_core.algorithms import ALGORITHMS
from dfl_core.config import RUN_FIELDS, Config, ConfigError, algorithm_fields

__all__ = ["Preset", "PRESETS", "get_preset", "epochs_to_steps"]


def epochs_to_steps(epochs: int, samples_per_client: int, batch_size: int) -> int:
    """``K = E * ceil(n / B)``: local epochs over n samples at batch B, as local steps."""
    return epochs * math.ceil(samples_per_client / batch_size)


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Preset:
    """The configs of one table of one paper; see the module docstring."""

    name: str  # e.g. "dfedsam-table1-cifar10"
    source: str  # citation: paper, table/section (and the seed file)
    description: str  # one line, for the CLI --help
    base: Mapping[str, object]  # Config fields shared by the whole table
    algorithms: tuple[str, ...]  # the table's rows that dfl_core implements (ALGORITHMS keys), in table order
    per_algorithm: Mapping[str, Mapping[str, object]]  # per-row overrides
    settings: Mapping[str, Mapping[str, object]]  # the table's columns
    not_implemented: tuple[str, ...] = ()  # table rows the engine does not have (yet)
    notes: tuple[str, ...] = field(default=())  # every value not stated in the paper: where it comes from

    def __post_init__(self) -> None:
        names = {*RUN_FIELDS, *algorithm_fields()}
        unknown_algos = [a for a in self.algorithms if a not in ALGORITHMS]
        if unknown_algos:
            raise ValueError(
                f"preset {self.name!r}: unknown algorithm(s) {unknown_algos}; allowed: {', '.join(ALGORITHMS)}"
            )
        stray = sorted(set(self.per_algorithm) - set(self.algorithms))
        if stray:
            raise ValueError(
                f"preset {self.name!r}: per_algorithm names {stray}, which are not among its "
                f"algorithms {list(self.algorithms)}"
            )
        parts = (
            [("base", self.base)]
            + [(f"settings[{s!r}]", v) for s, v in self.settings.items()]
            + [(f"per_algorithm[{a!r}]", v) for a, v in self.per_algorithm.items()]
        )
        for where, values in parts:
            bad = sorted(set(values) - names) + (["algorithm"] if "algorithm" in values else [])
            if bad:
                raise ValueError(
                    f"preset {self.name!r}: {where} sets {bad}, which are not settable config "
                    f"fields here (the algorithm is chosen by Preset.config)"
                )
        object.__setattr__(self, "base", _frozen(self.base))
        object.__setattr__(self, "per_algorithm", _frozen({a: _frozen(v) for a, v in self.per_algorithm.items()}))
        object.__setattr__(self, "settings", _frozen({s: _frozen(v) for s, v in self.settings.items()}))
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        object.__setattr__(self, "not_implemented", tuple(self.not_implemented))
        object.__setattr__(self, "notes", tuple(self.notes))

    def config(self, algorithm: str, setting: str | None = None, **changes: Any) -> Config:
        """The config of row ``algorithm`` in column ``setting`` (``None``: ``base`` alone).

        ``base + settings[setting] + per_algorithm[algorithm] + changes``, where
        algorithm-specific fields of ``base`` and of the setting go only to rows
        that use them. The config checks every value (errors name the preset).
        An unknown algorithm or setting raises :class:`ValueError` listing the allowed ones.
        """
        if algorithm not in self.algorithms:
            missing = [r for r in self.not_implemented if r.lower() == str(algorithm).lower()]
            why = (
                f"{missing[0]} is a row of this table that dfl_core does not implement"
                if missing
                else f"unknown algorithm {algorithm!r} for this preset"
            )
            raise ValueError(f"preset {self.name!r}: {why}; allowed: {', '.join(self.algorithms)}")
        if setting is not None and setting not in self.settings:
            raise ValueError(
                f"preset {self.name!r}: unknown setting {setting!r}; allowed: "
                f"{', '.join(self.settings)} (or None for the base config)"
            )
        uses, per_algorithm = ALGORITHMS[algorithm].defaults, algorithm_fields()
        shared = {**self.base, **(self.settings[setting] if setting is not None else {})}
        shared = {k: v for k, v in shared.items() if k not in per_algorithm or k in uses}
        values = {**shared, **self.per_algorithm.get(algorithm, {}), **changes}
        try:
            return Config(algorithm=algorithm, **values)
        except ConfigError as err:
            raise ConfigError(f"preset {self.name!r}, algorithm {algorithm!r}, setting {setting!r}: {err}") from err

    def configs(self, setting: str | None = None, **changes: Any) -> dict[str, Config]:
        """``{algorithm: config(algorithm, setting, **changes)}`` for every row of the table."""
        return {a: self.config(a, setting, **changes) for a in self.algorithms}


# --------------------------------------------------------------------------- #
# Shi et al., "Improving the Model Consistency of Decentralized Federated
# Learning", ICML 2023 (DFedSAM) -- seed 003_09f3e964e3b8f925.txt (000_* poster)
# --------------------------------------------------------------------------- #

_DFEDSAM_SEED = "Shi et al., ICML 2023 (DFedSAM), seed 003_09f3e964e3b8f925.txt"
_CIFAR_TRAIN = 50_000
_DFEDSAM_CLIENTS = 100  # App. B.3: "The total client number is set to 100"
_DFEDSAM_BATCH = 128  # App. B.3: "The batch size is fixed to 128"
_DFEDSAM_N = _CIFAR_TRAIN // _DFEDSAM_CLIENTS  # 500 samples per client (equal-size split, see notes)
# App. B.3: "the training epoch in D-PSGD is set to 1, that for all other methods is set to 5"
# -> K = 5 * ceil(500 / 128) = 5 * 4 = 20 local steps.
_DFEDSAM_K = epochs_to_steps(5, _DFEDSAM_N, _DFEDSAM_BATCH)

_DFEDSAM_BACKBONES = {
    # §5.1 / App. B.1: VGG-11 for CIFAR-10, ResNet(-18) for CIFAR-100, batch-norm replaced by group-norm.
    "cifar10": "vgg11-gn",
    "cifar100": "resnet18-gn",
}

# Table 1 rows FedAvg, FedSAM, D-PSGD, DFedAvg, DFedAvgM, DisPFL, DFedSAM, DFedSAM-MGS.
_DFEDSAM_T1_ROWS = ("fedavg", "fedsam", "dpsgd", "dfedavg", "dfedavgm", "dispfl", "dfedsam", "dfedsam-mgs")
# Table 3 lists the same methods in another order: FedAvg, FedSAM, D-PSGD, DisPFL, DFedAvg, DFedAvgM, DFedSAM, -MGS.
_DFEDSAM_T3_ROWS = ("fedavg", "fedsam", "dpsgd", "dispfl", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs")
# Table 2 has the decentralized methods only.
_DFEDSAM_T2_ROWS = ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs")


def _dfedsam_base(dataset: str, rounds: int) -> dict[str, object]:
    return {
        "dataset": dataset,
        "model": _DFEDSAM_BACKBONES[dataset],
        "num_clients": _DFEDSAM_CLIENTS,  # App. B.3
        "rounds": rounds,
        "partition": "dirichlet",  # §5.1: Dirichlet partition (see notes: "prior" split)
        "alpha": 0.3,  # Table 1, first column (Dirichlet 0.3)
        "dirichlet_method": "prior",  # public code (DisPFL, equal 500/client); notes
        "batch_size": _DFEDSAM_BATCH,  # App. B.3: 128
        "local_steps": _DFEDSAM_K,  # App. B.3: 5 epochs -> 5*ceil(500/128) = 20 steps
        "lr": 0.1,  # App. B.3 / §5.1: local learning rate 0.1
        "lr_decay": 0.998,  # App. B.3 / §5.1: decayed with 0.998 per round
        "weight_decay": 5e-4,  # App. B.3: 0.0005 "for all baselines except FedSAM"
        # Decentralized rows (App. B.4): time-varying topology, each client talks to at most 10 neighbours
        # sampled without replacement. "random-symmetric" is the reading the theory needs (Def. 4.1);
        # "random-as-coded" is the DisPFL-lineage code's (see notes).
        "topology": "random-symmetric",
        "max_degree": 10,  # App. B.3/B.4: "at most 10 neighbors"
        "num_neighbors": 10,  # the same bound for the "random-as-coded" alternative
        # App. B.4: "In DFedSAM-MGS, the gossip step is performed Q times, 10 x Q clients are sampled" --
        # a new graph for every gossip step.
        "fresh_matrix_per_gossip_step": True,
        "gossip_steps": 1,  # Algorithm 1 with Q = 1 (MGS rows override: Q = 4)
        # Centralized rows (FedAvg, FedSAM):
        "client_fraction": 0.1,  # App. B.3: "the sample ratio of client is set to 0.1"
        "server_lr": 1.0,  # App. B.3: "global learning rate is set to 1.0"
        "eval_every": 10,  # our choice: 100 evaluations over 1000 rounds
    }


def _dfedsam_per_algorithm(rows: tuple[str, ...]) -> dict[str, dict[str, object]]:
    per = {
        # App. B.3: D-PSGD trains 1 local epoch; our dpsgd is Lian et al.'s one-step algorithm
        # (footnote 2 of the paper describes D-PSGD that way too), so K = 1 here (see notes).
        "dpsgd": {"local_steps": 1},
        # App. B.3: "following by (Sun et al., 2022), the local optimization with momentum 0.9 for DFedAvgM".
        "dfedavgm": {"momentum": 0.9},
        # App. B.3: rho = 0.01 for DFedSAM and DFedSAM-MGS (grid {0.01, ..., 1.0}); §5.2: MGS with Q = 4.
        "dfedsam": {"rho": 0.01},
        "dfedsam-mgs": {"rho": 0.01, "gossip_steps": 4},
        # App. B.3: weight decay 5e-4 "for all baselines except FedSAM"; FedSAM's rho "is followed by
        # (Qu et al., 2022)", whose value the FedSAM seed lost -> 0.1 from the public code (FL-Simulator).
        "fedsam": {"weight_decay": 0.0, "rho": 0.1},
    }
    return {a: v for a, v in per.items() if a in rows}


_DFEDSAM_COMMON_NOTES = (
    "K in local steps: App. B.3 gives 5 local epochs (1 for D-PSGD) at batch 128 with 50000/100 = 500 "
    "samples per client, so K = 5*ceil(500/128) = 20.",
    "D-PSGD: the paper trains D-PSGD for 1 local epoch (App. B.3), i.e. ceil(500/128) = 4 SGD steps per "
    "gossip; dfl_core's dpsgd is Lian et al.'s one-step algorithm (local_steps fixed to 1) and is kept at K = 1 "
    "here. The paper's D-PSGD row corresponds to config('dfedavg', ..., local_steps=4).",
    "Topology: App. B.4's time-varying graph with at most 10 neighbours is encoded as 'random-symmetric' "
    "(undirected, degree <= 10, Metropolis-Hastings weights; symmetric doubly stochastic W as the theory "
    "assumes). The DisPFL-lineage code's reading (each client averages itself with 10 random others, W only "
    "row-stochastic) is topology='random-as-coded'.",
    "fresh_matrix_per_gossip_step=True follows App. B.4 (10 x Q clients sampled for the Q gossip steps); "
    "Algorithm 1 and the W^Q of the theory use one W for all Q steps (fresh_matrix_per_gossip_step=False). "
    "It only matters for DFedSAM-MGS.",
    "Dirichlet split: §5.1 cites Hsu et al. (2019), whose per-client draw with equal sizes is the 'prior' split "
    "(also the DisPFL code's FedDyn-style split), as the K conversion's 500 samples on every client assume; "
    "dirichlet_method='per-class' is the per-class split with unequal sizes.",
    "Weight decay: App. B.3 says 5e-4 'for all baselines except FedSAM'; DFedSAM/DFedSAM-MGS are not "
    "baselines in the paper's wording, and the third-party DFedSAM code (da-dpfl) passes no weight decay to "
    "SAM. We read the sentence as covering every method but FedSAM (weight_decay=0 is the alternative).",
    "FedSAM rho: App. B.3 takes it from Qu et al. (2022), whose value the FedSAM seed lost; rho = 0.1 is "
    "FL-Simulator's default (from the public code, not the paper).",
    "Momentum: 0.9 for DFedAvgM only (App. B.3); no other method uses momentum (DisPFL code default 0).",
    "eval_every = 10 is our choice (the paper reports the final accuracy).",
)


def _dfedsam_table1(dataset: str) -> Preset:
    label = {"cifar10": "CIFAR-10, VGG-11-GN", "cifar100": "CIFAR-100, ResNet-18-GN"}[dataset]
    return Preset(
        name=f"dfedsam-table1-{dataset}",
        source=f"{_DFEDSAM_SEED}: Table 1, §5.1, App. B.1-B.4",
        description=f"DFedSAM Table 1 ({label}): CFL and DFL baselines, Dirichlet 0.3 / 0.6 / IID, 1000 rounds",
        base=_dfedsam_base(dataset, rounds=1000),  # §5.1 / App. B.3: 1000 rounds
        algorithms=_DFEDSAM_T1_ROWS,
        per_algorithm=_dfedsam_per_algorithm(_DFEDSAM_T1_ROWS),
        settings={  # Table 1 columns (§5.1: alpha = 0.3 and 0.6, and IID)
            "dir0.3": {"partition": "dirichlet", "alpha": 0.3},
            "dir0.6": {"partition": "dirichlet", "alpha": 0.6},
            "iid": {"partition": "iid"},
        },
        not_implemented=(),
        notes=_DFEDSAM_COMMON_NOTES,
    )


_DFEDSAM_TABLE2 = Preset(
    name="dfedsam-table2-cifar10",
    source=f"{_DFEDSAM_SEED}: Table 2, §5.3, App. A (Figure 7), App. B.3",
    description="DFedSAM Table 2 (CIFAR-10, VGG-11-GN): DFL methods on ring / grid / exponential / full, 1000 rounds",
    base={
        **_dfedsam_base("cifar10", rounds=1000),  # §5.1: 1000 rounds also for the topology study
        # §5.3: communication type "Complete": every client gossips with its neighbours every round on a
        # static graph (the columns); the base is the first column.
        "topology": "ring",
        # The split of Table 2 is not stated (see notes): Dirichlet 0.3 as in Table 1's first column.
        "partition": "dirichlet",
        "alpha": 0.3,
    },
    algorithms=_DFEDSAM_T2_ROWS,
    per_algorithm=_dfedsam_per_algorithm(_DFEDSAM_T2_ROWS),
    settings={  # Table 2 columns: Ring, Grid, Exp, Full
        "ring": {"topology": "ring"},
        "grid": {"topology": "grid"},  # 100 clients -> 10 x 10 grid
        "exponential": {"topology": "exponential"},  # see notes: directed (Ying et al.) vs exponential-mh
        "full": {"topology": "complete"},
    },
    not_implemented=(),
    notes=_DFEDSAM_COMMON_NOTES[:2]
    + _DFEDSAM_COMMON_NOTES[4:6]
    + (
        "Data split of Table 2: not stated anywhere in the paper (§5.3, Figure 5(b), App. A/B). We use "
        "Dirichlet 0.3 (Table 1's first column, and the DisPFL code's default split); the only other CIFAR-10 "
        "split named in §5 is Dirichlet 0.6 (the Hessian study of §5.2). Override with partition/alpha.",
        "Exponential graph: the paper neither defines it nor cites a construction (App. A only draws it). "
        "'exponential' is the directed exponential graph of Ying et al. (2021), the usual one in DFL code; "
        "'exponential-mh' is the undirected variant with Metropolis-Hastings weights, the symmetric W that "
        "Definition 4.1 assumes.",
        "Full = 'complete' (w_ij = 1/m). Grid: 100 clients form a 10 x 10 grid with MH weights.",
        "Momentum: 0.9 for DFedAvgM only (App. B.3).",
        "eval_every = 10 is our choice (the paper reports the final accuracy).",
    ),
)


def _dfedsam_table3(dataset: str) -> Preset:
    label = {"cifar10": "CIFAR-10, VGG-11-GN", "cifar100": "CIFAR-100, ResNet-18-GN"}[dataset]
    shared = {
        k: v
        for k, v in _dfedsam_base(dataset, rounds=500).items()  # App. C: 500 rounds
        if k not in ("alpha", "dirichlet_method")
    }  # no Dirichlet split here
    return Preset(
        name=f"dfedsam-table3-{dataset}",
        source=f"{_DFEDSAM_SEED}: Table 3, App. C (with App. B.3-B.4)",
        description=f"DFedSAM Table 3 ({label}): pathological split, 2 classes per client, 500 rounds",
        base={
            **shared,  # App. C: "after 500 communication rounds"
            # App. C: "sorted data is divided into 200 partitions with 100 clients and each client is randomly
            # assigned 2 partitions from 2 classes" -> 200 shards of 250 images, 2 per client (500 per client,
            # so K = 20 as in Table 1).
            "partition": "shards",
            "shards_per_client": 2,
        },
        algorithms=_DFEDSAM_T3_ROWS,
        per_algorithm=_dfedsam_per_algorithm(_DFEDSAM_T3_ROWS),
        settings={"pathological": {"partition": "shards", "shards_per_client": 2}},  # Table 3's one column
        not_implemented=(),
        notes=(
            "App. C restates only the split, the backbones and the 500 rounds; every other value (lr 0.1, decay "
            "0.998, batch 128, 5 epochs, 100 clients, rho 0.01, Q = 4, weight decay, the time-varying topology "
            "with at most 10 neighbours, client_fraction 0.1) is taken from App. B.3-B.4, assuming the "
            "pathological runs used the same setup as Table 1.",
        )
        + _DFEDSAM_COMMON_NOTES[:4]
        + _DFEDSAM_COMMON_NOTES[5:],
    )


# --------------------------------------------------------------------------- #
# Lee & Yoon, "Rethinking the Flat Minima Searching in Federated Learning",
# ICML 2024 (FedGF) -- seed 001_a58dc42178e77a69.txt (slides)
# --------------------------------------------------------------------------- #

_FEDGF_SEED = "Lee & Yoon, ICML 2024 (FedGF), slides, seed 001_a58dc42178e77a69.txt"
_FEDGF_ALPHAS = ("0", "0.005", "10")  # Table 1 column groups: Dir(0), Dir(0.005), Dir(10)
_FEDGF_PARTICIPATION = (5, 10, 20)  # Table 1: "Number of participating clients per round"
_FEDGF_N = 500  # public code README: "100 users have 500 images each"
_FEDGF_BATCH = 64  # public code (tools/experiments/cifar.sh): batch 64
_FEDGF_K = epochs_to_steps(1, _FEDGF_N, _FEDGF_BATCH)  # public code: 1 epoch -> 1*ceil(500/64) = 8 steps

_FEDGF_ROWS = (
    "fedavg",
    "fedavgm",
    "fedprox",
    "scaffold",
    "feddyn",
    "fedsam",
    "fedasam",
    "mofedsam",
    "fedgamma",
    "fedsmoo",
    "fedgf",
)  # Table 1 order
_FEDGF_MISSING: tuple[str, ...] = ()


def _fedgf_table1(dataset: str) -> Preset:
    c10 = dataset == "cifar10"
    return Preset(
        name=f"fedgf-table1-{dataset}",
        source=f"{_FEDGF_SEED}: Table 1 (benchmark results), eqs. (8)-(16); training values from the public "
        f"code hwan-sig/Official-FedGF (tools/experiments/cifar.sh)",
        description=f"FedGF Table 1 ({'CIFAR-10' if c10 else 'CIFAR-100'}, CNN): Dir alpha 0 / 0.005 / 10 x "
        f"5 / 10 / 20 clients per round (T_D must be given)",
        base={
            "dataset": dataset,
            "model": "cnn-cifar",  # public code: FedSAMcnn for cifar10 and cifar100 (notes)
            "num_clients": 100,  # public code: --total_client 100 (100 x 500 images)
            "rounds": 10_000 if c10 else 20_000,  # public code: 10k rounds CIFAR-10, 20k CIFAR-100
            "partition": "dirichlet",  # Table 1: Dirichlet parameter alpha
            "alpha": 0.0,  # Table 1, first column group: Dir(alpha = 0, non-IID)
            "dirichlet_method": "prior",  # public code: 500 images per client, class mix ~ Dir
            "clients_per_round": 10,  # Table 1: 5 / 10 / 20 (base: the middle one)
            "batch_size": _FEDGF_BATCH,  # public code: 64
            "local_steps": _FEDGF_K,  # public code: 1 epoch -> 1*ceil(500/64) = 8 steps
            "lr": 0.01,  # public code: lr 0.01
            "lr_decay": 1.0,  # public code: constant lr (no schedule in tools/main.py)
            "weight_decay": 4e-4,  # public code: wd 0.0004
            "server_lr": 1.0,  # public code: eta_g default 1 (plain averaging)
            "fedgf_window": 30,  # public code: W = 30 (slides eq. (16): window W)
            "eval_every": 100,  # our choice (see notes)
        },
        algorithms=_FEDGF_ROWS,
        per_algorithm={
            # public code (cifar.sh run_fedsam): CIFAR-10 rho 0.1 (alpha 0, 0.05) / 0.02 (alpha 100);
            # CIFAR-100 rho 0.02 (alpha 0) / 0.05 (alpha 0.5, 1000). One value per row here; see notes.
            "fedsam": {"rho": 0.1 if c10 else 0.05},
            # public code (run_fedasam): CIFAR-10 rho 0.7, eta 0.2 (0.05 at alpha 100); CIFAR-100 rho 0.5, eta 0.2.
            "fedasam": {"rho": 0.7 if c10 else 0.5, "asam_eta": 0.2},
            # public code grid-searches rho in {0.02, 0.05, 0.1} and beta in {0.1, 0.7, 0.9}: our pick (notes).
            "mofedsam": {"rho": 0.05, "mofedsam_alpha": 0.1},
            # public code grid-searches rho in {0.02, 0.05, 0.1}: our pick 0.05. T_D is deliberately unset.
            "fedgf": {"rho": 0.05},
            # not checked against the public code: the engine's defaults (see notes)
            "fedavgm": {"server_momentum": 0.9},
            "fedprox": {"prox_mu": 0.01},
        },
        settings={
            f"alpha{a}-n{n}": {"partition": "dirichlet", "alpha": float(a), "clients_per_round": n}
            for a in _FEDGF_ALPHAS
            for n in _FEDGF_PARTICIPATION
        },
        not_implemented=_FEDGF_MISSING,
        notes=(
            "fedgf_threshold (T_D) is left unset: no source gives a value (the slides omit it and the public "
            "script never passes --T_D). config('fedgf', ...) raises ConfigError until the caller passes "
            "fedgf_threshold=...; the book calibrates T_D from the mean client drift D^r of eq. (15).",
            "The slides give no training hyperparameters. From the public code (Official-FedGF, cifar.sh / "
            "arg_parser.py / README), not the paper: 100 clients x 500 images, batch 64, 1 local epoch "
            "(K = 1*ceil(500/64) = 8 steps), lr 0.01 without decay, weight decay 4e-4, momentum 0, server lr 1, "
            "W = 30, 10000 (CIFAR-10) / 20000 (CIFAR-100) rounds.",
            "Model: the slides do not name it. The public script runs models=('FedSAMcnn') for both cifar10 and "
            "cifar100 (its resnet18_nonorm is an unused option), so both presets use cnn-cifar.",
            "Dirichlet alphas: the slides' Table 1 header reads alpha = 0 / 0.005 / 10 and the settings follow it. "
            "The public script and its pre-computed splits use alpha = 0 / 0.05 / 100 (CIFAR-10) and "
            "0 / 0.5 / 1000 (CIFAR-100); alpha = 0.005 has no split file. Pass alpha=... to use the code's values.",
            "rho per row: the public script sets FedSAM/FedASAM rho per alpha (FedSAM CIFAR-10: 0.1, 0.1, 0.02; "
            "CIFAR-100: 0.02, 0.05, 0.05. FedASAM CIFAR-10: 0.7, 0.7, 0.05; CIFAR-100: 0.5 with eta 0.2 "
            "throughout). A preset row has one value: the heterogeneous-column value for CIFAR-10, the majority "
            "value for CIFAR-100; pass rho=... for the IID column.",
            "MoFedSAM and FedGF rho (0.05) and MoFedSAM alpha (0.1) are guesses: the public script only grid-"
            "searches rho in {0.02, 0.05, 0.1} (and beta in {0.1, 0.7, 0.9}); alpha = 0.1 is Qu et al.'s value.",
            "MoFedSAM server step: mofedsam_variant 'paper' (Qu et al. eq. (6)); the FedGF authors' code is "
            "mofedsam_variant='official-fedgf'. FedASAM: asam_scale_all True (paper); the code scales only "
            "parameters named 'weight' (asam_scale_all=False). FedGF: fedgf_reading 'points' (eq. (12) as "
            "printed and coded).",
            "Participation: clients_per_round 5 / 10 / 20 of 100 (the code's sample_ratio 0.05 / 0.1 / 0.2).",
            "FedAvgM (beta 0.9) and FedProx (mu 0.01) use the engine's defaults, not values read from the "
            "FedGF paper or its code, which were not checked for them; pass server_momentum=... / prox_mu=...",
            "eval_every = 100 is our choice; the public code reports the mean test accuracy over the last 100 "
            "rounds (evaluating every round there), which a fixed eval_every does not reproduce.",
        ),
    )


# --------------------------------------------------------------------------- #
# Qu et al., "Generalized Federated Learning via Sharpness Aware Minimization",
# ICML 2022 (FedSAM, MoFedSAM) -- seed 002_fb4940f60580daff.txt
# --------------------------------------------------------------------------- #

_FEDSAM_SEED = "Qu et al., ICML 2022 (FedSAM/MoFedSAM), seed 002_fb4940f60580daff.txt"
_FEDSAM_CLIENTS = 100  # §5.1: "100 clients in total"; App. E Table 3: 100/50
_FEDSAM_BATCH = 50  # public code (FL-Simulator): batch 50 (paper's value lost)
_FEDSAM_EPOCHS = 5  # public code (FL-Simulator): 5 epochs (paper's value lost)
# EMNIST: App. E.1 "we use 20% of the dataset"; byclass (62 classes) has 697,932 train / 116,323 test images.
_EMNIST_TRAIN, _EMNIST_TEST = round(0.2 * 697_932), round(0.2 * 116_323)  # 139,586 / 23,265
_FEDSAM_ROWS = ("fedavg", "scaffold", "fedrobust", "fedcm", "mimelite", "fedsam", "mofedsam")  # Table 1 order
_FEDSAM_MISSING: tuple[str, ...] = ()


def _fedsam_preset(dataset: str) -> Preset:
    emnist = dataset == "emnist"
    n = (_EMNIST_TRAIN if emnist else _CIFAR_TRAIN) // _FEDSAM_CLIENTS  # 1395 (EMNIST) / 500 (CIFAR)
    k = epochs_to_steps(_FEDSAM_EPOCHS, n, _FEDSAM_BATCH)  # 5*28 = 140 / 5*10 = 50
    label = {"emnist": "EMNIST, CNN", "cifar10": "CIFAR-10, ResNet-18", "cifar100": "CIFAR-100, ResNet-18"}[dataset]
    table = {
        "cifar10": "Table 1 and Table 2",
        "emnist": "Table 1 and App. F Table 4",
        "cifar100": "Table 1 and App. F Table 5",
    }[dataset]
    base: dict[str, object] = {
        "dataset": dataset,
        # App. E.1: EMNIST "the same CNN as in (Reddi et al., 2020)" -> cnn-mnist (see notes);
        # §5.1 / App. E.1: ResNet-18 on CIFAR-10 and CIFAR-100 -> resnet18-gn (see notes).
        "model": "cnn-mnist" if emnist else "resnet18-gn",
        "num_clients": _FEDSAM_CLIENTS,  # §5.1: 100 clients
        "rounds": 1000,  # public code (FL-Simulator): 1000 rounds (see notes)
        "partition": "dirichlet",  # §5.1: label ratios ~ Dirichlet (Acar et al., 2021)
        "alpha": 0.6,  # §5.1 / App. E.1: Dirichlet parameter 0.6 by default
        "dirichlet_method": "prior",  # §5.1 cites Acar et al. (FedDyn): equal-size split
        "client_fraction": 0.2,  # §5.1: each client sampled with probability 0.2 (notes)
        "server_lr": 1.0,  # public code (FL-Simulator): global lr 1.0 (paper's lost)
        "batch_size": _FEDSAM_BATCH,  # public code: 50
        "local_steps": k,  # public code: 5 epochs -> 5*ceil(n/50) steps
        "lr": 0.1,  # public code: lr 0.1 (paper: grid-searched, value lost)
        "lr_decay": 0.998,  # public code: decay 0.998 per round
        "weight_decay": 1e-3,  # public code: weight decay 1e-3
        "eval_every": 10,  # our choice
    }
    if emnist:
        base.update(
            train_size=_EMNIST_TRAIN,  # App. E.1: 20% of EMNIST (see notes)
            test_size=_EMNIST_TEST,
        )
    return Preset(
        name=f"fedsam-{dataset}",
        source=f"{_FEDSAM_SEED}: {table}, §5.1, App. E; lost values from the public code FL-Simulator",
        description=f"FedSAM/MoFedSAM ({label}): 100 clients, 20% participation, Dirichlet 0.6 / IID / 0.3",
        base=base,
        algorithms=_FEDSAM_ROWS,
        per_algorithm={
            "fedsam": {"rho": 0.1},  # public code (FL-Simulator): rho 0.1 (paper's lost)
            # §4.2: "The momentum parameter is small enough, i.e., 0.1"; rho 0.1 from the public code.
            "mofedsam": {"rho": 0.1, "mofedsam_alpha": 0.1, "mofedsam_variant": "paper"},
        },
        settings={  # columns of Table 2 / App. F: IID, Dirichlet 0.6, 0.3
            "iid": {"partition": "iid"},
            "dir0.6": {"partition": "dirichlet", "alpha": 0.6},
            "dir0.3": {"partition": "dirichlet", "alpha": 0.3},
        },
        not_implemented=_FEDSAM_MISSING,
        notes=(
            "The extraction lost the paper's local epochs, batch sizes, rho, learning rates and global learning "
            "rate (§5.1, App. E.2). From the public code FL-Simulator (woodenchild95/FL-Simulator, "
            "reference-code.md §4), not the paper: batch 50, 5 local epochs, lr 0.1 decayed 0.998 per round, "
            "weight decay 1e-3, rho 0.1, server lr 1.0, 1000 rounds (the paper's 'Round' columns reach 893, "
            "consistent with 1000).",
            f"K in local steps: 5 epochs at batch 50 with n = {n} samples per client -> K = 5*ceil({n}/50) = {k}.",
            "MoFedSAM alpha = 0.1 is stated in the paper (§4.2: 'The momentum parameter is small enough, i.e., "
            "0.1'); FL-Simulator's default agrees. mofedsam_variant 'paper' is eq. (6); the public codes' server "
            "steps are 'fl-simulator' and 'official-fedgf'.",
            "Participation: the paper samples each client independently with probability 0.2 (a random number "
            "of clients per round); dfl_core samples exactly round(0.2*100) = 20 clients per round.",
            "Model (CIFAR): the paper says ResNet-18 without saying how it is normalised; resnet18-gn (CIFAR "
            "stem, GroupNorm(32)) is used. FL-Simulator uses torchvision's ResNet-18 (ImageNet stem) with "
            "GroupNorm(2 groups), which dfl_core does not provide.",
            "Model (EMNIST): App. E.1 describes Reddi et al.'s CNN (two 3x3 conv layers, max pooling, dropout, "
            "a 128-unit dense layer); dfl_core's nearest model is cnn-mnist (5x5 convs, 512-unit dense layer).",
            "EMNIST size: App. E.1 says 20% of the dataset (train_size 139,586, test_size 23,265 of the 62-class "
            "byclass split), but App. E Table 3 lists 81,425 total samples, which is 10% of byclass's 814,255; "
            "train_size=69793, test_size=11632 is the 10% reading.",
            "eval_every = 10 is our choice.",
        ),
    )


# --------------------------------------------------------------------------- #
# Sun et al., "Decentralized Federated Averaging", TPAMI (DFedAvg, DFedAvgM)
# -- seed 004_7fd48255468d247d.txt, §6.1
# --------------------------------------------------------------------------- #

_DFEDAVGM_SEED = "Sun et al., TPAMI (Decentralized Federated Averaging), seed 004_7fd48255468d247d.txt"
_DFEDAVGM_CLIENTS = 20  # §6.1: "partitioned into 20 clients each receiving 3000"
_DFEDAVGM_N = 60_000 // _DFEDAVGM_CLIENTS  # 3000 per client (IID; non-IID: 2 shards of 1500)
_DFEDAVGM_BATCH = 50  # §6.1: "local batch size ... to be 50"
_DFEDAVGM_EPOCHS = (1, 2, 5)  # see notes: the figures vary the local epochs


def _dfedavgm_preset(model: str) -> Preset:
    mlp = model == "2nn"
    per: dict[str, dict[str, object]] = {"dfedavgm": {"momentum": 0.9}}  # §6.1: momentum 0.9
    rows: tuple[str, ...] = ("dfedavgm",)
    if mlp:
        # §6.1 "Comparison between DFedAvgM, FedAvg, and DSGD" (2NN): "the same local batch size 50 for both
        # FedAvg and DSGD, and the learning rates are both set to 0.1"; "For FedAvg, we select all clients".
        rows = ("dfedavgm", "fedavg", "dpsgd")
        per["fedavg"] = {"lr": 0.1, "client_fraction": 1.0, "server_lr": 1.0}
        per["dpsgd"] = {"lr": 0.1, "local_steps": 1}
    settings = {}
    for split, values in (("iid", {"partition": "iid"}), ("noniid", {"partition": "shards", "shards_per_client": 2})):
        for e in _DFEDAVGM_EPOCHS:
            # K = E * ceil(3000 / 50) = 60 E local steps
            settings[f"{split}-e{e}"] = {**values, "local_steps": epochs_to_steps(e, _DFEDAVGM_N, _DFEDAVGM_BATCH)}
    notes = [
        "Topology: §6 says 'we consider a simple ring structured communication network' -> ring (MH weights "
        "1/3). One gossip step per round (Q = 1).",
        "Clients: §6.1 first says 'using 100 clients' but then partitions MNIST into 20 clients of 3000 (IID) "
        "or 40 shards of 1500, 2 per client (non-IID); 20 is the number consistent with the split.",
        "K in local steps: E local epochs at batch 50 with 3000 samples per client -> K = E*ceil(3000/50) = 60 E. "
        "The local epochs of Figs. 2-5 are in the lost figure legends; E = 1 / 2 / 5 are the values §6.3 names "
        "for CIFAR-10 ('increase the local epochs from 1 to 2 or to 5'), assumed for MNIST too.",
        "Rounds: not stated (the figures' axes are lost); 100 is a guess. lr_decay 1.0 (constant lr), weight "
        "decay 0 and reset_momentum True (momentum is local, restarted each round) are not stated either; "
        "eval_every = 1 is our choice.",
        "Quantization (not in dfl_core yet): the figures compare communication bits whose values the extraction "
        "lost; §6.3 names 16 bits (CIFAR-10), and 32 bits is the unquantized baseline. bits_per_param stays 32.",
    ]
    if mlp:
        notes.append(
            "FedAvg and DSGD rows (Fig. 6, 2NN): lr 0.1 and batch 50 as stated, all clients each round; "
            "their local epochs are not stated, so FedAvg takes the setting's K and DSGD is one-step "
            "(K = 1). The paper's footnote: DFedAvg(M) needs a smaller lr (0.01) than FedAvg and DSGD."
        )
    return Preset(
        name=f"dfedavgm-mnist-{'2nn' if mlp else 'cnn'}",
        source=f"{_DFEDAVGM_SEED}: §6 and §6.1 (Figs. {'4-6' if mlp else '2-3'})",
        description=f"DFedAvgM on MNIST ({'2NN' if mlp else 'CNN'}), 20 clients on a ring, IID / non-IID shards, "
        f"1 / 2 / 5 local epochs",
        base={
            "dataset": "mnist",  # §6.1: MNIST
            "model": model,  # §6.1: 2NN (199,210 params) / CNN (1,663,370 params)
            "num_clients": _DFEDAVGM_CLIENTS,  # §6.1: 20 clients
            "rounds": 100,  # not stated: our guess (notes)
            "partition": "iid",  # §6.1: IID, 3000 examples per client
            "shards_per_client": 2,  # §6.1 non-IID: 40 shards of 1500, 2 per client
            "topology": "ring",  # §6: "a simple ring structured communication network"
            "gossip_steps": 1,
            "batch_size": _DFEDAVGM_BATCH,  # §6.1: 50
            "local_steps": epochs_to_steps(1, _DFEDAVGM_N, _DFEDAVGM_BATCH),  # E = 1 -> 60 steps
            "lr": 0.01,  # §6.1: learning rate 0.01
            "lr_decay": 1.0,  # not stated: constant lr
            "weight_decay": 0.0,  # not stated
            "eval_every": 1,  # our choice
        },
        algorithms=rows,
        per_algorithm=per,
        settings=settings,
        not_implemented=("quantized DFedAvgM",),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- #
# The registry
# --------------------------------------------------------------------------- #

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        _dfedsam_table1("cifar10"),
        _dfedsam_table1("cifar100"),
        _DFEDSAM_TABLE2,  # Table 2 is CIFAR-10 only
        _dfedsam_table3("cifar10"),
        _dfedsam_table3("cifar100"),
        _fedgf_table1("cifar10"),
        _fedgf_table1("cifar100"),
        _fedsam_preset("cifar10"),
        _fedsam_preset("cifar100"),
        _fedsam_preset("emnist"),
        _dfedavgm_preset("2nn"),
        _dfedavgm_preset("cnn-mnist"),
    ]
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; :class:`ValueError` listing the allowed names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]
