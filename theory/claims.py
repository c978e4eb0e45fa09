"""The claims checker: every claim of the seed papers that can be computed, computed.

``python -m theory check`` prints :func:`all_claims` one per line; the book's
theory chapter imports the same functions, so both show the same numbers.
Each check function returns a list of :class:`Claim`; a claim is quoted with
its location (seed file and section/table), the value computed here, and a
verdict: HOLDS, FAILS, or NOT CHECKABLE (with the reason).

Tables and prose numbers come from ``theory/data/`` (:mod:`theory.tables`);
spectra from the engine's own W (:mod:`theory.spectral`); Φ and the bounds
from :mod:`theory.phi` and :mod:`theory.bounds`; Theorem 4.5's proof redone
step by step from :mod:`theory.derivation` (claims ``thm45-step-*``,
``thm45-term-*``, ``thm45-vs-proof``) and the O(·) displays from
:mod:`theory.rates` (``cor46-term-*``, ``cor48-term-*``, ``d2-rate-*``,
``d3-rate-*``). Values at floating-point rounding level print as ``< 1e-12``
(:func:`at_rounding`), so the table is the same on every machine.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from . import bounds as bd
from . import derivation as dv
from . import phi as ph
from . import rates
from . import reading
from . import spectral as spc
from .problems import gossip_contraction, reference_dfedsam, shifted_quadratics
from .tables import load_table, quote

__all__ = [
    "Claim",
    "VERDICTS",
    "REQUIRED_IDS",
    "CHECKS",
    "ROUNDING_FLOOR",
    "all_claims",
    "at_rounding",
    "format_claim",
    "format_table",
]

HOLDS, FAILS, NC = "HOLDS", "FAILS", "NOT CHECKABLE"
VERDICTS = (HOLDS, FAILS, NC)
REQUIRED_IDS = (
    "ring-gap",
    "grid-gap",
    "phi-q1",
    "phi-near-one",
    "phi-monotone",
    "stepsize",
    "table1-gen-error",
    "sec52-quotes",
    "table2",
    "fedgf-bold",
    "fedsam-text",
    "lemma-d1",
    "defn41-random",
)
M = 100  # the papers' number of clients
D3 = "seeds/003 DFedSAM"  # short location prefixes (full file names in theory/data and bounds.MISSING)
D2 = "seeds/002 FedSAM"
D1 = "seeds/001 FedGF slides"
D4 = "seeds/004 DFedAvgM"
TOL = 0.006  # two printed decimals: a difference of printed numbers is exact to 0.005
#: below this a norm or residual of O(1) matrices is floating-point rounding, whose digits differ across CPUs and BLAS
ROUNDING_FLOOR = 1e-12


@dataclass(frozen=True)
class Claim:
    """One checked claim. ``computed`` is what this package computes; ``reason`` explains the verdict."""

    id: str
    claim: str
    location: str
    computed: str
    verdict: str
    reason: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.id}: verdict {self.verdict!r} not in {VERDICTS}")
        if self.verdict == NC and not self.reason:
            raise ValueError(f"{self.id}: NOT CHECKABLE needs a reason")


def at_rounding(x: float, spec: str = ".3e", floor: float = ROUNDING_FLOOR) -> str:
    """``= 2.349e-01``, or ``< 1e-12`` when |x| < ``floor``: a value at rounding level prints the same on every machine.

    (A norm of a product of matrices that should equal P, or a residual that
    should be 0, is ~1e-16 with last digits that depend on the CPU and BLAS.)
    """
    return f"< {floor:.0e}" if abs(x) < floor else f"= {format(x, spec)}"


def _v(ok: bool) -> str:
    return HOLDS if ok else FAILS


def _f(row: dict, key: str) -> float:
    return float(row[key])


# --------------------------------------------------------------------------- #
# Spectral claims (DFedSAM Section 3.1, 5.3; Definition 4.1; Lemma D.1)
# --------------------------------------------------------------------------- #


def check_ring_gap() -> list[Claim]:
    """§3.1: "Ring … λ ≈ 16π²/(3m²)". The engine's ring (MH weights 1/3) has λ = (1 + 2cos(2π/m))/3 → 1."""
    q = quote("ring-gap")
    lam100 = spc.static_spectrum("ring", M).lam
    stated = 16 * math.pi**2 / (3 * M**2)
    gap = 1 - lam100
    series = spc.gap_series("ring")
    lead = sp.limit(series * spc.m_sym**2, spc.m_sym, sp.oo)
    computed = (
        f"m={M}: λ={lam100:.6f}, gap 1-λ={gap:.4e}; 16π²/(3m²)={stated:.4e} (λ is {lam100 / stated:.0f}x it; "
        f"the gap is {gap / stated:.3f}x it); gap series = {series}, so gap·m² → {lead}, not 16π²/3"
    )
    return [
        Claim(
            "ring-gap",
            "Ring: λ ≈ 16π²/(3m²)",
            q["location"] + f" [{D3}]",
            computed,
            FAILS,
            "λ tends to 1, not 0; read as the gap 1-λ, the constant is 4x too large for a ring with MH weights 1/3 (the engine's; the paper does not state its ring's weights)",
        )
    ]


def check_grid_gap() -> list[Claim]:
    """§3.1: "Grid … λ = O(1/(m log₂ m))". Checked on n×n MH grids up to m = 1024."""
    rows = spc.grid_gap_scaling()
    lam100 = spc.static_spectrum("grid", M).lam
    s = ", ".join(
        f"m={r['m']}: gap·m={r['gap_times_m']:.3f}, gap·m·log2m={r['gap_times_m_log2m']:.2f}" for r in rows[-3:]
    )
    computed = (
        f"m={M}: λ={lam100:.5f}; {s}; gap·m → π²/5={math.pi**2 / 5:.3f} (max-degree grid: exactly "
        f"(2-2cos(π/n))/5); so 1-λ = Θ(1/m), and λ → 1"
    )
    grows = rows[-1]["gap_times_m_log2m"] > 2 * rows[0]["gap_times_m_log2m"]
    return [
        Claim(
            "grid-gap",
            "Grid: λ = O(1/(m log₂ m))",
            quote("ring-gap")["location"] + f" [{D3}]",
            computed,
            _v(not grows),
            "λ → 1; and as a gap statement gap·m·log₂m grows without bound (gap = Θ(1/m), no log factor)",
        )
    ]


def check_lambda_order() -> list[Claim]:
    """§5.3: "λ is Ring > Grid > Exponential > Full", for the engine's W at m = 100."""
    q = quote("lambda-order")
    lams = {n: spc.static_spectrum(n, M).lam for n in q["values"]["order"]}
    ok = all(lams[a] > lams[b] for a, b in zip(q["values"]["order"], q["values"]["order"][1:]))
    lmh = spc.static_spectrum("exponential-mh", M).lam
    computed = ", ".join(f"{n}={v:.4f}" for n, v in lams.items()) + f" (exponential-mh={lmh:.4f})"
    return [Claim("lambda-order", "λ: Ring > Grid > Exp > Full", q["location"] + f" [{D3}]", computed, _v(ok))]


