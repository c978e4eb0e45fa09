"""The GPU speed options of local training (issue 32): mixed precision, channels-last, the stacked twin.

All on the CPU, where bfloat16 autocast works too: a bfloat16 run ends within 3 accuracy points of its
float32 twin, float16's loss scaling is exact and its overflow is caught, float64 refuses mixed precision,
channels-last and the stacked twin compute what the default layout and ``vmap`` compute, and a run with the
options explicitly off is the default run bit for bit.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from dfl_core import stacked
from dfl_core.config import Config, ConfigError
from dfl_core.engine import Simulation
from dfl_core.results import read_results, write_results
from dfl_core.models import build_model
from dfl_core.stacked import AUTOCAST_DTYPES, MixedPrecisionOverflow, StackedModel

#: bfloat16 keeps 8 bits of mantissa; over a short run that reaches > 80 % its accuracy stays this close to float32's
ACCURACY_TOLERANCE = 0.03


@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared 2-core machine two OpenMP threads can be 40× slower than one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(name: str, shape: tuple[int, ...], strategy: str = "auto", **options) -> StackedModel:
    return StackedModel(partial(build_model, name, shape, 10), strategy, **options)


def _batch(n: int, batch: int, shape: tuple[int, ...], dtype=torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, batch, *shape, generator=g, dtype=dtype),
        torch.randint(0, 10, (n, batch), generator=g),
        torch.ones(n, batch, dtype=dtype),
    )


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


# ------------------------------------------------------------------------------- mixed precision
@pytest.mark.parametrize("model, clients", [("2nn", 10), ("cnn-mnist", 4)])
def test_bfloat16_run_ends_within_tolerance_of_float32(one_thread, model, clients):
    """DFedSAM on digits, 10 rounds: the hand-written 2NN backward and the CNN's autograd path under autocast.

    10 rounds, not more: a CPU without AVX512-BF16 (an AVX2 machine) computes bfloat16 convolutions in
    software, about 12 times slower than float32, and 10 rounds already train far above chance (0.1)."""
    acc, sims = {}, {}
    for precision in ("float32", "bfloat16"):
        cfg = Config(
            algorithm="dfedsam",
            model=model,
            num_clients=clients,
            rounds=10,
            eval_every=100,
            seed=0,
            precision=precision,
        )
        sims[precision] = sim = Simulation(cfg)
        acc[precision] = sim.run().records[-1]["test_acc"]
    assert sims["bfloat16"].model.autocast_dtype is torch.bfloat16
    assert acc["float32"] > 0.7, acc
    assert abs(acc["bfloat16"] - acc["float32"]) <= ACCURACY_TOLERANCE, acc
    x16, x32 = sims["bfloat16"].x, sims["float32"].x
    assert x16.dtype == torch.float32  # parameters stay float32
    assert not torch.equal(x16, x32)  # the low precision did run


@pytest.mark.parametrize(
    "name, shape, strategy, dtype",
    [
        ("2nn", (1, 8, 8), "mlp", torch.bfloat16),
        ("cnn-mnist", (1, 8, 8), "loop", torch.bfloat16),
        ("cnn-mnist", (1, 8, 8), "batched", torch.bfloat16),
        ("resnet18-gn", (3, 8, 8), "batched", torch.bfloat16),
        # float16 (loss scaling) on the two backward passes: hand-written and autograd (slow on a CPU: no float16 units)
        ("2nn", (1, 8, 8), "mlp", torch.float16),
        ("cnn-mnist", (1, 8, 8), "batched", torch.float16),
    ],
    ids=["2nn-mlp-bf16", "cnn-loop-bf16", "cnn-batched-bf16", "resnet-twin-bf16", "2nn-mlp-fp16", "cnn-batched-fp16"],
)
def test_mixed_precision_gradients_are_float32_and_close(name, shape, strategy, dtype):
    full = _model(name, shape, strategy)
    mixed = _model(name, shape, strategy, autocast_dtype=dtype)
    p = full.init_params(3, 0, same_init=False)
    x, y, w = _batch(3, 4, shape)
    g32, loss32 = full.loss_and_grad(p, x, y, w)
    g, loss = mixed.loss_and_grad(p, x, y, w)
    assert g.dtype == loss.dtype == torch.float32 and g.shape == g32.shape
    cosine = float((g * g32).sum() / (g.norm() * g32.norm()))
    assert cosine > 0.98, cosine  # the same direction, rounded
    torch.testing.assert_close(loss, loss32, rtol=0, atol=2e-2)
    # FedRobust's input gradient comes back in the inputs' dtype too
    *_, g_in = mixed.loss_and_grad(p, x, y, w, input_grad=True)
    assert g_in.dtype == torch.float32 and g_in.shape == x.shape


def test_float16_overflow_raises_a_clear_error(monkeypatch):
    model = _model("2nn", (1, 8, 8), "mlp", autocast_dtype=torch.float16)
    p = model.init_params(2, 0)
    x, y, w = _batch(2, 4, (1, 8, 8))
    model.loss_and_grad(p, x, y, w)  # the default scale: no overflow
    monkeypatch.setattr(stacked, "FLOAT16_LOSS_SCALE", 2.0**40)  # 2^40 × a gradient > float16's 65504
    with pytest.raises(MixedPrecisionOverflow, match="overflowed float16 under the static loss scale"):
        model.loss_and_grad(p, x, y, w)


def test_float16_loss_scale_is_a_power_of_two():
    """Scaling and unscaling a float32 gradient by it is exact (what the module docstring promises)."""
    mantissa, _ = torch.frexp(torch.tensor(stacked.FLOAT16_LOSS_SCALE))
    assert float(mantissa) == 0.5


def test_float64_refuses_mixed_precision():
    with pytest.raises(ConfigError, match="precision='bfloat16'.*float64"):
        Config(dtype="float64", precision="bfloat16")
    model = _model("2nn", (1, 8, 8), "mlp", autocast_dtype=torch.bfloat16)
    x, y, w = _batch(2, 4, (1, 8, 8), dtype=torch.float64)
    with pytest.raises(ValueError, match="needs float32 parameters, got torch.float64"):
        model.loss_and_grad(model.init_params(2, 0, dtype=torch.float64), x, y, w)


def test_float64_runs_are_untouched_by_the_options_code():
    """A float64 run (its own precision) is the same with the options named explicitly off."""
    runs = [
        Simulation(Config(algorithm="dfedsam", dtype="float64", num_clients=4, rounds=2, seed=3, **extra))
        for extra in ({}, {"precision": "float32", "channels_last": False})
    ]
    for sim in runs:
        sim.run()
    assert runs[0].x.dtype == torch.float64 and torch.equal(runs[0].x, runs[1].x)


@pytest.mark.parametrize("algorithm, model", [("dfedsam", "2nn"), ("dfedsam-mgs", "cnn-mnist")])
def test_options_off_is_the_default_run_bit_for_bit(one_thread, algorithm, model):
    runs = [
        Simulation(Config(algorithm=algorithm, model=model, num_clients=4, rounds=2, seed=5, **extra))
        for extra in ({}, {"precision": "float32", "channels_last": False})
    ]
    histories = [sim.run() for sim in runs]
    assert runs[0].model.autocast_dtype is None and not runs[0].model.channels_last
    assert torch.equal(runs[0].x, runs[1].x)
    assert histories[0].records[-1]["test_acc"] == histories[1].records[-1]["test_acc"]


def test_bad_options_are_refused_clearly():
    with pytest.raises(ValueError, match=r"autocast_dtype=torch.float64 is not allowed; allowed: None"):
        _model("2nn", (1, 8, 8), autocast_dtype=torch.float64)
    with pytest.raises(ValueError, match="has no convolutions"):
        _model("2nn", (1, 8, 8), channels_last=True)
    with pytest.raises(ValueError, match="runs strategy 'loop'"):
        _model("cnn-mnist", (1, 8, 8), "loop", channels_last=True)
    with pytest.raises(ValueError, match="must be True or False"):
        _model("cnn-mnist", (1, 8, 8), channels_last="yes")
    assert set(AUTOCAST_DTYPES) == {"float32", "bfloat16", "float16"}


# ------------------------------------------------------------------- strategies and layout
def test_auto_strategy_moves_to_batched_only_with_an_option():
    """Defaults unchanged; under autocast vmap's convolutions would stay float32, so image models run batched."""
    assert _model("vgg11-gn", (3, 32, 32)).strategy == "vmap"
    assert _model("cnn-mnist", (1, 8, 8)).strategy == "loop"  # the CPU's default for CNNs
    assert _model("vgg11-gn", (3, 32, 32), autocast_dtype=torch.bfloat16).strategy == "batched"
    assert _model("cnn-mnist", (1, 8, 8), autocast_dtype=torch.bfloat16).strategy == "loop"  # autocasts fine
    assert _model("cnn-mnist", (1, 8, 8), channels_last=True).strategy == "batched"
    assert _model("2nn", (1, 8, 8), autocast_dtype=torch.bfloat16).strategy == "mlp"


