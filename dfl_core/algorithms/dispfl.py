r"""DisPFL: decentralized sparse training with personalized masks (Dai, Shen, He, Tian, Tao, ICML 2022).

Client i keeps a binary mask :math:`m_i \in \{0,1\}^d` with a fixed number of ones in every layer (parameter tensor)
and a model :math:`x_i` supported on it. The algorithm's state (:class:`DisPFLState`) holds, across rounds,
``masks`` (the masks :math:`m_i^t` the next local training uses) and ``sent_masks`` (the masks :math:`m_i^{t-1}` the
current models :math:`x_i^t` were trained with, i.e. their supports, which is what a neighbour receives with the
model).

The paper's text was not available to us; every equation below is *reconstructed* from the official code
(rong-dai/DisPFL, ``fedml_api/standalone/DisPFL/dispfl_api.py`` ``train``/``_aggregate_func``, ``client.py``
``fire_mask``/``regrow_mask``, ``my_model_trainer.py`` ``calculate_sparsities``/``init_masks``/``train``) and
numbered here, not as in the paper.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError
from ..local import EmptyState, LocalRule, LocalStep, chain, no_state, sgd
from ..rng import purpose_seed
from ..settings import Integer, Number, OneOf, params, setting
from .base import Algorithm, DecentralizedParams

if TYPE_CHECKING:
    from ..stacked import StackedModel
    from .base import RoundTools, RunSettings

__all__ = [
    "DisPFLState",
    "dispfl_rule",
    "dispfl_round",
    "DISPFL",
    "erk_densities",
    "layer_counts",
    "initial_masks",
    "drop_fraction",
    "prune_and_regrow",
    "sparse_average",
    "mask_gradient",
    "message_bits",
    "DISPFL_REGROW",
    "DISPFL_MASK_INIT",
]

#: How regrown coordinates are chosen: largest |gradient| (RigL's rule, the code's default) or
#: uniformly at random (the code's ``--dis_gradient_check``, set in its published scripts).
DISPFL_REGROW = ("gradient", "random")
#: Initial masks: one random ERK mask per client (the published scripts' ``--different_initial``) or
#: one random ERK mask shared by all clients (the code's default without that flag).
DISPFL_MASK_INIT = ("independent", "shared")


# ----------------------------------------------------------------------- masks
def erk_densities(shapes: list[torch.Size], density: float) -> list[float]:
    r"""Erdős–Rényi-kernel density of every parameter tensor, overall density ``density`` (eq. (1)).

    .. math::
        p_l = \min(1,\ \epsilon\, \tfrac{\sum_k n_{l,k}}{\prod_k n_{l,k}}), \qquad
        \sum_l p_l\, |l| = \text{density} \cdot \sum_l |l|

    for a tensor of shape :math:`(n_{l,1}, n_{l,2}, \dots)` (a bias has
    :math:`p_l = \epsilon`). Layers whose :math:`p_l` would exceed 1 are made
    dense and :math:`\epsilon` is solved again over the others (``calculate_sparsities``, power scale 1).
    """
    sizes = [math.prod(s) for s in shapes]
    raw = [sum(s) / math.prod(s) for s in shapes]
    dense: set[int] = set()
    while True:
        sparse = [l for l in range(len(shapes)) if l not in dense]
        if not sparse:
            return [1.0] * len(shapes)
        budget = density * sum(sizes) - sum(sizes[l] for l in dense)
        eps = budget / sum(raw[l] * sizes[l] for l in sparse)
        top = max(raw[l] for l in sparse)
        if top * eps <= 1:
            return [1.0 if l in dense else eps * raw[l] for l in range(len(shapes))]
        dense |= {l for l in sparse if raw[l] == top}  # the densest ones saturate first


def layer_counts(model: StackedModel, density: float) -> list[int]:
    """Ones per layer of every mask: ``int(p_l · |l|)`` (``init_masks``); constant through training.

    A weight tensor left with no ones would cut the network (its output would not depend on its input): refused."""
    counts = [int(p * math.prod(s)) for p, s in zip(erk_densities(model.shapes, density), model.shapes)]
    dead = [l for l, (k, s) in enumerate(zip(counts, model.shapes)) if k == 0 and len(s) > 1]
    if dead:

        def keeps_every_weight(trial: float) -> bool:
            densities = erk_densities(model.shapes, trial)
            return all(int(p * math.prod(s)) > 0 for p, s in zip(densities, model.shapes) if len(s) > 1)

        # the smallest density, rounded up to 2 significant digits, at which every weight tensor keeps a one
        alive = next(t for t in np.geomspace(density, 1.0, 400) if keeps_every_weight(t))
        scale = 10.0 ** (math.floor(math.log10(alive)) - 1)
        alive = math.ceil(alive / scale) * scale
        raise ConfigError(
            f"dispfl_density={density!r} leaves weight tensor {dead[0]} (shape {tuple(model.shapes[dead[0]])}) "
            f"with no active weight; allowed: a density of at least {alive:.2g} for this model"
        )
    return counts


def initial_masks(
    model: StackedModel, m: int, density: float, generator: torch.Generator, shared: bool = False
) -> Tensor:
    """``(m, d)`` bool masks with :func:`layer_counts` ones per layer at uniformly random positions."""
    rows = 1 if shared else m
    masks = torch.zeros(rows, model.d, dtype=torch.bool)
    for o, shape, k in zip(model.offsets, model.shapes, layer_counts(model, density)):
        n = math.prod(shape)
        picks = torch.rand(rows, n, generator=generator).argsort(dim=1)[:, :k]
        masks[:, o : o + n].scatter_(1, picks, True)
    return masks.expand(m, -1).clone() if shared else masks


def drop_fraction(anneal: float, t: int, horizon: int) -> float:
    r""":math:`\alpha_t = \frac{\alpha}{2}\,(1 + \cos(\min(t, T)\,\pi / T))` (eq. (4); ``fire_mask``).

    The code never runs past T; here the masks stay fixed from round T on.
    """
    return anneal / 2 * (1 + float(np.cos(min(t, horizon) * np.pi / horizon)))


def _first_k(score: Tensor, among: Tensor, k: int, largest: bool) -> Tensor:
    """Per row, the columns of the k largest (or smallest) ``score`` where ``among``; ties to the lower column.

    ``score`` is non-negative float32, whose bit pattern orders like the number, so ``bits << 32 | column`` is a
    unique int64 key and ``topk`` on it is deterministic without a full stable sort of each row.
    """
    n = score.shape[1]
    column = torch.arange(n, device=score.device)
    key = (score.view(torch.int32).long() << 32) | ((n - 1 - column) if largest else column)
    key = key.masked_fill(~among, -1 if largest else torch.iinfo(torch.int64).max)
    return torch.topk(key, k, dim=1, largest=largest, sorted=False).indices


def prune_and_regrow(
    model: StackedModel,
    masks: Tensor,
    x: Tensor,
    drop: float,
    grad: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Next masks (eq. (4)): in every layer l of every client, with :math:`k_l = \lceil \alpha_t\, |m_{i,l}| \rceil`,

    1. prune: drop the :math:`k_l` active coordinates of smallest :math:`|x_i|`;
    2. regrow: among the now inactive coordinates (the just-pruned included), activate the :math:`k_l` of largest
       :math:`|g_i|` (``grad`` given), or :math:`k_l` uniformly random ones (``generator`` given).

    The count per layer never changes. Scores are compared in float32 and ties go to the lower index.
    """
    new = masks.clone()
    for o, shape in zip(model.offsets, model.shapes):
        n = math.prod(shape)
        layer = new[:, o : o + n]  # a view: edits go to ``new``
        k = math.ceil(drop * int(layer[0].sum()))
        if k == 0:
            continue
        # scores in float32: equal in exact arithmetic (identical input columns) means tied, whatever the
        # summation order of the float64 gradient (forward strategy, client chunks)
        layer.scatter_(1, _first_k(x[:, o : o + n].abs().float(), layer, k, largest=False), False)
        if grad is not None:
            score = grad[:, o : o + n].abs().float()
        else:
            score = torch.rand(layer.shape, generator=generator).to(x.device)
        layer.scatter_(1, _first_k(score, ~layer, k, largest=True), True)
    return new


