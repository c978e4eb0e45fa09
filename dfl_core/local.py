r"""Local update rules as small composable pieces, in the style of optax.

A :class:`LocalRule` is a pair of functions. ``init(x)`` builds the rule's state
from the clients' parameters ``x`` of shape ``(m, d)``; ``update(g, state, x, ctx)``
turns the incoming gradient ``g`` (also ``(m, d)``, row i is client i's
stochastic gradient) into an update ``u`` and a new state, and the caller sets
``x <- x + u``. Every piece works on all m clients at once; nothing loops over
clients.

Rules are composed with :func:`chain`, which passes the update through each
piece in order. Every algorithm declares its rule this way
(:class:`dfl_core.algorithms.Algorithm`), e.g. DFedSAM's

.. code-block:: python

    chain(sam(rho), sgd(weight_decay, momentum))
    # = chain(sam(rho), add_decayed_weights(wd), trace(momentum), scale_by_lr())

with the pieces a config leaves at 0 left out of :func:`sgd`. SAM needs a second
gradient at the perturbed point, so the context ``ctx`` carries ``grad_fn``,
which evaluates the gradient of the *same* mini-batch at any ``(m, d)`` point
(the lesson of ``optax.contrib.sam``). SAM's normalized ascent step
:math:`\rho\, g / \lVert g \rVert` is :func:`sam_scale` (the normalization) and :func:`sam_perturbation`
(the step), the one place it is written.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "StepContext", "LocalRule", "chain", "identity", "scale_by_lr", "sgd",
    "add_decayed_weights", "trace", "sam_scale", "sam_perturbation", "sam", "asam", "sharpness_aware", "blend_direction",
    "fedgf_perturbation", "clip_by_global_norm", "proximal", "control_variate", "corrected_sam",
    "make_local_rule", "SAM_EPS", "FEDGF_READINGS", "SAM_VARIANTS",
]

#: Added to the gradient norm in SAM's ρ·g/‖g‖ so that a zero gradient gives a
#: zero perturbation (the value of the davda54 SAM used by DP-FedSAM).
SAM_EPS = 1e-12


class StepContext(NamedTuple):
    """What a rule may need besides the gradient at one local step."""

    grad_fn: Callable[[Tensor], Tensor]  # (m, d) point -> (m, d) gradient on this step's batch
    lr: float                            # this round's learning rate η_t
    clients: Tensor | None = None        # ids of the clients in the rows (for per-client state)
    model: Any = None                    # the parameter layout (StackedModel), e.g. for ASAM's weight mask


def sam_scale(g: Tensor, rho: float) -> Tensor:
    r"""SAM's normalization :math:`\rho / (\lVert g \rVert_2 + \epsilon)`, one value per row of ``g`` (shape ``(m, 1)``).

    Rows are clients (``(m, d)``); a ``(d,)`` vector is one row. ε = :data:`SAM_EPS`.
    """
    return rho / (torch.linalg.vector_norm(g, dim=-1, keepdim=True) + SAM_EPS)


def sam_perturbation(g: Tensor, rho: float) -> Tensor:
    r"""SAM's ascent step :math:`\delta = \rho\, g / (\lVert g \rVert_2 + \epsilon)`, one norm per row of ``g``."""
    return g * sam_scale(g, rho)


class LocalRule(NamedTuple):
    """``init(x) -> state`` and ``update(g, state, x, ctx) -> (u, state)``."""

    init: Callable[[Tensor], Any]
    update: Callable[[Tensor, Any, Tensor, StepContext], tuple[Tensor, Any]]


def identity() -> LocalRule:
    """Pass the gradient through unchanged."""
    return LocalRule(lambda x: (), lambda g, s, x, ctx: (g, s))


def scale_by_lr() -> LocalRule:
    r"""The descent step :math:`u = -\eta_t\, g`."""
    return LocalRule(lambda x: (), lambda g, s, x, ctx: (-ctx.lr * g, s))


def add_decayed_weights(weight_decay: float) -> LocalRule:
    r"""L2 weight decay :math:`g \leftarrow g + \lambda_{wd}\, x` (as ``torch.optim.SGD`` does)."""
    return LocalRule(lambda x: (), lambda g, s, x, ctx: (g + weight_decay * x, s))


def trace(momentum: float) -> LocalRule:
    r"""Heavy-ball momentum in PyTorch's form: :math:`v \leftarrow \theta v + g`, :math:`u = v`.

    Followed by :func:`scale_by_lr` it gives
    :math:`y^{k+1} = y^k - \eta g^k + \theta (y^k - y^{k-1})` with
    :math:`y^{-1} = y^0`, the heavy-ball iteration of DFedAvgM eq. (4)
    (*reconstructed*: the seed text lost the symbols of eq. (4); the DFedSAM
    Algorithm 1 box keeps its initialisation :math:`y^{t,-1}(i) = y^{t,0}(i)`),
    as long as η is constant within the round, which it is here.
    """
    def init(x: Tensor) -> Tensor:
        return torch.zeros_like(x)

    def update(g, v, x, ctx):
        v = momentum * v + g
        return v, v

    return LocalRule(init, update)


