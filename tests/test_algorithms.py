"""Every algorithm against a plain loop-over-clients reference, in float64, in full-batch mode (and some on mini-batches).

The reference below is written independently of the engine: one client at a
time, an ordinary ``nn.Module`` per client, ``torch.autograd.grad`` over its
parameter list, SAM's norm as a Python sum over the parameter tensors, and
gossip as an explicit sum over neighbours with the engine's mixing matrices.
The engine's vectorised sums reduce in another order, so the two agree to
rounding (1e-10), not bit for bit.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from dfl_core import ALGORITHMS, Config, Simulation
from dfl_core.models import build_model
from reference_steps import client_samples, gradient, sam_point  # tests/reference_steps.py

ROUNDS = 3


def reference_run(sim: Simulation, rounds: int, gossip=None) -> list[list[torch.Tensor]]:
    """Replay ``rounds`` rounds of ``sim.config`` one client at a time; returns per-client parameter lists.

    ``gossip(t, models, matrices)`` replaces the exact gossip below (a list of per-client parameter lists in and
    out), e.g. the compressed gossip of tests/test_compressed_gossip.py. Without ``full_batch``, client i's step k
    of round t uses the mini-batch ``sim.batches([i], t=t)[k]`` drawn for client i alone (its padding masked).
    """
    cfg = sim.config
    ds = sim.data.dataset
    rho = getattr(cfg.params, "rho", 0.0)  # 0: the algorithm takes no SAM step
    momentum = getattr(cfg.params, "momentum", 0.0)  # 0: no heavy ball
    m = cfg.num_clients
    parts = sim.data.train.client_indices()
    models = []
    for i in range(m):
        net = build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64)
        with torch.no_grad():  # load client i's initial parameters
            offset = 0
            for p in net.parameters():
                p.copy_(sim.x0[i, offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        models.append(net)

    def grads_at(net, params, i, batch=None):
        """Gradient of client i's mean loss at ``params``: over its whole train split, or over ``batch``."""
        return gradient(net, params, *client_samples(sim.data.train, parts[i], batch))

    names = [n for n, _ in models[0].named_parameters()]
    params = [[p.detach().clone() for p in net.parameters()] for net in models]
    kept = [[torch.zeros_like(p) for p in ps] for ps in params]  # each client's heavy-ball buffer, across rounds
    for t in range(rounds):
        lr = cfg.lr * cfg.lr_decay**t
        z = []
        for i in range(m):
            y = [p.clone() for p in params[i]]
            buf = [torch.zeros_like(p) for p in y] if cfg.reset_momentum else kept[i]
            steps = cfg.params.local_steps
            batches = [None] * steps if cfg.full_batch else sim.batches(torch.tensor([i]), steps=steps, t=t)
            for batch in batches:
                g = grads_at(models[i], y, i, batch)
                if rho > 0:  # SAM's (or ASAM's) gradient at the perturbed point y + δ, on the same batch
                    g = grads_at(models[i], sam_point(y, g, names, cfg.params), i, batch)
                g = [gj + cfg.weight_decay * yj for gj, yj in zip(g, y)]
                if momentum > 0:
                    buf = [momentum * bj + gj for bj, gj in zip(buf, g)]
                    g = buf
                y = [yj - lr * gj for yj, gj in zip(y, g)]
            kept[i] = buf
            z.append(y)
        mixed = params if cfg.algorithm == "dpsgd" else z  # D-PSGD mixes x^t, the others z^t
        if gossip is not None:
            mixed = gossip(t, mixed, sim.matrices(t))
        for M in [] if gossip is not None else sim.matrices(t):
            W = M.W
            mixed = [
                [sum(W[i, j] * mixed[j][k] for j in range(m) if W[i, j] != 0) for k in range(len(mixed[i]))]
                for i in range(m)
            ]
        if cfg.algorithm == "dpsgd":  # x^{t+1} = W x^t - η g(x^t)
            mixed = [[mk + (zk - pk) for mk, zk, pk in zip(mixed[i], z[i], params[i])] for i in range(m)]
        params = mixed
    return params


def flat(params: list[list[torch.Tensor]]) -> torch.Tensor:
    return torch.stack([torch.cat([p.reshape(-1) for p in ps]) for ps in params])