# ------------------------------------------------------------- aggregation, training
def sparse_average(x: Tensor, sent: Tensor, W: Tensor) -> Tensor:
    r"""Coordinate-wise average over the neighbours that hold each coordinate (eq. (2), before masking).

    .. math::
        \bar x_i[k] = \frac{\sum_j w_{ij}\, s_j[k]\, x_j[k]}{\sum_j w_{ij}\, s_j[k]}
        \quad (0 \text{ if no } j \text{ with } w_{ij} > 0 \text{ holds } k)

    With the code's plain average over :math:`N_i \cup \{i\}` (``random-as-coded``,
    :math:`w_{ij} = 1/(|N_i|+1)`) this is ``_aggregate_func``'s ``w_tmp / count``.
    """
    s = sent.to(x.dtype)
    num, den = W @ (s * x), W @ s
    return torch.where(den > 0, num / den.clamp(min=torch.finfo(x.dtype).tiny), torch.zeros_like(num))


def mask_gradient(masks: Tensor) -> LocalRule:
    r"""Sparse local step :math:`g \leftarrow g \odot m_i` (eq. (3)); ``masks`` is ``(m, d)``, rows by client id.

    The code masks the parameters after each SGD step instead; from a masked
    starting point both give the same iterates (without its norm clipping).
    """

    def update(g: Tensor, state: EmptyState, y: Tensor, step: LocalStep):
        rows = masks if step.clients is None else masks[step.clients.to(masks.device)]
        return g * rows.to(g.dtype), state

    return LocalRule(no_state, update)


