"""theory.derivation and theory.rates: each step of Theorem 4.5's proof as a sympy identity; perturbations flip verdicts."""

import dataclasses

import numpy as np
import pytest
import sympy as sp

from theory import bounds as bd
from theory import derivation as dv
from theory import rates
from theory.phi import PHI

K, L, eta, rho, sl, sg, T, Delta, lam = bd.K, bd.L, bd.eta, bd.rho, bd.sigma_l, bd.sigma_g, bd.T, bd.Delta, bd.lam
G, g2, Gamma = dv.G, dv.g2, dv.Gamma


def zero(e) -> bool:
    return sp.cancel(sp.together(e)) == 0


# ---- the constants the steps are made of ------------------------------------------------------


def test_lemma_d4_and_the_constants():
    assert zero(bd.LEMMA_D4 - eta**2 * bd.C2)  # (8) is η²C₂
    assert zero(bd.C1 - eta**2 * bd.C3)  # C₁ is η²C₃
    assert zero(bd.C2 - bd.C3 - 16 * K**2 * G)  # C₂ = C₃ + 16K²·G: the G that (24) moves to the left
    assert zero(bd.C1 - bd.LEMMA_D4.subs(G, 0))


# ---- (20), (21), (22) ---------------------------------------------------------------------------


def test_eq20_is_young_plus_lemma_d4():
    expected = -eta * K / 2 * g2 + eta * L**2 * K / 2 * bd.C1 + 8 * eta**3 * K**3 * L**2 * G
    assert zero(dv.eq20_inner_product() - expected)


def test_eq22_from_20_21_has_k_cubed():
    diff = dv.eq22_from_19_20_21() - sp.expand(dv.EQ22_PRINTED)
    assert zero(diff - 8 * eta**3 * K**2 * L**2 * (K - 1) * G)
    # with 8η³K³L² in place of the printed 8η³K²L², (22) would be exactly (20) + (21)
    fixed = dv.EQ22_PRINTED + 8 * eta**3 * K**2 * L**2 * (K - 1) * G
    assert zero(dv.eq22_from_19_20_21() - fixed)


def test_eq21_counterexample_exact_and_simulated():
    r = dv.eq21_counterexample(10)
    assert not r["holds"] and r["holds_with_K"] and r["ratio"] > 3
    assert [dv.eq21_counterexample(k)["holds"] for k in range(1, 6)] == [True, True, True, False, False]
    # independent check: K plain gradient steps on f(x) = (L/2)(x − b)² with floats
    Lv, Kv, b, x0 = 2.0, 10, 1.0, 4.0
    eta_v = 0.1 / (Kv * Lv)
    y = x0
    for _ in range(Kv):
        y -= eta_v * Lv * (y - b)
    lhs = Lv / 2 * (y - x0) ** 2
    rhs = 1.5 * eta_v**2 * Kv * Lv * (Lv * (x0 - b)) ** 2  # (21) with ρ = σ_l = 0, G = ‖∇f(x0)‖²
    assert lhs / rhs == pytest.approx(float(r["ratio"]), rel=1e-12)


# ---- (23), (24), (33) ---------------------------------------------------------------------------


def test_eq24_is_the_fixed_point_of_eq23():
    sol = dv.eq24_solved()
    # equality in (23) at G = sol: sol = 2L²C₂(sol)η²Γ + 2g2
    assert zero(dv.eq23_local_gradients().subs(G, sol) - sol)
    assert zero(dv.eq24_validity() - 32 * L**2 * eta**2 * K**2 * Gamma)


def test_eq24_and_eq33_match_the_printed_ones():
    assert zero(dv.eq24_solved(dv.GAMMA_D5) - dv.EQ24_PRINTED)
    assert zero(dv.eq24_solved(Gamma).subs(Gamma, PHI) - dv.EQ33_PRINTED)
    # a transcription slip in (24) would show: 31 in place of 32
    assert not zero(dv.eq24_solved(dv.GAMMA_D5) - dv.EQ24_PRINTED.subs(32, 31))


# ---- (25), telescoping, division by T -----------------------------------------------------------


def test_eq25_exact_substitution():
    step = dv.eq25_per_round()
    rhs = sp.expand(dv.EQ22_PRINTED).subs(G, dv.eq24_solved())
    assert zero(rhs - (-step.progress * g2 + step.noise))


