"""Φ(λ, m, Q), the topology factor of DFedSAM Theorem 4.5, and its properties, computed.

DFedSAM (Shi et al., ICML 2023), eq. (6):

.. math::

    \\Phi(\\lambda, m, Q) = \\frac{\\lambda^Q + 1}{(1-\\lambda)^2 m^{2(Q-1)}}
                          + \\frac{\\lambda^Q + 1}{(1-\\lambda^Q)^2}.

The paper states three properties: Φ(λ, m, 1) = 2(λ+1)/(1−λ)² ≤ 4/(1−λ)²
(Remark 4.10), Φ shrinks as Q grows, and with enough gossip steps its second
term "is close to 1" (Remark 4.9). Each is *computed* below, symbolically
where sympy can, numerically on a grid otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

__all__ = [
    "lam",
    "m",
    "Q",
    "PHI",
    "PHI_TERM1",
    "PHI_TERM2",
    "phi",
    "phi_q1",
    "phi_monotone_symbolic",
    "phi_monotone_grid",
    "phi_limit_q_infinity",
    "gossip_steps_needed",
    "PhiRow",
    "phi_table",
]

lam = sp.Symbol("lambda", nonnegative=True)  # SLEM of W, Definition 4.1
m = sp.Symbol("m", positive=True)  # number of clients
Q = sp.Symbol("Q", positive=True)  # gossip steps per round (MGS)

#: first term of eq. (6): from the m^(Q-1) factor in Lemma D.6's proof
PHI_TERM1 = (lam**Q + 1) / ((1 - lam) ** 2 * m ** (2 * (Q - 1)))
#: second term of eq. (6): the Q-step geometric sum 1/(1 - λ^Q), squared
PHI_TERM2 = (lam**Q + 1) / (1 - lam**Q) ** 2
#: DFedSAM eq. (6)
PHI = PHI_TERM1 + PHI_TERM2

_phi_np = sp.lambdify((lam, m, Q), PHI, "numpy")
_t1_np = sp.lambdify((lam, m, Q), PHI_TERM1, "numpy")
_t2_np = sp.lambdify((lam, m, Q), PHI_TERM2 + 0 * m, "numpy")  # + 0*m: same signature and broadcasting


def phi(lam_value, m_value, q_value) -> float | np.ndarray:
    """Φ(λ, m, Q) of eq. (6), numerically (broadcasts over numpy arrays)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _phi_np(np.asarray(lam_value, float), np.asarray(m_value, float), np.asarray(q_value, float))


@lru_cache(maxsize=None)
def phi_q1() -> dict[str, object]:
    """Remark 4.10: Φ(λ, m, 1) = 2(λ+1)/(1−λ)² ≤ 4/(1−λ)², checked by sympy.

    Returns the simplified difference Φ(λ,m,1) − 2(λ+1)/(1−λ)² (must be 0),
    and 4/(1−λ)² − 2(λ+1)/(1−λ)² factored: 2(1−λ)/(1−λ)² = 2/(1−λ) > 0 for λ < 1,
    so the inequality holds strictly on [0, 1).
    """
    at1 = PHI.subs(Q, 1)
    claimed = 2 * (lam + 1) / (1 - lam) ** 2
    diff = sp.simplify(at1 - claimed)
    slack = sp.factor(sp.simplify(4 / (1 - lam) ** 2 - claimed))
    s = sp.Symbol("s", positive=True)  # λ = 1/(1+s) ranges over (0, 1) as s ranges over (0, ∞)
    slack_pos = sp.simplify(slack.subs(lam, 1 / (1 + s))).is_positive
    return {
        "phi_at_q1": sp.simplify(at1),
        "difference": diff,
        "identity_holds": diff == 0,
        "slack": slack,
        "slack_positive_on_0_1": bool(slack_pos),
    }


@lru_cache(maxsize=None)
def phi_monotone_symbolic() -> dict[str, object]:
    """∂Φ/∂Q < 0 for λ ∈ (0, 1), m > 1, shown factor by factor with sympy.

    With u = λ^Q ∈ (0, 1), du/dQ = u·ln λ < 0. Term 2 is g(u) = (u+1)/(1−u)²,
    g'(u) = (u+3)/(1−u)³ > 0, so term 2 decreases in Q. Term 1 is
    (u+1)·h(Q)/(1−λ)² with h = m^(−2(Q−1)) decreasing (m > 1) and u+1
    decreasing, both positive: a product of positive decreasing factors.
    The substitution λ = 1/(1+s), m = 1+r with s, r > 0 lets sympy decide the signs.
    """
    u = sp.Symbol("u", positive=True)
    s, r = sp.symbols("s r", positive=True)
    g_prime = sp.factor(sp.diff((u + 1) / (1 - u) ** 2, u))
    g_prime_pos = sp.simplify(g_prime.subs(u, 1 / (1 + s))).is_positive  # u ∈ (0,1)
    du_dq = sp.diff(lam**Q, Q)  # = λ^Q log λ
    du_dq_neg = sp.simplify(du_dq.subs(lam, 1 / (1 + s))).is_negative
    h = m ** (-2 * (Q - 1))
    dh_dq_neg = sp.simplify(sp.diff(h, Q).subs(m, 1 + r)).is_negative
    return {
        "dterm2_du": g_prime,
        "dterm2_du_positive": bool(g_prime_pos),
        "du_dQ": du_dq,
        "du_dQ_negative": bool(du_dq_neg),
        "dh_dQ_negative": bool(dh_dq_neg),
        "decreasing": bool(g_prime_pos and du_dq_neg and dh_dq_neg),
    }