def test_one_class_per_strategy_chosen_by_one_function():
    """forward_strategy builds the class of the strategy it resolved; StackedModel.strategy names it."""
    cases = {
        ("2nn", "auto"): stacked.MLPStrategy,
        ("2nn", "batched"): stacked.BatchedStrategy,
        ("cnn-mnist", "auto"): stacked.LoopStrategy,
        ("cnn-mnist", "vmap"): stacked.VmapStrategy,
    }
    for (name, strategy), cls in cases.items():
        model = _model(name, (1, 8, 8), strategy)
        assert type(model.forward_strategy) is cls and model.strategy == cls.name
        assert stacked.STRATEGY_CLASSES[model.strategy] is cls
    twin = _model("vgg11-gn", (3, 32, 32), "batched").forward_strategy
    assert twin.twin is not None and _model("cnn-mnist", (1, 8, 8), "batched").forward_strategy.twin is None


def test_simulation_passes_the_config_options_to_the_model():
    sim = Simulation(Config(model="cnn-mnist", num_clients=2, rounds=1, precision="bfloat16", channels_last=True))
    assert sim.model.autocast_dtype is torch.bfloat16
    assert sim.model.channels_last and sim.model.strategy == "batched"
    assert Simulation(Config(num_clients=2, rounds=1, precision="float16")).model.autocast_dtype is torch.float16