def check_definition_4_1() -> list[Claim]:
    """Definition 4.1 for every engine W; the three readings of Appendix B.4's random scheme."""
    out = []
    loc = f"Definition 4.1 (assumed by Theorem 4.5) [{D3}]"
    for s in spc.spectral_table(M):
        d = s.definition_4_1
        failed = [k for k in ("graph", "symmetry", "null_space", "spectral") if not d[k]]
        out.append(
            Claim(
                f"defn41/{s.name}",
                f"the engine's '{s.name}' W satisfies Definition 4.1 (i)-(iv)",
                loc,
                f"m={M}: {d}",
                _v(not failed),
                (
                    f"fails {failed}"
                    + (
                        "; directed (Ying et al. 2021); 'exponential-mh' satisfies it, and which one the paper's "
                        "'Exp' is, is not stated"
                        if s.name == "exponential"
                        else ""
                    )
                )
                if failed
                else "",
            )
        )
    b4 = "Appendix B.4 random time-varying topology satisfies Definition 4.1 (assumed by Theorem 4.5)"
    for name in spc.TIME_VARYING:
        st = _tv_stats(name)
        d = st.definition_4_1_all
        failed = [k for k in ("graph", "symmetry", "null_space", "spectral") if not d[k]]
        out.append(
            Claim(
                f"defn41-random/{name}",
                b4 + f" (engine reading '{name}')",
                f"Appendix B.4 [{D3}]",
                f"all of {st.draws} draws, m={M}: {d}; per-step mean-square contraction ρ_ms={st.rho_ms:.4f} "
                f"(√={math.sqrt(st.rho_ms):.3f}); mean SLEM={st.mean_slem:.3f}; drift of the average "
                f"sup E(x̄⁺-x̄)²/‖x-x̄1‖² {at_rounding(st.drift, '.2e')}",
                _v(not failed),
                f"fails {failed}: receivers choose senders, so W is row-stochastic only"
                if failed
                else "each draw is symmetric, doubly stochastic, connected (union of Hamiltonian cycles)",
            )
        )
    cl = _clique_reading()
    out.append(
        Claim(
            "defn41-random/clique",
            b4 + " (literal reading: 'only 10 clients who are neighbors to each other "
            "can perform one gossip step': a random 10-clique averages, 90 clients keep their model)",
            f"Appendix B.4 [{D3}]",
            f"W symmetric, doubly stochastic; λ(W)={cl['lam']:.3f}; rank(I-W)={cl['rank']} "
            f"(needs {M - 1}); ρ_ms={cl['rho_ms']:.4f}",
            FAILS,
            "null(I-W) ≠ span(1): one draw leaves 90 clients unmixed (λ = 1); only products over rounds contract",
        )
    )
    return out


@lru_cache(maxsize=None)
def _tv_stats(name: str):
    return spc.mean_square_contraction(name, M, draws=100)


@lru_cache(maxsize=None)
def _clique_reading(m: int = M, k: int = 10, draws: int = 50) -> dict:
    """W of the literal B.4 reading: k random clients average exactly, the others keep their model."""
    rng = np.random.default_rng(0)
    tr = []
    for _ in range(draws):
        S = rng.choice(m, size=k, replace=False)
        W = np.eye(m)
        W[np.ix_(S, S)] = 1.0 / k
        B = W - 1.0 / m  # (I - P)W = W - P for doubly stochastic W
        tr.append(float((B * B).sum()) / (m - 1))
    return {
        "lam": spc.slem(W),
        "rank": int(np.linalg.matrix_rank(np.eye(m) - W)),
        "rho_ms": float(np.mean(tr)),
        "definition_4_1": spc.definition_4_1(W),
    }


def check_lemma_d1() -> list[Claim]:
    """Lemma D.1: ‖W^t − P‖ ≤ λ^t, for every mixing scheme the engine offers (t ≤ 40)."""
    out = []
    claim = "‖W^t − 11ᵀ/m‖_op ≤ λ^t for all t (Lemma 4 of Lian et al. 2017)"
    loc = f"Lemma D.1 [{D3}]"
    for name in spc.STATIC:
        W = spc.make_topology(name, M).matrix(0).W
        r = spc.lemma_d1_static(W, t_max=40)
        meas = gossip_contraction(W, steps=60)["asymptotic_rate"]
        out.append(
            Claim(
                f"lemma-d1/{name}",
                claim,
                loc,
                f"m={M}: λ={r['lam']:.4f}, max_t ‖W^t-P‖/λ^t={r['worst_ratio']:.4f}; measured gossip rate {meas:.4f}",
                _v(r["first_fail"] is None),
            )
        )
    for name in spc.TIME_VARYING:
        r = spc.lemma_d1_product(name, M, t_max=30)
        ok = r["first_fail"] is None
        out.append(
            Claim(
                f"lemma-d1/{name}",
                claim + ", read for a product W_t⋯W_1 as ≤ Π_s λ(W_s)",
                loc,
                f"m={M}, 30 draws: ‖Π W_s - P‖ {at_rounding(r['final_norm'])} vs Π λ(W_s) {at_rounding(r['final_bound'])}; "
                f"first failure at t={r['first_fail']}",
                _v(ok),
                "" if ok else "row-stochastic W: the product tends to 1πᵀ ≠ 11ᵀ/m, the average is not preserved",
            )
        )
    return out


# --------------------------------------------------------------------------- #
# Φ(λ, m, Q) (eq. 6, Remarks 4.9 and 4.10, abstract)
# --------------------------------------------------------------------------- #


def check_phi() -> list[Claim]:
    """Remark 4.10's identity, Φ's monotonicity and limit, Remark 4.9 and the abstract's simplification."""
    out = []
    q1 = ph.phi_q1()
    out.append(
        Claim(
            "phi-q1",
            "Φ(λ,m,1) = 2(λ+1)/(1-λ)² ≤ 4/(1-λ)²",
            f"Remark 4.10 [{D3}]",
            f"sympy: Φ(λ,m,1) - 2(λ+1)/(1-λ)² = {q1['difference']}; 4/(1-λ)² - 2(λ+1)/(1-λ)² = {q1['slack']} > 0 "
            f"on [0,1): {q1['slack_positive_on_0_1']}",
            _v(q1["identity_holds"] and q1["slack_positive_on_0_1"]),
        )
    )
    sym, grid = ph.phi_monotone_symbolic(), ph.phi_monotone_grid()
    out.append(
        Claim(
            "phi-monotone",
            "Φ decreases as Q grows (the bound tightens with more gossip steps)",
            f"Section 1 / Remark 4.9 [{D3}]",
            f"d/du[(u+1)/(1-u)²] = {sym['dterm2_du']} > 0, du/dQ = {sym['du_dQ']} < 0, m^(-2(Q-1)) decreasing: "
            f"{sym['decreasing']}; grid of {grid['points']} points: max Φ(Q+1)-Φ(Q) < 0: {grid['all_negative']}",
            _v(sym["decreasing"] and grid["all_negative"]),
        )
    )
    lim = ph.phi_limit_q_infinity()
    out.append(
        Claim(
            "phi-limit",
            "with enough gossip steps DFL ≈ CFL: Φ → 1",
            f"Remark 4.9 [{D3}]",
            f"sympy lim_(Q→∞) Φ = {lim['lambda_in_0_1_m_gt_1']} (0<λ<1, m>1); = {lim['lambda_0']} at λ=0; "
            f"= {lim['m_1']} if m=1",
            _v(lim["lambda_in_0_1_m_gt_1"] == 1),
        )
    )
    out += _phi_near_one()
    out.append(_phi_term1())
    return out


def _phi_near_one() -> list[Claim]:
    """Section 5.3's reading of Remark 4.9 at the experiments' Q = 4, m = 100: is Φ close to 1 there?

    Remark 4.9 says only that (λ^Q+1)/(1−λ^Q)² comes close to 1 as Q grows (``phi-limit`` holds); the
    experiments' Q = 4 comes from Section 5.3, "multiple gossip steps can alleviate the impact of network
    topology with a smaller Q = 4". The exponential graph is the symmetric ``exponential-mh``, the one of
    the paper's graphs that Definition 4.1 (and so Φ) covers.
    """
    out = []
    for name, label in (("ring", "ring"), ("grid", "grid"), ("exponential-mh", "exp"), ("complete", "full")):
        lv = spc.static_spectrum(name, M).lam
        lv = 0.0 if lv < 1e-12 else lv
        val, t2 = float(ph.phi(lv, M, 4)), float(ph.PHI_TERM2.subs({ph.lam: lv, ph.Q: 4}))
        need = ph.gossip_steps_needed(lv, M, 1.1)
        out.append(
            Claim(
                f"phi-near-one/{label}",
                "at the experiments' Q = 4 the bound's Φ(λ,m,Q) is close to 1, i.e. 4 gossip steps already "
                "remove the topology's cost from the bound",
                f"Section 5.3 ('… alleviate the impact of network topology with a smaller Q = 4'), read with "
                f"Remark 4.9 [{D3}]",
                f"{name}, m={M}, λ={lv:.4f}: Φ(λ,100,4)={val:.4g}, its second term (λ^Q+1)/(1-λ^Q)² {t2:.4g}; "
                f"Φ ≤ 1.1 needs Q ≥ {need}",
                _v(val <= 1.1),
                "'close to 1' read as within 10%; Remark 4.9 itself names no Q (its limit: phi-limit)",
            )
        )
    return out


