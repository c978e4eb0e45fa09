"""Tests for dfl_core.topology: every W has the properties it declares, and λ is right.

λ is checked against closed forms (ring, complete, exponential) and against an
independent eigen-solver; graphs are checked against networkx builders.
"""

import math

import networkx as nx
import numpy as np
import pytest

from dfl_core.topology import (
    TOPOLOGIES,
    MixingMatrix,
    Topology,
    TopologyError,
    check_topology,
    make_topology,
    metropolis_hastings,
)

SIZES = [1, 2, 3, 4, 6, 9, 16, 100]


def build(name, m, **kw):
    """make_topology with options that make small m legal (random-regular needs 0 < k < m)."""
    if name == "random-regular" and m <= 4 and "k" not in kw:
        kw["k"] = m - 1
    return make_topology(name, m, **kw)


def slem_reference(W):
    """Second-largest eigenvalue modulus by the general (non-symmetric) solver."""
    if W.shape[0] == 1:
        return 0.0
    return float(np.sort(np.abs(np.linalg.eigvals(W)))[::-1][1])


def matrices(topo):
    """The matrices to check: one for a static topology, several draws for a time-varying one."""
    if not topo.time_varying:
        return [topo.matrix(0)]
    return [topo.matrix(r, s) for r, s in [(0, 0), (0, 1), (7, 0), (123, 3)]]