def test_a_run_records_how_it_ran(tmp_path):
    """The results say what "auto" and an unset client_chunk resolved to, and what precision and device ran."""
    sim = Simulation(Config(model="cnn-mnist", num_clients=3, rounds=1, precision="bfloat16", channels_last=True))
    history = sim.run()
    assert history.execution == {
        "device": "cpu",
        "dtype": "float32",
        "precision": "bfloat16",
        "forward_strategy": "batched",
        "client_chunk": sim.client_chunk,
    }
    assert isinstance(sim.client_chunk, int) and 1 <= sim.client_chunk <= 3
    plain = Simulation(Config(num_clients=3, rounds=1, dtype="float64", client_chunk=2, forward_strategy="loop"))
    assert plain.run().execution == {
        "device": "cpu",
        "dtype": "float64",
        "precision": "float32",
        "forward_strategy": "loop",
        "client_chunk": 2,
    }
    assert Simulation(Config(num_clients=3, rounds=1)).execution["forward_strategy"] == "mlp"  # auto, resolved
    write_results(tmp_path / "results.json", [history])
    assert read_results(tmp_path / "results.json")[0].execution == history.execution


def test_channels_last_equals_the_default_layout_on_a_small_cnn():
    """Within 1e-5 relative in float32 (a different summation order in the convolutions)."""
    shape = (1, 8, 8)
    default, cl = _model("cnn-mnist", shape, "batched"), _model("cnn-mnist", shape, "batched", channels_last=True)
    p = default.init_params(3, 0, same_init=False)
    x, y, w = _batch(3, 4, shape)
    g, loss = default.loss_and_grad(p, x, y, w)
    g_cl, loss_cl = cl.loss_and_grad(p, x, y, w)
    assert _rel(g_cl, g) < 1e-5 and _rel(cl.forward(p, x), default.forward(p, x)) < 1e-5
    torch.testing.assert_close(loss_cl, loss, rtol=1e-5, atol=0)


