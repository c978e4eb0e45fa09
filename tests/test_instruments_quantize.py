"""The b-bit quantizer, quantized DFedAvgM (``dfedavgm-q``) and the engine's bit accounting.

The per-client reference below is written independently of the engine (as in
tests/test_algorithms.py): one client at a time, an ``nn.Module`` per client,
heavy-ball steps over its parameter list, its own quantizer (a flat vector per
client, step max|v|/(2^{b-1}-1) or the given one, round half up, clip) and
eq. (7) as an explicit sum over neighbours with the engine's mixing matrices.
"""

from __future__ import annotations

import importlib
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from dfl_core import Config, ConfigError, Simulation, operators
from dfl_core.models import build_model
from dfl_core.operators import adaptive_step, decode, encode, message_bits, quantize, quantize_levels

ROUNDS = 3
SMALL = dict(
    dataset="digits",
    train_size=240,
    test_size=60,
    num_clients=6,
    rounds=ROUNDS,
    full_batch=True,
    dtype="float64",
    device="cpu",
    lr=0.2,
    lr_decay=0.9,
    weight_decay=1e-3,
    eval_every=ROUNDS,
    local_steps=3,
    momentum=0.5,
)


# ------------------------------------------------------------------ where the operators live
def test_former_homes_re_export_the_same_operators():
    """The book imports the quantizer from dfl_core.instruments.quantize; those names are dfl_core.operators'."""
    from dfl_core import instruments
    from dfl_core.instruments import robustness

    former = importlib.import_module("dfl_core.instruments.quantize")  # the package's `quantize` is the function

    assert former.__all__ and set(former.__all__) <= set(operators.__all__)
    for name in former.__all__:
        assert getattr(former, name) is getattr(operators, name), name
    assert instruments.quantize is operators.quantize and instruments.encode is operators.encode
    assert robustness.shift_inputs is operators.shift_inputs


