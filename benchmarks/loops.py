"""The two per-client loops the engine is measured against.

* :func:`lean_round`: the fastest plain-PyTorch per-client loop we could write
  without stacking clients: per client, deep-copy the model, build a new
  ``torch.optim.SGD``, take K steps on in-memory tensors (SAM the usual
  two-pass way), then mix the state dicts with the round's W. No evaluation.
* :class:`ReferenceLoop`: the structure of the public DisPFL / DFedSAM code
  (rong-dai/DisPFL, ``fedml_api/standalone``): one shared model object that every
  client's state dict is loaded into, ``copy.deepcopy`` of state dicts before
  and after training, a ``DataLoader`` with shuffling and a new optimizer per
  client and round (SAM as the davda54 ``SAM`` optimizer wrapper), mixing by
  state-dict arithmetic as DisPFL's ``_aggregate_func``, and, every round, the
  evaluation of every client's model on its local test data and of the
  average model on the test set.

Both can be fed fixed batches (``batches[i]`` = client i's K ``(inputs,
labels)`` pairs), e.g. the engine's own, so that tests can check that all
three compute the same parameters.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from dfl_core.data import FederatedData

__all__ = [
    "LocalSpec",
    "ClientTensors",
    "client_tensors",
    "lean_train",
    "lean_mix",
    "lean_round",
    "SAM",
    "ReferenceLoop",
    "random_batches",
    "states_from_flat",
    "flat_from_states",
    "Batches",
]

#: ``batches[i][k] = (inputs (B, ...), labels (B,))``: client i's k-th mini-batch.
Batches = Sequence[Sequence[tuple[Tensor, Tensor]]]


@dataclass(frozen=True)
class LocalSpec:
    """The local training of one round, as the engine's config describes it."""

    lr: float = 0.1
    K: int = 5
    B: int = 32
    rho: float = 0.0  # > 0: SAM
    momentum: float = 0.0
    weight_decay: float = 0.0
    lr_decay: float = 1.0  # η_t = lr · lr_decay^t


@dataclass
class ClientTensors:
    """Each client's train and test samples as its own tensors (what the per-client code holds)."""

    train_x: list[Tensor]
    train_y: list[Tensor]
    test_x: list[Tensor]
    test_y: list[Tensor]

    @property
    def m(self) -> int:
        return len(self.train_x)


def client_tensors(data: FederatedData, clients: Sequence[int] | None = None) -> ClientTensors:
    """Copy each client's samples out of the engine's padded layout (untimed setup)."""
    tr, te = data.train, data.test
    ids = range(tr.m) if clients is None else clients
    out = ClientTensors([], [], [], [])
    for i in ids:
        a = tr.index[i, : int(tr.counts[i])]
        b = te.index[i, : int(te.counts[i])]
        out.train_x.append(tr.x[a].clone())
        out.train_y.append(tr.y[a].clone())
        out.test_x.append(te.x[b].clone())
        out.test_y.append(te.y[b].clone())
    return out


