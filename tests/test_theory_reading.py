"""theory.reading (how to read Theorem 4.5) against hand values, and theory.problems' heterogeneous-Hessian testbed.

Hand values: issue 41 at the theory chapter's setting (K = 5, T = 1000, L = 1, η = 1/(10KL), ρ = 0.01,
σ_l = σ_g = Δ = 1, m = 100) on the engine's ring of 100 (λ = (1 + 2cos(2π/100))/3).
"""

import math

import numpy as np
import pytest

from dfl_core.topology import make_topology
from theory import bounds as bd
from theory import reading as rd
from theory.phi import PHI, phi
from theory.problems import diagonal_quadratics, run_decentralized
from theory.spectral import static_spectrum

SETTING = {k: v for k, v in rd.CHAPTER_SETTING.items() if k != "m"}
UNIT = dict(K=5, L=1.0, sigma_l=1.0, sigma_g=1.0, Delta=1.0)


def sig(x: float, digits: int) -> float:
    """x rounded to ``digits`` significant digits."""
    return float(f"{x:.{digits - 1}e}")


@pytest.fixture(scope="module")
def ring_lam() -> float:
    lam = static_spectrum("ring", 100).lam
    assert lam == pytest.approx((1 + 2 * math.cos(2 * math.pi / 100)) / 3, abs=1e-12)
    return lam


def test_chapter_setting_is_the_issue_setting():
    assert rd.CHAPTER_SETTING == dict(
        K=5, T=1000, L=1.0, eta=0.02, rho=0.01, sigma_l=1.0, sigma_g=1.0, Delta=1.0, m=100
    )


# ---- vacuity -----------------------------------------------------------------


def test_bound_is_vacuous_on_the_ring_hand_values(ring_lam):
    q1, q4 = rd.vacuity(ring_lam, 100, 1, **SETTING), rd.vacuity(ring_lam, 100, 4, **SETTING)
    assert sig(q1["bound"], 2) == 8.3e4 and sig(q4["bound"], 2) == 2.6e3
    assert q1["trivial"] == q4["trivial"] == 2.0
    assert q1["vacuous"] and q4["vacuous"] and q1["ratio"] > 4e4


def test_bound_is_not_vacuous_on_the_complete_graph():
    r = rd.vacuity(0.0, 100, 1, **SETTING)
    assert not r["vacuous"] and r["bound"] < 2.0


def test_trivial_bound_holds_on_a_quadratic():
    """The derivation of 2LΔ: ‖∇f(x)‖² ≤ 2L(f(x) − f*) for L-smooth f, checked at random points."""
    p = diagonal_quadratics(m=8, d=6, seed=1)
    c = p.constants()
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = 5 * rng.standard_normal(6)
        g = p.grad_f(x)
        assert g @ g <= rd.trivial_gradient_bound(c.L, p.f(x) - c.f_star) * (1 + 1e-12)


def test_vacuity_rejects_bad_input():
    with pytest.raises(ValueError, match="lam"):
        rd.vacuity(1.0, 100, 1, **SETTING)
    with pytest.raises(ValueError, match="Q"):
        rd.vacuity(0.5, 100, 0, **SETTING)
    with pytest.raises(ValueError, match="Delta"):
        rd.vacuity(0.5, 100, 1, **{k: v for k, v in SETTING.items() if k != "Delta"})
    with pytest.raises(ValueError, match="1/\\(10KL\\)"):
        rd.vacuity(0.5, 100, 1, **dict(SETTING, eta=0.5))
    with pytest.raises(ValueError, match="L must be"):
        rd.trivial_gradient_bound(0.0, 1.0)


# ---- Φ and the transient rounds -----------------------------------------------


def test_phi_on_the_ring_hand_values(ring_lam):
    assert sig(phi(ring_lam, 100, 1), 3) == 2.31e6
    assert sig(phi(ring_lam, 100, 4), 2) == 7.2e4


def test_transient_rounds_corollary_form_is_phi_at_unit_constants(ring_lam):
    for q in (1, 4):
        assert rd.transient_rounds(ring_lam, 100, q, **UNIT) == pytest.approx(phi(ring_lam, 100, q), rel=1e-12)
    # the display's ratio (β² + σ_l²)/(Δ + σ_l²): β = 3, σ_l = 1, Δ = 4 → 10/5 = 2
    t = rd.transient_rounds(ring_lam, 100, 1, K=5, L=1.0, sigma_l=1.0, sigma_g=1.0, Delta=4.0, beta=3.0)
    assert t == pytest.approx(2 * phi(ring_lam, 100, 1), rel=1e-12)


