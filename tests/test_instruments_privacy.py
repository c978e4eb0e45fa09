"""The membership inference attack of DFedAvgM §6 and its rank-based ROC AUC.

Margins: with n members and n non-members the AUC of a random guess has
standard error sqrt((2n + 1) / (12 n²)): 0.024 for n = 300, 0.058 for n = 50.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from dfl_core import Config, Simulation
from dfl_core.data import load_dataset
from dfl_core.instruments import privacy
from dfl_core.instruments.privacy import (
    attack_features,
    client_membership_auc,
    membership_auc,
    roc_auc,
    train_classifier,
)
from dfl_core.models import build_model
from dfl_core.stacked import StackedModel


# ------------------------------------------------------------------------- AUC
@pytest.mark.parametrize("n, levels", [(10, 3), (200, 5), (1000, 1000), (57, 2)])
def test_roc_auc_equals_sklearn(n, levels):
    rng = np.random.default_rng(n)
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    scores = rng.integers(0, levels, n) + 0.3 * labels  # many ties when levels is small
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert roc_auc(torch.as_tensor(scores), torch.as_tensor(labels)) == pytest.approx(roc_auc_score(labels, scores))


def test_roc_auc_extremes_and_errors():
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.0
    assert roc_auc([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([0.1, float("nan")], [0, 1])


def test_attack_features_are_sorted_top_probabilities():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 0.0, 0.0]])
    f = attack_features(logits)
    assert f.shape == (2, 3) and f.dtype == torch.float64
    assert torch.allclose(f[0], torch.softmax(torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=torch.float64), 0)[:3])
    assert attack_features(logits[:, :2]).shape == (2, 2)  # binary task: two probabilities


# ---------------------------------------------------------------------- attack
@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits")
    x, y = torch.cat([ds.x_train, ds.x_test]), torch.cat([ds.y_train, ds.y_test])  # 1797 samples
    model = StackedModel(partial(build_model, "2nn", ds.input_shape, ds.num_classes))
    return x, y, model


def _parts(x, y, n, seed, k=5):
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    return [(x[perm[i * n : (i + 1) * n]], y[perm[i * n : (i + 1) * n]]) for i in range(k)]


def _trained(model, xy, seed, steps):
    torch.manual_seed(seed)
    net = train_classifier(model.factory(), *xy, steps=steps, lr=0.1, seed=seed)
    with torch.no_grad():
        acc = float((net(xy[0]).argmax(1) == xy[1]).float().mean())
    return net, acc


def test_auc_is_near_half_when_the_target_saw_neither_set(digits):
    """Target trained on A; members B and non-members C are both unseen: |AUC - 0.5| < 0.1 (4 s.e.)."""
    x, y, model = digits
    a, b, c, d, e = _parts(x, y, 300, seed=0)
    net, acc = _trained(model, a, seed=0, steps=150)
    assert acc == 1.0
    r = membership_auc(model, model.flatten(net), b, c, d, e, seed=0, shadow_steps=150)
    assert abs(r.auc - 0.5) < 0.1, r
    assert r.shadow_auc > 0.55  # the attack did learn something on the shadow's data


def test_auc_is_high_for_a_model_overfitted_on_its_members(digits):
    """Target trained to 100% train accuracy on its 50 members; three draws of the data.

    Each AUC > 0.65 (2.6 s.e. above a random guess), their mean > 0.75.
    """
    x, y, model = digits
    aucs = []
    for rep in range(3):
        _, b, c, d, e = _parts(x, y, 50, seed=rep + 1)
        net, acc = _trained(model, b, seed=rep, steps=200)
        assert acc == 1.0
        r = membership_auc(model, model.flatten(net), b, c, d, e, seed=rep, shadow_steps=200)
        assert r.target_member_acc == 1.0 and r.target_nonmember_acc < 0.95
        aucs.append(r.auc)
    assert min(aucs) > 0.65 and np.mean(aucs) > 0.75, aucs


def test_module_and_stacked_targets_agree(digits):
    x, y, model = digits
    _, b, c, d, e = _parts(x, y, 40, seed=7)
    net, _ = _trained(model, b, seed=0, steps=50)
    kw = dict(seed=3, shadow_steps=50, attack_steps=100)
    r1 = membership_auc(model, model.flatten(net), b, c, d, e, **kw)
    r2 = membership_auc(net, None, b, c, d, e, **kw)
    assert r1.auc == pytest.approx(r2.auc, abs=1e-12)
    assert torch.allclose(r1.member_scores, r2.member_scores, atol=1e-10)


def test_client_membership_auc_on_a_simulation(monkeypatch):
    sim = Simulation(Config(algorithm="dfedavgm", num_clients=6, rounds=2, eval_every=2, topology="ring", seed=0))
    sim.run()
    r = client_membership_auc(sim, client=2, seed=0, attack_steps=100)
    n = len(r.member_scores)
    assert n == len(r.nonmember_scores) and 0 < n <= int(sim.data.train.counts[2])
    assert 0.0 <= r.auc <= 1.0 and 0.0 <= r.shadow_auc <= 1.0
    assert client_membership_auc(sim, client=2, seed=0, attack_steps=100).auc == r.auc  # a function of the seed
    # the four sets: where they come from, disjoint, and with one label histogram
    seen = {}
    monkeypatch.setattr(privacy, "membership_auc", lambda model, params, *sets, **kw: seen.update(sets=sets))
    client_membership_auc(sim, client=2, seed=0)
    members, nonmembers, shadow_in, shadow_out = seen["sets"]
    train, test = sim.data.train, sim.data.test

    def rows(x, pool):  # which rows of ``pool`` the samples are
        return {int((pool.flatten(1) == v.flatten()).all(1).nonzero()[0]) for v in x}

    assert rows(members[0], train.x) <= set(train.client_indices()[2].tolist())
    others = set(np.concatenate([p for j, p in enumerate(train.client_indices()) if j != 2]).tolist())
    s_in, s_out = rows(shadow_in[0], train.x), rows(shadow_out[0], train.x)
    assert s_in <= others and s_out <= others and not s_in & s_out
    hist = [torch.bincount(xy[1], minlength=10).tolist() for xy in seen["sets"]]
    assert hist[0] == hist[1] == hist[2] == hist[3] and sum(hist[0]) == n
    assert len(rows(nonmembers[0], test.x)) == n


def test_a_diverging_shadow_model_is_reported_not_turned_into_nan_scores():
    from dfl_core import DivergenceError
    from dfl_core.instruments.privacy import train_classifier

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3))
    x, y = torch.randn(40, 4) * 100, torch.randint(0, 3, (40,))
    with pytest.raises(DivergenceError, match=r"diverged at step \d+ of 50: loss .*lower lr=1e\+38"):
        train_classifier(net, x, y, steps=50, lr=1e38)


def test_the_divergence_message_reads_the_loss_without_an_autograd_warning():
    """The loss in the message is read from a detached tensor: no "requires_grad ... to a scalar" warning."""
    import warnings

    from dfl_core import DivergenceError

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3))
    x, y = torch.randn(40, 4) * 100, torch.randint(0, 3, (40,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        with pytest.raises(DivergenceError, match="loss (nan|inf)"):
            train_classifier(net, x, y, steps=50, lr=1e38)


def test_momentum_restarted_every_step_is_plain_sgd_and_every_k_steps_is_not():
    """``restart_every`` zeroes the heavy-ball buffer: restarting at every step leaves plain SGD; restarting
    every 5 steps (a client's K) is neither plain SGD nor uninterrupted momentum."""
    x, y = torch.randn(64, 4, dtype=torch.float64), torch.randint(0, 3, (64,))

    def trained(**kw):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 3)).to(torch.float64)
        train_classifier(net, x, y, steps=20, lr=0.1, batch_size=8, seed=1, **kw)
        return torch.cat([p.detach().flatten() for p in net.parameters()])

    plain, restart1 = trained(momentum=0.0), trained(momentum=0.9, restart_every=1)
    assert torch.allclose(plain, restart1, atol=1e-14, rtol=0)
    every5, never = trained(momentum=0.9, restart_every=5), trained(momentum=0.9)
    assert (every5 - plain).abs().max() > 1e-3 and (every5 - never).abs().max() > 1e-3
    with pytest.raises(ValueError, match="restart_every must be a positive integer or None, got 0"):
        trained(momentum=0.9, restart_every=0)
