"""Random configs, good and bad, thrown at the engine (hypothesis, 200 examples).

Every config either runs (a round or two on the bundled digits) or is refused
with one of dfl_core's own errors, whose message names the offending field or
value. None may crash with a traceback from deep inside torch or numpy, and
none may hang (each run is at most 2 rounds of at most 12 small clients).
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dfl_core import ALGORITHMS, Config, ConfigError, DivergenceError, Simulation
from dfl_core.checkpoint import CheckpointError
from dfl_core.data import DataError
from dfl_core.models import ModelError
from dfl_core.topology import TOPOLOGIES, TopologyError

REFUSALS = (ConfigError, DataError, TopologyError, ModelError, CheckpointError)

ODD = [math.nan, math.inf, -math.inf, True, "0.1", None]


def sometimes_bad(valid, *bad):
    """Mostly values from ``valid``; 1 time in 15 an out-of-range value from ``bad`` or the wrong kind of value."""
    return st.one_of(*[valid] * 14, st.sampled_from([*bad, *ODD]))


def one_of_names(valid: list, bad: str):
    """One of the ``valid`` names, or now and then the unknown name ``bad``."""
    return st.sampled_from(valid * 8 + [bad])


COMMON = {
    "dataset": one_of_names(["digits"], "mnist-9"),
    "model": one_of_names(["2nn", "2nn", "linear"], "resnet-1") | st.just("cnn-mnist"),  # cnn-mnist: 8x8 is too small
    "num_clients": sometimes_bad(st.integers(1, 12), 0, -1, 5000, 2.5),
    "rounds": sometimes_bad(st.integers(0, 2), -1),
    "seed": sometimes_bad(st.integers(0, 2**31), -1),
    "partition": one_of_names(["iid", "dirichlet", "shards"], "bycolor"),
    "alpha": sometimes_bad(st.floats(0, 10), -0.5),
    "shards_per_client": sometimes_bad(st.integers(1, 12), 0),
    "train_size": sometimes_bad(st.none() | st.integers(1, 3000), 0, -5),
    "test_size": sometimes_bad(st.none() | st.integers(1, 400), 0),
    "edge_probability": sometimes_bad(st.floats(0.01, 1.0), 0.0, 1.2),
    "degree": sometimes_bad(st.integers(1, 14), -1),
    "batch_size": sometimes_bad(st.integers(1, 64), 0, 10**6),
    "full_batch": st.sampled_from([True, False] * 7 + ["yes"]),
    "lr": sometimes_bad(st.floats(1e-4, 2.0), 0.0, -0.1, 1e12),
    "lr_decay": sometimes_bad(st.floats(0.5, 1.0), 0.0, 1.3),
    "reset_momentum": st.booleans(),
    "weight_decay": sometimes_bad(st.floats(0, 0.1), -0.1),
    "eval_every": sometimes_bad(st.integers(1, 3), 0),
    "dtype": one_of_names(["float32", "float64"], "float16"),
    "client_chunk": sometimes_bad(st.none() | st.integers(1, 20), 0),
    "forward_strategy": one_of_names(["auto", "mlp", "batched", "vmap", "loop"], "jit"),
    "gossip_mode": one_of_names(["auto", "dense", "rows", "csr"], "sparse"),
}
#: Fields only some algorithms read: drawn often for those, rarely (to be refused) for the others.
SPECIFIC = {
    "topology": one_of_names([None, *TOPOLOGIES], "hypercube"),
    "gossip_steps": sometimes_bad(st.none() | st.integers(1, 4), 0),
    "local_steps": sometimes_bad(st.none() | st.integers(1, 3), 0),
    "momentum": sometimes_bad(st.none() | st.floats(0, 0.99), 1.0, -0.5),
    "rho": sometimes_bad(st.none() | st.floats(0, 2.0), -0.1),
    "sam_variant": one_of_names([None, "sam", "asam"], "esam"),
    "client_fraction": sometimes_bad(st.none() | st.floats(0.05, 1.0), 0.0, 1.3),
    "clients_per_round": sometimes_bad(st.none() | st.integers(1, 12), 0, 15),
    "server_lr": sometimes_bad(st.none() | st.floats(0.1, 2.0), 0.0, -1.0),
    "server_momentum": sometimes_bad(st.none() | st.floats(0, 0.99), 1.0, -0.1),
    "prox_mu": sometimes_bad(st.none() | st.floats(0, 2.0), -0.5),
    "mofedsam_variant": one_of_names([None, "paper", "official-fedgf", "fl-simulator"], "mine"),
    "fedgf_threshold": sometimes_bad(st.floats(0, 1.0), -1.0),
    "fedgf_window": sometimes_bad(st.none() | st.integers(1, 5), 0),
    "quant_bits": sometimes_bad(st.none() | st.integers(2, 32), 1, 40),
}


@st.composite
def configs(draw) -> dict:
    """A dict of Config changes: common fields, an algorithm, and fields it reads (others rarely)."""
    changes = {name: draw(strategy) for name, strategy in COMMON.items() if draw(st.integers(0, 19)) >= 15}
    algorithm = draw(st.sampled_from([*ALGORITHMS] * 3 + ["dfedsgd"]))
    changes["algorithm"] = algorithm
    own = ALGORITHMS[algorithm].defaults if algorithm in ALGORITHMS else {}
    for name, strategy in SPECIFIC.items():
        # (hypothesis favours small integers, so "rare" is the top of the range)
        if draw(st.integers(0, 19)) >= (10 if name in own else 19) or (name, algorithm) == ("fedgf_threshold", "fedgf"):
            changes[name] = draw(strategy)
    return changes


def _named(message: str, changes: dict) -> bool:
    """Does the message name one of the fields set, or a value given?"""
    words = {name for name in changes} | {name.replace("_", " ") for name in changes}
    words |= {str(v) for v in changes.values() if v is not None and str(v)}
    words |= {"round", "client", "samples", "lr"}  # divergence and too-small-data messages
    return any(w in message for w in words)


@settings(
    max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(changes=configs())
def test_every_config_runs_or_is_refused_with_a_message(changes):
    try:
        cfg = Config().replace(**changes, device="cpu")
        Simulation(
            cfg.replace(
                rounds=min(cfg.rounds, 2)
                if isinstance(cfg.rounds, int) and not isinstance(cfg.rounds, bool)
                else cfg.rounds
            )
        ).run()
        event("ran")
    except REFUSALS + (DivergenceError,) as err:
        event(f"refused: {type(err).__name__}")
        message = str(err)
        assert len(message) > 15, f"{type(err).__name__} without a useful message for {changes}"
        assert _named(message, changes), f"message {message!r} names nothing of {changes}"
