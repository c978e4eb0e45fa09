"""The paper presets: every row x column resolves, values match the papers, errors name what is allowed.

Only configs are built here (no data, no Simulation), so these tests are fast.
"""

from __future__ import annotations

import math

import pytest

from dfl_core.algorithms import ALGORITHMS
from dfl_core.config import Config, ConfigError, algorithm_fields
from dfl_book.presets import PRESETS, Preset, epochs_to_steps, get_preset

EXPECTED_PRESETS = {
    "dfedsam-table1-cifar10",
    "dfedsam-table1-cifar100",
    "dfedsam-table2-cifar10",
    "dfedsam-table3-cifar10",
    "dfedsam-table3-cifar100",
    "fedgf-table1-cifar10",
    "fedgf-table1-cifar100",
    "fedsam-cifar10",
    "fedsam-cifar100",
    "fedsam-emnist",
    "dfedavgm-mnist-2nn",
    "dfedavgm-mnist-cnn",
}

CASES = [
    (name, algo, setting) for name, p in PRESETS.items() for algo in p.algorithms for setting in (None, *p.settings)
]


def test_the_expected_presets_exist():
    assert set(PRESETS) == EXPECTED_PRESETS


@pytest.mark.parametrize("name, algorithm, setting", CASES, ids=[f"{n}:{a}:{s}" for n, a, s in CASES])
def test_every_row_and_column_resolves(name, algorithm, setting):
    preset = PRESETS[name]
    if algorithm == "fedgf":
        with pytest.raises(ConfigError, match="fedgf_threshold"):
            preset.config(algorithm, setting)
        cfg = preset.config(algorithm, setting, fedgf_threshold=0.5)
    else:
        cfg = preset.config(algorithm, setting)
    resolved = cfg
    assert resolved.algorithm == algorithm
    # the column's values reach every row that uses them, unless the row overrides them
    uses, per_algorithm = ALGORITHMS[algorithm].defaults, algorithm_fields()
    for key, value in (preset.settings[setting] if setting is not None else {}).items():
        if (key not in per_algorithm or key in uses) and key not in preset.per_algorithm.get(algorithm, {}):
            holder = resolved if key not in per_algorithm else resolved.params
            assert getattr(holder, key) == value, (key, value)


def test_fedgf_threshold_is_required_then_used():
    preset = get_preset("fedgf-table1-cifar10")
    assert "fedgf_threshold" not in preset.per_algorithm["fedgf"]
    assert "fedgf_threshold" not in preset.base
    with pytest.raises(ConfigError) as err:
        preset.config("fedgf", "alpha0-n5")
    assert "fedgf_threshold" in str(err.value) and "fedgf-table1-cifar10" in str(err.value)
    cfg = preset.config("fedgf", "alpha0-n5", fedgf_threshold=2.0)
    assert cfg.params.fedgf_threshold == 2.0 and cfg.params.fedgf_window == 30 and cfg.params.clients_per_round == 5
    assert any("fedgf_threshold" in note for note in preset.notes)


# ---------------------------------------------------------------- spot checks against the papers
@pytest.mark.parametrize("dataset, model", [("cifar10", "vgg11-gn"), ("cifar100", "resnet18-gn")])
def test_dfedsam_table1_matches_appendix_b(dataset, model):
    p = get_preset(f"dfedsam-table1-{dataset}")
    assert list(p.settings) == ["dir0.3", "dir0.6", "iid"]
    assert p.algorithms == ("fedavg", "fedsam", "dpsgd", "dfedavg", "dfedavgm", "dispfl", "dfedsam", "dfedsam-mgs")
    assert p.not_implemented == ()
    cfgs = {a: p.config(a, "dir0.6") for a in p.algorithms}
    for a, c in cfgs.items():
        assert (c.dataset, c.model, c.num_clients, c.rounds) == (dataset, model, 100, 1000)
        assert (c.lr, c.lr_decay, c.batch_size) == (0.1, 0.998, 128)
        assert (c.partition, c.alpha) == ("dirichlet", 0.6)
        assert c.weight_decay == (0.0 if a == "fedsam" else 5e-4)
        assert c.params.local_steps == (1 if a == "dpsgd" else 20)  # 5 * ceil(500 / 128)
    assert cfgs["dfedsam"].params.rho == cfgs["dfedsam-mgs"].params.rho == 0.01
    assert cfgs["dfedsam"].params.gossip_steps == 1 and cfgs["dfedsam-mgs"].params.gossip_steps == 4
    assert cfgs["dfedavgm"].params.momentum == 0.9
    for a in ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs"):
        assert cfgs[a].params.topology == "random-symmetric" and cfgs[a].max_degree == 10
        assert not hasattr(cfgs[a].params, "client_fraction")  # decentralized: no sampling
    for a in ("fedavg", "fedsam"):
        assert not hasattr(cfgs[a].params, "topology")  # centralized: no graph
        assert (cfgs[a].params.client_fraction, cfgs[a].params.server_lr) == (0.1, 1.0)
    assert p.config("dfedsam", "iid").partition == "iid"
    assert p.config("dfedsam", "dir0.3").alpha == 0.3
    assert any("dfedavg" in n and "local_steps=4" in n for n in p.notes)  # D-PSGD's 1 epoch
    assert any("random-as-coded" in n for n in p.notes)


