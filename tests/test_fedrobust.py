"""FedRobust against a per-client reference, its reduction to FedAvg, the affine adversary, config errors.

As in ``test_centralized.py``: float64, full-batch, one ``nn.Module`` per sampled client, explicit
Λ_i and δ_i tensors, gradients from ``torch.autograd.grad``, and the update written out from the
(reconstructed) Algorithm 1. The engine only supplies the data, the initial model and which clients
each round sampled.
"""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from dfl_core import Config, ConfigError, Simulation
from dfl_core.models import build_model

from dfl_core.algorithms import fedrobust
from dfl_core.instruments import robustness as fr  # the adversary of the paper's evaluation

ROUNDS = 3
SMALL = dict(
    algorithm="fedrobust",
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
    model="2nn",
    robust_lambda=0.5,
    robust_ascent_lr=0.3,
    server_lr=0.8,
)


def reference(sim: Simulation):
    """Replay the run client by client: the global model and every client's (Λ_i, δ_i)."""
    cfg = sim.config
    ds = sim.data.dataset
    net = build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64)
    sizes = [p.numel() for p in net.parameters()]
    w = [v.view_as(p).clone() for v, p in zip(torch.split(sim.x0[0], sizes), net.parameters())]
    parts = sim.data.train.client_indices()
    X, Y = sim.data.train.x, sim.data.train.y
    D = X[0].numel()
    Lams = [torch.eye(D, dtype=torch.float64) for _ in range(cfg.num_clients)]
    dlts = [torch.zeros(D, dtype=torch.float64) for _ in range(cfg.num_clients)]

    def grads(params, Lam, dlt, i):
        with torch.no_grad():
            for p, v in zip(net.parameters(), params):
                p.copy_(v)
        Lam = Lam.clone().requires_grad_(True)
        dlt = dlt.clone().requires_grad_(True)
        idx = torch.as_tensor(parts[i])
        shifted = (X[idx].reshape(len(idx), D) @ Lam.T + dlt).reshape(X[idx].shape)
        loss = F.cross_entropy(net(shifted), Y[idx])
        g = torch.autograd.grad(loss, [*net.parameters(), Lam, dlt])
        return [t.detach() for t in g[:-2]], g[-2].detach(), g[-1].detach()

    eye = torch.eye(D, dtype=torch.float64)
    for t in range(cfg.rounds):
        lr = cfg.lr * cfg.lr_decay**t
        S = sim.clients_of_round(t).tolist()
        ys = []
        for i in S:
            y = [v.clone() for v in w]
            for _ in range(cfg.params.local_steps):
                g_w, g_L, g_d = grads(y, Lams[i], dlts[i], i)
                y = [p - lr * (g + cfg.weight_decay * p) for p, g in zip(y, g_w)]
                Lams[i] = Lams[i] + cfg.params.robust_ascent_lr * (g_L - 2 * cfg.params.robust_lambda * (Lams[i] - eye))
                dlts[i] = dlts[i] + cfg.params.robust_ascent_lr * (g_d - 2 * cfg.params.robust_lambda * dlts[i])
            ys.append(y)
        n = torch.tensor([len(parts[i]) for i in S], dtype=torch.float64)
        p_i = n / n.sum()
        w = [wk + cfg.params.server_lr * sum(p_i[j] * (ys[j][k] - wk) for j in range(len(S))) for k, wk in enumerate(w)]
    return torch.cat([v.reshape(-1) for v in w]), torch.stack(Lams), torch.stack(dlts)


def test_fedrobust_engine_equals_per_client_reference():
    sim = Simulation(Config(**SMALL))
    sim.run()
    w_ref, Lam_ref, dlt_ref = reference(sim)
    assert torch.equal(sim.x[0], sim.x[-1])
    assert float((sim.x[0] - w_ref).abs().max()) < 1e-10
    assert float((sim.state.shift_matrix - Lam_ref).abs().max()) < 1e-10
    assert float((sim.state.shift_offset - dlt_ref).abs().max()) < 1e-10
    # the test exercises the ascent: sampled clients moved away from (I, 0), the others did not
    sampled = set().union(*(sim.clients_of_round(t).tolist() for t in range(ROUNDS)))
    moved = {i for i in range(8) if float((Lam_ref[i] - torch.eye(64, dtype=torch.float64)).abs().max()) > 1e-4}
    assert moved == sampled and len(sampled) < 8
    assert sim.transmissions == 2 * 3 * ROUNDS


