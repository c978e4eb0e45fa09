"""theory.phi and theory.bounds: symbolic identities by sympy, numbers against direct formulas."""

import itertools

import numpy as np
import pytest
import sympy as sp

from theory import bounds as bd
from theory import phi as ph


def test_phi_q1_identity_symbolic():
    diff = ph.PHI.subs(ph.Q, 1) - 2 * (ph.lam + 1) / (1 - ph.lam) ** 2
    assert sp.simplify(diff) == 0
    r = ph.phi_q1()
    assert r["identity_holds"] and r["slack_positive_on_0_1"]


def test_phi_numeric_matches_formula():
    for lv, mv, q in [(0.5, 10, 1), (0.9, 100, 3), (0.99, 7, 2)]:
        direct = (lv**q + 1) / ((1 - lv) ** 2 * mv ** (2 * (q - 1))) + (lv**q + 1) / (1 - lv**q) ** 2
        assert ph.phi(lv, mv, q) == pytest.approx(direct, rel=1e-12)


def test_phi_monotone_and_limit():
    assert ph.phi_monotone_symbolic()["decreasing"]
    g = ph.phi_monotone_grid()
    assert g["all_negative"] and g["max_difference"] < 0
    assert ph.phi_limit_q_infinity()["lambda_in_0_1_m_gt_1"] == 1


def test_gossip_steps_needed_is_minimal():
    for lv, m in ((0.5, 100), (0.9, 100), (0.99, 100), (0.0, 2), (0.0, 3), (-1e-17, 2)):
        q = ph.gossip_steps_needed(lv, m, 1.1)
        assert ph.phi(max(lv, 0.0), m, q) <= 1.1 < ph.phi(max(lv, 0.0), m, q - 1), (lv, m, q)
    # a complete graph of two: Φ(0, 2, Q) = 1 + 4^-(Q-1) is 1.25 at Q = 2 and first ≤ 1.1 at Q = 3
    assert ph.gossip_steps_needed(0.0, 2, 1.1) == 3
    assert ph.gossip_steps_needed(0.0, 100, 1.1) == 2


def test_phi_table_rows():
    rows = {r.name: r for r in ph.phi_table(100)}
    assert rows["complete"].values[0] == pytest.approx(2.0)
    assert rows["ring"].values[3] > 7e4
    assert rows["random-as-coded"].lam_kind == "sqrt(rho_ms)"
    for r in rows.values():
        assert all(a > b for a, b in zip(r.values, r.values[1:]))


def test_alpha_differs_from_appendix_by_one_eta2_term():
    lhs = bd.ALPHA * bd.D_DENOM - (
        bd.eta * bd.L**2 * bd.K * bd.C1 / 2 + 3 * bd.eta**2 * bd.K * bd.L / 2 * (bd.L**2 * bd.rho**2 + bd.sigma_l**2)
    )
    expected = -bd.K * bd.L * bd.eta**2 * (bd.L**2 * bd.rho**2 + bd.sigma_l**2)
    assert sp.simplify(lhs - expected) == 0


def test_beta_term_equals_appendix():
    d = bd.BETA_TERM * bd.D_DENOM - bd.eta**4 * bd.K * bd.L**3 * bd.C3 * (16 * bd.eta * bd.K * bd.L + 3)
    assert sp.simplify(d) == 0


def test_theorem_at_q1_uses_remark_4_10():
    at1 = bd.THEOREM_4_5.subs(bd.Q, 1)
    manual = 2 * bd.Delta / (bd.T * bd.D_DENOM) + bd.ALPHA + 2 * (1 + bd.lam) / (1 - bd.lam) ** 2 * bd.BETA_TERM
    assert sp.simplify(at1 - manual) == 0


def test_derived_topology_term_scales_like_sqrt_k():
    c3 = bd.derived_rate()["T^-3/2 (times Phi)"]
    K, L, sg, sl = bd.K, bd.L, bd.sigma_g, bd.sigma_l
    expected = 6 * sp.sqrt(K) * (8 * (2 * K - 1) * (sg**2 + sl**2) + L**2) / (2 * K - 1)
    assert sp.simplify(c3 - expected) == 0


def test_stepsize_denominator_positive_brute_force():
    assert bd.stepsize_margin()["positive"]
    for K, L, s in itertools.product([1, 2, 5, 50], [0.1, 1.0, 30.0], np.linspace(1e-4, 0.1, 25)):
        eta = s / (K * L)
        assert bd.evaluate(bd.D_DENOM, eta=eta, K=K, L=L) > 0


def test_evaluate_and_terms():
    vals = dict(K=5, T=100, eta=0.01, rho=0.05, L=2.0, sigma_l=0.3, sigma_g=0.7, Delta=1.0, lam=0.8, m=20, Q=2)
    t = bd.theorem45_terms(**vals)
    assert t["bound"] == pytest.approx(bd.evaluate(bd.THEOREM_4_5, **vals), rel=1e-10)
    assert t["phi"] == pytest.approx(ph.phi(0.8, 20, 2), rel=1e-12)
    D = 0.01 * 5 - 32 * 0.01**3 * 25 * 4 - 6 * 0.01**2 * 5 * 2
    assert t["denominator"] == pytest.approx(D)
    with pytest.raises(KeyError):
        bd.evaluate(bd.ALPHA, kappa=1)
    assert isinstance(bd.evaluate(bd.ALPHA, K=5), sp.Expr)  # partial substitution stays symbolic


def test_missing_records_are_located():
    keys = [x.key for x in bd.MISSING]
    assert len(keys) == len(set(keys)) >= 10
    assert all(x.seed.startswith("seeds/00") and x.location for x in bd.MISSING)


def test_predictions_match_terms():
    from theory.problems import shifted_quadratics

    c = shifted_quadratics(m=8, d=4, seed=0).constants()
    p = bd.predictions(
        c, K=5, T=50, eta=0.01, rho=0.01, lam_value=0.9, m_value=8, Q_value=2, f_x1=c.f_star + 3.0, G2_value=1.0
    )
    t = bd.theorem45_terms(
        K=5, T=50, eta=0.01, rho=0.01, L=c.L, sigma_l=c.sigma_l, sigma_g=c.sigma_g, Delta=3.0, lam=0.9, m=8, Q=2
    )
    assert p["min_grad_norm_sq_bound"] == pytest.approx(t["bound"])
    assert p["contraction_per_round"] == pytest.approx(0.81)
    assert p["stepsize_condition"] == (0.01 <= 1 / (50 * c.L))
    assert p["consensus_distance_bound"] > 0