@pytest.mark.parametrize(
    "name, shape", [("cnn-cifar", (3, 32, 32)), ("vgg11-gn", (3, 32, 32)), ("resnet18-gn", (3, 8, 8))]
)
def test_channels_last_computes_the_same_function(name, shape):
    """In float64 (where rounding cannot hide a wrong index): the same logits and gradients to 1e-12.

    In float32 on the CPU single clients' gradients of these models moved by up to 1e-2 relative between the
    layouts, either way round (oneDNN's kernels for the two layouts round differently, and a client's gradient
    at a random start can be a small difference of large terms); benchmarks/TRIED.md has the numbers.
    """
    default, cl = _model(name, shape, "batched"), _model(name, shape, "batched", channels_last=True)
    p = default.init_params(3, 0, same_init=False, dtype=torch.float64)
    x, y, w = _batch(3, 2, shape, dtype=torch.float64)
    assert _rel(cl.forward(p, x), default.forward(p, x)) < 1e-12
    assert _rel(cl.loss_and_grad(p, x, y, w)[0], default.loss_and_grad(p, x, y, w)[0]) < 1e-12


@pytest.mark.parametrize("name, shape", [("vgg11-gn", (3, 32, 32)), ("resnet18-gn", (3, 8, 8))])
def test_stacked_twin_computes_what_vmap_computes(name, shape):
    """The batched strategy on the GroupNorm models (one grouped convolution and one GroupNorm per layer for
    all clients) against vmap, in float64: equal to rounding."""
    vmap, twin = _model(name, shape, "vmap"), _model(name, shape, "batched")
    p = vmap.init_params(3, 0, same_init=False, dtype=torch.float64)
    x, y, w = _batch(3, 2, shape, dtype=torch.float64)
    torch.testing.assert_close(twin.forward(p, x), vmap.forward(p, x), rtol=1e-10, atol=1e-12)
    (g_twin, l_twin), (g_vmap, l_vmap) = twin.loss_and_grad(p, x, y, w), vmap.loss_and_grad(p, x, y, w)
    assert _rel(g_twin, g_vmap) < 1e-10
    torch.testing.assert_close(l_twin, l_vmap, rtol=1e-12, atol=0)


def test_stacked_twin_refuses_a_model_it_cannot_run():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3)
            self.norm = torch.nn.BatchNorm2d(2)

        def forward(self, x):
            return self.norm(self.conv(x)).flatten(1)

    with pytest.raises(ValueError, match="strategy 'batched' needs an nn.Sequential"):
        StackedModel(Odd, "batched")


def _calls(m: int) -> Counter:
    cfg = Config(
        algorithm="dfedsam",
        model="resnet18-gn",
        num_clients=m,
        local_steps=2,
        batch_size=2,
        client_chunk=m,
        forward_strategy="batched",
        gossip_mode="csr",
        eval_every=10**6,
        precision="bfloat16",
        channels_last=True,
    )
    from benchmarks.round import synthetic_data

    sim = Simulation(cfg, data=synthetic_data((3, 8, 8), m, n_train=4, n_test=2))
    sim.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sim.step()
    return Counter(e.name for e in prof.events() if e.cpu_parent is None)


def test_options_keep_the_gpu_path_free_of_per_client_operators(one_thread):
    """bfloat16 + channels-last on the stacked twin: a round calls the same operators at m = 2 and m = 4."""
    small, large = _calls(2), _calls(4)
    assert sum(small.values()) > 100 and small == large


