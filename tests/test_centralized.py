"""Centralized algorithms (FedAvg, FedAvgM, FedProx, FedSAM, FedASAM, MoFedSAM, FedGF) against a per-client reference.

As in ``test_algorithms.py``: float64, full-batch (some on mini-batches too), one ``nn.Module`` per
sampled client, gradients from ``torch.autograd.grad`` over its parameter list,
and the server rules written out from the papers' equations. The engine only
supplies the data, the initial model and which clients each round sampled.
"""

from __future__ import annotations


import pytest
import torch

from dfl_core import Config, Simulation
from dfl_core.engine import RoundLog
from dfl_core.models import build_model
from reference_steps import client_samples, gradient, norm, sam_point  # tests/reference_steps.py

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


def reference(sim: Simulation):
    """Replay the run: returns the global model as a parameter list, and FedGF's c per round."""
    cfg = sim.config
    rho = getattr(cfg.params, "rho", 0.0)  # 0: the algorithm takes no SAM step
    ds = sim.data.dataset
    net = build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64)
    names = [n for n, _ in net.named_parameters()]
    sizes = [p.numel() for p in net.parameters()]
    w = [v.view_as(p).clone() for v, p in zip(torch.split(sim.x0[0], sizes), net.parameters())]
    parts = sim.data.train.client_indices()

    def grad(params, i, batch=None):
        """Client i's gradient at ``params``: over its whole split, or over ``batch`` (its padding masked)."""
        return gradient(net, params, *client_samples(sim.data.train, parts[i], batch))

    delta_mo = [torch.zeros_like(v) for v in w]  # MoFedSAM's Δ
    velocity = [torch.zeros_like(v) for v in w]  # FedAvgM's v
    previous, indicators, cs = None, [], []
    for t in range(cfg.rounds):
        lr = cfg.lr * cfg.lr_decay**t
        S = sim.clients_of_round(t).tolist()
        c = None
        if cfg.algorithm == "fedgf":  # eq. (16): the last W indicators over W, or over the rounds seen so far
            window = indicators[-cfg.params.fedgf_window :]
            seen = cfg.params.fedgf_c_reading == "seen"
            c = (sum(window) / len(window) if window else 0.0) if seen else sum(window) / cfg.params.fedgf_window
        ys = []
        for i in S:
            y = [v.clone() for v in w]
            K = cfg.params.local_steps  # mini-batches: drawn for client i alone (see test_algorithms.reference_run)
            batches = [None] * K if cfg.full_batch else sim.batches(torch.tensor([i]), steps=K, t=t)
            for batch in batches:
                g = grad(y, i, batch)
                if cfg.algorithm == "fedgf" and previous is not None:
                    dg = [p - q for p, q in zip(previous, w)]
                    ng, nd = norm(g), norm(dg)
                    local_pt = [a + rho * b / (ng + 1e-12) for a, b in zip(y, g)]
                    global_pt = [a + rho * b / (nd + 1e-12) for a, b in zip(w, dg)]
                    if cfg.params.fedgf_reading == "points":
                        point = [c * a + (1 - c) * b for a, b in zip(global_pt, local_pt)]
                    else:
                        point = [
                            yy + c * rho * b / (nd + 1e-12) + (1 - c) * rho * a / (ng + 1e-12)
                            for yy, a, b in zip(y, g, dg)
                        ]
                    g = grad(point, i, batch)
                elif rho > 0:  # SAM's (or ASAM's) gradient at the perturbed point y + δ
                    g = grad(sam_point(y, g, names, cfg.params), i, batch)
                if cfg.algorithm == "mofedsam":
                    a = cfg.params.mofedsam_alpha
                    g = [a * gi + (1 - a) * di for gi, di in zip(g, delta_mo)]
                    if cfg.params.mofedsam_variant == "fl-simulator":
                        scale = min(1.0, 10.0 / (norm(g) + 1e-6))
                        g = [gi * scale for gi in g]
                if cfg.algorithm == "fedprox":  # ∇F_i(y) + μ (y − w^t)
                    g = [gi + cfg.params.prox_mu * (p - wk) for gi, p, wk in zip(g, y, w)]
                g = [gi + cfg.weight_decay * p for gi, p in zip(g, y)]
                y = [p - lr * gi for p, gi in zip(y, g)]
            ys.append(y)
        n = torch.tensor([len(parts[i]) for i in S], dtype=torch.float64)
        p_i = n / n.sum()
        update = [sum(p_i[j] * (ys[j][k] - w[k]) for j in range(len(S))) for k in range(len(w))]
        if cfg.algorithm == "fedgf":
            drift = sum(norm([ys[j][k] - w[k] for k in range(len(w))]) for j in range(len(S))) / len(S)
            indicators.append(int(drift > cfg.params.fedgf_threshold))
            cs.append(c)
            previous = w
        if cfg.algorithm == "mofedsam":
            delta_mo = [-u / (lr * cfg.params.local_steps) for u in update]
            if cfg.params.mofedsam_variant == "official-fedgf":
                w = [p - cfg.params.server_lr * d for p, d in zip(w, delta_mo)]
                continue
        if cfg.algorithm == "fedavgm":  # v ← βv + Δ, Δ = Σ p_i (w − y_i); w ← w − η_g v
            velocity = [cfg.params.server_momentum * v - u for v, u in zip(velocity, update)]
            w = [p - cfg.params.server_lr * v for p, v in zip(w, velocity)]
            continue
        w = [p + cfg.params.server_lr * u for p, u in zip(w, update)]
    return torch.cat([v.reshape(-1) for v in w]), cs