def _phi_term1() -> Claim:
    """Remark 4.9: the m^{2(Q−1)} term can be neglected. term1/term2 = ((1−λ^Q)/(1−λ))²/m^{2(Q−1)} ≤ Q²/m^{2(Q−1)}."""
    ratios = []
    for s in spc.spectral_table(M):
        lv = max(s.lam, 0.0)
        for q in (2, 3, 4):
            t1 = float(ph.PHI_TERM1.subs({ph.lam: lv, ph.m: M, ph.Q: q}))
            t2 = float(ph.PHI_TERM2.subs({ph.lam: lv, ph.Q: q}))
            ratios.append(t1 / t2)
    # (1 - λ^Q)/(1 - λ) = 1 + λ + … + λ^(Q-1) ≤ Q on [0, 1]: checked by sympy for Q = 2..6
    geo = [sp.cancel((1 - ph.lam**q) / (1 - ph.lam)) for q in range(2, 7)]
    bounded = all(
        sp.Poly(g, ph.lam).eval(1) == q and all(c >= 0 for c in sp.Poly(g, ph.lam).coeffs())
        for g, q in zip(geo, range(2, 7))
    )
    return Claim(
        "phi-term1-negligible",
        "the term (λ^Q+1)/((1-λ)²m^{2(Q-1)}) of Φ can be neglected (m large)",
        f"Remark 4.9; abstract's MGS rate keeps only (λ^Q+1)/(1-λ^Q)² [{D3}]",
        f"term1/term2 = ((1-λ^Q)/(1-λ))²/m^(2(Q-1)) ≤ Q²/m^(2(Q-1)) (sympy: 1+λ+…+λ^(Q-1) ≤ Q, Q=2..6: "
        f"{bounded}); engine topologies at m={M}, Q=2..4: max ratio {max(ratios):.2e}",
        _v(bounded and max(ratios) < 1e-3),
    )


# --------------------------------------------------------------------------- #
# Theorem 4.5, its constants and corollaries
# --------------------------------------------------------------------------- #


def check_stepsize() -> list[Claim]:
    """Theorem 4.5's denominator under η ≤ 1/(10KL), and the denominators of (24) and (33) that the proof divides by."""
    st = bd.stepsize_margin()
    out = [
        Claim(
            "stepsize",
            "ηK − 32η³K²L² − 6η²KL > 0 under 0 < η ≤ 1/(10KL)",
            f"Theorem 4.5, eq. (7) [{D3}]",
            f"with η = s/(KL): D/(ηK) = {st['D_over_etaK']}; 32s²+6s increasing, ≤ {st['max_numerator']} at s=1/10, "
            f"so D ≥ {st['min_ratio_K1']}·ηK > 0 for K ≥ 1",
            _v(st["positive"]),
        )
    ]
    thr = 1 - math.sqrt(0.32)
    ok24 = [s.name for s in spc.spectral_table(M) if (1 - s.lam) ** 2 - 0.32 > 0]
    ok33 = [s.name for s in spc.spectral_table(M) if 1 - 0.32 * float(ph.phi(max(s.lam, 0), M, 4)) > 0]
    out.append(
        Claim(
            "stepsize-eq24",
            "the proof's denominators (1-λ)² − 32L²η²K² (eq. 24) and 1 − 32L²η²K²Φ (eq. 33) "
            "are positive under Theorem 4.5's η ≤ 1/(10KL)",
            f"Appendix D.2 eq. (24), D.3 eq. (33) [{D3}]",
            f"at η = 1/(10KL): (24) > 0 iff λ < 1-√0.32 = {thr:.3f}: holds at m={M} only for {ok24}; "
            f"(33) > 0 iff Φ < 3.125: holds at Q=4 only for {ok33}",
            FAILS,
            "the step-size condition does not cover sparse topologies; it would need η < (1-λ)/(√32·KL)",
        )
    )
    return out


def check_theorem_constants() -> list[Claim]:
    """α and β of Theorem 4.5 against the final inequality of Appendix D.2; Lemma D.3 against its use."""
    loc = f"Theorem 4.5 vs Appendix D.2 final inequality [{D3}]"
    a_diff = sp.factor(
        sp.simplify(
            bd.ALPHA * bd.D_DENOM
            - (
                bd.eta * bd.L**2 * bd.K * bd.C1 / 2
                + 3 * bd.eta**2 * bd.K * bd.L / 2 * (bd.L**2 * bd.rho**2 + bd.sigma_l**2)
            )
        )
    )
    b_diff = sp.simplify(
        bd.BETA_TERM * bd.D_DENOM - bd.eta**4 * bd.K * bd.L**3 * bd.C3 * (16 * bd.eta * bd.K * bd.L + 3)
    )
    used = (
        2 * bd.K**2 * bd.L**2 * bd.eta**2 * bd.rho**4
    )  # the bound plugged in for E‖δ_{i,k} − δ_{i,k-1}‖² in Lemma D.4's proof
    return [
        Claim(
            "alpha-appendix",
            "α(K,ρ,η) as printed equals the α-part of the appendix's final bound",
            loc,
            f"sympy: α·D − [ηL²KC₁/2 + (3/2)η²KL(L²ρ²+σ_l²)] = {a_diff}",
            _v(a_diff == 0),
            "the main text has (1/2)η²KL(L²ρ²+σ_l²) where the proof has (3/2)η²KL(L²ρ²+σ_l²)",
        ),
        Claim(
            "beta-appendix",
            "β(K,ρ,η) as printed equals η⁴KL³C₃(16ηKL+3)/D from the appendix",
            loc,
            f"sympy: β·D − η⁴KL³C₃(16ηKL+3) = {b_diff}",
            _v(b_diff == 0),
        ),
        Claim(
            "lemma-d3-use",
            "Lemma D.3: E_δ ≤ 2K²β²η²ρ² is the bound used in Lemma D.4's proof",
            f"Lemma D.3 vs proof of Lemma D.4 (term I) [{D3}]",
            f"stated {bd.QU_LEMMA_B1_AS_QUOTED}; used {used}; difference {sp.factor(bd.QU_LEMMA_B1_AS_QUOTED - used)}",
            FAILS,
            "the proof uses L²ρ⁴ where the lemma has β²ρ²; equal only if β = Lρ",
        ),
    ]


def _sx(e) -> str:
    """A sympy expression, factored, as text."""
    return sp.sstr(sp.factor(e))


def _sign_text(e) -> str:
    """'> 0' / '< 0' / '= 0' on the region where the proof's steps are valid (theory.derivation.sign)."""
    return {1: "> 0", 0: "= 0", -1: "< 0", None: "sign undecided"}[dv.sign(e)] + " where 32L²η²K²Γ < 1"