# ------------------------------------------------------------------------------- torch.compile
@pytest.mark.parametrize("name, shape", [("cnn-mnist", (1, 8, 8)), ("resnet18-gn", (3, 8, 8))])
def test_compiled_forward_computes_what_the_eager_one_computes(name, shape):
    """compile on the batched path (a flat Sequential, and the stacked twin) in float64: the same gradients and
    losses to rounding. The ``aot_eager`` backend traces and differentiates the graph as inductor does, but
    runs it with PyTorch's own kernels, so the comparison is of the compiled plumbing, not of inductor's code."""
    eager, compiled = _model(name, shape, "batched"), _model(name, shape, "batched", compile="aot_eager")
    p = eager.init_params(3, 0, same_init=False, dtype=torch.float64)
    x, y, w = _batch(3, 2, shape, dtype=torch.float64)
    (g, loss), (g_c, loss_c) = eager.loss_and_grad(p, x, y, w), compiled.loss_and_grad(p, x, y, w)
    assert _rel(g_c, g) < 1e-12
    torch.testing.assert_close(loss_c, loss, rtol=1e-12, atol=0)
    # under autocast too, with the input gradient (FedRobust's shifts) through the compiled graph
    eager32 = _model(name, shape, "batched", autocast_dtype=torch.bfloat16)
    compiled32 = _model(name, shape, "batched", autocast_dtype=torch.bfloat16, compile="aot_eager")
    p, (x, y, w) = p.float(), _batch(3, 2, shape)
    for a, b in zip(
        eager32.loss_and_grad(p, x, y, w, input_grad=True), compiled32.loss_and_grad(p, x, y, w, input_grad=True)
    ):
        assert _rel(b, a) < 1e-6


def test_inductor_compiled_run_matches_the_eager_run(one_thread):
    """Config(compile=True): inductor's generated code on this CPU, a DFedSAM run of the MNIST CNN: the final
    models agree to float32 rounding (1e-4 relative after 3 rounds), and the strategy is the batched one."""
    runs = {}
    for compile in (False, True):
        cfg = Config(
            algorithm="dfedsam",
            model="cnn-mnist",
            num_clients=3,
            rounds=3,
            local_steps=2,
            batch_size=8,
            forward_strategy="batched",
            compile=compile,
            eval_every=100,
        )
        runs[compile] = sim = Simulation(cfg)
        sim.run()
    assert runs[True].model.compile is True and runs[True].model.strategy == "batched"
    assert _rel(runs[True].x, runs[False].x) < 1e-4


def test_compile_is_refused_where_there_is_nothing_to_compile():
    with pytest.raises(ValueError, match="compile=True compiles the 'batched'.*'mlp'.*hand-written"):
        _model("2nn", (1, 8, 8), compile=True)
    with pytest.raises(ValueError, match="compile=True compiles the 'batched'.*'loop'"):
        _model("cnn-mnist", (1, 8, 8), "loop", compile=True)
    with pytest.raises(ValueError, match="compile=1"):
        _model("cnn-mnist", (1, 8, 8), compile=1)
    assert _model("cnn-mnist", (1, 8, 8), compile="aot_eager").strategy == "batched"  # auto picks batched
    with pytest.raises(ConfigError, match="compile"):
        Config(compile="yes")


def test_cudnn_benchmark_is_on_during_local_training_only(monkeypatch):
    """Config.cudnn_benchmark turns PyTorch's global flag on for each loss_and_grad call and back off after it;
    on the CPU (where cuDNN is not used) the run is the default run bit for bit."""
    seen = []
    real = StackedModel.leaves  # called by loss_and_grad only, in a run without instruments

    def spy(self, flat):
        seen.append(torch.backends.cudnn.benchmark)
        return real(self, flat)

    monkeypatch.setattr(StackedModel, "leaves", spy)
    runs = {}
    for flag in (False, True):
        cfg = Config(
            algorithm="dfedsam",
            model="cnn-mnist",
            num_clients=2,
            rounds=2,
            local_steps=2,
            forward_strategy="batched",
            cudnn_benchmark=flag,
            eval_every=100,
        )
        runs[flag] = sim = Simulation(cfg)
        seen.clear()
        sim.run()
        assert seen and set(seen) == {flag} and torch.backends.cudnn.benchmark is False
    assert torch.equal(runs[True].x, runs[False].x)
    with pytest.raises(ValueError, match="cudnn_benchmark='yes' must be True or False"):
        _model("cnn-mnist", (1, 8, 8), cudnn_benchmark="yes")
