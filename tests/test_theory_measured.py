"""theory.measured: dfl_core runs on softmax regression against DFedSAM's bounds; the constants against brute force."""

import math

import numpy as np
import pytest
import torch

from dfl_core import Config, Simulation
from dfl_core.config import ConfigError
from dfl_core.models import MODEL_HELP, MODELS, build_model
from theory import problems as pr
from theory.measured import (
    REQUIRED_SETTINGS,
    format_report,
    measure_against_bounds,
    objective_and_gradients,
    simulation_constants,
    theory_config,
)

BASE = dict(dataset="digits", train_size=300, num_clients=8, local_steps=2, rounds=20)


def _sim(**kw) -> Simulation:
    cfg, _ = theory_config(Config(**{**BASE, "algorithm": "dfedsam", **kw}))
    return Simulation(cfg)


def _numpy_softmax_parts(sim: Simulation):
    """Each client's inputs [x, 1] (n_i, p+1) and labels, straight from the data tensors."""
    train = sim.data.train
    x = train.x.double().cpu().numpy().reshape(len(train.x), -1)
    y = train.y.cpu().numpy()
    return [(np.hstack([x[i], np.ones((len(i), 1))]), y[i]) for i in train.client_indices()]


def _numpy_f_grad(V: np.ndarray, parts) -> tuple[float, np.ndarray]:
    """f = (1/m)Σ_i mean_j CE(V x̃_ij, y_ij) and ∇f w.r.t. V = [W | b] (C, p+1), independent of torch."""
    f, g = 0.0, np.zeros_like(V)
    for xt, y in parts:
        z = xt @ V.T
        z -= z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        f += -logp[np.arange(len(y)), y].mean()
        r = np.exp(logp)
        r[np.arange(len(y)), y] -= 1.0
        g += r.T @ xt / len(y)
    return f / len(parts), g / len(parts)


def _flat_to_V(flat: np.ndarray, C: int) -> np.ndarray:
    """torch's layout (weight row by row, then bias) → V = [W | b]."""
    W = flat[:-C].reshape(C, -1)
    return np.hstack([W, flat[-C:, None]])


def _V_to_flat(V: np.ndarray) -> np.ndarray:
    return np.concatenate([V[:, :-1].reshape(-1), V[:, -1]])


# ------------------------------------------------------------------ the model
def test_linear_model_is_softmax_regression():
    assert "linear" in MODELS and "softmax regression" in MODEL_HELP["linear"]
    net = build_model("linear", (1, 8, 8), 10)
    assert sum(p.numel() for p in net.parameters()) == 64 * 10 + 10
    x = torch.randn(5, 1, 8, 8)
    lin = net[1]
    assert torch.allclose(net(x), x.flatten(1) @ lin.weight.T + lin.bias)


# ------------------------------------------------------------------ constants
def test_softmax_L_bound_against_autograd_hessian():
    sim = _sim(dirichlet_method="per-class")
    c = simulation_constants(sim)
    parts = _numpy_softmax_parts(sim)
    Li = [np.linalg.eigvalsh(xt.T @ xt).max() / (2 * len(xt)) for xt, _ in parts]
    assert c.L == pytest.approx(max(Li), rel=1e-12)
    i = int(np.argmin([len(y) for _, y in parts]))  # a small client: its Hessian is cheap
    train = sim.data.train
    idx = torch.as_tensor(train.client_indices()[i])
    xi, yi = train.x[idx], train.y[idx]

    def fi(flat):
        return torch.nn.functional.cross_entropy(sim.model.forward_one(flat, xi), yi)

    rng = np.random.default_rng(0)
    two_class = torch.zeros(sim.model.d, dtype=torch.float64)
    two_class[-10:-8] = 40.0  # bias: p = (1/2, 1/2, 0, ...) on every sample
    points = {
        "x0": sim.x0[0],
        "random": torch.as_tensor(rng.standard_normal(sim.model.d) * 0.3),
        "two-class": two_class,
    }
    ratios = {}
    for name, p in points.items():
        H = torch.autograd.functional.hessian(fi, p.clone(), vectorize=True).numpy()
        top = np.linalg.eigvalsh((H + H.T) / 2).max()
        assert top <= Li[i] * (1 + 1e-12), name
        ratios[name] = Li[i] / top
    assert ratios["x0"] < 10, ratios  # near uniform p: about C/2 = 5x loose
    assert ratios["two-class"] == pytest.approx(1.0, abs=1e-9)  # the 1/2 of ‖diag(p) − ppᵀ‖ is attained
    print(f"L_i bound / Hessian top eigenvalue: {ratios}")


def test_softmax_gradient_bounds_hold():
    sim = _sim(dirichlet_method="per-class")
    c = simulation_constants(sim)
    parts = _numpy_softmax_parts(sim)
    rng = np.random.default_rng(1)
    C = 10
    for scale in (0.0, 1.0, 10.0):
        V = rng.standard_normal((C, parts[0][0].shape[1])) * scale
        _, g = _numpy_f_grad(V, parts)
        gi = np.stack([_numpy_f_grad(V, [p])[1] for p in parts])
        dev = np.linalg.norm((gi - g).reshape(len(parts), -1), axis=1)
        assert dev.max() <= c.beta and math.sqrt((dev**2).mean()) <= c.sigma_g
    assert c.sigma_l == 0 and c.f_star is None and c.f_lower == 0.0 and not any(c.exact.values())
    batch = pr.softmax_regression_constants([p[0][:, :-1] for p in parts], C, batch=4)
    assert batch.sigma_l > 0 and batch.L == c.L