def message_bits(d: int, nonzeros: int, bits_per_param: int) -> int:
    """One sparse model on the wire: its mask as a d-bit bitmap, then its ``nonzeros`` values."""
    return d + nonzeros * bits_per_param


# ----------------------------------------------------------------------- round
class DisPFLState(NamedTuple):
    x: Tensor  # (m, d) every client's (sparse) personalized model
    masks: Tensor  # (m, d) bool: m_i^t, the masks the next local training uses
    sent_masks: Tensor  # (m, d) bool: m_i^{t-1}, the supports of the x_i^t

    @classmethod
    def init(cls, x0: Tensor, r: RoundTools) -> "DisPFLState":
        """Random ERK masks m_i^0 at ``dispfl_density`` (one shared mask with ``dispfl_mask_init="shared"``)."""
        p = r.params
        gen = torch.Generator().manual_seed(purpose_seed(r.config.seed, "masks"))
        masks = initial_masks(
            r.model, r.config.num_clients, p.dispfl_density, gen, shared=p.dispfl_mask_init == "shared"
        ).to(x0.device)
        return cls(x0, masks, masks.clone())


def dispfl_rule(p: DisPFLParams, s: DisPFLState, run: RunSettings) -> LocalRule:
    """Sparse local SGD, eq. (3): the gradient masked by the client's current mask."""
    return chain(mask_gradient(s.masks), sgd(run.weight_decay))


