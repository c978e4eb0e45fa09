"""Local rules: every gradient evaluation of a step is the rule's own call of ``step.gradient``; typed rule states.

Checked on quadratics F_i(y) = ½ yᵀA_i y − b_iᵀy (exact gradients, one per
client row), and on the engine's trainer: SGD evaluates once per step, SAM
twice (at y, then at y + ρg/‖g‖ on the same batch); states are NamedTuples
that survive row selection, cloning, checkpoint files and the format before them.
"""

from __future__ import annotations

import io

import pytest
import torch

from dfl_core.checkpoint import to_cpu, to_device
from dfl_core.engine.trainer import tree_assign_rows, tree_rows
from dfl_core.errors import DivergenceError
from dfl_core.local import (
    EMPTY,
    EmptyState,
    LocalStep,
    Momentum,
    asam,
    chain,
    control_variate,
    corrected_sam,
    fedgf_perturbation,
    local_step,
    map_state,
    sam,
    sam_perturbation,
    sgd,
    trace,
    typed_state,
)

M, D = 3, 5


class Quadratic:
    """Client i's F_i(y) = ½ yᵀA_i y − b_iᵀy; records every point its gradient is asked at."""

    def __init__(self, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(M, D, D, generator=gen, dtype=torch.float64)
        self.A = a @ a.transpose(1, 2) / D + torch.eye(D, dtype=torch.float64)
        self.b = torch.randn(M, D, generator=gen, dtype=torch.float64)
        self.points: list[torch.Tensor] = []

    def grad(self, y):
        return torch.einsum("mij,mj->mi", self.A, y) - self.b

    def loss_and_grad(self, y, clients):
        self.points.append(y.clone())
        loss = 0.5 * torch.einsum("mi,mij,mj->m", y, self.A, y) - (self.b * y).sum(1)
        return self.grad(y), loss


def start() -> torch.Tensor:
    return torch.randn(M, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def one_step(rule, y, q: Quadratic, lr=0.1, clients=None):
    step = LocalStep(q.loss_and_grad, lr, clients=torch.arange(M) if clients is None else clients)
    u, state = local_step(rule, rule.init(y), y, step)
    return u, state, step


def test_sgd_evaluates_the_gradient_once_at_y():
    q, y = Quadratic(), start()
    u, state, step = one_step(sgd(), y, q)
    assert len(q.points) == len(step.losses) == 1 and torch.equal(q.points[0], y)
    assert torch.equal(u, -0.1 * q.grad(y))
    assert state == (EMPTY,)  # chain(scale_by_lr()): one empty state


def test_sam_evaluates_at_y_then_at_the_perturbed_point_of_the_same_step():
    q, y, rho = Quadratic(), start(), 0.05
    u, _, step = one_step(chain(sam(rho), sgd()), y, q)
    g = q.grad(y)
    perturbed = y + rho * g / (g.norm(dim=1, keepdim=True) + 1e-12)
    assert len(q.points) == len(step.losses) == 2
    assert torch.equal(q.points[0], y)
    assert torch.allclose(q.points[1], perturbed, rtol=0, atol=1e-15)
    assert torch.allclose(u, -0.1 * q.grad(perturbed), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["asam", "corrected_sam", "fedgf_perturbation"])
def test_every_sharpness_aware_piece_evaluates_twice_first_at_y(name):
    q, y = Quadratic(), start()
    piece = {
        "asam": lambda: asam(0.05, 0.01),
        "corrected_sam": lambda: corrected_sam(
            0.05, torch.zeros(M, D, dtype=torch.float64), torch.zeros(D, dtype=torch.float64)
        ),
        "fedgf_perturbation": lambda: fedgf_perturbation(
            0.05, 0.5, torch.zeros(D, dtype=torch.float64), torch.zeros(D, dtype=torch.float64)
        ),
    }[name]()
    assert piece.forms_gradient
    one_step(chain(piece, sgd()), y, q)
    assert len(q.points) == 2 and torch.equal(q.points[0], y) and not torch.equal(q.points[1], y)


def test_pieces_after_the_gradient_transform_it_in_order():
    q, y = Quadratic(), start()
    c_i = torch.randn(M, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    u, state, _ = one_step(chain(control_variate(c_i), sgd(weight_decay=0.01, momentum=0.9)), y, q)
    v = q.grad(y) - c_i + 0.01 * y  # momentum 0.9 · 0 + g
    assert torch.equal(u, -0.1 * v) and len(q.points) == 1
    assert torch.equal(state[1][1].velocity, v)


def test_sam_steps_follow_dfedsam_eq_1_over_k_steps():
    q, y, rho, eta = Quadratic(), start(), 0.05, 0.1
    rule = chain(sam(rho), sgd())
    state, hand = rule.init(y), y
    for _ in range(4):
        u, state = local_step(rule, state, y, LocalStep(q.loss_and_grad, eta))
        y = y + u
        g = q.grad(hand)
        hand = hand - eta * q.grad(hand + sam_perturbation(g, rho))
    assert float((y - hand).abs().max()) < 1e-14 and len(q.points) == 8


def test_one_sam_perturbation_for_sam_asam_and_the_point():
    """δ = ρg/(‖g‖ + ε) per row; ASAM's δ = ρT(Tg)/(‖Tg‖ + ε) with T elementwise; ``at`` gives the point at + δ."""
    gen = torch.Generator().manual_seed(5)
    g = torch.randn(M, D, generator=gen, dtype=torch.float64)
    y = torch.randn(M, D, generator=gen, dtype=torch.float64)
    rho, t = 0.3, y.abs() + 0.2
    norm = torch.linalg.vector_norm(g, dim=1, keepdim=True)
    assert torch.allclose(sam_perturbation(g, rho), rho * g / norm, rtol=1e-12)
    assert torch.allclose(torch.linalg.vector_norm(sam_perturbation(g, rho), dim=1), torch.full((M,), rho).double())
    assert torch.allclose(sam_perturbation(g, rho, at=y), y + sam_perturbation(g, rho), rtol=1e-14)
    tg = t * g
    asam_delta = rho * t * tg / torch.linalg.vector_norm(tg, dim=1, keepdim=True)
    assert torch.allclose(sam_perturbation(g, rho, t), asam_delta, rtol=1e-12)
    assert torch.equal(sam_perturbation(g, rho, t, at=y), y + sam_perturbation(g, rho, t))
    assert torch.allclose(sam_perturbation(g, rho, torch.ones_like(g)), sam_perturbation(g, rho), rtol=1e-14)  # T = I


def test_a_gradient_forming_piece_must_come_first():
    with pytest.raises(ValueError, match=r"piece 1 \(sam\) of the chain forms its own gradient"):
        chain(sgd(), sam(0.1))
    assert chain(chain(sam(0.1)), sgd()).forms_gradient  # first, inside a nested chain: fine
    assert not chain(control_variate(), sgd()).forms_gradient


# ------------------------------------------------------------------ typed states
def test_rule_states_are_named_tuples_of_named_tensors():
    state = chain(sam(0.1), sgd(weight_decay=0.01, momentum=0.9)).init(torch.zeros(M, D))
    sam_state, (decay, momentum, scale) = state
    assert sam_state is decay is scale is EMPTY
    assert type(momentum) is Momentum and momentum._fields == ("velocity",)
    assert torch.equal(momentum.velocity, torch.zeros(M, D))


def test_rows_clones_and_device_copies_keep_the_types():
    state = (EMPTY, (Momentum(torch.arange(12.0).reshape(4, 3)), EMPTY))
    rows = tree_rows(state, torch.tensor([1, 3]))
    assert type(rows[1][0]) is Momentum and torch.equal(rows[1][0].velocity, torch.tensor([[3.0, 4, 5], [9, 10, 11]]))
    tree_assign_rows(state, torch.tensor([0]), tree_rows(map_state(torch.neg, state), torch.tensor([0])))
    assert state[1][0].velocity[0].tolist() == [-0.0, -1.0, -2.0]
    moved = to_device(state, "cpu")
    assert type(moved[0]) is EmptyState and type(moved[1][0]) is Momentum


def test_checkpoint_files_hold_plain_tuples_and_load_back_typed():
    rule = chain(sam(0.1), sgd(momentum=0.9))
    state = rule.init(torch.ones(M, D))
    written = to_cpu(state)
    assert written[0] == () and written[1][1] == () and type(written[1][0]) is tuple  # Momentum(v) -> (v,)
    buffer = io.BytesIO()
    torch.save({"rule_state": written}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)["rule_state"]  # no classes built
    typed = typed_state(rule, loaded, torch.ones(M, D))
    assert type(typed[0]) is EmptyState and type(typed[1][0]) is Momentum and type(typed[1][1]) is EmptyState
    assert torch.equal(typed[1][0].velocity, state[1][0].velocity)


def test_a_state_of_another_structure_is_refused_with_both_structures():
    v = torch.randn(M, D)
    untyped = ((), (v, ()))  # a bare tensor where Momentum(v) is
    with pytest.raises(ValueError, match=r"state \(\(\), \(tensor, \(\)\)\) does not fit the rule"):
        typed_state(chain(sam(0.1), sgd(momentum=0.9)), untyped, v)
    with pytest.raises(
        ValueError,
        match=r"does not fit the rule, whose state is \(EmptyState\(\), "
        r"\(Momentum\(velocity=tensor\), EmptyState\(\)\)\)",
    ):
        typed_state(chain(sam(0.1), sgd(momentum=0.9)), ((), ()), v)
    with pytest.raises(
        ValueError,
        match=r"state \(\(\(\),\),\) does not fit the rule, whose state is "
        r"\(Momentum\(velocity=tensor\),\)",
    ):
        typed_state(chain(trace(0.9)), (((),),), v)


# ------------------------------------------------------------- the engine's local training
@pytest.fixture(scope="module")
def sim():
    from benchmarks.round import engine_config, synthetic_data
    from dfl_core.engine import Simulation

    return Simulation(engine_config("2nn", "dfedavg", 4, K=3, B=4), data=synthetic_data((1, 28, 28), 4, 8, 2))


@pytest.mark.parametrize("rule, per_step", [(sgd(), 1), (chain(sam(0.05), sgd()), 2)])
def test_the_trainer_evaluates_as_often_as_the_rule_asks(sim, rule, per_step):
    calls = []

    def counted(p, inputs, labels, weights, clients):
        calls.append((p.clone(), inputs))
        return sim.model.loss_and_grad(p, inputs, labels, weights)

    clients = torch.arange(4)
    y = sim.tools(0).local_train(sim.x, clients, rule=rule, gradient=counted).clone()
    plain = sim.tools(0).local_train(sim.x, clients, rule=rule)
    assert len(calls) == per_step * sim.config.params.local_steps
    assert torch.equal(y, plain)  # the replacement changes nothing here
    if per_step == 2:  # SAM's two evaluations: the same batch
        assert all(calls[k][1] is calls[k + 1][1] for k in range(0, len(calls), 2))
        assert not torch.equal(calls[0][1], calls[2][1])  # the next step: the next batch


def test_divergence_names_the_evaluation_that_gave_a_nan(sim):
    evaluations = []

    def nan_at_the_fourth(p, inputs, labels, weights, clients):
        g, loss = sim.model.loss_and_grad(p, inputs, labels, weights)
        evaluations.append(None)
        return g, (loss * float("nan")) if len(evaluations) == 4 else loss

    with pytest.raises(DivergenceError, match=r"round 1 \(local gradient evaluation 3\) on client 0"):
        sim.tools(0).local_train(sim.x, torch.arange(4), rule=chain(sam(0.05), sgd()), gradient=nan_at_the_fourth)
