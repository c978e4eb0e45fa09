r"""Local update rules as small composable pieces, in the style of optax; one local step, read in one place.

One local step of the clients in a chunk (rows of ``(n, d)`` tensors, all at
once; nothing loops over clients) is :func:`local_step`::

    step = LocalStep(loss_and_grad, lr, batch, clients, model)    # this step's mini-batch ξ
    u, state = local_step(rule, state, y, step)                   # the rule asks step.gradient(point)
    y += u

Every gradient evaluation of a step is a call of :meth:`LocalStep.gradient`, on the step's one
batch, in a rule's own code. DFedSAM's rule, eq. (3) with weight decay, is

.. code-block:: python

    chain(sam(rho), sgd(weight_decay))
    # = chain(sam(rho), add_decayed_weights(wd), scale_by_lr())

where :func:`sam` makes both of the step's evaluations itself::

    g = step.gradient(y)                                               # ∇F_i(y; ξ)
    return step.gradient(y + ρ g/‖g‖), state                           # ∇F_i(y + δ; ξ), the same ξ

and the pieces after it transform that gradient into the update ``u`` (:class:`LocalRule`; a piece
that forms the gradient comes first in its :func:`chain`). Every algorithm declares its rule this way
(:class:`dfl_core.algorithms.Algorithm`). The design is ``optax``'s (and ``optax.contrib.sam``'s: the
second gradient on the same batch).

A rule's state is typed: a NamedTuple of named tensors per piece (:class:`Momentum`, or the shared
:class:`EmptyState`), a tuple of them for a chain; checkpoints hold it as plain tuples (:func:`typed_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "LocalStep",
    "LocalRule",
    "Gradient",
    "local_step",
    "EmptyState",
    "EMPTY",
    "no_state",
    "Momentum",
    "map_state",
    "typed_state",
    "chain",
    "scale_by_lr",
    "sgd",
    "add_decayed_weights",
    "trace",
    "sam_scale",
    "sam_perturbation",
    "sam",
    "asam",
    "sharpness_aware",
    "blend_direction",
    "fedgf_perturbation",
    "clip_by_global_norm",
    "proximal",
    "control_variate",
    "corrected_sam",
    "SAM_EPS",
    "FEDGF_READINGS",
    "SAM_VARIANTS",
    "Chain",
]

#: Added to the gradient norm in SAM's ρ·g/‖g‖ so that a zero gradient gives a
#: zero perturbation (the value of the davda54 SAM used by DP-FedSAM).
SAM_EPS = 1e-12

#: ``loss_and_grad(point (n, d), *batch, clients) -> (gradients (n, d), losses (n,))``: row i is client
#: i's mean loss on its own batch and its gradient (the stacked model's cross-entropy, or FedRobust's).
Gradient = Callable[..., tuple[Tensor, Tensor]]


# ------------------------------------------------------------------ one local step
@dataclass(frozen=True)
class LocalStep:
    """One local step of n clients: this step's mini-batch ξ, η_t, and the gradient on that batch at any point."""

    loss_and_grad: Gradient  # the batched gradient (StackedModel.loss_and_grad, or FedRobust's)
    lr: float  # this round's learning rate η_t
    batch: tuple = ()  # (inputs (n, B, ...), labels (n, B), weights (n, B)): ξ, one row per client
    clients: Tensor | None = None  # (n,) ids of the clients in the rows (for per-client state)
    model: Any = None  # the parameter layout (StackedModel), e.g. for ASAM's weight mask
    losses: list[Tensor] = field(default_factory=list)  # each evaluation's (n,) losses, in order

    def gradient(self, point: Tensor) -> Tensor:
        r""":math:`\nabla F_i(\text{point}_i; \xi_i)` for every row i, ``(n, d)``: one batched forward and backward pass.

        The losses at ``point`` are kept in :attr:`losses` (local training's divergence
        check names the evaluation by its place in that list).
        """
        g, loss = self.loss_and_grad(point, *self.batch, self.clients)
        self.losses.append(loss)
        return g


class LocalRule(NamedTuple):
    """``init(x) -> state`` and ``update(g, state, y, step) -> (u, state)``.

    ``g`` is the direction the pieces before formed (at first the gradient at
    ``y``); a piece that ``forms_gradient`` gets ``None`` and calls ``step.gradient`` itself.
    """

    init: Callable[[Tensor], Any]
    update: Callable[[Tensor | None, Any, Tensor, LocalStep], tuple[Tensor, Any]]
    forms_gradient: bool = False