def random_batches(x: Tensor, y: Tensor, K: int, B: int, gen: torch.Generator) -> list[tuple[Tensor, Tensor]]:
    """K batches of B samples from a fresh permutation of one client's data (wrapping around)."""
    n = len(y)
    reps = -(-K * B // n)
    perm = torch.cat([torch.randperm(n, generator=gen) for _ in range(reps)])[: K * B]
    return [(x[perm[k * B : (k + 1) * B]], y[perm[k * B : (k + 1) * B]]) for k in range(K)]


def states_from_flat(names: Sequence[str], unflatten: Callable[[Tensor], dict], x: Tensor) -> list[dict]:
    """An ``(m, d)`` parameter matrix as m state dicts (copies)."""
    return [{n: v.clone() for n, v in unflatten(x[i]).items()} for i in range(x.shape[0])]


def flat_from_states(names: Sequence[str], states: Sequence[dict]) -> Tensor:
    """m state dicts back into an ``(m, d)`` matrix, parameters in ``names`` order."""
    return torch.stack([torch.cat([s[n].reshape(-1) for n in names]) for s in states])


# ============================================================================ lean loop
def lean_train(
    template: nn.Module, state: dict, batches: Sequence[tuple[Tensor, Tensor]], spec: LocalSpec, lr: float
) -> dict:
    """One client's K local steps: deep-copied model, new SGD optimizer, SAM in two passes."""
    net = copy.deepcopy(template)
    net.load_state_dict(state)
    params = list(net.parameters())
    opt = torch.optim.SGD(params, lr=lr, momentum=spec.momentum, weight_decay=spec.weight_decay)
    for xb, yb in batches:
        opt.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        if spec.rho > 0:  # SAM: ascend to y + ρ g/‖g‖, take the gradient there
            with torch.no_grad():
                grads = [p.grad for p in params]
                norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
                old = [p.detach().clone() for p in params]
                torch._foreach_add_(params, torch._foreach_mul(grads, spec.rho / (norm + 1e-12)))
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            with torch.no_grad():
                torch._foreach_copy_(params, old)
        opt.step()
    return {k: v.detach() for k, v in net.state_dict().items()}


def lean_mix(states: Sequence[dict], W: np.ndarray) -> list[dict]:
    """x_i ← Σ_j W_ij x_j over the nonzeros of row i, tensor by tensor."""
    out = []
    for i in range(len(states)):
        nz = np.flatnonzero(W[i])
        mixed = {}
        for key in states[i]:
            acc = states[nz[0]][key] * float(W[i, nz[0]])
            for j in nz[1:]:
                acc.add_(states[j][key], alpha=float(W[i, j]))
            mixed[key] = acc
        out.append(mixed)
    return out


def lean_round(
    template: nn.Module,
    states: Sequence[dict],
    W: np.ndarray,
    spec: LocalSpec,
    data: ClientTensors | None = None,
    batches: Batches | None = None,
    gen: torch.Generator | None = None,
    t: int = 0,
    gossip_steps: int = 1,
) -> list[dict]:
    """One round of the lean loop: every client trains, then Q gossip steps of the state dicts."""
    lr = spec.lr * spec.lr_decay**t
    new = []
    for i, state in enumerate(states):
        b = batches[i] if batches is not None else random_batches(data.train_x[i], data.train_y[i], spec.K, spec.B, gen)
        new.append(lean_train(template, state, b, spec, lr))
    for _ in range(gossip_steps):
        new = lean_mix(new, W)
    return new


# ======================================================================= reference loop
class SAM(torch.optim.Optimizer):
    """The davda54 SAM optimizer wrapper, as vendored by DP-FedSAM and da-dpfl's DFedSAM.

    ``first_step`` moves every parameter to w + ρ g/‖g‖ (one global norm,
    ε = 1e-12) and stores w in ``state[p]["old_p"]``; ``second_step`` puts w
    back and lets the base optimizer step with the gradient taken there.
    """

    def __init__(self, params, base_optimizer=torch.optim.SGD, rho: float = 0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                p.add_(p.grad * scale.to(p))
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self) -> Tensor:
        return torch.norm(
            torch.stack(
                [p.grad.norm(p=2) for group in self.param_groups for p in group["params"] if p.grad is not None]
            ),
            p=2,
        )


class ReferenceLoop:
    """A per-client loop with the structure of the public DisPFL/DFedSAM code.

    Args:
        template: the model; one deep copy of it is the shared model object.
        data: each client's tensors.
        W: the mixing matrix, or a function ``t -> W`` for time-varying graphs.
        spec: the local training.
        gossip_steps: Q (DFedSAM-MGS).
        dpsgd: D-PSGD's round, x ← W x + (one local step − x), instead of train-then-mix.
        eval_batch: batch size of the evaluation DataLoaders.
    """

    def __init__(
        self,
        template: nn.Module,
        data: ClientTensors,
        W: np.ndarray | Callable[[int], np.ndarray],
        spec: LocalSpec,
        gossip_steps: int = 1,
        dpsgd: bool = False,
        eval_batch: int = 128,
    ):
        self.model = copy.deepcopy(template)
        self.data, self.spec, self.Q, self.dpsgd, self.eval_batch = data, spec, gossip_steps, dpsgd, eval_batch
        self.W = W if callable(W) else (lambda t, W=W: W)
        self.states = [copy.deepcopy(template.state_dict()) for _ in range(data.m)]
        self.t = 0
        self._union: dict[str, tuple[Tensor, Tensor]] = {}

    def _global(self, split: str) -> tuple[Tensor, Tensor]:
        """The global test set (the union of the clients' test splits), or the union of the train splits."""
        if split not in self._union:
            d = self.data
            xs, ys = (d.test_x, d.test_y) if split == "test" else (d.train_x, d.train_y)
            self._union[split] = (torch.cat(xs), torch.cat(ys))
        return self._union[split]

    # ------------------------------------------------------------------ training
    def _loader(self, i: int, batches: Batches | None) -> DataLoader:
        if batches is not None:  # fixed batches (tests): replay them in order
            xs, ys = zip(*batches[i])
            return DataLoader(TensorDataset(torch.cat(xs), torch.cat(ys)), batch_size=self.spec.B, shuffle=False)
        return DataLoader(
            TensorDataset(self.data.train_x[i], self.data.train_y[i]), batch_size=self.spec.B, shuffle=True
        )

    def _train(self, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
        self.model.train()
        steps, sam = 0, self.spec.rho > 0
        while steps < self.spec.K:  # K steps, re-shuffling every epoch
            for xb, yb in loader:
                optimizer.zero_grad()
                F.cross_entropy(self.model(xb), yb).backward()
                if sam:
                    optimizer.first_step(zero_grad=True)
                    F.cross_entropy(self.model(xb), yb).backward()
                    optimizer.second_step(zero_grad=True)
                else:
                    optimizer.step()
                steps += 1
                if steps == self.spec.K:
                    break

    def _aggregate(self, states: Sequence[dict], row: np.ndarray) -> dict:
        """DisPFL's ``_aggregate_func``: a deep copy zeroed, then Σ_j w_ij x_j key by key."""
        nz = np.flatnonzero(row)
        w_tmp = copy.deepcopy(states[nz[0]])
        for k in w_tmp.keys():
            w_tmp[k] = w_tmp[k] - w_tmp[k]
            for j in nz:
                w_tmp[k] += states[j][k] * float(row[j])
        return w_tmp

    def train_round(self, batches: Batches | None = None) -> None:
        """Local training of every client, then the gossip; advances t."""
        spec = self.spec
        lr = spec.lr * spec.lr_decay**self.t
        w_lstrd = []
        for i in range(self.data.m):
            w_per = copy.deepcopy(self.states[i])
            self.model.load_state_dict(w_per)
            loader = self._loader(i, batches)
            if spec.rho > 0:
                optimizer = SAM(
                    self.model.parameters(),
                    torch.optim.SGD,
                    rho=spec.rho,
                    lr=lr,
                    momentum=spec.momentum,
                    weight_decay=spec.weight_decay,
                )
            else:
                optimizer = torch.optim.SGD(
                    self.model.parameters(), lr=lr, momentum=spec.momentum, weight_decay=spec.weight_decay
                )
            self._train(loader, optimizer)
            w_lstrd.append(copy.deepcopy(self.model.state_dict()))
        W = self.W(self.t)
        if self.dpsgd:  # x ← W x + (y − x)
            mixed = [self._aggregate(self.states, W[i]) for i in range(self.data.m)]
            for i in range(self.data.m):
                for k in mixed[i]:
                    mixed[i][k] += w_lstrd[i][k] - self.states[i][k]
            self.states = mixed
        else:
            for _ in range(self.Q):
                w_lstrd = [self._aggregate(w_lstrd, W[i]) for i in range(self.data.m)]
            self.states = w_lstrd
        self.t += 1

    # ---------------------------------------------------------------- evaluation
    @torch.no_grad()
    def _test(self, x: Tensor, y: Tensor) -> tuple[float, float]:
        self.model.eval()
        correct, loss, n = 0.0, 0.0, 0
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=self.eval_batch, shuffle=False):
            out = self.model(xb)
            loss += float(F.cross_entropy(out, yb, reduction="sum"))
            correct += float((out.argmax(1) == yb).sum())
            n += len(yb)
        return correct / max(n, 1), loss / max(n, 1)

    def evaluate(self, train_too: bool = False) -> dict:
        """Every client's model on its local test data (and train data), the average model on the test set.

        ``train_too`` adds the measurements the engine's ``evaluate`` also makes
        (each client on its train split, the average on the union of the train
        splits), so that both do the same work.
        """
        d = self.data
        rec: dict = {"client_test_acc": [], "client_train_acc": []}
        for i in range(d.m):
            self.model.load_state_dict(self.states[i])
            rec["client_test_acc"].append(self._test(d.test_x[i], d.test_y[i])[0])
            if train_too:
                rec["client_train_acc"].append(self._test(d.train_x[i], d.train_y[i])[0])
        w_avg = copy.deepcopy(self.states[0])
        for k in w_avg.keys():
            for i in range(1, d.m):
                w_avg[k] += self.states[i][k]
            w_avg[k] = w_avg[k] / d.m
        self.model.load_state_dict(w_avg)
        rec["test_acc"] = self._test(*self._global("test"))[0]
        if train_too:
            rec["train_acc"] = self._test(*self._global("train"))[0]
        return rec
