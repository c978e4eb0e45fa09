"""The showcase experiments, one or two per chapter: what each asks, and its arms.

Each is named for what it runs (``dfedsam-regime``), not for its chapter: chapters get renumbered.

Every experiment runs at the ``showcase`` profile's sizes (all of Fashion-MNIST,
the 2NN, m = 100, Dirichlet α = 0.3, 5 seeds) unless its ``base`` says otherwise;
at the ``fast`` profile the same experiment runs in seconds (a check of the
code, not of the claims). Arms differ from each other in one thing, so that the
per-seed paired difference isolates it.
"""

from __future__ import annotations

from .measures import flatness_and_gap, flatness_trace_and_gap, membership
from .regime import RegimeMap
from .runner import Experiment

__all__ = ["EXPERIMENTS", "REGIME_MAPS", "PAPER_LOCAL_TRAINING", "COMPUTE_MATCHED"]

#: Centralized FL trains 10 of the 100 clients a round, a tenth of a decentralized round's work, so it
#: gets more rounds (600 against 100: the two horizons differ, and the chapters say so).
CENTRALIZED_ROUNDS = {"showcase": {"rounds": 600, "eval_every": 30}, "fast": {"rounds": 30}}

#: FedGF's drift threshold T_D, which no source gives (see chapter 09): the midpoint of the mean client
#: drift D^r of FedSAM (FedGF with c = 0) over its first 50 rounds at α = 0.05 and at α = 3, showcase scale,
#: averaged over seeds 5-9, which the experiment does not run (its seeds are 0-4): 0.4572, rounded to 0.46.
#: Per seed the midpoint ranged from 0.449 to 0.468 (seeds 0-9). Derived by
#: ``dfl_book.showcase.measures.calibrate_fedgf_threshold()`` and written here so that every run uses the same value.
FEDGF_THRESHOLD = 0.46
_FEDGF = {"fedgf_threshold": FEDGF_THRESHOLD}

#: The DFedSAM paper's local training (App. B.3): 5 local epochs of batch 128, weight decay 5e-4,
#: lr 0.1 × 0.998^t (the engine's default lr and decay). Its 1000 rounds on 100 clients are out of a CPU's
#: reach; the regime maps below run 100 rounds on 20 clients of 500 Fashion-MNIST images each.
PAPER_LOCAL_TRAINING = dict(local_epochs=5, batch_size=128, weight_decay=5e-4, lr=0.1, lr_decay=0.998)
_MAP_BASE = {k: v for k, v in PAPER_LOCAL_TRAINING.items() if k != "local_epochs"} | dict(
    num_clients=20, train_size=10_000, test_size=2_000, rounds=100, eval_every=5
)  # E is each row's
#: At the fast profile a map runs on the bundled digits (72 images a client) in seconds: a check of the code.
_MAP_FAST = {"fast": dict(dataset="digits", train_size=None, test_size=None, batch_size=32, rounds=30)}
MAP_EPOCHS = (0.25, 1, 5)  # from a quarter of an epoch (the old showcase's 0.27) to the papers' 5
MAP_RHOS = (0.01, 0.05, 0.2)  # the DFedSAM paper's ρ, then larger ones from its grid
#: The compute-matched arm of each map: SAM takes two gradients a step, so at the paper's E = 5 the SAM
#: method spends as many gradient evaluations a round as its baseline does at E = 10.
COMPUTE_MATCHED = {"DFedAvg": "DFedAvg, E = 10 (compute-matched)", "FedAvg": "FedAvg, E = 10 (compute-matched)"}

#: D-SGD against centralized SGD (chapter 085): D-SGD in its adapt-then-combine form, DFedAvg with K = 1 (one
#: local SGD step, then gossip). On the complete graph with w_ij = 1/m every client then holds the same model
#: after each round, so it is exactly mini-batch SGD on the union with total batch m·B. Both batches see the
#: same samples: 10 epochs of the 10,000 train images.
DSGD_BATCHES = (8, 64)  # per client; total batch 160 and 1280 on 20 clients
_DSGD_EPOCHS, _DSGD_CLIENTS, _DSGD_TRAIN = 10, 20, 10_000
_DSGD_BASE = dict(
    algorithm="dfedavg",
    local_steps=1,
    num_clients=_DSGD_CLIENTS,
    train_size=_DSGD_TRAIN,
    test_size=2_000,
    partition="iid",
    lr=0.1,
    lr_decay=1.0,
    weight_decay=5e-4,
)


