"""The benchmark harness: its loops compute what the engine computes, and its smoke run works.

No timings are asserted here (they live in benchmarks/RESULTS.md).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.loops import (LocalSpec, ReferenceLoop, client_tensors, flat_from_states, lean_round,
                              states_from_flat)
from benchmarks.round import engine_config, synthetic_data
from dfl_core.engine import Simulation

ROOT = Path(__file__).resolve().parents[1]
M, K, B = 4, 3, 8


def _one_round(algorithm: str, rho: float, momentum: float = 0.0, weight_decay: float = 0.0):
    """The engine's round and both loops' rounds from the same start on the engine's own batches."""
    data = synthetic_data((1, 28, 28), M, n_train=2 * B, n_test=5, dtype=torch.float64)
    extra = {"momentum": momentum} if momentum else {}
    cfg = engine_config("2nn", algorithm, M, K=K, B=B, lr=0.05, dtype="float64", device="cpu",
                        weight_decay=weight_decay, **extra)
    sim = Simulation(cfg, data=data)
    model = sim.model
    template = model.template.double()
    x0 = sim.x.clone()
    # the engine's batches of round 0, client by client
    engine_batches = sim.batches(torch.arange(M), steps=K)
    assert all(bool((w == 1).all()) for _, _, w in engine_batches)      # no padding: every client has >= B samples
    batches = [[(inp[i], lab[i]) for inp, lab, _ in engine_batches] for i in range(M)]
    W = sim.matrices(0)[0].W
    spec = LocalSpec(lr=cfg.lr, K=K, B=B, rho=rho, momentum=momentum, weight_decay=weight_decay)

    states0 = states_from_flat(model.names, model.unflatten, x0)
    lean = flat_from_states(model.names, lean_round(template, states0, W, spec, batches=batches))

    ref = ReferenceLoop(template, client_tensors(data), W, spec)
    ref.states = states_from_flat(model.names, model.unflatten, x0)
    ref.train_round(batches=batches)
    reference = flat_from_states(model.names, ref.states)
    ref.evaluate(train_too=True)                                          # runs; changes nothing
    assert torch.equal(flat_from_states(model.names, ref.states), reference)

    sim.step()
    return x0, sim.x, lean, reference


@pytest.mark.parametrize("algorithm,rho", [("dfedavg", 0.0), ("dfedsam", 0.01)], ids=["sgd", "sam"])
def test_loops_and_engine_compute_the_same_round(algorithm, rho):
    x0, engine, lean, reference = _one_round(algorithm, rho)
    assert (engine - x0).abs().max() > 1e-4                              # the round did something
    torch.testing.assert_close(lean, engine, rtol=0, atol=1e-10)
    torch.testing.assert_close(reference, engine, rtol=0, atol=1e-10)


def test_loops_match_engine_with_momentum_and_weight_decay():
    x0, engine, lean, reference = _one_round("dfedavgm", 0.0, momentum=0.9, weight_decay=1e-3)
    torch.testing.assert_close(lean, engine, rtol=0, atol=1e-10)
    torch.testing.assert_close(reference, engine, rtol=0, atol=1e-10)


def test_quick_run_writes_results(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    for section in ("## Machine", "## Command", "## Targets", "## Round", "## Operator calls on the GPU path",
                    "## End to end", "## Gossip",
                    "## Memory", "## Method"):
        assert section in text, section
    assert "python -m benchmarks --quick --out" in text                      # the exact command
    for column in ("engine", "lean loop", "reference loop", "floor", "one model"):
        assert column in text, column
    assert "regenerate" in text.lower()
    assert "| target | measured | status |" in text


@pytest.mark.parametrize("model, shape", [("2nn", (1, 28, 28)), ("cnn-mnist", (1, 8, 8))])
def test_gpu_path_operator_calls_do_not_grow_with_m(model, shape):
    """On the code path CUDA takes, a round at m = 100 calls exactly the operators of a round at m = 10."""
    from benchmarks.opcount import operator_calls
    small, large = operator_calls(model, 10, shape), operator_calls(model, 100, shape)
    assert sum(small.values()) > 100
    assert small == large


def test_operator_count_sees_a_per_client_loop():
    """The counter is not blind: the CPU's per-client "loop" strategy does grow with m."""
    from benchmarks.opcount import operator_calls
    small = operator_calls("cnn-mnist", 2, (1, 8, 8), strategy="loop")
    large = operator_calls("cnn-mnist", 6, (1, 8, 8), strategy="loop")
    assert sum(large.values()) > sum(small.values()) + 50


def test_a_cnn_miss_against_the_lean_loop_is_put_down_to_its_convolutions():
    from benchmarks.profiling import ProfileResult
    from benchmarks.report import evaluate_targets
    from benchmarks.round import RoundResult
    r = RoundResult("cnn-mnist", "SGD", 100, 1000, times={"engine": [9.0], "lean": [10.0], "one model": [8.0]},
                    floor={"flops": 1e12, "floor": 5.0, "bound": "compute"}, rates=[(2e11, 5e10)],
                    strategy="loop", client_chunk=1, big_chunk=10)
    profile = ProfileResult("cnn-mnist", 100, "loop", 1, 9.0, top=[("aten::convolution_backward", 1, 4.5, 0.5),
                                                                    ("aten::mkldnn_convolution", 1, 2.7, 0.3),
                                                                    ("aten::mm", 1, 0.9, 0.1)])
    lean = [t for t in evaluate_targets(rounds=[r], profiles=[profile]) if "lean" in t.name and t.status == "MISS"]
    text = lean[0].limiting
    assert len(lean) == 1 and "**kernels a per-client loop runs too**" in text
    # (0.5 + 0.3 + 0.1) × 9 / 10 = 0.81 of the lean loop in shared kernels: 0.8× is out of reach
    assert "take 90% of the engine's profiled round, 0.81× the lean loop" in text and "0.8× is out of reach even if" in text
    mlp = RoundResult("2nn", "SGD", 100, 1000, times={"engine": [6.0], "lean": [10.0], "one model": [5.0]},
                      floor={"flops": 1e12, "floor": 5.0, "bound": "compute"}, rates=[(2e11, 5e10)],
                      strategy="mlp", client_chunk=10, big_chunk=100)
    (miss,) = [t for t in evaluate_targets(rounds=[mlp]) if "lean" in t.name]
    assert miss.status == "MISS" and "1.67× faster than the lean loop, not the 2.00× asked" in miss.limiting


def test_end_to_end_split_comes_from_the_repeat_the_table_reports():
    from benchmarks.e2e import _median_repeat
    parts = [{"total": 99.0}, {"total": 70.0}, {"total": 60.0}]
    assert _median_repeat(parts, [99.0, 70.0, 60.0]) is parts[1]           # not the last repeat
    assert _median_repeat(parts[:2], [99.0, 70.0]) in parts[:2]