CASES = {
    "fedavg": dict(algorithm="fedavg", server_lr=0.7),
    "fedavgm": dict(algorithm="fedavgm", server_momentum=0.8, server_lr=0.7),
    "fedprox": dict(algorithm="fedprox", prox_mu=0.5),
    "fedsam": dict(algorithm="fedsam", rho=0.05),
    "fedasam": dict(algorithm="fedasam", rho=0.3, asam_eta=0.1),
    "fedasam-weights-only": dict(algorithm="fedasam", rho=0.3, asam_scale_all=False),
    "mofedsam-paper": dict(algorithm="mofedsam", mofedsam_alpha=0.3),
    "mofedsam-official-fedgf": dict(
        algorithm="mofedsam", mofedsam_alpha=0.3, mofedsam_variant="official-fedgf", server_lr=0.05
    ),
    "mofedsam-fl-simulator": dict(algorithm="mofedsam", mofedsam_alpha=0.3, mofedsam_variant="fl-simulator"),
    "fedgf-points": dict(algorithm="fedgf", rho=0.1, fedgf_threshold=0.5, fedgf_window=2),
    "fedgf-vectors": dict(algorithm="fedgf", rho=0.1, fedgf_threshold=0.5, fedgf_window=2, fedgf_reading="vectors"),
    "fedgf-seen": dict(algorithm="fedgf", rho=0.1, fedgf_threshold=0.5, fedgf_window=3, fedgf_c_reading="seen"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_centralized_engine_equals_per_client_reference(case):
    sim, log = Simulation(Config(**SMALL, **CASES[case])), RoundLog()
    sim.run(hooks=[log])
    w_ref, cs = reference(sim)
    assert torch.equal(sim.x[0], sim.x[-1])  # every client holds the global model
    err = float((sim.x[0] - w_ref).abs().max())
    assert err < 1e-10, f"{case}: max |engine - reference| = {err:.2e}"
    if sim.config.algorithm == "fedgf":
        assert log.series("fedgf_c") == pytest.approx(cs, abs=0)
        assert 0 < max(cs), "the test should exercise c > 0; lower fedgf_threshold"


@pytest.mark.parametrize("case", ["fedavg", "fedsam", "mofedsam-paper"])
def test_centralized_engine_equals_per_client_reference_on_minibatches(case):
    """Partial participation on mini-batches: a sampled client trains on the batches drawn for it alone."""
    cfg = Config(**{**SMALL, "full_batch": False, "batch_size": 16}, **CASES[case])
    sim = Simulation(cfg)
    sim.run()
    w_ref, _ = reference(sim)
    err = float((sim.x[0] - w_ref).abs().max())
    assert err < 1e-10, f"{case}: max |engine - reference| = {err:.2e}"
    whole = Simulation(cfg.replace(full_batch=True))
    whole.run()
    assert float((sim.x[0] - whole.x[0]).abs().max()) > 1e-6  # the batches matter here


def test_fedgf_readings_differ_once_c_is_positive():
    a = Simulation(Config(**SMALL, **CASES["fedgf-points"]))
    b = Simulation(Config(**SMALL, **CASES["fedgf-vectors"]))
    a.run(), b.run()
    assert float((a.x[0] - b.x[0]).abs().max()) > 1e-6


def test_client_sampling_count_fraction_and_independence_from_algorithm():
    by_count = Simulation(Config(algorithm="fedavg", num_clients=20, clients_per_round=5))
    by_fraction = Simulation(Config(algorithm="fedsam", num_clients=20, client_fraction=0.25))
    for t in range(5):
        s = by_count.clients_of_round(t)
        assert len(s) == 5 and len(set(s.tolist())) == 5 and bool((s.diff() > 0).all())
        assert torch.equal(s, by_fraction.clients_of_round(t))  # same seed, same clients
    draws = {tuple(by_count.clients_of_round(t).tolist()) for t in range(20)}
    assert len(draws) > 15


def test_fedgf_needs_a_threshold():
    from dfl_core import ConfigError

    with pytest.raises(ConfigError, match="fedgf_threshold"):
        Config(algorithm="fedgf")


def test_fedavgm_and_fedprox_reduce_to_fedavg_and_differ_from_it():
    base = dict(SMALL, server_lr=0.7)
    ref = Simulation(Config(algorithm="fedavg", **base))
    zero_beta = Simulation(Config(algorithm="fedavgm", server_momentum=0.0, **base))
    zero_mu = Simulation(Config(algorithm="fedprox", prox_mu=0.0, **base))
    beta = Simulation(Config(algorithm="fedavgm", server_momentum=0.9, **base))
    mu = Simulation(Config(algorithm="fedprox", prox_mu=1.0, **base))
    for s in (ref, zero_beta, zero_mu, beta, mu):
        s.run()
    assert float((zero_beta.x[0] - ref.x[0]).abs().max()) < 1e-12
    assert float((zero_mu.x[0] - ref.x[0]).abs().max()) < 1e-12
    assert float((beta.x[0] - ref.x[0]).abs().max()) > 1e-4
    assert float((mu.x[0] - ref.x[0]).abs().max()) > 1e-4
