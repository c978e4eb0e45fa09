"""The flatness instruments against quantities computed another way.

Hessian: an explicitly formed Hessian (``torch.autograd.functional.hessian``)
of small float64 models on the digits. Landscapes: the definition of filter
normalisation and single-model evaluations. Δ_F: identical clients (exactly
zero), the bookkeeping of its terms, and a quadratic whose maximum over the
ball is known by brute force.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dfl_core import Config, Simulation
from dfl_core.data import load_dataset
from dfl_core.instruments import (
    ball_max,
    client_data,
    evaluate_points,
    flatness_discrepancy,
    flatness_from_simulation,
    hessian_trace,
    hessian_vector_product,
    interpolation_line,
    loss_line,
    loss_surface,
    random_direction,
    sharpness_report,
    top_hessian_eigenvalue,
    union_data,
)
from dfl_core.metrics import evaluate_model
from dfl_core.models import build_model
from dfl_core.stacked import StackedModel

F64 = torch.float64


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits", train_size=300, test_size=100, seed=0)
    return ds.x_train.to(F64), ds.y_train, ds


def tiny_mlp(input_shape, num_classes):
    """A non-convex model small enough (610 parameters) to form its Hessian."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 8), nn.ReLU(), nn.Linear(8, num_classes))


def tiny_cnn(input_shape, num_classes):
    """Conv filters (output channels) and Linear filters (rows), run by the "loop" strategy on CPU."""
    c, h, w = input_shape
    return nn.Sequential(nn.Conv2d(c, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * (h - 2) * (w - 2), num_classes))


def stacked(factory, ds, seed=0, dtype=F64):
    model = StackedModel(partial(factory, ds.input_shape, ds.num_classes))
    return model, model.init_params(1, seed, dtype=dtype)[0]


def explicit_hessian(model, params, x, y):
    return torch.autograd.functional.hessian(lambda w: F.cross_entropy(model.forward_one(w, x), y), params)


# ------------------------------------------------------------------ Hessian
@pytest.mark.parametrize("factory", [partial(build_model, "linear"), tiny_mlp], ids=["linear", "tiny-mlp"])
def test_curvature_matches_explicit_hessian(digits, factory):
    x, y, ds = digits
    model, w = stacked(factory, ds)
    H = explicit_hessian(model, w, x, y)
    eig = torch.linalg.eigvalsh(H)
    v = torch.randn(model.d, dtype=F64, generator=torch.Generator().manual_seed(1))
    # chunk=77 does not divide 300: the chunks must add up to the full-data product
    assert torch.allclose(hessian_vector_product(model, w, x, y, v, chunk=77), H @ v, rtol=1e-10, atol=1e-12)
    top = top_hessian_eigenvalue(model, w, x, y, chunk=77)
    assert abs(top - eig[-1]) / eig[-1] < 1e-3
    power = top_hessian_eigenvalue(model, w, x, y, method="power", iters=2000, tol=1e-7)
    assert abs(power - eig[-1]) / eig[-1] < 1e-3
    tr = hessian_trace(model, w, x, y, samples=100, seed=3)
    exact = float(H.trace())
    assert abs(tr.value - exact) < 3 * tr.stderr
    assert tr.stderr < 0.1 * exact  # the 3-sigma check is not vacuous


def test_hessian_vector_product_in_float32(digits):
    x, y, ds = digits
    model, w64 = stacked(tiny_mlp, ds)
    v = torch.randn(model.d, dtype=F64, generator=torch.Generator().manual_seed(2))
    hv64 = hessian_vector_product(model, w64, x, y, v)
    hv32 = hessian_vector_product(model, w64.float(), x.float(), y, v.float())
    assert hv32.dtype == torch.float32
    assert torch.allclose(hv32.double(), hv64, rtol=1e-4, atol=1e-5 * hv64.abs().max())