def test_transient_rounds_theorem_form_hand_value(ring_lam):
    """At unit constants, K = 5: a = (4K − 2 + K − 1/2)/(√K(2K − 1)), c = 6√K(32K − 16 + 1)/(2K − 1),

    so c/a = 6K(32K − 15)/(5K − 5/2) = 580/3, from derived_rate's coefficients written out by hand.
    """
    a = (4 * 5 - 2 + 5 - 0.5) / (math.sqrt(5) * 9)
    c = 6 * math.sqrt(5) * (16 * 5 + 16 * 5 + 1 - 8 - 8) / 9
    assert c / a == pytest.approx(580 / 3, rel=1e-12)
    t = rd.transient_rounds(ring_lam, 100, 1, **UNIT, form="theorem")
    assert t == pytest.approx(580 / 3 * phi(ring_lam, 100, 1), rel=1e-9)


@pytest.mark.parametrize("q", [1, 4])
def test_transient_rounds_theorem_form_is_where_the_exact_terms_cross(ring_lam, q):
    """At T = T*, with η = 1/(L√(KT)) and ρ = 1/√T, the exact Φ·Ω of eq. (7) equals the leading a/√T to < 1%.

    (T* is a leading-order crossing: Ω's next term is smaller by O(T^{-1/2}), 0.4% at the ring's Q = 4 T*.)
    """
    t_star = rd.transient_rounds(ring_lam, 100, q, **UNIT, form="theorem")
    a = float(rd.transient_coefficients()["leading"].subs({bd.K: 5, bd.L: 1, bd.Delta: 1, bd.sigma_l: 1}))
    vals = dict(K=5, L=1.0, sigma_l=1.0, sigma_g=1.0, eta=1 / math.sqrt(5 * t_star), rho=1 / math.sqrt(t_star))
    topology = phi(ring_lam, 100, q) * bd.evaluate(bd.BETA_TERM, **vals)
    assert topology / (a / math.sqrt(t_star)) == pytest.approx(1.0, rel=1e-2)
    # and it falls below the leading term after T*, above it before
    for factor, below in ((4.0, True), (0.25, False)):
        T = factor * t_star
        v = dict(vals, eta=1 / math.sqrt(5 * T), rho=1 / math.sqrt(T))
        assert bool(phi(ring_lam, 100, q) * bd.evaluate(bd.BETA_TERM, **v) < a / math.sqrt(T)) == below


def test_transient_rounds_rejects_bad_form(ring_lam):
    with pytest.raises(ValueError, match="form"):
        rd.transient_rounds(ring_lam, 100, 1, **UNIT, form="abstract")


# ---- the proof's step-size condition --------------------------------------------


def test_stepsize_condition_ring_hand_value(ring_lam):
    r = rd.stepsize_condition(ring_lam, 100, 1, K=5, L=1.0, T=1000)
    assert r["equation"] == "(24)" and not r["holds"] and r["theorem_condition"]
    assert r["min_rounds"] == pytest.approx(32 * 5 / (1 - ring_lam) ** 2, rel=1e-12)
    assert sig(r["min_rounds"], 1) == 9e7
    assert rd.stepsize_condition(ring_lam, 100, 1, K=5, L=1.0, T=1.01 * r["min_rounds"])["holds"]
    assert not rd.stepsize_condition(ring_lam, 100, 1, K=5, L=1.0, T=0.99 * r["min_rounds"])["holds"]


def test_stepsize_condition_is_the_seed_denominators(ring_lam):
    """(24): (1−λ)² − 32L²η²K²; (33): 1 − 32L²η²K²Φ, as sympy expressions evaluated independently."""
    e24 = (1 - bd.lam) ** 2 - 32 * bd.L**2 * bd.eta**2 * bd.K**2
    e33 = 1 - 32 * bd.L**2 * bd.eta**2 * bd.K**2 * PHI
    for q, expr in ((1, e24), (4, e33)):
        for eta in (0.02, 1e-4, 1e-6):
            r = rd.stepsize_condition(ring_lam, 100, q, K=5, L=1.0, eta=eta)
            want = bd.evaluate(expr, lam=ring_lam, m=100, Q=q, K=5, L=1.0, eta=eta)
            assert r["denominator"] == pytest.approx(want, rel=1e-9, abs=1e-15)
            assert r["holds"] == (want > 0)


