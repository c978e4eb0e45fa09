"""How to read DFedSAM's Theorem 4.5: is it vacuous, when does its topology term stop dominating,
does its step-size condition hold, and what does ρ do to it.

DFedSAM (Shi et al., ICML 2023; seed 003), Theorem 4.5, eq. (7), bounds

    min_{1≤t≤T} E‖∇f(x̄ᵗ)‖² ≤ 2Δ/(T·D) + Ψ(K, ρ, η) + Φ(λ, m, Q)·Ω(K, ρ, η),

with D = ηK − 32η³K²L² − 6η²KL, Δ = f(x̄¹) − f*, Ψ and Ω the paper's α and β
(:mod:`theory.bounds`: ``ALPHA``, ``BETA_TERM``). This module turns the bound
into four numbers a reader can act on, each derived below from the theorem or
its proof (Appendix D.2/D.3), and :func:`reading_table` puts them side by side
for the graphs and Q values of the book's theory chapter. Nothing here changes
:mod:`theory.bounds`; every quantity is computed from its expressions.

* :func:`vacuity`: the bound against the trivial 2LΔ that every L-smooth f
  obeys at the starting point (:func:`trivial_gradient_bound`).
* :func:`transient_rounds`: the number of rounds after which the topology term
  falls below the leading 1/√(KT) term, under Corollary 4.6's choices of η and ρ.
* :func:`stepsize_condition`: whether the denominator that the proof divides by
  (eq. (24) for Q = 1, eq. (33) for Q > 1) is positive at a given T.
* :func:`rho_only_costs` / :func:`rho_effect`: the bound grows with ρ, and at
  ρ = 0 it is the bound the same proof gives DFedAvg (:data:`DFEDAVG_BOUND`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import sympy as sp

from . import bounds as bd
from .bounds import D_DENOM, THEOREM_4_5, evaluate, rho, theorem45_terms
from .phi import PHI, PHI_TERM1, PHI_TERM2, phi

__all__ = [
    "CHAPTER_SETTING",
    "CHAPTER_GRAPHS",
    "CHAPTER_QS",
    "DFEDAVG_BOUND",
    "trivial_gradient_bound",
    "vacuity",
    "transient_rounds",
    "transient_coefficients",
    "stepsize_condition",
    "rho_only_costs",
    "rho_effect",
    "reading_table",
    "markdown_table",
]

#: the setting of the book's theory chapter (book/10_theory.md, ``UNIT``): m = 100, T = 1000,
#: K = 5, the largest allowed step η = 1/(10KL), ρ = 0.01, every other constant 1
CHAPTER_SETTING: dict[str, float] = dict(
    K=5, T=1000, L=1.0, eta=1 / (10 * 5 * 1.0), rho=0.01, sigma_l=1.0, sigma_g=1.0, Delta=1.0, m=100
)
#: the graphs and gossip steps per round the chapter evaluates the bound on
CHAPTER_GRAPHS: tuple[str, ...] = ("ring", "grid", "exponential-mh", "complete")
CHAPTER_QS: tuple[int, ...] = (1, 4)

#: Theorem 4.5 at ρ = 0. DFedSAM with ρ = 0 takes δ = 0 in Algorithm 1 line 4, so its local step is
#: y ← y − η∇F_i(y; ξ): that is DFedAvg (Sun et al., eq. (5)) for Q = 1, and DFedAvg with Q gossip
#: steps for Q > 1. The proof of Theorem 4.5 never needs ρ > 0, so this is the bound it gives DFedAvg.
DFEDAVG_BOUND = THEOREM_4_5.subs(rho, 0)


def _positive(name: str, value) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _lam(value) -> float:
    """λ as the theorem needs it: in [0, 1); values within 1e-12 of 0 (the complete graph's rounding) are 0."""
    v = float(value)
    if not (-1e-12 <= v < 1):
        raise ValueError(f"lam (Definition 4.1's λ) must be in [0, 1), got {value!r}")
    return max(v, 0.0) if v > 1e-12 else 0.0


def _gossip_steps(Q) -> int:
    if int(Q) != Q or Q < 1:
        raise ValueError(f"Q (gossip steps per round) must be an integer >= 1, got {Q!r}")
    return int(Q)


# --------------------------------------------------------------------------- #
# 1. vacuity
# --------------------------------------------------------------------------- #


def trivial_gradient_bound(L: float, Delta: float) -> float:
    """2LΔ: what every L-smooth f with f(x̄¹) − f* ≤ Δ already guarantees, with no algorithm at all.

    Derivation. L-smoothness (Assumption 4.3) gives the descent lemma
    f(y) ≤ f(x) + ⟨∇f(x), y − x⟩ + (L/2)‖y − x‖². At y = x − ∇f(x)/L:
    f* ≤ f(y) ≤ f(x) − ‖∇f(x)‖²/(2L), so ‖∇f(x)‖² ≤ 2L(f(x) − f*). At the
    starting point x̄¹ (deterministic: every client starts from x¹) this is
    ‖∇f(x̄¹)‖² ≤ 2LΔ, and min_{1≤t≤T} E‖∇f(x̄ᵗ)‖² ≤ ‖∇f(x̄¹)‖² ≤ 2LΔ because
    t = 1 is one of the rounds the minimum runs over. A bound on that minimum
    larger than 2LΔ therefore says nothing the starting point did not.
    """
    return 2 * _positive("L", L) * _positive("Delta", Delta)


def vacuity(lam: float, m: int, Q: int = 1, **values) -> dict[str, float | bool]:
    """Theorem 4.5's bound at ``values`` (K, T, L, eta, rho, sigma_l, sigma_g, Delta) against 2LΔ.

    Returns ``bound`` (eq. (7), :func:`theory.bounds.theorem45_terms`), ``trivial`` = 2LΔ,
    ``ratio`` = bound/2LΔ and ``vacuous`` = bound ≥ 2LΔ (:func:`trivial_gradient_bound`
    says why ≥ 2LΔ is vacuous). η outside the theorem's 0 < η ≤ 1/(10KL) is refused.
    """
    missing = {"K", "T", "L", "eta", "rho", "sigma_l", "sigma_g", "Delta"} - set(values)
    if missing:
        raise ValueError(f"vacuity needs {sorted(missing)} as well (Theorem 4.5's constants)")
    if not 0 < values["eta"] <= 1 / (10 * values["K"] * values["L"]):  # else D may be ≤ 0 and the "bound" meaningless
        raise ValueError(
            f"Theorem 4.5 holds for 0 < eta <= 1/(10KL) = {1 / (10 * values['K'] * values['L']):.4g}, "
            f"got eta={values['eta']!r}"
        )
    bound = theorem45_terms(**values, lam=_lam(lam), m=m, Q=_gossip_steps(Q))["bound"]
    trivial = trivial_gradient_bound(values["L"], values["Delta"])
    return {"bound": bound, "trivial": trivial, "ratio": bound / trivial, "vacuous": bool(bound >= trivial)}


# --------------------------------------------------------------------------- #
# 2. transient rounds
# --------------------------------------------------------------------------- #


@lru_cache(maxsize=None)
def transient_coefficients() -> dict[str, sp.Expr]:
    """The leading and topology coefficients of Theorem 4.5 under Corollary 4.6's η and ρ.

    Put η = 1/(L√(KT)) and ρ = 1/√T (Corollary 4.6's O(·) choices, hidden constants 1)
    into eq. (7) and expand in T^{-1/2} (:func:`theory.bounds.derived_rate`):
    2Δ/(TD) + Ψ = a/√T + O(1/T), and Ω = c/T^{3/2} + O(T^{-2}), with

    * a(K, L, Δ, σ_l), the coefficient of T^{-1/2}, and
    * c(K, L, σ_g, σ_l), the coefficient of Φ·T^{-3/2}.

    Ω does not contain Δ or λ: the topology enters only through the factor Φ.
    """
    from .bounds import derived_rate

    rate = derived_rate()
    return {"leading": sp.simplify(rate["T^-1/2"]), "topology": sp.simplify(rate["T^-3/2 (times Phi)"])}


def transient_rounds(
    lam: float,
    m: int,
    Q: int = 1,
    *,
    K: float,
    L: float,
    sigma_l: float,
    sigma_g: float,
    Delta: float,
    beta: float | None = None,
    form: str = "corollary",
) -> float:
    """Rounds T* after which the topology term of the rate falls below its leading 1/√(KT) term.

    Assumption (both forms): Corollary 4.6's choices η = 1/(L√(KT)) and ρ = 1/√T,
    hidden O(·) constants set to 1. At a *fixed* η and ρ (the chapter's
    η = 1/(10KL), ρ = 0.01) the topology term Φ·Ω does not shrink with T at all,
    and no such T exists; only the optimisation term 2Δ/(TD) does.

    ``form="corollary"``: the display of Corollary 4.8 (Corollary 4.6's with
    1/(1−λ)² → Φ; Theorem 4.5 states one bound with Φ for DFedSAM and
    DFedSAM-MGS alike). Its leading term is (Δ + σ_l²)/√(KT), its topology term
    Φ(β² + σ_l²)/(√K·T^{3/2}); their ratio is Φ(β² + σ_l²)/((Δ + σ_l²)T), so they
    are equal at

        T* = Φ(λ, m, Q) · (β² + σ_l²)/(Δ + σ_l²),

    which is Φ itself when every constant is 1: "T ≳ Φ". ``beta`` defaults to
    ``sigma_g`` (Assumption 4.4: σ_g ≤ β, so this is a lower bound on the display's T*).

    ``form="theorem"``: eq. (7) itself under the same η and ρ, to leading order
    in 1/√T (:func:`transient_coefficients`): a/√T = c·Φ/T^{3/2} at

        T* = Φ(λ, m, Q) · c(K, L, σ_g, σ_l)/a(K, L, Δ, σ_l).

    With every constant 1, a = (5K − 5/2)/(√K(2K − 1)) and c = 6√K(32K − 15)/(2K − 1),
    so T* = Φ·6K(32K − 15)/(5K − 5/2): 580Φ/3 ≈ 193Φ at K = 5, growing like 38K·Φ.
    The corollary's display loses this factor: the theorem's c grows like √K where
    the display has 1/√K (``theory.claims``' check of Corollary 4.6).
    """
    lam_v, q = _lam(lam), _gossip_steps(Q)
    for name, v in (("K", K), ("L", L), ("m", m)):
        _positive(name, v)
    phi_v = float(phi(lam_v, m, q))
    if form == "corollary":
        b2 = (sigma_g if beta is None else beta) ** 2
        return phi_v * (b2 + sigma_l**2) / _positive("Delta + sigma_l^2", Delta + sigma_l**2)
    if form == "theorem":
        co = transient_coefficients()
        sub = {bd.K: K, bd.L: L, bd.Delta: Delta, bd.sigma_l: sigma_l, bd.sigma_g: sigma_g}
        a = float(co["leading"].subs(sub))
        c = float(co["topology"].subs(sub))
        return phi_v * c / _positive("the leading coefficient a", a)
    raise ValueError(f"form must be 'corollary' or 'theorem', got {form!r}")


# --------------------------------------------------------------------------- #
# 3. the step-size condition of the proof
# --------------------------------------------------------------------------- #


def stepsize_condition(
    lam: float, m: int, Q: int = 1, *, K: float, L: float, T: float | None = None, eta: float | None = None
) -> dict[str, object]:
    """Is the denominator that the proof of Theorem 4.5 divides by positive?

    The seed text (Appendix D.2, eq. (24), Q = 1, from Lemma D.5) bounds the clients'
    mean squared gradient norm by a fraction with denominator

        (1 − λ)² − 32L²η²K²                                  (24)

    and for DFedSAM-MGS (Appendix D.3, eq. (33), Q > 1, from Lemma D.6) by one with

        1 − 32L²η²K²·Φ(λ, m, Q).                             (33)

    The inequality (and everything after it) holds only where that denominator is
    positive; the paper says only "η is a very small value". At a given ``eta`` the
    condition does not depend on T. With Corollary 4.6's η = 1/(L√(KT)) (``eta``
    None, O-constant 1), 32L²η²K² = 32K/T, so the condition reads

        T > 32K/(1 − λ)²   (Q = 1),        T > 32K·Φ(λ, m, Q)   (Q > 1),

    ≈ 9.2·10⁷ rounds on the ring of 100 at K = 5. *Reconstructed*: the paper states
    neither threshold in T; they are (24)/(33) with Corollary 4.6's η put in, and the
    O(·) constant of η set to 1 (a constant c multiplies the threshold by c²).
    Which denominator applies is the paper's: (24) for DFedSAM (Q = 1), (33) for
    DFedSAM-MGS; (33) at Q = 1 would ask T > 32K·2(1 + λ)/(1 − λ)², stricter.

    Returns ``equation``, ``eta`` used, ``denominator`` at that η, ``holds``,
    ``min_rounds`` (the threshold in T for Corollary 4.6's η), ``theorem_condition``
    (Theorem 4.5's own 0 < η ≤ 1/(10KL), which is all the theorem asks) and ``reconstructed``.
    """
    lam_v, q = _lam(lam), _gossip_steps(Q)
    K, L = _positive("K", K), _positive("L", L)
    if eta is None:
        if T is None:
            raise ValueError("give T (to use Corollary 4.6's eta = 1/(L*sqrt(K*T))) or eta")
        eta = 1 / (L * math.sqrt(K * _positive("T", T)))
    eta = _positive("eta", eta)
    phi_v = float(phi(lam_v, m, q))
    s2 = 32 * L**2 * eta**2 * K**2
    if q == 1:
        equation, denominator, min_rounds = "(24)", (1 - lam_v) ** 2 - s2, 32 * K / (1 - lam_v) ** 2
    else:
        equation, denominator, min_rounds = "(33)", 1 - s2 * phi_v, 32 * K * phi_v
    return {
        "equation": equation,
        "eta": eta,
        "denominator": denominator,
        "holds": bool(denominator > 0),
        "min_rounds": min_rounds,
        "theorem_condition": bool(eta <= 1 / (10 * K * L)),
        "reconstructed": "threshold in T: eq. (24)/(33) with Corollary 4.6's eta = 1/(L sqrt(KT)), O-constant 1",
    }


# --------------------------------------------------------------------------- #
# 4. what ρ does to the bound
# --------------------------------------------------------------------------- #


@lru_cache(maxsize=None)
def rho_only_costs() -> dict[str, object]:
    """ρ enters Theorem 4.5 only as a cost: the bound is increasing in ρ and equals DFedAvg's at ρ = 0.

    ρ appears only in Ψ and Ω, never in D or in the optimisation term 2Δ/(TD). D > 0
    under the theorem's η ≤ 1/(10KL) (:func:`theory.bounds.stepsize_margin`), so
    D·(bound(ρ) − bound(0)) has the sign of the bound's growth. It splits as
    D·(Ψ(ρ) − Ψ(0)) + Φ·D·(Ω(ρ) − Ω(0)); sympy expands each part as a polynomial
    in ρ (powers ρ² and ρ⁴ only), checks that the parts recombine to the whole, and,
    with K = (1 + j)/2, j = 2K − 1 > 0, decides that every coefficient is positive
    (expanded, each is a sum of positive monomials); Φ > 0 for λ ∈ (0, 1) (and Φ = 1 + m^{2(1−Q)}
    at λ = 0). So for every ρ > 0

        bound(ρ) − bound(0) = (a₂ρ² + a₄ρ⁴ + Φ·(b₂ρ² + b₄ρ⁴))/D > 0,

    and the bound increases with ρ (its derivative is a sum of positive terms).

    bound(0) is :data:`DFEDAVG_BOUND`. Hence the bound can never be smaller for
    DFedSAM than for DFedAvg under the same (η, K, T, graph): whatever accuracy
    DFedSAM gains over DFedAvg, this theorem cannot be the explanation.
    """
    j = sp.Symbol("j", positive=True)  # j = 2K − 1 > 0 (K ≥ 1): K = (1 + j)/2
    parts = {}
    for part, expr in (("psi", bd.ALPHA), ("omega", bd.BETA_TERM)):  # D·(Ψ(ρ) − Ψ(0)), D·(Ω(ρ) − Ω(0))
        poly = sp.Poly(sp.expand(sp.cancel((expr - expr.subs(rho, 0)) * D_DENOM)), rho)
        for e, c in zip(poly.monoms(), poly.coeffs()):
            parts[f"{part}: rho^{e[0]}"] = sp.factor(c)
    positive = {name: bool(sp.expand(c.subs(bd.K, (1 + j) / 2)).is_positive) for name, c in parts.items()}
    # Φ > 0 for λ ∈ (0, 1): term 1 with λ = 1/(1+s), term 2 with u = λ^Q = 1/(1+r) ∈ (0, 1)
    s_, r_ = sp.symbols("s r", positive=True)
    phi_positive = bool(
        sp.simplify(PHI_TERM1.subs(bd.lam, 1 / (1 + s_))).is_positive
        and sp.simplify(PHI_TERM2.subs(bd.lam**bd.Q, 1 / (1 + r_))).is_positive
    )
    recombined = (
        sp.simplify(
            sum(parts[n] * rho ** int(n.split("^")[1]) * (PHI if n.startswith("omega") else 1) for n in parts)
            - (THEOREM_4_5 - DFEDAVG_BOUND) * D_DENOM
        )
        == 0
    )
    rho_free = not (2 * bd.Delta / (bd.T * D_DENOM)).has(rho) and not D_DENOM.has(rho)
    return {
        "coefficients_times_D": parts,
        "coefficient_positive": positive,
        "phi_positive": phi_positive,
        "recombines_to_bound": bool(recombined),
        "rho_free_first_term_and_D": bool(rho_free),
        "only_costs": bool(all(positive.values()) and phi_positive and recombined and rho_free),
        "dfedavg_bound_has_rho": bool(DFEDAVG_BOUND.has(rho)),
    }


def rho_effect(rhos, lam: float, m: int, Q: int = 1, **values) -> list[dict[str, float]]:
    """The bound at each ρ in ``rhos`` (the other constants as in ``values``), with DFedAvg's (ρ = 0) beside it.

    Each row: ``rho``, ``bound``, ``dfedavg_bound`` (ρ = 0) and ``cost`` = bound − dfedavg_bound.
    """
    base = {k: v for k, v in values.items() if k != "rho"}
    zero = evaluate(DFEDAVG_BOUND, **base, lam=_lam(lam), m=m, Q=_gossip_steps(Q))
    rows = []
    for r in rhos:
        if float(r) < 0:
            raise ValueError(f"rho (SAM's perturbation radius) must be >= 0, got {r!r}")
        b = evaluate(THEOREM_4_5, **base, rho=float(r), lam=_lam(lam), m=m, Q=_gossip_steps(Q))
        rows.append({"rho": float(r), "bound": b, "dfedavg_bound": zero, "cost": b - zero})
    return rows


# --------------------------------------------------------------------------- #
# the table for the chapter
# --------------------------------------------------------------------------- #


def reading_table(graphs=CHAPTER_GRAPHS, qs=CHAPTER_QS, setting: dict | None = None, seed: int = 0) -> list[dict]:
    """One row per (graph, Q): the four readings of Theorem 4.5 at ``setting`` (default :data:`CHAPTER_SETTING`).

    λ is Definition 4.1's, computed on the engine's W for ``graphs`` at m = setting["m"]
    (:func:`theory.spectral.static_spectrum`). Keys: ``graph``, ``Q``, ``lam``, ``bound``,
    ``trivial`` (2LΔ), ``vacuous``, ``phi``, ``transient_rounds`` (Corollary 4.8's display,
    = Φ at unit constants), ``transient_rounds_theorem`` (eq. (7) itself), ``stepsize_min_rounds``
    (the proof's denominator positive for T above this, with Corollary 4.6's η),
    ``stepsize_holds`` (at setting["T"], Corollary 4.6's η) and ``stepsize_holds_at_eta``
    (at setting["eta"], the chapter's fixed step).
    """
    from .spectral import static_spectrum

    s = dict(CHAPTER_SETTING if setting is None else setting)
    m = int(s.pop("m"))
    rows = []
    for name in graphs:
        lam_v = _lam(max(static_spectrum(name, m, seed).lam, 0.0))
        for q in qs:
            vac = vacuity(lam_v, m, q, **s)
            consts = dict(K=s["K"], L=s["L"], sigma_l=s["sigma_l"], sigma_g=s["sigma_g"], Delta=s["Delta"])
            at_t = stepsize_condition(lam_v, m, q, K=s["K"], L=s["L"], T=s["T"])
            at_eta = stepsize_condition(lam_v, m, q, K=s["K"], L=s["L"], eta=s["eta"])
            rows.append(
                {
                    "graph": name,
                    "Q": q,
                    "lam": lam_v,
                    "bound": vac["bound"],
                    "trivial": vac["trivial"],
                    "vacuous": vac["vacuous"],
                    "phi": float(phi(lam_v, m, q)),
                    "transient_rounds": transient_rounds(lam_v, m, q, **consts, form="corollary"),
                    "transient_rounds_theorem": transient_rounds(lam_v, m, q, **consts, form="theorem"),
                    "stepsize_min_rounds": at_t["min_rounds"],
                    "stepsize_holds": at_t["holds"],
                    "stepsize_holds_at_eta": at_eta["holds"],
                }
            )
    return rows


def markdown_table(rows: list[dict], T: int | None = None) -> str:
    """:func:`reading_table`'s rows as a Markdown table (3 significant digits), for a notebook's ``Markdown``."""
    T = CHAPTER_SETTING["T"] if T is None else T
    yes = {True: "yes", False: "no"}
    head = [
        "graph",
        "Q",
        "λ",
        "bound",
        "2LΔ",
        "vacuous?",
        "Φ",
        "T* (Cor. 4.8)",
        "T* (eq. 7)",
        "proof needs T >",
        f"holds at T = {T:g}?",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for r in rows:
        cells = [
            r["graph"],
            str(r["Q"]),
            f"{r['lam']:.4f}",
            f"{r['bound']:.3g}",
            f"{r['trivial']:.3g}",
            yes[r["vacuous"]],
            f"{r['phi']:.3g}",
            f"{r['transient_rounds']:.3g}",
            f"{r['transient_rounds_theorem']:.3g}",
            f"{r['stepsize_min_rounds']:.3g}",
            yes[r["stepsize_holds"]],
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
