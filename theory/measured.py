"""Measured versus bound: run ``dfl_core`` on softmax regression and put each measurement next to its bound.

:func:`measure_against_bounds` runs a decentralized algorithm of the engine
(``dfedavg``, ``dfedsam``, ``dfedsam-mgs``) with the ``"linear"`` model
(softmax regression, a convex problem whose constants are bounded by
:func:`theory.problems.softmax_regression_constants`), full batch, float64 and
a constant step size, and measures after every round, at x¹ … x^{T+1}:

* ‖∇f(x̄ᵗ)‖², f = (1/m)Σᵢ f_i with f_i the mean loss over client i's split
  (DFedSAM eq. (1): clients weigh equally, not in proportion to their sizes),
  against Theorem 4.5's bound on min_{1≤t≤T} ‖∇f(x̄ᵗ)‖²;
* the consensus distance (1/m)Σᵢ‖xᵗ(i) − x̄ᵗ‖² against Lemma D.5's C₂η²/(1−λ)² for one gossip step a
  round, Lemma D.6's C₂η²Φ(λ,m,Q) for Q > 1 (:func:`theory.bounds.consensus_bound`), with C₂'s G2 = maxₜ (1/m)Σᵢ‖∇f(xᵗ(i))‖² measured on the same run;
* the consensus contraction per gossip step, twice: on random vectors with the
  run's own W (:func:`theory.problems.gossip_contraction`; its asymptotic rate
  tends to λ), and on the run's own iterates, ‖(I−P)x^{t+1}‖/‖(I−P)zᵗ‖ per
  round (zᵗ the models after local training), which Lemma D.1 bounds by λ^Q.

Everything is deterministic (full batch), so "E" in the bounds is the value
itself. :func:`format_report` prints the comparison as a table.

Example (the setting of ``tests/test_theory_measured.py``)::

    from dfl_core import Config
    from theory.measured import measure_against_bounds, format_report
    cfg = Config(algorithm="dfedsam", dataset="digits", train_size=300, num_clients=8,
                 topology="ring", local_steps=2, rounds=20, rho=0.01)
    print(format_report(measure_against_bounds(cfg, eta="max")))   # η = 1/(10KL)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from dfl_core import Config, Simulation
from dfl_core.engine import Hooks
from dfl_core.config import ConfigError

from . import bounds as bd
from .problems import ProblemConstants, consensus_distance, gossip_contraction, softmax_regression_constants

__all__ = [
    "SUPPORTED_ALGORITHMS",
    "REQUIRED_SETTINGS",
    "theory_config",
    "simulation_constants",
    "objective_and_gradients",
    "measure_against_bounds",
    "format_report",
]

#: The algorithms Theorem 4.5 covers: DFedSAM(-MGS), and DFedAvg as DFedSAM with ρ = 0.
SUPPORTED_ALGORITHMS = ("dfedavg", "dfedsam", "dfedsam-mgs")
#: Settings the comparison needs: the convex model with known constants, deterministic
#: gradients (σ_l = 0), float64, the constant step size of Theorem 4.5, one x¹ for all clients.
REQUIRED_SETTINGS = {"model": "linear", "full_batch": True, "dtype": "float64", "lr_decay": 1.0, "same_init": True}
#: points per autograd pass is chosen so that points·m·n_max·features stays below this
_CHUNK_ELEMENTS = 1 << 24


def theory_config(config: Config) -> tuple[Config, dict[str, tuple]]:
    """``config`` with :data:`REQUIRED_SETTINGS` set; and ``{field: (old, new)}`` of what changed.

    Refuses (``ConfigError``) what the bounds do not cover: other algorithms (momentum among them),
    weight decay, adaptive SAM.
    """
    if config.algorithm not in SUPPORTED_ALGORITHMS:
        raise ConfigError(
            f"measure_against_bounds covers {', '.join(SUPPORTED_ALGORITHMS)} (Theorem 4.5), not {config.algorithm!r}"
        )
    adjusted = {k: (getattr(config, k), v) for k, v in REQUIRED_SETTINGS.items() if getattr(config, k) != v}
    cfg = config.replace(**REQUIRED_SETTINGS)
    if cfg.weight_decay:
        raise ConfigError(f"weight_decay={cfg.weight_decay}: the constants are for plain cross-entropy")
    variant = getattr(cfg.params, "sam_variant", "sam")  # DFedAvg has no SAM step
    if variant != "sam" and cfg.params.rho:
        raise ConfigError(f"sam_variant={variant!r}: Theorem 4.5 is for SAM's ρg/‖g‖ perturbation")
    return cfg, adjusted


def simulation_constants(sim: Simulation) -> ProblemConstants:
    """L, σ_l, σ_g, β of the run's own problem: softmax regression on each client's train split."""
    train = sim.data.train
    x = train.x.detach().cpu().double().numpy()
    parts = [x[idx] for idx in train.client_indices()]
    batch = None if sim.config.full_batch else sim.config.batch_size
    return softmax_regression_constants(parts, sim.data.dataset.num_classes, batch=batch)


def objective_and_gradients(sim: Simulation, points: Tensor) -> tuple[Tensor, Tensor]:
    """f(p) and ∇f(p) for each row p of ``points`` (k, d), with the engine's model and loss.

    f = (1/m)Σᵢ f_i, f_i the mean cross-entropy of the model ``p`` over client
    i's whole train split. Each point is copied to all m clients, the
    engine's stacked forward pass gives every f_i at once, and autograd's
    gradient summed over the m copies is ∇f(p). Returns ``(f (k,), grad (k, d))``.
    """
    train, model = sim.data.train, sim.model
    m, n_max = train.index.shape
    points = points.detach().to(device=sim.device, dtype=sim.dtype).reshape(-1, model.d)
    inputs, labels = train.x[train.index].to(sim.dtype), train.y[train.index]
    w = train.mask().to(sim.dtype)
    per = max(1, _CHUNK_ELEMENTS // max(1, m * n_max * inputs[0, 0].numel()))
    fs, gs = [], []
    for lo in range(0, points.shape[0], per):
        pts = points[lo : lo + per]
        k = pts.shape[0]
        with torch.enable_grad():
            p = pts.repeat_interleave(m, 0).requires_grad_(True)  # row r: point r // m, client r % m
            logits = model.forward(p, inputs.repeat(k, *(1,) * (inputs.dim() - 1)))
            ce = F.cross_entropy(logits.flatten(0, 1), labels.repeat(k, 1).flatten(), reduction="none")
            fi = (ce.view(k * m, n_max) * w.repeat(k, 1)).sum(1) / w.sum(1).repeat(k)
            f = fi.view(k, m).mean(1)
            (g,) = torch.autograd.grad(f.sum(), p)
        fs.append(f.detach())
        gs.append(g.view(k, m, model.d).sum(1))
    return torch.cat(fs), torch.cat(gs)


class _RoundContraction(Hooks):
    """‖(I−P)z‖ after a round's Q gossip steps over ‖(I−P)z‖ before them, one ratio per round."""

    def __init__(self, steps: int):
        self.steps, self.ratios, self._before = steps, [], 0.0

    def after_gossip(self, before: Tensor, after: Tensor, step: int) -> None:
        if step == 0:
            self._before = _deviation_norm(before)
        if step == self.steps - 1:
            self.ratios.append(_deviation_norm(after) / self._before if self._before > 0 else math.nan)


