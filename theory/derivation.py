"""Theorem 4.5 re-derived from Appendix D's per-step inequalities, constant by constant.

DFedSAM (Shi et al., ICML 2023; seed 003), Appendix D.2 (Q = 1, Lemma D.5)
and D.3 (Q > 1, Lemma D.6). Each display the proof uses is a sympy
expression named after its equation number; each step from one display to
the next is redone *exactly*: no "η is a very small value", no O(·). The
result, :func:`derive_final`, is then compared term by term with eq. (7)
(:func:`theorem45_terms`) and with the appendix's own final displays.

Notation (the appendix's quantities, given names):

* ``g2`` = E‖∇f(x̄ᵗ)‖², the quantity whose minimum over t Theorem 4.5 bounds;
* ``G`` = (1/m) Σ_i E‖∇f(xᵗ(i))‖², the gradient at the clients' own models
  (``bounds.G2``; Lemma D.4 and C₂ contain it);
* ``Gamma`` = the consensus factor: (1/m) Σ_i E‖xᵗ(i) − x̄ᵗ‖² ≤ C₂η²Γ, with
  Γ = 1/(1−λ)² by Lemma D.5 (DFedSAM, used in D.2) or Γ = Φ(λ, m, Q) by
  Lemma D.6 (DFedSAM-MGS, used in D.3). The derivation keeps Γ a symbol.

A per-round inequality is carried as E f(x̄ᵗ⁺¹) ≤ E f(x̄ᵗ) − progress·g2 + noise
(:class:`PerRound`); a final bound as (init + alpha + consensus)/denominator
(:class:`FinalBound`), the shape of eq. (7) over its common denominator.

The lemmas are used as stated. Whether their own proofs hold is checked
elsewhere (claims ``lemma-d3-use``, ``lemma-d6-*``). (20) and (21) are used as
printed although (21) is wrong by a factor K (:func:`eq21_counterexample`);
(22) is used as printed although (20) + (21) give K³ where it has K²
(:func:`eq22_from_19_20_21`; the verdicts do not change). Every display used
here survives in the seed; two have a stray parenthesis, (24) and (25), and
are read with it dropped (noted where used). Nothing is reconstructed.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy as sp

from .bounds import ALPHA, BETA_TERM, C1, C2, C3, D_DENOM, LEMMA_D4, Delta, G2, K, L, T, eta, rho, sigma_g, sigma_l
from .phi import PHI, Q, lam

__all__ = [
    "g2",
    "G",
    "Gamma",
    "GAMMA_D5",
    "GAMMA_D6",
    "eq20_inner_product",
    "eq21_second_order",
    "EQ22_PRINTED",
    "eq22_from_19_20_21",
    "eq21_counterexample",
    "consensus_bound",
    "eq23_local_gradients",
    "eq24_solved",
    "eq24_validity",
    "EQ24_PRINTED",
    "EQ33_PRINTED",
    "PerRound",
    "eq25_per_round",
    "EQ25_PRINTED",
    "telescoped_mean",
    "FinalBound",
    "final_from",
    "derive_final",
    "THEOREM_4_5_PARTS",
    "D2_FINAL_PRINTED",
    "D3_FINAL_PRINTED",
    "D3_SECOND_DISPLAY",
    "TermCheck",
    "THEOREM_4_5_TEXTS",
    "compare_terms",
    "theorem45_terms",
    "q1_consensus_region",
    "sign",
]

g2 = sp.Symbol("g2", nonnegative=True)  # E‖∇f(x̄ᵗ)‖²
G = G2  # (1/m) Σ_i E‖∇f(xᵗ(i))‖²
Gamma = sp.Symbol("Gamma", positive=True)  # consensus factor of Lemma D.5 / D.6
#: Lemma D.5 (DFedSAM, Q = 1): consensus distance ≤ C₂η²/(1−λ)²
GAMMA_D5 = 1 / (1 - lam) ** 2
#: Lemma D.6 (DFedSAM-MGS): consensus distance ≤ C₂η²Φ(λ, m, Q)
GAMMA_D6 = PHI

# --------------------------------------------------------------------------- #
# One round: (19) = f(x̄ᵗ) + (20) + (21) gives (22)
# --------------------------------------------------------------------------- #


def eq20_inner_product() -> sp.Expr:
    """(20), step c): E⟨∇f(x̄ᵗ), z̄ᵗ − x̄ᵗ⟩ ≤ −(ηK/2)·g2 + (ηL²K²/(2K))·[Lemma D.4's bound (8)].

    As printed: Young's inequality on step b), then Lemma D.4 for
    ‖xᵗ(i) − yᵗ,ᵏ(i) − δ_{i,k}‖². (Step b) applies Lipschitz continuity with
    xᵗ(i) where step a) has x̄ᵗ; term by term the two differ by the consensus
    distance, which (20) does not bound. Used as printed.)
    """
    return -eta * K / 2 * g2 + eta * L**2 * K**2 / (2 * K) * LEMMA_D4


def eq21_second_order() -> sp.Expr:
    """(21) as printed: (L/2)E‖x̄ᵗ⁺¹ − x̄ᵗ‖² ≤ (3η²KL/2)(L²ρ² + σ_l² + G)."""
    return 3 * eta**2 * K * L / 2 * (L**2 * rho**2 + sigma_l**2 + G)


#: (22) as printed: E f(x̄ᵗ⁺¹) − E f(x̄ᵗ) ≤ −(ηK/2)g2 + (ηL²K/2)C₁ + 8η³K²L²·G + (3η²KL/2)(L²ρ² + σ_l² + G)
EQ22_PRINTED = (
    -eta * K / 2 * g2
    + eta * L**2 * K / 2 * C1
    + 8 * eta**3 * K**2 * L**2 * G
    + 3 * eta**2 * K * L / 2 * (L**2 * rho**2 + sigma_l**2 + G)
)


def eq22_from_19_20_21() -> sp.Expr:
    """(22) redone: (19) says E f(x̄ᵗ⁺¹) − E f(x̄ᵗ) ≤ (20) + (21); add the two right-hand sides.

    Lemma D.4's G-term is 2K·8Kη²·G, so (20) contributes (ηL²K/2)·16K²η²·G
    = 8η³K³L²·G: the power of K is 3, where the printed (22) has 2.
    """
    return sp.expand(eq20_inner_product() + eq21_second_order())


def eq21_counterexample(K_value: int = 10, s: Fraction = Fraction(1, 10)) -> dict:
    """(21) on the simplest problem it covers: it fails for K ≥ 4 at Theorem 4.5's largest step size.

    Every client has f_i(x) = (L/2)‖x − b‖², no gradient noise (σ_l = 0),
    ρ = 0, and the clients agree, xᵗ(i) = x̄ᵗ (so G = L²‖x̄ᵗ − b‖²). Then K
    local gradient steps give z̄ᵗ − b = (1 − ηL)^K (x̄ᵗ − b), so, per ‖x̄ᵗ − b‖²,
    the left side of (21) is (L/2)(1 − (1 − ηL)^K)² and the right side is
    (3η²KL/2)·L². Exact rational arithmetic at ηKL = s, L = 1. (The proof's
    second line drops the factor K of ‖Σ_k u_k‖² ≤ K Σ_k ‖u_k‖²; both sides
    are continuous in ρ, so small ρ > 0 fails as well.)
    """
    eta_v = sp.Rational(s.numerator, s.denominator) / K_value  # L = 1
    lhs = sp.Rational(1, 2) * (1 - (1 - eta_v) ** K_value) ** 2
    rhs = sp.Rational(3, 2) * eta_v**2 * K_value
    rhs_with_K = rhs * K_value  # the same bound with the factor K the Cauchy-Schwarz step needs
    return {
        "K": K_value,
        "s": s,
        "lhs": lhs,
        "rhs": rhs,
        "ratio": lhs / rhs,
        "holds": bool(lhs <= rhs),
        "holds_with_K": bool(lhs <= rhs_with_K),
    }


# --------------------------------------------------------------------------- #
# Consensus: (23) with Lemma D.5 / D.6, solved for G in (24) / (33)
# --------------------------------------------------------------------------- #


def consensus_bound(gamma: sp.Expr = Gamma) -> sp.Expr:
    """Lemma D.5 (Γ = 1/(1−λ)²) / Lemma D.6 (Γ = Φ): (1/m) Σ_i E‖xᵗ(i) − x̄ᵗ‖² ≤ C₂η²Γ (C₂ contains G)."""
    return C2 * eta**2 * gamma


def eq23_local_gradients(gamma: sp.Expr = Gamma) -> sp.Expr:
    """(23) / (32): G ≤ 2L²·(1/m) Σ_i ‖xᵗ(i) − x̄ᵗ‖² + 2·g2 ≤ 2L²·C₂η²Γ + 2·g2 (right side; contains G)."""
    return 2 * L**2 * consensus_bound(gamma) + 2 * g2


def eq24_validity(gamma: sp.Expr = Gamma) -> sp.Expr:
    """The coefficient of G on the right of (23): 32L²η²K²Γ. Solving for G needs it below 1."""
    return sp.expand(eq23_local_gradients(gamma)).coeff(G)


def eq24_solved(gamma: sp.Expr = Gamma) -> sp.Expr:
    """(24) / (33) redone: move the G-part of (23) to the left, G ≤ (2L²C₃η²Γ + 2g2)/(1 − 32L²η²K²Γ).

    Valid only where 32L²η²K²Γ < 1 (claim ``stepsize-eq24``: not implied by η ≤ 1/(10KL)).
    Solved with Γ a symbol, then ``gamma`` put in (sympy is slow on Φ's powers).
    """
    return _eq24_symbolic().subs(Gamma, gamma)


@lru_cache(maxsize=None)
def _eq24_symbolic() -> sp.Expr:
    rhs = sp.expand(eq23_local_gradients(Gamma))
    c_g = rhs.coeff(G)
    return sp.factor(sp.cancel((rhs - c_g * G) / (1 - c_g)))


#: (24) as printed (Q = 1; its stray parenthesis dropped): G ≤ (2L²C₃η² + 2(1−λ)²g2)/((1−λ)² − 32L²η²K²)
EQ24_PRINTED = (2 * L**2 * C3 * eta**2 + 2 * (1 - lam) ** 2 * g2) / ((1 - lam) ** 2 - 32 * L**2 * eta**2 * K**2)
#: (33) as printed (Q > 1): G ≤ (2L²C₃η²Φ + 2g2)/(1 − 32L²η²K²Φ)
EQ33_PRINTED = (2 * L**2 * C3 * eta**2 * PHI + 2 * g2) / (1 - 32 * L**2 * eta**2 * K**2 * PHI)


# --------------------------------------------------------------------------- #
# (25) / (34): (24) put into (22); telescoping over t = 1..T; division by T
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class PerRound:
    """E f(x̄ᵗ⁺¹) ≤ E f(x̄ᵗ) − progress·g2 + noise."""

    progress: sp.Expr
    noise: sp.Expr


def eq25_per_round(descent: sp.Expr = EQ22_PRINTED, gamma: sp.Expr = Gamma) -> PerRound:
    """(25) / (34) redone: replace G in the descent inequality by its bound (24), exactly.

    The coefficient of G in (22) is positive, so its upper bound may be put in.
    The result keeps (24)'s denominator 1 − 32L²η²K²Γ, which the printed (25)
    drops ("η is a very small value", step a)).
    """
    d = sp.expand(descent)
    c_g = d.coeff(G)
    if sign(c_g) != 1:
        raise ValueError(f"the coefficient {c_g} of G must be positive to put in its upper bound")
    rest = d - c_g * G
    rhs = sp.expand(rest) + c_g * eq24_solved(gamma)
    progress = -sp.together(sp.diff(rhs, g2))
    noise = sp.together(rhs.subs(g2, 0))
    return PerRound(progress=progress, noise=noise)


#: (25) as printed (stray parenthesis dropped), with (1−λ)^-2 written Γ; (34) is the same with Γ = Φ
EQ25_PRINTED = PerRound(
    progress=eta * K / 2 - 16 * eta**3 * K**2 * L**2 - 3 * eta**2 * K * L,
    noise=(
        3 * eta**2 * K * L / 2 * (L**2 * rho**2 + sigma_l**2)
        + eta * K * L**2 * C1 / 2
        + (16 * eta**5 * K**2 * L**4 * C3 + 3 * eta**4 * K * L**3 * C3) * Gamma
    ),
)


def telescoped_mean(step: PerRound) -> sp.Expr:
    """Sum the per-round inequality over t = 1..T and divide by T.

    Σ_t (E f(x̄ᵗ) − E f(x̄ᵗ⁺¹)) = f(x̄¹) − E f(x̄ᵀ⁺¹) ≤ f(x̄¹) − f* = Δ, so
    progress·Σ_t g2_t ≤ Δ + T·noise, and min_t g2_t ≤ (1/T)Σ_t g2_t
    ≤ (Δ + T·noise)/(T·progress) (for progress > 0).
    """
    return (Delta + T * step.noise) / (T * step.progress)


@dataclass(frozen=True)
class FinalBound:
    """min_t E‖∇f(x̄ᵗ)‖² ≤ (init + alpha + consensus)/denominator, the shape of eq. (7).

    ``init`` carries f(x̄¹) − f*; ``alpha`` the Γ-free rest (α·D in the
    theorem); ``consensus`` the part that carries the topology (Φ·β·D).
    """

    denominator: sp.Expr
    init: sp.Expr
    alpha: sp.Expr
    consensus: sp.Expr

    def total(self) -> sp.Expr:
        return (self.init + self.alpha + self.consensus) / self.denominator


def final_from(step: PerRound) -> FinalBound:
    """(Δ + T·noise)/(T·progress) written over the denominator D = 2·progress, as in eq. (7)."""
    noise_without_topology = step.noise.subs(Gamma, 0)
    return FinalBound(
        denominator=sp.together(2 * step.progress),
        init=2 * Delta / T,
        alpha=sp.expand(2 * noise_without_topology),
        consensus=sp.together(2 * (step.noise - noise_without_topology)),
    )


@lru_cache(maxsize=None)
def derive_final(descent: sp.Expr = EQ22_PRINTED) -> FinalBound:
    """The bound the proof's chain gives, with Γ symbolic: (22) → (24) → (25) exact → telescope → ÷T.

    ``descent`` is the per-round inequality to start from: the printed (22)
    (default) or :func:`eq22_from_19_20_21`.
    """
    return final_from(eq25_per_round(descent, Gamma))


# --------------------------------------------------------------------------- #
# What the paper prints, in the same shape
# --------------------------------------------------------------------------- #

#: Theorem 4.5, eq. (7), over its denominator D; the topology factor Φ written Γ
THEOREM_4_5_PARTS = FinalBound(
    denominator=D_DENOM,
    init=2 * Delta / T,
    alpha=sp.expand(sp.cancel(ALPHA * D_DENOM)),
    consensus=sp.cancel(BETA_TERM * D_DENOM) * Gamma,
)
#: the final display of Appendix D.2 (Γ = 1/(1−λ)²) and the first final display of D.3 (Γ = Φ): the same shape
D2_FINAL_PRINTED = FinalBound(
    denominator=D_DENOM,
    init=2 * Delta / T,
    alpha=sp.expand(eta * L**2 * K * C1 / 2 + 3 * eta**2 * K * L / 2 * (L**2 * rho**2 + sigma_l**2)),
    consensus=eta**4 * K * L**3 * C3 * (16 * eta * K * L + 3) * Gamma,
)
#: (D.3's display prints Φ's first term as (λ^Q+1)/((1−λ)²m²(Q−1)), a garbled m^{2(Q−1)}: read as eq. (6)'s Φ,
#: which the same appendix prints in full two lines below)
D3_FINAL_PRINTED = D2_FINAL_PRINTED
#: the second final display of D.3 ("Summing the inequality (34) ... again"): D without 6η²KL, C₂ in place of C₃
D3_SECOND_DISPLAY = FinalBound(
    denominator=eta * K - 32 * eta**3 * K**2 * L**2,
    init=2 * Delta / T,
    alpha=sp.expand(eta * L**2 * K * C1 / 2),
    consensus=16 * C2 * eta**5 * K**2 * L**4 * Gamma,
)


# --------------------------------------------------------------------------- #
# Term-by-term comparison
# --------------------------------------------------------------------------- #

_s = sp.Symbol("s", positive=True)  # parametrises the valid region 32L²η²K²Γ = 1/(1+s) < 1
_k = sp.Symbol("k", nonnegative=True)  # K = 1 + k ≥ 1


def sign(expr: sp.Expr) -> int | None:
    """The sign (+1, 0, −1) of ``expr`` wherever the proof's steps are valid; None if this test cannot tell.

    Valid region: K ≥ 1 and 32L²η²K²Γ < 1 (where (24) may be solved for G),
    every other symbol positive. Written with K = 1 + k and
    32L²η²K²Γ = 1/(1+s), each factor of numerator and denominator is a
    polynomial in positive quantities; one whose coefficients all have one
    sign has that sign. A sufficient test: no search, no sampling.
    """
    region = {Gamma: 1 / (32 * L**2 * eta**2 * K**2 * (1 + _s))}
    e = sp.factor(sp.together(sp.sympify(expr).subs(region).subs(K, 1 + _k)))
    if e == 0:
        return 0
    out = 1
    for part in sp.fraction(e):
        coeff, factors = sp.factor_list(part)
        out *= 1 if coeff > 0 else -1
        for factor, multiplicity in factors:
            if multiplicity % 2 == 0:
                continue
            coeffs = sp.Poly(factor, *sorted(factor.free_symbols, key=str)).coeffs()
            if all(c > 0 for c in coeffs):
                continue
            if all(c < 0 for c in coeffs):
                out = -out
                continue
            return None
    return out


@dataclass(frozen=True)
class TermCheck:
    """One term of a printed bound against the derivation: both expressions, their ratio and the verdict."""

    key: str
    printed_text: str
    printed: sp.Expr
    derived: sp.Expr
    ratio: sp.Expr  # derived / printed
    implied: bool | None  # printed ≥ derived on the valid region (for a denominator: ≤); None: sign test undecided
    note: str = ""


def _compare(
    key: str, text: str, printed: sp.Expr, derived: sp.Expr, *, larger_is_weaker: bool = True, note: str = ""
) -> TermCheck:
    """A printed numerator is implied if it is ≥ the derived one; a printed denominator if it is ≤."""
    ratio = sp.factor(sp.cancel(sp.together(derived / printed)))
    slack = sign(printed - derived if larger_is_weaker else derived - printed)
    implied = None if slack is None else slack >= 0
    return TermCheck(key, text, sp.factor(printed), sp.factor(derived), ratio, implied, note)


def _parts(expr: sp.Expr) -> dict[str, sp.Expr]:
    """A Γ-free numerator split by what it carries: σ_l², σ_g², and the ρ-terms (σ_l = σ_g = 0)."""
    e = sp.expand(expr)
    return {"sigma-l": e.coeff(sigma_l, 2), "sigma-g": e.coeff(sigma_g, 2), "rho": e.subs({sigma_l: 0, sigma_g: 0})}


#: the printed terms of eq. (7), as compared below
THEOREM_4_5_TEXTS = {
    "denominator": "ηK − 32η³K²L² − 6η²KL",
    "init": "2[f(x¹) − f*]/T (over D)",
    "sigma-l": "σ_l² in α·D: 8η³K³L² + η²KL/2",
    "sigma-g": "σ_g² in α·D: 8η³K³L²",
    "rho": "ρ-terms of α·D: ηK²L²(4K³L²η²ρ⁴/(2K−1) + 8Kη²L²ρ² + ρ²/(2K−1)) + η²KL³ρ²/2",
    "consensus": "Φ·β·D = Φ·η⁴KL³(16ηKL+3)·C₃",
}


def compare_terms(derived: FinalBound, printed: FinalBound = THEOREM_4_5_PARTS) -> tuple[TermCheck, ...]:
    """Each term of ``printed`` (eq. (7) by default) against ``derived``, over the common denominator.

    Keys: ``denominator`` (D itself), ``init`` (the f(x̄¹) − f* term), the
    three parts of α·D (``sigma-l``, ``sigma-g``, ``rho``) and ``consensus``
    (Φ·β·D, Φ written Γ in both).
    """
    tx = THEOREM_4_5_TEXTS
    out = [
        _compare(
            "denominator",
            tx["denominator"],
            printed.denominator,
            derived.denominator,
            larger_is_weaker=False,
            note="the printed D is what is left when (25) drops (24)'s denominator 1 − 32L²η²K²Γ",
        ),
        _compare("init", tx["init"], printed.init, derived.init),
    ]
    pp, dp = _parts(printed.alpha), _parts(derived.alpha)
    out += [_compare(k, tx[k], pp[k], dp[k]) for k in ("sigma-l", "sigma-g", "rho")]
    out.append(_compare("consensus", tx["consensus"], printed.consensus, derived.consensus, note="Γ = Φ (Lemma D.6)"))
    return tuple(out)


@lru_cache(maxsize=None)
def theorem45_terms(descent_name: str = "printed-22") -> tuple[TermCheck, ...]:
    """Eq. (7) term by term against :func:`derive_final` started from (22) as printed, or from (20)+(21)."""
    descent = {"printed-22": EQ22_PRINTED, "from-20-21": eq22_from_19_20_21()}[descent_name]
    return compare_terms(derive_final(descent))


@lru_cache(maxsize=None)
def q1_consensus_region() -> dict:
    """Q = 1 through Lemma D.5 (Γ = 1/(1−λ)²) against the printed Φ(λ,m,1)·β = 2(1+λ)/(1−λ)²·β.

    derived ≤ printed ⟺ 2/(1 − 32s²/(1−λ)²) ≤ 2(1+λ), s = ηKL
    ⟺ 32s²(1+λ) ≤ λ(1−λ)². Returns that condition, the maximum of
    h(λ) = λ(1−λ)²/(1+λ) on [0, 1] and where, and the largest s it allows.
    """
    sv = sp.Symbol("s", positive=True)
    d = derive_final().consensus.subs(Gamma, GAMMA_D5)
    printed = THEOREM_4_5_PARTS.consensus.subs(Gamma, PHI.subs(Q, 1))
    ratio = sp.factor(sp.cancel(sp.together((d / printed).subs(eta, sv / (K * L)))))
    h = lam * (1 - lam) ** 2 / (1 + lam)
    crit = [r for r in sp.solve(sp.diff(h, lam), lam) if r.is_real and 0 < r < 1]
    lam_star = crit[0]
    h_max = sp.nsimplify(sp.simplify(h.subs(lam, lam_star)))
    return {
        "ratio": ratio,
        "condition": sp.Le(32 * sv**2 * (1 + lam), lam * (1 - lam) ** 2),
        "h": h,
        "lam_star": lam_star,
        "h_max": h_max,
        "s_max": sp.sqrt(h_max / 32),
    }