def test_dfedsam_table2_columns_are_topologies():
    p = get_preset("dfedsam-table2-cifar10")
    assert p.algorithms == ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs")
    expected = {"ring": "ring", "grid": "grid", "exponential": "exponential", "full": "complete"}
    for setting, topology in expected.items():
        for a in p.algorithms:
            c = p.config(a, setting)
            assert c.params.topology == topology and c.rounds == 1000 and c.model == "vgg11-gn"
    assert p.config("dfedsam-mgs", "grid").params.gossip_steps == 4
    assert any("exponential-mh" in n for n in p.notes)
    assert any("not stated" in n and "Table 2" in n for n in p.notes)


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
def test_dfedsam_table3_is_pathological(dataset):
    p = get_preset(f"dfedsam-table3-{dataset}")
    for a in p.algorithms:
        c = p.config(a, "pathological")
        assert (c.partition, c.shards_per_client, c.rounds) == ("shards", 2, 500)
        assert c.num_clients * c.shards_per_client == 200  # App. C: 200 partitions
    assert p.algorithms[3] == "dispfl" and p.not_implemented == ()  # Table 3's row order


@pytest.mark.parametrize("dataset, rounds", [("cifar10", 10_000), ("cifar100", 20_000)])
def test_fedgf_table1_grid(dataset, rounds):
    p = get_preset(f"fedgf-table1-{dataset}")
    assert p.algorithms == (
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
    )
    assert p.not_implemented == ()
    assert p.config("fedprox").params.prox_mu == 0.01 and p.config("fedavgm").params.server_momentum == 0.9
    assert len(p.settings) == 9
    for alpha in (0.0, 0.005, 10.0):
        for n in (5, 10, 20):
            s = p.settings[f"alpha{alpha:g}-n{n}"]
            assert (s["alpha"], s["clients_per_round"]) == (alpha, n)
    c = p.config("fedsam", "alpha0.005-n20")
    assert (c.model, c.num_clients, c.rounds, c.alpha, c.params.clients_per_round) == (
        "cnn-cifar",
        100,
        rounds,
        0.005,
        20,
    )
    assert (c.lr, c.lr_decay, c.weight_decay, c.batch_size, c.params.local_steps) == (0.01, 1.0, 4e-4, 64, 8)
    asam = p.config("fedasam", "alpha0-n10")
    assert asam.params.sam_variant == "asam" and asam.params.asam_eta == 0.2
    assert asam.params.rho == (0.7 if dataset == "cifar10" else 0.5)