def check_theorem45_steps() -> list[Claim]:
    """The steps of Appendix D.2/D.3 that lead to Theorem 4.5, each redone by sympy (theory.derivation)."""
    loc = f"Appendix D.2 (D.3 for Q > 1) [{D3}]"
    out = []
    ex = [dv.eq21_counterexample(k) for k in range(1, 11)]
    first = next(r["K"] for r in ex if not r["holds"])
    r10 = ex[-1]
    out.append(
        Claim(
            "thm45-step-21",
            "(21): (L/2)E‖x̄ᵗ⁺¹ − x̄ᵗ‖² ≤ (3η²KL/2)(L²ρ² + σ_l² + (1/m)Σ_i E‖∇f(xᵗ(i))‖²)",
            f"Appendix D.2 eq. (21), D.3 eq. (30) [{D3}]",
            f"identical f_i = (L/2)‖x−b‖², σ_l = ρ = 0, clients agreeing, ηKL = 1/10 (exact rationals): "
            f"left/right = {float(r10['ratio']):.4f} at K = 10; fails for every K ≥ {first} (K = 1..10 checked); "
            f"with the factor K restored it holds at K = 10: {r10['holds_with_K']}",
            FAILS,
            "the second line drops the factor K of ‖Σ_k u_k‖² ≤ K·Σ_k‖u_k‖²; (21) needs 3η²K²L/2. "
            "The thm45-term-* checks keep (21) as printed",
        )
    )
    diff = sp.factor(dv.eq22_from_19_20_21() - sp.expand(dv.EQ22_PRINTED))
    alt = dv.derive_final(dv.eq22_from_19_20_21())
    out.append(
        Claim(
            "thm45-step-22",
            "(22) = (19) with (20) and (21) put in",
            f"Appendix D.2 eq. (22), D.3 eq. (31) [{D3}]",
            f"sympy: [(20) + (21)] − (22) = {diff}; started from (20)+(21), the Γ-free denominator is "
            f"{_sx(alt.denominator.subs(dv.Gamma, 0))} (printed D: ηK − 32η³K²L² − 6η²KL) and β's factor "
            f"(16ηKL + 3) becomes (16ηK²L + 3)",
            FAILS,
            "Lemma D.4's G-term 2K·8Kη²·G times (20)'s ηL²K/2 is 8η³K³L²·G; (22) prints 8η³K²L²·G. "
            "The thm45-term-* checks start from (22) as printed",
        )
    )
    d24 = sp.cancel(sp.together(dv.eq24_solved(dv.GAMMA_D5) - dv.EQ24_PRINTED))
    d33 = sp.cancel(sp.together(dv.eq24_solved(dv.GAMMA_D6) - dv.EQ33_PRINTED))
    out.append(
        Claim(
            "thm45-step-24",
            "(24) / (33): (23) with Lemma D.5 / D.6 solved for (1/m)Σ_i E‖∇f(xᵗ(i))‖²",
            f"Appendix D.2 eq. (24), D.3 eq. (33) [{D3}]",
            f"sympy: solved − (24) = {d24} (Γ = 1/(1-λ)²), solved − (33) = {d33} (Γ = Φ); C₂ − C₃ = "
            f"{sp.factor(bd.C2 - bd.C3)} is where the coefficient {dv.eq24_validity()} of G comes from",
            _v(d24 == 0 and d33 == 0),
            "read with (24)'s stray ')' dropped; valid only where 32L²η²K²Γ < 1, which η ≤ 1/(10KL) does not "
            "ensure (stepsize-eq24)",
        )
    )
    exact = dv.eq25_per_round()
    dp = sp.factor(sp.cancel(sp.together(dv.EQ25_PRINTED.progress - exact.progress)))
    dn = sp.factor(sp.cancel(sp.together(exact.noise - dv.EQ25_PRINTED.noise)))
    out.append(
        Claim(
            "thm45-step-25",
            "(25) / (34): (24) put into (22)",
            f"Appendix D.2 eq. (25), D.3 eq. (34) [{D3}]",
            f"exact: E f(x̄ᵗ⁺¹) ≤ E f(x̄ᵗ) − a·g2 + b with a = {_sx(exact.progress)}; printed a − exact a = {dp}, "
            f"{_sign_text(dp)}; exact b − printed b = {dn}, {_sign_text(dn)}",
            _v(dp == 0 and dn == 0),
            "step a) drops (24)'s denominator 1 − 32L²η²K²Γ ('η is a very small value'); that overstates the "
            "progress a and understates b, so (25) is the η → 0 limit of (22)+(24), not implied by them",
        )
    )
    tele = sp.cancel(sp.together(dv.telescoped_mean(dv.EQ25_PRINTED) - dv.D2_FINAL_PRINTED.total()))
    half = sp.cancel(sp.together(tele - dv.EQ25_PRINTED.noise / bd.D_DENOM))
    out.append(
        Claim(
            "thm45-step-telescope",
            "the final displays of D.2 and D.3 follow from (25) / (34) by summing over t = 1..T and dividing by T",
            loc,
            f"sympy: Σ_t gives (ηK/2 − 16η³K²L² − 3η²KL)·Σ_t g2_t ≤ Δ + T·b, so min_t g2_t ≤ 2Δ/(T·D) + 2b/D; "
            f"derived − printed = b/D exactly: {half == 0}",
            _v(tele == 0),
            "the non-Δ part of the printed display is b/D; the division by D/2 gives 2b/D (the Δ term keeps its 2)",
        )
    )
    tb, sec = dv.final_from(dv.EQ25_PRINTED), dv.D3_SECOND_DISPLAY
    cons_gap = sp.factor(sp.expand((sec.consensus - tb.consensus).subs(dv.G, 0)))
    out.append(
        Claim(
            "thm45-step-d3-second",
            "D.3's second final display, denominator ηK − 32η³K²L², numerator "
            "ηL²KC₁/2 + 16C₂η⁵K²L⁴Φ, follows from (34)",
            f"Appendix D.3, last inequality before the O(·) [{D3}]",
            f"against (34) telescoped: denominator larger by 6η²KL; the term 3η²KL(L²ρ²+σ_l²) is missing; "
            f"consensus printed − derived at G = 0: {cons_gap}",
            FAILS,
            "each of the three differences makes the printed bound smaller than what (34) gives",
        )
    )
    return out


def check_theorem45_terms() -> list[Claim]:
    """Theorem 4.5's eq. (7), term by term, against the bound derived from (22) (theory.derivation.derive_final)."""
    loc = f"Theorem 4.5 eq. (7) vs Appendix D.2/D.3 re-derived from (22) [{D3}]"
    terms = dv.theorem45_terms("printed-22")
    same_from_20 = [t.implied for t in dv.theorem45_terms("from-20-21")] == [t.implied for t in terms]
    claims_text = {
        "denominator": "the common denominator D = ηK − 32η³K²L² − 6η²KL of eq. (7)",
        "init": "the term 2[f(x¹) − f*]/(T·D)",
        "sigma-l": "the σ_l² terms of α(K,ρ,η)",
        "sigma-g": "the σ_g² (heterogeneity) term of α(K,ρ,η)",
        "rho": "the ρ terms of α(K,ρ,η) (ρ², ρ⁴)",
        "consensus": "the topology term Φ(λ,m,Q)·β(K,ρ,η)",
    }
    out = []
    for t in terms:
        over = "" if t.key == "denominator" else " (numerators over D; D itself: thm45-term-denominator)"
        computed = (
            f"printed {t.printed_text} = {_sx(t.printed)}; derived {_sx(t.derived)}; derived/printed = {_sx(t.ratio)}"
            + (f" ({t.note})" if t.note else "")
        )
        if t.key == "consensus":
            q1 = dv.q1_consensus_region()
            computed += (
                f"; for Q = 1 through Lemma D.5 (Γ = 1/(1−λ)²) the printed Φ(λ,m,1) = 2(1+λ)/(1−λ)² covers it iff "
                f"{q1['condition']} with s = ηKL: λ(1−λ)²/(1+λ) ≤ {float(q1['h_max']):.4f}, so only for "
                f"s ≤ {float(q1['s_max']):.4f} (Theorem 4.5 allows s ≤ 0.1)"
            )
        if t.implied is None:
            verdict, reason = NC, "the sign test of theory.derivation.sign could not decide printed ≥ derived"
        elif t.implied:
            verdict, reason = HOLDS, ""
        elif t.key == "denominator":
            verdict, reason = (
                FAILS,
                (
                    "the printed D is larger than the derived one: (25) drops (24)'s denominator "
                    "1 − 32L²η²K²Φ, so every term of eq. (7) is divided by too much"
                ),
            )
        else:
            verdict, reason = FAILS, "derived/printed > 1 wherever 32L²η²K²Φ < 1: the printed term is too small"
        if not same_from_20:
            reason = "; ".join(
                x for x in (reason, "starting from (20)+(21) instead of (22) changes some verdicts") if x
            )
        out.append(Claim(f"thm45-term-{t.key}", claims_text[t.key] + over, loc, computed, verdict, reason))
    bad = [c.id for c in out if c.verdict == FAILS]
    open_ = [c.id for c in out if c.verdict == NC]
    verdict = FAILS if bad else NC if open_ else HOLDS
    out.append(
        Claim(
            "thm45-vs-proof",
            "Theorem 4.5 follows from its proof (Appendix D.2/D.3 from (22) on), term by term",
            loc,
            "term checks: " + ", ".join(f"{c.id.removeprefix('thm45-term-')} {c.verdict}" for c in out),
            verdict,
            f"fails on {', '.join(bad)}" if bad else f"undecided: {', '.join(open_)}" if open_ else "",
        )
    )
    return out


