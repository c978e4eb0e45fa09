"""Compressed gossip with public copies (CHOCO-Gossip, Koloskova et al. 2019) against a per-client replay.

The reference replays every client's local training with its own ``nn.Module`` (tests/test_algorithms.py) and
gossips one client and one neighbour at a time: client i quantizes x_i − x̂_i with a quantizer written here
(b-bit levels k·s, s = max|v|/(2^{b−1} − 1) per message), every holder of x̂_i adds the message, and
x_i += γ Σ_j w_ij (x̂_j − x̂_i). Stochastic rounding uses the round's ``"quantize"`` stream, one (m, d) draw per
gossip step, as the engine documents; the levels are computed here.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from dfl_core import Config, Simulation
from dfl_core.config import ConfigError
from dfl_core.operators import message_bits
from dfl_core.rng import round_generator
from dfl_book.showcase.runner import stored_config
from test_algorithms import SMALL, flat, reference_run

ROUNDS = SMALL["rounds"]


def quantize_row(v: torch.Tensor, bits: int, rounding: str, noise: torch.Tensor | None) -> torch.Tensor:
    """One message: every coordinate of ``v`` on a b-bit level k·s (the adaptive step), as the engine documents."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    amax = float(v.abs().max())
    s = amax / high if amax > 0 else 1.0
    u = v / s
    if noise is not None:  # up with probability u − ⌊u⌋
        k = torch.floor(u) + (noise < u - torch.floor(u)).to(v.dtype)
    elif rounding == "floor":
        k = torch.floor(u + 1e-12)  # a level computed a hair below itself is that level
    else:
        k = torch.floor(u + 0.5)
    return s * torch.clamp(k, low, high)


