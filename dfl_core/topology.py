"""Who averages with whom: communication graphs and their mixing matrices W.

One gossip step replaces every client's model by a weighted average of the models it receives,

.. math::

    x_i \\leftarrow \\sum_{j=1}^m w_{ij} x_j, \\qquad\\text{i.e.}\\qquad X \\leftarrow W X,

where row i of ``X`` (shape ``(m, d)``) is client i's model. Everything the rest of ``dfl_core`` needs to know about
the network is in the matrix W, so this module builds W explicitly (decentralizepy instead computes the weights
inside its message-passing code, where nobody can test them or compute their spectral gap).

DFedSAM's analysis (Shi et al., 2023, Definition 4.1, taken from Sun et al., 2022) assumes W is non-negative,
supported on the graph, **symmetric**, has null space null(I - W) = span(1), and satisfies I ⪰ W ≻ -I. The speed of
consensus is then governed by

.. math::

    \\lambda = \\max\\{|\\lambda_2(W)|, |\\lambda_m(W)|\\}, \\qquad 1 - \\lambda \\in (0, 1],

the second-largest eigenvalue modulus (SLEM) and the spectral gap.

The graphs are :data:`TOPOLOGIES` (``python -m dfl_core list``). Undirected ones get Metropolis-Hastings
weights (:func:`metropolis_hastings`), symmetric and doubly stochastic for any undirected graph.

Time-varying graphs (DFedSAM Appendix B.4: "each client can communicate with at most 10 neighbors which are
random sampled without replacement from all clients") can be read in two ways, both provided: ``random-symmetric``
(:class:`RandomSymmetric`), what the theory assumes, and ``random-as-coded`` (:class:`RandomAsCoded`), what the
public DisPFL code, on which the DFedSAM-lineage code is built, does: its W is only row-stochastic, so the average of
all models is *not* preserved by a gossip step and Definition 4.1 does not hold. A time-varying W is a function of
``(seed, round, step)`` only, so a resumed run or a run split over processes sees the same graphs.

References:
    Shi, Shen, Wang, Tao. Improving the Model Consistency of Decentralized
    Federated Learning (DFedSAM). ICML 2023. Definition 4.1, Appendix A, B.4.
    Ying, Yuan, Chen, Hu, Pan, Yin. Exponential Graph is Provably Efficient
    for Decentralized Deep Training. NeurIPS 2021.
    Dai, Shen, He, Tian, Tao. DisPFL: Towards Communication-Efficient Personalized Federated Learning via
    Decentralized Sparse Training. ICML 2022 (code: rong-dai/DisPFL, ``fedml_api/standalone/DisPFL``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
import numbers
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Mapping

import networkx as nx
import numpy as np

__all__ = [
    "TopologyError",
    "MixingMatrix",
    "Topology",
    "metropolis_hastings",
    "make_topology",
    "check_topology",
    "grid_shape",
    "TOPOLOGIES",
    "TopologySpec",
    "TopologyOption",
]


class TopologyError(ValueError):
    """A bad topology name, size or option, or a W without its declared properties."""


def _tol(m: int) -> float:
    # A row sum of m weights in [0, 1] carries a rounding error of at most ~m * eps.
    return 1e-12 * max(1, m)


# -------------------------------------------------------------------------------- The mixing matrix
@dataclass(frozen=True, eq=False, repr=False)
class MixingMatrix:
    """A gossip matrix W together with the properties it is declared to have.

    ``w_ij`` is the weight client i gives to client j's model: ``X <- W @ X``.
    Client j therefore sends its model to client i whenever ``w_ij > 0``.

    The flags are *declarations*; :meth:`validate` checks every declaration that promises something (``symmetric``,
    ``doubly_stochastic``, ``connected``, and ``directed=False``, which promises a symmetric support).
    ``directed=True`` only says that the support *may* be asymmetric.

    ``eq=False``: W is an array, so field-wise ``==`` would be ambiguous; compare ``a.W`` and ``b.W`` with numpy
    instead. Do not modify ``W`` in place: the eigenvalues are cached.
    """

    W: np.ndarray  # (m, m) float64
    name: str
    symmetric: bool  # W == W.T
    doubly_stochastic: bool  # rows and columns sum to 1 (otherwise rows only)
    directed: bool  # the support may be asymmetric (w_ij > 0 but w_ji == 0)
    connected: bool = True  # the support graph is (strongly) connected

    def __post_init__(self):
        try:
            W = np.asarray(self.W, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TopologyError(f"MixingMatrix {self.name!r}: W is not a numeric array ({e})") from None
        object.__setattr__(self, "W", W)

    def __repr__(self) -> str:
        return (
            f"MixingMatrix(name={self.name!r}, m={self.m}, symmetric={self.symmetric}, "
            f"doubly_stochastic={self.doubly_stochastic}, directed={self.directed}, connected={self.connected})"
        )

    # ---- checks ---------------------------------------------------------- #

    def _fail(self, prop: str, detail: str) -> TopologyError:
        return TopologyError(f"MixingMatrix {self.name!r} is not {prop}: {detail}")

    def validate(self) -> "MixingMatrix":
        """Check the shape, the entries and every declared property; return ``self``.

        Always: square 2-D, finite, non-negative, every row sums to 1. If declared: ``symmetric`` (W == W.T),
        ``doubly_stochastic`` (columns sum to 1), ``directed=False`` (w_ij > 0 iff w_ji > 0), ``connected`` (support
        graph strongly connected). Tolerance 1e-12 * m. Costs O(m^2): a pass or two over W, no factorization.
        """
        W = self.W
        if W.ndim != 2 or W.shape[0] != W.shape[1] or W.shape[0] == 0:
            raise self._fail("a square matrix", f"shape is {W.shape}, allowed is (m, m) with m >= 1")
        m = W.shape[0]
        tol = _tol(m)
        for prop, bad in (("finite", ~np.isfinite(W)), ("non-negative", W < 0)):
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise self._fail(prop, f"entry ({i}, {j}) is {W[i, j]:.12g}")
        rows = W.sum(axis=1)
        bad = np.flatnonzero(np.abs(rows - 1.0) > tol)
        if bad.size:
            i = bad[0]
            raise self._fail("row-stochastic", f"row {i} sums to {rows[i]:.12g} (must be 1 within {tol:.0e})")
        if self.symmetric and self.directed:
            raise self._fail("consistently declared", "symmetric=True and directed=True contradict each other")
        if self.symmetric:
            diff = np.abs(W - W.T)
            if diff.max() > tol:
                i, j = np.unravel_index(np.argmax(diff), diff.shape)
                raise self._fail("symmetric", f"W[{i},{j}] = {W[i, j]:.12g} but W[{j},{i}] = {W[j, i]:.12g}")
        support = W > 0
        if not self.directed:
            asym = support != support.T
            if asym.any():
                i, j = np.argwhere(asym)[0]
                raise self._fail(
                    "undirected (symmetric support)", f"W[{i},{j}] = {W[i, j]:.12g} but W[{j},{i}] = {W[j, i]:.12g}"
                )
        if self.doubly_stochastic:
            cols = W.sum(axis=0)
            bad = np.flatnonzero(np.abs(cols - 1.0) > tol)
            if bad.size:
                j = bad[0]
                raise self._fail("doubly stochastic", f"column {j} sums to {cols[j]:.12g} (must be 1 within {tol:.0e})")
        if self.connected:
            unreached = _unreachable_from_0(support)
            if unreached is not None:
                raise self._fail(
                    "strongly connected", f"node {unreached} cannot be reached from node 0 (or cannot reach it)"
                )
        return self

    # ---- numbers --------------------------------------------------------- #

    @property
    def m(self) -> int:
        return int(self.W.shape[0])

    @cached_property
    def eigenvalues(self) -> np.ndarray:
        """All eigenvalues of W, largest modulus first (real for symmetric W). O(m^3), cached."""
        if self.symmetric:
            ev = np.linalg.eigvalsh(self.W)  # real, ascending
        else:
            ev = np.linalg.eigvals(self.W)  # complex in general
        return ev[np.argsort(-np.abs(ev), kind="stable")]

    @cached_property
    def lam(self) -> float:
        """λ of DFedSAM Definition 4.1: the second-largest eigenvalue modulus of W.

        ``max(|λ_2|, |λ_m|)`` for a symmetric W; for a non-symmetric W the same
        SLEM is returned, but the DFedSAM bounds do not apply to it. 0.0 for m = 1.
        """
        return 0.0 if self.m == 1 else float(np.abs(self.eigenvalues[1]))

    @property
    def spectral_gap(self) -> float:
        """1 - λ, in (0, 1] for a W satisfying Definition 4.1."""
        return 1.0 - self.lam

    @cached_property
    def num_messages(self) -> int:
        """Models sent in one gossip step: off-diagonal non-zeros (j sends to i if w_ij > 0)."""
        return int(np.count_nonzero(self.W) - np.count_nonzero(np.diag(self.W)))

    def satisfies_definition_4_1(self) -> dict[str, bool]:
        """Check the four properties of DFedSAM Definition 4.1 numerically.

        * ``graph``: W >= 0 and a positive diagonal (every client keeps part of
          its own model; off-diagonal support is the graph by construction).
        * ``symmetry``: W == W.T.
        * ``null_space``: null(I - W) = span(1), i.e. W 1 = 1 and the
          eigenvalue 1 is simple (equivalent to connectivity for MH weights).
        * ``spectral``: I ⪰ W ≻ -I, i.e. all eigenvalues in (-1, 1]; only
          defined for symmetric W, so False otherwise.
        """
        W, m = self.W, self.m
        tol = _tol(m)
        graph = bool((W >= 0).all() and (np.diag(W) > 0).all())
        symmetry = bool(np.abs(W - W.T).max() <= tol)
        ones_fixed = bool(np.abs(W.sum(axis=1) - 1.0).max() <= tol)
        eig_tol = 1e-9
        if symmetry:
            ev = np.linalg.eigvalsh(W) if not self.symmetric else self.eigenvalues.real
            # symmetric: geometric = algebraic multiplicity, so count eigenvalues at 1
            simple_one = int(np.sum(np.abs(ev - 1.0) <= eig_tol)) == 1
            spectral = bool(ev.max() <= 1.0 + eig_tol and ev.min() > -1.0 + eig_tol)
        else:
            simple_one = int(np.linalg.matrix_rank(np.eye(m) - W)) == m - 1
            spectral = False
        return {
            "graph": graph,
            "symmetry": symmetry,
            "null_space": bool(ones_fixed and simple_one),
            "spectral": spectral,
        }


def _unreachable_from_0(A: np.ndarray) -> int | None:
    """A node not strongly connected to node 0 in the digraph ``A`` (None if there is none).

    Breadth-first search from node 0 along edges and along reversed edges;
    each BFS touches every row at most once, O(m^2) with numpy.
    """
    m = A.shape[0]
    for adj in (A, A.T):
        seen = np.zeros(m, dtype=bool)
        seen[0] = True
        frontier = np.array([0])
        while frontier.size:
            reach = adj[frontier].any(axis=0) & ~seen
            seen |= reach
            frontier = np.flatnonzero(reach)
        if not seen.all():
            return int(np.flatnonzero(~seen)[0])
    return None


# ------------------------------------------------------------------------------------------ Weights
def _mh_from_adjacency(A: np.ndarray) -> np.ndarray:
    """Metropolis-Hastings weights for a symmetric boolean adjacency matrix (diagonal ignored)."""
    A = A.astype(bool, copy=True)
    np.fill_diagonal(A, False)
    d = A.sum(axis=1)  # (m,) degrees
    # w_ij = 1 / (1 + max(d_i, d_j)) on edges: symmetric by construction, and
    # each row's off-diagonal sum is < 1, so the diagonal stays positive.
    W = np.where(A, 1.0 / (1.0 + np.maximum.outer(d, d)), 0.0)
    np.fill_diagonal(W, 1.0 - W.sum(axis=1))
    return W


def metropolis_hastings(G: nx.Graph) -> np.ndarray:
    """Metropolis-Hastings mixing matrix of an undirected graph on nodes 0..m-1.

    .. math::

        w_{ij} = \\frac{1}{1 + \\max(d_i, d_j)} \\text{ for } \\{i, j\\} \\in E, \\qquad
        w_{ii} = 1 - \\sum_{j \\ne i} w_{ij}.

    Symmetric and doubly stochastic for every undirected graph, with a positive diagonal; it needs only each node's
    and its neighbours' degrees, so it can be computed locally. Self-loops in ``G`` are ignored.
    """
    if G.is_directed():
        raise TopologyError("metropolis_hastings needs an undirected graph, got a directed one")
    m = G.number_of_nodes()
    if set(G.nodes) != set(range(m)):
        raise TopologyError(f"metropolis_hastings needs nodes 0..{m - 1}, got nodes {sorted(G.nodes)[:10]}...")
    A = nx.to_numpy_array(G, nodelist=range(m), weight=None, dtype=float) > 0
    return _mh_from_adjacency(A)


# --------------------------------------------------------------------------------------- Topologies
class Topology(ABC):
    """A source of mixing matrices: ``matrix(round, step)`` is W for gossip step ``step`` of ``round``.

    Attributes:
        name: the name given to :func:`make_topology`.
        m: number of clients.
        time_varying: False if ``matrix`` always returns the same W.
    """

    name: str
    m: int
    time_varying: bool = False

    @abstractmethod
    def matrix(self, round: int, step: int = 0) -> MixingMatrix:
        """W for gossip step ``step`` of round ``round``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, m={self.m}, time_varying={self.time_varying})"