def sam(rho: float) -> LocalRule:
    r"""Sharpness-aware minimisation (Foret et al. 2021) as used by DFedSAM eq. (3).

    .. math::
        \delta_i = \rho\, g_i / \lVert g_i \rVert_2, \qquad
        \tilde g_i = \nabla F_i(y_i + \delta_i; \xi_i)

    The norm is the global L2 norm over all of client i's parameters (one
    value per client), and :math:`\tilde g` is evaluated on the same batch ξ.
    """
    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        return ctx.grad_fn(torch.addcmul(x, g, sam_scale(g, rho))), s   # x + δ in one pass, (m, d)

    return LocalRule(lambda x: (), update)


def asam(rho: float, eta: float, scale_all: bool = True) -> LocalRule:
    r"""Adaptive SAM (Kwon et al. 2021, eq. (7)): the perturbation in the metric of :math:`T_w`.

    .. math::
        T_w = \mathrm{diag}(|w| + \eta), \qquad
        \delta = \rho\, \frac{T_w^2\, g}{\lVert T_w\, g \rVert_2}, \qquad
        \tilde g = \nabla F(w + \delta)

    The paper scales every parameter (``scale_all=True``); the public ASAM and
    FedASAM code scale only parameters whose name contains ``"weight"``
    (biases get :math:`T_w = 1`), which ``scale_all=False`` reproduces with
    :meth:`dfl_core.stacked.StackedModel.weight_mask` of the step's model.
    """
    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        t = x.abs() + eta
        if not scale_all:
            t = torch.where(ctx.model.weight_mask(), t, torch.ones_like(t))
        tg = t * g
        norm = torch.linalg.vector_norm(tg, dim=1, keepdim=True)       # (m, 1)
        return ctx.grad_fn(x + rho * t * tg / (norm + SAM_EPS)), s

    return LocalRule(lambda x: (), update)


def proximal(mu: float, anchor: Tensor) -> LocalRule:
    r"""FedProx's proximal term (Li et al. 2020, eq. (2)): :math:`g \leftarrow g + \mu\,(y - w^t)`.

    The gradient of :math:`h_i(y) = F_i(y) + \frac{\mu}{2}\lVert y - w^t\rVert^2`, with
    ``anchor`` = :math:`w^t` (shape ``(d,)``), the global model the round started from.
    """
    return LocalRule(lambda x: (), lambda g, s, x, ctx: (g + mu * (x - anchor), s))


def control_variate(client_terms: Tensor | None = None, shared: Tensor | None = None) -> LocalRule:
    r"""A gradient correction :math:`g \leftarrow g - c_i + c` (SCAFFOLD, Karimireddy et al. 2020, Algorithm 1 l.10).

    ``client_terms`` is an ``(m, d)`` tensor whose row i is client i's
    :math:`c_i` (rows are picked by the step's client ids, ``ctx.clients``);
    ``shared`` (shape ``(d,)``) is the server's :math:`c`, the same for every
    client. Either may be ``None``. FedDyn uses it with
    :math:`c_i = \nabla L_i(\theta_i^{t-1})` and no shared term.
    """
    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        if client_terms is not None:
            g = g - client_terms[ctx.clients.to(client_terms.device)]
        if shared is not None:
            g = g + shared
        return g, s

    return LocalRule(lambda x: (), update)


def corrected_sam(rho: float, duals: Tensor, global_perturbation: Tensor,
                  last_perturbation: Tensor | None = None) -> LocalRule:
    r"""FedSMOO's SAM step with a corrected perturbation (Sun et al., ICML 2023, Algorithm 1; *reconstructed*).

    .. math::
        \hat s_i = \rho\, \frac{g_i - \mu_i - s}{\lVert g_i - \mu_i - s \rVert_2}, \qquad
        \mu_i \leftarrow \mu_i + \hat s_i - s, \qquad
        \tilde g_i = \nabla F_i(y_i + \hat s_i; \xi_i)

    ``duals`` is the ``(m, d)`` tensor of every client's :math:`\mu_i`
    (updated *in place* for the rows of the step, so the server keeps them
    across rounds); ``global_perturbation`` is the server's :math:`s`
    (``(d,)``). If given, ``last_perturbation`` (``(m, d)``) receives each
    client's latest :math:`\hat s_i`, which the server needs. The
    update is read off the FedSMOO authors' code (FL-Simulator
    ``optimizer/DRegSAM.py``), since the paper text is not among the seeds.
    """
    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        ids = ctx.clients.to(duals.device)
        corrected = g - duals[ids] - global_perturbation
        perturbation = sam_perturbation(corrected, rho)
        duals.index_copy_(0, ids, duals[ids] + perturbation - global_perturbation)
        if last_perturbation is not None:
            last_perturbation.index_copy_(0, ids, perturbation)
        return ctx.grad_fn(x + perturbation), s

    return LocalRule(lambda x: (), update)


