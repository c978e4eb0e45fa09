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
``clients``    the clients sampled in a round (centralized FL)
``augment``    random crops and flips (CIFAR)
``quantize``   stochastic rounding of quantized messages (dfedavgm-q)
``masks``      sparse masks: initial positions, random regrowth (dispfl)
=============  ==========================================================

Per-round draws (batches, clients, augmentation, time-varying graphs) come from
generators seeded by ``(seed, purpose, round)``, so round t's randomness does
not depend on how the run got there.
"""
from __future__ import annotations

import copy
import os
import time
import zlib
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from . import checkpoint as ckpt
from .algorithms import ALGORITHMS
from .config import Config, ConfigError, check_int
from .data import FederatedData, federate, load_dataset
from .gossip import MixingOperator, mix
from .local import LocalRule, StepContext, asam, make_local_rule, sam
from .metrics import consensus_distance, evaluate_clients, evaluate_model
from .models import build_model
from .results import History
from .stacked import StackedModel
from .topology import MixingMatrix, make_topology

__all__ = ["Simulation", "run", "DivergenceError", "purpose_seed", "PURPOSES", "dataset_subset", "federated_data", "DataCache"]

PURPOSES = ("init", "partition", "batches", "topology", "clients", "augment", "quantize", "masks")


class DivergenceError(RuntimeError):
    """The loss or the parameters became NaN or infinite."""


def default_client_chunk(d: int, m: int, device: torch.device,
                         bytes_per_client: Callable[[], int] | None = None) -> int:
    """How many clients train together when the config leaves ``client_chunk`` unset.

    CPU: about 8 MB of parameters per chunk. Same-process A/B runs
    (``benchmarks/RESULTS.md``, SAM round, 2 cores) measured the 2NN at
    m = 100 at 0.65 s with 10 clients per chunk (8 MB) against 1.47 s with 84
    (64 MB), and the MNIST CNN at m = 30 at 5.4 s with 1 client (6.6 MB)
    against 7.6 s with 10 (most likely because (chunk, d) temporaries below
    glibc's mmap threshold reuse heap memory, while larger ones page-fault
    fresh memory on every local step).

    CUDA: as many clients as fit in 60% of the free device memory, with the
    memory one client needs measured by ``bytes_per_client`` (a probe that runs
    one client's forward and backward pass); all m when they fit.
    """
    if device.type == "cuda":
        if bytes_per_client is None:
            return m
        free, _ = torch.cuda.mem_get_info(device)
        return max(1, min(m, int(0.6 * free) // max(1, bytes_per_client())))
    return max(1, min(m, (8 << 20) // (4 * d)))


def purpose_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose, derived from the run's seed."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; allowed: {PURPOSES}")
    state = np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def dataset_subset(cfg: Config):
    """The dataset (or stratified subset) of ``cfg``, drawn with the run's ``partition`` seed."""
    return load_dataset(cfg.dataset, data_dir=cfg.data_dir, train_size=cfg.train_size,
                        test_size=cfg.test_size, seed=purpose_seed(cfg.seed, "partition"))


def federated_data(cfg: Config, dataset=None) -> FederatedData:
    """The clients' data of ``cfg``, as :class:`Simulation` builds it (``dataset``: :func:`dataset_subset`)."""
    part_seed = purpose_seed(cfg.seed, "partition")
    if dataset is None:
        dataset = dataset_subset(cfg)
    return federate(dataset, cfg.num_clients, scheme=cfg.partition, alpha=cfg.alpha,
                    shards_per_client=cfg.shards_per_client, dirichlet_method=cfg.dirichlet_method,
                    rng=np.random.default_rng(part_seed), device=cfg.torch_device, dtype=cfg.torch_dtype)


class DataCache:
    """:func:`federated_data` with memory: runs that differ only in the algorithm share their data.

    Loading and splitting a dataset is often the slowest part of a short run;
    a chapter that runs many algorithms over a few seeds loads each seed's
    subset once (``Simulation(cfg, data=cache(cfg))`` is then exactly
    ``Simulation(cfg)``).
    """

    DATA_FIELDS = ("dataset", "data_dir", "train_size", "test_size", "seed")
    SPLIT_FIELDS = ("num_clients", "partition", "alpha", "shards_per_client", "dirichlet_method",
                    "device", "dtype")

    def __init__(self):
        self._datasets: dict[tuple, object] = {}
        self._splits: dict[tuple, FederatedData] = {}

    def __call__(self, cfg: Config) -> FederatedData:
        cfg = cfg.resolved()
        key_data = tuple(getattr(cfg, f) for f in self.DATA_FIELDS)
        key = key_data + tuple(getattr(cfg, f) for f in self.SPLIT_FIELDS)
        if key not in self._splits:
            if key_data not in self._datasets:
                self._datasets[key_data] = dataset_subset(cfg)
            self._splits[key] = federated_data(cfg, self._datasets[key_data])
        return self._splits[key]


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
        m = cfg.num_clients
        # 1. data: the dataset, split over the clients (errors here come before any training)
        if data is None:
            data = federated_data(cfg)
        if data.train.m != m:
            raise ConfigError(f"data has {data.train.m} clients but num_clients={m}")
        self.data = data
        ds = data.dataset
        # 2. model and initial parameters
        factory = partial(build_model, cfg.model, ds.input_shape, ds.num_classes)
        self.model = StackedModel(factory, cfg.forward_strategy, self.device)
        self.x0 = self.model.init_params(m, purpose_seed(cfg.seed, "init"),
                                         same_init=cfg.same_init or self.centralized, dtype=self.dtype)
        self.x = self.x0.clone() if not self.centralized else self.x0[0].clone().expand(m, -1)
        # 3. communication graph (decentralized); a bad graph fails here, before training
        self.topology = None
        if not self.centralized:
            self.topology = make_topology(cfg.topology, m, seed=purpose_seed(cfg.seed, "topology") % 2**32,
                                          **cfg.topology_options())
            self.matrices(0)
        # 4. local rule: the algorithm's gradient-forming head, then weight decay, momentum, -η
        self.default_head = self._default_head()
        self.rule_state = None           # kept across rounds only with reset_momentum=False
        self.client_chunk = cfg.client_chunk or default_client_chunk(
            self.model.d, m, self.device, self._bytes_per_client)
        self.server: dict = {}           # state kept by a centralized algorithm across rounds
        self.t = 0
        self.transmissions = 0
        self.bits_sent = 0               # bits of all messages so far (see count_transmissions)
        self.bits_last_round = 0
        self.history = History(config=cfg.to_dict())
        self._start = time.perf_counter()
        self._operators: list[tuple[MixingOperator, MixingMatrix]] = []

    def _bytes_per_client(self) -> int:
        """Peak device memory of one client's gradient on a batch, plus its (d,)-sized buffers (CUDA)."""
        batch = [t[:1] for t in self._batches(1, torch.arange(1))[0]]
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._grad(self.x[:1], *batch)
        peak = torch.cuda.max_memory_allocated(self.device) - before
        buffers = 8 * self.model.d * self.x.element_size()   # x, y, g, u, SAM point, momentum, leaves, out
        return int(2 * peak + buffers)                       # 2x: SAM's second pass, allocator slack

    @property
    def centralized(self) -> bool:
        return self.algorithm.kind == "centralized"

    def _default_head(self) -> tuple[LocalRule, ...]:
        cfg = self.config
        if not self.algorithm.uses_sam:
            return ()
        if cfg.sam_variant == "asam":
            return (asam(cfg.rho, cfg.asam_eta, None if cfg.asam_scale_all else self.model.weight_mask()),)
        return (sam(cfg.rho),)

    def round_generator(self, purpose: str, t: int | None = None) -> torch.Generator:
        """A generator for one purpose in the current round, a function of (seed, purpose, t) only.

        Deriving it per round, instead of carrying one generator along, lets a
        resumed run or another process draw exactly the same numbers.
        """
        t = self.t if t is None else t
        seed = np.random.SeedSequence([purpose_seed(self.config.seed, purpose), t]).generate_state(1)[0]
        return torch.Generator(device="cpu").manual_seed(int(seed))

    # ------------------------------------------------------------ the round tools
    def matrices(self, t: int) -> list[MixingMatrix]:
        """The mixing matrices of round t, one per gossip step (the same W repeated by default)."""
        if self.topology is None:
            return []
        q = self.config.gossip_steps
        if self.topology.time_varying and self.config.fresh_matrix_per_gossip_step:
            return [self.topology.matrix(t, step) for step in range(q)]
        return [self.topology.matrix(t, 0)] * q

    def local_train(self, x: Tensor, clients: Tensor | None = None,
                    head: tuple[LocalRule, ...] | None = None) -> Tensor:
        """K steps of the local rule from ``x`` (rows = ``clients``, default all); returns y^{t,K}.

        ``head`` replaces the algorithm's default gradient-forming pieces (SAM
        for SAM algorithms) for this call. Clients are independent during local
        training, so they run in chunks of :attr:`client_chunk`; chunking
        changes memory use and speed, never results.
        """
        cfg = self.config
        clients = torch.arange(self.config.num_clients) if clients is None else clients.cpu()
        rule = make_local_rule(*(self.default_head if head is None else head),
                               weight_decay=cfg.weight_decay, momentum=cfg.momentum)
        batches = self._batches(cfg.local_steps, clients)
        if not cfg.reset_momentum and self.rule_state is None:
            self.rule_state = rule.init(torch.zeros_like(self.x))    # every client's buffer starts at 0
        out = torch.empty_like(x)
        losses = []
        for lo in range(0, len(clients), self.client_chunk):
            rows = slice(lo, lo + self.client_chunk)
            ids = clients[rows]
            state = rule.init(x[rows]) if cfg.reset_momentum else _tree_index(self.rule_state, ids)
            y, evals = out[rows], []                    # trained in place in the output (rules keep no y)
            y.copy_(x[rows])
            for inputs, labels, weights in batches:
                def grad_fn(p: Tensor, batch=(inputs[rows], labels[rows], weights[rows])) -> Tensor:
                    g, loss = self._grad(p, *batch)
                    evals.append(loss)
                    return g
                g = grad_fn(y)
                u, state = rule.update(g, state, y, StepContext(grad_fn, self.lr, ids))
                y.add_(u)
            losses.append(torch.stack(evals).cpu())
            if not cfg.reset_momentum:
                _tree_assign(self.rule_state, ids, state)
        self._check_finite(torch.cat(losses, dim=1), clients)
        return out

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        """Each client's gradient of its mean loss over its whole train split at ``x`` (rows = ``clients``).

        One pass over the local data without augmentation (SCAFFOLD option I,
        MimeLite's server statistics); chunked like :meth:`local_train`.
        """
        clients = torch.arange(self.config.num_clients) if clients is None else clients.cpu()
        out = torch.empty_like(x)
        for lo in range(0, len(clients), self.client_chunk):
            rows = slice(lo, lo + self.client_chunk)
            out[rows], _ = self._grad(x[rows], *self._whole_splits(clients[rows]))
        return out

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        """Q gossip steps with this round's matrices; counts the messages sent and their bits."""
        for _, M in self._operators:
            self.count_transmissions(M.num_messages, bits_per_message)
        return mix(x, [op for op, _ in self._operators])

    def sample_clients(self) -> Tensor:
        """The clients taking part in this round (centralized FL), sorted, without replacement.

        A count (``clients_per_round``) or a fraction of m (``client_fraction``,
        rounded, at least 1), drawn uniformly from the round's own generator.
        """
        return self.clients_of_round(self.t)

    def clients_of_round(self, t: int) -> Tensor:
        """The clients sampled in round t (a function of the seed and t only)."""
        cfg, m = self.config, self.config.num_clients
        n = cfg.clients_per_round or max(1, round(cfg.client_fraction * m))
        return torch.randperm(m, generator=self.round_generator("clients", t))[:n].sort().values

    def client_weights(self, clients: Tensor) -> Tensor:
        """Aggregation weights n_i / Σ n_j over ``clients`` (McMahan et al. 2017), shape ``(n, 1)``."""
        n = self.data.train.counts[clients.to(self.data.train.counts.device)].to(self.dtype)
        return (n / n.sum()).unsqueeze(1).to(self.device)

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        """Record ``models`` messages (e.g. downloads and uploads of centralized FL) and their bits.

        A message is one model-sized vector; unless the algorithm says otherwise
        (a quantized message, :func:`dfl_core.instruments.quantize.message_bits`)
        it carries ``d * bits_per_param`` bits.
        """
        self.transmissions += models
        bits = self.model.d * self.config.bits_per_param if bits_per_message is None else bits_per_message
        self.bits_sent += models * int(bits)

    # --------------------------------------------------------------------- round
    @property
    def lr(self) -> float:
        """η_t of the round being run (or the next one)."""
        return self.config.lr * self.config.lr_decay ** self.t

    def step(self) -> None:
        """Run one round of the algorithm."""
        self._augment_calls = 0
        self._operators = [(MixingOperator(M.W, self.device, self.dtype), M) for M in self.matrices(self.t)]
        bits_before = self.bits_sent
        with torch.no_grad():
            if self.centralized:
                w = self.algorithm.round(self.x[0], self).detach()
                self.x = w.expand(self.config.num_clients, -1)
            else:
                self.x = self.algorithm.round(self.x, self).detach()
        self.bits_last_round = self.bits_sent - bits_before
        self.t += 1
        if not torch.isfinite(self.x.sum()):                         # one cheap pass; details only on failure
            client = int((~torch.isfinite(self.x)).any(1).nonzero()[0])
            raise DivergenceError(f"parameters of client {client} became NaN/inf in round {self.t}; "
                                  f"the learning rate or the SAM radius is likely too large; lower lr={self.config.lr}"
                                  + (f" or rho={self.config.rho}" if self.config.rho else ""))

    def run(self, progress: bool = False, desc: str | None = None,
            checkpoint: str | os.PathLike | None = None, checkpoint_every: int = 10) -> History:
        """Run all remaining rounds, evaluating every ``eval_every`` rounds and at the end.

        With ``checkpoint`` (a file path) the state is saved atomically every
        ``checkpoint_every`` rounds, after the last round, and when the run is
        interrupted (Ctrl-C); :meth:`resume` continues from it. A diverging run
        stops with :class:`DivergenceError` and leaves the last good checkpoint.
        """
        from tqdm import tqdm

        cfg = self.config
        if checkpoint is not None:
            check_int("checkpoint_every", checkpoint_every, 1)
        if self.t == 0 and not self.history.records:
            self.evaluate()
        bar = tqdm(total=cfg.rounds, initial=self.t, desc=desc or cfg.algorithm,
                   disable=not progress, leave=False)
        saved_t = None
        while self.t < cfg.rounds:
            before = self._snapshot() if checkpoint is not None else None
            try:
                self.step()
                if self.t % cfg.eval_every == 0 or self.t == cfg.rounds:
                    rec = self.evaluate()
                    bar.set_postfix(acc=f"{rec['test_acc']:.3f}", cd=f"{rec['consensus_distance']:.2e}")
            except KeyboardInterrupt:
                if checkpoint is not None:                  # save the last completed round, then stop
                    self._restore(before)
                    self.save_checkpoint(checkpoint)
                raise
            except DivergenceError as err:
                if checkpoint is not None and saved_t is not None:
                    raise DivergenceError(f"{err}. The last good checkpoint (round {saved_t}) is "
                                          f"{str(checkpoint)!r}") from None
                raise
            if checkpoint is not None and (self.t % checkpoint_every == 0 or self.t == cfg.rounds):
                self.save_checkpoint(checkpoint)
                saved_t = self.t
            bar.update(1)
        bar.close()
        self.history.wall_time_s = time.perf_counter() - self._start
        return self.history

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything this run carries from round to round, on the CPU (see :mod:`dfl_core.checkpoint`)."""
        return {
            "format": ckpt.FORMAT, "config": self.config.to_dict(), "t": self.t,
            "x": (self.x[0] if self.centralized else self.x).detach().cpu().clone(),
            "rule_state": _to_device(self.rule_state, "cpu", clone=True),
            "server": _to_device(copy.deepcopy(self.server), "cpu"),
            "counters": {"transmissions": self.transmissions, "bits_sent": self.bits_sent,
                         "bits_last_round": self.bits_last_round},
            "history": copy.deepcopy(self.history.records),
            "elapsed_s": time.perf_counter() - self._start,
        }

    def load_state_dict(self, state: dict, path: str | os.PathLike = "") -> None:
        """Continue from ``state`` (from :meth:`state_dict`); the config must match (see :mod:`dfl_core.checkpoint`)."""
        ckpt.check_compatible(state["config"], self.config.to_dict(), state["t"], path)
        x = state["x"].to(self.device, self.dtype)
        self.x = x.expand(self.config.num_clients, -1) if self.centralized else x
        self.t = state["t"]
        self.rule_state = _to_device(state["rule_state"], self.device)
        self.server = _to_device(state["server"], self.device)
        counters = state["counters"]
        self.transmissions, self.bits_sent = counters["transmissions"], counters["bits_sent"]
        self.bits_last_round = counters["bits_last_round"]
        self.history = History(config=self.config.to_dict(), records=list(state["history"]))
        self._start = time.perf_counter() - state["elapsed_s"]

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Write :meth:`state_dict` to ``path`` atomically."""
        return ckpt.save_atomic(self.state_dict(), path)

    @classmethod
    def resume(cls, path: str | os.PathLike, config: Config | None = None,
               data: FederatedData | None = None) -> "Simulation":
        """A simulation continuing from the checkpoint at ``path``.

        ``config`` defaults to the checkpoint's own; a config given here may
        differ only in :data:`dfl_core.checkpoint.RESUMABLE_CHANGES` (e.g. more rounds).
        """
        state = ckpt.load(path)
        sim = cls(config if config is not None else Config.from_dict(state["config"]), data=data)
        sim.load_state_dict(state, path)
        return sim

    def _snapshot(self) -> tuple:
        """The state before a round, to undo a round interrupted half-way."""
        return (self.x.clone(), self.t, _to_device(self.rule_state, self.device, clone=True),
                copy.deepcopy(self.server), self.transmissions, self.bits_sent, self.bits_last_round,
                len(self.history.records))

    def _restore(self, snap: tuple) -> None:
        (self.x, self.t, self.rule_state, self.server, self.transmissions, self.bits_sent,
         self.bits_last_round, n_records) = snap
        del self.history.records[n_records:]

    def evaluate(self) -> dict:
        """Measure the current models and append a record to the history."""
        ds, x = self.data.dataset, self.x
        x_bar = x.mean(0)
        test_acc, test_loss = evaluate_model(self.model, x_bar, self.data.test.x, self.data.test.y)
        train_acc, train_loss = evaluate_model(self.model, x_bar, *self._train_union())
        c_train_acc, c_train_loss = evaluate_clients(self.model, x, self.data.train, self.client_chunk)
        c_test_acc, c_test_loss = evaluate_clients(self.model, x, self.data.test, self.client_chunk)
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
            "bits_sent": self.bits_sent, "bits_last_round": self.bits_last_round,
            "bytes_sent": self.bits_sent // 8,
            "wall_time_s": time.perf_counter() - self._start,
            **self.server.get("record", {}),          # an algorithm's own per-round quantities
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

    def _batches(self, k_steps: int, clients: Tensor):
        """K mini-batches for ``clients``: ``(inputs (n,B,...), labels (n,B), weights (n,B))``.

        Each round every client walks through a fresh random permutation of its
        own train split, B samples per step, wrapping around if K·B exceeds its
        size. A client with fewer than B samples uses all of them (the weights
        mask the padding). In full-batch mode every step uses the whole split.
        The permutations of all m clients are drawn, so a client's batches do
        not depend on which other clients take part.
        """
        train = self.data.train
        dev = train.index.device
        ids = clients.to(dev)
        index, counts = train.index[ids], train.counts[ids]              # (n, n_max), (n,)
        mask = train.mask()[ids]
        if self.config.full_batch:
            return [self._whole_splits(ids)] * k_steps
        m, n_max = train.index.shape
        B = min(self.config.batch_size, n_max)        # a batch never needs more slots than a client has samples
        keys = torch.rand(m, n_max, generator=self.round_generator("batches")).to(dev)[ids]
        perm = keys.masked_fill(~mask, 2.0).argsort(dim=1)             # padding sorts last
        b = counts.clamp(max=B)
        arange = torch.arange(B, device=dev)
        w = (arange[None, :] < b[:, None]).to(self.dtype)              # (n, B)
        out = []
        for k in range(k_steps):
            pos = (k * b[:, None] + arange[None, :]) % counts[:, None].clamp(min=1)
            idx = index.gather(1, perm.gather(1, pos))                   # (n, B) sample ids
            out.append((self._augment(train.x[idx]), train.y[idx], w))
        return out

    def _whole_splits(self, clients: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every sample of each client's train split, padded: ``(inputs, labels, weights)`` as in :meth:`_batches`."""
        train = self.data.train
        ids = clients.to(train.index.device)
        index = train.index[ids]
        return train.x[index], train.y[index], train.mask()[ids].to(self.dtype)

    def _augment(self, inputs: Tensor) -> Tensor:
        """The dataset's on-device augmentation, if it has one (CIFAR: random crop and flip)."""
        if getattr(self.data.dataset, "augmentation", None) is None:
            return inputs
        self._augment_calls = getattr(self, "_augment_calls", 0) + 1          # one stream per step
        gen = self.round_generator("augment")
        gen.manual_seed(gen.initial_seed() + self._augment_calls)
        return self.data.dataset.augment(inputs, gen)

    def _grad(self, p: Tensor, inputs: Tensor, labels: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
        """Gradients ``(m, d)`` of each client's mean loss on its batch, and the losses ``(m,)``."""
        with torch.enable_grad():
            leaves = self.model.leaves(p)
            logits = self.model.forward(leaves, inputs)              # (m, B, C)
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
            losses = (ce.view_as(weights) * weights).sum(1) / weights.sum(1)
            grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
        return self.model.gather_grads(grads, p), losses.detach()

    def _check_finite(self, losses: Tensor, clients: Tensor) -> None:
        """Stop on a NaN/inf loss, naming the round, the local step and the client."""
        bad = ~torch.isfinite(losses)                                # (gradient evaluations, n)
        if bad.any():
            step, row = (int(v) for v in bad.nonzero()[0])
            client = int(clients[row])
            cfg = self.config
            hint = f"lr={cfg.lr}" + (f", rho={cfg.rho}" if cfg.rho else "")
            raise DivergenceError(
                f"loss became {float(losses[step, row])} in round {self.t + 1} (local gradient "
                f"evaluation {step}) on client {client}; the run diverged, likely because the learning "
                f"rate or the SAM radius is too large ({hint}); try a smaller value")


def _tree_index(state, ids: Tensor):
    """Rows ``ids`` of every tensor in a rule state (a nested tuple of ``(m, d)`` tensors)."""
    if isinstance(state, Tensor):
        return state[ids.to(state.device)]
    return tuple(_tree_index(s, ids) for s in state)


def _tree_assign(state, ids: Tensor, part) -> None:
    """Write ``part`` (as returned by :func:`_tree_index`) back into rows ``ids`` of ``state``."""
    if isinstance(state, Tensor):
        state[ids.to(state.device)] = part
        return
    for s, p in zip(state, part):
        _tree_assign(s, ids, p)


def _to_device(obj, device, clone: bool = False):
    """``obj`` (tensors nested in dicts, lists and tuples) with every tensor moved to ``device``."""
    if isinstance(obj, Tensor):
        out = obj.to(device)
        return out.clone() if clone and out is obj else out
    if isinstance(obj, dict):
        return {k: _to_device(v, device, clone) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(v, device, clone) for v in obj)
    return obj


def run(config: Config, progress: bool = False, checkpoint: str | os.PathLike | None = None,
        checkpoint_every: int = 10, resume: bool = False, data: FederatedData | None = None) -> History:
    """Run one configuration to the end and return its :class:`History`.

    With ``checkpoint``, save there as :meth:`Simulation.run` does; with
    ``resume`` also continue from that file when it exists.
    """
    if resume and checkpoint is not None and Path(checkpoint).exists():
        sim = Simulation.resume(checkpoint, config, data=data)
    else:
        sim = Simulation(config, data=data)
    return sim.run(progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every)