SMALL = dict(
    dataset="digits",
    train_size=240,
    test_size=60,
    num_clients=6,
    rounds=ROUNDS,
    full_batch=True,
    dtype="float64",
    device="cpu",
    lr=0.2,
    lr_decay=0.9,
    weight_decay=1e-3,
    eval_every=ROUNDS,
)


# dfedavgm-q mixes quantized model differences, x + W·Q(z − x); its own reference test is in
# tests/test_instruments_quantize.py. DisPFL's sparse rounds have theirs in tests/test_dispfl.py.
DECENTRALIZED = [a for a in ALGORITHMS if ALGORITHMS[a].kind == "decentralized" and a not in ("dfedavgm-q", "dispfl")]


@pytest.mark.parametrize("topology", ["ring", "random-symmetric", "random-as-coded"])
@pytest.mark.parametrize("algorithm", DECENTRALIZED)
def test_engine_equals_per_client_reference(algorithm, topology):
    extra = {}
    if "rho" in ALGORITHMS[algorithm].defaults:
        extra["rho"] = 0.05
    if "momentum" in ALGORITHMS[algorithm].defaults:
        extra["momentum"] = 0.5
    if algorithm != "dpsgd":
        extra["local_steps"] = 3
    if algorithm == "dfedsam-mgs":
        extra["gossip_steps"] = 3
    cfg = Config(algorithm=algorithm, topology=topology, num_neighbors=3, max_degree=4, **SMALL, **extra)
    sim = Simulation(cfg)
    sim.run()
    ref = flat(reference_run(sim, ROUNDS))
    assert sim.x.dtype == torch.float64
    assert not torch.equal(sim.x, sim.x0)  # something happened
    err = float((sim.x - ref).abs().max())
    assert err < 1e-10, f"{algorithm}/{topology}: max |engine - reference| = {err:.2e}"


@pytest.mark.parametrize("algorithm", ["dfedavgm", "dfedsam", "dfedsam-mgs"])
def test_engine_equals_per_client_reference_on_minibatches(algorithm):
    """Mini-batches, drawn for each client alone in the reference: the engine uses batch k of round t at step k of
    round t, for each client, whichever clients it trains with (client_chunk=4: chunks of 4 and 2)."""
    extra = {"momentum": 0.5} if algorithm == "dfedavgm" else {"rho": 0.05}
    small = {**SMALL, "full_batch": False, "batch_size": 16, "client_chunk": 4}
    cfg = Config(algorithm=algorithm, topology="ring", local_steps=3, **small, **extra)
    sim = Simulation(cfg)
    sim.run()
    err = float((sim.x - flat(reference_run(sim, ROUNDS))).abs().max())
    assert err < 1e-10, f"max |engine - reference| = {err:.2e}"
    whole = Simulation(cfg.replace(full_batch=True))
    whole.run()
    assert float((sim.x - whole.x).abs().max()) > 1e-6  # the batches matter here


@pytest.mark.parametrize("scale_all", [True, False])
@pytest.mark.parametrize("algorithm", ["dfedsam", "dfedsam-mgs"])
def test_asam_on_a_graph_equals_per_client_reference(algorithm, scale_all):
    cfg = Config(
        algorithm=algorithm,
        sam_variant="asam",
        rho=0.3,
        asam_eta=0.1,
        asam_scale_all=scale_all,
        local_steps=3,
        topology="ring",
        **SMALL,
    )
    sim = Simulation(cfg)
    sim.run()
    err = float((sim.x - flat(reference_run(sim, ROUNDS))).abs().max())
    assert err < 1e-10, f"max |engine - reference| = {err:.2e}"
    plain = Simulation(cfg.replace(sam_variant="sam"))
    plain.run()
    assert float((sim.x - plain.x).abs().max()) > 1e-6  # ASAM is not SAM here


def test_fresh_matrix_per_gossip_step_uses_a_new_matrix_each_step():
    cfg = Config(
        algorithm="dfedsam-mgs",
        topology="random-symmetric",
        max_degree=4,
        fresh_matrix_per_gossip_step=True,
        gossip_steps=3,
        rho=0.05,
        local_steps=2,
        **SMALL,
    )
    sim = Simulation(cfg)
    Ws = [M.W for M in sim.matrices(1)]
    assert len(Ws) == 3 and not np.allclose(Ws[0], Ws[1])
    sim.run()
    err = float((sim.x - flat(reference_run(sim, ROUNDS))).abs().max())
    assert err < 1e-10


