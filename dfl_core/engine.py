"""The simulator: all m clients of one run, stepped round by round.

One round t is (as in DFedSAM Algorithm 1):

1. η_t = η · decay^t, and this round's mixing matrix W_t (or one per gossip step);
2. the algorithm's round function, which calls back into
   * :meth:`Simulation.local_train` — K steps of the local rule on all clients at once,
   * :meth:`Simulation.gossip` — Q products with W_t;
3. every ``eval_every`` rounds, the measurements of :mod:`dfl_core.metrics`.

Every source of randomness has its own generator, seeded from ``(seed, purpose)``,
so that changing one part of a config does not reshuffle the others:

=============  ==========================================================
purpose        draws
=============  ==========================================================
``init``       the initial model(s)
``partition``  the split of the data over clients (and dataset subsets)
``batches``    each client's mini-batches
``topology``   random graphs and time-varying mixing matrices
=============  ==========================================================
"""
from __future__ import annotations

import time
import zlib
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .algorithms import ALGORITHMS
from .config import Config, ConfigError
from .data import FederatedData, federate, load_dataset
from .gossip import MixingOperator, mix
from .local import StepContext, make_local_rule
from .metrics import consensus_distance, evaluate_clients, evaluate_model
from .models import build_model
from .results import History
from .stacked import StackedModel
from .topology import MixingMatrix, make_topology

__all__ = ["Simulation", "run", "DivergenceError", "purpose_seed", "PURPOSES"]

PURPOSES = ("init", "partition", "batches", "topology", "clients")


class DivergenceError(RuntimeError):
    """The loss or the parameters became NaN or infinite."""


