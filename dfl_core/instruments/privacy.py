r"""Membership inference attack (MIA) of DFedAvgM §6 (Sun et al.), after ML-Leaks (Salem et al., NDSS 2019).

The question: given a trained model and a data point, can an attacker tell whether the point was in the model's
training set? The attack, as DFedAvgM §6 describes it:

1. Split the data into a *shadow* part and a *target* part of the same size, each halved again:
   :math:`D^{in}_{shadow}, D^{out}_{shadow}, D^{in}_{target}, D^{out}_{target}`.
2. Train a *shadow model* (the target's architecture) on :math:`D^{in}_{shadow}`.
3. Apply it to all of :math:`D_{shadow}`; each point's feature vector is its **top three class probabilities,
   sorted** (two for a binary task), tagged 1 if the point is in :math:`D^{in}_{shadow}`, 0 otherwise.
4. Train the *attack model* on these labelled features: an MLP with one hidden layer of 64 units and a softmax
   output (the paper's footnote 3).
5. The target model was trained on :math:`D^{in}_{target}` (its members); the attack scores every point of
   :math:`D_{target}` by its probability of being a member, and the **ROC AUC** of these scores, members against
   non-members, over all thresholds, measures the leak. 0.5 is a random guess (perfect membership privacy); the
   higher, the less private.

What the paper leaves open, and what we chose (say so when you report numbers):

* how the shadow model is trained: by :func:`train_classifier` (mini-batch SGD with momentum, cross-entropy, a fixed
  number of steps). For a client of a :class:`~dfl_core.engine.Simulation`, :func:`client_membership_auc` gives the
  shadow the client's local budget: ``rounds·K`` steps at the run's lr, batch size and momentum, on as many samples
  as the client holds;
* how the attack MLP is trained: full-batch Adam on the class-balanced cross-entropy, ``attack_steps`` steps;
* where the data come from in a federated run: see :func:`client_membership_auc`.

Every random choice (splits, initialisations, batches) is drawn from generators
seeded by ``seed``, so the AUC is a function of the inputs and the seed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import DivergenceError
from ..stacked import StackedModel

if TYPE_CHECKING:
    from ..engine import Simulation

__all__ = [
    "membership_auc",
    "client_membership_auc",
    "MembershipResult",
    "roc_auc",
    "attack_features",
    "attack_model",
    "train_classifier",
    "ATTACK_HIDDEN",
    "TOP_K",
]

#: Hidden units of the attack MLP (DFedAvgM §6, footnote 3).
ATTACK_HIDDEN = 64
#: Sorted class probabilities in the attack's feature vector (DFedAvgM §6).
TOP_K = 3

XY = tuple[Tensor, Tensor]


# ---------------------------------------------------------------------- the AUC
def roc_auc(scores, labels) -> float:
    r"""Area under the ROC curve of ``scores`` for the binary ``labels`` (1 = positive), rank-based.

    The Mann–Whitney form: :math:`\mathrm{AUC} = P(S_+ > S_-) + \tfrac12 P(S_+ = S_-)`, computed as
    :math:`(R_+ - n_+(n_+ + 1)/2) / (n_+ n_-)` with :math:`R_+` the sum of the positives' ranks, tied scores sharing
    their average rank. This is the area under the ROC curve traced by all thresholds, tied scores joined by a
    straight segment (as ``sklearn.metrics.roc_auc_score``).
    """
    s = np.asarray(torch.as_tensor(scores).detach().cpu().to(torch.float64)).ravel()
    y = np.asarray(torch.as_tensor(labels).detach().cpu()).ravel()
    if s.shape != y.shape:
        raise ValueError(f"scores ({s.shape}) and labels ({y.shape}) differ in length")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or infinity")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"the AUC needs both classes; got {n_pos} positives and {n_neg} negatives")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # 1-based rank of each tie group's last member
    ranks = (ends - (counts - 1) / 2.0)[inverse]  # average rank within the group
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


# ------------------------------------------------------------------ the models
def attack_features(logits: Tensor, k: int = TOP_K) -> Tensor:
    """The attack's feature vectors: each row's top-``k`` softmax probabilities, largest first, float64.

    With fewer than ``k`` classes, all of them (two for a binary task, as the paper).
    """
    probs = torch.softmax(logits.detach().to(torch.float64), dim=-1)
    return probs.sort(dim=-1, descending=True).values[..., : min(k, probs.shape[-1])]


def attack_model(in_features: int = TOP_K, hidden: int = ATTACK_HIDDEN, seed: int = 0) -> nn.Sequential:
    """The attack MLP: ``in_features → hidden (ReLU) → 2`` logits (softmax in the loss), float64."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 2)).to(torch.float64)


