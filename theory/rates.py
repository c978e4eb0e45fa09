"""The papers' O(·) rate displays, term by term, against the bound derived in :mod:`theory.derivation`.

DFedSAM (seed 003) prints four rate displays that survive extraction:
Corollary 4.6 (DFedSAM), Corollary 4.8 (DFedSAM-MGS), and the two displays
of Appendix D.2 / D.3 that keep ρ free (before ρ = O(1/√T) is put in). The
appendix's displays after ρ = O(1/√T) are Corollaries 4.6/4.8 with σ_g² for
β². FedSAM's (seed 002) and DFedAvgM's (seed 004) rates lost their formulas
(``bounds.MISSING``).

Method. The derived bound (Γ symbolic; Γ = 1/(1−λ)² for DFedSAM by Lemma
D.5, Γ = Φ for DFedSAM-MGS by Lemma D.6) is taken at the corollaries' choice
η = 1/(L√(KT)) (and ρ = 1/√T where the display sets it), with every O(·)
constant set to 1, and expanded in ε = T^{-1/2} to T^{-3/2}, the last order
the displays print. (The exact denominator 1 − 32L²η²K²Γ = 1 − 32KΓ/T is
expanded too: valid for T > 32KΓ, the displays' "T large enough".) Each resulting monomial c(K, L)·atom·Γ^j·T^{-p} (atom one
of f(x̄¹)−f*, σ_l², σ_g², ρ², ρ⁴ or 1) must be covered by a printed monomial
c'·atom·Γ^i·T^{-q} with the same atom and i ≥ j (Γ ≥ 1: 1/(1−λ)² ≥ 1, and Φ
is at least its second term, which is ≥ 1):

    p − q ≥ max(a − b, 0),   a, b the growth exponents in K of c and c',

which is K^a T^{-p} ≤ K^b T^{-q} for all K ≤ T. (K ≤ T holds in the
corollaries' regime: η = 1/(L√(KT)) ≤ 1/(10KL) needs T ≥ 100K.) L is
absorbed in O(·), as the paper does for the L on f(x̄¹)−f*, and σ_g² ≤ β²
lets a printed β² cover a derived σ_g². An uncovered monomial is charged to
the printed term with the same atom and topology factor at the nearest
power of T, else the same atom, else to no term (key ``uncovered``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from .bounds import Delta, K, L, T, eta, rho, sigma_g, sigma_l
from .derivation import Gamma, derive_final

__all__ = [
    "eps",
    "Monomial",
    "monomials",
    "covers",
    "RateTerm",
    "DISPLAYS",
    "TermVerdict",
    "derived_monomials",
    "check_display",
    "check_terms",
]

eps = sp.Symbol("epsilon", positive=True)  # T^(-1/2)


@dataclass(frozen=True)
class Monomial:
    """coeff(K, L)·atom·Γ^topology·T^(-power)."""

    power: sp.Rational  # of 1/T
    atom: sp.Expr
    topology: int  # power of Γ
    coeff: sp.Expr
    k_exponent: sp.Rational  # coeff ~ K^k_exponent as K → ∞

    def expr(self) -> sp.Expr:
        return self.coeff * self.atom * Gamma**self.topology * T ** (-self.power)

    def __str__(self) -> str:
        return sp.sstr(sp.factor(self.coeff) * self.atom * Gamma**self.topology / T**self.power)


def _k_exponent(coeff: sp.Expr) -> sp.Rational:
    """Growth exponent in K of a rational function of √K (L set to 1): degree of numerator − denominator."""
    k = sp.Symbol("k", positive=True)
    num, den = sp.fraction(sp.together(coeff.subs({L: 1, K: k**2})))
    return sp.Rational(sp.degree(sp.expand(num), k) - sp.degree(sp.expand(den), k), 2)


def monomials(expr: sp.Expr, *, rho_tied: bool, max_power: sp.Rational = sp.Rational(3, 2)) -> list[Monomial]:
    """``expr`` at η = 1/(L√(KT)) (and ρ = 1/√T if ``rho_tied``), expanded in 1/√T up to T^(-max_power)."""
    sub = {eta: eps / (L * sp.sqrt(K)), T: eps**-2}
    if rho_tied:
        sub[rho] = eps
    order = int(2 * max_power) + 1
    series = sp.expand(sp.series(expr.subs(sub), eps, 0, order).removeO())
    out = []
    for e_power, c in sp.collect(series, eps, evaluate=False).items():
        power = sp.Rational(sp.degree(e_power, eps), 2)
        gens = [g for g in (Delta, sigma_l, sigma_g, rho, Gamma) if c.has(g)]
        terms = sp.Poly(c, *gens).terms() if gens else [((), c)]
        for exps, coeff in terms:
            mono = sp.Mul(*(g**e for g, e in zip(gens, exps)))
            topology = int(sp.degree(mono, Gamma)) if mono.has(Gamma) else 0
            atom = sp.simplify(mono / Gamma**topology)
            coeff = sp.factor(coeff)
            out.append(Monomial(power, atom, topology, coeff, _k_exponent(coeff)))
    return sorted(out, key=lambda x: (x.power, str(x.atom), x.topology))


def covers(printed: Monomial, derived: Monomial) -> bool:
    """Same atom, K^a T^{-p} ≤ K^b T^{-q} for all 1 ≤ K ≤ T, and no more powers of Γ than printed (Γ ≥ 1)."""
    return (
        printed.atom == derived.atom
        and printed.topology >= derived.topology
        and derived.power - printed.power >= max(derived.k_exponent - printed.k_exponent, 0)
    )


@dataclass(frozen=True)
class RateTerm:
    """One printed O(·) term: key (claim suffix), the paper's text, the term (constants 1, β² → σ_g², Φ or (1−λ)⁻² → Γ)."""

    key: str
    text: str
    expr: sp.Expr