def check_declared(mm: MixingMatrix):
    """The declared properties, checked without MixingMatrix.validate."""
    W, m = mm.W, mm.m
    assert W.shape == (m, m) and W.dtype == np.float64
    assert np.isfinite(W).all() and (W >= 0).all()
    np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    if mm.symmetric:
        np.testing.assert_array_equal(W, W.T)
        assert not mm.directed
    if mm.doubly_stochastic:
        np.testing.assert_allclose(W.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    if not mm.directed:
        np.testing.assert_array_equal(W > 0, (W > 0).T)
    if mm.connected:
        G = nx.from_numpy_array((W > 0).astype(int), create_using=nx.DiGraph)
        assert nx.is_strongly_connected(G)
    assert mm.num_messages == int(((W > 0) & ~np.eye(m, dtype=bool)).sum())


# --------------------------------------------------------------------------- #
# every topology, several sizes
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("m", SIZES)
@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_declared_properties_and_lam(name, m):
    if name == "random-regular" and m == 1:
        with pytest.raises(TopologyError):
            build(name, m)
        return
    topo = build(name, m)
    assert isinstance(topo, Topology)
    assert topo.name == name and topo.m == m
    for mm in matrices(topo):
        assert mm.validate() is mm
        check_declared(mm)
        assert mm.lam == pytest.approx(slem_reference(mm.W), abs=1e-10)
        assert mm.spectral_gap == pytest.approx(1 - mm.lam)
        if mm.connected and mm.symmetric:
            assert 0 < mm.spectral_gap <= 1 + 1e-12


def test_static_topologies_return_the_same_matrix():
    topo = make_topology("ring", 10)
    assert not topo.time_varying
    assert topo.matrix(0) is topo.matrix(5, 3)


def test_complete_and_full_are_the_same():
    np.testing.assert_array_equal(make_topology("full", 7).matrix(0).W, np.full((7, 7), 1 / 7))
    np.testing.assert_array_equal(make_topology("complete", 7).matrix(0).W, make_topology("full", 7).matrix(0).W)


# --------------------------------------------------------------------------- #
# closed forms for λ
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("m", [3, 4, 5, 8, 31, 100])
def test_ring_lam_closed_form(m):
    W = make_topology("ring", m).matrix(0)
    off = W.W[0][W.W[0] > 0]
    np.testing.assert_allclose(off, 1 / 3)  # MH weights on a 2-regular graph
    k = np.arange(1, m)
    expected = np.max(np.abs((1 + 2 * np.cos(2 * np.pi * k / m)) / 3))
    assert W.lam == pytest.approx(expected, abs=1e-12)


def test_ring_gap_asymptotics():
    # 1 - λ = (2/3)(1 - cos(2π/m)) ≈ 4π²/(3m²) for large m
    m = 200
    gap = make_topology("ring", m).matrix(0).spectral_gap
    assert gap == pytest.approx(4 * np.pi**2 / (3 * m**2), rel=1e-3)


def test_ring_small_cases():
    np.testing.assert_array_equal(make_topology("ring", 1).matrix(0).W, [[1.0]])
    np.testing.assert_array_equal(make_topology("ring", 2).matrix(0).W, [[0.5, 0.5], [0.5, 0.5]])


@pytest.mark.parametrize("m", [1, 2, 5, 100])
def test_complete_lam_is_zero(m):
    assert make_topology("complete", m).matrix(0).lam == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("m", [2, 4, 8, 16, 64, 128, 100, 37])
def test_exponential_lam_from_circulant_eigenvalues(m):
    mm = make_topology("exponential", m).matrix(0)
    tau = math.ceil(math.log2(m))
    first_row = mm.W[0]
    assert np.count_nonzero(first_row) == tau + 1
    np.testing.assert_allclose(first_row[first_row > 0], 1 / (tau + 1))
    # a circulant's eigenvalues are the DFT of its first row
    moduli = np.sort(np.abs(np.fft.fft(first_row)))[::-1]
    assert mm.lam == pytest.approx(moduli[1], abs=1e-10)
    if m & (m - 1) == 0:  # power of two: λ = 1 - 2/(1 + log2 m)  (Ying et al. 2021)
        assert mm.lam == pytest.approx(1 - 2 / (1 + math.log2(m)), abs=1e-10)


def test_exponential_is_directed_but_doubly_stochastic():
    mm = make_topology("exponential", 16).matrix(0)
    assert (mm.symmetric, mm.doubly_stochastic, mm.directed) == (False, True, True)
    assert mm.W[0, 1] > 0 and mm.W[1, 0] == 0  # 0 receives from 1, 1 does not receive from 0
    assert mm.num_messages == 16 * 4


def test_star_lam():
    assert make_topology("star", 100).matrix(0).lam == pytest.approx(1 - 1 / 100, abs=1e-10)


# --------------------------------------------------------------------------- #
# the graphs match networkx's
# --------------------------------------------------------------------------- #


def relabel_grid(G, cols):
    return nx.relabel_nodes(G, {(r, c): r * cols + c for r, c in G.nodes})


def test_metropolis_hastings_formula():
    G = nx.Graph([(0, 1), (1, 2), (1, 3)])  # degrees 1, 3, 1, 1
    W = metropolis_hastings(G)
    expected = np.array(
        [
            [3 / 4, 1 / 4, 0, 0],
            [1 / 4, 1 / 4, 1 / 4, 1 / 4],
            [0, 1 / 4, 3 / 4, 0],
            [0, 1 / 4, 0, 3 / 4],
        ]
    )
    np.testing.assert_allclose(W, expected, atol=1e-15)


def test_ring_matches_networkx_cycle():
    np.testing.assert_allclose(make_topology("ring", 12).matrix(0).W, metropolis_hastings(nx.cycle_graph(12)))


@pytest.mark.parametrize("m,shape", [(100, (10, 10)), (12, (3, 4)), (6, (2, 3)), (4, (2, 2)), (1000, (25, 40))])
def test_grid_and_torus_match_networkx(m, shape):
    rows, cols = shape
    grid = make_topology("grid", m).matrix(0).W
    np.testing.assert_allclose(grid, metropolis_hastings(relabel_grid(nx.grid_2d_graph(rows, cols), cols)))
    torus = make_topology("torus", m).matrix(0).W
    G = relabel_grid(nx.grid_2d_graph(rows, cols, periodic=True), cols)
    np.testing.assert_allclose(torus, metropolis_hastings(G))


def test_torus_side_two_has_no_extra_edges():
    # 2 x 2: wrap-around repeats existing edges, so the torus is the grid, a 4-cycle 0-1-3-2-0
    torus = make_topology("torus", 4).matrix(0).W
    np.testing.assert_array_equal(torus, make_topology("grid", 4).matrix(0).W)
    order = [0, 1, 3, 2]
    np.testing.assert_allclose(torus[np.ix_(order, order)], make_topology("ring", 4).matrix(0).W)
    deg = (make_topology("torus", 6).matrix(0).W > 0).sum(axis=1) - 1  # 2 x 3
    np.testing.assert_array_equal(deg, 3)


def test_exponential_mh_is_the_undirected_exponential_graph():
    m = 20
    directed = make_topology("exponential", m).matrix(0).W > 0
    G = nx.from_numpy_array((directed | directed.T).astype(int))
    G.remove_edges_from(nx.selfloop_edges(G))
    np.testing.assert_allclose(make_topology("exponential-mh", m).matrix(0).W, metropolis_hastings(G))


def test_random_static_graphs_depend_on_seed_only():
    for name, kw in [("erdos-renyi", {"p": 0.1}), ("random-regular", {"k": 3})]:
        a = make_topology(name, 50, seed=1, **kw).matrix(0).W
        b = make_topology(name, 50, seed=1, **kw).matrix(0).W
        c = make_topology(name, 50, seed=2, **kw).matrix(0).W
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
    deg = (make_topology("random-regular", 50, k=3).matrix(0).W > 0).sum(axis=1) - 1
    np.testing.assert_array_equal(deg, 3)


# --------------------------------------------------------------------------- #
# time-varying topologies
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", ["random-symmetric", "random-as-coded"])
def test_time_varying_is_a_function_of_seed_round_step(name):
    keys = [(0, 0), (0, 1), (1, 0), (5, 2), (1, 0)]
    a = make_topology(name, 40, seed=3)
    b = make_topology(name, 40, seed=3)
    assert a.time_varying
    forward = [a.matrix(r, s).W.copy() for r, s in keys]
    backward = [b.matrix(r, s).W.copy() for r, s in reversed(keys)][::-1]
    for x, y in zip(forward, backward):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(forward[0], forward[2])  # another round
    assert not np.array_equal(forward[0], forward[1])  # another gossip step
    other_seed = make_topology(name, 40, seed=4).matrix(0, 0).W
    assert not np.array_equal(forward[0], other_seed)


def test_random_symmetric_properties():
    topo = make_topology("random-symmetric", 100, seed=0)
    for r in range(20):
        mm = topo.matrix(r)
        W = mm.W
        np.testing.assert_array_equal(W, W.T)
        np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-12)
        A = (W > 0) & ~np.eye(100, dtype=bool)
        assert A.sum(axis=1).max() <= 10
        assert nx.is_connected(nx.from_numpy_array(A.astype(int)))
        assert all(mm.satisfies_definition_4_1().values())
    deg = (make_topology("random-symmetric", 50, max_degree=4).matrix(0).W > 0).sum(axis=1) - 1
    assert deg.max() <= 4 and deg.min() >= 2