def test_zero_ascent_lr_is_fedavg_and_positive_differs():
    base = {k: v for k, v in SMALL.items() if not k.startswith("robust")}
    fedavg = Simulation(Config(**{**base, "algorithm": "fedavg"}))
    frozen = Simulation(Config(**base, robust_ascent_lr=0.0))
    robust = Simulation(Config(**base, robust_ascent_lr=0.3))
    for s in (fedavg, frozen, robust):
        s.run()
    assert torch.equal(frozen.x[0], fedavg.x[0])  # Λ = I, δ = 0 throughout
    assert torch.equal(frozen.state.shift_matrix, torch.eye(64, dtype=torch.float64).expand(8, 64, 64))
    assert float((robust.x[0] - fedavg.x[0]).abs().max()) > 1e-4


def test_resumed_run_keeps_the_clients_shifts(tmp_path):
    whole = Simulation(Config(**SMALL))
    whole.run()
    part = Simulation(Config(**{**SMALL, "rounds": 1}))
    part.run(checkpoint=tmp_path / "c.pt")
    resumed = Simulation.resume(tmp_path / "c.pt", Config(**SMALL))
    resumed.run()
    assert torch.equal(resumed.x[0], whole.x[0])
    assert torch.equal(resumed.state.shift_matrix, whole.state.shift_matrix)


def test_adversary_lowers_accuracy_within_its_bounds():
    sim = Simulation(Config(**{**SMALL, "rounds": 15, "eval_every": 15, "test_size": None}))
    sim.run()
    out = fr.adversarial_affine_accuracy(sim, lambda_radius=0.4, delta_radius=1.0, steps=10)
    assert out["clean_acc"] > 0.6
    assert out["robust_acc"] < out["clean_acc"] - 0.05 and out["robust_loss"] > out["clean_loss"]
    assert out["lambda_dist"] <= 0.4 + 1e-9 and out["delta_norm"] <= 1.0 + 1e-9
    assert out["lambda_dist"] > 0.2  # the attack used its budget
    eye = torch.eye(64, dtype=torch.float64)
    assert float(torch.linalg.matrix_norm(out["Lambda"] - eye)) == pytest.approx(out["lambda_dist"])
    # the reported robust accuracy is the model's accuracy at the returned shift
    x, y = sim.data.test.x, sim.data.test.y
    shifted = (x.reshape(len(y), -1) @ out["Lambda"].T + out["delta"]).reshape(x.shape)
    acc = float((sim.model.forward_one(sim.x[0], shifted).argmax(1) == y).double().mean())
    assert acc == pytest.approx(out["robust_acc"])
    zero = fr.adversarial_affine_accuracy(sim, lambda_radius=0.0, delta_radius=0.0, steps=3)
    assert zero["robust_acc"] == zero["clean_acc"] == out["clean_acc"]


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(robust_lambda=-1.0), r"robust_lambda must be in \[0.0, inf\), got -1.0"),
        (dict(robust_ascent_lr=float("nan")), "robust_ascent_lr must be a finite number, got nan"),
        (dict(robust_ascent_lr="0.1"), "robust_ascent_lr must be a finite number"),
        (
            dict(algorithm="fedavg"),
            "robust_lambda=0.5 is not used by algorithm 'fedavg'; algorithms that use it: fedrobust",
        ),
        (dict(momentum=0.9), "momentum=0.9 is not used by algorithm 'fedrobust'"),
    ],
)
def test_bad_config_values_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        Config(**{**SMALL, **changes})


def test_defaults_and_memory_limit(monkeypatch):
    cfg = Config(algorithm="fedrobust")
    assert (cfg.params.robust_lambda, cfg.params.robust_ascent_lr, cfg.params.server_lr) == (1.0, 0.1, 1.0)
    monkeypatch.setattr(fedrobust, "MAX_SHIFT_BYTES", 1000)
    with pytest.raises(ConfigError, match=r"full 64x64 matrix .* 8 clients need 0\.0 GiB"):
        Simulation(Config(**SMALL))  # refused before any training
    monkeypatch.undo()
    sim = Simulation(Config(**SMALL))
    with pytest.raises(ValueError, match="lambda_radius must be a finite number >= 0"):
        fr.adversarial_affine_accuracy(sim, lambda_radius=-0.1)