_per_sqrt_kt = 1 / sp.sqrt(K * T)
_rho_free_d2 = (
    RateTerm("init", "(f(x̄¹)−f* + L²ρ² + σ_l²)/√(KT)", (Delta + L**2 * rho**2 + sigma_l**2) * _per_sqrt_kt),
    RateTerm("heterogeneity", "K(L²ρ² + σ_g² + σ_l²)/T", K * (L**2 * rho**2 + sigma_g**2 + sigma_l**2) / T),
    RateTerm(
        "rho4-topology",
        "K^{3/2}L²ρ⁴/(T^{3/2}(1−λ)²)",
        K ** sp.Rational(3, 2) * L**2 * rho**4 * Gamma / T ** sp.Rational(3, 2),
    ),
    RateTerm(
        "topology",
        "(L²ρ² + σ_g² + σ_l²)/(K^{1/2}T^{3/2}(1−λ)²)",
        (L**2 * rho**2 + sigma_g**2 + sigma_l**2) * Gamma / (sp.sqrt(K) * T ** sp.Rational(3, 2)),
    ),
)
_rho_free_d3 = (
    _rho_free_d2[0],
    _rho_free_d2[1],
    RateTerm(
        "topology",
        "Φ(K²L²ρ⁴ + L²ρ² + σ_g² + σ_l²)/(K^{1/2}T^{3/2})",
        (K**2 * L**2 * rho**4 + L**2 * rho**2 + sigma_g**2 + sigma_l**2)
        * Gamma
        / (sp.sqrt(K) * T ** sp.Rational(3, 2)),
    ),
)


def _corollary(topology_text: str) -> tuple[RateTerm, ...]:
    return (
        RateTerm("init", "(f(x̄¹)−f* + σ_l²)/√(KT)", (Delta + sigma_l**2) * _per_sqrt_kt),
        RateTerm("heterogeneity", "K(β² + σ_l²)/T", K * (sigma_g**2 + sigma_l**2) / T),
        RateTerm("L2", "L²/(K^{1/2}T^{3/2})", L**2 / (sp.sqrt(K) * T ** sp.Rational(3, 2))),
        RateTerm("topology", topology_text, (sigma_g**2 + sigma_l**2) * Gamma / (sp.sqrt(K) * T ** sp.Rational(3, 2))),
    )