def test_fedsam_presets():
    for dataset, model in (("cifar10", "resnet18-gn"), ("cifar100", "resnet18-gn"), ("emnist", "cnn-mnist")):
        p = get_preset(f"fedsam-{dataset}")
        assert p.algorithms == ("fedavg", "scaffold", "fedrobust", "fedcm", "mimelite", "fedsam", "mofedsam")
        assert p.not_implemented == ()
        assert list(p.settings) == ["iid", "dir0.6", "dir0.3"]
        base = p.config("mofedsam")
        assert (base.dataset, base.model, base.num_clients) == (dataset, model, 100)
        assert (base.partition, base.alpha, base.params.client_fraction) == ("dirichlet", 0.6, 0.2)
        assert base.params.mofedsam_alpha == 0.1
        assert (base.batch_size, base.lr, base.lr_decay, base.weight_decay, base.params.rho) == (
            50,
            0.1,
            0.998,
            1e-3,
            0.1,
        )
        assert any("public code" in n for n in p.notes)
    emnist = get_preset("fedsam-emnist").config("fedavg")
    assert emnist.train_size == 139_586 and emnist.params.local_steps == 5 * math.ceil(139_586 // 100 / 50)
    assert get_preset("fedsam-cifar10").config("fedavg").params.local_steps == 50  # 5 * ceil(500/50)


@pytest.mark.parametrize("model", ["2nn", "cnn-mnist"])
def test_dfedavgm_mnist(model):
    p = get_preset("dfedavgm-mnist-" + ("2nn" if model == "2nn" else "cnn"))
    assert set(p.settings) == {f"{s}-e{e}" for s in ("iid", "noniid") for e in (1, 2, 5)}
    for setting in p.settings:
        c = p.config("dfedavgm", setting)
        assert (c.dataset, c.model, c.num_clients, c.params.topology) == ("mnist", model, 20, "ring")
        assert (c.batch_size, c.lr, c.params.momentum) == (50, 0.01, 0.9)
        epochs = int(setting.split("-e")[1])
        assert c.params.local_steps == 60 * epochs  # E * ceil(3000 / 50)
        if setting.startswith("noniid"):
            assert c.partition == "shards" and c.num_clients * c.shards_per_client == 40
        else:
            assert c.partition == "iid"
    assert any("16" in n and "bits" in n for n in p.notes)
    if model == "2nn":
        fedavg = p.config("fedavg", "iid-e1")
        assert (fedavg.lr, fedavg.params.client_fraction, fedavg.batch_size) == (0.1, 1.0, 50)
        assert p.config("dpsgd", "noniid-e5").params.local_steps == 1


def test_epochs_to_steps():
    assert epochs_to_steps(5, 500, 128) == 20
    assert epochs_to_steps(1, 500, 64) == 8
    assert epochs_to_steps(2, 3000, 50) == 120
    assert epochs_to_steps(1, 501, 50) == 11


def test_every_preset_is_documented():
    for name, p in PRESETS.items():
        assert p.name == name
        assert "seed" in p.source and ".txt" in p.source
        assert p.description and "\n" not in p.description
        assert p.notes and all(isinstance(n, str) and n for n in p.notes)
        assert set(p.per_algorithm) <= set(p.algorithms)
        assert all(a in ALGORITHMS for a in p.algorithms)


# ---------------------------------------------------------------- errors
def test_get_preset_lists_allowed_names():
    with pytest.raises(ValueError) as err:
        get_preset("dfedsam-table9")
    assert "dfedsam-table9" in str(err.value)
    for name in PRESETS:
        assert name in str(err.value)


def test_config_refuses_unknown_algorithm_and_setting():
    p = get_preset("dfedsam-table1-cifar10")
    with pytest.raises(ValueError, match="unknown algorithm 'fedgf'.*allowed: fedavg, fedsam, dpsgd"):
        p.config("fedgf", "iid")
    with pytest.raises(ValueError, match="quantized DFedAvgM is a row of this table that dfl_core does not"):
        get_preset("dfedavgm-mnist-2nn").config("quantized dfedavgm", "iid-e1")
    with pytest.raises(ValueError, match="unknown setting 'dir0.1'; allowed: dir0.3, dir0.6, iid"):
        p.config("dfedsam", "dir0.1")


def test_changes_are_applied_and_checked():
    p = get_preset("dfedsam-table1-cifar10")
    c = p.config("dfedsam", "iid", rho=0.05, rounds=3, topology="random-as-coded")
    assert (c.params.rho, c.rounds, c.params.topology) == (0.05, 3, "random-as-coded")
    with pytest.raises(ConfigError, match="momentum=0.5 is not used by algorithm 'dfedsam'"):
        p.config("dfedsam", "iid", momentum=0.5)
    with pytest.raises(ConfigError, match="unknown config field"):
        p.config("dfedsam", "iid", learning_rate=0.1)
    assert isinstance(p.config("dfedavg"), Config)


def test_preset_definitions_are_validated_and_read_only():
    kw = dict(name="x", source="s", description="d", base={}, settings={})
    with pytest.raises(ValueError, match="unknown algorithm"):
        Preset(algorithms=("fedfoo",), per_algorithm={}, **kw)
    with pytest.raises(ValueError, match="not among its algorithms"):
        Preset(algorithms=("dfedavg",), per_algorithm={"dfedsam": {"rho": 0.1}}, **kw)
    with pytest.raises(ValueError, match="learning_rate"):
        Preset(algorithms=("dfedavg",), per_algorithm={}, **{**kw, "base": {"learning_rate": 0.1}})
    p = get_preset("dfedavgm-mnist-cnn")
    with pytest.raises(TypeError):
        p.base["lr"] = 1.0  # type: ignore[index]