def test_random_symmetric_small_m_is_complete():
    np.testing.assert_allclose(make_topology("random-symmetric", 11).matrix(3).W, np.full((11, 11), 1 / 11))


def test_random_as_coded_rows():
    m = 100
    topo = make_topology("random-as-coded", m, seed=0)
    mm = topo.matrix(0)
    W = mm.W
    nz = W > 0
    np.testing.assert_array_equal(nz.sum(axis=1), 11)
    np.testing.assert_allclose(W[nz], 1 / 11)
    np.testing.assert_allclose(np.diag(W), 1 / 11)
    # the receiver picks its senders, so column sums are not 1: popular clients count more
    cols = W.sum(axis=0)
    assert np.abs(cols - 1).max() > 0.1
    assert not mm.doubly_stochastic and not mm.symmetric and mm.directed
    assert mm.num_messages == m * 10
    # hence one gossip step changes the average model (it would not with a doubly stochastic W)
    x = np.random.default_rng(0).normal(size=(m, 3))
    assert np.abs((W @ x).mean(axis=0) - x.mean(axis=0)).max() > 1e-3
    ring = make_topology("ring", m).matrix(0).W
    np.testing.assert_allclose((ring @ x).mean(axis=0), x.mean(axis=0), atol=1e-12)


def test_random_as_coded_samples_others_uniformly():
    m, k, R = 20, 5, 400
    topo = make_topology("random-as-coded", m, num_neighbors=k, seed=1)
    counts = sum((topo.matrix(r).W > 0).astype(int) for r in range(R))
    off = counts[~np.eye(m, dtype=bool)]
    p = k / (m - 1)
    sd = math.sqrt(R * p * (1 - p))
    assert np.abs(off - R * p).max() < 5 * sd
    np.testing.assert_array_equal(np.diag(counts), R)