def local_step(rule: LocalRule, state, y: Tensor, step: LocalStep) -> tuple[Tensor, Any]:
    r"""One local step of ``rule`` at ``y`` (``(n, d)``): the update ``u`` (the caller sets ``y ← y + u``) and the new state.

    A rule that forms its own gradient (SAM) evaluates it; any other starts
    from the plain stochastic gradient :math:`\nabla F_i(y; \xi)`, the step's one evaluation.
    """
    g = None if rule.forms_gradient else step.gradient(y)
    return rule.update(g, state, y, step)


# ------------------------------------------------------------------- rule states
class EmptyState(NamedTuple):
    """The state of a piece that keeps none (one shared instance, :data:`EMPTY`)."""


EMPTY = EmptyState()


def no_state(x: Tensor) -> EmptyState:
    """``init`` of a stateless piece."""
    return EMPTY


class Momentum(NamedTuple):
    """:func:`trace`'s state."""

    velocity: Tensor  # (m, d) the heavy-ball buffer v, 0 at first


def map_state(fn: Callable[[Tensor], Tensor], state):
    """``fn`` applied to every tensor of a rule state (nested NamedTuples and tuples), the containers' types kept."""
    if isinstance(state, Tensor):
        return fn(state)
    parts = [map_state(fn, s) for s in state]
    return type(state)(*parts) if hasattr(state, "_fields") else type(state)(parts)


def typed_state(rule: LocalRule, saved, x: Tensor):
    """``saved``, a state of ``rule`` as a checkpoint holds it, in the rule's own types (:class:`Momentum`, ...).

    Checkpoints store rule states as plain tuples (``torch.load(weights_only=True)`` builds no classes), here
    typed again by the structure of ``rule.init``'s state; a state of another structure is refused. ``x``:
    parameters of the rule's shape (only the shape is read, ``rule.init`` runs on the meta device).
    """
    template = rule.init(torch.empty(x.shape, dtype=x.dtype, device="meta"))
    try:
        return _like(template, saved)
    except ValueError:  # (from _like: the structures differ somewhere)
        raise ValueError(
            f"a local-rule state {_shape(saved)} does not fit the rule, whose state is "
            f"{_shape(template)}; was it saved by another algorithm or rule?"
        ) from None


def _like(template, saved):
    if isinstance(template, Tensor):
        if not isinstance(saved, Tensor):
            raise ValueError
        return saved
    if not isinstance(saved, (tuple, list)) or len(saved) != len(template):
        raise ValueError
    parts = [_like(t, s) for t, s in zip(template, saved)]
    return type(template)(*parts) if hasattr(template, "_fields") else tuple(parts)


def _shape(state) -> str:
    """A state's structure in words: ``Momentum(velocity=tensor)``, ``(EmptyState(), tensor)``."""
    if isinstance(state, Tensor):
        return "tensor"
    if hasattr(state, "_fields"):
        return f"{type(state).__name__}({', '.join(f'{k}={_shape(v)}' for k, v in zip(state._fields, state))})"
    if isinstance(state, (tuple, list)):
        return f"({', '.join(_shape(s) for s in state)}{',' if len(state) == 1 else ''})"
    return repr(state)


# ------------------------------------------------------- pieces that form the gradient
def sam_scale(g: Tensor, rho: float) -> Tensor:
    r"""SAM's normalization :math:`\rho / (\lVert g \rVert_2 + \epsilon)`, one value per row of ``g`` (shape ``(m, 1)``).

    Rows are clients (``(m, d)``); a ``(d,)`` vector is one row. ε = :data:`SAM_EPS`.
    """
    return rho / (torch.linalg.vector_norm(g, dim=-1, keepdim=True) + SAM_EPS)


def sam_perturbation(g: Tensor, rho: float, scaling: Tensor | None = None, *, at: Tensor | None = None) -> Tensor:
    r"""SAM's ascent step δ, one norm per row of ``g`` (rows are clients; a ``(d,)`` vector is one row).

    .. math::
        \text{SAM:}\quad \delta = \rho\, \frac{g}{\lVert g \rVert_2 + \epsilon}, \qquad
        \text{ASAM (} T = \mathrm{diag}(\text{scaling})\text{):}\quad
        \delta = \rho\, \frac{T\,(T g)}{\lVert T g \rVert_2 + \epsilon}

    ε = :data:`SAM_EPS`. ``scaling`` is ASAM's elementwise :math:`T_w` (``g``'s shape; :func:`asam` passes
    :math:`|w| + \eta`); ``None`` is the identity, plain SAM. With ``at``, the perturbed point ``at + δ`` is
    returned instead of δ. Each form keeps the operations the engine's runs were computed with, so its numbers stay
    bit for bit: SAM scales ``g`` by :func:`sam_scale` (the point in one ``addcmul``, without a temporary δ), ASAM
    divides :math:`\rho\, T (T g)` by the norm.
    """
    if scaling is None:
        scale = sam_scale(g, rho)
        return g * scale if at is None else torch.addcmul(at, g, scale)
    tg = scaling * g
    norm = torch.linalg.vector_norm(tg, dim=-1, keepdim=True)  # ‖T g‖, one per row
    delta = rho * scaling * tg / (norm + SAM_EPS)
    return delta if at is None else at + delta