def check_rate_displays() -> list[Claim]:
    """Corollaries 4.6/4.8 and the ρ-free displays of D.2/D.3, printed term by printed term (theory.rates)."""
    out = []
    for name, (where, gamma, tied, _terms) in rates.DISPLAYS.items():
        setting = "η = 1/(L√(KT)), ρ = 1/√T" if tied else "η = 1/(L√(KT)), ρ free"
        loc = f"{where} vs the bound derived from (22) [{D3}]; {setting}, {gamma}, O(·) constants 1"
        for v in rates.check_display(name):
            mine = "; ".join(map(str, v.counterparts)) or "none"
            computed = f"derived terms with the same contents: {mine}"
            if v.uncovered:
                computed += "; not covered by any printed term: " + "; ".join(map(str, v.uncovered))
            claim = (
                f"the term {v.text}"
                if v.key != "uncovered"
                else "every term of the derived bound has a printed counterpart"
            )
            out.append(
                Claim(
                    f"{name}-term-{v.key}",
                    claim,
                    loc,
                    computed,
                    _v(v.holds),
                    ""
                    if v.holds
                    else "a derived term grows faster in K or decays slower in T than any printed "
                    "term with the same contents (K ≤ T, L absorbed, Γ ≥ 1)",
                )
            )
    out.append(
        Claim(
            "d2-rate-tail",
            "the tail of the ρ-free display of D.2 after O(·)",
            f"Appendix D.2, display after the final inequality [{D3}]",
            "reads '+ L²ρ²/(K^{1/2}T^{3/2}(1−λ)²) + L²ρ²/(K^{1/2}T^{3/2}(1−λ)²) + L²ρ²' outside the O(·)",
            NC,
            "the display repeats a term and ends in a bare L²ρ²; its intended form cannot be read, so it is not judged",
        )
    )
    return out


def check_corollary_4_6() -> list[Claim]:
    """Corollary 4.6 re-derived: Theorem 4.5 with η = 1/(L√(KT)), ρ = 1/√T, expanded in T^{-1/2}."""
    d = bd.derived_rate()
    K = bd.K
    loc = f"Corollary 4.6 and Appendix D.2 (last two displays) [{D3}]"
    c3 = d["T^-3/2 (times Phi)"]
    k_exp = sp.limit(sp.log(c3.subs({bd.L: 0})) / sp.log(K), K, sp.oo)  # K-exponent of the σ part
    c1 = d["T^-1"]
    l2_part = sp.limit(c1.subs({bd.sigma_g: 0, bd.sigma_l: 0, bd.Delta: 0}), K, sp.oo)
    t12 = sp.simplify(d["T^-1/2"] * sp.sqrt(K))
    return [
        Claim(
            "cor46-rate/T^-1/2",
            "leading term ((f(x̄¹)-f*) + σ_l²)/√(KT)",
            loc,
            f"derived coefficient of T^(-1/2): {t12}/√K",
            HOLDS,
            "up to the factor L on f(x̄¹)-f*, absorbed in O(·)",
        ),
        Claim(
            "cor46-rate/T^-1",
            "the T^(-1) term is K(β²+σ_l²)/T",
            loc,
            f"derived: {sp.simplify(c1)}; with σ_g=σ_l=Δ=0 it tends to {l2_part} as K→∞",
            FAILS,
            "an L²/(2T) term (from ρ²/(2K-1) in α) survives when β = σ_l = 0; the stated term vanishes there "
            "(cor46-term-heterogeneity, which charges that part to the L² term, finds the σ contents as stated)",
        ),
        Claim(
            "cor46-rate/T^-3/2",
            "the topology term is (β²+σ_l²)/(K^{1/2}T^{3/2}(1-λ)²) (abstract: 1/(K^{1/2}T^{3/2}(1-λ)²))",
            loc + " and abstract",
            f"derived: Φ(λ,m,1)·{c3}/T^(3/2), whose σ part grows like K^{k_exp}",
            FAILS,
            "Theorem 4.5 gives 48·√K·(σ_g²+σ_l²)·Φ/T^(3/2): K^(+1/2), not K^(-1/2); the L² term also carries Φ",
        ),
    ]


def check_lemma_d6() -> list[Claim]:
    """Two steps in the proof of Lemma D.6 (where Φ's first term comes from)."""
    loc = f"proof of Lemma D.6 [{D3}]"
    W = spc.make_topology("ring", M).matrix(0).W
    lam100 = spc.slem(W)
    lhs = float(np.linalg.norm(np.linalg.matrix_power(W, 1), 2) ** 3)  # ‖W^n‖^(Q-1) at n=1, Q=4
    rhs = lam100**3 + M**-3.0
    q = 2
    S1, S2 = 1 / (1 - lam100**q), 1 / ((1 - lam100) * M ** (q - 1))
    # finite t: Σ_j a_j = S₁(1-λ^{Qt}) + S₂(1-λ^t); the first round where its square exceeds S₁² + S₂²
    t_fail = next(
        t for t in range(1, 10**6) if (S1 * (1 - lam100 ** (q * t)) + S2 * (1 - lam100**t)) ** 2 > S1**2 + S2**2
    )
    return [
        Claim(
            "lemma-d6-normP",
            "‖W^n − P + P‖^{Q-1} ≤ λ^{n(Q-1)} + 1/m^{Q-1}",
            loc,
            f"ring m={M}, n=1, Q=4: ‖W‖³ = {lhs:.4f} > λ³ + m⁻³ = {rhs:.4f}; in general ‖W^n‖ = 1 (eigenvalue 1) "
            f"while the right side → m^-(Q-1) < 1",
            FAILS,
            "apparently uses ‖P‖ = 1/m (only the result is printed), but ‖11ᵀ/m‖_op = 1; applying Lemma D.1 to W^Q directly gives Σλ^{Qn} ≤ 1/(1-λ^Q) "
            "without the m-term",
        ),
        Claim(
            "lemma-d6-square",
            "(Σ_j a_j)(Σ_j a_j E‖ζ^j‖²) ≤ E‖ζ‖²(1/((1-λ)²m^{2(Q-1)}) + 1/(1-λ^Q)²), "
            "a_j = λ^{Q(t-1-j)} + λ^{t-1-j}/m^{Q-1}",
            loc,
            f"as t→∞ the left side is (S₁+S₂)²·E‖ζ‖² with S₁=1/(1-λ^Q), S₂=1/((1-λ)m^(Q-1)); ring m={M}, Q={q}: "
            f"(S₁+S₂)²/(S₁²+S₂²) = {(S1 + S2) ** 2 / (S1**2 + S2**2):.4f} > 1; at finite t it first fails at t = {t_fail}",
            FAILS,
            "the cross term 2S₁S₂ is dropped; correct up to a factor ≤ 2",
        ),
    ]


