"""theory.spectral: closed forms against independent numpy eigenvalues, not against themselves."""

import math

import numpy as np
import pytest
import sympy as sp

from dfl_core.topology import make_topology
from theory import spectral as spc


def slem_of(W):
    ev = np.linalg.eigvals(W)
    return float(np.sort(np.abs(ev))[::-1][1])


@pytest.mark.parametrize("m", [4, 5, 7, 10, 33, 100])
def test_ring_closed_form_matches_own_circulant_and_engine(m):
    # independent construction: (I + shift + shift^T)/3
    S = np.roll(np.eye(m), 1, axis=1)
    W = (np.eye(m) + S + S.T) / 3
    closed = float(spc.closed_form_lambda("ring", m))
    assert closed == pytest.approx(slem_of(W), abs=1e-12)
    assert closed == pytest.approx(make_topology("ring", m).matrix(0).lam, abs=1e-12)


def test_ring_gap_series_is_4pi2_over_3m2():
    m = spc.m_sym
    expected = 4 * sp.pi**2 / (3 * m**2) - 4 * sp.pi**4 / (9 * m**4)
    assert sp.simplify(spc.gap_series("ring", order=6) - expected) == 0


@pytest.mark.parametrize("n", [4, 5, 6, 10])
def test_torus_kronecker_sum(n):
    m = n * n
    j, k = np.meshgrid(np.arange(n), np.arange(n))
    ev = (1 + 2 * np.cos(2 * np.pi * j / n) + 2 * np.cos(2 * np.pi * k / n)) / 5
    own = np.sort(np.abs(ev.ravel()))[::-1][1]
    assert float(spc.closed_form_lambda("torus", m)) == pytest.approx(own, abs=1e-12)
    assert make_topology("torus", m).matrix(0).lam == pytest.approx(own, abs=1e-12)


@pytest.mark.parametrize("m", [3, 4, 10, 57])
def test_star(m):
    assert make_topology("star", m).matrix(0).lam == pytest.approx(1 - 1 / m, abs=1e-12)


@pytest.mark.parametrize("m", [4, 6, 12, 64, 100, 130])
def test_exponential_even_m_by_fft(m):
    W = make_topology("exponential", m).matrix(0).W
    mu = np.fft.fft(W[0])  # circulant: eigenvalues are the DFT of the first row
    own = np.sort(np.abs(mu))[::-1][1]
    tau = math.ceil(math.log2(m))
    assert own == pytest.approx((tau - 1) / (tau + 1), abs=1e-12)
    assert float(spc.closed_form_lambda("exponential", m)) == pytest.approx(own, abs=1e-12)


def test_exponential_odd_m_has_no_closed_form():
    assert spc.closed_form_lambda("exponential", 99) is None


def test_check_closed_forms_all_agree():
    rows = spc.check_closed_forms()
    assert len(rows) > 40
    assert max(r["abs_err"] for r in rows) < 1e-10
    assert max(abs(r["independent"] - r["numeric"]) for r in rows) < 1e-10


def test_max_degree_grid_matches_explicit_matrix():
    r, c = 4, 6
    m = r * c
    W = np.zeros((m, m))
    for a in range(r):
        for b in range(c):
            i = a * c + b
            for da, db in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= a + da < r and 0 <= b + db < c:
                    W[i, (a + da) * c + b + db] = 0.2
            W[i, i] = 1 - W[i].sum()
    assert spc.max_degree_grid_lambda(r, c) == pytest.approx(slem_of(W), abs=1e-12)


def test_grid_gap_is_order_one_over_m_not_m_log_m():
    rows = spc.grid_gap_scaling(sides=(8, 16, 32))
    gm = [r["gap_times_m"] for r in rows]
    assert gm[0] > gm[1] > gm[2] > math.pi**2 / 5  # decreasing towards π²/5
    assert gm[2] - math.pi**2 / 5 < 0.05
    glog = [r["gap_times_m_log2m"] for r in rows]
    assert glog[0] < glog[1] < glog[2]  # unbounded: no 1/(m log m) scaling


def test_definition_4_1_flags():
    d = spc.definition_4_1(make_topology("exponential", 100).matrix(0).W)
    assert not d["symmetry"] and d["doubly_stochastic"] and d["null_space"]
    d = spc.definition_4_1(make_topology("random-as-coded", 100).matrix(3).W)
    assert not d["symmetry"] and not d["doubly_stochastic"]
    assert all(spc.definition_4_1(make_topology("grid", 100).matrix(0).W).values())


def test_as_coded_exact_against_monte_carlo():
    exact = spc.as_coded_exact(100, 10)
    st = spc.mean_square_contraction("random-as-coded", 100, draws=100)
    assert abs(st.rho_ms - float(exact["rho_ms"])) < 5 * st.rho_ms_se
    assert st.drift == pytest.approx(float(exact["drift"]), rel=0.2)
    # exact formula at m = s + 1: every client averages all, W = 11ᵀ/m, no disagreement left
    assert sp.simplify(spc.as_coded_exact(11, 10)["rho_ms"]) == 0


def test_random_symmetric_preserves_average():
    st = spc.mean_square_contraction("random-symmetric", 50, draws=20)
    assert st.drift < 1e-20 and st.definition_4_1_all["symmetry"]


def test_lemma_d1_holds_for_symmetric_fails_for_row_stochastic():
    assert spc.lemma_d1_static(make_topology("ring", 30).matrix(0).W, 30)["first_fail"] is None
    r = spc.lemma_d1_static(make_topology("random-as-coded", 30).matrix(0).W, 30)
    assert r["first_fail"] is not None and r["final_norm"] > 1e-3