def _deviation_norm(x: Tensor) -> float:
    """‖(I − P)X‖_F, P = 11ᵀ/m."""
    return float(torch.linalg.vector_norm(x - x.mean(0)))


def measure_against_bounds(
    config: Config,
    *,
    constants: ProblemConstants | None = None,
    eta: float | str | None = None,
    contraction_steps: int = 60,
    contraction_seed: int = 0,
) -> dict:
    """Run ``config`` and return what it measures next to what DFedSAM's bounds predict.

    ``config`` is made to satisfy :data:`REQUIRED_SETTINGS` (the changes are
    returned under ``"adjusted"``); see :func:`theory_config`. ``constants``
    defaults to :func:`simulation_constants` of the run's own client splits.
    ``eta``: None uses ``config.lr``; a number replaces it; ``"max"`` is the
    largest step Theorem 4.5 allows, 1/(10KL) with the run's L.
    ``contraction_steps`` and ``contraction_seed``: the random-vector gossip
    measurement (:func:`theory.problems.gossip_contraction`; its asymptotic
    rate is over the last third of the steps, after a burn-in).

    The returned dict holds the settings (K, T, η, ρ, Q, m, λ), the constants,
    the per-round traces (``grad_norm_sq``, ``consensus``,
    ``mean_grad_norm_sq``, ``f`` at x¹ … x^{T+1}; ``run_contraction_per_step``
    for rounds 1 … T), ``measured`` (the numbers compared), ``predictions``
    (:func:`theory.bounds.predictions`), Theorem 4.5's terms, and ``rows``:
    one ``(name, measured, bound, holds)`` per comparison, which
    :func:`format_report` prints.
    """
    cfg, adjusted = theory_config(config)
    sim = Simulation(cfg)
    if constants is None:
        constants = simulation_constants(sim)
    K, T, Q, m = cfg.params.local_steps, cfg.rounds, cfg.params.gossip_steps, cfg.num_clients
    if eta is not None:
        lr = 1 / (10 * K * constants.L) if eta == "max" else float(eta)
        if lr != cfg.lr:
            adjusted["lr"] = (cfg.lr, lr)
            cfg = cfg.replace(lr=lr)
            sim = Simulation(cfg, data=sim.data)  # same split, same x¹
    eta_v, rho_v = cfg.lr, getattr(cfg.params, "rho", 0.0)  # DFedAvg: ρ = 0

    # the run's own mixing matrices: λ (max over the rounds for a time-varying scheme), Definition 4.1
    mats = [M for t in range(max(T, 1)) for M in sim.matrices(t)]
    static = not sim.topology.time_varying
    lam_v = max(0.0, max(M.lam for M in mats))
    def41 = all(M.symmetric and M.doubly_stochastic for M in mats)

    # record ‖(I−P)z‖ before and after each round's Q gossip steps (a hook of the engine's loop)
    contraction = _RoundContraction(Q)

    gnorm, cons, g2, fval = [], [], [], []

    def measure() -> None:
        x = sim.x
        f, g = objective_and_gradients(sim, torch.cat([x.mean(0, keepdim=True), x]))
        gn = (g**2).sum(1).cpu().numpy()
        gnorm.append(float(gn[0]))
        fval.append(float(f[0]))
        g2.append(float(gn[1:].mean()))
        cons.append(consensus_distance(x.cpu().numpy()))

    measure()  # t = 1: x¹
    for _ in range(T):
        sim.step(hooks=[contraction])
        measure()
    run_ratio_arr = np.asarray(contraction.ratios)
    run_step = run_ratio_arr ** (1.0 / Q)

    # random vectors through the run's W, one gossip step at a time
    def W_of_step(s: int) -> np.ndarray:
        return sim.matrices(s // Q)[s % Q].W

    gc = gossip_contraction(W_of_step if not static else mats[0].W, steps=contraction_steps, seed=contraction_seed)

    f_x1 = fval[0]
    f_ref = constants.f_star if constants.f_star is not None else constants.f_lower
    delta_kind = (
        "exact" if constants.f_star is not None else ("upper bound (f* >= f_lower)" if f_ref is not None else "unknown")
    )
    consts_for_bound = dataclasses.replace(constants, f_star=f_ref)
    G2v = float(max(g2))
    pred = bd.predictions(
        consts_for_bound,
        K=K,
        T=T,
        eta=eta_v,
        rho=rho_v,
        lam_value=lam_v,
        m_value=m,
        Q_value=Q,
        f_x1=f_x1 if f_ref is not None else None,
        G2_value=G2v,
    )
    terms = None
    if f_ref is not None:
        terms = bd.theorem45_terms(
            K=K,
            T=T,
            eta=eta_v,
            rho=rho_v,
            L=constants.L,
            sigma_l=constants.sigma_l,
            sigma_g=constants.sigma_g,
            Delta=f_x1 - f_ref,
            lam=lam_v,
            m=m,
            Q=Q,
        )

    measured = {
        "min_grad_norm_sq": float(min(gnorm[:T])) if T else math.nan,  # Theorem 4.5: min over t = 1..T
        "argmin_round": int(np.argmin(gnorm[:T])) + 1 if T else 0,
        "max_consensus_distance": float(max(cons)),
        "G2": G2v,
        "contraction_per_gossip_step_random": gc["asymptotic_rate"],
        "contraction_per_gossip_step_run": float(np.nanmax(run_step)) if T else math.nan,
        "contraction_per_round_run": float(np.nanmax(run_ratio_arr)) if T else math.nan,
        "mean_drift_random": gc["mean_drift"],
    }
    tol = 1e-9
    bound_g, bound_c = pred["min_grad_norm_sq_bound"], pred["consensus_distance_bound"]
    eta_max = 1 / (10 * K * constants.L)
    rows = [
        (
            "min_t ||grad f(xbar_t)||^2  [Thm 4.5]",
            measured["min_grad_norm_sq"],
            bound_g,
            None if bound_g is None else measured["min_grad_norm_sq"] <= bound_g,
        ),
        (
            f"max_t consensus distance  [Lemma {bd.consensus_lemma(Q)}]",
            measured["max_consensus_distance"],
            bound_c,
            measured["max_consensus_distance"] <= bound_c,
        ),
        (
            "contraction/gossip step, random vectors  [lambda]",
            measured["contraction_per_gossip_step_random"],
            lam_v,
            measured["contraction_per_gossip_step_random"] <= lam_v + tol,
        ),
        (
            "contraction/gossip step, run, max_t  [lambda]",
            measured["contraction_per_gossip_step_run"],
            lam_v,
            measured["contraction_per_gossip_step_run"] <= lam_v + tol,
        ),
        (
            "contraction/round, run, max_t  [lambda^Q]",
            measured["contraction_per_round_run"],
            lam_v**Q,
            measured["contraction_per_round_run"] <= lam_v**Q + tol,
        ),
        ("eta  [1/(10KL)]", eta_v, eta_max, pred["stepsize_condition"]),
    ]
    return {
        "config": cfg,
        "adjusted": adjusted,
        "algorithm": cfg.algorithm,
        "topology": cfg.params.topology,
        "K": K,
        "T": T,
        "Q": Q,
        "m": m,
        "eta": eta_v,
        "rho": rho_v,
        "lam": lam_v,
        "static_topology": static,
        "definition_4_1": def41,
        "constants": constants,
        "f_x1": f_x1,
        "delta": None if f_ref is None else f_x1 - f_ref,
        "delta_kind": delta_kind,
        "grad_norm_sq": np.asarray(gnorm),
        "consensus": np.asarray(cons),
        "mean_grad_norm_sq": np.asarray(g2),
        "f": np.asarray(fval),
        "run_contraction_per_round": run_ratio_arr,
        "run_contraction_per_step": run_step,
        "random_contraction": gc,
        "measured": measured,
        "predictions": pred,
        "theorem45_terms": terms,
        "stepsize_condition": pred["stepsize_condition"],
        "rows": rows,
    }


def _num(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def format_report(result: dict) -> str:
    """The comparison as a text table: quantity | measured | bound | bound/measured | holds?"""
    c: ProblemConstants = result["constants"]
    head = (
        f"{result['algorithm']} on softmax regression, {result['topology']} m={result['m']}: K={result['K']} "
        f"T={result['T']} Q={result['Q']} eta={result['eta']:.4g} rho={result['rho']:.4g} "
        f"lambda={result['lam']:.4g}"
        + ("" if result["definition_4_1"] else " (W not symmetric doubly stochastic: bounds do not apply)")
    )
    consts = (
        f"L={c.L:.4g} sigma_l={c.sigma_l:.4g} sigma_g={c.sigma_g:.4g} beta={c.beta:.4g} "
        f"f(x1)={result['f_x1']:.4g} Delta={_num(result['delta'])} ({result['delta_kind']})"
    )
    lines = [head, consts]
    if result["adjusted"]:
        lines.append("adjusted: " + ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in result["adjusted"].items()))
    w = max(len(r[0]) for r in result["rows"])
    lines.append(f"{'quantity':<{w}} | {'measured':>10} | {'bound':>10} | {'bound/meas':>10} | holds?")
    lines.append("-" * (w + 48))
    for name, meas, bound, holds in result["rows"]:
        ratio = bound / meas if bound is not None and meas and meas > 0 else None
        verdict = "n/a" if holds is None else ("yes" if holds else "NO")
        lines.append(f"{name:<{w}} | {_num(meas):>10} | {_num(bound):>10} | {_num(ratio):>10} | {verdict}")
    return "\n".join(lines)