def _check_round_step(round, step) -> None:
    for label, v in (("round", round), ("step", step)):
        if not _is_int(v) or v < 0:
            raise TopologyError(f"{label} must be an int >= 0, got {v!r}")


class StaticTopology(Topology):
    """A fixed graph: the same validated W for every (round, step)."""

    def __init__(self, name: str, mixing: MixingMatrix):
        self.name, self.m, self._mixing = name, mixing.m, mixing.validate()

    def matrix(self, round: int = 0, step: int = 0) -> MixingMatrix:
        _check_round_step(round, step)
        return self._mixing


class _TimeVarying(Topology):
    """Base for random graphs: W for gossip step ``step`` of round ``round`` is drawn from
    ``default_rng([seed, round, step])``. A run uses step 0's W for all Q gossip steps of a round unless
    ``fresh_matrix_per_gossip_step`` asks for a new one every step."""

    time_varying = True

    def __init__(self, name: str, m: int, seed: int):
        self.name, self.m, self.seed = name, m, seed
        self._last: tuple[tuple[int, int], MixingMatrix] | None = None

    def matrix(self, round: int, step: int = 0) -> MixingMatrix:
        _check_round_step(round, step)
        key = (int(round), int(step))
        if self._last is not None and self._last[0] == key:
            return self._last[1]  # an algorithm may ask twice in one step
        # The generator depends on (seed, round, step) only, never on earlier calls.
        rng = np.random.default_rng([self.seed, key[0], key[1]])
        mixing = self._draw(rng, f"{self.name}[round={key[0]},step={key[1]}]").validate()
        self._last = (key, mixing)
        return mixing

    @abstractmethod
    def _draw(self, rng: np.random.Generator, label: str) -> MixingMatrix:
        """One random W from ``rng`` (each time-varying scheme defines how)."""