def check_quadratic_bound() -> list[Claim]:
    """Theorem 4.5 and Lemmas D.5/D.6 against a measured run on shifted quadratics with exact constants."""
    out = []
    prob = shifted_quadratics(m=16, d=10, n=8, noise=0.5, batch=2, seed=0)
    c = prob.constants()
    K, T, rho = 5, 100, 0.01
    eta = 1 / (10 * K * c.L)
    for name, Q in (("ring", 1), ("ring", 4), ("complete", 1)):
        M_ = spc.make_topology(name, 16).matrix(0)
        lv = max(M_.lam, 0.0)
        h = reference_dfedsam(prob, M_.W, K=K, T=T, eta=eta, rho=rho, Q=Q, x0=np.full(10, 3.0), seed=1)
        vals = dict(
            K=K,
            T=T,
            eta=eta,
            rho=rho,
            L=c.L,
            sigma_l=c.sigma_l,
            sigma_g=c.sigma_g,
            Delta=h["f_x1"] - c.f_star,
            lam=lv,
            m=16,
            Q=Q,
        )
        b = bd.theorem45_terms(**vals)
        meas = float(h["grad_norm_sq"].min())
        out.append(
            Claim(
                f"thm45-quadratic/{name}-Q{Q}",
                "min_t E‖∇f(x̄ᵗ)‖² ≤ Theorem 4.5's bound",
                f"Theorem 4.5 [{D3}]; shifted quadratics, m=16, K=5, T=100, η=1/(10KL), ρ=0.01",
                f"measured {meas:.3e} ≤ bound {b['bound']:.3e} (Φ={b['phi']:.4g}); exact L={c.L:.3g}, "
                f"σ_l={c.sigma_l:.3g}, σ_g={c.sigma_g:.3g}",
                _v(meas <= b["bound"]),
            )
        )
        G2v = float(h["mean_grad_norm_sq"].max())
        lemma = bd.consensus_lemma(Q)  # D.6 at Q = 1 would be 2(1+λ) times looser than D.5
        cb = bd.evaluate(bd.consensus_bound(Q), **{k: v for k, v in vals.items() if k not in ("T", "Delta")}, G2=G2v)
        cons = float(h["consensus"].max())
        out.append(
            Claim(
                f"lemma-d{lemma[-1]}-quadratic/{name}-Q{Q}",
                "consensus distance ≤ C₂η²/(1-λ)² (Lemma D.5, Q = 1) or C₂η²Φ(λ,m,Q) (Lemma D.6, Q > 1)",
                f"Lemma {lemma} [{D3}]; same run",
                f"measured max_t {at_rounding(cons)} ≤ bound {cb:.3e}",
                _v(cons <= cb),
            )
        )
    return out


def check_remark_47() -> list[Claim]:
    q = quote("remark47-rho")
    v = q["values"]
    topo = quote("remark47-topology")
    costs = reading.rho_only_costs()
    omega = {k: c for k, c in costs["coefficients_times_D"].items() if k.startswith("omega")}
    omega_grows = all(costs["coefficient_positive"][k] for k in omega) and costs["phi_positive"]
    omega_at_0 = sp.factor(bd.BETA_TERM.subs(bd.rho, 0) * bd.D_DENOM)
    return [
        Claim(
            "remark47-rho",
            q["text"],
            q["location"] + f" [{D3}]",
            f"1/√T = {1 / math.sqrt(v['T']):.4f}; ρ√T = {v['rho'] * math.sqrt(v['T']):.3f}",
            NC,
            "O(1/√T) fixes no constant, so no single ρ can be checked against it",
        ),
        Claim(
            "remark47-topology",
            topo["text"],
            topo["location"] + f" [{D3}]",
            "Theorem 4.5's topology term Φ·Ω: D·(Ω(ρ) − Ω(0)) = "
            + " + ".join(f"({c})*{k.split(': ')[1].replace('^', '**')}" for k, c in omega.items())
            + f", every coefficient positive and Φ > 0: {omega_grows}; D·Ω(0) = {omega_at_0} > 0",
            _v(not omega_grows),
            "read within Theorem 4.5: the topology's term is smallest at ρ = 0 (DFedAvg's bound) and every ρ > 0 "
            "adds to it; the remark's comparison with another paper's rate mixes two proofs' hidden constants "
            "and is not checked",
        ),
    ]


# --------------------------------------------------------------------------- #
# DFedSAM tables (Table 1, 2, 3) and the prose quoting them
# --------------------------------------------------------------------------- #


def check_table1() -> list[Claim]:
    """Table 1: Train − Validation = Generalization error, one line per cell."""
    t = load_table("dfedsam_table1")
    out = []
    for r in t.rows:
        diff = _f(r, "train") - _f(r, "validation")
        ok = abs(diff - _f(r, "gen_error")) <= TOL
        out.append(
            Claim(
                f"table1-gen-error/{r['task']}/{r['algorithm']}/{r['split']}",
                f"generalization error = {r['gen_error']}",
                f"Table 1 [{D3}]",
                f"{r['train']} - {r['validation']} = {diff:.2f}",
                _v(ok),
            )
        )
    return out


def check_sec52_quotes() -> list[Claim]:
    """§5.2's generalization errors against Table 1 (printed and recomputed)."""
    t = load_table("dfedsam_table1")
    out = []

    def cell(task, alg, split):
        r = t.one(task=task, algorithm=alg, split=split)
        return _f(r, "gen_error"), _f(r, "train") - _f(r, "validation")

    def same(quoted: float, value: float, text: str) -> bool:
        """The quote equals ``value`` at the precision the quote prints it with: "15%" matches a cell of 15.04,
        "14.10%" does not match 14.14 (the float 14.10 is 14.1, so the decimals come from the text)."""
        printed = [m for m in re.finditer(r"\d+(?:\.(\d+))?", text) if abs(float(m.group(0)) - quoted) <= TOL]
        if not printed:
            raise ValueError(f"{quoted} is not printed in the quote {text!r}")
        decimals = len(printed[0].group(1) or "")
        return abs(quoted - round(value, decimals)) <= TOL

    q = quote("sec52-iid")
    v = q["values"]
    for alg in ("DFedSAM", "DFedSAM-MGS", "FedAvg", "FedSAM"):
        printed, recomputed = cell(v["task"], alg, v["split"])
        out.append(
            Claim(
                f"sec52-quotes/iid/{alg}",
                f"{alg}: {v[alg]}% (CIFAR-10, IID)",
                q["location"] + f" [{D3}]",
                f"Table 1 prints {printed:.2f}, train-val = {recomputed:.2f}",
                _v(same(v[alg], printed, q["text"])),
            )
        )
    q = quote("sec52-noniid")
    v = q["values"]
    for alg in ("DFedSAM-MGS", "FedSAM", "DFedSAM", "FedAvg"):
        for split, val in zip(v["splits"], v[alg]):
            printed, recomputed = cell(v["task"], alg, split)
            ok = same(val, printed, q["text"])
            note = (
                ""
                if ok
                else (
                    "the quote matches train-val, not the printed cell"
                    if same(val, recomputed, q["text"])
                    else "matches neither the printed cell nor train-val"
                )
            )
            out.append(
                Claim(
                    f"sec52-quotes/noniid/{alg}/{split}",
                    f"{alg}: {val}% (CIFAR-10, {split})",
                    q["location"] + f" [{D3}]",
                    f"Table 1 prints {printed:.2f}, train-val = {recomputed:.2f}",
                    _v(ok),
                    note,
                )
            )
    for a, b in v["lower_than"]:
        pairs = [(cell(v["task"], a, s)[1], cell(v["task"], b, s)[1]) for s in v["splits"]]
        out.append(
            Claim(
                f"sec52-quotes/lower/{a}<{b}",
                f"the generalization errors of {a} are lower than {b}'s",
                q["location"] + f" [{D3}]",
                "train-val per split: " + ", ".join(f"{x:.2f} vs {y:.2f}" for x, y in pairs),
                _v(all(x < y for x, y in pairs)),
            )
        )
    return out


def check_sec52_outperform() -> list[Claim]:
    """§5.2: DFedSAM(-MGS) beat every decentralized baseline; MGS beats FedSAM on CIFAR-10, 'similar' on CIFAR-100."""
    t = load_table("dfedsam_table1")
    q = quote("sec52-outperform")
    v = q["values"]
    out = []
    for task in ("CIFAR-10", "CIFAR-100"):
        worst = min(
            _f(t.one(task=task, algorithm=o, split=s), "validation")
            - max(_f(t.one(task=task, algorithm=b, split=s), "validation") for b in v["decentralized_baselines"])
            for o in v["ours"]
            for s in ("Dir0.3", "Dir0.6", "IID")
        )
        out.append(
            Claim(
                f"sec52-outperform/{task}",
                "DFedSAM and DFedSAM-MGS outperform the other decentralized methods",
                q["location"] + f" [{D3}]",
                f"smallest validation margin over the best decentralized baseline: {worst:+.2f} points",
                _v(worst > 0),
            )
        )
    for task in ("CIFAR-10", "CIFAR-100"):
        gaps = [
            _f(t.one(task=task, algorithm="DFedSAM-MGS", split=s), "validation")
            - _f(t.one(task=task, algorithm="FedSAM", split=s), "validation")
            for s in ("Dir0.3", "Dir0.6", "IID")
        ]
        txt = "MGS - FedSAM validation: " + ", ".join(f"{g:+.2f}" for g in gaps)
        if task == "CIFAR-10":
            out.append(
                Claim(
                    "sec52-mgs-vs-fedsam/CIFAR-10",
                    "DFedSAM-MGS outperforms FedSAM on CIFAR-10",
                    q["location"] + f" [{D3}]",
                    txt,
                    _v(min(gaps) > 0),
                )
            )
        else:
            out.append(
                Claim(
                    "sec52-mgs-vs-fedsam/CIFAR-100",
                    "DFedSAM-MGS achieves similar performance as FedSAM on CIFAR-100",
                    q["location"] + f" [{D3}]",
                    txt,
                    NC,
                    "'similar' has no threshold",
                )
            )
    return out


