"""The convergence bounds of the seed papers as sympy expressions, every symbol named.

DFedSAM (Shi et al., ICML 2023; seed 003) keeps its formulas through the text
extraction, with a few garbled symbols (each read below where it is used, with a note) and one unreadable
display (the tail of Appendix D.2, NOT CHECKABLE in :mod:`theory.claims`): Theorem 4.5 with α(K,ρ,η), β(K,ρ,η) (the book writes Ψ and Ω: α and β name
the Dirichlet parameter and the heterogeneity bound there; see dfl_book.notation), the step-size condition,
Corollaries 4.6 and 4.8, the proofs' constants C₁, C₂, C₃ and Lemmas D.5/D.6.
FedSAM/MoFedSAM (Qu et al., ICML 2022; seed 002) and DFedAvgM (Sun et al.,
TPAMI; seed 004) lost (nearly) every formula in extraction: those are listed
in :data:`MISSING` with their location and are *not* reconstructed here. Two
of Qu et al.'s lemmas and one DFedAvgM rate survive second-hand, quoted inside
the DFedSAM paper; they are given with that provenance.

Big-O statements (corollaries, abstract) are encoded with every hidden
constant set to 1, so they can be compared term by term, not as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .phi import PHI, PHI_TERM2, Q, lam, m

__all__ = [
    "K",
    "T",
    "eta",
    "rho",
    "L",
    "sigma_l",
    "sigma_g",
    "beta",
    "Delta",
    "G2",
    "B",
    "lam",
    "m",
    "Q",
    "SYMBOLS",
    "D_DENOM",
    "ALPHA",
    "BETA_TERM",
    "THEOREM_4_5",
    "STEPSIZE_CONDITION",
    "C1",
    "C2",
    "C3",
    "BOUND_D2",
    "LEMMA_D4",
    "LEMMA_D5",
    "LEMMA_D6",
    "consensus_bound",
    "consensus_lemma",
    "COROLLARY_4_6",
    "COROLLARY_4_8",
    "ABSTRACT_RATE_DFEDSAM",
    "ABSTRACT_RATE_MGS",
    "DFEDAVGM_RATE_AS_QUOTED",
    "QU_LEMMA_A5_AS_QUOTED",
    "QU_LEMMA_B1_AS_QUOTED",
    "MissingFormula",
    "MISSING",
    "evaluate",
    "theorem45_terms",
    "derived_rate",
    "stepsize_margin",
    "predictions",
]

# ---- symbols (DFedSAM notation, Section 4) ----------------------------------
K = sp.Symbol("K", positive=True)  # local iterations per round
T = sp.Symbol("T", positive=True)  # communication rounds
eta = sp.Symbol("eta", positive=True)  # local learning rate η
rho = sp.Symbol("rho", positive=True)  # SAM perturbation radius ρ
L = sp.Symbol("L", positive=True)  # smoothness, Assumption 4.3
sigma_l = sp.Symbol("sigma_l", nonnegative=True)  # local gradient noise, Assumption 4.4
sigma_g = sp.Symbol("sigma_g", nonnegative=True)  # global heterogeneity, Assumption 4.4
beta = sp.Symbol("beta", nonnegative=True)  # homogeneity parameter, Definition 4.2
Delta = sp.Symbol("Delta", nonnegative=True)  # f(x̄¹) − f*
G2 = sp.Symbol("G2", nonnegative=True)  # (1/m) Σ_i E‖∇f(x^t(i))‖², inside C₂ (Lemma D.5)
B = sp.Symbol("B", nonnegative=True)  # gradient bound in the quoted DFedAvgM rate (Remark 4.7)

SYMBOLS: dict[str, sp.Symbol] = {
    s.name: s for s in (K, T, eta, rho, L, sigma_l, sigma_g, beta, Delta, G2, B, lam, m, Q)
}
SYMBOLS["lam"] = lam  # convenience alias for "lambda" (a Python keyword)

_v = L**2 * rho**2 + sigma_g**2 + sigma_l**2  # recurring L²ρ² + σ_g² + σ_l²

# ---- Theorem 4.5 (eq. 7) -----------------------------------------------------
#: the denominator ηK − 32η³K²L² − 6η²KL of eq. (7)
D_DENOM = eta * K - 32 * eta**3 * K**2 * L**2 - 6 * eta**2 * K * L
#: α(K, ρ, η) as printed below eq. (7); the book's Ψ(K, ρ, η), the term that does not depend on the graph
ALPHA = (
    eta
    * K
    * L
    / (2 * D_DENOM)
    * (
        2 * K * L * (4 * K**3 * L**2 * eta**2 * rho**4 / (2 * K - 1) + 8 * K * eta**2 * _v + rho**2 / (2 * K - 1))
        + eta * (L**2 * rho**2 + sigma_l**2)
    )
)
#: β(K, ρ, η) as printed below eq. (7) (a function, not the homogeneity symbol β); the book's Ω(K, ρ, η),
#: the term that Φ multiplies
BETA_TERM = (
    eta**4
    * K
    * L**3
    * (16 * eta * K * L + 3)
    / D_DENOM
    * (2 * K * (4 * K**3 * L**2 * rho**4 / (2 * K - 1) + 8 * K * _v) + 2 * K * rho**2 / (eta**2 * (2 * K - 1)))
)
#: right-hand side of eq. (7): bound on min_t E‖∇f(x̄^t)‖²
THEOREM_4_5 = 2 * Delta / (T * D_DENOM) + ALPHA + PHI * BETA_TERM
#: Theorem 4.5's assumption 0 < η ≤ 1/(10KL)
STEPSIZE_CONDITION = sp.And(eta > 0, eta <= 1 / (10 * K * L))

# ---- the proof's constants (Appendix D) -------------------------------------
#: C₁, defined after eq. (22) (D.2 version; the D.3 copy has an unbalanced parenthesis)
C1 = 2 * K * (4 * K**3 * L**2 * eta**2 * rho**4 / (2 * K - 1) + 8 * K * eta**2 * _v) + 2 * K * rho**2 / (2 * K - 1)
#: C₂, Lemma D.5 (contains the unknown average squared gradient norm G2)
C2 = 2 * K * (4 * K**3 * L**2 * rho**4 / (2 * K - 1) + 8 * K * _v + 8 * K * G2) + 2 * K * rho**2 / (
    eta**2 * (2 * K - 1)
)
#: C₃, after eq. (24)
C3 = 2 * K * (4 * K**3 * L**2 * rho**4 / (2 * K - 1) + 8 * K * _v) + 2 * K * rho**2 / (eta**2 * (2 * K - 1))
#: the final inequality of Appendix D.2 (Q = 1), before the O(·) step
BOUND_D2 = (
    2 * Delta / (T * D_DENOM)
    + (
        eta * L**2 * K * C1 / 2
        + eta**4 * K * L**3 * C3 * (16 * eta * K * L + 3) / (1 - lam) ** 2
        + 3 * eta**2 * K * L / 2 * (L**2 * rho**2 + sigma_l**2)
    )
    / D_DENOM
)
#: Lemma D.4, eq. (8): (1/m) Σ E‖y^{t,k}(i) + δ_{i,k} − x^t(i)‖² ≤ …
LEMMA_D4 = 2 * K * (
    4 * K**3 * L**2 * eta**2 * rho**4 / (2 * K - 1) + 8 * K * eta**2 * _v + 8 * K * eta**2 * G2
) + 2 * K * rho**2 / (2 * K - 1)
#: Lemma D.5: consensus distance (1/m) Σ E‖x^{t,k}(i) − x̄^t‖² ≤ C₂η²/(1−λ)² (Q = 1)
LEMMA_D5 = C2 * eta**2 / (1 - lam) ** 2
#: Lemma D.6: the same with Q gossip steps, ≤ C₂η²Φ(λ, m, Q)
LEMMA_D6 = C2 * eta**2 * PHI


def consensus_lemma(Q_value: int) -> str:
    """Which lemma bounds a run's consensus distance: "D.5" for one gossip step a round (DFedSAM), "D.6" for
    Q > 1 (DFedSAM-MGS). At Q = 1, D.6 would give C₂η²Φ(λ, m, 1) = 2(1+λ)·C₂η²/(1−λ)² (Remark 4.10): looser
    than D.5 by 2(1+λ), so a Q = 1 run is held to D.5."""
    return "D.5" if Q_value == 1 else "D.6"


def consensus_bound(Q_value: int) -> sp.Expr:
    """The bound of :func:`consensus_lemma` (Q_value): LEMMA_D5 or LEMMA_D6."""
    return {"D.5": LEMMA_D5, "D.6": LEMMA_D6}[consensus_lemma(Q_value)]


# ---- big-O statements, hidden constants set to 1 ------------------------------
_rate_common = (
    (Delta + sigma_l**2) / sp.sqrt(K * T)
    + K * (beta**2 + sigma_l**2) / T
    + L**2 / (sp.sqrt(K) * T ** sp.Rational(3, 2))
)
#: Corollary 4.6 (DFedSAM, η = O(1/(L√(KT))), ρ = O(1/√T))
COROLLARY_4_6 = _rate_common + (beta**2 + sigma_l**2) / (sp.sqrt(K) * T ** sp.Rational(3, 2) * (1 - lam) ** 2)
#: Corollary 4.8 (DFedSAM-MGS, Q > 1)
COROLLARY_4_8 = _rate_common + PHI * (beta**2 + sigma_l**2) / (sp.sqrt(K) * T ** sp.Rational(3, 2))
#: the abstract's DFedSAM rate O(1/√(KT) + 1/T + 1/(K^{1/2}T^{3/2}(1−λ)²))
ABSTRACT_RATE_DFEDSAM = 1 / sp.sqrt(K * T) + 1 / T + 1 / (sp.sqrt(K) * T ** sp.Rational(3, 2) * (1 - lam) ** 2)
#: the abstract's DFedSAM-MGS rate: Φ's second term only
ABSTRACT_RATE_MGS = 1 / sp.sqrt(K * T) + 1 / T + PHI_TERM2 / (sp.sqrt(K) * T ** sp.Rational(3, 2))

# ---- results that survive only second-hand ------------------------------------
#: DFedAvgM's rate as *quoted* by DFedSAM Remark 4.7 (the DFedAvgM seed lost its own formulas)
DFEDAVGM_RATE_AS_QUOTED = (
    1 / sp.sqrt(T) + sigma_g**2 / sp.sqrt(T) + (sigma_g**2 + B**2) / ((1 - lam) ** 2 * T ** sp.Rational(3, 2))
)
#: Qu et al. Lemma A.5 as quoted in DFedSAM Lemma D.2: ‖∇f_i(x+δ_i) − ∇f(x+δ)‖² ≤ 3σ_g² + 6L²ρ². The text
#: prints σ_q, a symbol defined nowhere; read as σ_g, the global variance of Assumption 3 that the lemma bounds
QU_LEMMA_A5_AS_QUOTED = 3 * sigma_g**2 + 6 * L**2 * rho**2
#: Qu et al. Lemma B.1 as quoted in DFedSAM Lemma D.3 (η ≤ 1/(4KL)): E_δ ≤ 2K²β²η²ρ²
QU_LEMMA_B1_AS_QUOTED = 2 * K**2 * beta**2 * eta**2 * rho**2


@dataclass(frozen=True)
class MissingFormula:
    """A result whose formula the seed text lost: recorded, never reconstructed."""

    key: str  # short id, used by the claims checker as missing/<key>
    paper: str
    seed: str
    location: str
    what: str
    survives: str  # what of it is still readable


_Q22 = "Qu et al. 2022 (FedSAM/MoFedSAM)"
_S22 = "Sun et al. 2022 (DFedAvgM)"
MISSING: tuple[MissingFormula, ...] = (
    MissingFormula(
        "fedsam/assumptions",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Assumptions 1-3 (Section 3)",
        "smoothness, heterogeneity and variance inequalities",
        "names only",
    ),
    MissingFormula(
        "fedsam/theorem-3.1",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Theorem 3.1 (Section 3.1)",
        "FedSAM rate, full and partial participation; learning-rate and ρ choices",
        "prose: 'four main terms', an extra SAM term of higher order",
    ),
    MissingFormula(
        "fedsam/remarks-3.2-3.4",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Remarks 3.2-3.4",
        "dominant terms; FedRobust's rate",
        "prose only",
    ),
    MissingFormula(
        "fedsam/theorem-3.5",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Theorem 3.5 / Theorem C.3",
        "margin-based generalization bound of FedSAM",
        "assumptions in prose; bound lost",
    ),
    MissingFormula(
        "mofedsam/theorem-4.1",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Theorem 4.1 and Remark 4.2",
        "MoFedSAM rate, full and partial participation",
        "prose: 'achieves speedup'",
    ),
    MissingFormula(
        "fedsam/appendix-lemmas",
        _Q22,
        "seeds/002_fb4940f60580daff.txt",
        "Appendix A (Lemmas A.1-A.5), B (B.1-B.9), C (Lemmas C.1, C.2: Chatterji et al., Neyshabur et al.), "
        "D (D.1-D.7)",
        "all lemma and theorem statements",
        "Lemma A.5 and B.1 survive as quoted in DFedSAM Lemmas D.2/D.3 (QU_LEMMA_A5_AS_QUOTED, QU_LEMMA_B1_AS_QUOTED)",
    ),
    MissingFormula(
        "dfedavgm/assumptions",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Assumptions 1-4, Definition 1 (Section 2)",
        "smoothness, variance, mixing-matrix and quantizer conditions",
        "Definition 1's four property names (same as DFedSAM Definition 4.1)",
    ),
    MissingFormula(
        "dfedavgm/theorem-1",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Theorem 1 (Section 4)",
        "DFedAvgM nonconvex bound, step-size condition and constants",
        "the rate as quoted by DFedSAM Remark 4.7 (DFEDAVGM_RATE_AS_QUOTED)",
    ),
    MissingFormula(
        "dfedavgm/proposition-1",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Proposition 1",
        "explicit DFedAvgM rate for the chosen step size",
        "prose: improves with K; momentum θ trade-off",
    ),
    MissingFormula(
        "dfedavgm/theorem-2",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Theorem 2 / Proposition 2",
        "rate under the PŁ condition, optimal step-size exponent",
        "prose only",
    ),
    MissingFormula(
        "dfedavgm/theorem-3",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Theorem 3 / Proposition 3",
        "quantized DFedAvgM rate; communication-saving condition",
        "prose only",
    ),
    MissingFormula(
        "dfedavgm/lemmas",
        _S22,
        "seeds/004_7fd48255468d247d.txt",
        "Lemmas 1-5 (Section 5.1)",
        "technical lemmas (Lemma 1 is the ‖W^t − P‖ ≤ λ^t lemma by its prose)",
        "only 'for some C > 0 that depends on the matrix'",
    ),
)


def evaluate(expr: sp.Expr, **values) -> float | sp.Expr:
    """Substitute numbers by symbol name (``K=20, eta=0.01, lam=0.9`` …) and evaluate.

    Unknown names raise ``KeyError``; if symbols remain, the partially
    substituted expression is returned instead of a float.
    """
    subs = {}
    for k, v in values.items():
        if k not in SYMBOLS:
            raise KeyError(f"unknown symbol {k!r}; known: {sorted(SYMBOLS)}")
        subs[SYMBOLS[k]] = v
    out = sp.sympify(expr).subs(subs)
    return float(out) if not out.free_symbols else out


def theorem45_terms(**values) -> dict[str, float]:
    """Theorem 4.5's three terms, Φ, the denominator and the total, at the given values.

    Keys: ``optimization``; ``alpha``, the paper's α (the book's Ψ); ``phi``; ``beta_term``, the paper's β
    (the book's Ω); ``topology`` = Φ·Ω; ``denominator``; ``bound``.
    """
    first = 2 * Delta / (T * D_DENOM)
    out = {
        "denominator": evaluate(D_DENOM, **{k: v for k, v in values.items() if k in ("eta", "K", "L")}),
        "optimization": evaluate(first, **values),
        "alpha": evaluate(ALPHA, **values),
        "phi": evaluate(PHI, **values),
        "beta_term": evaluate(BETA_TERM, **values),
    }
    out["topology"] = out["phi"] * out["beta_term"]
    out["bound"] = out["optimization"] + out["alpha"] + out["topology"]
    return out


def derived_rate() -> dict[str, sp.Expr]:
    """Theorem 4.5 under Corollary 4.6's choices, expanded in ε = T^{-1/2}.

    Substitutes η = 1/(L√(KT)) and ρ = 1/√T (the O(·) constants set to 1) and
    returns the coefficients of T^{-1/2}, T^{-1} and T^{-3/2} exactly; the
    T^{-3/2} coefficient is that of Φ(λ, m, Q) (the topology term).
    """
    e = sp.Symbol("epsilon", positive=True)
    sub = {eta: e / (L * sp.sqrt(K)), rho: e}
    first = sp.series(sp.simplify((2 * Delta / D_DENOM).subs(sub)) * e**2, e, 0, 3).removeO()
    alpha = sp.series(sp.simplify(ALPHA.subs(sub)), e, 0, 3).removeO()
    beta_t = sp.series(sp.simplify(BETA_TERM.subs(sub)), e, 0, 4).removeO()
    tot = sp.expand(first + alpha)
    return {
        "T^-1/2": sp.simplify(tot.coeff(e, 1)),
        "T^-1": sp.simplify(tot.coeff(e, 2)),
        "T^-3/2 (times Phi)": sp.factor(sp.expand(beta_t).coeff(e, 3)),
    }


def stepsize_margin() -> dict[str, sp.Expr]:
    """Theorem 4.5's denominator under η = s/(KL), 0 < s ≤ 1/10.

    D/(ηK) = 1 − (32s² + 6s)/K. The numerator 32s² + 6s increases in s > 0,
    so on (0, 1/10] it is at most 32/100 + 6/10 = 23/25 < 1 ≤ K: D ≥ (2/25)ηK > 0.
    """
    s = sp.Symbol("s", positive=True)
    ratio = sp.simplify((D_DENOM / (eta * K)).subs(eta, s / (K * L)))
    worst_num = (32 * s**2 + 6 * s).subs(s, sp.Rational(1, 10))
    increasing = sp.diff(32 * s**2 + 6 * s, s).is_positive
    return {
        "D_over_etaK": ratio,
        "max_numerator": worst_num,
        "numerator_increasing": bool(increasing),
        "min_ratio_K1": 1 - worst_num,
        "positive": bool(increasing and worst_num < 1),
    }


def predictions(
    constants,
    *,
    K: int,
    T: int,
    eta: float,
    rho: float,
    lam_value: float,
    m_value: int,
    Q_value: int = 1,
    f_x1: float | None = None,
    G2_value: float | None = None,
) -> dict[str, float | None]:
    """What the theory predicts for a run, to put next to what the run measures.

    ``constants`` is a :class:`theory.problems.ProblemConstants` (L, σ_l, σ_g,
    f*). Returns Theorem 4.5's bound on min_t E‖∇f(x̄ᵗ)‖² (needs ``f_x1`` =
    f(x̄¹)), Lemma D.5's (Q = 1) or D.6's bound on the consensus distance (needs the
    measured ``G2_value`` = max_t (1/m)Σ_i‖∇f(xᵗ(i))‖², which C₂ contains), the
    per-gossip-step contraction λ (Lemma D.1) and λ^Q per round, and whether
    the step-size condition η ≤ 1/(10KL) holds.
    """
    base = dict(
        K=K,
        eta=eta,
        rho=rho,
        L=constants.L,
        sigma_l=constants.sigma_l,
        sigma_g=constants.sigma_g,
        lam=lam_value,
        m=m_value,
        Q=Q_value,
    )
    grad = None
    if f_x1 is not None and constants.f_star is not None:
        grad = theorem45_terms(**base, T=T, Delta=f_x1 - constants.f_star)["bound"]
    cons = None if G2_value is None else evaluate(consensus_bound(Q_value), **base, G2=G2_value)
    return {
        "min_grad_norm_sq_bound": grad,
        "consensus_distance_bound": cons,
        "contraction_per_gossip_step": lam_value,
        "contraction_per_round": lam_value**Q_value,
        "stepsize_condition": bool(eta <= 1 / (10 * K * constants.L)),
    }