def test_stepsize_condition_at_the_chapters_eta():
    """η = 1/(10KL): 32L²η²K² = 0.32, so (24) needs λ < 1 − √0.32 ≈ 0.434 (theory.claims' stepsize-eq24)."""
    assert rd.stepsize_condition(0.43, 100, 1, K=5, L=1.0, eta=0.02)["holds"]
    assert not rd.stepsize_condition(0.44, 100, 1, K=5, L=1.0, eta=0.02)["holds"]
    assert rd.stepsize_condition(0.0, 100, 1, K=5, L=1.0, T=161)["holds"]  # complete graph: T > 32K = 160
    assert not rd.stepsize_condition(0.0, 100, 1, K=5, L=1.0, T=159)["holds"]


def test_stepsize_condition_needs_t_or_eta():
    with pytest.raises(ValueError, match="give T"):
        rd.stepsize_condition(0.5, 100, 1, K=5, L=1.0)
    with pytest.raises(ValueError, match="eta"):
        rd.stepsize_condition(0.5, 100, 1, K=5, L=1.0, eta=-1.0)


# ---- ρ is only a cost --------------------------------------------------------------


def test_rho_only_costs_symbolically():
    r = rd.rho_only_costs()
    assert r["only_costs"] and r["recombines_to_bound"] and r["phi_positive"]
    assert all(r["coefficient_positive"].values()) and len(r["coefficient_positive"]) == 4
    assert not r["dfedavg_bound_has_rho"]


@pytest.mark.parametrize("lam", [0.0, 0.7333, 0.9987])
def test_bound_grows_with_rho_and_is_dfedavgs_at_zero(lam):
    rows = rd.rho_effect([0.0, 0.001, 0.01, 0.05, 0.1], lam, 100, 1, **SETTING)
    bounds = [r["bound"] for r in rows]
    assert all(b1 < b2 for b1, b2 in zip(bounds, bounds[1:]))
    assert rows[0]["bound"] == pytest.approx(rows[0]["dfedavg_bound"], rel=1e-12)
    assert rows[0]["bound"] == pytest.approx(
        bd.evaluate(bd.THEOREM_4_5, **dict(SETTING, rho=0.0), lam=lam, m=100, Q=1), rel=1e-12
    )
    assert all(r["cost"] > 0 for r in rows[1:])


def test_dfedsam_at_rho_zero_is_dfedavg():
    """The algorithm side of DFEDAVG_BOUND: DFedSAM with ρ = 0 runs DFedAvg, model for model."""
    p = diagonal_quadratics(m=8, d=5, seed=2)
    W = make_topology("ring", 8).matrix(0).W
    a = run_decentralized(p, W, "dfedsam", T=20, eta=0.1, K=3, rho=0.0, x0=np.ones(5))
    b = run_decentralized(p, W, "dfedavg", T=20, eta=0.1, K=3, x0=np.ones(5))
    assert np.array_equal(a["models"], b["models"]) and np.array_equal(a["average"], b["average"])


# ---- the heterogeneous-Hessian testbed ------------------------------------------------

GRAPHS = ("ring", "exponential-mh", "complete")
METHODS = (("dsgd", 1, 0.0), ("dfedavg", 5, 0.0), ("dfedsam", 5, 0.05))


def _paths(shared: bool, seed: int = 0) -> dict:
    p = diagonal_quadratics(m=16, d=10, shared_hessian=shared, seed=seed)
    out = {}
    for name in GRAPHS:
        W = make_topology(name, 16).matrix(0).W
        for method, K, rho in METHODS:
            out[method, name] = run_decentralized(p, W, method, T=50, eta=0.1, K=K, rho=rho, x0=np.full(10, 3.0))
    return out


def _spread(runs: dict, method: str) -> float:
    """Largest distance, over rounds, between the average model's path on a graph and on the complete graph."""
    ref = runs[method, "complete"]["average"]
    return max(np.abs(runs[method, g]["average"] - ref).max() for g in GRAPHS)