#: display name → (location, what Γ is, ρ tied to 1/√T?, printed terms)
DISPLAYS: dict[str, tuple[str, str, bool, tuple[RateTerm, ...]]] = {
    "cor46": ("Corollary 4.6", "Γ = 1/(1−λ)² (Lemma D.5)", True, _corollary("(β² + σ_l²)/(K^{1/2}T^{3/2}(1−λ)²)")),
    "cor48": ("Corollary 4.8", "Γ = Φ(λ,m,Q) (Lemma D.6)", True, _corollary("Φ(λ,m,Q)(β² + σ_l²)/(K^{1/2}T^{3/2})")),
    "d2-rate": (
        "Appendix D.2, display after the final inequality (ρ free)",
        "Γ = 1/(1−λ)² (Lemma D.5)",
        False,
        _rho_free_d2,
    ),
    "d3-rate": (
        "Appendix D.3, display after the final inequalities (ρ free)",
        "Γ = Φ(λ,m,Q) (Lemma D.6)",
        False,
        _rho_free_d3,
    ),
}


@dataclass(frozen=True)
class TermVerdict:
    """A printed term, the derived monomials it is the counterpart of, and those it fails to cover."""

    key: str
    text: str
    counterparts: tuple[Monomial, ...]  # derived monomials with its atoms and topology at its power(s) of T
    uncovered: tuple[Monomial, ...]  # derived monomials charged to it that no printed term covers

    @property
    def holds(self) -> bool:
        return not self.uncovered


def _charge(m: Monomial, printed: dict[str, list[Monomial]]) -> str:
    """The printed term an uncovered monomial is charged to (see the module docstring)."""
    for same in (
        lambda p: p.atom == m.atom and p.topology == m.topology and p.power == m.power,
        lambda p: p.atom == m.atom and p.topology == m.topology,
        lambda p: p.atom == m.atom,
    ):
        distance = {
            k: min(abs(p.power - m.power) for p in ps if same(p))
            for k, ps in printed.items()
            if any(same(p) for p in ps)
        }
        if distance:
            return min(distance, key=distance.get)  # the nearest power of T; ties: the first printed term
    return "uncovered"


@lru_cache(maxsize=None)
def derived_monomials(rho_tied: bool) -> tuple[Monomial, ...]:
    """The derived bound (from (22) as printed, Γ symbolic) expanded at the corollaries' η (and ρ)."""
    return tuple(monomials(derive_final().total(), rho_tied=rho_tied))


@lru_cache(maxsize=None)
def check_display(name: str) -> tuple[TermVerdict, ...]:
    """Every printed term of ``DISPLAYS[name]`` against the derived bound's expansion."""
    _, _, tied, terms = DISPLAYS[name]
    return check_terms(terms, rho_tied=tied)


def check_terms(
    terms: tuple[RateTerm, ...], *, rho_tied: bool, derived: tuple[Monomial, ...] | None = None
) -> tuple[TermVerdict, ...]:
    """Printed ``terms`` against ``derived`` monomials (default: the derived bound's, :func:`derived_monomials`)."""
    derived = derived_monomials(rho_tied) if derived is None else derived
    printed = {t.key: monomials(t.expr, rho_tied=rho_tied) for t in terms}
    every = [p for ps in printed.values() for p in ps]
    charged: dict[str, list[Monomial]] = {t.key: [] for t in terms}
    charged["uncovered"] = []
    for d in derived:
        if not any(covers(p, d) for p in every):
            charged[_charge(d, printed)].append(d)
    out = []
    for t in terms:
        keys = {(p.atom, p.topology, p.power) for p in printed[t.key]}
        mine = tuple(d for d in derived if (d.atom, d.topology, d.power) in keys)
        out.append(TermVerdict(t.key, t.text, mine, tuple(charged[t.key])))
    if charged["uncovered"]:
        out.append(
            TermVerdict("uncovered", "(no printed term with the same contents)", (), tuple(charged["uncovered"]))
        )
    return tuple(out)