def test_printed_eq25_is_eq22_with_eq24s_denominator_dropped():
    numerator_only = 2 * L**2 * bd.C3 * eta**2 * Gamma + 2 * g2  # (24) without 1/(1 − 32L²η²K²Γ)
    rhs = sp.expand(sp.expand(dv.EQ22_PRINTED).subs(G, numerator_only))
    assert zero(rhs - (-dv.EQ25_PRINTED.progress * g2 + dv.EQ25_PRINTED.noise))
    exact = dv.eq25_per_round()
    assert dv.sign(dv.EQ25_PRINTED.progress - exact.progress) == 1  # printed progress too large
    assert dv.sign(exact.noise - dv.EQ25_PRINTED.noise) == 1  # printed noise too small


def test_telescoping_and_division_by_T():
    t = sp.Symbol("t", integer=True, positive=True)
    F = sp.Function("F")
    assert sp.Sum(F(t) - F(t + 1), (t, 1, T)).doit() == F(1) - F(T + 1)
    for step in (dv.EQ25_PRINTED, dv.eq25_per_round()):
        assert zero(dv.telescoped_mean(step) - dv.final_from(step).total())


def test_d2_final_display_is_half_of_the_telescoped_noise():
    derived = dv.final_from(dv.EQ25_PRINTED)
    printed = dv.D2_FINAL_PRINTED
    assert zero(derived.denominator - printed.denominator) and zero(derived.init - printed.init)
    assert zero(derived.alpha - 2 * printed.alpha) and zero(derived.consensus - 2 * printed.consensus)


def test_theorem_parts_reassemble_eq7():
    parts = dv.THEOREM_4_5_PARTS
    eq7 = 2 * Delta / (T * bd.D_DENOM) + bd.ALPHA + Gamma * bd.BETA_TERM
    assert zero(parts.total() - eq7)


def test_derived_bound_pieces():
    d = dv.derive_final()
    x = 32 * L**2 * eta**2 * K**2 * Gamma
    assert zero(d.denominator - (eta * K - (32 * eta**3 * K**2 * L**2 + 6 * eta**2 * K * L) / (1 - x)))
    assert zero(d.alpha - (eta * L**2 * K * bd.C1 + 3 * eta**2 * K * L * (L**2 * rho**2 + sl**2)))
    assert zero(d.consensus - 2 * eta**4 * K * L**3 * (16 * eta * K * L + 3) * bd.C3 * Gamma / (1 - x))


# ---- the sign test ------------------------------------------------------------------------------


def test_sign():
    x = 32 * L**2 * eta**2 * K**2 * Gamma
    assert dv.sign(1 - x) == 1 and dv.sign(x - 1) == -1 and dv.sign(sp.Integer(0)) == 0
    assert dv.sign(2 * K - 1) == 1  # K ≥ 1
    assert dv.sign(eta - L) is None
    assert dv.sign((eta - L) ** 2 * (1 - x)) == 1  # even powers need no sign


# ---- term by term: verdicts, and perturbations that flip them ---------------------------------


def test_theorem45_terms_verdicts():
    got = {t.key: t.implied for t in dv.theorem45_terms()}
    assert got == {
        "denominator": False,
        "init": True,
        "sigma-l": False,
        "sigma-g": False,
        "rho": False,
        "consensus": False,
    }
    r = {t.key: t.ratio for t in dv.theorem45_terms()}
    assert r["sigma-g"] == 2 and r["init"] == 1
    assert zero(r["consensus"] - 2 / (1 - 32 * L**2 * eta**2 * K**2 * Gamma))
    # started from (20)+(21) instead of the printed (22): the same verdicts
    assert [t.implied for t in dv.theorem45_terms("from-20-21")] == list(got.values())


def test_printing_the_derived_terms_would_hold():
    derived = dv.derive_final()
    assert all(t.implied for t in dv.compare_terms(derived, printed=derived))


def test_perturbed_sigma_g_constant_flips_the_verdict():
    p = dv.THEOREM_4_5_PARTS
    doubled = dataclasses.replace(p, alpha=sp.expand(p.alpha + 8 * eta**3 * K**3 * L**2 * sg**2))  # 8 → 16
    slightly_less = dataclasses.replace(
        p, alpha=sp.expand(p.alpha + sp.Rational(79, 10) * eta**3 * K**3 * L**2 * sg**2)
    )
    verdict = lambda printed: {t.key: t.implied for t in dv.compare_terms(dv.derive_final(), printed)}["sigma-g"]
    assert verdict(doubled) is True and verdict(slightly_less) is False


