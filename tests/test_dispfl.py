"""DisPFL against a plain loop-over-clients reference, in float64 and full-batch mode.

As in ``test_algorithms.py``: one ``nn.Module`` per client, gradients from
``torch.autograd.grad`` over its parameter list, and every step of a round
written out per client and per layer: the sparse aggregation as a sum over the
neighbours that hold each coordinate, masked SGD steps, pruning and regrowth
by sorting Python lists (magnitudes in float32, ties to the lower index). Only the initial masks (a
random draw) and the mixing matrices come from the engine; the masks' layer
counts are checked against numbers worked out by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dfl_core import Config, ConfigError, Simulation
from dfl_core.algorithms.dispfl import drop_fraction, initial_masks
from dfl_core.rng import purpose_seed
from dfl_core.models import build_model

ROUNDS = 3
SMALL = dict(
    algorithm="dispfl",
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
    local_steps=3,
    num_neighbors=2,
)

# ERK at density 0.5 for the 2NN on 8x8 digits (64-200-200-10), worked out by hand: the biases
# (raw density 1) and then the last weight (210/2000 · ε > 1) saturate; ε = 25195/664 for the others,
# so 200x64 keeps int(0.0206·ε·12800) = 10017 and 200x200 keeps int(0.01·ε·40000) = 15177.
ERK_COUNTS_2NN_DIGITS = [10017, 200, 15177, 200, 2000, 10]


def reference_run(sim: Simulation, rounds: int, holders_only: bool = True):
    """Replay ``rounds`` rounds of DisPFL one client at a time; returns (params, masks), per client lists.

    ``holders_only=False`` averages over all neighbours, holders or not (a wrong DisPFL, to show
    that the comparison can fail).
    """
    cfg = sim.config
    ds = sim.data.dataset
    m = cfg.num_clients
    X, Y = sim.data.train.x, sim.data.train.y
    parts = sim.data.train.client_indices()
    net = build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64)
    sizes = [p.numel() for p in net.parameters()]

    def split(row):
        return [v.view_as(p).clone() for v, p in zip(torch.split(row, sizes), net.parameters())]

    def grad(params, i):
        with torch.no_grad():
            for p, v in zip(net.parameters(), params):
                p.copy_(v)
        idx = torch.as_tensor(parts[i])
        loss = F.cross_entropy(net(X[idx]), Y[idx])
        return [g.detach() for g in torch.autograd.grad(loss, list(net.parameters()))]

    gen = torch.Generator().manual_seed(purpose_seed(cfg.seed, "masks"))
    flat_masks = initial_masks(
        sim.model, m, cfg.params.dispfl_density, gen, shared=cfg.params.dispfl_mask_init == "shared"
    )
    masks = [split(flat_masks[i]) for i in range(m)]
    params = [[p * mk for p, mk in zip(split(sim.x0[i]), masks[i])] for i in range(m)]
    sent = masks
    for t in range(rounds):
        lr = cfg.lr * cfg.lr_decay**t
        (M,) = sim.matrices(t)
        W = M.W
        drop = (
            cfg.params.dispfl_anneal / 2 * (1 + math.cos(t * math.pi / (cfg.params.dispfl_anneal_rounds or cfg.rounds)))
        )
        new_params, new_masks = [], []
        for i in range(m):
            nbrs = [j for j in range(m) if W[i, j] != 0]
            y = []
            for k in range(len(sizes)):
                if holders_only:
                    num = sum(W[i, j] * sent[j][k].double() * params[j][k] for j in nbrs)
                    den = sum(W[i, j] * sent[j][k].double() for j in nbrs)
                    avg = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)
                else:
                    avg = sum(W[i, j] * params[j][k] for j in nbrs)
                y.append(avg * masks[i][k])
            for _ in range(cfg.params.local_steps):
                g = grad(y, i)
                y = [yk - lr * (gk * mk + cfg.weight_decay * yk) for yk, gk, mk in zip(y, g, masks[i])]
            g = grad(y, i)  # regrowth scores at the trained model
            mask = []
            for yk, gk, mk in zip(y, g, masks[i]):
                # magnitudes compared in float32 (as the engine does), so that gradients equal up to
                # rounding (standardised digits have identical pixel columns) tie
                yv, gv = yk.reshape(-1).abs().float().tolist(), gk.reshape(-1).abs().float().tolist()
                mv = mk.reshape(-1).tolist()
                active = [j for j, on in enumerate(mv) if on]
                n_swap = math.ceil(drop * len(active))
                for j in sorted(active, key=lambda j: (yv[j], j))[:n_swap]:
                    mv[j] = False
                inactive = [j for j, on in enumerate(mv) if not on]
                for j in sorted(inactive, key=lambda j: (-gv[j], j))[:n_swap]:
                    mv[j] = True
                mask.append(torch.tensor(mv).view_as(mk))
            new_params.append(y)
            new_masks.append(mask)
        params, sent, masks = new_params, masks, new_masks
    return params, masks


def flat(rows) -> torch.Tensor:
    return torch.stack([torch.cat([p.reshape(-1) for p in ps]) for ps in rows])


@pytest.mark.parametrize("topology", ["random-as-coded", "ring"])
def test_engine_equals_per_client_reference(topology):
    sim = Simulation(Config(topology=topology, **SMALL))
    sim.run()
    params, masks = reference_run(sim, ROUNDS)
    assert sim.x.dtype == torch.float64
    assert torch.equal(sim.state.masks, flat(masks))
    err = float((sim.x - flat(params)).abs().max())
    assert err < 1e-10, f"{topology}: max |engine - reference| = {err:.2e}"
    assert float(sim.history.final["mask_change"]) > 0  # the masks moved


def test_reference_detects_an_average_over_non_holders():
    sim = Simulation(Config(**SMALL))
    sim.run()
    params, _ = reference_run(sim, ROUNDS, holders_only=False)
    assert float((sim.x - flat(params)).abs().max()) > 1e-3


@pytest.mark.parametrize("regrow", ["gradient", "random"])
@pytest.mark.parametrize("mask_init", ["independent", "shared"])
def test_masks_keep_their_layer_counts_and_are_personal(regrow, mask_init):
    sim = Simulation(Config(dispfl_regrow=regrow, dispfl_mask_init=mask_init, **SMALL))
    sim.step()
    first = sim.state.sent_masks.clone()  # the initial masks m^0
    sim.run()
    masks, sent = sim.state.masks, sim.state.sent_masks
    for mk in (first, masks, sent):
        for o, shape, count in zip(sim.model.offsets, sim.model.shapes, ERK_COUNTS_2NN_DIGITS):
            assert (mk[:, o : o + shape.numel()].sum(1) == count).all()
    assert not (sim.x[~sent] != 0).any()  # x^T lives on the masks it was trained with
    assert not torch.equal(masks, first)
    distinct = {tuple(row.nonzero().flatten().tolist()) for row in masks}
    assert len(distinct) == SMALL["num_clients"]  # personalized
    if mask_init == "shared":
        assert all(torch.equal(row, first[0]) for row in first)


def test_bits_count_a_bitmap_and_the_nonzeros_per_message():
    sim = Simulation(Config(**SMALL))
    sim.run()
    nonzeros = sum(ERK_COUNTS_2NN_DIGITS)
    messages = [M.num_messages for t in range(ROUNDS) for M in sim.matrices(t)]
    assert messages == [SMALL["num_clients"] * SMALL["num_neighbors"]] * ROUNDS
    assert sim.transmissions == sum(messages)
    assert sim.bits_sent == sum(messages) * (sim.model.d + 32 * nonzeros)


def test_drop_fraction_is_a_half_cosine():
    assert drop_fraction(0.5, 0, 10) == 0.5
    assert math.isclose(drop_fraction(0.5, 5, 10), 0.25)
    assert math.isclose(drop_fraction(0.5, 10, 10), 0.0, abs_tol=1e-15)
    assert drop_fraction(0.5, 13, 10) == drop_fraction(0.5, 10, 10)  # masks fixed after T


def test_client_chunks_do_not_change_masks_or_results():
    whole = Simulation(Config(client_chunk=6, **SMALL))
    chunked = Simulation(Config(client_chunk=4, **SMALL))  # chunks of 4 and 2 clients
    whole.run(), chunked.run()
    assert torch.equal(whole.state.masks, chunked.state.masks)
    assert float((whole.x - chunked.x).abs().max()) < 1e-12


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    cfg = Config(dispfl_regrow="random", dispfl_anneal_rounds=ROUNDS, **{**SMALL, "full_batch": False})
    whole = Simulation(cfg)
    whole.run()
    first = Simulation(cfg.replace(rounds=2))
    first.run(checkpoint=tmp_path / "c.pt")
    resumed = Simulation.resume(tmp_path / "c.pt", cfg)
    resumed.run()
    assert torch.equal(resumed.x, whole.x)
    assert torch.equal(resumed.state.masks, whole.state.masks)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(dispfl_density=0.0), "dispfl_density must be in (0.0, 1.0], got 0.0"),
        (dict(dispfl_density=1.5), "dispfl_density must be in (0.0, 1.0], got 1.5"),
        (dict(dispfl_anneal=-0.1), "dispfl_anneal must be in [0.0, 1.0], got -0.1"),
        (dict(dispfl_anneal_rounds=0), "dispfl_anneal_rounds must be >= 1, got 0"),
        (dict(dispfl_regrow="magnitude"), "unknown dispfl_regrow 'magnitude'; allowed: gradient, random"),
        (dict(dispfl_mask_init="same"), "unknown dispfl_mask_init 'same'; allowed: independent, shared"),
        (dict(gossip_steps=2), "gossip_steps=2 is not allowed for algorithm 'dispfl'"),
        (
            dict(algorithm="dfedavg"),
            "dispfl_density=0.3 is not used by algorithm 'dfedavg'; algorithms that use it: dispfl",
        ),
    ],
)
def test_bad_values_are_refused_with_a_clear_message(changes, message):
    base = dict(algorithm="dispfl", dispfl_density=0.3) if changes.get("algorithm") else dict(algorithm="dispfl")
    with pytest.raises(ConfigError) as err:
        Config(**{**base, **changes})
    assert message in str(err.value)


def test_a_density_that_leaves_a_weight_tensor_empty_is_refused_with_the_smallest_that_does_not():
    cfg = Config(algorithm="dispfl", dispfl_density=1e-9, num_clients=4, rounds=1)
    with pytest.raises(ConfigError, match=r"dispfl_density=1e-09 leaves weight tensor 0 .* at least ([0-9.e-]+)") as e:
        Simulation(cfg)
    smallest = float(str(e.value).rsplit("at least ", 1)[1].split()[0])
    Simulation(cfg.replace(params=None, dispfl_density=smallest))  # the density it names works