def clip_by_global_norm(max_norm: float) -> LocalRule:
    r"""Scale each client's direction to norm at most ``max_norm`` (``torch.nn.utils.clip_grad_norm_``).

    Not in any of the seed papers; the public DisPFL, D-PSGD and FL-Simulator
    code clip at 10, so it is offered for the "as coded" variants.
    """
    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        norm = torch.linalg.vector_norm(g, dim=1, keepdim=True)
        return g * (max_norm / (norm + 1e-6)).clamp(max=1.0), s

    return LocalRule(lambda x: (), update)


def blend_direction(alpha: float, direction: Tensor) -> LocalRule:
    r"""MoFedSAM/FedCM's local direction :math:`v = \alpha\, g + (1 - \alpha)\, \Delta`.

    ``direction`` is the server's :math:`\Delta` (shape ``(d,)``), the same
    for every client in a round.
    """
    return LocalRule(lambda x: (), lambda g, s, x, ctx: (alpha * g + (1 - alpha) * direction, s))


#: FedGF's two readings of its interpolation, eq. (12).
FEDGF_READINGS = ("points", "vectors")


def fedgf_perturbation(rho: float, c: float, global_point: Tensor, global_delta: Tensor,
                       reading: str = "points") -> LocalRule:
    r"""FedGF's local gradient (Lee & Yoon, ICML 2024, eqs. (8)–(13)).

    .. math::
        \tilde w_{i,k} = w_{i,k} + \rho\, g_{i,k}/\lVert g_{i,k} \rVert, \qquad
        \tilde w = w + \rho\, \Delta/\lVert \Delta \rVert, \qquad
        \tilde w_{i,k,c} = c\, \tilde w + (1 - c)\, \tilde w_{i,k}

    and the step uses :math:`\nabla F_i(\tilde w_{i,k,c})` (eq. (13)).

    ``reading="points"`` is eq. (12) as printed and as the official code
    computes it: an interpolation of two perturbed *points*, so c also pulls
    the evaluation point towards the global model ``global_point`` = w̃.
    ``reading="vectors"`` interpolates the two *perturbations* around the
    client's own model, :math:`w_{i,k} + c\,\delta_g + (1-c)\,\delta_{i,k}`,
    with ``global_delta`` = :math:`\rho\Delta/\lVert\Delta\rVert`; this is
    how the slides' prose ("global and local perturbations") can be read.
    """
    if reading not in FEDGF_READINGS:
        raise ValueError(f"unknown FedGF reading {reading!r}; allowed: {FEDGF_READINGS}")

    def update(g: Tensor, s, x: Tensor, ctx: StepContext):
        local_delta = sam_perturbation(g, rho)
        if reading == "points":
            point = c * global_point + (1 - c) * (x + local_delta)
        else:
            point = x + c * global_delta + (1 - c) * local_delta
        return ctx.grad_fn(point), s

    return LocalRule(lambda x: (), update)


def chain(*rules: LocalRule) -> LocalRule:
    """Apply ``rules`` in order; the state is the tuple of their states."""
    def init(x: Tensor):
        return tuple(r.init(x) for r in rules)

    def update(g, states, x, ctx):
        new_states = []
        for rule, state in zip(rules, states):
            g, state = rule.update(g, state, x, ctx)
            new_states.append(state)
        return g, tuple(new_states)

    return LocalRule(init, update)


def sgd(weight_decay: float = 0.0, momentum: float = 0.0) -> LocalRule:
    r"""The descent every local rule ends with: ``chain(add_decayed_weights, trace, scale_by_lr)``.

    :math:`g \leftarrow g + \lambda_{wd} y`, :math:`v \leftarrow \theta v + g`,
    :math:`u = -\eta_t v` (``torch.optim.SGD``'s order); a piece whose
    coefficient is 0 is left out, so ``sgd()`` is plain SGD.
    """
    pieces = []
    if weight_decay > 0:
        pieces.append(add_decayed_weights(weight_decay))
    if momentum > 0:
        pieces.append(trace(momentum))
    return chain(*pieces, scale_by_lr())


#: The sharpness-aware steps a SAM algorithm can take (``sam_variant``).
SAM_VARIANTS = ("sam", "asam")


def sharpness_aware(cfg) -> LocalRule:
    """The config's SAM step: :func:`sam` with ``rho``, or :func:`asam` with ``rho``, ``asam_eta``, ``asam_scale_all``."""
    if cfg.sam_variant == "asam":
        return asam(cfg.rho, cfg.asam_eta, cfg.asam_scale_all)
    return sam(cfg.rho)


def make_local_rule(*head: LocalRule, weight_decay: float = 0.0, momentum: float = 0.0) -> LocalRule:
    """``chain(*head, sgd(weight_decay, momentum))``: gradient-forming pieces, then the descent."""
    return chain(*head, sgd(weight_decay, momentum))