def _dsgd_rounds(batch: int) -> int:
    """Rounds for ``_DSGD_EPOCHS`` epochs of the union at per-client batch ``batch`` (one step a round)."""
    return _DSGD_EPOCHS * _DSGD_TRAIN // (_DSGD_CLIENTS * batch)


#: DFedSAM against DFedAvg per graph (chapter 085), at the paper's local training and the paper's ρ, with the
#: compute-matched DFedAvg (E = 10: as many gradient evaluations a round as DFedSAM's E = 5).
_TOPOLOGY_ARMS = {
    "DFedAvg, {graph}": dict(algorithm="dfedavg"),
    "DFedSAM ρ = 0.01, {graph}": dict(algorithm="dfedsam", rho=0.01),
    "DFedAvg E = 10 (compute-matched), {graph}": dict(
        algorithm="dfedavg", local_epochs=2 * PAPER_LOCAL_TRAINING["local_epochs"]
    ),
}

REGIME_MAPS: dict[str, RegimeMap] = {
    m.name: m
    for m in [
        RegimeMap(
            "dfedsam-regime",
            "08",
            "Where does DFedSAM beat DFedAvg: at which local work per round (E local epochs) and which ρ? Ring, "
            "m = 20 clients of 500 Fashion-MNIST images, Dirichlet 0.3, the paper's batch 128 and weight decay, "
            "100 rounds; the paper's local training is the row E = 5, and DFedSAM-MGS (Q = 4) runs there too.",
            "DFedAvg",
            "DFedSAM",
            dict(algorithm="dfedavg", topology="ring"),
            dict(algorithm="dfedsam", topology="ring"),
            MAP_EPOCHS,
            MAP_RHOS,
            base=_MAP_BASE,
            extra_arms={
                "DFedSAM-MGS Q = 4 ρ = 0.01, E = 5": dict(
                    algorithm="dfedsam-mgs",
                    topology="ring",
                    rho=0.01,
                    gossip_steps=4,
                    local_epochs=PAPER_LOCAL_TRAINING["local_epochs"],
                ),
                COMPUTE_MATCHED["DFedAvg"]: dict(
                    algorithm="dfedavg", topology="ring", local_epochs=2 * PAPER_LOCAL_TRAINING["local_epochs"]
                ),
            },
            measure=flatness_and_gap,
            profile_changes=_MAP_FAST,
        ),
        RegimeMap(
            "fedsam-regime",
            "07",
            "Where does FedSAM beat FedAvg: at which local work per round (E local epochs) and which ρ? 20 clients of "
            "500 Fashion-MNIST images, Dirichlet 0.3, half of them sampled a round, the paper's batch 128 and weight "
            "decay, 100 rounds.",
            "FedAvg",
            "FedSAM",
            dict(algorithm="fedavg", client_fraction=0.5),
            dict(algorithm="fedsam", client_fraction=0.5),
            MAP_EPOCHS,
            MAP_RHOS,
            base=_MAP_BASE,
            extra_arms={
                COMPUTE_MATCHED["FedAvg"]: dict(
                    algorithm="fedavg", client_fraction=0.5, local_epochs=2 * PAPER_LOCAL_TRAINING["local_epochs"]
                )
            },
            measure=flatness_and_gap,
            profile_changes=_MAP_FAST,
        ),
    ]
}

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in [
        Experiment(
            "dfedavg",
            "04",
            "Do K local steps beat one (DFedAvg vs D-PSGD), does local momentum help (DFedAvgM vs DFedAvg), and "
            "does a denser graph train faster (ring < grid < exponential < complete)?",
            arms={
                "D-PSGD": dict(algorithm="dpsgd"),
                "DFedAvg": dict(algorithm="dfedavg"),
                "DFedAvgM": dict(algorithm="dfedavgm"),
                "DFedAvg, grid": dict(algorithm="dfedavg", topology="grid"),
                "DFedAvg, exponential": dict(algorithm="dfedavg", topology="exponential"),
                "DFedAvg, complete": dict(algorithm="dfedavg", topology="complete"),
            },
        ),
        Experiment(
            "compressed-gossip",
            "05",
            "Does compressed gossip that sends what it counts (public copies, CHOCO) train as well as 32-bit floats "
            "at 16 and 8 bits, and what does 4 bits lose? Does rounding down or stochastic rounding change that, does "
            "DFedSAM compress as well as DFedAvgM, and how do dfedavgm-q's two other readings of eq. (7) compare "
            "(one cannot be sent as counted)?",
            arms={
                "32-bit floats": dict(algorithm="dfedavgm"),
                "16 bits": dict(algorithm="dfedavgm-q", quant_bits=16),
                "8 bits": dict(algorithm="dfedavgm-q", quant_bits=8),
                "4 bits": dict(algorithm="dfedavgm-q", quant_bits=4),
                "8 bits, rounded down": dict(algorithm="dfedavgm-q", quant_bits=8, quant_rounding="floor"),
                "4 bits, rounded down": dict(algorithm="dfedavgm-q", quant_bits=4, quant_rounding="floor"),
                "4 bits, stochastic": dict(algorithm="dfedavgm-q", quant_bits=4, quant_stochastic=True),
                "8 bits, differences only": dict(algorithm="dfedavgm-q", quant_bits=8, quant_mixing="differences-only"),
                "8 bits, exact neighbour models": dict(
                    algorithm="dfedavgm-q", quant_bits=8, quant_mixing="exact-neighbour-models"
                ),
                "DFedSAM, 32-bit floats": dict(algorithm="dfedsam", rho=0.01),
                "DFedSAM, 8 bits": dict(algorithm="dfedsam", rho=0.01, quant_bits=8),
            },
        ),
        Experiment(
            "privacy",
            "06",
            "Does the membership-inference attack succeed more where the models generalize worse (more local "
            "steps per round)? Twenty clients of 3000 IID images each, batch 50, lr 0.01, momentum 0.9, as in the "
            "DFedAvgM paper's §6; K = 60 steps is one local epoch.",
            # The paper's §6 settings. At the showcase's lr 0.1 (momentum 0.9, Dirichlet 0.3) K = 20 and K = 60
            # diverged in 2 of the first 7 runs, and so did the attack's shadow model.
            base=dict(num_clients=20, partition="iid", batch_size=50, lr=0.01),
            arms={
                "K = 5": dict(algorithm="dfedavgm", local_steps=5),
                "K = 20": dict(algorithm="dfedavgm", local_steps=20),
                "K = 60": dict(algorithm="dfedavgm", local_steps=60),
            },
            measure=membership,
        ),
        Experiment(
            "fedsam",
            "07",
            "Does local SAM (FedSAM) lower the Hessian's top eigenvalue and the generalization gap of the global "
            "model, and does it change test accuracy? Where, in ρ?",
            arms={
                "FedAvg": dict(algorithm="fedavg"),
                "FedSAM, ρ = 0.02": dict(algorithm="fedsam", rho=0.02),
                "FedSAM, ρ = 0.05": dict(algorithm="fedsam", rho=0.05),
                "FedSAM, ρ = 0.1": dict(algorithm="fedsam", rho=0.1),
                "FedSAM, ρ = 0.2": dict(algorithm="fedsam", rho=0.2),
            },
            profile_changes=CENTRALIZED_ROUNDS,
            measure=flatness_and_gap,
        ),
        Experiment(
            "dfedsam",
            "08",
            "Does DFedSAM beat DFedAvg on the ring at m = 100, for which ρ, and does DFedSAM-MGS gain as Q grows?",
            arms={
                "DFedAvg": dict(algorithm="dfedavg"),
                "DFedSAM, ρ = 0.01": dict(algorithm="dfedsam", rho=0.01),
                "DFedSAM, ρ = 0.03": dict(algorithm="dfedsam", rho=0.03),
                "DFedSAM, ρ = 0.1": dict(algorithm="dfedsam", rho=0.1),
                "DFedSAM-MGS, Q = 2": dict(algorithm="dfedsam-mgs", rho=0.01, gossip_steps=2),
                "DFedSAM-MGS, Q = 4": dict(algorithm="dfedsam-mgs", rho=0.01, gossip_steps=4),
                "DFedSAM-MGS, Q = 8": dict(algorithm="dfedsam-mgs", rho=0.01, gossip_steps=8),
            },
        ),
        Experiment(
            "dfedsam-clients",
            "08",
            "Does MGS's gain depend on m, i.e. on how slowly the ring mixes (λ = 0.967 at m = 20, 0.9987 at m = 100)?",
            arms={
                "DFedSAM, m = 20": dict(algorithm="dfedsam", num_clients=20),
                "DFedSAM-MGS Q = 4, m = 20": dict(algorithm="dfedsam-mgs", num_clients=20),
                "DFedSAM, m = 50": dict(algorithm="dfedsam", num_clients=50),
                "DFedSAM-MGS Q = 4, m = 50": dict(algorithm="dfedsam-mgs", num_clients=50),
            },
        ),
        Experiment(
            "fedgf",
            "09",
            "Does FedGF beat FedSAM as the clients' data grow more heterogeneous (α → 0), in both readings of its "
            "eq. (12)?",
            arms={
                f"{name}, α = {alpha}": dict(algorithm=algo, alpha=alpha, **extra)
                for alpha in (0.05, 0.3, 3.0)
                for name, algo, extra in (
                    ("FedSAM", "fedsam", {}),
                    ("FedGF (points)", "fedgf", _FEDGF | {"fedgf_reading": "points"}),
                    ("FedGF (vectors)", "fedgf", _FEDGF | {"fedgf_reading": "vectors"}),
                )
            }
            | {
                "FedGF (points, c from the rounds seen), α = 0.05": dict(
                    algorithm="fedgf", alpha=0.05, **_FEDGF, fedgf_c_reading="seen"
                )
            },
            profile_changes=CENTRALIZED_ROUNDS,
        ),
        Experiment(
            "dsgd-batch",
            "085",
            "Does D-SGD on a ring reach a flatter minimum than centralized SGD (the complete graph with uniform "
            "weights, which is mini-batch SGD on the union) at the same total batch, and does that advantage persist "
            "at a large total batch? 20 clients of 500 IID Fashion-MNIST images, one local step a round, lr 0.1 "
            "constant, the same 10 epochs of samples seen at total batch 160 and 1280.",
            base=_DSGD_BASE,
            arms={
                f"{graph}, total batch {20 * batch}": dict(
                    topology=graph, batch_size=batch, rounds=_dsgd_rounds(batch), eval_every=_dsgd_rounds(batch) // 25
                )
                for batch in DSGD_BATCHES
                for graph in ("ring", "complete")
            },
            measure=flatness_trace_and_gap,
        ),
        Experiment(
            "dfedsam-topology",
            "085",
            "Does DFedSAM's gain over DFedAvg shrink as the graph keeps the clients further apart (complete, "
            "exponential, ring)? The regime map's set-up at the paper's local training (E = 5, batch 128): 20 "
            "clients of 500 Fashion-MNIST images, Dirichlet 0.3, 100 rounds, with DFedAvg at E = 10 as the "
            "compute-matched arm.",
            base=_MAP_BASE | {"local_epochs": PAPER_LOCAL_TRAINING["local_epochs"]},
            arms={
                label.format(graph=graph): dict(changes, topology=graph)
                for graph in ("complete", "exponential", "ring")
                for label, changes in _TOPOLOGY_ARMS.items()
            },
            measure=flatness_and_gap,
            profile_changes=_MAP_FAST,
        ),
    ]
} | {m.name: m.experiment() for m in REGIME_MAPS.values()}
