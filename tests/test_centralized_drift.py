"""Drift-correcting baselines (SCAFFOLD, FedDyn, FedCM, MimeLite, FedSMOO, FedGAMMA) against a per-client reference.

As ``test_centralized.py``: float64, full-batch, one ``nn.Module`` per sampled
client with gradients from ``torch.autograd.grad``, and the client and server
rules written out again here from the papers' Algorithm boxes, with every
client's state (c_i, ∇L_i, μ_i …) kept in a plain dict. The engine supplies
only the data, the initial model and which clients each round sampled.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from dfl_core import Config, ConfigError, Simulation
from dfl_core.models import build_model

ROUNDS = 4
SMALL = dict(
    dataset="digits",
    train_size=240,
    test_size=60,
    num_clients=8,
    rounds=ROUNDS,
    full_batch=True,
    dtype="float64",
    device="cpu",
    lr=0.2,
    lr_decay=0.9,
    weight_decay=1e-3,
    eval_every=ROUNDS,
    local_steps=3,
    clients_per_round=3,
)


def unit(v: torch.Tensor) -> torch.Tensor:
    return v / (v.norm() + 1e-12)


def clip10(v: torch.Tensor) -> torch.Tensor:
    return v * min(1.0, 10.0 / (float(v.norm()) + 1e-6))


def reference(sim: Simulation) -> torch.Tensor:
    """Replay the run client by client; returns the final global model (flat)."""
    cfg = sim.config
    ds = sim.data.dataset
    net = build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64)
    parts = sim.data.train.client_indices()
    X, Y = sim.data.train.x, sim.data.train.y

    def grad(point: torch.Tensor, i: int) -> torch.Tensor:
        vector_to_parameters(point, net.parameters())
        idx = torch.as_tensor(parts[i])
        loss = F.cross_entropy(net(X[idx]), Y[idx])
        return parameters_to_vector(torch.autograd.grad(loss, list(net.parameters()))).detach()

    a, N, K, wd, rho = (
        cfg.algorithm,
        cfg.num_clients,
        cfg.params.local_steps,
        cfg.weight_decay,
        getattr(cfg.params, "rho", 0.0),
    )
    w = sim.x0[0].clone()
    zero = torch.zeros_like(w)
    c, h, s, momentum, delta = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
    c_i = {i: zero.clone() for i in range(N)}  # SCAFFOLD/FedGAMMA control variates
    dyn = {i: zero.clone() for i in range(N)}  # FedDyn/FedSMOO ∇L_i(θ_i^{t-1})
    mu = {i: zero.clone() for i in range(N)}  # FedSMOO perturbation duals
    for t in range(cfg.rounds):
        lr = cfg.lr * cfg.lr_decay**t
        S = sim.clients_of_round(t).tolist()
        ys, s_hat = {}, {}
        for i in S:
            y = w.clone()
            for _ in range(K):
                g = grad(y, i)
                if a == "fedsmoo":  # corrected perturbation and its dual
                    s_hat[i] = rho * unit(g - mu[i] - s)
                    mu[i] = mu[i] + s_hat[i] - s
                    g = grad(y + s_hat[i], i)
                elif a == "fedgamma":
                    g = grad(y + rho * unit(g), i)
                if a in ("scaffold", "fedgamma"):
                    g = g - c_i[i] + c
                elif a == "feddyn":
                    g = g - dyn[i] + cfg.params.dyn_alpha * (y - w)
                elif a == "fedsmoo" and cfg.params.fedsmoo_variant != "no-regularizer":
                    g = g - dyn[i] - cfg.params.dyn_alpha * w
                    if cfg.params.fedsmoo_variant == "fl-simulator":
                        g = clip10(g)
                    g = g + cfg.params.dyn_alpha * y
                elif a == "fedcm":
                    g = cfg.params.fedcm_alpha * g + (1 - cfg.params.fedcm_alpha) * delta
                elif a == "mimelite":
                    beta = cfg.params.server_momentum
                    g = (1 - beta) * g + beta * momentum
                y = y - lr * (g + wd * y)
            ys[i] = y
        mean_y = sum(ys.values()) / len(S)
        if a in ("scaffold", "fedgamma"):
            dc = zero.clone()
            for i in S:
                if a == "scaffold" and cfg.params.scaffold_option == "I":
                    new = grad(w, i)
                else:
                    new = c_i[i] - c + (w - ys[i]) / (K * lr)
                dc += new - c_i[i]
                c_i[i] = new
            c = c + dc / N
            w = w + cfg.params.server_lr * (mean_y - w)
        elif a == "feddyn" or (a == "fedsmoo" and cfg.params.fedsmoo_variant != "no-regularizer"):
            alpha = cfg.params.dyn_alpha
            for i in S:
                dyn[i] = dyn[i] - alpha * (ys[i] - w)
            h = h - alpha * sum(ys[i] - w for i in S) / N
            if a == "fedsmoo":
                s = rho * unit(
                    sum(mu[i] - (0 if cfg.params.fedsmoo_variant == "fl-simulator" else s_hat[i]) for i in S)
                )
            w = mean_y - h / alpha
        elif a == "fedsmoo":  # no-regularizer: FedAvg server
            s = rho * unit(sum(mu[i] - s_hat[i] for i in S))
            w = mean_y
        elif a == "fedcm":
            delta = (w - mean_y) / (lr * K)
            w = w + cfg.params.server_lr * (mean_y - w)
        elif a == "mimelite":
            full = sum(grad(w, i) for i in S) / len(S)
            momentum = (1 - cfg.params.server_momentum) * full + cfg.params.server_momentum * momentum
            w = mean_y
    return w


CASES = {
    "scaffold-II": dict(algorithm="scaffold", server_lr=0.8),
    "scaffold-I": dict(algorithm="scaffold", scaffold_option="I"),
    "feddyn": dict(algorithm="feddyn", dyn_alpha=0.1),
    "fedcm": dict(algorithm="fedcm", fedcm_alpha=0.3),
    "mimelite": dict(algorithm="mimelite", server_momentum=0.7),
    "fedsmoo-paper": dict(algorithm="fedsmoo", rho=0.1, dyn_alpha=0.1),
    "fedsmoo-fl-simulator": dict(algorithm="fedsmoo", rho=0.1, dyn_alpha=0.1, fedsmoo_variant="fl-simulator"),
    "fedsmoo-no-regularizer": dict(algorithm="fedsmoo", rho=0.1, fedsmoo_variant="no-regularizer"),
    "fedgamma": dict(algorithm="fedgamma", rho=0.1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_engine_equals_per_client_reference(case):
    sim = Simulation(Config(**SMALL, **CASES[case]))
    sim.run()
    err = float((sim.x[0] - reference(sim)).abs().max())
    assert err < 1e-10, f"{case}: max |engine - reference| = {err:.2e}"


def test_the_corrections_change_the_run():
    """Each correction must act: the runs differ from FedAvg (or FedSAM) and between options."""
    final = {}
    for name, extra in {
        "fedavg": dict(algorithm="fedavg"),
        "fedsam": dict(algorithm="fedsam", rho=0.1),
        **CASES,
    }.items():
        sim = Simulation(Config(**SMALL, **{**extra, "server_lr": None}))
        sim.run()
        final[name] = sim.x[0]
    for name in CASES:
        base = final["fedsam" if name.startswith(("fedsmoo", "fedgamma")) else "fedavg"]
        assert float((final[name] - base).abs().max()) > 1e-4, name
    for a, b in [
        ("scaffold-I", "scaffold-II"),
        ("fedsmoo-paper", "fedsmoo-fl-simulator"),
        ("fedsmoo-paper", "fedsmoo-no-regularizer"),
    ]:
        assert float((final[a] - final[b]).abs().max()) > 1e-6, (a, b)


@pytest.mark.parametrize("algorithm, limit", [("fedcm", {"fedcm_alpha": 1.0}), ("mimelite", {"server_momentum": 0.0})])
def test_momentum_baselines_reduce_to_fedavg(algorithm, limit):
    """FedCM with α = 1 and MimeLite with β = 0 are FedAvg (equal client sizes, η_g = 1)."""
    ref = Simulation(Config(**SMALL, algorithm="fedavg"))
    sim = Simulation(Config(**SMALL, algorithm=algorithm, **limit))
    ref.run(), sim.run()
    assert float((sim.x[0] - ref.x[0]).abs().max()) < 1e-12


def test_per_client_state_survives_checkpoint_and_resume(tmp_path):
    """SCAFFOLD's c_i live in the algorithm's state; a resumed run equals an uninterrupted one."""
    cfg = Config(**SMALL, algorithm="scaffold")
    full = Simulation(cfg)
    full.run()
    part = Simulation(cfg.replace(rounds=2))
    part.run()
    path = part.save_checkpoint(tmp_path / "ck.pt")
    resumed = Simulation.resume(path, cfg)
    resumed.run()
    assert torch.equal(resumed.x, full.x)
    assert torch.equal(resumed.state.c_clients, full.state.c_clients)


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("scaffold_option", "III", "scaffold_option"),
        ("dyn_alpha", 0.0, "dyn_alpha"),
        ("fedcm_alpha", 1.5, "fedcm_alpha"),
        ("fedsmoo_variant", "simplified", "fedsmoo_variant"),
    ],
)
def test_bad_values_are_refused(field, value, match):
    algorithm = {
        "scaffold_option": "scaffold",
        "dyn_alpha": "feddyn",
        "fedcm_alpha": "fedcm",
        "fedsmoo_variant": "fedsmoo",
    }[field]
    with pytest.raises(ConfigError, match=match):
        Config(algorithm=algorithm, **{field: value})


def test_server_lr_is_refused_where_the_paper_has_none():
    with pytest.raises(ConfigError, match="server_lr"):
        Config(algorithm="feddyn", server_lr=0.5)