# ------------------------------------------------------------ the measurement
def test_engine_gradient_matches_numpy():
    """∇f with f = (1/m)Σ f_i (DFedSAM eq. (1)), unequal client sizes, float64, to 1e-10."""
    sim = _sim(dirichlet_method="per-class", topology="ring")
    counts = sim.data.train.counts.numpy()
    assert counts.min() != counts.max()  # else the pooled mean would agree too
    for _ in range(3):
        sim.step()
    xbar = sim.x.mean(0)
    f, g = objective_and_gradients(sim, xbar[None])
    parts = _numpy_softmax_parts(sim)
    fn, gn = _numpy_f_grad(_flat_to_V(xbar.numpy(), 10), parts)
    assert float(f[0]) == pytest.approx(fn, abs=1e-10)
    assert np.abs(g[0].numpy() - _V_to_flat(gn)).max() < 1e-10
    assert float((g[0] ** 2).sum()) == pytest.approx((gn**2).sum(), abs=1e-10)
    pooled = _numpy_f_grad(
        _flat_to_V(xbar.numpy(), 10), [(np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))]
    )[1]
    assert np.abs(pooled - gn).max() > 1e-6  # the weighting is visible
    # the same computation inside measure_against_bounds, at x̄¹ = x0
    res = measure_against_bounds(
        Config(**{**BASE, "algorithm": "dfedsam", "dirichlet_method": "per-class", "rounds": 1}), eta="max"
    )
    f0, g0 = _numpy_f_grad(_flat_to_V(sim.x0[0].numpy(), 10), parts)
    assert res["grad_norm_sq"][0] == pytest.approx((g0**2).sum(), abs=1e-10)
    assert res["f_x1"] == pytest.approx(f0, abs=1e-10)


@pytest.mark.parametrize("topology", ["ring", "complete"])
@pytest.mark.parametrize("Q", [1, 4])
def test_dfedsam_measured_against_bounds(topology, Q):
    alg = "dfedsam" if Q == 1 else "dfedsam-mgs"
    cfg = Config(**BASE, algorithm=alg, topology=topology, rho=0.01, **({"gossip_steps": Q} if Q > 1 else {}))
    r = measure_against_bounds(cfg, eta="max")
    c = r["constants"]
    assert r["stepsize_condition"] and r["eta"] == pytest.approx(1 / (10 * 2 * c.L))
    assert r["Q"] == Q and r["T"] == 20 and len(r["grad_norm_sq"]) == 21
    meas, pred = r["measured"], r["predictions"]
    assert meas["min_grad_norm_sq"] == r["grad_norm_sq"][:20].min() > 0
    assert meas["min_grad_norm_sq"] <= pred["min_grad_norm_sq_bound"]
    assert meas["max_consensus_distance"] <= pred["consensus_distance_bound"]
    assert r["consensus"][0] == 0.0  # same x¹ on every client
    # Lemma D.1 on the run's own iterates: ‖(I−P)W^Q z‖ ≤ λ^Q ‖(I−P)z‖
    assert np.all(r["run_contraction_per_round"] <= r["lam"] ** Q + 1e-12)
    if topology == "ring":
        lam = 1 / 3 + 2 / 3 * math.cos(2 * math.pi / 8)
        assert r["lam"] == pytest.approx(lam, rel=1e-12)
        rate = meas["contraction_per_gossip_step_random"]
        assert abs(rate - lam) <= 0.1 * lam
        assert meas["max_consensus_distance"] > 0
    else:
        assert r["lam"] < 1e-12 and meas["max_consensus_distance"] < 1e-20
    assert all(h for *_, h in r["rows"])


def test_dfedavg_is_the_rho_zero_case():
    r = measure_against_bounds(Config(**BASE, algorithm="dfedavg", topology="ring"), eta="max")
    assert r["rho"] == 0.0 and r["measured"]["min_grad_norm_sq"] <= r["predictions"]["min_grad_norm_sq_bound"]
    assert r["measured"]["max_consensus_distance"] <= r["predictions"]["consensus_distance_bound"]


def test_config_adjustments_and_refusals():
    cfg, adjusted = theory_config(Config(**BASE, algorithm="dfedsam"))
    assert all(getattr(cfg, k) == v for k, v in REQUIRED_SETTINGS.items())
    assert adjusted["model"] == ("2nn", "linear") and adjusted["full_batch"] == (False, True)
    for bad in (
        dict(algorithm="dfedavgm"),
        dict(algorithm="fedavg"),
        dict(algorithm="dfedsam", weight_decay=1e-4),
        dict(algorithm="dfedsam", sam_variant="asam"),
    ):
        with pytest.raises(ConfigError):
            theory_config(Config(**{**BASE, **bad}))


def test_format_report_table():
    r = measure_against_bounds(Config(**{**BASE, "rounds": 3}, algorithm="dfedsam", topology="ring"), eta="max")
    text = format_report(r)
    lines = text.splitlines()
    assert "measured" in text and "bound" in text and "holds?" in text
    assert sum(line.endswith("| yes") for line in lines) == len(r["rows"]) == 6
    assert "upper bound" in text and "L=" in text
    r["rows"][0] = (r["rows"][0][0], 2.0, 1.0, False)
    assert format_report(r).splitlines()[-6].endswith("| NO")