def phi_monotone_grid(lams=None, ms=(2, 10, 100, 1000), q_max: int = 20) -> dict[str, object]:
    """Sign of Φ(Q+1) − Φ(Q) on a grid of λ ∈ [0, 1), m and Q = 1..q_max−1.

    Returns the largest difference found (must be < 0 for "decreasing") and where.
    """
    lams = np.linspace(0.0, 0.999, 200) if lams is None else np.asarray(lams, float)
    L, M, QQ = np.meshgrid(lams, np.asarray(ms, float), np.arange(1, q_max), indexing="ij")
    # difference term by term: Φ(Q+1) − Φ(Q) as one subtraction loses term 1 (≈ m^(−2Q)) against term 2 (≈ 1)
    d = (_t1_np(L, M, QQ + 1) - _t1_np(L, M, QQ)) + (_t2_np(L, M, QQ + 1) - _t2_np(L, M, QQ))
    i = np.unravel_index(np.nanargmax(d), d.shape)
    return {
        "max_difference": float(d[i]),
        "at": (float(L[i]), float(M[i]), int(QQ[i])),
        "all_negative": bool(np.all(d < 0)),
        "points": int(d.size),
    }


@lru_cache(maxsize=None)
def phi_limit_q_infinity() -> dict[str, sp.Expr]:
    """lim_{Q→∞} Φ(λ, m, Q) by sympy, for λ ∈ (0, 1) (λ = 1/(1+s)) and m > 1 (m = 1+r).

    Also the λ = 0 case (Φ = 1 + m^(−2(Q−1)) → 1) and the m = 1 case, where
    the first term does not vanish: Φ → 1/(1−λ)² + 1.
    """
    s, r = sp.symbols("s r", positive=True)
    general = sp.simplify(sp.limit(PHI.subs({lam: 1 / (1 + s), m: 1 + r}), Q, sp.oo))
    at_zero = sp.limit(PHI.subs({lam: 0, m: 1 + r}), Q, sp.oo)
    m_one = sp.simplify(sp.limit(PHI.subs({lam: 1 / (1 + s), m: 1}), Q, sp.oo).subs(s, 1 / lam - 1))
    return {"lambda_in_0_1_m_gt_1": general, "lambda_0": at_zero, "m_1": sp.simplify(m_one)}


def gossip_steps_needed(lam_value: float, m_value: int, target: float = 1.1, q_max: int = 10**7) -> int | None:
    """Smallest Q with Φ(λ, m, Q) ≤ target (Remark 4.9's "close to 1"), by bisection on the monotone Φ."""
    lam_value = max(lam_value, 0.0)  # a complete graph's λ is 0 up to rounding; Φ(0, m, Q) = 1 + m^(-2(Q-1))
    lo, hi = 1, 1
    while phi(lam_value, m_value, hi) > target:
        hi *= 2
        if hi > q_max:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if phi(lam_value, m_value, mid) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class PhiRow:
    """One topology's Φ at fixed m for Q = 1..len(values); term1/term2 split for Q's effect."""

    name: str
    m: int
    lam: float
    values: tuple[float, ...]
    term1: tuple[float, ...]
    term2: tuple[float, ...]
    q_for_1_1: int | None  # smallest Q with Φ ≤ 1.1
    lam_kind: str = "SLEM"  # "SLEM" (Definition 4.1's λ) or "sqrt(rho_ms)" for a time-varying scheme


def phi_table(
    m_value: int = 100, qs=(1, 2, 3, 4), seed: int = 0, names=None, time_varying: bool = True
) -> list[PhiRow]:
    """Φ for the engine's topologies at m (default 100) and Q = 1..4 (the paper uses Q = 4).

    Static topologies use Definition 4.1's λ. Time-varying schemes have no
    single λ; their rows use λ_eff = √ρ_ms (the per-step mean-square
    contraction, :func:`theory.spectral.mean_square_contraction`), marked in
    ``lam_kind``: a heuristic stand-in, not a quantity the theorem is about.
    """
    from .spectral import STATIC, TIME_VARYING, mean_square_contraction, static_spectrum

    todo = [(n, "SLEM") for n in (names or STATIC)]
    if time_varying and names is None:
        todo += [(n, "sqrt(rho_ms)") for n in TIME_VARYING]
    rows = []
    for name, kind in todo:
        if kind == "SLEM":
            lv = static_spectrum(name, m_value, seed).lam
        else:
            lv = float(np.sqrt(mean_square_contraction(name, m_value, draws=100, seed=seed).rho_ms))
        lv = 0.0 if lv < 1e-12 else lv  # the complete graph's λ is 0 up to rounding
        with np.errstate(divide="ignore"):
            rows.append(
                PhiRow(
                    name=name,
                    m=m_value,
                    lam=lv,
                    values=tuple(float(phi(lv, m_value, q)) for q in qs),
                    term1=tuple(float(_t1_np(lv, m_value, q)) for q in qs),
                    term2=tuple(float(_t2_np(lv, m_value, q)) for q in qs),
                    q_for_1_1=gossip_steps_needed(lv, m_value, 1.1),
                    lam_kind=kind,
                )
            )
    return rows