def check_table2() -> list[Claim]:
    """§5.3's "+0.64% and +8.0%" on the ring, and Table 2's Ring < Grid < Exp < Full for every algorithm."""
    t = load_table("dfedsam_table2")
    q = quote("table2")
    v = q["values"]
    base = _f(t.one(algorithm=v["baseline"]), "ring")
    out = []
    for alg in ("DFedSAM", "DFedSAM-MGS"):
        gain = _f(t.one(algorithm=alg), "ring") - base
        out.append(
            Claim(
                f"table2/ring-gain/{alg}",
                f"{alg} improves on DFedAvgM on the ring by {v[alg]}%",
                q["location"] + f" [{D3}]",
                f"{_f(t.one(algorithm=alg), 'ring'):.2f} - {base:.2f} = {gain:.2f} points",
                _v(abs(gain - v[alg]) <= TOL),
            )
        )
    for r in t.rows:
        xs = [_f(r, c) for c in ("ring", "grid", "exp", "full")]
        out.append(
            Claim(
                f"table2/order/{r['algorithm']}",
                "accuracy Ring < Grid < Exp < Full (λ order, Section 5.3)",
                f"Table 2 [{D3}]",
                " < ".join(f"{x:.2f}" for x in xs),
                _v(all(a < b for a, b in zip(xs, xs[1:]))),
            )
        )
    best = all(
        _f(t.one(algorithm="DFedSAM-MGS"), c) > max(_f(r, c) for r in t.rows if r["algorithm"] != "DFedSAM-MGS")
        for c in ("ring", "grid", "exp", "full")
    )
    out.append(
        Claim(
            "table2/mgs-best",
            "DFedSAM-MGS is better than the other methods in every topology",
            q["location"] + f" [{D3}]",
            "column maxima: "
            + ", ".join(max(t.rows, key=lambda r: _f(r, c))["algorithm"] for c in ("ring", "grid", "exp", "full")),
            _v(best),
        )
    )
    up_ok = all(
        _f(r, c) > _f(t.one(algorithm="DFedAvgM"), c)
        for r in t.rows
        for c in ("ring", "grid", "exp", "full")
        if r["up_" + c] == "1"
    )
    out.append(
        Claim(
            "table2/arrows",
            "↑ marks a cell better than the strongest baseline (DFedAvgM); meaning not stated",
            f"Table 2 [{D3}]",
            f"every ↑ cell exceeds DFedAvgM: {up_ok}",
            _v(up_ok),
            "the reading of ↑ is an inference",
        )
    )
    return out


def check_table3() -> list[Claim]:
    """Appendix C: "our methods still have benefited from SAM compared with other methods"."""
    t = load_table("dfedsam_table3")
    q = quote("table3-sam")
    out = []
    for task in ("CIFAR-10", "CIFAR-100"):
        acc = {r["algorithm"]: _f(r, "test_acc") for r in t.where(task=task)}
        dec = max(acc[a] for a in ("D-PSGD", "DisPFL", "DFedAvg", "DFedAvgM"))
        ok = min(acc["DFedSAM"], acc["DFedSAM-MGS"]) > dec
        ahead_of_all = min(acc["DFedSAM"], acc["DFedSAM-MGS"]) > max(acc["FedAvg"], acc["FedSAM"])
        out.append(
            Claim(
                f"table3-sam/{task}",
                "DFedSAM(-MGS) benefit from SAM compared with the other (decentralized) methods",
                q["location"] + f" [{D3}]",
                f"DFedSAM {acc['DFedSAM']}, MGS {acc['DFedSAM-MGS']} vs best decentralized "
                f"baseline {dec}; centralized FedAvg {acc['FedAvg']}, FedSAM {acc['FedSAM']}",
                _v(ok),
                "'other methods' read as the decentralized baselines; against every method of the table, "
                "centralized FedAvg and FedSAM included, it " + ("holds too" if ahead_of_all else "fails"),
            )
        )
    return out


def check_poster() -> list[Claim]:
    """The poster (seed 000) repeats Tables 1 and 2: are they identical to the paper's?"""
    out = []
    for a, b in (("dfedsam_table1", "dfedsam_table1_poster"), ("dfedsam_table2", "dfedsam_table2_poster")):
        ta, tb = load_table(a), load_table(b)
        diff = sum(1 for x, y in zip(ta.rows, tb.rows) if x != y) + abs(len(ta.rows) - len(tb.rows))
        out.append(
            Claim(
                f"poster-consistency/{a.split('_')[1]}",
                "the poster's table equals the paper's",
                "seeds/000 poster vs seeds/003 paper",
                f"{len(ta.rows)} rows, {diff} differ",
                _v(diff == 0),
            )
        )
    return out


def check_citation() -> list[Claim]:
    q = quote("citation-backbones")
    v = q["values"]
    bad = [
        n
        for n, ref in v["cited_for"].items()
        if v["title_keyword"][n].lower() not in v["reference_titles"][ref].lower()
    ]
    return [
        Claim(
            "citation-backbones",
            "VGG-11 (He et al., 2016) and ResNet-18 (Simonyan & Zisserman, 2014)",
            q["location"] + f" [{D3}]",
            "; ".join(f"{n} cited to '{v['reference_titles'][r]}'" for n, r in v["cited_for"].items()),
            _v(not bad),
            "the two citations are swapped" if bad else "",
        )
    ]


# --------------------------------------------------------------------------- #
# FedGF slides and FedSAM/MoFedSAM tables
# --------------------------------------------------------------------------- #


def check_fedgf_bold() -> list[Claim]:
    """FedGF Table 1: in every column the bold entry is the column maximum (failed runs (X) excluded)."""
    t = load_table("fedgf_table1")
    out = []
    cols = sorted(
        {(r["task"], r["dirichlet_alpha"], r["clients_per_round"]) for r in t.rows},
        key=lambda c: (c[0], float(c[1]), int(c[2])),
    )
    for task, a, c in cols:
        rows = [r for r in t.where(task=task, dirichlet_alpha=a, clients_per_round=c) if r["failed"] == "0"]
        top = max(_f(r, "test_acc") for r in rows)
        winners = {r["algorithm"] for r in rows if _f(r, "test_acc") == top}
        bold = {r["algorithm"] for r in rows if r["bold"] == "1"}
        out.append(
            Claim(
                f"fedgf-bold/{task}/alpha={a}/clients={c}",
                "the bold entry is the column maximum",
                f"Table 1 [{D1}]",
                f"bold {sorted(bold)}; max {top} by {sorted(winners)}",
                _v(bold == winners),
            )
        )
    t5 = load_table("fedgf_table5")
    for ds, iid in sorted({(r["dataset"], r["iidness"]) for r in t5.rows}):
        rows = t5.where(dataset=ds, iidness=iid)
        top = max(rows, key=lambda r: _f(r, "test_acc"))
        bold = [r["setting"] for r in rows if r["bold"] == "1"]
        out.append(
            Claim(
                f"fedgf-bold/table5/{ds}/{iid}",
                "the bold entry (FedGF, adaptive c) is the row maximum",
                f"Table 5 [{D1}]",
                f"bold {bold}; max {top['test_acc']} ({top['setting']})",
                _v(bold == [top["setting"]]),
            )
        )
    return out