@pytest.fixture(scope="module")
def small_sim():
    cfg = Config(
        dataset="digits",
        model="linear",
        num_clients=4,
        train_size=200,
        test_size=50,
        dtype="float64",
        rounds=2,
        algorithm="dfedsam",
        rho=0.05,
    )
    sim = Simulation(cfg)
    sim.step()
    sim.step()
    return sim


def test_data_helpers_and_sharpness_report(small_sim):
    sim = small_sim
    train = sim.data.train
    xs, ys = zip(*(client_data(sim, i) for i in range(4)))
    assert [len(v) for v in ys] == train.counts.tolist()
    assert torch.equal(ys[2], train.y[train.index[2, : int(train.counts[2])]])
    x, y = union_data(sim)
    assert len(y) == int(train.counts.sum())
    assert torch.equal(torch.sort(y).values, torch.sort(torch.cat(ys)).values)
    report = sharpness_report(sim, trace_samples=20)
    w = sim.x.mean(0)
    H = explicit_hessian(sim.model, w, x, y)
    assert abs(report.top_eigenvalue - float(torch.linalg.eigvalsh(H)[-1])) < 1e-3 * report.top_eigenvalue
    assert report.loss == pytest.approx(evaluate_model(sim.model, w, x, y)[1], rel=1e-12)
    assert abs(report.trace.value - float(H.trace())) < 3 * report.trace.stderr


# ---------------------------------------------------------------- landscape
@pytest.mark.parametrize("factory", [partial(build_model, "2nn"), tiny_cnn], ids=["2nn", "tiny-cnn"])
def test_random_direction_is_filter_normalised(digits, factory):
    _, _, ds = digits
    model, w = stacked(factory, ds, dtype=torch.float32)
    d = random_direction(model, w, seed=5)
    assert d.dtype == w.dtype and d.shape == w.shape
    dv, wv = model.unflatten(d), model.unflatten(w)
    for name, shape in zip(model.names, model.shapes):
        if len(shape) == 1:
            assert torch.all(dv[name] == 0), name  # biases are not perturbed
        else:
            rows_d = dv[name].reshape(shape[0], -1).norm(dim=1)  # one norm per filter
            rows_w = wv[name].reshape(shape[0], -1).norm(dim=1)
            assert torch.allclose(rows_d, rows_w, rtol=1e-5), name
            assert not torch.allclose(dv[name], wv[name])  # a new direction, not w itself
    assert torch.equal(d, random_direction(model, w, seed=5))
    assert not torch.equal(d, random_direction(model, w, seed=6))


@pytest.mark.parametrize("factory", [partial(build_model, "2nn"), tiny_cnn], ids=["2nn", "tiny-cnn"])
def test_lines_and_surfaces_agree_with_single_models(digits, factory):
    x, y, ds = digits
    x = x[:120]
    y = y[:120]
    model, w = stacked(factory, ds)
    d1, d2 = random_direction(model, w, 0), random_direction(model, w, 1)
    alphas = np.array([-0.5, 0.0, 0.25, 1.0])
    line = loss_line(model, w, d1, x, y, alphas, chunk=50)  # several passes per point
    acc0, loss0 = evaluate_model(model, w, x, y)
    assert line.loss[1] == pytest.approx(loss0, rel=1e-12) and line.acc[1] == acc0
    acc_far, loss_far = evaluate_model(model, w + alphas[3] * d1, x, y)
    assert line.loss[3] == pytest.approx(loss_far, rel=1e-12) and line.acc[3] == acc_far
    assert line.loss[3] != pytest.approx(loss0, rel=1e-3)  # the direction moves the loss
    betas = np.array([-1.0, 0.0, 0.5])
    surf = loss_surface(model, w, d1, d2, x, y, alphas, betas)
    assert surf.loss.shape == (4, 3)
    np.testing.assert_allclose(surf.loss[:, 1], line.loss, rtol=1e-12)
    np.testing.assert_allclose(surf.loss[1, :], loss_line(model, w, d2, x, y, betas).loss, rtol=1e-12)
    one_by_one = evaluate_points(model, w + torch.tensor(alphas)[:, None] * d1, x, y, point_chunk=1)
    np.testing.assert_allclose(one_by_one[0].numpy(), line.loss, rtol=1e-12)