@pytest.mark.parametrize("strategy", ["batched", "vmap", "loop"])
@pytest.mark.parametrize("model", ["2nn", "cnn-mnist"])
def test_forward_strategies_agree(model, strategy):
    """All three ways of evaluating m models at once give client i's own logits."""
    cfg = Config(algorithm="dfedavg", model=model, forward_strategy=strategy, **SMALL)
    sim = Simulation(cfg)
    x = sim.x0 + 0.01 * torch.randn(sim.x0.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    inputs = sim.data.train.x[sim.data.train.index[:, :5]]  # (m, 5, 1, 8, 8)
    logits = sim.model.forward(x, inputs)
    for i in range(cfg.num_clients):
        expect = sim.model.forward_one(x[i], inputs[i])
        assert torch.allclose(logits[i], expect, atol=1e-12, rtol=0)


def test_minibatches_walk_a_permutation_of_each_clients_data():
    cfg = Config(algorithm="dfedavg", dataset="digits", num_clients=5, batch_size=8, local_steps=3)
    sim = Simulation(cfg)
    counts = sim.data.train.counts
    batches = sim.batches(torch.arange(5), steps=int(counts.min()) // 8)
    seen = [set() for _ in range(cfg.num_clients)]
    owned = [set(p.tolist()) for p in sim.data.train.client_indices()]
    for inputs, labels, weights in batches:
        assert inputs.shape[:2] == (5, 8) and bool((weights == 1).all())
        for i in range(5):
            rows = (sim.data.train.x.flatten(1) == inputs[i].flatten(1)[:, None]).all(-1)  # (8, N)
            ids = {int(r.nonzero()[0]) for r in rows}
            assert ids <= owned[i], "a client sampled data it does not own"
            assert not ids & seen[i], "a sample repeated before the client's permutation was used up"
            seen[i] |= ids


def test_changing_the_topology_does_not_change_data_init_or_batches():
    a = Simulation(Config(algorithm="dfedavg", topology="ring"))
    b = Simulation(Config(algorithm="dfedavg", topology="complete"))
    assert torch.equal(a.x0, b.x0)
    assert torch.equal(a.data.train.index, b.data.train.index)
    assert all(torch.equal(p, q) for (p, *_), (q, *_) in zip(a.batches(steps=3), b.batches(steps=3)))


def test_same_seed_same_run_and_different_seed_different_run():
    cfg = Config(algorithm="dfedsam", rounds=2, num_clients=8)
    h1, h2 = (Simulation(cfg).run() for _ in range(2))
    h3 = Simulation(cfg.replace(seed=1)).run()
    assert h1.records[-1]["client_test_acc"] == h2.records[-1]["client_test_acc"]
    assert h1.final["consensus_distance"] == h2.final["consensus_distance"]
    assert h1.final["consensus_distance"] != h3.final["consensus_distance"]


@pytest.mark.parametrize("algorithm", ["dfedavgm", "dfedsam-mgs"])
def test_client_chunks_do_not_change_results(algorithm):
    base = Config(algorithm=algorithm, topology="ring", reset_momentum=False, **SMALL)
    whole = Simulation(base.replace(client_chunk=6))
    chunked = Simulation(base.replace(client_chunk=4))  # chunks of 4 and 2 clients
    whole.run(), chunked.run()
    assert float((whole.x - chunked.x).abs().max()) < 1e-12


def test_kept_momentum_equals_per_client_reference():
    """reset_momentum=False: each client's heavy-ball buffer carries over from round to round, never gossiped."""
    cfg = Config(algorithm="dfedavgm", momentum=0.5, local_steps=3, reset_momentum=False, topology="ring", **SMALL)
    sim = Simulation(cfg)
    sim.run()
    err = float((sim.x - flat(reference_run(sim, ROUNDS))).abs().max())
    assert err < 1e-10, f"max |engine - reference| = {err:.2e}"


def test_momentum_buffer_persists_across_rounds_when_asked():
    base = Config(algorithm="dfedavgm", momentum=0.9, rounds=2, **{k: v for k, v in SMALL.items() if k != "rounds"})
    reset, keep = Simulation(base), Simulation(base.replace(reset_momentum=False))
    reset.run(), keep.run()
    assert float((reset.x - keep.x).abs().max()) > 1e-6
