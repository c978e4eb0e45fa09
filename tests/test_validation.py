"""Bad input is refused before training, with a message naming the value and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest

from dfl_core import Config, ConfigError, DivergenceError, Simulation
from dfl_core.topology import MixingMatrix, TopologyError


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(algorithm="dfedsgd"), "unknown algorithm 'dfedsgd'; allowed: dpsgd"),
        (dict(dataset="mnist-9"), "unknown dataset 'mnist-9'; allowed: digits"),
        (dict(model="resnet-1"), "unknown model 'resnet-1'; allowed: 2nn"),
        (dict(topology="hypercube"), "unknown topology 'hypercube'; allowed:"),
        (dict(partition="bycolor"), "unknown partition 'bycolor'; allowed:"),
        (dict(alpha=-0.5), "alpha must be in [0.0, inf), got -0.5"),
        (dict(alpha=float("nan")), "alpha must be a finite number"),
        (dict(algorithm="dfedsam-mgs", gossip_steps=0), "gossip_steps must be >= 1, got 0"),
        (dict(rho=-0.1), "rho must be in [0.0, inf), got -0.1"),
        (dict(algorithm="dfedavgm", momentum=1.0), "momentum must be in [0.0, 1.0), got 1.0"),
        (dict(algorithm="dfedavgm", momentum=-0.1), "momentum must be in [0.0, 1.0), got -0.1"),
        (
            dict(algorithm="dfedavg", momentum=0.9),
            "momentum=0.9 is not used by algorithm 'dfedavg'; algorithms that use it: dfedavgm",
        ),
        (dict(algorithm="dfedavg", rho=0.05), "rho=0.05 is not used by algorithm 'dfedavg'"),
        (dict(algorithm="dpsgd", local_steps=5), "local_steps=5 is not allowed for algorithm 'dpsgd'"),
        (dict(local_steps=0), "local_steps must be >= 1, got 0"),
        (dict(num_clients=2.5), "num_clients must be an integer >= 1, got 2.5"),
        (dict(lr=0.0), "lr must be in (0.0, inf), got 0.0"),
        (dict(lr_decay=1.5), "lr_decay must be in (0.0, 1.0], got 1.5"),
        (dict(dtype="float16"), "unknown dtype 'float16'; allowed: float32, float64"),
        (dict(full_batch="yes"), "full_batch must be true or false"),
        (dict(degree=-7), "degree must be >= 1, got -7"),
        (dict(max_degree=1), "max_degree must be >= 2, got 1"),
        (dict(num_neighbors=0), "num_neighbors must be >= 1, got 0"),
        (
            dict(topology="random-regular", degree=3, num_clients=5),
            "'random-regular' needs degree (its option k) an integer with 0 < degree < num_clients and "
            "num_clients × degree even; got degree=3, num_clients=5",
        ),
        (dict(topology="random-regular", degree=10, num_clients=10), "got degree=10, num_clients=10"),
        (dict(topology="grid", num_clients=13), "'grid' needs m = r * c with r, c >= 2, but m = 13 is prime"),
        (dict(topology="torus", num_clients=7), "nearby valid m: 6 or 8"),
    ],
)
def test_bad_config_values_are_refused_with_a_clear_message(changes, message):
    with pytest.raises(ConfigError) as err:
        Config().replace(**changes)
    assert message in str(err.value)


def test_unknown_field_is_refused():
    with pytest.raises(ConfigError, match=r"unknown config field\(s\) \['rhoo'\]"):
        Config().replace(rhoo=0.1)


def test_a_run_the_data_cannot_hold_is_refused_when_its_config_is_built():
    with pytest.raises(ConfigError, match=r"num_clients=500 but the train split holds 100 samples \(train_size=100\)"):
        Config(num_clients=500, train_size=100)
    with pytest.raises(ConfigError, match="num_clients=20 but the test split holds 5 samples"):
        Config(num_clients=20, test_size=5)
    with pytest.raises(ConfigError, match="20 x shards_per_client=100 = 2000 shards, more than the train split's"):
        Config(num_clients=20, partition="shards", shards_per_client=100)
    with pytest.raises(ConfigError, match="model='vgg11-gn' on dataset='digits': vgg11-gn needs images of at least"):
        Config(model="vgg11-gn")
    Config(model="vgg11-gn", dataset="cifar10", num_clients=100, partition="shards", shards_per_client=2)  # fits


def test_a_topology_that_cannot_be_built_is_refused():
    with pytest.raises(ConfigError, match="grid"):
        Config(topology="grid", num_clients=13)  # 13 is prime: no r x c grid; refused before any data are read
    # only drawing a random graph tells that it stays disconnected
    with pytest.raises(TopologyError, match="p"):
        Simulation(Config(topology="erdos-renyi", num_clients=30, edge_probability=0.001))


def test_a_disconnected_or_mis_declared_mixing_matrix_is_refused():
    two_islands = np.kron(np.eye(2), np.full((2, 2), 0.5))  # doubly stochastic, disconnected
    with pytest.raises(TopologyError, match="connected"):
        MixingMatrix(two_islands, "islands", symmetric=True, doubly_stochastic=True, directed=False).validate()
    row_only = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    with pytest.raises(TopologyError, match="symmetr"):
        MixingMatrix(row_only, "lopsided", symmetric=True, doubly_stochastic=True, directed=False).validate()


def test_divergence_stops_the_run_naming_round_and_client():
    sim = Simulation(Config(algorithm="dfedavg", lr=1e6, lr_decay=1.0, num_clients=4, rounds=20))
    with pytest.raises(DivergenceError) as err:
        sim.run()
    msg = str(err.value)
    assert "round" in msg and "client" in msg and "lr=1000000.0" in msg


# ------------------------------------------------ configs written by earlier versions
def _former_flat_dict(cfg: Config) -> dict:
    """``cfg`` as versions before the typed params wrote it: every algorithm's hyperparameter, ``None`` where
    the algorithm did not read it, ρ and θ 0.0 for every algorithm that had none."""
    from dfl_core.config import algorithm_fields

    d = {name: None for name in algorithm_fields()} | {"rho": 0.0, "momentum": 0.0} | cfg.to_dict()
    for name in ("precision", "channels_last", "compile", "cudnn_benchmark"):  # fields added since
        d.pop(name)
    return d


@pytest.mark.parametrize(
    "algorithm, settings",
    [
        ("dfedavg", {}),
        ("dfedsam", {"rho": 0.05}),
        ("fedavg", {"clients_per_round": 3}),
        ("fedgf", {"fedgf_threshold": 1.0}),
        ("dfedavgm-q", {"quant_mixing": "difference"}),
    ],
)
def test_configs_of_earlier_versions_convert_to_the_same_config(algorithm, settings):
    """Configs written before the typed params (flat, every hyperparameter of every algorithm) convert
    (convert_config, the convert-results command) to the config they were; this version reads only the current
    form."""
    from dfl_core.results import convert_config

    former = {"quant_mixing": "differences-only"} if "quant_mixing" in settings else {}
    now = Config(algorithm=algorithm, num_clients=6, **(settings | former))
    old = _former_flat_dict(now) | {k: v for k, v in settings.items() if k == "quant_mixing"}
    assert convert_config(old) == now.to_dict() and Config.from_dict(convert_config(old)) == now
    assert convert_config(now.to_dict()) == now.to_dict()  # a current config: unchanged
    with pytest.raises(ConfigError, match="rho=0.3 is not used by algorithm 'dfedavg'"):
        convert_config(_former_flat_dict(Config(algorithm="dfedavg")) | {"rho": 0.3})  # a real setting refused
    if algorithm != "fedavg":  # (fedavg reads no ρ and θ: 0.0 is refused now)
        return
    with pytest.raises(ConfigError, match="not used by algorithm 'fedavg'"):
        Config.from_dict(old)  # the old form is no longer read: convert it


def test_every_committed_result_holds_its_config_in_the_current_form():
    """The showcase's committed runs were converted once: each config is exactly what Config.to_dict writes."""
    import json
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parent.parent / "dfl_book" / "showcase" / "results").glob("*.json"))
    assert len(files) >= 5
    count = 0
    for path in files:
        for record in json.loads(path.read_text())["runs"]:
            assert Config.from_dict(record["config"]).to_dict() == record["config"]
            count += 1
    assert count >= 100