def sam(rho: float) -> LocalRule:
    r"""Sharpness-aware minimisation (Foret et al. 2021) as used by DFedSAM eq. (3).

    .. math::
        \delta_i = \rho\, g_i / \lVert g_i \rVert_2, \qquad
        \tilde g_i = \nabla F_i(y_i + \delta_i; \xi_i)

    The norm is the global L2 norm over all of client i's parameters (one
    value per client), and :math:`\tilde g` is evaluated on the same batch ξ.
    """

    def update(_, state: EmptyState, y: Tensor, step: LocalStep):
        g = step.gradient(y)  # ∇F_i(y; ξ)
        return step.gradient(sam_perturbation(g, rho, at=y)), state  # ∇F_i(y + δ; ξ)

    return LocalRule(no_state, update, forms_gradient=True)


def asam(rho: float, eta: float, scale_all: bool = True) -> LocalRule:
    r"""Adaptive SAM (Kwon et al. 2021, eq. (7)): the perturbation in the metric of :math:`T_w`.

    .. math::
        T_w = \mathrm{diag}(|w| + \eta), \qquad
        \delta = \rho\, \frac{T_w^2\, g}{\lVert T_w\, g \rVert_2}, \qquad
        \tilde g = \nabla F(w + \delta)

    The paper scales every parameter (``scale_all=True``); the public ASAM and FedASAM code scale only parameters
    whose name contains ``"weight"`` (biases get :math:`T_w = 1`), which ``scale_all=False`` reproduces with
    :meth:`dfl_core.stacked.StackedModel.weight_mask` of the step's model.
    """

    def update(_, state: EmptyState, y: Tensor, step: LocalStep):
        g = step.gradient(y)  # ∇F(w; ξ)
        t = y.abs() + eta
        if not scale_all:
            t = torch.where(step.model.weight_mask(), t, torch.ones_like(t))
        return step.gradient(sam_perturbation(g, rho, t, at=y)), state  # ∇F(w + δ; ξ)

    return LocalRule(no_state, update, forms_gradient=True)


#: The sharpness-aware steps a SAM algorithm can take (``sam_variant``).
SAM_VARIANTS = ("sam", "asam")


def sharpness_aware(p) -> LocalRule:
    """The hyperparameters' SAM step: :func:`sam` with ``rho``, or :func:`asam` with ``rho``, ``asam_eta``,
    ``asam_scale_all``."""
    return asam(p.rho, p.asam_eta, p.asam_scale_all) if p.sam_variant == "asam" else sam(p.rho)


def corrected_sam(
    rho: float, duals: Tensor, global_perturbation: Tensor, last_perturbation: Tensor | None = None
) -> LocalRule:
    r"""FedSMOO's SAM step with a corrected perturbation (Sun et al., ICML 2023, Algorithm 1; *reconstructed*).

    .. math::
        \hat s_i = \rho\, \frac{g_i - \mu_i - s}{\lVert g_i - \mu_i - s \rVert_2}, \qquad
        \mu_i \leftarrow \mu_i + \hat s_i - s, \qquad
        \tilde g_i = \nabla F_i(y_i + \hat s_i; \xi_i)

    ``duals`` is the ``(m, d)`` tensor of every client's :math:`\mu_i` (updated *in place* for the rows of the step,
    so the server keeps them across rounds); ``global_perturbation`` is the server's :math:`s` (``(d,)``). If given,
    ``last_perturbation`` (``(m, d)``) receives each client's latest :math:`\hat s_i`, which the server needs. The
    update is read off the FedSMOO authors' code (FL-Simulator ``optimizer/DRegSAM.py``), since the paper text is
    not among the seeds.
    """

    def update(_, state: EmptyState, y: Tensor, step: LocalStep):
        g = step.gradient(y)  # g_i = ∇F_i(y; ξ)
        ids = step.clients.to(duals.device)
        corrected = g - duals[ids] - global_perturbation
        perturbation = sam_perturbation(corrected, rho)
        duals.index_copy_(0, ids, duals[ids] + perturbation - global_perturbation)
        if last_perturbation is not None:
            last_perturbation.index_copy_(0, ids, perturbation)
        return step.gradient(y + perturbation), state  # ∇F_i(y + ŝ_i; ξ)

    return LocalRule(no_state, update, forms_gradient=True)