def train_classifier(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    steps: int,
    lr: float,
    batch_size: int = 32,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    seed: int = 0,
    restart_every: int | None = None,
) -> nn.Module:
    """Train ``model`` in place by ``steps`` mini-batch SGD steps (heavy ball) on the cross-entropy; returns it.

    Batches walk through seeded random permutations of the data, reshuffled after each pass (the whole set when it
    is smaller than ``batch_size``). ``restart_every`` zeroes the momentum every that many steps, as a federated
    client's local momentum restarts every round.
    """
    if restart_every is not None and (not isinstance(restart_every, int) or restart_every < 1):
        raise ValueError(f"restart_every must be a positive integer or None, got {restart_every!r}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    n, b = len(y), min(batch_size, len(y))
    order, pos = torch.randperm(n, generator=gen), 0
    model.train()
    for step in range(steps):
        if restart_every is not None and step % restart_every == 0:
            opt.state.clear()  # heavy ball starts again from v = 0
        if pos + b > n:
            order, pos = torch.randperm(n, generator=gen), 0
        idx = order[pos : pos + b].to(y.device)
        pos += b
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        if not torch.isfinite(loss):  # a diverged shadow would surface later as NaN attack scores
            raise DivergenceError(
                f"training the classifier (e.g. the attack's shadow model) diverged at step "
                f"{step + 1} of {steps}: loss {float(loss.detach())}; lower lr={lr} (or momentum="
                f"{momentum}), e.g. with client_membership_auc(..., shadow_lr=...)"
            )
        loss.backward()
        opt.step()
    model.eval()
    return model


def _fit_attack(features: Tensor, labels: Tensor, *, steps: int, lr: float, seed: int) -> nn.Sequential:
    """The attack MLP fitted to (features, member labels) by full-batch Adam, classes weighted equally."""
    net = attack_model(features.shape[1], seed=seed)
    y = labels.long()
    counts = torch.bincount(y, minlength=2).to(torch.float64)
    weight = counts.sum() / (2 * counts)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(net(features), y, weight=weight).backward()
        opt.step()
    return net.eval()


def _predict(model: StackedModel | nn.Module, params: Tensor | None, x: Tensor) -> Tensor:
    with torch.no_grad():
        if isinstance(model, StackedModel):
            return model.forward_one(params, x)
        if params is not None:
            model = copy.deepcopy(model)
            nn.utils.vector_to_parameters(params.to(next(model.parameters())), model.parameters())
        return model(x)


def _fresh_copy(model: StackedModel | nn.Module, like: Tensor, seed: int) -> nn.Module:
    """A newly initialised model of the target's architecture, on ``like``'s device and dtype."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(model, StackedModel):
            net = model.factory()
        else:
            net = copy.deepcopy(model)
            for module in net.modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
    return net.to(device=like.device, dtype=like.dtype)


def _accuracy(logits: Tensor, y: Tensor) -> float:
    return float((logits.argmax(-1) == y).to(torch.float64).mean())


# ------------------------------------------------------------------ the attack
@dataclass
class MembershipResult:
    """The outcome of one membership inference attack."""

    auc: float  # the attack's ROC AUC on the target: members vs non-members
    shadow_auc: float  # the same on the shadow model's own data (the attack's training fit)
    target_member_acc: float  # target model's accuracy on its members
    target_nonmember_acc: float  # ... and on the non-members
    shadow_train_acc: float  # shadow model's accuracy on D_shadow^in
    shadow_out_acc: float  # ... and on D_shadow^out
    member_scores: Tensor = field(repr=False)  # attack's P(member) for each member
    nonmember_scores: Tensor = field(repr=False)  # ... for each non-member


def membership_auc(
    target_model: StackedModel | nn.Module,
    params: Tensor | None,
    members_xy: XY,
    nonmembers_xy: XY,
    shadow_train_xy: XY,
    shadow_out_xy: XY,
    *,
    seed: int,
    shadow_steps: int = 500,
    shadow_lr: float = 0.1,
    shadow_batch_size: int = 32,
    shadow_momentum: float = 0.9,
    shadow_weight_decay: float = 0.0,
    shadow_restart_every: int | None = None,
    attack_steps: int = 300,
    attack_lr: float = 0.01,
    top_k: int = TOP_K,
) -> MembershipResult:
    """Run the DFedAvgM §6 membership inference attack against one trained model.

    Args:
        target_model: the target's architecture and forward pass: a :class:`~dfl_core.stacked.StackedModel` (then
            ``params`` is the target's flat ``(d,)`` parameter vector) or an ``nn.Module`` (then ``params`` is
            ``None`` to use its own parameters, or a flat vector to load into a copy).
        members_xy: ``(x, y)`` of points the target was trained on (D_target^in).
        nonmembers_xy: points it never saw (D_target^out).
        shadow_train_xy: the shadow model's training data (D_shadow^in), disjoint from the target's data.
        shadow_out_xy: points the shadow never saw (D_shadow^out).
        seed: seeds the shadow's and the attack's initialisation and batches.
        shadow_*: the shadow's training (:func:`train_classifier`); make it resemble the target's, since the attack
            learns the shadow's confidence gap between seen and unseen points.
        attack_steps, attack_lr: full-batch Adam on the attack MLP.
        top_k: sorted probabilities per feature vector (3 in the paper).

    Returns:
        a :class:`MembershipResult`; ``auc`` is the number the paper plots.
    """
    x_in, y_in = shadow_train_xy
    x_out, y_out = shadow_out_xy
    shadow = _fresh_copy(target_model, x_in, seed)
    train_classifier(
        shadow,
        x_in,
        y_in,
        steps=shadow_steps,
        lr=shadow_lr,
        batch_size=shadow_batch_size,
        momentum=shadow_momentum,
        weight_decay=shadow_weight_decay,
        seed=seed + 1,
        restart_every=shadow_restart_every,
    )
    with torch.no_grad():
        logits_in, logits_out = shadow(x_in), shadow(x_out)
    feats = torch.cat([attack_features(logits_in, top_k), attack_features(logits_out, top_k)]).cpu()
    tags = torch.cat([torch.ones(len(y_in)), torch.zeros(len(y_out))])
    attack = _fit_attack(feats, tags, steps=attack_steps, lr=attack_lr, seed=seed + 2)
    with torch.no_grad():
        shadow_scores = torch.softmax(attack(feats), -1)[:, 1]
        t_in, t_out = _predict(target_model, params, members_xy[0]), _predict(target_model, params, nonmembers_xy[0])
        s_in = torch.softmax(attack(attack_features(t_in, top_k).cpu()), -1)[:, 1]
        s_out = torch.softmax(attack(attack_features(t_out, top_k).cpu()), -1)[:, 1]
    scores = torch.cat([s_in, s_out])
    labels = torch.cat([torch.ones(len(s_in)), torch.zeros(len(s_out))])
    return MembershipResult(
        auc=roc_auc(scores, labels),
        shadow_auc=roc_auc(shadow_scores, tags),
        target_member_acc=_accuracy(t_in, members_xy[1]),
        target_nonmember_acc=_accuracy(t_out, nonmembers_xy[1]),
        shadow_train_acc=_accuracy(logits_in, y_in),
        shadow_out_acc=_accuracy(logits_out, y_out),
        member_scores=s_in,
        nonmember_scores=s_out,
    )


def _by_class(pool: Tensor, labels: Tensor, counts: Tensor, gen: torch.Generator) -> Tensor:
    """``counts[c]`` random indices of class c from ``pool``, for every class c (each class's draws in one block)."""
    pool = pool[torch.randperm(len(pool), generator=gen)]
    return torch.cat([pool[labels[pool] == c][: int(k)] for c, k in enumerate(counts)])


def client_membership_auc(
    sim: Simulation, client: int = 0, *, seed: int = 0, params: Tensor | None = None, **kwargs
) -> MembershipResult:
    """The attack on client ``client``'s model in a :class:`~dfl_core.engine.Simulation`.

    Data (our reading, for a federated run, of the paper's equal-size splits of one pool):

    * members (D_target^in): the client's own train samples;
    * non-members (D_target^out): samples of the global test set, which no client trained on (through gossip every
      train sample reaches every model, so other clients' data are not non-members);
    * shadow data (D_shadow^in, D_shadow^out): two disjoint draws from the *other* clients' train samples (only the
      shadow model sees them, so their part in the federated training does not matter);
    * all four sets have the same label histogram, k_c points of class c, k_c = min(the client's count, the test
      set's count, half the other clients' count) of class c; members are a seeded subset where k_c is smaller.
      Matching the labels keeps a non-IID client's class skew from passing for membership: the attack sees members
      and non-members of the same classes in the same proportions.

    The shadow model gets the client's local training budget: ``t·K`` steps (``t`` the rounds run, at least one
    round) at the run's lr, batch size, momentum (restarted every K steps, as a client's local momentum restarts
    every round; without the restart, 500 steps of momentum 0.9 at lr 0.1 diverged on a showcase client) and weight
    decay; ``kwargs`` override these and the attack's settings (see :func:`membership_auc`). ``params`` defaults to
    the client's current model ``sim.x[client]``.
    """
    cfg, train, test = sim.config, sim.data.train, sim.data.test
    num_classes = sim.data.dataset.num_classes
    gen = torch.Generator().manual_seed(seed)
    parts = train.client_indices()
    mine = torch.as_tensor(parts[client])
    others = torch.as_tensor(np.concatenate([p for j, p in enumerate(parts) if j != client] or [np.zeros(0, np.int64)]))
    y_train, y_test = train.y.cpu(), test.y.cpu()

    def hist(idx: Tensor, labels: Tensor) -> Tensor:
        return torch.bincount(labels[idx], minlength=num_classes)

    k = torch.minimum(
        torch.minimum(hist(mine, y_train), torch.bincount(y_test, minlength=num_classes)), hist(others, y_train) // 2
    )
    n = int(k.sum())
    if n < 1:
        raise ValueError(
            f"client {client}: no class has samples in the client's data, the test set and "
            f"the other clients' data at once; the attack has nothing to compare"
        )
    members = _by_class(mine, y_train, k, gen)
    nonmembers = _by_class(torch.arange(len(y_test)), y_test, k, gen)
    shadow = _by_class(others, y_train, 2 * k, gen)
    offsets = torch.cumsum(2 * k, 0) - 2 * k  # each class's block in ``shadow``
    first = torch.cat([torch.arange(int(o), int(o + kc)) for o, kc in zip(offsets, k)])
    second = torch.cat([torch.arange(int(o + kc), int(o + 2 * kc)) for o, kc in zip(offsets, k)])
    dev = train.y.device

    def xy(split, idx: Tensor) -> XY:
        idx = idx.to(dev)
        return split.x[idx], split.y[idx]

    options = dict(
        shadow_steps=max(sim.t, 1) * cfg.params.local_steps,
        shadow_lr=cfg.lr,
        shadow_batch_size=n if cfg.full_batch else cfg.batch_size,
        shadow_momentum=getattr(cfg.params, "momentum", 0.0),
        shadow_weight_decay=cfg.weight_decay,
        shadow_restart_every=cfg.params.local_steps,
    )
    options.update(kwargs)
    return membership_auc(
        sim.model,
        sim.x[client] if params is None else params,
        xy(train, members),
        xy(test, nonmembers),
        xy(train, shadow[first]),
        xy(train, shadow[second]),
        seed=seed,
        **options,
    )