def test_algorithms_load_without_instruments_and_operators_need_nothing_of_dfl_core():
    """algorithms → operators ← instruments: importing the algorithms loads no instrument (no cycle left)."""
    code = (
        "import sys, dfl_core.operators; before = {m for m in sys.modules if m.startswith('dfl_core.')}; "
        "import dfl_core.algorithms; "
        "print(sorted(before)); print(sorted(m for m in sys.modules if m.startswith('dfl_core.instruments')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['dfl_core.operators']", out[0]
    assert out[1] == "[]", out[1]


# ------------------------------------------------------------------ the quantizer
@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_error_bounds_inside_the_range(bits):
    low, high = quantize_levels(bits)
    s = 0.37
    gen = torch.Generator().manual_seed(bits)
    v = (low + (high - low) * torch.rand(20_000, generator=gen, dtype=torch.float64)) * s  # [low s, high s]
    det = quantize(v, bits, s)
    sto = quantize(v, bits, s, rounding="stochastic", generator=gen)
    for q in (det, sto):  # values are levels k s, k in [low, high]
        k = q / s
        assert torch.allclose(k, k.round(), atol=1e-9) and k.min() >= low and k.max() <= high
    assert float((det - v).abs().max()) <= s / 2 * (1 + 1e-12)
    assert float((sto - v).abs().max()) < s
    # the bounds are tight: errors come close to s/2 (deterministic) and to s (stochastic)
    assert float((det - v).abs().max()) > 0.45 * s and float((sto - v).abs().max()) > 0.9 * s


def test_values_outside_the_range_saturate():
    q = quantize(torch.tensor([-100.0, -0.3, 0.3, 100.0], dtype=torch.float64), 4, 0.1)
    assert q.tolist() == pytest.approx([-0.8, -0.3, 0.3, 0.7])  # levels -8..7 times 0.1


def test_adaptive_step_maps_each_rows_largest_entry_to_the_top_level():
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(5, 1000, generator=gen, dtype=torch.float64) * torch.tensor([[1e-4], [1], [3], [0], [1e3]])
    bits = 8
    s = adaptive_step(v, bits)  # (5, 1), one step per message
    assert s.shape == (5, 1) and float(s[3]) == 1.0  # an all-zero row: any step
    q = quantize(v, bits)
    assert float(((q - v).abs() / s).max()) <= 0.5 + 1e-9  # the clip never binds
    assert torch.equal(q[3], v[3])
    top = v.abs().amax(1)
    assert torch.allclose(q.abs().amax(1), top, rtol=1e-12)


def test_stochastic_rounding_is_unbiased():
    s, n = 0.25, 40_000
    v = torch.linspace(-1.9, 1.7, 37, dtype=torch.float64) + 0.013  # off the grid, inside [-2, 1.75]
    draws = quantize(v.expand(n, -1), 4, s, rounding="stochastic", generator=torch.Generator().manual_seed(1))
    frac = v / s - torch.floor(v / s)  # P(round up)
    se = s * torch.sqrt(frac * (1 - frac)) / math.sqrt(n)  # standard error of the mean
    z = (draws.mean(0) - v) / se
    assert float(z.abs().max()) < 5, f"largest |bias| is {float(z.abs().max()):.2f} standard errors"
    det_bias = (quantize(v, 4, s) - v).abs().max()
    assert float(det_bias) > 0.1 * s  # the deterministic rule is biased


@pytest.mark.parametrize("bits, dtype", [(2, torch.int8), (8, torch.int8), (12, torch.int16), (32, torch.int32)])
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_encode_decode_round_trip(bits, dtype, rounding):
    v = torch.randn(3, 500, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    msg = encode(v, bits, rounding=rounding, generator=torch.Generator().manual_seed(3))
    q = quantize(v, bits, rounding=rounding, generator=torch.Generator().manual_seed(3))
    assert msg.payload.dtype == dtype and msg.scale.shape == (3, 1)
    low, high = quantize_levels(bits)
    assert int(msg.payload.min()) >= low and int(msg.payload.max()) <= high
    assert torch.equal(decode(msg), q)
    assert msg.num_bits == message_bits(1500, bits) == 1500 * bits + 32


def test_bad_arguments_are_refused():
    v = torch.ones(3)
    for bits in (1, 33, 2.5, True):
        with pytest.raises(ValueError, match="bits"):
            quantize(v, bits)
    with pytest.raises(ValueError, match="step"):
        quantize(v, 8, 0.0)
    with pytest.raises(TypeError):
        quantize(torch.ones(3, dtype=torch.int64), 8, 1.0)


# ------------------------------------------------- the two readings of the deterministic rule
# b = 3 bits: levels k in {-4, ..., 3}; s = 0.5, so the representable values are -2.0, -1.5, ..., 1.5.
# Every v is a dyadic number, so v / s is exact and the expected levels are worked out by hand:
#      v:   -2.25  -2.0  -1.25  -0.25  0.0  0.125  0.25  0.75  1.5  1.75  9.0
#  v / s:   -4.5   -4    -2.5   -0.5   0    0.25   0.5   1.5   3    3.5   18
HAND_V = [-2.25, -2.0, -1.25, -0.25, 0.0, 0.125, 0.25, 0.75, 1.5, 1.75, 9.0]
HAND = {
    # nearest, ties up: floor(v/s + 1/2), then clip to [-4, 3]
    "nearest": [-4, -4, -2, 0, 0, 0, 1, 2, 3, 3, 3],
    # floor: the k with k s <= v < (k + 1) s, then clip to [-4, 3]
    "floor": [-4, -4, -3, -1, 0, 0, 0, 1, 3, 3, 3],
}


@pytest.mark.parametrize("rounding", ["nearest", "floor"])
def test_hand_worked_levels_of_both_readings(rounding):
    v = torch.tensor(HAND_V, dtype=torch.float64)
    msg = encode(v, 3, 0.5, rounding=rounding)
    assert msg.payload.tolist() == HAND[rounding]
    assert quantize(v, 3, 0.5, rounding=rounding).tolist() == [0.5 * k for k in HAND[rounding]]
    assert quantize(v.float(), 3, 0.5, rounding=rounding).tolist() == [0.5 * k for k in HAND[rounding]]


def test_nearest_is_the_default_and_the_floor_reading_differs_from_it():
    v = torch.tensor(HAND_V, dtype=torch.float64)
    assert torch.equal(quantize(v, 3, 0.5), quantize(v, 3, 0.5, rounding="nearest"))
    assert not torch.equal(quantize(v, 3, 0.5), quantize(v, 3, 0.5, rounding="floor"))


@pytest.mark.parametrize("bits", [2, 3, 8, 16])
@pytest.mark.parametrize("s", [0.5, 0.37, 0.1, 1e-3])
def test_error_bounds_of_both_readings_inside_their_ranges(bits, s):
    """floor: 0 <= v - Q(v) < s on [-L s, L s); nearest: |Q(v) - v| <= s/2 on [-L s, (L - 1) s]."""
    low, high = quantize_levels(bits)
    gen = torch.Generator().manual_seed(bits)
    u = low + (high + 1 - low) * torch.rand(20_000, generator=gen, dtype=torch.float64)  # [low, high + 1)
    v = u * s
    floor_q = quantize(v, bits, s, rounding="floor")
    tol = 1e-9 * s
    assert float((v - floor_q).min()) >= -tol and float((v - floor_q).max()) < s  # rounds down, by < s
    assert float((v - floor_q).max()) > 0.9 * s  # ... and the bound is tight
    inside = v <= high * s
    near_q = quantize(v[inside], bits, s, rounding="nearest")
    assert float((near_q - v[inside]).abs().max()) <= s / 2 + tol
    for q in (floor_q, near_q):  # values are levels k s
        k = q / s
        assert torch.allclose(k, k.round(), atol=1e-6) and k.round().min() >= low and k.round().max() <= high


@pytest.mark.parametrize("rounding", ["nearest", "floor"])
@pytest.mark.parametrize("s", [0.1, 0.37, 0.3 / 127, 1 / 3])
def test_a_level_is_its_own_quantization_despite_float_division(rounding, s):
    """k s / s can come out as k - 1e-16; the floor reading must still give level k, not k - 1."""
    low, high = quantize_levels(8)
    levels = torch.arange(low, high + 1, dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        q = levels.to(dtype) * torch.tensor(s, dtype=dtype)
        assert encode(q, 8, s, rounding=rounding).payload.tolist() == levels.int().tolist(), (dtype, s)
        assert torch.equal(
            quantize(quantize(q, 8, s, rounding=rounding), 8, s, rounding=rounding),
            quantize(q, 8, s, rounding=rounding),
        )


def test_floor_with_the_adaptive_step_puts_each_rows_largest_entry_on_the_top_level():
    gen = torch.Generator().manual_seed(5)
    v = torch.randn(6, 999, generator=gen, dtype=torch.float64) * torch.tensor([[1e-4], [0.3], [1], [3], [0], [1e3]])
    for bits in (2, 4, 8):
        msg = encode(v, bits, rounding="floor")
        s = msg.scale
        q = decode(msg)
        top = v.abs().amax(1)
        assert torch.equal(
            msg.payload.abs().amax(1)[[0, 1, 2, 3, 5]].long(), torch.full((5,), quantize_levels(bits)[1])
        )
        assert float(((v - q) / s).min()) >= -1e-9 and float(((v - q) / s).max()) < 1  # below v by < s
        assert torch.allclose(q.abs().amax(1)[top > 0], top[top > 0], rtol=1e-12)


@pytest.mark.parametrize("rounding", ["nearest", "floor", "stochastic"])
def test_encode_decode_round_trip_for_every_rounding(rounding):
    v = torch.randn(3, 200, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    msg = encode(v, 6, rounding=rounding, generator=torch.Generator().manual_seed(3))
    q = quantize(v, 6, rounding=rounding, generator=torch.Generator().manual_seed(3))
    assert torch.equal(decode(msg), q)


def test_the_legacy_stochastic_argument_is_gone():
    """``rounding="stochastic"`` is the one spelling; the older ``stochastic=True`` is refused."""
    v = torch.randn(500, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for f in (quantize, encode):
        with pytest.raises(TypeError, match="stochastic"):
            f(v, 4, 0.3, stochastic=True, generator=torch.Generator().manual_seed(9))


def test_bad_rounding_is_refused_naming_the_choices():
    v = torch.ones(3)
    with pytest.raises(ValueError, match=r"rounding='up'.*'nearest', 'floor', 'stochastic'"):
        quantize(v, 8, rounding="up")


# --------------------------------------------------------------- the config fields
def test_config_fields_belong_to_the_gossiping_algorithms():
    cfg = Config(algorithm="dfedavgm-q")
    resolved = (
        cfg.params.quant_bits,
        cfg.params.quant_step,
        cfg.params.quant_stochastic,
        cfg.params.momentum,
        cfg.params.gossip_steps,
        cfg.params.quant_mixing,
        cfg.params.consensus_step,
    )
    assert resolved == (16, None, False, 0.9, 1, "public-copies", 1.0)
    assert Config(algorithm="dfedavgm", quant_bits=8).params.uses_public_copies  # compressed gossip
    assert Config(algorithm="dfedsam").params.quant_bits is None  # exact by default
    for algorithm in ("dispfl", "fedavg"):  # no r.gossip: the field would be ignored
        with pytest.raises(ConfigError, match="quant_bits=8 is not used by algorithm"):
            Config(algorithm=algorithm, quant_bits=8)
    with pytest.raises(ConfigError, match="quant_mixing=differences-only is not used"):
        Config(algorithm="dfedsam", quant_bits=8, quant_mixing="differences-only")
    for bad in (
        dict(quant_bits=1),
        dict(quant_bits=33),
        dict(quant_step=0.0),
        dict(quant_stochastic=1),
        dict(gossip_steps=2),
    ):
        with pytest.raises(ConfigError):
            Config(algorithm="dfedavgm-q", **bad)


# ------------------------------------------------------- quantized DFedAvgM itself
def reference_run(sim: Simulation, rounds: int) -> torch.Tensor:
    """Replay dfedavgm-q one client at a time (deterministic rounding); returns ``(m, d)``. Its
    ``"differences-only"`` reading, x + W·Q(z − x), or ``"exact-neighbour-models"``, W·(x + Q(z − x))."""
    cfg = sim.config
    ds, m = sim.data.dataset, cfg.num_clients
    x_train, y_train = sim.data.train.x, sim.data.train.y
    parts = sim.data.train.client_indices()
    nets = [build_model(cfg.model, ds.input_shape, ds.num_classes).to(torch.float64) for _ in range(m)]
    shapes = [p.shape for p in nets[0].parameters()]

    def split(flat):
        out, o = [], 0
        for sh in shapes:
            out.append(flat[o : o + sh.numel()].view(sh))
            o += sh.numel()
        return out

    def grad(i, params):
        with torch.no_grad():
            for p, v in zip(nets[i].parameters(), params):
                p.copy_(v)
        idx = torch.as_tensor(parts[i])
        loss = F.cross_entropy(nets[i](x_train[idx]), y_train[idx])
        return [g.detach() for g in torch.autograd.grad(loss, list(nets[i].parameters()))]

    def q(v):  # b-bit, round half up, clipped
        low, high = -(2 ** (cfg.params.quant_bits - 1)), 2 ** (cfg.params.quant_bits - 1) - 1
        s = cfg.params.quant_step or float(v.abs().max()) / high
        return s * torch.clamp(torch.floor(v / s + 0.5), low, high)

    xs = [sim.x0[i].clone() for i in range(m)]
    for t in range(rounds):
        lr = cfg.lr * cfg.lr_decay**t
        sent = []
        for i in range(m):
            y = [p.clone() for p in split(xs[i])]
            buf = [torch.zeros_like(p) for p in y]
            for _ in range(cfg.params.local_steps):
                g = [gj + cfg.weight_decay * yj for gj, yj in zip(grad(i, y), y)]
                buf = [cfg.params.momentum * bj + gj for bj, gj in zip(buf, g)]
                y = [yj - lr * bj for yj, bj in zip(y, buf)]
            sent.append(q(torch.cat([p.reshape(-1) for p in y]) - xs[i]))  # Q(z_i - x_i)
        (M,) = sim.matrices(t)
        if cfg.params.quant_mixing == "exact-neighbour-models":
            moved = [xs[j] + sent[j] for j in range(m)]
            xs = [sum(M.W[i, j] * moved[j] for j in range(m) if M.W[i, j] != 0) for i in range(m)]
        else:
            xs = [xs[i] + sum(M.W[i, j] * sent[j] for j in range(m) if M.W[i, j] != 0) for i in range(m)]
    return torch.stack(xs)


@pytest.mark.parametrize(
    "quant", [dict(quant_bits=8), dict(quant_bits=4, quant_step=2e-3)], ids=["8-bit-adaptive", "4-bit-fixed-step"]
)
@pytest.mark.parametrize("mixing", ["differences-only", "exact-neighbour-models"])
@pytest.mark.parametrize("topology", ["ring", "random-symmetric"])
def test_engine_equals_per_client_reference(topology, quant, mixing):
    cfg = Config(algorithm="dfedavgm-q", topology=topology, max_degree=4, quant_mixing=mixing, **SMALL, **quant)
    sim = Simulation(cfg)
    sim.run()
    err = float((sim.x - reference_run(sim, ROUNDS)).abs().max())
    assert err < 1e-10, f"max |engine - reference| = {err:.2e}"
    fine = Simulation(cfg.replace(quant_bits=32, quant_step=1e-9))  # eq. (7) without quantization error
    fine.run()
    assert float((sim.x - fine.x).abs().max()) > 1e-4  # quantization did something


def _pair(rounds: int, topology: str, **quant):
    base = dict(SMALL, rounds=rounds, eval_every=rounds)
    q = Simulation(
        Config(
            algorithm="dfedavgm-q", topology=topology, quant_bits=32, quant_mixing="differences-only", **quant, **base
        )
    )
    p = Simulation(Config(algorithm="dfedavgm", topology=topology, **base))
    q.run(), p.run()
    return float((q.x - p.x).abs().max())


def test_32_bits_with_a_tiny_step_equals_dfedavgm():
    # s = 1e-9: range ±2.1, rounding error ≤ 5e-10 per coordinate and round
    assert _pair(1, "ring", quant_step=1e-9) < 1e-9  # round 0 starts in consensus: W x = x
    assert _pair(ROUNDS, "complete", quant_step=1e-9) < 1e-8  # the complete graph keeps consensus
    assert _pair(ROUNDS, "complete") < 1e-8  # adaptive step at b = 32 is tinier still


def test_eq7_is_not_dfedavgm_once_clients_disagree():
    """x^{t+1} = W z + (I - W) x: off consensus the old disagreement is carried over (see the docstring)."""
    assert _pair(ROUNDS, "ring", quant_step=1e-9) > 1e-6


def test_stochastic_rounding_is_reproducible_and_differs_from_nearest():
    cfg = Config(algorithm="dfedavgm-q", quant_bits=4, quant_stochastic=True, **SMALL)
    a, b, c = Simulation(cfg), Simulation(cfg), Simulation(cfg.replace(quant_stochastic=False))
    a.run(), b.run(), c.run()
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, c.x)


# ------------------------------------------------------------------------- bits
@pytest.mark.parametrize(
    "algorithm, bits_per_message",
    [("dfedavg", lambda d: d * 32), ("dfedavgm-q", lambda d: d * 16 + 32), ("dfedavgm-q-3bit", lambda d: d * 3 + 32)],
)
def test_bits_per_round_on_a_ring(algorithm, bits_per_message):
    extra = dict(quant_bits=3) if algorithm.endswith("3bit") else {}
    cfg = Config(
        algorithm=algorithm.removesuffix("-3bit"),
        topology="ring",
        **dict(SMALL, rounds=2, eval_every=1, momentum=None),
        **extra,
    )
    sim = Simulation(cfg)
    h = sim.run()
    m, d = cfg.num_clients, sim.model.d
    per_round = 2 * m * bits_per_message(d)  # 2m messages on a ring
    assert h.series("bits_last_round") == [0, per_round, per_round]
    assert h.series("bits_sent") == [0, per_round, 2 * per_round]
    assert h.series("transmissions") == [0, 2 * m, 4 * m]
    assert h.series("bytes_sent") == [b // 8 for b in h.series("bits_sent")]


def test_bits_of_centralized_and_of_bits_per_param():
    sim = Simulation(Config(algorithm="fedavg", clients_per_round=3, **dict(SMALL, rounds=2, momentum=None)))
    h = sim.run()
    d = sim.model.d
    assert h.final["transmissions"] == 2 * 2 * 3  # 3 clients, down and up, 2 rounds
    assert h.final["bits_sent"] == 12 * d * 32 and h.final["bits_last_round"] == 6 * d * 32
    h16 = Simulation(
        Config(algorithm="dfedavg", bits_per_param=16, **dict(SMALL, rounds=1, eval_every=1, momentum=None))
    ).run()
    assert h16.final["bits_sent"] == 2 * 6 * d * 16 and h16.final["bytes_sent"] == 2 * 6 * d * 2


def test_models_mixing_without_quantization_is_dfedavgm_on_a_ring():
    """'exact-neighbour-models' averages rebuilt neighbour models: with b = 32 and a tiny step it is DFedAvgM."""
    from dfl_core import Config, Simulation

    base = dict(
        dataset="digits",
        train_size=240,
        test_size=60,
        num_clients=6,
        rounds=3,
        full_batch=True,
        dtype="float64",
        device="cpu",
        topology="ring",
        local_steps=2,
        eval_every=3,
    )
    plain = Simulation(Config(algorithm="dfedavgm", **base))
    quant = Simulation(
        Config(algorithm="dfedavgm-q", quant_bits=32, quant_step=1e-9, quant_mixing="exact-neighbour-models", **base)
    )
    plain.run(), quant.run()
    assert float((plain.x - quant.x).abs().max()) < 1e-7
    diff = Simulation(
        Config(algorithm="dfedavgm-q", quant_bits=32, quant_step=1e-9, quant_mixing="differences-only", **base)
    )
    diff.run()
    assert float((plain.x - diff.x).abs().max()) > 1e-4  # the 'differences-only' reading is not DFedAvgM here


# ------------------------------------------------------------------ bit packing and sliced noise
@pytest.mark.parametrize("bits", [2, 3, 4, 5, 7, 8, 12, 16, 31, 32])
def test_packed_levels_take_b_bits_each_and_unpack_to_themselves(bits):
    """pack_levels: ⌈d·b/8⌉ bytes per message (under 8 bits of padding), the levels back exactly."""
    low, high = quantize_levels(bits)
    gen = torch.Generator().manual_seed(bits)
    for d in (1, 3, 8, 101):
        levels = torch.randint(low, high + 1, (3, d), generator=gen, dtype=torch.int64)
        levels[0, 0], levels[1, -1] = low, high  # both ends of the range
        packed = operators.pack_levels(levels, bits)
        assert packed.dtype == torch.uint8 and packed.shape == (3, math.ceil(d * bits / 8))
        assert 0 <= 8 * packed.shape[1] - d * bits < 8
        back = operators.unpack_levels(packed, bits, d)
        assert back.dtype == encode(torch.zeros(1, 1), bits).payload.dtype and torch.equal(back.long(), levels)


def test_packing_is_least_significant_bit_first_in_twos_complement():
    # b = 2: 1 → 01, -1 → 11, 0 → 00, -2 → 10, first level in the lowest bits: 0b10_00_11_01 = 141
    assert operators.pack_levels(torch.tensor([[1, -1, 0, -2]]), 2).tolist() == [[141]]
    assert operators.pack_levels(torch.tensor([[1, -1, 0]]), 2).tolist() == [[13]]  # zero padding
    # b = 3: levels 3 (011), -4 (100), -1 (111): bits 011 001 111 → bytes 0b11_100_011, 0b0000000_1
    assert operators.pack_levels(torch.tensor([[3, -4, -1]]), 3).tolist() == [[0b11100011, 1]]
    # 8, 16 and 32 bits: the levels' own little-endian bytes, as the generic packing gives them
    levels = torch.tensor([[-2, 300, -32768]], dtype=torch.int16)
    assert operators.pack_levels(levels, 16).tolist() == [[254, 255, 44, 1, 0, 128]]


def test_packing_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match=r"levels outside \[-4, 3\] cannot be packed to 3 bits"):
        operators.pack_levels(torch.tensor([[4]]), 3)
    with pytest.raises(TypeError, match="integer levels"):
        operators.pack_levels(torch.tensor([[1.0]]), 3)
    with pytest.raises(ValueError, match="2 bytes per message, but 6 levels of 3 bits take 3"):
        operators.unpack_levels(torch.zeros(1, 2, dtype=torch.uint8), 3, 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bits", [3, 8, 32])
def test_encoded_and_packed_messages_decode_to_the_quantized_values(dtype, bits):
    """decode(encode(v)) == quantize(v) bit for bit, through the packed bytes too; b = 32 included in
    float32 (whose 2^31 - 1 rounds up to 2^31: the top level is the largest float32 below it)."""
    v = torch.randn(4, 37, generator=torch.Generator().manual_seed(bits), dtype=dtype)
    for rounding in ("nearest", "floor"):
        q = quantize(v, bits, rounding=rounding)
        message = encode(v, bits, rounding=rounding)
        assert torch.equal(decode(message), q)
        levels = operators.unpack_levels(operators.pack_levels(message.payload, bits), bits, v.shape[1])
        assert torch.equal(levels.to(dtype) * message.scale, q)
        assert int(message.payload.max()) <= quantize_levels(bits)[1]


def test_stochastic_rounding_with_a_sliced_draw_equals_the_whole_draw():
    """A process holding rows 2..3 of an (m, d) message slices the (m, d) draw: its rows equal the whole's."""
    v = torch.randn(6, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    whole = quantize(v, 4, rounding="stochastic", generator=torch.Generator().manual_seed(7))
    noise = torch.rand(v.shape, generator=torch.Generator().manual_seed(7), dtype=v.dtype)
    rows = quantize(v[2:4], 4, rounding="stochastic", noise=noise[2:4])
    assert torch.equal(rows, whole[2:4])
    assert torch.equal(decode(encode(v[2:4], 4, rounding="stochastic", noise=noise[2:4])), rows)
    with pytest.raises(ValueError, match=r"noise has shape \(6, 50\), the values \(2, 50\)"):
        quantize(v[2:4], 4, rounding="stochastic", noise=noise)