#: FedGF's two readings of its interpolation, eq. (12).
FEDGF_READINGS = ("points", "vectors")


def fedgf_perturbation(
    rho: float, c: float, global_point: Tensor, global_delta: Tensor, reading: str = "points"
) -> LocalRule:
    r"""FedGF's local gradient (Lee & Yoon, ICML 2024, eqs. (8)–(13)).

    .. math::
        \tilde w_{i,k} = w_{i,k} + \rho\, g_{i,k}/\lVert g_{i,k} \rVert, \qquad
        \tilde w = w + \rho\, \Delta/\lVert \Delta \rVert, \qquad
        \tilde w_{i,k,c} = c\, \tilde w + (1 - c)\, \tilde w_{i,k}

    and the step uses :math:`\nabla F_i(\tilde w_{i,k,c})` (eq. (13)).

    ``reading="points"`` is eq. (12) as printed and as the official code computes it: an interpolation of two
    perturbed *points*, so c also pulls the evaluation point towards the global model ``global_point`` = w̃.
    ``reading="vectors"`` interpolates the two *perturbations* around the client's own model,
    :math:`w_{i,k} + c\,\delta_g + (1-c)\,\delta_{i,k}`, with ``global_delta`` =
    :math:`\rho\Delta/\lVert\Delta\rVert`; this is how the slides' prose ("global and local perturbations") can be
    read.
    """
    if reading not in FEDGF_READINGS:
        raise ValueError(f"unknown FedGF reading {reading!r}; allowed: {FEDGF_READINGS}")

    def update(_, state: EmptyState, y: Tensor, step: LocalStep):
        local_delta = sam_perturbation(step.gradient(y), rho)  # ρ g_{i,k}/‖g_{i,k}‖, eq. (9)
        if reading == "points":
            point = c * global_point + (1 - c) * (y + local_delta)
        else:
            point = y + c * global_delta + (1 - c) * local_delta
        return step.gradient(point), state  # ∇F_i(w̃_{i,k,c}; ξ), eq. (13)

    return LocalRule(no_state, update, forms_gradient=True)


# ------------------------------------------------------ pieces that transform it
def scale_by_lr() -> LocalRule:
    r"""The descent step :math:`u = -\eta_t\, g`."""
    return LocalRule(no_state, lambda g, state, y, step: (-step.lr * g, state))


def add_decayed_weights(weight_decay: float) -> LocalRule:
    r"""L2 weight decay :math:`g \leftarrow g + \lambda_{wd}\, y` (as ``torch.optim.SGD`` does)."""
    return LocalRule(no_state, lambda g, state, y, step: (g + weight_decay * y, state))


def trace(momentum: float) -> LocalRule:
    r"""Heavy-ball momentum in PyTorch's form: :math:`v \leftarrow \theta v + g`, :math:`u = v` (state :class:`Momentum`).

    Followed by :func:`scale_by_lr` it gives :math:`y^{k+1} = y^k - \eta g^k + \theta (y^k - y^{k-1})` with
    :math:`y^{-1} = y^0`, the heavy-ball iteration of DFedAvgM eq. (4) (*reconstructed* from the paper's
    wording; the DFedSAM Algorithm 1 box keeps its initialisation :math:`y^{t,-1}(i) = y^{t,0}(i)`), as
    long as η is constant within the round, which it is here.
    """

    def init(x: Tensor) -> Momentum:
        return Momentum(torch.zeros_like(x))

    def update(g: Tensor, state: Momentum, y: Tensor, step: LocalStep):
        v = momentum * state.velocity + g
        return v, Momentum(v)

    return LocalRule(init, update)


def proximal(mu: float, anchor: Tensor) -> LocalRule:
    r"""FedProx's proximal term (Li et al. 2020, eq. (2)): :math:`g \leftarrow g + \mu\,(y - w^t)`.

    The gradient of :math:`h_i(y) = F_i(y) + \frac{\mu}{2}\lVert y - w^t\rVert^2`, with
    ``anchor`` = :math:`w^t` (shape ``(d,)``), the global model the round started from.
    """
    return LocalRule(no_state, lambda g, state, y, step: (g + mu * (y - anchor), state))