def test_random_as_coded_caps_neighbours():
    W = make_topology("random-as-coded", 5, num_neighbors=10).matrix(0).W
    np.testing.assert_allclose(W, np.full((5, 5), 1 / 5))


# --------------------------------------------------------------------------- #
# Definition 4.1
# --------------------------------------------------------------------------- #


def test_definition_4_1():
    assert make_topology("ring", 10).matrix(0).satisfies_definition_4_1() == {
        "graph": True,
        "symmetry": True,
        "null_space": True,
        "spectral": True,
    }
    coded = make_topology("random-as-coded", 100).matrix(0).satisfies_definition_4_1()
    assert coded["symmetry"] is False and coded["spectral"] is False and coded["graph"] is True
    # two disconnected pairs: eigenvalue 1 is double, so null(I - W) is 2-dimensional
    block = np.kron(np.eye(2), np.full((2, 2), 0.5))
    two_blocks = MixingMatrix(block, "two-blocks", True, True, False, connected=False).validate()
    d = two_blocks.satisfies_definition_4_1()
    assert d["null_space"] is False and d["symmetry"] is True
    # a swap has eigenvalue -1 and a zero diagonal
    swap = MixingMatrix(np.array([[0.0, 1.0], [1.0, 0.0]]), "swap", True, True, False).validate()
    d = swap.satisfies_definition_4_1()
    assert d["spectral"] is False and d["graph"] is False and d["null_space"] is True
    assert swap.lam == pytest.approx(1.0)


# --------------------------------------------------------------------------- #
# bad input
# --------------------------------------------------------------------------- #


def test_unknown_name_lists_allowed():
    with pytest.raises(TopologyError, match="unknown topology 'hypercube'") as e:
        make_topology("hypercube", 8)
    for name in TOPOLOGIES:
        assert name in str(e.value)


@pytest.mark.parametrize("m", [0, -3, 2.5, True, "10", None])
def test_bad_m(m):
    with pytest.raises(TopologyError, match="int >= 1"):
        make_topology("ring", m)


@pytest.mark.parametrize("name", ["grid", "torus"])
def test_grid_prime_m(name):
    with pytest.raises(TopologyError, match=r"m = 7 is prime; nearby valid m: 6 or 8"):
        make_topology(name, 7)


@pytest.mark.parametrize("p", [0, 1.5, -0.1, float("nan"), "0.2", True])
def test_erdos_renyi_bad_p(p):
    with pytest.raises(TopologyError, match=r"needs edge_probability \(its option p\) in \(0, 1\]"):
        make_topology("erdos-renyi", 20, p=p)


def test_erdos_renyi_disconnected_suggests_larger_p():
    with pytest.raises(TopologyError, match="larger p"):
        make_topology("erdos-renyi", 100, p=0.001)
    assert make_topology("erdos-renyi", 5, p=1.0).matrix(0).lam == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("m,k", [(5, 3), (9, 1), (10, 0), (10, 10), (10, 2.0)])
def test_random_regular_bad_k(m, k):
    with pytest.raises(TopologyError, match="num_clients × degree even"):
        make_topology("random-regular", m, k=k)


def test_unknown_option():
    with pytest.raises(TopologyError, match="unknown option\\(s\\) p; it takes no options"):
        make_topology("ring", 10, p=0.3)
    with pytest.raises(TopologyError, match="unknown option\\(s\\) k; it takes only p"):
        make_topology("erdos-renyi", 10, k=3)
    # None means "use the default"
    assert make_topology("random-symmetric", 30, max_degree=None).matrix(0).validate()