def test_a_config_is_checked_when_built_and_hyperparameters_live_on_params():
    from dfl_core.algorithms.decentralized import DFedSAMParams

    cfg = Config(algorithm="dfedsam", rho=0.05, rounds=3)
    assert isinstance(cfg.params, DFedSAMParams) and cfg.params.rho == cfg.params.rho == 0.05
    assert cfg.replace(algorithm="fedsam").params.rho == 0.05  # set explicitly: kept
    assert (
        Config(algorithm="dfedsam").replace(algorithm="fedsam").params.rho == 0.05 != Config().params.rho
    )  # fedsam's default
    assert Config(algorithm="dfedsam", params=DFedSAMParams(rho=0.2)).params.rho == 0.2
    with pytest.raises(ConfigError, match="rho must be in"):
        Config(algorithm="dfedsam", rho=-1.0)
    with pytest.raises(ConfigError, match="params must be a DFedSAMParams"):
        Config(algorithm="dfedsam", params=DFedSAMParams(), rho=0.1)
    with pytest.raises(ConfigError, match=r"params must be a GossipParams .*\(got DFedSAMParams\)"):
        Config(algorithm="dfedavg", params=DFedSAMParams(rho=0.5))  # a subclass: its rho would be ignored
    with pytest.raises(AttributeError, match="algorithm 'dfedavg' has no hyperparameter 'rho'"):
        Config(algorithm="dfedavg").rho
    with pytest.raises(
        AttributeError, match="it is a hyperparameter of algorithm 'dfedsam', read it as cfg.params.rho"
    ):
        Config(algorithm="dfedsam").rho  # one spelling: cfg.params.rho


def test_a_run_of_something_other_than_a_config_is_refused():
    from dfl_core import run

    with pytest.raises(ConfigError, match="a run needs a dfl_core.Config, got a dict"):
        run({"algorithm": "dfedavg"})


def test_api_misuses_get_clear_errors():
    sim = Simulation(Config(rounds=1, num_clients=4, train_size=80, test_size=40))
    with pytest.raises(ConfigError, match="dfedsam is decentralized: every client trains every round"):
        sim.clients_of_round(0)
    with pytest.raises(TypeError, match="hook 42 defines none of the hook methods .*after_round"):
        sim.run(hooks=[42])
    with pytest.raises(TypeError, match="defines none of the hook methods"):
        sim.run(hooks=lambda run: None)  # a function is not a hook: it would never be called
    history = sim.run()
    with pytest.raises(KeyError, match="'test_accuracy' is not measured in this history; allowed: .*test_acc"):
        history.series("test_accuracy")