def test_proof_with_half_the_constants_gives_the_printed_alpha():
    # a (22) with (ηL²K/4)C₁ and (η²KL/4)(L²ρ²+σ_l²+G) would give exactly eq. (7)'s α: the factors 2 and 6 are real
    descent = (
        -eta * K / 2 * g2
        + eta * L**2 * K / 4 * bd.C1
        + 8 * eta**3 * K**2 * L**2 * G
        + eta**2 * K * L / 4 * (L**2 * rho**2 + sl**2 + G)
    )
    got = {t.key: t.implied for t in dv.compare_terms(dv.derive_final(descent))}
    assert got["sigma-l"] and got["sigma-g"] and got["rho"]


def test_q1_region():
    q = dv.q1_consensus_region()
    assert float(q["lam_star"]) == pytest.approx((np.sqrt(17) - 3) / 4)
    lams = np.linspace(0, 1, 10001)
    assert float(q["h_max"]) == pytest.approx(np.max(lams * (1 - lams) ** 2 / (1 + lams)), rel=1e-6)
    assert float(q["s_max"]) < 0.1  # Theorem 4.5's largest step size is outside the region for every λ


# ---- rates ---------------------------------------------------------------------------------------


def _verdicts(name):
    return {v.key: v.holds for v in rates.check_display(name)}


def test_rate_display_verdicts():
    cor = {"init": True, "heterogeneity": True, "L2": False, "topology": False}
    assert _verdicts("cor46") == cor and _verdicts("cor48") == cor
    assert _verdicts("d2-rate") == {"init": False, "heterogeneity": True, "rho4-topology": False, "topology": False}
    assert _verdicts("d3-rate") == {"init": False, "heterogeneity": True, "topology": False}


def test_rate_expansion_leading_terms():
    m = {(x.power, x.atom, x.topology): x.coeff for x in rates.derived_monomials(True)}
    half, one, three_halves = sp.Rational(1, 2), sp.Integer(1), sp.Rational(3, 2)
    assert zero(m[(half, Delta, 0)] - 2 * L / sp.sqrt(K))  # 2Δ/(T·ηK) at η = 1/(L√(KT))
    assert zero(m[(half, sl**2, 0)] - 3 / sp.sqrt(K))  # 3ηL σ_l²: the 3/2 of (21), doubled
    assert zero(m[(one, sp.Integer(1), 0)] - 2 * K * L**2 / (2 * K - 1))  # ρ²/(2K−1) in C₁
    assert zero(m[(three_halves, sg**2, 1)] - 96 * sp.sqrt(K))  # K^(+1/2), not K^(-1/2)


def test_covers_rule():
    mono = lambda p, k, topo=0: rates.Monomial(sp.Rational(p), sl**2, topo, K ** sp.Rational(k), sp.Rational(k))
    assert rates.covers(mono(1, 1), mono("3/2", "1/2"))  # √K/T^{3/2} ≤ K/T for K ≤ T
    assert not rates.covers(mono("3/2", "-1/2"), mono("3/2", "1/2"))
    assert rates.covers(mono(1, 1, topo=1), mono(1, 1))  # Γ ≥ 1
    assert not rates.covers(mono(1, 1), mono(1, 1, topo=1))


def test_corrected_corollary_terms_would_hold():
    _, _, tied, terms = rates.DISPLAYS["cor46"]
    fixed = list(terms)
    fixed[2] = rates.RateTerm(
        "L2", "L²/T + Γ√K L²/T^{3/2}", L**2 / T + Gamma * sp.sqrt(K) * L**2 / T ** sp.Rational(3, 2)
    )
    fixed[3] = rates.RateTerm(
        "topology", "√K(β²+σ_l²)Γ/T^{3/2}", sp.sqrt(K) * (sg**2 + sl**2) * Gamma / T ** sp.Rational(3, 2)
    )
    assert all(v.holds for v in rates.check_terms(tuple(fixed), rho_tied=tied))
    # and a K^{-1/2} (the printed power) fails again
    fixed[3] = terms[3]
    assert not {v.key: v.holds for v in rates.check_terms(tuple(fixed), rho_tied=tied)}["topology"]
