"""Problems whose constants (L, σ_l, σ_g, β) are known, and what to measure on them.

DFedSAM's bounds (Theorem 4.5) need L (Assumption 4.3), σ_l and σ_g
(Assumption 4.4), β (Definition 4.2) and f(x̄¹) − f*. For a neural network
none of these is known; for the problems below they are, exactly or as a
stated upper bound (``ProblemConstants.exact`` says which):

* :class:`ShiftedQuadratics`, f_i(x) = ½(x − b_i)ᵀA(x − b_i) with a shared
  Hessian A: ∇f_i − ∇f = −A(b_i − b̄) does not depend on x, so β and σ_g are
  exact, and so is σ_l for minibatch sampling of per-sample shifts b_ij.
* :class:`DiagonalQuadratics`, f_i(x) = ½(x − b_i)ᵀdiag(h_i)(x − b_i), one
  Hessian per client: the testbed where the topology moves the average model
  (with a shared Hessian it cannot); :func:`run_decentralized` runs D-SGD,
  DFedAvg and DFedSAM on it and records x̄ᵗ and the consensus distance per round.
* :class:`LeastSquares`: L exact; β, σ_g finite only if all clients share
  the Hessian XᵢᵀXᵢ/nᵢ (otherwise ∇f_i − ∇f grows with ‖x‖ and the
  assumptions fail on ℝ^d: reported as ``inf``).
* :class:`LogisticRegression`: L ≤ maxᵢ ‖Xᵢ‖²/(4nᵢ) + μ and bounded
  gradients give upper bounds for β, σ_g, σ_l.
* :func:`softmax_regression_constants`: the engine's ``"linear"`` model with
  cross-entropy (multinomial logistic regression), L ≤ maxᵢ ‖X̃ᵢ‖²/(2nᵢ) and
  upper bounds for β, σ_g, σ_l; f* is unknown, but f* ≥ 0 (``f_lower``).
  :mod:`theory.measured` runs ``dfl_core`` on it.

All arrays are numpy; a client's parameters are row i of an ``(m, d)`` array,
as in ``dfl_core``. :func:`gossip_contraction`, :func:`consensus_distance`
and :func:`reference_dfedsam` are the measurement side: the book's theory
chapter puts them next to :mod:`theory.bounds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = [
    "ProblemConstants",
    "ShiftedQuadratics",
    "shifted_quadratics",
    "DiagonalQuadratics",
    "diagonal_quadratics",
    "run_decentralized",
    "LeastSquares",
    "LogisticRegression",
    "softmax_regression_constants",
    "minibatch_variance_factor",
    "consensus_distance",
    "gossip_contraction",
    "reference_dfedsam",
]


@dataclass(frozen=True)
class ProblemConstants:
    """The constants of DFedSAM Assumptions 4.3/4.4 and Definition 4.2 for one problem."""

    L: float
    sigma_l: float
    sigma_g: float
    beta: float
    f_star: float | None
    exact: dict = field(default_factory=dict)  # name -> True (exact) / False (upper bound)
    note: str = ""
    #: a lower bound on f* when f* itself is unknown (``f_star`` None): Δ = f(x̄¹) − f_lower
    #: is then an upper bound on Theorem 4.5's f(x̄¹) − f*, so the bound computed with it stays valid
    f_lower: float | None = None


def minibatch_variance_factor(n: int, batch: int | None, replace: bool = False) -> float:
    """Variance of a size-``batch`` sample mean relative to one sample's variance.

    Without replacement from n items: (n − B)/(B(n − 1)) (finite-population
    correction); with replacement: 1/B; full batch (``batch`` None or ≥ n
    without replacement): 0.
    """
    if batch is None or (not replace and batch >= n):
        return 0.0
    if replace:
        return 1.0 / batch
    return (n - batch) / (batch * (n - 1))


# --------------------------------------------------------------------------- #
# Shifted quadratics with a shared Hessian
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, eq=False)
class ShiftedQuadratics:
    """F_i(x; j) = ½(x − b_ij)ᵀA(x − b_ij), j uniform over client i's n samples.

    f_i(x) = (1/n)Σ_j F_i(x; j) = ½(x − b_i)ᵀA(x − b_i) + const, b_i = mean_j b_ij.
    """

    A: np.ndarray  # (d, d) symmetric positive definite
    b: np.ndarray  # (m, n, d) per-sample shifts
    batch: int | None = None  # None: full batch, σ_l = 0
    replace: bool = False

    @property
    def m(self) -> int:
        return self.b.shape[0]

    @property
    def centers(self) -> np.ndarray:
        """b_i, shape (m, d)."""
        return self.b.mean(1)

    def f(self, x: np.ndarray) -> float:
        """f(x) = (1/m) Σ_i f_i(x), including the per-sample constant (so f* is exact)."""
        r = x[None, None, :] - self.b  # (m, n, d)
        return float(0.5 * np.einsum("mnd,de,mne->", r, self.A, r) / (self.b.shape[0] * self.b.shape[1]))

    def grad_f(self, x: np.ndarray) -> np.ndarray:
        """∇f(x) = A(x − b̄)."""
        return self.A @ (x - self.centers.mean(0))

    def local_grads(self, X: np.ndarray) -> np.ndarray:
        """∇f_i(x_i) for every client, X of shape (m, d) → (m, d)."""
        return (X - self.centers) @ self.A  # A symmetric

    def stochastic_grads(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """∇F_i(x_i; ξ_i) with ξ_i a minibatch of ``batch`` samples (full batch if None)."""
        m, n, _ = self.b.shape
        if self.batch is None:
            return self.local_grads(X)
        idx = (
            rng.integers(0, n, size=(m, self.batch))
            if self.replace
            else np.argsort(rng.random((m, n)), axis=1)[:, : self.batch]
        )
        bb = np.take_along_axis(self.b, idx[:, :, None], axis=1).mean(1)  # (m, d)
        return (X - bb) @ self.A

    def constants(self) -> ProblemConstants:
        """L = λ_max(A); β = maxᵢ‖A(bᵢ − b̄)‖; σ_g² = (1/m)Σᵢ‖A(bᵢ − b̄)‖²; σ_l from the b_ij; all exact.

        ∇F_i(x; j) − ∇f_i(x) = −A(b_ij − b_i) does not depend on x, so the
        sup over x in Assumption 4.4 is attained everywhere.
        """
        A, b = self.A, self.b
        m, n, _ = b.shape
        c = self.centers
        dev = (c - c.mean(0)) @ A  # (m, d): ∇f − ∇f_i, constant in x
        het = np.linalg.norm(dev, axis=1)
        per = np.einsum("mnd,de->mne", b - c[:, None, :], A)  # per-sample gradient noise
        one_sample_var = (per**2).sum(-1).mean(1)  # (m,)
        sl2 = minibatch_variance_factor(n, self.batch, self.replace) * one_sample_var.max()
        xs = c.mean(0)
        return ProblemConstants(
            L=float(np.linalg.eigvalsh(A).max()),
            sigma_l=float(math.sqrt(sl2)),
            sigma_g=float(math.sqrt((het**2).mean())),
            beta=float(het.max()),
            f_star=self.f(xs),
            exact={"L": True, "sigma_l": True, "sigma_g": True, "beta": True, "f_star": True},
            note="shared Hessian: gradient differences are constant in x",
        )


def shifted_quadratics(
    m: int = 16,
    d: int = 10,
    n: int = 1,
    spread: float = 1.0,
    noise: float = 0.0,
    L: float = 1.0,
    cond: float = 10.0,
    batch: int | None = None,
    seed: int = 0,
) -> ShiftedQuadratics:
    """A random instance: A with eigenvalues log-spaced in [L/cond, L], centers with std ``spread``.

    Per-sample shifts are b_i + ``noise``·ξ_ij, recentred so their mean is exactly b_i.
    """
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A = (U * np.geomspace(L / cond, L, d)) @ U.T
    A = (A + A.T) / 2
    centers = spread * rng.standard_normal((m, d))
    eps = noise * rng.standard_normal((m, n, d))
    eps -= eps.mean(1, keepdims=True)
    return ShiftedQuadratics(A=A, b=centers[:, None, :] + eps, batch=batch)


# --------------------------------------------------------------------------- #
# Quadratics with one diagonal Hessian per client
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, eq=False)
class DiagonalQuadratics:
    """f_i(x) = ½(x − b_i)ᵀ diag(h_i)(x − b_i): client i has its own diagonal Hessian H_i = diag(h_i).

    Full batch (σ_l = 0). Why it exists: with one Hessian shared by every client
    (:class:`ShiftedQuadratics`, or ``h`` with equal rows here) the mean of the
    local gradients is ∇f at the mean, (1/m)Σᵢ A(xᵢ − bᵢ) = A(x̄ − b̄), so a
    gossip-and-gradient method moves x̄ exactly as if the clients agreed: the
    average model's path cannot depend on the topology. With different Hessians

        (1/m)Σᵢ Hᵢ(xᵢ − bᵢ) = ∇f(x̄) + (1/m)Σᵢ (Hᵢ − H̄)(xᵢ − x̄),

    and the clients' deviations xᵢ − x̄, which the topology controls, move the
    average (the first-order version of the expansion behind Zhu et al. 2023).
    DFedSAM is the exception to the shared case: its perturbation ρg/‖g‖ is not
    linear in the model, so the mean of the perturbed gradients depends on the
    deviations even with one Hessian (by an amount of order ηρL per step; measured in the tests).
    """

    h: np.ndarray  # (m, d) positive diagonal Hessians
    b: np.ndarray  # (m, d) client minimisers

    def __post_init__(self):
        if self.h.shape != self.b.shape or self.h.ndim != 2:
            raise ValueError(f"h and b must both have shape (m, d); got {self.h.shape} and {self.b.shape}")
        if not (self.h > 0).all():
            raise ValueError(f"every Hessian entry must be > 0; the smallest is {self.h.min()!r}")

    @property
    def m(self) -> int:
        return self.h.shape[0]

    @property
    def shared_hessian(self) -> bool:
        return bool(np.all(self.h == self.h[0]))

    @property
    def minimizer(self) -> np.ndarray:
        """x* = H̄⁻¹ (1/m)Σᵢ Hᵢbᵢ, H̄ = (1/m)Σᵢ Hᵢ (everything diagonal)."""
        return (self.h * self.b).mean(0) / self.h.mean(0)

    def f(self, x: np.ndarray) -> float:
        """f(x) = (1/m)Σᵢ f_i(x)."""
        return float(0.5 * (self.h * (x[None, :] - self.b) ** 2).sum(1).mean())

    def grad_f(self, x: np.ndarray) -> np.ndarray:
        """∇f(x) = (1/m)Σᵢ Hᵢ(x − bᵢ)."""
        return (self.h * (x[None, :] - self.b)).mean(0)

    def local_grads(self, X: np.ndarray) -> np.ndarray:
        """∇f_i(x_i) = Hᵢ(xᵢ − bᵢ) for every client, X of shape (m, d)."""
        return self.h * (X - self.b)

    def constants(self) -> ProblemConstants:
        """L = maxᵢ max hᵢ and f* exact; σ_l = 0 (full batch); σ_g, β exact if the Hessians are shared, else ∞.

        ∇f_i(x) − ∇f(x) = (Hᵢ − H̄)x − (Hᵢbᵢ − mean Hⱼbⱼ) grows with ‖x‖ unless
        Hᵢ = H̄, so Assumption 4.4 and Definition 4.2 fail on ℝ^d then: Theorem 4.5
        does not cover the heterogeneous case (as :class:`LeastSquares`).
        """
        shared = self.shared_hessian
        if shared:
            het = np.linalg.norm(self.h * (self.b - self.b.mean(0)), axis=1)
            beta_v, sg = float(het.max()), float(math.sqrt((het**2).mean()))
        else:
            beta_v = sg = math.inf
        return ProblemConstants(
            L=float(self.h.max()),
            sigma_l=0.0,
            sigma_g=sg,
            beta=beta_v,
            f_star=self.f(self.minimizer),
            exact={"L": True, "sigma_l": True, "sigma_g": shared, "beta": shared, "f_star": True},
            note="full batch; sigma_g, beta finite only with a shared Hessian",
        )


def diagonal_quadratics(
    m: int = 16,
    d: int = 10,
    spread: float = 1.0,
    L: float = 1.0,
    cond: float = 10.0,
    shared_hessian: bool = False,
    seed: int = 0,
) -> DiagonalQuadratics:
    """A random instance: Hessian entries log-uniform in [L/cond, L], minimisers with std ``spread``.

    ``shared_hessian=True`` draws one diagonal and gives it to every client (then the
    problem is a :class:`ShiftedQuadratics` with a diagonal A); otherwise each client
    draws its own. The minimisers are drawn from the same stream either way, so the two
    instances of one seed differ only in their Hessians.
    """
    if m < 1 or d < 1:
        raise ValueError(f"m and d must be >= 1, got m={m}, d={d}")
    if not (L > 0 and cond >= 1):
        raise ValueError(f"need L > 0 and cond >= 1, got L={L}, cond={cond}")
    rng = np.random.default_rng(seed)
    b = spread * rng.standard_normal((m, d))
    h = np.exp(rng.uniform(np.log(L / cond), np.log(L), size=(m, d)))
    if shared_hessian:
        h = np.tile(h[0], (m, 1))
    h[:, np.argmax(h.max(0))] *= L / h.max()  # the largest entry is exactly L (a rescaled column keeps sharing)
    return DiagonalQuadratics(h=h, b=b)


# --------------------------------------------------------------------------- #
# Least squares and logistic regression
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, eq=False)
class LeastSquares:
    """f_i(x) = ‖Xᵢx − yᵢ‖²/(2nᵢ), equal n per client; ``X`` (m, n, d), ``y`` (m, n)."""

    X: np.ndarray
    y: np.ndarray

    def local_grads(self, W: np.ndarray) -> np.ndarray:
        """∇f_i(w_i) = Xᵢᵀ(Xᵢwᵢ − yᵢ)/n, for W of shape (m, d)."""
        r = np.einsum("mnd,md->mn", self.X, W) - self.y
        return np.einsum("mnd,mn->md", self.X, r) / self.X.shape[1]

    def constants(self) -> ProblemConstants:
        """L = maxᵢ λ_max(Hᵢ) exactly. β, σ_g exact if all Hᵢ = XᵢᵀXᵢ/n are equal, else ∞.

        ∇f_i − ∇f = (Hᵢ − H̄)x − (gᵢ − ḡ) with gᵢ = Xᵢᵀyᵢ/n: unbounded over
        ℝ^d unless Hᵢ = H̄, so Definition 4.2 / Assumption 4.4 fail then.
        σ_l is reported for full-batch gradients only (0): per-sample gradient
        noise of least squares also grows with ‖x‖.
        """
        m, n, _ = self.X.shape
        H = np.einsum("mnd,mne->mde", self.X, self.X) / n
        g = np.einsum("mnd,mn->md", self.X, self.y) / n
        Lc = float(max(np.linalg.eigvalsh(h).max() for h in H))
        shared = bool(np.allclose(H, H.mean(0), atol=1e-12 * max(1.0, Lc)))
        if shared:
            dev = g - g.mean(0)
            het = np.linalg.norm(dev, axis=1)
            beta_v, sg = float(het.max()), float(math.sqrt((het**2).mean()))
        else:
            beta_v = sg = math.inf
        Hbar, gbar = H.mean(0), g.mean(0)
        xs = np.linalg.lstsq(Hbar, gbar, rcond=None)[0]
        fstar = float(((np.einsum("mnd,d->mn", self.X, xs) - self.y) ** 2).mean() / 2)
        return ProblemConstants(
            L=Lc,
            sigma_l=0.0,
            sigma_g=sg,
            beta=beta_v,
            f_star=fstar,
            exact={"L": True, "sigma_l": True, "sigma_g": shared, "beta": shared, "f_star": True},
            note="full batch; beta, sigma_g finite only with a shared Hessian",
        )


@dataclass(frozen=True, eq=False)
class LogisticRegression:
    """f_i(x) = (1/n)Σⱼ log(1 + exp(−y_ij x_ijᵀx)) + (μ/2)‖x‖², labels y ∈ {−1, +1}."""

    X: np.ndarray  # (m, n, d)
    y: np.ndarray  # (m, n) in {-1, +1}
    mu: float = 0.0
    batch: int | None = None

    def local_grads(self, W: np.ndarray) -> np.ndarray:
        z = self.y * np.einsum("mnd,md->mn", self.X, W)
        s = 0.5 * (1 - np.tanh(z / 2))  # σ(−z), overflow-free
        return -np.einsum("mnd,mn->md", self.X, self.y * s) / self.X.shape[1] + self.mu * W

    def constants(self) -> ProblemConstants:
        """Upper bounds: the Hessian is (1/n)Σ σ(1−σ) x xᵀ + μI ≼ XᵀX/(4n) + μI.

        Per-sample gradients −y x σ(−y xᵀw) have norm ≤ ‖x‖, so with
        Gᵢ = (1/n)Σⱼ‖x_ij‖: ‖∇f_i − ∇f‖ ≤ (1 − 1/m)Gᵢ + (1/m)Σ_{k≠i}G_k (μ
        cancels), and σ_l² ≤ factor·maxᵢ (1/n)Σⱼ‖x_ij‖². f* is not computed.
        """
        m, n, _ = self.X.shape
        Lc = max(np.linalg.norm(self.X[i], 2) ** 2 for i in range(m)) / (4 * n) + self.mu
        norms = np.linalg.norm(self.X, axis=2)  # (m, n)
        G = norms.mean(1)
        bi = (1 - 1 / m) * G + (G.sum() - G) / m
        sl2 = minibatch_variance_factor(n, self.batch) * (norms**2).mean(1).max()
        return ProblemConstants(
            L=float(Lc),
            sigma_l=float(math.sqrt(sl2)),
            sigma_g=float(math.sqrt((bi**2).mean())),
            beta=float(bi.max()),
            f_star=None,
            exact={"L": False, "sigma_l": False, "sigma_g": False, "beta": False, "f_star": False},
            note="all upper bounds (L <= ||X_i||^2/(4n) + mu)",
        )


def softmax_regression_constants(
    X_parts: list[np.ndarray], num_classes: int, batch: int | None = None
) -> ProblemConstants:
    """Upper bounds on L, σ_l, σ_g, β for softmax regression (the engine's ``"linear"`` model).

    Client i holds inputs ``X_parts[i]`` (nᵢ samples of any shape, flattened
    to p features); the model is logits = W x + b with W (C, p), b (C,), and
    f_i is the mean cross-entropy over the client's nᵢ samples; f = (1/m)Σᵢ f_i
    (DFedSAM eq. (1): clients weigh equally, whatever their sizes). With
    x̃ = [x, 1] and V = [W | b] (C, p+1):

    * **L.** The per-sample Hessian w.r.t. vec(V) is A ⊗ x̃x̃ᵀ with
      A = diag(p) − ppᵀ, p = softmax(Vx̃). For a unit direction U (C, p+1),
      vec(U)ᵀ(A ⊗ x̃x̃ᵀ)vec(U) = (Ux̃)ᵀA(Ux̃) ≤ ‖A‖₂‖Ux̃‖², and
      uᵀAu = Var_p(u) ≤ (max u − min u)²/4 ≤ 1/2 for a unit u (Popoviciu), so
      ‖A‖₂ ≤ 1/2. Summing, Σⱼ‖Ux̃ⱼ‖² = tr(U X̃ᵀX̃ Uᵀ) ≤ λ_max(X̃ᵢᵀX̃ᵢ)‖U‖²_F:
      Lᵢ ≤ λ_max(X̃ᵢᵀX̃ᵢ)/(2nᵢ), L = maxᵢ Lᵢ (Assumption 4.3 asks it of every
      f_i). Torch flattens ``weight`` row by row and appends ``bias``: a fixed
      permutation of vec(V) (and A ⊗ x̃x̃ᵀ vs x̃x̃ᵀ ⊗ A is another), which
      leaves the Hessian's eigenvalues, hence L, unchanged. The bound is tight
      as a sup over V: with W = 0 and a bias giving two classes equal,
      dominant logits, p → (½, ½, 0, …) for every sample, A → a matrix with
      eigenvalue ½, and the Hessian A ⊗ X̃ᵢᵀX̃ᵢ/nᵢ has top eigenvalue → Lᵢ.
      Near p uniform (a small initial model) it is about (1/C)·λ_max(X̃ᵢᵀX̃ᵢ)/nᵢ.
    * **Gradients.** A per-sample gradient is (p − e_y)x̃ᵀ, of Frobenius norm
      ‖p − e_y‖‖x̃‖ ≤ √2‖x̃‖ (‖p − e_y‖² = (1−p_y)² + Σ_{c≠y}p_c² ≤ 2(1−p_y)²),
      and the sup over V is √2‖x̃‖. With Gᵢ = (√2/nᵢ)Σⱼ‖x̃ᵢⱼ‖ ≥ ‖∇f_i‖:
      ‖∇f_i − ∇f‖ ≤ (1 − 1/m)Gᵢ + (1/m)Σ_{k≠i}G_k =: bᵢ, so β ≤ maxᵢ bᵢ and
      σ_g² ≤ (1/m)Σᵢbᵢ² (as :class:`LogisticRegression`).
    * **σ_l.** A size-``batch`` minibatch drawn without replacement (the
      engine's marginal per step) has variance
      ``minibatch_variance_factor(nᵢ, batch)`` times the per-sample variance
      ≤ (2/nᵢ)Σⱼ‖x̃ᵢⱼ‖²; σ_l² ≤ the max over clients. 0 in full batch (``batch`` None).
    * **Optimum.** f* is unknown in general (``f_star`` None; the infimum may not even
      be attained on separable data). Cross-entropy is ≥ 0, so ``f_lower`` = 0:
      Δ = f(x̄¹) − 0 overestimates f(x̄¹) − f*, which keeps Theorem 4.5's bound valid.

    Every constant is an upper bound (``exact`` all False).
    """
    if num_classes < 2:
        raise ValueError(f"softmax regression needs num_classes >= 2, got {num_classes}")
    if len(X_parts) == 0 or any(len(x) == 0 for x in X_parts):
        raise ValueError("every client needs at least one sample")
    m = len(X_parts)
    parts = [np.asarray(x, np.float64).reshape(len(x), -1) for x in X_parts]
    tilde = [np.hstack([x, np.ones((len(x), 1))]) for x in parts]
    n = np.array([len(x) for x in tilde])
    Li = np.array([np.linalg.norm(xt, 2) ** 2 / (2 * len(xt)) for xt in tilde])
    norms = [np.linalg.norm(xt, axis=1) for xt in tilde]
    G = math.sqrt(2) * np.array([r.mean() for r in norms])
    bi = (1 - 1 / m) * G + (G.sum() - G) / m
    sl2 = max(minibatch_variance_factor(int(ni), batch) * 2 * float((r**2).mean()) for ni, r in zip(n, norms))
    return ProblemConstants(
        L=float(Li.max()),
        sigma_l=float(math.sqrt(sl2)),
        sigma_g=float(math.sqrt((bi**2).mean())),
        beta=float(bi.max()),
        f_star=None,
        exact={"L": False, "sigma_l": False, "sigma_g": False, "beta": False, "f_star": False},
        note=(
            f"softmax regression, C={num_classes}, p={parts[0].shape[1]}, m={m}, n_i in [{n.min()}, {n.max()}]; "
            "upper bounds (L <= max_i lambda_max(X~_i'X~_i)/(2 n_i)); f* unknown, f_lower = 0 "
            "(cross-entropy >= 0), so Delta = f(x1) - 0 is an upper bound"
        ),
        f_lower=0.0,
    )


# --------------------------------------------------------------------------- #
# Measurements
# --------------------------------------------------------------------------- #


def consensus_distance(X: np.ndarray) -> float:
    """(1/m) Σᵢ ‖xᵢ − x̄‖², the left side of DFedSAM Lemmas D.5/D.6 (same as dfl_core.metrics)."""
    X = np.asarray(X, float)
    return float(((X - X.mean(0)) ** 2).sum(1).mean())


def gossip_contraction(W: np.ndarray | Callable[[int], np.ndarray], steps: int = 60, d: int = 8, seed: int = 0) -> dict:
    """Pure gossip x ← Wx on random vectors: the measured consensus contraction per step.

    ``W`` is a matrix or a function step → matrix (time-varying). Returns the
    per-step ratios ‖(I−P)x_{s+1}‖/‖(I−P)x_s‖ (Frobenius over d columns),
    their geometric mean, the geometric mean of the last third (the
    asymptotic rate, which tends to λ for a static symmetric W and generic
    x), and the drift |x̄_steps − x̄_0| of the average, 0 for doubly stochastic W.
    """
    get = W if callable(W) else (lambda s: W)
    m = get(0).shape[0]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, d))
    mean0 = x.mean(0)
    dev0 = dev = np.linalg.norm(x - x.mean(0))
    ratios = []
    for s in range(steps):
        x = get(s) @ x
        new = np.linalg.norm(x - x.mean(0))
        ratios.append(new / dev)
        dev = new
        if new < 1e-10 * dev0:  # at the rounding floor further ratios are noise (the complete graph: step 1)
            break
    r = np.asarray(ratios)
    tail = r[len(r) - max(1, len(r) // 3) :]
    geo = lambda a: float(np.exp(np.mean(np.log(np.maximum(a, 1e-300))))) if a.min() > 0 else 0.0
    return {
        "ratios": r,
        "rate": geo(r),
        "asymptotic_rate": geo(tail),
        "mean_drift": float(np.linalg.norm(x.mean(0) - mean0)),
    }


def reference_dfedsam(
    problem,
    W: np.ndarray | Callable[[int], np.ndarray],
    K: int,
    T: int,
    eta: float,
    rho: float,
    Q: int = 1,
    x0: np.ndarray | None = None,
    seed: int = 0,
) -> dict:
    """A 20-line numpy DFedSAM / DFedSAM-MGS (DFedSAM Algorithm 1), for checking bounds offline.

    Not the engine: a transcription of Algorithm 1 on stacked (m, d) arrays.
    Line 4: g = ∇F_i(y; ξ), δ = ρ g/‖g‖, g̃ = ∇F_i(y + δ; ξ) with the same ξ;
    line 5: y ← y − ηg̃; lines 6-9: x ← W^Q z. Records, for t = 1..T (x¹ = x0
    on every client), ‖∇f(x̄ᵗ)‖², the consensus distance and (1/m)Σ‖∇f(xᵗ(i))‖².
    """
    get = W if callable(W) else (lambda t: W)
    m, d = problem.m, problem.A.shape[0]
    rng = np.random.default_rng(seed)
    x = np.zeros((m, d)) if x0 is None else np.tile(np.asarray(x0, float), (m, 1))
    gnorm, cons, g2 = [], [], []
    for t in range(T):
        xbar = x.mean(0)
        gnorm.append(float(problem.grad_f(xbar) @ problem.grad_f(xbar)))
        cons.append(consensus_distance(x))
        gl = (x - problem.centers.mean(0)) @ problem.A  # ∇f at each client's model
        g2.append(float((gl**2).sum(1).mean()))
        y = x.copy()
        for _ in range(K):
            state = rng.bit_generator.state  # same minibatch ξ for g and g̃
            g = problem.stochastic_grads(y, rng)
            nrm = np.linalg.norm(g, axis=1, keepdims=True)
            delta = rho * g / np.where(nrm > 0, nrm, 1.0)  # (m, d)
            rng.bit_generator.state = state
            y = y - eta * problem.stochastic_grads(y + delta, rng)
        Wt = get(t)
        for _ in range(Q):
            y = Wt @ y
        x = y
    return {
        "grad_norm_sq": np.asarray(gnorm),
        "consensus": np.asarray(cons),
        "mean_grad_norm_sq": np.asarray(g2),
        "f_x1": problem.f(np.zeros(d) if x0 is None else np.asarray(x0, float)),
    }


#: the methods :func:`run_decentralized` runs
DECENTRALIZED_METHODS = ("dsgd", "dfedavg", "dfedsam")


def run_decentralized(
    problem,
    W: np.ndarray | Callable[[int], np.ndarray],
    method: str,
    *,
    T: int,
    eta: float,
    K: int = 1,
    rho: float = 0.0,
    Q: int = 1,
    x0: np.ndarray | None = None,
) -> dict:
    """D-SGD, DFedAvg or DFedSAM on ``problem`` with full-batch gradients, float64 numpy, and what moves.

    ``problem`` needs ``local_grads(X)`` (X of shape (m, d)), ``grad_f(x)`` and ``f(x)``
    (:class:`DiagonalQuadratics`, :class:`ShiftedQuadratics`). Every client starts at
    ``x0`` (zeros if None). One round t → t + 1, with Wᵗ = ``W`` or ``W(t)``:

    * ``"dsgd"`` (D-PSGD, Lian et al. 2017, as ``dfl_core``'s dpsgd_round):
      x⁺ᵢ = Σⱼ (W^Q)ᵢⱼ xⱼ − η∇fᵢ(xᵢ); needs K = 1 and ρ = 0.
    * ``"dfedavg"`` (Sun et al., eq. (5)): K steps y ← y − η∇fᵢ(y), then Q gossip steps; ρ = 0.
    * ``"dfedsam"`` (Shi et al., Algorithm 1): K steps g = ∇fᵢ(y), δ = ρg/‖g‖ (0 where g = 0),
      y ← y − η∇fᵢ(y + δ), then Q gossip steps. At ρ = 0 it is ``"dfedavg"``.

    Returns arrays over t = 0..T: ``average`` (T+1, d), the path of x̄ᵗ; ``consensus``,
    (1/m)Σᵢ‖xᵢᵗ − x̄ᵗ‖² (the left side of DFedSAM Lemmas D.5/D.6); ``grad_norm_sq``,
    ‖∇f(x̄ᵗ)‖²; ``loss``, f(x̄ᵗ); and ``models``, the clients' final (m, d) models.
    """
    if method not in DECENTRALIZED_METHODS:
        raise ValueError(f"method must be one of {DECENTRALIZED_METHODS}, got {method!r}")
    if int(T) != T or T < 0 or int(K) != K or K < 1 or int(Q) != Q or Q < 1:
        raise ValueError(f"T must be an integer >= 0 and K, Q integers >= 1; got T={T!r}, K={K!r}, Q={Q!r}")
    if not (eta > 0 and math.isfinite(eta)):
        raise ValueError(f"eta (the local step size) must be a finite number > 0, got {eta!r}")
    if rho < 0 or (rho > 0 and method != "dfedsam"):
        raise ValueError(f"rho (SAM's radius) must be >= 0, and > 0 only for 'dfedsam'; got rho={rho!r} for {method!r}")
    if method == "dsgd" and K != 1:
        raise ValueError(f"D-SGD takes one gradient step per round (K = 1), got K={K!r}; use 'dfedavg' for K > 1")
    get = W if callable(W) else (lambda t: W)
    m = problem.m
    d = problem.b.shape[-1]
    x = np.zeros((m, d)) if x0 is None else np.tile(np.asarray(x0, np.float64), (m, 1))
    if get(0).shape != (m, m):
        raise ValueError(f"W must be ({m}, {m}) for this problem's {m} clients, got {get(0).shape}")
    avg, cons, gn, loss = [], [], [], []

    def record(x):
        xb = x.mean(0)
        g = problem.grad_f(xb)
        avg.append(xb)
        cons.append(consensus_distance(x))
        gn.append(float(g @ g))
        loss.append(problem.f(xb))

    record(x)
    for t in range(T):
        Wt = get(t)
        if method == "dsgd":
            step = -eta * problem.local_grads(x)  # the gradient at the client's own model, before mixing
            for _ in range(Q):
                x = Wt @ x
            x = x + step
        else:
            y = x.copy()
            for _ in range(K):
                if method == "dfedsam" and rho > 0:
                    g = problem.local_grads(y)
                    nrm = np.linalg.norm(g, axis=1, keepdims=True)
                    y = y - eta * problem.local_grads(y + rho * g / np.where(nrm > 0, nrm, 1.0))
                else:
                    y = y - eta * problem.local_grads(y)
            for _ in range(Q):
                y = Wt @ y
            x = y
        record(x)
    return {
        "average": np.asarray(avg),
        "consensus": np.asarray(cons),
        "grad_norm_sq": np.asarray(gn),
        "loss": np.asarray(loss),
        "models": x,
    }