@pytest.mark.parametrize("seed", [0, 1])
def test_shared_hessian_average_path_does_not_depend_on_the_topology(seed):
    runs = _paths(shared=True, seed=seed)
    for method in ("dsgd", "dfedavg"):
        assert _spread(runs, method) < 1e-12, method
    assert runs["dfedavg", "ring"]["consensus"].max() > 0.1  # the clients do disagree on the ring
    # DFedSAM's normalised perturbation is not linear in the model: a small dependence remains
    het = _paths(shared=False, seed=seed)
    assert 1e-6 < _spread(runs, "dfedsam") < 0.1 * _spread(het, "dfedsam")


@pytest.mark.parametrize("seed", [0, 1])
def test_heterogeneous_hessians_make_the_average_path_depend_on_the_topology(seed):
    runs = _paths(shared=False, seed=seed)
    for method, _, _ in METHODS:
        assert _spread(runs, method) > 1e-2, method
        # the sparser the graph, the larger the consensus distance, and the further the path from the complete graph's
        cons = [runs[method, g]["consensus"].max() for g in GRAPHS]
        assert cons[0] > cons[1] >= cons[2] - 1e-12, (method, cons)


def test_diagonal_quadratics_constants():
    shared, het = diagonal_quadratics(m=6, d=4, shared_hessian=True, seed=3), diagonal_quadratics(m=6, d=4, seed=3)
    assert np.array_equal(shared.b, het.b) and shared.shared_hessian and not het.shared_hessian
    for p in (shared, het):
        c = p.constants()
        assert c.L == pytest.approx(1.0) and p.h.min() >= 0.1 - 1e-12
        assert np.allclose(p.grad_f(p.minimizer), 0, atol=1e-12)
        assert c.f_star == pytest.approx(p.f(p.minimizer))
    assert math.isinf(het.constants().sigma_g) and math.isfinite(shared.constants().sigma_g)
    x = np.random.default_rng(0).standard_normal(4)
    diff = shared.local_grads(np.tile(x, (6, 1))) - shared.grad_f(x)
    assert math.sqrt((diff**2).sum(1).mean()) == pytest.approx(shared.constants().sigma_g, rel=1e-10)


def test_run_decentralized_rejects_bad_input():
    p = diagonal_quadratics(m=4, d=2)
    W = make_topology("ring", 4).matrix(0).W
    with pytest.raises(ValueError, match="method"):
        run_decentralized(p, W, "dfedadam", T=1, eta=0.1)
    with pytest.raises(ValueError, match="K = 1"):
        run_decentralized(p, W, "dsgd", T=1, eta=0.1, K=2)
    with pytest.raises(ValueError, match="rho"):
        run_decentralized(p, W, "dfedavg", T=1, eta=0.1, rho=0.1)
    with pytest.raises(ValueError, match="eta"):
        run_decentralized(p, W, "dfedavg", T=1, eta=0.0)
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        run_decentralized(p, make_topology("ring", 5).matrix(0).W, "dfedavg", T=1, eta=0.1)
    with pytest.raises(ValueError, match="h and b"):
        type(p)(h=np.ones((3, 2)), b=np.ones((3, 3)))


# ---- the table for the chapter ----------------------------------------------------------------


def test_reading_table(ring_lam):
    rows = rd.reading_table()
    assert [(r["graph"], r["Q"]) for r in rows] == [(g, q) for g in rd.CHAPTER_GRAPHS for q in rd.CHAPTER_QS]
    ring = {r["Q"]: r for r in rows if r["graph"] == "ring"}
    assert sig(ring[1]["bound"], 2) == 8.3e4 and sig(ring[4]["bound"], 2) == 2.6e3
    assert sig(ring[1]["phi"], 3) == 2.31e6 and sig(ring[4]["phi"], 2) == 7.2e4
    assert ring[1]["transient_rounds"] == pytest.approx(ring[1]["phi"])
    assert sig(ring[1]["stepsize_min_rounds"], 1) == 9e7 and not ring[1]["stepsize_holds"]
    complete = {r["Q"]: r for r in rows if r["graph"] == "complete"}
    assert not complete[1]["vacuous"] and complete[1]["stepsize_holds"] and complete[1]["phi"] == pytest.approx(2.0)
    assert all(r["vacuous"] == (r["bound"] >= r["trivial"]) for r in rows)
    md = rd.markdown_table(rows).splitlines()
    assert len(md) == 2 + len(rows) and md[2].startswith("| ring | 1 | 0.9987 | 8.34e+04 | 2 | yes |")