def test_interpolation_line_endpoints(digits):
    x, y, ds = digits
    model, a = stacked(partial(build_model, "2nn"), ds, seed=0)
    _, b = stacked(partial(build_model, "2nn"), ds, seed=1)
    line = interpolation_line(model, a, b, x, y, [0.0, 0.5, 1.0, 1.5])
    assert line.loss[0] == pytest.approx(evaluate_model(model, a, x, y)[1], rel=1e-12)
    assert line.loss[2] == pytest.approx(evaluate_model(model, b, x, y)[1], rel=1e-12)
    assert line.loss[1] == pytest.approx(evaluate_model(model, (a + b) / 2, x, y)[1], rel=1e-12)
    assert line.loss[3] == pytest.approx(evaluate_model(model, 1.5 * b - 0.5 * a, x, y)[1], rel=1e-12)
    assert line.loss[0] != pytest.approx(line.loss[2], rel=1e-6)


# ------------------------------------------------------------------ Δ_F
def split_clients(x, y, n):
    """n disjoint client data sets of different sizes (and so label mixes) from (x, y)."""
    cuts = np.linspace(0, len(y), n + 1).astype(int) + np.r_[0, 7 * np.arange(1, n), 0]
    return [(x[a:b], y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def test_identical_clients_have_zero_discrepancy(digits):
    x, y, ds = digits
    model, w = stacked(tiny_mlp, ds)
    local = w.expand(4, -1).clone()
    res = flatness_discrepancy(model, w, local, [(x, y)] * 4, rho=0.5, steps=5)
    assert res.global_sharpness > 0.05  # the terms themselves are not zero
    assert res.global_sharpness > res.global_sharpness_one_step  # and PGA moved
    assert res.delta_f < 1e-10
    assert res.delta_f_one_step < 1e-10


def test_discrepancy_terms_maxima_and_ball(digits):
    x, y, ds = digits
    model, w = stacked(tiny_mlp, ds)
    noise = torch.randn(3, model.d, dtype=F64, generator=torch.Generator().manual_seed(0))
    local = w + 0.05 * noise
    clients = split_clients(x, y, 3)
    rho = 0.3
    res = flatness_discrepancy(model, w, local, clients, rho=rho, steps=5)
    # PGA starts at the SAM point and keeps the best point it visits
    assert res.global_sharpness >= res.global_sharpness_one_step
    assert np.all(res.client_sharpness >= res.client_sharpness_one_step)
    assert res.local_sharpness > res.local_sharpness_one_step
    # the maximisers lie in the ball, and attain the values reported
    assert float(res.global_delta.norm()) <= rho * (1 + 1e-9)
    assert float(res.local_delta.norm(dim=1).max()) <= rho * (1 + 1e-9)
    n = np.array([len(c[1]) for c in clients])
    np.testing.assert_allclose(res.weights, n / n.sum(), rtol=1e-15)
    F_w = evaluate_model(model, w, x, y)[1]  # F: the union's mean loss
    assert res.global_loss == pytest.approx(F_w, rel=1e-12)
    assert res.global_sharpness == pytest.approx(evaluate_model(model, w + res.global_delta, x, y)[1] - F_w, rel=1e-10)
    for i, (xi, yi) in enumerate(clients):
        Fi = evaluate_model(model, local[i], xi, yi)[1]
        top = evaluate_model(model, local[i] + res.local_delta[i], xi, yi)[1]
        assert res.client_sharpness[i] == pytest.approx(top - Fi, rel=1e-10)
    assert res.local_sharpness == pytest.approx(float(res.weights @ res.client_sharpness), rel=1e-12)
    assert res.delta_f == pytest.approx(abs(res.global_sharpness - res.local_sharpness), rel=1e-12)
    # F given explicitly as the union equals the default mixture Σ (n_i/n) F_i
    again = flatness_discrepancy(model, w, local, clients, rho=rho, steps=5, global_xy=(x, y))
    assert again.global_sharpness == pytest.approx(res.global_sharpness, rel=1e-9)


def test_pga_finds_more_than_one_step_where_curvature_matters(digits):
    # f(δ) = ½ δᵀAδ + bᵀδ: the gradient points along the flat axis, the maximum lies along the sharp one
    A = torch.diag(torch.tensor([10.0, 1.0], dtype=F64))
    b = torch.tensor([0.1, 1.0], dtype=F64)

    def quadratic(p, need_grad):
        return 0.5 * ((p @ A) * p).sum(1) + p @ b, (p @ A + b if need_grad else None)

    theta = torch.linspace(0, 2 * math.pi, 200_001, dtype=F64)
    brute = float(quadratic(torch.stack([theta.cos(), theta.sin()], 1), False)[0].max())
    res = ball_max(quadratic, torch.zeros(1, 2, dtype=F64), 1.0, steps=10)
    sam = b / b.norm()
    assert float(res.one_step) == pytest.approx(float(quadratic(sam[None], False)[0]), rel=1e-9)
    assert float(res.pga) > 3 * float(res.one_step)
    assert float(res.pga) == pytest.approx(brute, rel=1e-4)
    assert float(res.delta.norm()) <= 1 + 1e-12
    # on a real model, with a radius where the loss is far from linear
    x, y, ds = digits
    model, w = stacked(partial(build_model, "linear"), ds)
    res = flatness_discrepancy(model, w, w[None], [(x, y)], rho=3.0, steps=10)
    assert res.global_sharpness > 1.05 * res.global_sharpness_one_step


def test_pga_keeps_its_best_point():
    # f(δ) = −(δ − 0.6)² on [−1, 1]: SAM goes to δ = 1 (f = −0.16),
    # a step of 1.5 overshoots to δ = −0.5 (f = −1.21)
    def concave(p, need_grad):
        return -((p - 0.6) ** 2).sum(1), (-2 * (p - 0.6) if need_grad else None)

    res = ball_max(concave, torch.zeros(1, 1, dtype=F64), 1.0, steps=1, step_size=1.5)
    assert float(res.one_step) == pytest.approx(-0.16)
    assert float(res.pga) == float(res.one_step)  # the last iterate (−1.21) is not reported
    assert float(res.delta) == pytest.approx(1.0)
    # with the default schedule PGA settles near the interior maximum at 0.6
    assert float(ball_max(concave, torch.zeros(1, 1, dtype=F64), 1.0, steps=10).pga) > -0.01


def test_from_simulation_decentralized_and_centralized(small_sim):
    sim = small_sim
    res = flatness_from_simulation(sim, rho=0.1, steps=5)
    direct = flatness_discrepancy(
        sim.model, sim.x.mean(0), sim.x, [client_data(sim, i) for i in range(4)], rho=0.1, steps=5
    )
    assert res.delta_f == pytest.approx(direct.delta_f, rel=1e-9)
    assert res.global_sharpness == pytest.approx(direct.global_sharpness, rel=1e-9)
    np.testing.assert_allclose(res.client_sharpness, direct.client_sharpness, rtol=1e-9)
    # centralized: the local models are recomputed without disturbing the run
    cfg = Config(
        dataset="digits",
        model="linear",
        num_clients=4,
        train_size=200,
        test_size=50,
        dtype="float64",
        rounds=2,
        algorithm="fedsam",
        rho=0.05,
        clients_per_round=2,
    )
    probe, plain = Simulation(cfg), Simulation(cfg)
    res = flatness_from_simulation(probe, steps=5)
    assert len(res.weights) == 2 and res.rho == 0.05
    probe.step()
    plain.step()
    assert torch.equal(probe.x, plain.x)
    with pytest.raises(ValueError, match="local models"):
        flatness_from_simulation(Simulation(cfg.replace(algorithm="fedgf", fedgf_threshold=1.0)))