def default_client_chunk(d: int, m: int, device: torch.device) -> int:
    """How many clients train together when the config leaves ``client_chunk`` unset.

    On CPU the local rule's element-wise passes over ``(chunk, d)`` tensors are
    bound by memory bandwidth; measured for the 2NN at m = 100 (see
    ``benchmarks/``), keeping a chunk's parameters near 8 MB, within the L3
    cache, is fastest. On CUDA all clients train together.
    """
    if device.type == "cuda":
        return m
    return max(1, min(m, (8 << 20) // (4 * d)))


def purpose_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose, derived from the run's seed."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; allowed: {PURPOSES}")
    state = np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


class Simulation:
    """All clients of one run. Build it, then call :meth:`step` or :meth:`run`.

    Attributes a reader can check a run with:
        config: the resolved :class:`Config`.
        data: the clients' data (``data.train.client_indices()`` lists each client's samples).
        model: the :class:`StackedModel` (parameter layout, forward pass).
        x0: the initial parameters, ``(m, d)``.
        x: the current parameters, ``(m, d)``; row i is client i's model.
        t: rounds completed.
        matrices(t): the mixing matrices used in round t.
    """

    def __init__(self, config: Config, data: FederatedData | None = None):
        cfg = config.resolved()
        self.config = cfg
        self.algorithm = ALGORITHMS[cfg.algorithm]
        self.device, self.dtype = cfg.torch_device, cfg.torch_dtype
        # 1. data: the dataset, split over the clients (errors here come before any training)
        if data is None:
            part_seed = purpose_seed(cfg.seed, "partition")
            dataset = load_dataset(cfg.dataset, data_dir=cfg.data_dir, train_size=cfg.train_size,
                                   test_size=cfg.test_size, seed=part_seed)
            data = federate(dataset, cfg.num_clients, scheme=cfg.partition, alpha=cfg.alpha,
                            shards_per_client=cfg.shards_per_client,
                            dirichlet_method=cfg.dirichlet_method,
                            rng=np.random.default_rng(part_seed), device=self.device, dtype=self.dtype)
        if data.train.m != cfg.num_clients:
            raise ConfigError(f"data has {data.train.m} clients but num_clients={cfg.num_clients}")
        self.data = data
        ds = data.dataset
        # 2. model and initial parameters
        factory = partial(build_model, cfg.model, ds.input_shape, ds.num_classes)
        self.model = StackedModel(factory, cfg.forward_strategy, self.device)
        self.x0 = self.model.init_params(cfg.num_clients, purpose_seed(cfg.seed, "init"),
                                         same_init=cfg.same_init, dtype=self.dtype)
        self.x = self.x0.clone()
        # 3. communication graph; a bad graph fails here, before training
        self.topology = make_topology(cfg.topology, cfg.num_clients,
                                      seed=purpose_seed(cfg.seed, "topology") % 2**32,
                                      **cfg.topology_options())
        self.matrices(0)
        # 4. local rule and per-purpose generator for mini-batches
        self.rule = make_local_rule(rho=cfg.rho, weight_decay=cfg.weight_decay, momentum=cfg.momentum)
        self.rule_state = self.rule.init(self.x)
        self.client_chunk = cfg.client_chunk or default_client_chunk(self.model.d, cfg.num_clients, self.device)
        self.batch_gen = torch.Generator(device="cpu").manual_seed(purpose_seed(cfg.seed, "batches"))
        self.t = 0
        self.transmissions = 0
        self.history = History(config=cfg.to_dict())
        self._start = time.perf_counter()
        self._operators: list[MixingOperator] = []

    # ------------------------------------------------------------- the two tools
    def matrices(self, t: int) -> list[MixingMatrix]:
        """The mixing matrices of round t, one per gossip step (the same W repeated by default)."""
        q = self.config.gossip_steps
        if self.topology.time_varying and self.config.fresh_matrix_per_gossip_step:
            return [self.topology.matrix(t, step) for step in range(q)]
        return [self.topology.matrix(t, 0)] * q

    def local_train(self, x: Tensor) -> Tensor:
        """K steps of the local rule on all clients, from ``x``; returns y^{t,K}.

        Clients are independent during local training, so they are processed in
        chunks of :attr:`client_chunk` (all m at once when it equals m). Chunking
        changes memory use and speed, never results.
        """
        cfg = self.config
        batches = self._batches(cfg.local_steps)
        out = torch.empty_like(x)
        losses = torch.zeros(len(batches) * (2 if cfg.rho else 1), x.shape[0], dtype=x.dtype)
        for lo in range(0, x.shape[0], self.client_chunk):
            sl = slice(lo, lo + self.client_chunk)
            state = self.rule.init(x[sl]) if cfg.reset_momentum else _tree_slice(self.rule_state, sl)
            y, evals = x[sl], []
            for inputs, labels, weights in batches:
                def grad_fn(p: Tensor, batch=(inputs[sl], labels[sl], weights[sl])) -> Tensor:
                    g, loss = self._grad(p, *batch)
                    evals.append(loss)
                    return g
                g = grad_fn(y)
                u, state = self.rule.update(g, state, y, StepContext(grad_fn, self.lr))
                y = y + u
            out[sl] = y
            losses[:, sl] = torch.stack(evals).cpu()
            if not cfg.reset_momentum:
                _tree_assign(self.rule_state, sl, state)
        self._check_finite(losses)
        return out

    def gossip(self, x: Tensor) -> Tensor:
        """Q gossip steps with this round's matrices; counts the models sent."""
        for op, M in self._operators:
            self.transmissions += M.num_messages
        return mix(x, [op for op, _ in self._operators])

    # --------------------------------------------------------------------- round
    @property
    def lr(self) -> float:
        """η_t of the round being run (or the next one)."""
        return self.config.lr * self.config.lr_decay ** self.t

    def step(self) -> None:
        """Run one round of the algorithm."""
        self._operators = [(MixingOperator(M.W, self.device, self.dtype), M) for M in self.matrices(self.t)]
        with torch.no_grad():
            self.x = self.algorithm.round(self.x, self).detach()
        self.t += 1
        if not torch.isfinite(self.x.sum()):                         # one cheap pass; details only on failure
            client = int((~torch.isfinite(self.x)).any(1).nonzero()[0])
            raise DivergenceError(f"parameters of client {client} became NaN/inf in round {self.t}; "
                                  f"lower lr={self.config.lr}")

    def run(self, progress: bool = False, desc: str | None = None) -> History:
        """Run all remaining rounds, evaluating every ``eval_every`` rounds and at the end."""
        from tqdm.auto import tqdm

        cfg = self.config
        if self.t == 0 and not self.history.records:
            self.evaluate()
        bar = tqdm(total=cfg.rounds, initial=self.t, desc=desc or cfg.algorithm,
                   disable=not progress, leave=False)
        while self.t < cfg.rounds:
            self.step()
            if self.t % cfg.eval_every == 0 or self.t == cfg.rounds:
                rec = self.evaluate()
                bar.set_postfix(acc=f"{rec['test_acc']:.3f}", cd=f"{rec['consensus_distance']:.2e}")
            bar.update(1)
        bar.close()
        self.history.wall_time_s = time.perf_counter() - self._start
        return self.history

    def evaluate(self) -> dict:
        """Measure the current models and append a record to the history."""
        ds, x = self.data.dataset, self.x
        x_bar = x.mean(0)
        test_acc, test_loss = evaluate_model(self.model, x_bar, self.data.test.x, self.data.test.y)
        train_acc, train_loss = evaluate_model(self.model, x_bar, *self._train_union())
        c_train_acc, c_train_loss = evaluate_clients(self.model, x, self.data.train)
        c_test_acc, c_test_loss = evaluate_clients(self.model, x, self.data.test)
        d = self.model.d
        rec = {
            "round": self.t, "lr": self.config.lr * self.config.lr_decay ** max(self.t - 1, 0),
            "test_acc": test_acc, "test_loss": test_loss,
            "train_acc": train_acc, "train_loss": train_loss,
            "gen_error": train_acc - test_acc,
            "client_test_acc": c_test_acc.tolist(), "client_test_loss": c_test_loss.tolist(),
            "client_train_acc": c_train_acc.tolist(), "client_train_loss": c_train_loss.tolist(),
            "client_test_acc_mean": float(c_test_acc.mean()),
            "client_train_acc_mean": float(c_train_acc.mean()),
            "consensus_distance": consensus_distance(x),
            "transmissions": self.transmissions,
            "bytes_sent": self.transmissions * d * self.config.bits_per_param // 8,
            "wall_time_s": time.perf_counter() - self._start,
        }
        self.history.records.append(rec)
        return rec

    # ------------------------------------------------------------------ helpers
    def _train_union(self) -> tuple[Tensor, Tensor]:
        if not hasattr(self, "_union"):
            train = self.data.train
            idx = train.index[train.mask()]
            self._union = (train.x[idx], train.y[idx])
        return self._union

    def _batches(self, k_steps: int):
        """K mini-batches per client: ``(inputs (m,B,...), labels (m,B), weights (m,B))``.

        Each round every client walks through a fresh random permutation of its
        own train split, B samples per step, wrapping around if K·B exceeds its
        size. A client with fewer than B samples uses all of them (the weights
        mask the padding). In full-batch mode every step uses the whole split.
        """
        train = self.data.train
        counts = train.counts                                        # (m,)
        if self.config.full_batch:
            w = train.mask().to(self.dtype)
            inputs, labels = train.x[train.index], train.y[train.index]
            return [(inputs, labels, w)] * k_steps
        m, n_max = train.index.shape
        B = self.config.batch_size
        keys = torch.rand(m, n_max, generator=self.batch_gen).to(train.index.device)
        keys = keys.masked_fill(~train.mask(), 2.0)                  # padding sorts last
        perm = keys.argsort(dim=1)                                   # (m, n_max)
        b = torch.minimum(counts, torch.tensor(B, device=counts.device))
        arange = torch.arange(B, device=counts.device)
        w = (arange[None, :] < b[:, None]).to(self.dtype)            # (m, B)
        out = []
        for k in range(k_steps):
            pos = (k * b[:, None] + arange[None, :]) % counts[:, None].clamp(min=1)
            idx = train.index.gather(1, perm.gather(1, pos))         # (m, B) sample ids
            out.append((train.x[idx], train.y[idx], w))
        return out

    def _grad(self, p: Tensor, inputs: Tensor, labels: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
        """Gradients ``(m, d)`` of each client's mean loss on its batch, and the losses ``(m,)``."""
        with torch.enable_grad():
            leaves = self.model.leaves(p)
            logits = self.model.forward(leaves, inputs)              # (m, B, C)
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
            losses = (ce.view_as(weights) * weights).sum(1) / weights.sum(1)
            grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
        return self.model.gather_grads(grads, p), losses.detach()

    def _check_finite(self, losses: Tensor) -> None:
        """Stop on a NaN/inf loss, naming the round, the local step and the client."""
        bad = ~torch.isfinite(losses)                                # (gradient evaluations, m)
        if bad.any():
            step, client = (int(v) for v in bad.nonzero()[0])
            cfg = self.config
            hint = f"lr={cfg.lr}" + (f", rho={cfg.rho}" if cfg.rho else "")
            raise DivergenceError(
                f"loss became {float(losses[step, client])} in round {self.t + 1} (local gradient "
                f"evaluation {step}) on client {client}; the run diverged, likely because the learning "
                f"rate or the SAM radius is too large ({hint}); try a smaller value")


def _tree_slice(state, sl: slice):
    """Rows ``sl`` of every tensor in a rule state (a nested tuple of ``(m, d)`` tensors)."""
    if isinstance(state, Tensor):
        return state[sl]
    return tuple(_tree_slice(s, sl) for s in state)


def _tree_assign(state, sl: slice, part) -> None:
    """Write ``part`` (as returned by :func:`_tree_slice`) back into rows ``sl`` of ``state``."""
    if isinstance(state, Tensor):
        state[sl] = part
        return
    for s, p in zip(state, part):
        _tree_assign(s, sl, p)


def run(config: Config, progress: bool = False) -> History:
    """Run one configuration to the end and return its :class:`History`."""
    return Simulation(config).run(progress=progress)