class RandomSymmetric(_TimeVarying):
    """Scheme (i) for DFedSAM Appendix B.4: a fresh undirected graph of degree <= max_degree.

    The graph is the union of ``max_degree // 2`` random Hamiltonian cycles (a random permutation of the clients,
    closed into a cycle). One cycle already makes it connected, and each cycle adds at most 2 to every degree, so
    the degree is <= max_degree (less where cycles share an edge). MH weights make W symmetric and doubly
    stochastic, as Definition 4.1 assumes. For m <= max_degree + 1 the complete graph already respects the degree
    bound, and it is used every step (W = 11^T / m, then not really random).
    """

    def __init__(self, m: int, seed: int, max_degree: int):
        super().__init__("random-symmetric", m, seed)
        self.max_degree = self.check(m, max_degree)

    @staticmethod
    def check(m: int, max_degree) -> int:
        return _need_int("'random-symmetric' option max_degree", max_degree, 2)

    def _draw(self, rng, label):
        m = self.m
        if m <= self.max_degree + 1:
            return MixingMatrix(np.full((m, m), 1.0 / m), label, True, True, False, True)
        A = np.zeros((m, m), dtype=bool)
        for _ in range(self.max_degree // 2):
            perm = rng.permutation(m)
            nxt = np.roll(perm, -1)  # perm[t] -- perm[t+1], closed into a cycle (m >= 4: no repeats)
            A[perm, nxt] = True
            A[nxt, perm] = True
        return MixingMatrix(_mh_from_adjacency(A), label, True, True, False, True)


class RandomAsCoded(_TimeVarying):
    """Scheme (ii): the time-varying graph of the public DisPFL code, ``_benefit_choose(cs='random')``.

    Every client i draws ``num_neighbors`` *other* clients uniformly without replacement (capped at m - 1), appends
    itself, and takes the plain average: ``w_ij = 1 / (num_neighbors + 1)`` for j in S_i ∪ {i}. The receiver picks
    its senders, so columns do not sum to 1 (a popular client counts more) and W is row-stochastic only: not
    symmetric, not doubly stochastic, and a single draw is not guaranteed to be strongly connected
    (``connected=False`` is declared honestly; it is, with high probability, for num_neighbors = 10 and m = 100).
    The same distribution as the code, not its random stream.
    """

    def __init__(self, m: int, seed: int, num_neighbors: int):
        super().__init__("random-as-coded", m, seed)
        self.num_neighbors = min(self.check(m, num_neighbors), m - 1)

    @staticmethod
    def check(m: int, num_neighbors) -> int:
        return _need_int("'random-as-coded' option num_neighbors", num_neighbors, 1)

    def _draw(self, rng, label):
        m, k = self.m, self.num_neighbors
        W = np.zeros((m, m))
        if k > 0:
            # k smallest of m-1 i.i.d. uniforms per row = a uniform k-subset of the others.
            u = rng.random((m, m))
            np.fill_diagonal(u, np.inf)  # never pick yourself
            picks = np.argpartition(u, k - 1, axis=1)[:, :k]  # (m, k)
            W[np.arange(m)[:, None], picks] = 1.0 / (k + 1)
        np.fill_diagonal(W, 1.0 / (k + 1))
        return MixingMatrix(W, label, False, False, True, False)


# ---------------------------------------------------------------------------------- static builders
def _static(name: str, W: np.ndarray, *, symmetric=True, doubly_stochastic=True, directed=False) -> StaticTopology:
    return StaticTopology(name, MixingMatrix(W, name, symmetric, doubly_stochastic, directed, True))


def _ring(m: int) -> StaticTopology:
    """Ring (DFedSAM Section 5.3 / Appendix A), MH weights: 1/3 to itself and each neighbour.

    Circulant, so its eigenvalues are (1 + 2 cos(2πk/m)) / 3, k = 0..m-1, and λ = (1 + 2 cos(2π/m)) / 3 for m >= 3
    (the most negative eigenvalue is >= -1/3, and the k = 1 term is >= 1/3 once m >= 4). The gap 1 - λ = (2/3)(1 -
    cos(2π/m)) ≈ 4π²/(3m²): the ring is the slowest-mixing topology here. (DFedSAM Section 3.1 writes "λ ≈
    16π²/(3m²)" for the ring, which is a gap-like quantity that tends to 0, with a different constant, citing Sun et
    al. 2022.) m = 1: W = [[1]]; m = 2: one edge, W = 11^T / 2.
    """
    A = np.zeros((m, m), dtype=bool)
    if m >= 2:
        i = np.arange(m)
        A[i, (i + 1) % m] = True  # for m = 2 both directions give the same single edge
        A[(i + 1) % m, i] = True
    return _static("ring", _mh_from_adjacency(A))


def _grid(m: int, name: str) -> StaticTopology:
    """2-D grid ("Grid", DFedSAM Section 5.3 / Appendix A) or torus, MH weights.

    r x c with r the largest divisor of m not above sqrt(m), so as square as m allows (m = 100: 10 x 10). m = 2, 3
    give a path (or, for the torus and m = 3, a ring); a prime m > 3 is refused rather than silently becoming a
    path. Corner/edge clients have degree 2/3, interior ones 4.
    """
    rows, cols = grid_shape(m, name)
    return _static(name, _mh_from_adjacency(_grid_adjacency(rows, cols, periodic=name == "torus")))


def _complete(m: int, name: str) -> StaticTopology:
    """Fully connected ("Full", DFedSAM Section 5.3): w_ij = 1/m.

    One gossip step gives exact consensus (λ = 0) at the price of m(m-1) messages.
    """
    return _static(name, np.full((m, m), 1.0 / m))


def _star(m: int) -> StaticTopology:
    """Star with hub 0, MH weights: the hub keeps 1/m and gives 1/m to each leaf; a leaf keeps 1 - 1/m.

    Not one of DFedSAM's topologies; the standard example that a graph of diameter 2 can still mix slowly (λ = 1 -
    1/m for m >= 3) because the hub is a bottleneck.
    """
    A = np.zeros((m, m), dtype=bool)
    A[0, 1:] = True
    A[1:, 0] = True
    return _static("star", _mh_from_adjacency(A))


def grid_shape(m: int, name: str) -> tuple[int, int]:
    """The (rows, cols) of the m-client grid or torus: rows the largest divisor of m not above √m.

    A prime m > 3 raises :class:`TopologyError`, naming the nearest valid m below and above.
    """
    rows = max(r for r in range(1, math.isqrt(m) + 1) if m % r == 0)
    if rows == 1 and m > 3:

        def ok(n):
            return any(n % r == 0 for r in range(2, math.isqrt(n) + 1))

        below = next(n for n in range(m - 1, 3, -1) if ok(n))
        above = next(n for n in range(m + 1, 2 * m + 4) if ok(n))
        raise TopologyError(
            f"{name!r} needs m = r * c with r, c >= 2, but m = {m} is prime; nearby valid m: {below} or {above}"
        )
    return rows, m // rows


def _check_grid(m: int, name: str) -> None:
    grid_shape(m, name)  # raises for a prime m > 3


def _grid_adjacency(rows: int, cols: int, periodic: bool) -> np.ndarray:
    m = rows * cols
    idx = np.arange(m).reshape(rows, cols)
    A = np.zeros((m, m), dtype=bool)
    pairs = [(idx[:, :-1], idx[:, 1:]), (idx[:-1, :], idx[1:, :])]
    # Wrap-around only for sides of length >= 3: on a side of length 2 the
    # wrap edge is the edge already there, and on length 1 it would be a self-loop.
    if periodic and cols >= 3:
        pairs.append((idx[:, -1], idx[:, 0]))
    if periodic and rows >= 3:
        pairs.append((idx[-1, :], idx[0, :]))
    for a, b in pairs:
        A[a.ravel(), b.ravel()] = True
        A[b.ravel(), a.ravel()] = True
    return A


def _exponential_offsets(m: int) -> np.ndarray:
    tau = math.ceil(math.log2(m)) if m > 1 else 0
    return np.array([2**k for k in range(tau)], dtype=np.int64)  # all < m, distinct


def _exponential(m: int) -> StaticTopology:
    """Static exponential graph of Ying et al. (2021); "Exp" in DFedSAM Section 5.3 / Appendix A.

    ``w_ij = 1/(tau+1)`` if j == i or (j - i) mod m = 2^k, k = 0..tau-1, tau = ceil(log2 m). Client i receives from
    i+1, i+2, i+4, ... (mod m): tau messages per client instead of a ring's 2, and for m a power of two λ = 1 - 2/(1
    + log2 m) (Ying et al. 2021). Circulant, hence doubly stochastic, but directed. For m <= 3 the offsets are
    closed under negation (m = 3: offsets {1, 2}, the complete graph), so W is symmetric and declared so.
    """
    offs = _exponential_offsets(m)
    i = np.arange(m)
    W = np.zeros((m, m))
    W[i, i] = 1.0 / (len(offs) + 1)
    for o in offs:
        W[i, (i + o) % m] = 1.0 / (len(offs) + 1)
    sym = set(offs % m) == set((-offs) % m)
    return _static("exponential", W, symmetric=sym, directed=not sym)


def _exponential_mh(m: int) -> StaticTopology:
    """The exponential graph's edges, made undirected ({i, i ± 2^k}), with MH weights."""
    offs = _exponential_offsets(m)
    i = np.arange(m)
    A = np.zeros((m, m), dtype=bool)
    for o in offs:
        A[i, (i + o) % m] = True
        A[(i + o) % m, i] = True
    return _static("exponential-mh", _mh_from_adjacency(A))


def _check_erdos_renyi(m: int, p) -> None:
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not (0.0 < p <= 1.0):
        raise TopologyError(f"'erdos-renyi' needs edge_probability (its option p) in (0, 1]; got {p!r}")


def _erdos_renyi(m: int, seed: int, p) -> StaticTopology:
    p, rng = float(p), np.random.default_rng(seed)
    for _ in range(100):
        upper = np.triu(rng.random((m, m)) < p, k=1)  # each pair {i<j} independently with prob. p
        A = upper | upper.T
        if _unreachable_from_0(A) is None:
            return _static("erdos-renyi", _mh_from_adjacency(A))
    raise TopologyError(
        f"'erdos-renyi' with m={m}, p={p} was disconnected in 100 draws (seed={seed}); "
        f"use a larger p (connected w.h.p. for p > ln(m)/m = {math.log(m) / m:.3g})"
    )


def _check_random_regular(m: int, k) -> None:
    if not _is_int(k) or not 0 < k < m or (m * k) % 2:
        raise TopologyError(
            f"'random-regular' needs degree (its option k) an integer with 0 < degree < num_clients and "
            f"num_clients × degree even; got degree={k!r}, num_clients={m}"
        )


def _random_regular(m: int, seed: int, k) -> StaticTopology:
    rnd = random.Random(seed)  # one stream for all redraws, so the result depends on seed only
    for _ in range(100):
        G = nx.random_regular_graph(int(k), m, seed=rnd)
        if nx.is_connected(G):
            return _static("random-regular", metropolis_hastings(G))
    raise TopologyError(
        f"'random-regular' with num_clients={m}, degree={k} was disconnected in 100 draws (seed={seed}); "
        "use degree >= 3"
    )


# ----------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class TopologyOption:
    """One option of a topology: its default and the :class:`~dfl_core.config.Config` field that sets it."""

    default: object
    config_field: str


@dataclass(frozen=True)
class TopologySpec:
    """One entry of :data:`TOPOLOGIES`: a line of documentation, a builder, and its options.

    ``build(m, seed, **options)`` returns a :class:`Topology`; ``options`` maps each option name to its default and
    the config field that feeds it; ``check(m, **options)``, if given, raises :class:`TopologyError` for an m or
    option value the builder cannot take, without building (a :class:`~dfl_core.config.Config` calls it through
    :func:`check_topology`, so such a value is refused before the data are loaded). Adding a topology is one entry
    here.
    """

    summary: str
    build: Callable[..., Topology]
    options: Mapping[str, TopologyOption] = field(default_factory=dict)
    time_varying: bool = False  # its builds draw a new W every round (checked equal to the Topology's)
    check: Callable[..., None] | None = None

    @property
    def config_fields(self) -> frozenset[str]:
        """The config fields this topology reads: its options' fields, and for a time-varying one how often W is
        redrawn (``fresh_matrix_per_gossip_step``)."""
        fields = {o.config_field for o in self.options.values()}
        if self.time_varying:
            fields.add("fresh_matrix_per_gossip_step")
        return frozenset(fields)


TOPOLOGIES: dict[str, TopologySpec] = {
    "ring": TopologySpec("cycle 0-1-...-(m-1)-0, Metropolis-Hastings weights (1/3 each)", lambda m, seed: _ring(m)),
    "grid": TopologySpec(
        "2-D grid r x c (r = largest divisor of m <= sqrt(m)), MH weights",
        lambda m, seed: _grid(m, "grid"),
        check=lambda m: _check_grid(m, "grid"),
    ),
    "torus": TopologySpec(
        "2-D grid with wrap-around, MH weights",
        lambda m, seed: _grid(m, "torus"),
        check=lambda m: _check_grid(m, "torus"),
    ),
    "exponential": TopologySpec(
        "directed exponential graph of Ying et al. 2021: i receives from i+2^k, uniform weights",
        lambda m, seed: _exponential(m),
    ),
    "exponential-mh": TopologySpec(
        "undirected exponential graph (i -- i+-2^k), MH weights", lambda m, seed: _exponential_mh(m)
    ),
    "complete": TopologySpec("all-to-all, w_ij = 1/m", lambda m, seed: _complete(m, "complete")),
    "full": TopologySpec("alias of complete", lambda m, seed: _complete(m, "full")),
    "star": TopologySpec("node 0 is the hub, MH weights", lambda m, seed: _star(m)),
    "erdos-renyi": TopologySpec(
        "G(m, p) redrawn until connected (option p, default 0.2), MH weights",
        _erdos_renyi,
        {"p": TopologyOption(0.2, "edge_probability")},
        check=_check_erdos_renyi,
    ),
    "random-regular": TopologySpec(
        "random k-regular connected graph (option k, default 4), MH weights",
        _random_regular,
        {"k": TopologyOption(4, "degree")},
        check=_check_random_regular,
    ),
    "random-symmetric": TopologySpec(
        "time-varying: new undirected graph of degree <= max_degree (default 10) every round (every gossip "
        "step with fresh_matrix_per_gossip_step), MH weights (DFedSAM App. B.4 read as the theory needs)",
        RandomSymmetric,
        {"max_degree": TopologyOption(10, "max_degree")},
        time_varying=True,
        check=RandomSymmetric.check,
    ),
    "random-as-coded": TopologySpec(
        "time-varying: every client averages itself with num_neighbors (default 10) random others, "
        "row-stochastic only (DisPFL/DFedSAM public code)",
        RandomAsCoded,
        {"num_neighbors": TopologyOption(10, "num_neighbors")},
        time_varying=True,
        check=RandomAsCoded.check,
    ),
}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _need_int(what: str, v, lo: int) -> int:
    if not _is_int(v) or v < lo:
        raise TopologyError(f"{what} must be an int >= {lo}, got {v!r}")
    return int(v)


def check_topology(name: str, m: int, *, seed: int = 0, **options) -> dict[str, object]:
    """Check that :func:`make_topology` can take these arguments, without building; return the topology's options
    with defaults filled in. Raises :class:`TopologyError` as :func:`make_topology` does, except for a random graph
    that stays disconnected (only drawing it tells)."""
    if name not in TOPOLOGIES:
        raise TopologyError(f"unknown topology {name!r}; allowed: {', '.join(TOPOLOGIES)}")
    m = _need_int("m (number of clients)", m, 1)
    _need_int("seed", seed, 0)
    spec = TOPOLOGIES[name]
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        takes = f"it takes only {', '.join(spec.options)}" if spec.options else "it takes no options"
        raise TopologyError(f"topology {name!r} got unknown option(s) {', '.join(unknown)}; {takes}")
    opts = {k: (options[k] if options.get(k) is not None else o.default) for k, o in spec.options.items()}
    if spec.check is not None:
        spec.check(m, **opts)
    return opts


def make_topology(name: str, m: int, *, seed: int = 0, **options) -> Topology:
    """Build the topology ``name`` (a key of :data:`TOPOLOGIES`) for ``m`` clients.

    Args:
        name: one of :data:`TOPOLOGIES`.
        m: number of clients, an int >= 1.
        seed: int >= 0; seeds the random graphs (static ones once, time-varying ones together with round and step).
        **options: the topology's options (``TOPOLOGIES[name].options``, e.g. ``p`` of erdos-renyi); one passed as
            ``None`` takes its default.

    Raises:
        TopologyError: unknown name or option, bad m, seed or option value (:func:`check_topology`),
            or a random graph that stays disconnected.
    """
    opts = check_topology(name, m, seed=seed, **options)
    return TOPOLOGIES[name].build(int(m), int(seed), **opts)