def check_fedsam_text() -> list[Claim]:
    """FedSAM/MoFedSAM §5.2: '0.43%, 1.24% and 1.52%' and '7, 40, and 59' rounds vs MimeLite, CIFAR-10."""
    q = quote("fedsam-text")
    v = q["values"]
    t = load_table(v["table"].removesuffix(".csv"))
    out = []
    for split, gain, saved in zip(v["splits"], v["accuracy_gain"], v["rounds_saved"]):
        a, b = t.one(setting=split, algorithm=v["ours"]), t.one(setting=split, algorithm=v["baseline"])
        dg = _f(a, "validation") - _f(b, "validation")
        out.append(
            Claim(
                f"fedsam-text/accuracy/{split}",
                f"MoFedSAM is {gain}% above MimeLite (CIFAR-10, {split})",
                q["location"] + f" [{D2}]",
                f"Table 2: {a['validation']} - {b['validation']} = {dg:.2f}",
                _v(abs(dg - gain) <= TOL),
            )
        )
        dr = int(b["rounds"]) - int(a["rounds"])
        out.append(
            Claim(
                f"fedsam-text/rounds/{split}",
                f"MoFedSAM saves {saved} rounds vs MimeLite (CIFAR-10, {split})",
                q["location"] + f" [{D2}]",
                f"Table 2: {b['rounds']} - {a['rounds']} = {dr}",
                _v(dr == saved),
            )
        )
    q = quote("fedsam-f1-text")
    v = q["values"]
    for col in ("train", "validation"):
        for split, val in zip(v["splits"], v[col]):
            cellv = _f(t.one(setting=split, algorithm=v["algorithm"]), col)
            out.append(
                Claim(
                    f"fedsam-f1-text/{col}/{split}",
                    f"FedSAM {col} accuracy {val}% (CIFAR-10, {split})",
                    q["location"] + f" [{D2}]",
                    f"Table 2 prints {cellv:.2f}",
                    _v(abs(cellv - val) <= TOL),
                )
            )
    return out


def check_fedsam_tables() -> list[Claim]:
    """FedSAM §5.2's orderings (relation symbols lost; read as '>'), and the cells Table 1 shares with Tables 2/4/5."""
    q = quote("fedsam-order")
    t1 = load_table("fedsam_table1")
    out = []
    for ds in ("EMNIST", "CIFAR-10", "CIFAR-100"):
        for order in q["values"]["orders"]:
            acc = [_f(t1.one(setting=ds, algorithm=a), "validation") for a in order]
            out.append(
                Claim(
                    f"fedsam-order/{ds}/{order[0]}",
                    " > ".join(order) + " (validation accuracy)",
                    q["location"] + f" [{D2}]",
                    " > ".join(f"{x:.2f}" for x in acc),
                    NC,
                    "the relation symbols between the names cannot be read, so the order is listed, not "
                    "judged" + ("" if all(a > b for a, b in zip(acc, acc[1:])) else "; read as '>', it would fail"),
                )
            )
    for ds, other in (("EMNIST", "fedsam_table4"), ("CIFAR-10", "fedsam_table2"), ("CIFAR-100", "fedsam_table5")):
        t = load_table(other)
        bad = [
            a["algorithm"]
            for a in t1.where(setting=ds)
            if any(
                a[k] != t.one(setting="Dir0.6", algorithm=a["algorithm"])[k]
                for k in ("train", "train_sd", "validation", "validation_sd", "rounds")
            )
        ]
        out.append(
            Claim(
                f"fedsam-dup/{ds}",
                f"Table 1's {ds} column equals the Dirichlet 0.6 column of {other.split('_')[1]}",
                f"Tables 1, 2, 4, 5 [{D2}] (same setting: Dirichlet 0.6)",
                f"rows that differ: {bad or 'none'}",
                _v(not bad),
            )
        )
    return out


def check_dfedavgm_text() -> list[Claim]:
    """DFedAvgM §6.1: parameter counts and the MNIST partition arithmetic."""
    q = quote("dfedavgm-mnist")
    v = q["values"]
    loc = q["location"] + f" [{D4}]"
    p2nn = (784 * 200 + 200) + (200 * 200 + 200) + (200 * 10 + 10)
    # CNN of McMahan et al. 2017 (5x5 kernels, 'same' padding, 2x2 pooling): the kernel size is not stated here
    pcnn = (5 * 5 * 1 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 512 + 512) + (512 * 10 + 10)
    return [
        Claim(
            "dfedavgm/params-2nn",
            "2NN (2 hidden layers of 200, ReLU): 199,210 parameters",
            loc,
            f"784·200+200 + 200·200+200 + 200·10+10 = {p2nn}",
            _v(p2nn == v["params_2nn"]),
        ),
        Claim(
            "dfedavgm/params-cnn",
            "CNN (32, 64 channels, max pooling, FC 512): 1,663,370 parameters",
            loc,
            f"with 5x5 kernels and 'same' padding (28→14→7): {pcnn}",
            _v(pcnn == v["params_cnn"]),
            "kernel size and padding are assumed (McMahan et al. 2017), not stated",
        ),
        Claim(
            "dfedavgm/clients",
            "MNIST is trained 'using 100 clients' and 'partitioned into 20 clients'",
            loc,
            f"{v['clients_stated_first']} vs {v['clients_partitioned']}",
            _v(v["clients_stated_first"] == v["clients_partitioned"]),
            "the section states two different client counts",
        ),
        Claim(
            "dfedavgm/partition",
            "20 clients x 3000 (IID); 40 shards x 1500, 2 per client (non-IID)",
            loc,
            f"20·3000 = {20 * v['iid_per_client']}, 40·1500 = {v['shards'] * v['shard_size']}, 20·2 = "
            f"{v['clients_partitioned'] * v['shards_per_client']} shards (MNIST train = 60000)",
            _v(
                20 * v["iid_per_client"] == v["mnist_train"] == v["shards"] * v["shard_size"]
                and v["clients_partitioned"] * v["shards_per_client"] == v["shards"]
            ),
        ),
    ]


def check_missing() -> list[Claim]:
    """Results whose formulas cannot be read in the papers' text: listed, not reconstructed."""
    return [
        Claim(
            f"missing/{x.key}",
            f"{x.paper}: {x.what}",
            f"{x.location} [{x.seed}]",
            f"survives: {x.survives}",
            NC,
            "its formula cannot be read in the paper's text, so it is listed, not reconstructed",
        )
        for x in bd.MISSING
    ]


CHECKS = (
    check_ring_gap,
    check_grid_gap,
    check_lambda_order,
    check_definition_4_1,
    check_lemma_d1,
    check_phi,
    check_stepsize,
    check_theorem_constants,
    check_theorem45_steps,
    check_theorem45_terms,
    check_rate_displays,
    check_corollary_4_6,
    check_lemma_d6,
    check_quadratic_bound,
    check_remark_47,
    check_table1,
    check_sec52_quotes,
    check_sec52_outperform,
    check_table2,
    check_table3,
    check_poster,
    check_citation,
    check_fedgf_bold,
    check_fedsam_text,
    check_fedsam_tables,
    check_dfedavgm_text,
    check_missing,
)


@lru_cache(maxsize=1)
def _all() -> tuple[Claim, ...]:
    out = []
    for check in CHECKS:
        out.extend(check())
    ids = [c.id for c in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise RuntimeError(f"duplicate claim ids: {sorted(dup)}")
    return tuple(out)


def all_claims() -> list[Claim]:
    """Every claim, in a fixed order (cached: the numbers are deterministic)."""
    return list(_all())


def format_claim(c: Claim) -> str:
    """One line: ``ID | VERDICT | claim [location] | computed (reason)``."""
    tail = f" ({c.reason})" if c.reason else ""
    return f"{c.id} | {c.verdict} | {c.claim} [{c.location}] | {c.computed}{tail}"


def format_table(claims: list[Claim] | None = None) -> str:
    claims = all_claims() if claims is None else claims
    lines = [format_claim(c) for c in claims]
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    lines.append(f"# {len(claims)} claims: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)
