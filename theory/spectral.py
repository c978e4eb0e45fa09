"""Spectral analysis of the mixing matrices the engine actually runs.

DFedSAM (Shi et al., ICML 2023) measures a topology by Definition 4.1's

.. math::

    \\lambda = \\max\\{|\\lambda_2(W)|, |\\lambda_m(W)|\\}, \\qquad
    \\text{spectral gap } 1 - \\lambda,

and every bound of Section 4 depends on the topology only through λ. This
module computes λ for the very W that :mod:`dfl_core.topology` builds
(numerically), gives closed forms in m as sympy expressions where they exist
(with their series in 1/m), says where there is no closed form and what the
numbers show instead, and measures the time-varying random schemes of
Appendix B.4 by their mean-square contraction per gossip step.

Nothing here is asserted: every closed form is checked against numpy
eigenvalues by :func:`check_closed_forms` (and by the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp

from dfl_core.topology import TOPOLOGIES, TopologyError, make_topology

__all__ = [
    "m_sym",
    "slem",
    "StaticSpectrum",
    "static_spectrum",
    "spectral_table",
    "CLOSED_FORMS",
    "closed_form_lambda",
    "gap_series",
    "check_closed_forms",
    "grid_gap_scaling",
    "max_degree_grid_lambda",
    "TimeVaryingStats",
    "mean_square_contraction",
    "as_coded_exact",
    "lemma_d1_static",
    "lemma_d1_product",
    "definition_4_1",
    "STATIC",
    "TIME_VARYING",
]

m_sym = sp.Symbol("m", positive=True, integer=True)


def _is_time_varying(name: str) -> bool:
    try:
        return bool(make_topology(name, 16).time_varying)
    except TopologyError:  # a random static graph that happened to be disconnected at m = 16
        return False


# Engine names, split by kind. "full" is an alias of "complete": analysed once.
TIME_VARYING = tuple(n for n in TOPOLOGIES if _is_time_varying(n))
STATIC = tuple(n for n in TOPOLOGIES if n not in TIME_VARYING and n != "full")


def _P(m: int) -> np.ndarray:
    """P = 11ᵀ/m, the exact-average operator (DFedSAM Lemma D.1)."""
    return np.full((m, m), 1.0 / m)


def slem(W: np.ndarray) -> float:
    """Second-largest eigenvalue modulus, computed here (independently of the engine's ``lam``)."""
    ev = np.linalg.eigvalsh(W) if np.allclose(W, W.T, atol=1e-14) else np.linalg.eigvals(W)
    mod = np.sort(np.abs(ev))[::-1]
    return float(mod[1]) if len(mod) > 1 else 0.0


# --------------------------------------------------------------------------- #
# Static topologies: numbers
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class StaticSpectrum:
    """λ, gap and Definition 4.1 status of one engine topology at one m.

    ``op_norm`` is ‖W − 11ᵀ/m‖₂, the one-step contraction Lemma D.1 needs;
    it equals λ when W is normal and doubly stochastic, and can exceed it otherwise.
    """

    name: str
    m: int
    lam: float  # engine's M.lam (SLEM)
    gap: float  # 1 - lam
    op_norm: float  # ||W - P||_2
    symmetric: bool
    doubly_stochastic: bool
    directed: bool
    definition_4_1: dict = field(default_factory=dict)
    closed_form: float | None = None  # closed form evaluated at m, if one applies


def definition_4_1(W: np.ndarray, tol: float = 1e-10) -> dict[str, bool]:
    """DFedSAM Definition 4.1 (i)-(iv), checked independently of the engine.

    (i) graph: W ≥ 0 (the support *is* the graph, so only non-negativity and a
    positive diagonal can be checked); (ii) W = Wᵀ; (iii) null(I − W) = span(1),
    i.e. W1 = 1 and rank(I − W) = m − 1; (iv) I ⪰ W ≻ −I, which needs (ii) to
    make sense, so it is False for a non-symmetric W. Also reports the column
    sums (doubly stochastic), which the proofs use through WP = PW = P (eq. 11).
    """
    m = W.shape[0]
    sym = bool(np.abs(W - W.T).max() <= tol)
    ones = bool(np.abs(W.sum(1) - 1).max() <= tol)
    rank = int(np.linalg.matrix_rank(np.eye(m) - W, tol=1e-9))
    if sym:
        ev = np.linalg.eigvalsh(W)
        spectral = bool(ev.max() <= 1 + 1e-9 and ev.min() > -1 + 1e-9)
    else:
        spectral = False
    return {
        "graph": bool((W >= -tol).all() and (np.diag(W) > 0).all()),
        "symmetry": sym,
        "null_space": bool(ones and rank == m - 1),
        "spectral": spectral,
        "doubly_stochastic": bool(ones and np.abs(W.sum(0) - 1).max() <= tol),
    }


def static_spectrum(name: str, m: int = 100, seed: int = 0, **options) -> StaticSpectrum:
    """λ (Definition 4.1), the gap, ‖W − P‖ and Definition 4.1 for the engine's W."""
    M = make_topology(name, m, seed=seed, **options).matrix(0)
    W = M.W
    cf = closed_form_lambda(name, m)
    return StaticSpectrum(
        name=name,
        m=m,
        lam=float(M.lam),
        gap=float(M.spectral_gap),
        op_norm=float(np.linalg.norm(W - _P(m), 2)),
        symmetric=bool(M.symmetric),
        doubly_stochastic=bool(M.doubly_stochastic),
        directed=bool(M.directed),
        definition_4_1=definition_4_1(W),
        closed_form=None if cf is None else float(cf),
    )


@lru_cache(maxsize=None)
def spectral_table(m: int = 100, seed: int = 0) -> tuple[StaticSpectrum, ...]:
    """:func:`static_spectrum` for every static engine topology (default options).

    Topologies the engine refuses at this m (a grid or torus of a prime m) are left out.
    """
    out = []
    for n in STATIC:
        try:
            out.append(static_spectrum(n, m, seed))
        except TopologyError:
            continue
    return tuple(out)


# --------------------------------------------------------------------------- #
# Closed forms in m
# --------------------------------------------------------------------------- #

_tau = sp.ceiling(sp.log(m_sym, 2))  # number of exponential-graph offsets 2^0..2^(tau-1)

#: name -> (sympy λ(m), the m for which it holds, how it was obtained)
CLOSED_FORMS: dict[str, tuple[sp.Expr, str, str]] = {
    "ring": (
        (1 + 2 * sp.cos(2 * sp.pi / m_sym)) / 3,
        "m >= 3",
        "circulant, MH weights 1/3: eigenvalues (1 + 2cos(2πk/m))/3; k = 1 has the largest "
        "modulus (the most negative one is >= -1/3, and the k = 1 one is >= 1/3 from m = 4 on)",
    ),
    "torus": (
        (3 + 2 * sp.cos(2 * sp.pi / sp.ceiling(sp.sqrt(m_sym)))) / 5,
        "m = n^2, n >= 4 (square torus; for r x c in general replace n by c = max(r, c) >= 4, r >= 3)",
        "4-regular, so MH weights are uniform 1/5 and W = (I + A_r ⊕ A_c)/5 is a Kronecker sum: "
        "eigenvalues (1 + 2cos(2πj/r) + 2cos(2πk/c))/5",
    ),
    "complete": (sp.Integer(0), "m >= 1", "W = 11ᵀ/m has eigenvalues 1, 0, ..., 0"),
    "star": (
        1 - 1 / m_sym,
        "m >= 3",
        "MH weights: leaves keep 1 - 1/m; eigenvalues 1, 1 - 1/m (m - 2 times), 0 (trace argument)",
    ),
    "exponential": (
        (_tau - 1) / (_tau + 1),
        "m even, m >= 4 (Ying et al. 2021 state it for m a power of 2)",
        "circulant: μ_j = (1/(τ+1)) Σ_{s∈{0,1,2,4,...,2^(τ-1)}} e^{-2πijs/m}; μ_{m/2} = (τ-1)/(τ+1) "
        "and it is the SLEM for even m (checked numerically, see check_closed_forms)",
    ),
}


def closed_form_lambda(name: str, m: int) -> sp.Expr | None:
    """The closed-form λ of ``name`` at this m (a sympy number), or None if none applies.

    Grid (MH), exponential-mh, erdos-renyi, random-regular and the
    time-varying schemes have none: see :func:`grid_gap_scaling` and
    :func:`exponential_mh_lambda` for what is known instead.
    """
    if name == "full":
        name = "complete"
    if name not in CLOSED_FORMS:
        if name == "exponential-mh":
            return exponential_mh_lambda(m)
        return None
    expr, _, _ = CLOSED_FORMS[name]
    if name == "ring" and m < 3:
        return None
    if name == "star" and m < 3:
        return None
    if name == "exponential" and (m % 2 or m < 4):
        return None
    if name == "torus":
        n = math.isqrt(m)
        if n * n != m or n < 4:
            return None
    return expr.subs(m_sym, m)


def exponential_mh_lambda(m: int) -> sp.Expr | None:
    """λ of the undirected exponential graph with MH weights, as the DFT value at j = m/2.

    The graph is circulant with connection set S = {±2^k mod m}. When the
    2τ offsets are distinct (no 2^a + 2^b = m) every node has degree 2τ, MH
    weights are 1/(2τ+1), and μ_{m/2} = (1 − 2 + 2(τ−1))/(2τ+1) = (2τ−3)/(2τ+1)
    (only ±1 are odd). For m = 2^τ the offset 2^(τ−1) is its own negative,
    degree 2τ−1, μ_{m/2} = (τ−2)/τ. Other m: None (no simple form).
    """
    if m < 4 or m % 2:
        return None
    tau = math.ceil(math.log2(m))
    offs = [2**k for k in range(tau)]
    if m == 2**tau:
        return sp.Rational(tau - 2, tau)
    S = {o % m for o in offs} | {(-o) % m for o in offs}
    if len(S) != 2 * tau:
        return None
    return sp.Rational(2 * tau - 3, 2 * tau + 1)


def gap_series(name: str, order: int = 6) -> sp.Expr | None:
    """The spectral gap 1 − λ(m) as a series in 1/m (sympy ``series``), or None.

    ring: 4π²/(3m²) − 4π⁴/(9m⁴) + …; torus (m = n²): 4π²/(5m) + …;
    star: exactly 1/m; exponential: 2/(τ+1) with τ = ⌈log₂ m⌉ (no power series).
    """
    if name not in ("ring", "torus", "star"):
        return None
    x = sp.Symbol("x", positive=True)  # x = 1/m
    if name == "torus":
        # drop the ceiling: on the valid m = n^2 the expression is exact without it
        lam = (3 + 2 * sp.cos(2 * sp.pi * sp.sqrt(x))) / 5
    else:
        lam = CLOSED_FORMS[name][0].subs(m_sym, 1 / x)
    return sp.series(1 - lam, x, 0, order).removeO().subs(x, 1 / m_sym)


def check_closed_forms(ms=(4, 5, 6, 9, 16, 25, 36, 49, 64, 100, 128, 144, 256)) -> list[dict]:
    """Every applicable closed form against the engine's numerically computed λ.

    Returns one row per (topology, m) with ``numeric``, ``closed`` and ``abs_err``;
    also checks independently with :func:`slem` (numpy on the raw W).
    """
    rows = []
    for name in ("ring", "torus", "complete", "star", "exponential", "exponential-mh"):
        for m in ms:
            try:
                M = make_topology(name, m).matrix(0)
            except Exception:  # e.g. torus of a prime m: not built by the engine
                continue
            cf = closed_form_lambda(name, m)
            if cf is None:
                continue
            closed = float(cf)
            rows.append(
                dict(name=name, m=m, numeric=M.lam, independent=slem(M.W), closed=closed, abs_err=abs(M.lam - closed))
            )
    return rows


# --------------------------------------------------------------------------- #
# The grid: no closed form with MH weights
# --------------------------------------------------------------------------- #


def max_degree_grid_lambda(rows: int, cols: int) -> float:
    """λ of the r×c grid with *max-degree* weights 1/5 (not the engine's MH weights).

    W = I − (L_r ⊕ L_c)/5 with path Laplacians L_n (eigenvalues 2 − 2cos(πk/n)),
    a Kronecker sum, so the eigenvalues are 1 − (4 − 2cos(πj/r) − 2cos(πk/c))/5.
    The engine's MH grid differs on the border (edges between degree-3 or -2
    nodes get 1/4, not 1/5), which destroys the product structure; this is the
    closest closed form, used to explain the MH grid's asymptotics.
    """
    j = np.arange(rows)[:, None]
    k = np.arange(cols)[None, :]
    ev = 1 - (4 - 2 * np.cos(np.pi * j / rows) - 2 * np.cos(np.pi * k / cols)) / 5
    mods = np.sort(np.abs(ev.ravel()))[::-1]
    return float(mods[1])


def grid_gap_scaling(sides=(4, 6, 8, 12, 16, 24, 32)) -> list[dict]:
    """Gap of the engine's MH grid on n×n, scaled by m and by m·log₂ m.

    If DFedSAM §3.1's "λ = O(1/(m log₂ m))" were a statement about the gap,
    gap·m·log₂ m would stay bounded; the numbers show gap·m → π²/5 ≈ 1.974
    instead (the interior weights are 1/5; the max-degree grid's gap is
    (2 − 2cos(π/n))/5 ≈ π²/(5m) exactly), so the gap is Θ(1/m).
    """
    out = []
    for n in sides:
        m = n * n
        gap = make_topology("grid", m).matrix(0).spectral_gap
        out.append(
            dict(
                n=n,
                m=m,
                gap=gap,
                gap_times_m=gap * m,
                gap_times_m_log2m=gap * m * math.log2(m),
                max_degree_gap=1 - max_degree_grid_lambda(n, n),
            )
        )
    return out


# --------------------------------------------------------------------------- #
# Time-varying schemes: mean-square contraction per gossip step
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class TimeVaryingStats:
    """Per-gossip-step behaviour of a random W, estimated over ``draws`` draws.

    ``rho_ms`` = sup over x ⊥ 1 of E‖(I−P)Wx‖² / ‖x‖², estimated by the
    trace of E[Wᵀ(I−P)W]/(m−1), which is exact when the scheme is
    exchangeable (invariant under relabelling the clients, true of both
    engine schemes), so E[Wᵀ(I−P)W] = a·I + b·11ᵀ; ``rho_ms_spectral`` is
    λ_max of the averaged matrix on 1^⊥ (biased upward by sampling noise).
    √rho_ms is the number to compare with a static λ (for a static
    symmetric W, rho_ms = λ²). ``drift`` = sup over x ⊥ 1 of
    E(x̄⁺ − x̄)² / ‖x‖²: 0 for doubly stochastic W, > 0 for the as-coded one.
    """

    name: str
    m: int
    draws: int
    rho_ms: float
    rho_ms_se: float
    rho_ms_spectral: float
    mean_slem: float
    max_slem: float
    drift: float
    mean_abs_drift_bias: float  # |E[column sums] - 1| averaged: 0 if the mean is preserved on average
    definition_4_1_all: dict


def mean_square_contraction(name: str, m: int = 100, draws: int = 200, seed: int = 0, **options) -> TimeVaryingStats:
    """Monte Carlo over ``draws`` rounds of the engine's time-varying W (step 0 of each round).

    Per gossip step. The engine draws a fresh W for every (round, step), so a
    round of Q steps contracts by ρ_ms^Q in mean square: for x ⊥ 1,
    (I−P)W₂W₁x = (I−P)W₂(I−P)W₁x (W₂1 = 1), and E[Wᵀ(I−P)W] = ρ_ms·I on 1^⊥.
    """
    topo = make_topology(name, m, seed=seed, **options)
    P = _P(m)
    IP = np.eye(m) - P
    acc = np.zeros((m, m))
    traces, slems, drifts = [], [], []
    colsum = np.zeros(m)
    d41 = None
    for r in range(draws):
        W = topo.matrix(r, 0).W
        B = IP @ W  # (I-P)W: the disagreement after one step
        acc += B.T @ B
        traces.append(np.sum(B * B) / (m - 1))
        slems.append(slem(W))
        v = (W.sum(0) - 1) / m  # x̄⁺ − x̄ = vᵀx
        drifts.append(float(v @ v) / (m - 1))
        colsum += W.sum(0)
        d = definition_4_1(W)
        d41 = d if d41 is None else {k: d41[k] and d[k] for k in d}
    acc /= draws
    ev = np.linalg.eigvalsh(IP @ acc @ IP)
    tr = np.array(traces)
    return TimeVaryingStats(
        name=name,
        m=m,
        draws=draws,
        rho_ms=float(tr.mean()),
        rho_ms_se=float(tr.std(ddof=1) / math.sqrt(draws)),
        rho_ms_spectral=float(ev.max()),
        mean_slem=float(np.mean(slems)),
        max_slem=float(np.max(slems)),
        drift=float(np.mean(drifts)),
        mean_abs_drift_bias=float(np.abs(colsum / draws - 1).mean()),
        definition_4_1_all=d41,
    )


def as_coded_exact(m, s=10) -> dict[str, sp.Expr]:
    """Exact mean-square contraction and mean drift of the row-stochastic "as coded" W.

    Row i is (e_i + Σ_{j∈S_i} e_j)/(s+1) with S_i a uniform s-subset of the
    other clients (reference-code.md §2, DisPFL ``_benefit_choose``). With
    a = 1/(s+1) and N_i = #{k : i ∈ S_k} ~ Binomial(m−1, s/(m−1)),
    ‖W‖_F² = m·a and column sums c_i = a(1 + N_i), so by exchangeability

    .. math::

        \\rho_{ms} = \\frac{E\\|(I-P)W\\|_F^2}{m-1} = \\frac{m a - 1 - a^2 \\operatorname{Var} N}{m-1},
        \\qquad
        \\text{drift} = \\frac{a^2 \\operatorname{Var} N}{m(m-1)}.

    E[c_i] = 1, so the average is preserved *in expectation* only.
    """
    m = sp.sympify(m)
    s = sp.sympify(s)
    a = 1 / (s + 1)
    p = s / (m - 1)
    var_n = (m - 1) * p * (1 - p)
    rho = (m * a - 1 - a**2 * var_n) / (m - 1)
    drift = a**2 * var_n / (m * (m - 1))
    return {"rho_ms": sp.simplify(rho), "drift": sp.simplify(drift), "var_N": sp.simplify(var_n)}


# --------------------------------------------------------------------------- #
# Lemma D.1: ||W^t - P|| <= λ^t
# --------------------------------------------------------------------------- #


def lemma_d1_static(W: np.ndarray, t_max: int = 50) -> dict:
    """‖W^t − P‖₂ against λ^t for t = 1..t_max (DFedSAM Lemma D.1, from Lian et al. 2017).

    Returns the worst ratio ‖W^t − P‖/λ^t (≤ 1 + 1e-9 means the lemma holds on
    this range), the first t where it fails, and ‖W^{t_max} − P‖. For a
    row-stochastic W with 1ᵀW ≠ 1ᵀ, W^t → 1πᵀ ≠ P, so ‖W^t − P‖ stays bounded
    away from 0 while λ^t → 0.
    """
    m = W.shape[0]
    P = _P(m)
    lam = slem(W)
    lam = 0.0 if lam < 1e-12 else lam  # the complete graph: 0 up to rounding
    Wt = np.eye(m)
    worst, first_fail, norms = 0.0, None, []
    for t in range(1, t_max + 1):
        Wt = Wt @ W
        nrm = float(np.linalg.norm(Wt - P, 2))
        norms.append(nrm)
        bound = lam**t
        if bound > 1e-12:  # below that, compare absolutely: rounding noise is ~1e-15
            worst = max(worst, nrm / bound)
        if first_fail is None and nrm > bound * (1 + 1e-9) + 1e-12:
            first_fail = t
    return dict(lam=lam, worst_ratio=worst, first_fail=first_fail, final_norm=norms[-1], norms=norms)


def lemma_d1_product(name: str, m: int = 100, t_max: int = 30, seed: int = 0, **options) -> dict:
    """The time-varying version: ‖W_t⋯W_1 − P‖ against Π_s λ(W_s) over the engine's draws.

    For symmetric doubly stochastic draws (W_s − P)(W_r − P) = W_sW_r − P, so
    the product bound holds; for the row-stochastic draws it does not.
    """
    topo = make_topology(name, m, seed=seed, **options)
    P = _P(m)
    prod = np.eye(m)
    bound = 1.0
    worst, first_fail = 0.0, None
    for t in range(1, t_max + 1):
        W = topo.matrix(t, 0).W
        prod = W @ prod
        bound *= slem(W)
        nrm = float(np.linalg.norm(prod - P, 2))
        worst = max(worst, nrm / bound if bound > 1e-300 else math.inf)
        if first_fail is None and nrm > bound * (1 + 1e-9) + 1e-12:
            first_fail = t
    return dict(worst_ratio=worst, first_fail=first_fail, final_norm=nrm, final_bound=bound)