def control_variate(client_terms: Tensor | None = None, shared: Tensor | None = None) -> LocalRule:
    r"""A gradient correction :math:`g \leftarrow g - c_i + c` (SCAFFOLD, Karimireddy et al. 2020, Algorithm 1 l.10).

    ``client_terms`` is an ``(m, d)`` tensor whose row i is client i's :math:`c_i` (rows are picked by the step's
    client ids, ``step.clients``); ``shared`` (shape ``(d,)``) is the server's :math:`c`, the same for every client.
    Either may be ``None``. FedDyn uses it with :math:`c_i = \nabla L_i(\theta_i^{t-1})` and no shared term.
    """

    def update(g: Tensor, state: EmptyState, y: Tensor, step: LocalStep):
        if client_terms is not None:
            g = g - client_terms[step.clients.to(client_terms.device)]
        if shared is not None:
            g = g + shared
        return g, state

    return LocalRule(no_state, update)


def clip_by_global_norm(max_norm: float) -> LocalRule:
    r"""Scale each client's direction to norm at most ``max_norm`` (``torch.nn.utils.clip_grad_norm_``).

    Not in any of the seed papers; the public DisPFL, D-PSGD and FL-Simulator
    code clip at 10, so it is offered for the "as coded" variants.
    """

    def update(g: Tensor, state: EmptyState, y: Tensor, step: LocalStep):
        norm = torch.linalg.vector_norm(g, dim=1, keepdim=True)
        return g * (max_norm / (norm + 1e-6)).clamp(max=1.0), state

    return LocalRule(no_state, update)


def blend_direction(alpha: float, direction: Tensor) -> LocalRule:
    r"""MoFedSAM/FedCM's local direction :math:`v = \alpha\, g + (1 - \alpha)\, \Delta`.

    ``direction`` is the server's :math:`\Delta` (shape ``(d,)``), the same for every client in a round.
    """
    return LocalRule(no_state, lambda g, state, y, step: (alpha * g + (1 - alpha) * direction, state))


# ---------------------------------------------------------------------- composing
def chain(*pieces: LocalRule) -> LocalRule:
    """Apply ``pieces`` in order, each to the direction the one before returned; the state is the tuple of theirs.

    Only the first piece may form the gradient (SAM): a later one would get a
    direction already formed, and there is none to perturb along.
    """
    late = [i for i, piece in enumerate(pieces) if piece.forms_gradient and i > 0]
    if late:
        names = ", ".join(f"piece {i} ({pieces[i].update.__qualname__.split('.')[0]})" for i in late)
        raise ValueError(
            f"{names} of the chain forms its own gradient; such a piece (sam, asam, corrected_sam, "
            f"fedgf_perturbation) must come first"
        )

    pieces_in_order = Chain(pieces)
    return LocalRule(
        pieces_in_order.init, pieces_in_order.update, forms_gradient=bool(pieces) and pieces[0].forms_gradient
    )


class Chain:
    """What :func:`chain` runs: its ``pieces`` in order (a named class, so that a debugger or a traceback names it)."""

    def __init__(self, pieces: tuple[LocalRule, ...]):
        self.pieces = pieces

    def init(self, x: Tensor) -> tuple:
        """Every piece's initial state, in order."""
        return tuple(piece.init(x) for piece in self.pieces)

    def update(self, g: Tensor | None, states: tuple, y: Tensor, step: LocalStep) -> tuple[Tensor, tuple]:
        """Each piece transforms the direction the one before returned (the first may form it: SAM)."""
        new_states = []
        for piece, state in zip(self.pieces, states):
            g, state = piece.update(g, state, y, step)
            new_states.append(state)
        return g, tuple(new_states)


def sgd(weight_decay: float = 0.0, momentum: float = 0.0) -> LocalRule:
    r"""The descent every local rule ends with: ``chain(add_decayed_weights, trace, scale_by_lr)``.

    :math:`g \leftarrow g + \lambda_{wd} y`, :math:`v \leftarrow \theta v + g`, :math:`u = -\eta_t v`
    (``torch.optim.SGD``'s order); a piece whose coefficient is 0 is left out, so ``sgd()`` is plain SGD.
    """
    pieces = []
    if weight_decay > 0:
        pieces.append(add_decayed_weights(weight_decay))
    if momentum > 0:
        pieces.append(trace(momentum))
    return chain(*pieces, scale_by_lr())
