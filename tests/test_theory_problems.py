"""theory.problems: the constants against brute force, the measurements against known cases."""

import itertools
import math

import numpy as np
import pytest

from dfl_core.topology import make_topology
from theory import problems as pr


def test_minibatch_factor_by_enumeration():
    rng = np.random.default_rng(0)
    n, B = 6, 2
    v = rng.standard_normal((n, 3))
    v -= v.mean(0)
    one = (v**2).sum(1).mean()
    means = [v[list(s)].mean(0) for s in itertools.combinations(range(n), B)]
    var = np.mean([(x**2).sum() for x in means])
    assert var == pytest.approx(pr.minibatch_variance_factor(n, B) * one, rel=1e-12)
    assert pr.minibatch_variance_factor(n, None) == 0.0 == pr.minibatch_variance_factor(n, n)


def test_shifted_quadratic_constants_are_exact():
    p = pr.shifted_quadratics(m=8, d=5, n=6, noise=0.3, batch=2, seed=3)
    c = p.constants()
    assert c.L == pytest.approx(np.linalg.eigvalsh(p.A).max())
    rng = np.random.default_rng(1)
    for _ in range(3):  # ∇f_i − ∇f is the same at every x
        x = rng.standard_normal(5) * 10
        diff = p.local_grads(np.tile(x, (8, 1))) - p.grad_f(x)
        assert np.linalg.norm(diff, axis=1).max() == pytest.approx(c.beta, rel=1e-10)
        assert math.sqrt((diff**2).sum(1).mean()) == pytest.approx(c.sigma_g, rel=1e-10)
    X = rng.standard_normal((8, 5))
    G = np.stack([p.stochastic_grads(X, rng) for _ in range(4000)])
    emp = ((G - p.local_grads(X)) ** 2).sum(-1).mean(0).max()
    assert emp == pytest.approx(c.sigma_l**2, rel=0.1)
    assert c.f_star == pytest.approx(p.f(p.centers.mean(0)))
    assert np.allclose(p.grad_f(p.centers.mean(0)), 0)


def test_least_squares_shared_vs_not():
    rng = np.random.default_rng(0)
    X1 = rng.standard_normal((20, 3))
    Xs = np.stack([X1] * 4)
    y = rng.standard_normal((4, 20))
    c = pr.LeastSquares(Xs, y).constants()
    assert math.isfinite(c.beta) and c.exact["beta"]
    assert c.L == pytest.approx(np.linalg.eigvalsh(X1.T @ X1 / 20).max())
    c2 = pr.LeastSquares(rng.standard_normal((4, 20, 3)), y).constants()
    assert math.isinf(c2.beta) and not c2.exact["beta"]


def test_logistic_bounds_hold():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 40, 4))
    y = np.sign(rng.standard_normal((3, 40)))
    prob = pr.LogisticRegression(X, y, mu=0.01)
    c = prob.constants()
    for _ in range(5):
        W = rng.standard_normal((3, 4)) * 2
        for i in range(3):  # Hessian at W[i] by finite differences of the gradient
            H = np.zeros((4, 4))
            for k in range(4):
                e = np.zeros((3, 4))
                e[i, k] = 1e-6
                H[:, k] = (prob.local_grads(W + e)[i] - prob.local_grads(W - e)[i]) / 2e-6
            assert np.linalg.eigvalsh((H + H.T) / 2).max() <= c.L + 1e-6
        x = W[0]
        g = prob.local_grads(np.tile(x, (3, 1)))
        assert np.linalg.norm(g - g.mean(0), axis=1).max() <= c.beta + 1e-12


def test_gossip_contraction_rates():
    W = make_topology("ring", 20).matrix(0)
    r = pr.gossip_contraction(W.W, steps=200)
    assert r["asymptotic_rate"] == pytest.approx(W.lam, abs=2e-3)
    assert r["mean_drift"] < 1e-10
    assert pr.gossip_contraction(make_topology("complete", 20).matrix(0).W)["rate"] < 1e-10
    asc = make_topology("random-as-coded", 20)
    assert pr.gossip_contraction(lambda s: asc.matrix(s).W, steps=30)["mean_drift"] > 1e-6


def test_reference_dfedsam_reduces_to_gradient_descent():
    p = pr.shifted_quadratics(m=6, d=4, seed=2)  # full batch
    W = make_topology("complete", 6).matrix(0).W
    eta, T = 0.3, 5
    h = pr.reference_dfedsam(p, W, K=1, T=T, eta=eta, rho=0.0, x0=np.ones(4))
    x = np.ones(4)
    for t in range(T):
        g = p.grad_f(x)
        assert h["grad_norm_sq"][t] == pytest.approx(g @ g, rel=1e-10)
        x = x - eta * g
    assert h["consensus"].max() < 1e-20


def test_consensus_distance():
    X = np.array([[0.0, 0.0], [2.0, 0.0]])
    assert pr.consensus_distance(X) == pytest.approx(1.0)