@pytest.mark.parametrize(
    "name,opt", [("random-symmetric", {"max_degree": 1}), ("random-as-coded", {"num_neighbors": 0})]
)
def test_bad_time_varying_options(name, opt):
    with pytest.raises(TopologyError, match=list(opt)[0]):
        make_topology(name, 10, **opt)


def test_bad_seed_round_step():
    with pytest.raises(TopologyError, match="seed"):
        make_topology("random-symmetric", 10, seed=-1)
    topo = make_topology("random-as-coded", 10)
    with pytest.raises(TopologyError, match="round"):
        topo.matrix(-1)
    with pytest.raises(TopologyError, match="step"):
        topo.matrix(0, 1.5)


# --------------------------------------------------------------------------- #
# validate() catches false declarations
# --------------------------------------------------------------------------- #

# rows sum to 1 and the support is symmetric, but W != W.T and columns sum to 0.75, 1.5, 0.75
ROW_STOCHASTIC = np.array([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]])
ROW_ONLY = dict(symmetric=False, doubly_stochastic=False, directed=True)


@pytest.mark.parametrize(
    "W,flags,message",
    [
        (ROW_STOCHASTIC, dict(symmetric=True, doubly_stochastic=False, directed=False), "not symmetric"),
        (
            ROW_STOCHASTIC,
            dict(symmetric=False, doubly_stochastic=True, directed=False),
            "column 0 sums to 0.75",
        ),
        (
            np.kron(np.eye(2), np.full((2, 2), 0.5)),
            dict(symmetric=True, doubly_stochastic=True, directed=False),
            "not strongly connected",
        ),
        (
            np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]),
            dict(symmetric=False, doubly_stochastic=True, directed=False),
            "not undirected",
        ),
        (np.array([[0.5, 0.5], [0.5, 0.4]]), ROW_ONLY, "row 1 sums to 0.9"),
        (np.array([[1.5, -0.5], [0.5, 0.5]]), ROW_ONLY, "non-negative"),
        (np.array([[np.nan, 1.0], [0.5, 0.5]]), ROW_ONLY, "finite"),
        (np.full((2, 3), 1 / 3), ROW_ONLY, "square"),
        (np.full((2, 2), 0.5), dict(symmetric=True, doubly_stochastic=True, directed=True), "contradict"),
    ],
)
def test_validate_rejects_false_declarations(W, flags, message):
    mm = MixingMatrix(W, "handmade", **flags)
    with pytest.raises(TopologyError, match=message) as e:
        mm.validate()
    assert "'handmade'" in str(e.value)


def test_validate_tolerates_rounding_only():
    W = np.full((3, 3), 1 / 3)
    MixingMatrix(W + 1e-14 * np.eye(3), "ok", False, False, True).validate()
    with pytest.raises(TopologyError, match="row 0 sums"):
        MixingMatrix(W + 1e-9 * np.eye(3), "off", False, False, True).validate()


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_every_topology_builds_and_validates_at_m_1000(name):
    # Speed is measured in benchmarks/, not asserted here; this checks the m = 1000 code path.
    M = make_topology(name, 1000).matrix(1).validate()
    assert M.W.shape == (1000, 1000)


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_check_topology_refuses_exactly_what_make_topology_refuses(name):
    # check_topology runs before the data are loaded (Config calls it); it must refuse what the builder would,
    # and pass what the builder builds (random graphs given options under which they connect)
    option_values = {
        "p": [0.0, 0.9, 1.0, 1.5],
        "k": [1, 2, 3, 4, 2.0],
        "max_degree": [1, 2, 4],
        "num_neighbors": [0, 1, 3],
    }
    spec = TOPOLOGIES[name]
    combos = [{}] + [{opt: v} for opt in spec.options for v in option_values[opt]]
    for m in range(1, 14):
        for options in combos:
            try:
                make_topology(name, m, **options)
                built = None
            except TopologyError as e:
                built = str(e)
            try:
                check_topology(name, m, **options)
                checked = None
            except TopologyError as e:
                checked = str(e)
            if built is not None and "disconnected" in built:
                assert checked is None, (name, m, options, checked)
            else:
                assert checked == built, (name, m, options, checked, built)