def choco_reference(sim: Simulation):
    """The gossip of ``reference_run``, compressed: per client and per neighbour, with public copies."""
    cfg = sim.config
    m = cfg.num_clients
    public = [sim.x0[i].clone() for i in range(m)]  # x̂⁰ = x⁰: every client starts from the same model

    def unflat(vector, like):
        out, offset = [], 0
        for p in like:
            out.append(vector[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        return out

    def gossip(t, models, matrices):
        nonlocal public
        gen = round_generator(cfg.seed, "quantize", t) if cfg.params.quant_stochastic else None
        xs = [torch.cat([p.reshape(-1) for p in ps]) for ps in models]
        for M in matrices:
            W = M.W
            noise = torch.rand((m, xs[0].numel()), generator=gen, dtype=xs[0].dtype) if gen is not None else None
            sent = [
                quantize_row(
                    xs[i] - public[i],
                    cfg.params.quant_bits,
                    cfg.params.quant_rounding,
                    None if noise is None else noise[i],
                )
                for i in range(m)
            ]
            public = [public[i] + sent[i] for i in range(m)]
            xs = [
                xs[i]
                + cfg.params.consensus_step
                * sum(W[i, j] * (public[j] - public[i]) for j in range(m) if j != i and W[i, j] != 0)
                for i in range(m)
            ]
        return [unflat(xs[i], models[i]) for i in range(m)]

    return gossip


CASES = {
    "dfedavg, 4 bits": dict(algorithm="dfedavg", quant_bits=4, local_steps=3),
    "dfedavgm-q (default reading), 8 bits rounded down": dict(
        algorithm="dfedavgm-q", quant_bits=8, quant_rounding="floor", local_steps=2
    ),
    "dfedsam-mgs Q = 3, 3 bits, γ = 0.6": dict(
        algorithm="dfedsam-mgs", quant_bits=3, gossip_steps=3, rho=0.05, consensus_step=0.6, local_steps=2
    ),
    "dpsgd, 5 bits stochastic": dict(algorithm="dpsgd", quant_bits=5, quant_stochastic=True),
    "dfedsam, 6 bits stochastic, grid": dict(
        algorithm="dfedsam", quant_bits=6, quant_stochastic=True, rho=0.05, topology="grid", local_steps=2
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_engine_equals_per_client_reference(case):
    cfg = Config(**{**SMALL, **CASES[case]})
    sim = Simulation(cfg)
    sim.run()
    assert sim.config.params.uses_public_copies and sim.run_state.gossip_state.shape == sim.x.shape
    ref = flat(reference_run(sim, ROUNDS, gossip=choco_reference(sim)))
    err = float((sim.x - ref).abs().max())
    assert err < 1e-10, f"{case}: max |engine - reference| = {err:.2e}"
    exact = Simulation(cfg.replace(quant_bits=None, quant_rounding=None, quant_stochastic=None, consensus_step=None))
    exact.run()
    assert float((sim.x - exact.x).abs().max()) > 1e-6  # compression did something


def test_exact_messages_and_gamma_one_are_exact_gossip_even_off_consensus():
    """Unlike the 'differences-only' reading, public copies average the disagreement away: with 32-bit levels
    on a tiny step, every round equals DFedAvgM's (the clients disagree from round 1 on, on a ring)."""
    base = dict(SMALL, topology="ring", local_steps=2, rounds=4, eval_every=4)
    plain = Simulation(Config(algorithm="dfedavgm", **base))
    choco = Simulation(Config(algorithm="dfedavgm-q", quant_bits=32, quant_step=1e-9, **base))
    eq7 = Simulation(
        Config(algorithm="dfedavgm-q", quant_bits=32, quant_step=1e-9, quant_mixing="differences-only", **base)
    )
    for s in (plain, choco, eq7):
        s.run()
    assert float((plain.x - choco.x).abs().max()) < 1e-8
    assert float((plain.x - eq7.x).abs().max()) > 1e-4


def test_every_gossip_step_sends_and_is_charged_d_b_plus_32():
    cfg = Config(
        **{**SMALL, "algorithm": "dfedsam-mgs", "gossip_steps": 3, "quant_bits": 4, "rounds": 2, "eval_every": 1}
    )
    sim = Simulation(cfg)
    h = sim.run()
    m, d = cfg.num_clients, sim.model.d
    per_round = 3 * 2 * m * message_bits(d, 4)  # Q steps × 2m messages on a ring × (4d + 32)
    assert message_bits(d, 4) == 4 * d + 32
    assert h.series("bits_last_round") == [0, per_round, per_round]
    assert h.series("transmissions") == [0, 6 * m, 12 * m]


def test_public_copies_are_checkpointed_and_a_resumed_run_is_bit_identical(tmp_path):
    cfg = Config(
        **{
            **SMALL,
            "algorithm": "dfedsam",
            "quant_bits": 4,
            "quant_stochastic": True,
            "rounds": 4,
            "eval_every": 1,
            "dtype": "float32",
        }
    )
    whole = Simulation(cfg)
    whole.run()
    first = Simulation(cfg.replace(rounds=2))
    first.run(checkpoint=tmp_path / "ck.pt", checkpoint_every=1)
    saved = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert saved["gossip_state"].shape == first.x.shape  # x̂, saved as gossip's state
    resumed = Simulation.resume(tmp_path / "ck.pt", cfg)
    resumed.run()
    assert torch.equal(resumed.x, whole.x)
    assert torch.equal(resumed.run_state.gossip_state, whole.run_state.gossip_state)
    assert resumed.history.records[-1]["bits_sent"] == whole.history.records[-1]["bits_sent"]


def test_public_copies_start_at_zero_when_the_clients_start_apart():
    sim = Simulation(Config(**{**SMALL, "algorithm": "dfedavg", "quant_bits": 8, "same_init": False}))
    assert torch.equal(sim.run_state.gossip_state, torch.zeros_like(sim.x))
    assert torch.equal(
        Simulation(Config(**{**SMALL, "algorithm": "dfedavg", "quant_bits": 8})).run_state.gossip_state,
        Simulation(Config(**{**SMALL, "algorithm": "dfedavg"})).x,
    )
    assert Simulation(Config(**{**SMALL, "algorithm": "dfedavg"})).run_state.gossip_state is None


def test_bad_combinations_are_refused_naming_the_values():
    with pytest.raises(ConfigError, match=r"time-varying topology 'random-symmetric'.*ring"):
        Config(algorithm="dfedavg", quant_bits=8, topology="random-symmetric")
    with pytest.raises(ConfigError, match=r"quant_step=0.01, consensus_step=0.5 set, but quant_bits is not"):
        Config(algorithm="dfedsam", quant_step=0.01, consensus_step=0.5)
    with pytest.raises(ConfigError, match=r"consensus_step must be in \(0.0, 1.0\]"):
        Config(algorithm="dfedavg", quant_bits=8, consensus_step=0.0)
    # the other two readings send no public copies, so a time-varying graph is fine for them
    Config(algorithm="dfedavgm-q", quant_mixing="differences-only", topology="random-symmetric")


def test_the_untransmittable_reading_says_so_on_stderr_and_in_its_results(capsys):
    from dfl_core.engine.simulation import announced_notes
    from dfl_core.results import History

    announced_notes.clear()  # this process may have said it already

    sim = Simulation(
        Config(
            **{
                **SMALL,
                "algorithm": "dfedavgm-q",
                "quant_bits": 8,
                "quant_mixing": "exact-neighbour-models",
                "rounds": 1,
            }
        )
    )
    err = capsys.readouterr().err
    assert "cannot be sent as counted" in err and "exact-neighbour-models" in err
    h = sim.run()
    assert h.notes and "cannot be sent as counted" in h.notes[0]
    again = Simulation(sim.config)  # said once per process, kept in every history
    assert capsys.readouterr().err == "" and again.history.notes == h.notes
    assert History.from_dict(json.loads(json.dumps(h.to_dict()))).notes == h.notes
    Simulation(Config(**{**SMALL, "algorithm": "dfedavgm-q", "quant_bits": 8, "rounds": 1}))
    assert capsys.readouterr().err == ""  # the default reading sends what it counts


def test_former_reading_names_convert():
    """Results files written before the readings were renamed ('models', 'difference') convert to the current
    names (convert_config, the convert-results command); the names themselves are refused now."""
    from dfl_core.results import convert_config

    old = Config(algorithm="dfedavgm-q", quant_bits=8).to_dict()
    old.pop("consensus_step")  # a file written before the field existed
    for former, now in (("models", "exact-neighbour-models"), ("difference", "differences-only")):
        converted = convert_config(dict(old, quant_mixing=former))
        assert converted["quant_mixing"] == now and converted["consensus_step"] == 1.0
        assert stored_config({"config": converted}) == converted
        with pytest.raises(ConfigError, match=f"unknown quant_mixing '{former}'"):
            Config.from_dict(dict(old, quant_mixing=former))
    with pytest.raises(ConfigError, match="unknown quant_mixing 'models'"):
        Config(algorithm="dfedavgm-q", quant_mixing="models")


def test_coarse_messages_need_a_smaller_consensus_step():
    """2-bit messages on the adaptive step zero most coordinates: at γ = 1 the copies lag and the models drift
    apart; a smaller γ keeps them together (Koloskova et al.: γ must shrink with the compression)."""
    base = dict(SMALL, algorithm="dfedavg", quant_bits=2, rounds=12, eval_every=12, local_steps=2)
    cd = {g: Simulation(Config(**base, consensus_step=g)).run().final["consensus_distance"] for g in (1.0, 0.1)}
    assert math.isfinite(cd[0.1]) and cd[0.1] < cd[1.0], cd