def dispfl_round(s: DisPFLState, r: RoundTools) -> DisPFLState:
    r"""DisPFL (Dai et al., ICML 2022), one round t; *reconstructed* from the official code (see module doc).

    Before round 0: masks :math:`m_i^0` with ERK layer densities (eq. (1)) at ``dispfl_density``, random positions
    (:meth:`DisPFLState.init`); the round-0 record of a run evaluates the dense initial models. Every client i, in
    parallel:

    1. receive :math:`(x_j^t, m_j^{t-1})` from the neighbours :math:`j \in N_i^t`
       (:math:`w_{ij} > 0`; its own included) and aggregate (eq. (2))

       .. math::
           y_i^{t,0} = m_i^t \odot \frac{\sum_j w_{ij}\, m_j^{t-1} \odot x_j^t}{\sum_j w_{ij}\, m_j^{t-1}}

    2. K sparse local SGD steps (eq. (3)):
       :math:`y_i^{t,k+1} = y_i^{t,k} - \eta_t\, \big(\nabla F_i(y_i^{t,k}; \xi) \odot m_i^t\big)`;
       :math:`x_i^{t+1} = y_i^{t,K}`, sent with its mask :math:`m_i^t`;
    3. next mask (eq. (4)), per layer, :math:`\alpha_t = \frac{\alpha}{2}(1 + \cos(t\pi/T))`:
       prune the :math:`\lceil \alpha_t |m_{i,l}^t| \rceil` smallest :math:`|x_i^{t+1}|` on the mask,
       regrow as many of the largest :math:`|\nabla F_i(x_i^{t+1})|` off it, giving :math:`m_i^{t+1}`.

    :math:`x_i^{t+1}` keeps the values on pruned coordinates until the next aggregation masks them out, as in the
    code, and is the personalized model the engine evaluates (``client_test_acc``: the code's accuracy after local
    training); ``test_acc`` is the plain average of the m sparse models. The record's ``mask_change`` is the
    fraction of a mask's ones moved in step 3.

    Our choices, where the code does something else or nothing:

    * W: any topology; the weights :math:`w_{ij}` of eq. (2) reduce to the code's
      plain average on ``random-as-coded`` (each client draws ``num_neighbors`` others each round).
    * The regrow gradient is over the client's whole train split (``r.full_gradient``);
      the code's ``screen_gradients`` uses one mini-batch.
    * ``dispfl_regrow="random"``: the published scripts' ``--dis_gradient_check`` (uniform regrowth).
    * ``dispfl_mask_init="shared"``: the code's default (one mask for all); "independent" is its scripts'.
    * T in :math:`\alpha_t` is ``dispfl_anneal_rounds`` (default: ``rounds``, the code's ``comm_round``).
    * No gradient clipping (the code clips at norm 10 before masking); momentum 0 and
      weight decay as configured (the code: 0 and 5e-4).

    Communication: each message is :func:`message_bits` (a d-bit bitmap plus
    the nonzeros at ``bits_per_param`` bits), one per edge :math:`j \to i`, :math:`j \ne i`.
    """
    p, model, x = r.params, r.model, s.x
    (M,) = r.matrices()  # one gossip step per round
    W = torch.as_tensor(M.W, dtype=x.dtype, device=x.device)
    nonzeros = sum(layer_counts(model, p.dispfl_density))
    r.count_transmissions(M.num_messages, message_bits(model.d, nonzeros, r.config.bits_per_param))

    y0 = sparse_average(x, s.sent_masks, W) * s.masks.to(x.dtype)  # (2)
    x_next = r.local_train(y0)  # (3), the masked rule

    drop = drop_fraction(p.dispfl_anneal, r.t, p.dispfl_anneal_rounds or r.config.rounds)
    if p.dispfl_regrow == "gradient":  # (4)
        new = prune_and_regrow(model, s.masks, x_next, drop, grad=r.full_gradient(x_next))
    else:
        new = prune_and_regrow(model, s.masks, x_next, drop, generator=r.generator("masks"))
    moved = (new != s.masks).sum(1).double().mean() / 2  # ones that moved, per client
    r.record(mask_change=float(moved) / max(1, nonzeros))
    return DisPFLState(x_next, new, s.masks)


@params
class DisPFLParams(DecentralizedParams):
    """DisPFL's public code (rong-dai/DisPFL ``main_dispfl.py`` and scripts): density 0.5, anneal 0.5,
    10 random neighbours a round (``random-as-coded``)."""

    topology: str = "random-as-coded"
    dispfl_density: float = setting(
        0.5, "DisPFL: density of every client's mask, ERK over layers", Number(0.0, 1.0, low_open=True)
    )
    dispfl_anneal: float = setting(
        0.5,
        "DisPFL: fraction of each layer's mask updated per round, annealed: "
        "dispfl_anneal/2·(1 + cos(πt/dispfl_anneal_rounds)) in round t",
        Number(0.0, 1.0),
    )
    dispfl_anneal_rounds: int | None = setting(
        None, "DisPFL: the rounds over which that cosine falls to 0 (default: rounds)", Integer(1)
    )
    dispfl_regrow: str = setting(
        "gradient",
        "DisPFL regrowth: 'gradient' (largest |gradient|, the code's default) or 'random' (the published scripts)",
        OneOf(DISPFL_REGROW),
    )
    dispfl_mask_init: str = setting(
        "independent",
        "DisPFL initial masks: 'independent' per client (the "
        "published scripts) or 'shared' by all (the code's default)",
        OneOf(DISPFL_MASK_INIT),
    )


DISPFL = Algorithm(
    "dispfl",
    "DisPFL: personalized sparse masks, masked aggregation and local steps, "
    "prune-and-regrow (Dai et al. 2022; reconstructed from the code)",
    DisPFLParams,
    dispfl_rule,
    dispfl_round,
    DisPFLState.init,
    fixed={"gossip_steps": 1},
)
