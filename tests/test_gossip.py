"""The three ways MixingOperator computes W @ x agree, and the automatic choice is the documented one."""

from __future__ import annotations

import pytest
import torch

from dfl_core import Config, Simulation
from dfl_core.gossip import MixingOperator
from dfl_core.topology import make_topology


@pytest.mark.parametrize("topology", ["ring", "exponential", "complete"])
def test_dense_rows_and_csr_products_agree(topology):
    W = make_topology(topology, 40).matrix(0).W
    x = torch.randn(40, 33, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    exact = torch.as_tensor(W) @ x
    for mode in MixingOperator.MODES:
        out = MixingOperator(W, "cpu", torch.float64, mode=mode)(x)
        assert float((out - exact).abs().max()) < 1e-12, mode


def test_automatic_mode_and_bad_mode():
    ring, full = make_topology("ring", 40).matrix(0).W, make_topology("complete", 40).matrix(0).W
    assert MixingOperator(ring, "cpu", torch.float32).mode == "rows"  # sparse on a CPU
    assert MixingOperator(full, "cpu", torch.float32).mode == "dense"
    with pytest.raises(ValueError, match="unknown mode 'coo'; allowed: dense, rows, csr"):
        MixingOperator(ring, "cpu", torch.float32, mode="coo")


def test_one_operator_cache_builds_each_matrix_once_and_drops_earlier_rounds():
    tiny = dict(algorithm="dfedavg", dataset="digits", train_size=200, model="2nn", num_clients=8, device="cpu")
    static = Simulation(Config(topology="ring", **tiny))
    M = static.matrices(0)[0]
    built = static.tools(0)._operator(M)
    assert isinstance(built, MixingOperator) and static.tools(7)._operator(M) is built  # once per run
    varying = Simulation(Config(topology="random-as-coded", num_neighbors=2, **tiny))
    first = varying.tools(0)
    first.gossip(varying.x)
    assert [id(M) for M, _ in varying._operators.values()] == [id(M) for M in first.matrices()]
    second = varying.tools(1)  # round 1's tools drop round 0's W, which is not used again
    assert second.matrices()[0] is not first.matrices()[0] and varying._operators == {}
    second.gossip(varying.x)
    assert [id(M) for M, _ in varying._operators.values()] == [id(M) for M in second.matrices()]
