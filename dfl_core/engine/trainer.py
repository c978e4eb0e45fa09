"""Local training's data side: each client's mini-batches of a round, and its gradient over its whole split.

:class:`LocalTrainer` holds what local training needs besides the rule (the clients' data, the stacked model, K,
B, the client chunk): :meth:`~LocalTrainer.batches` draws each client's K mini-batches of round t from the round's
``batches`` stream (and the ``augment`` stream, for CIFAR). The K steps themselves are
:meth:`dfl_core.engine.SimulationTools.local_train`'s loop, in one place.

Clients are independent during local training, so they run in chunks of
``client_chunk``, each chunk's batches drawn when it starts; chunking changes memory use and speed, and results only
by float rounding.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..data import FederatedData
from ..local import Gradient, map_state
from ..rng import round_generator
from ..stacked import StackedModel
from .buffers import OutputBuffers

__all__ = ["LocalTrainer", "RoundStreams", "Gradient", "default_client_chunk", "tree_rows", "tree_assign_rows"]


def default_client_chunk(
    d: int, m: int, device: torch.device, bytes_per_client: Callable[[], int] | None = None
) -> int:
    """How many clients train together when the config leaves ``client_chunk`` unset.

    CPU: about 8 MB of parameters per chunk, so that a chunk's ``(chunk, d)`` temporaries stay small enough to
    be served from memory the process already holds (:mod:`.allocator`) instead of fresh pages at every local
    step; larger chunks do not help there (see ``benchmarks/``).

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


class RoundStreams:
    """The random streams of round t: one generator per purpose, and a fresh augmentation stream per batch draw."""

    def __init__(self, seed: int, t: int):
        self.seed, self.t = seed, t
        self.augment_calls = 0

    def generator(self, purpose: str) -> torch.Generator:
        """The round's generator for ``purpose`` (:func:`dfl_core.rng.round_generator`)."""
        return round_generator(self.seed, purpose, self.t)

    def replay_augmentation_from(self, calls: int) -> None:
        """Draw the next batch tensors' augmentation again as from call ``calls`` on (every client chunk of a round
        replays the same streams, so a client's crops and flips do not depend on its chunk)."""
        self.augment_calls = calls

    def next_augment_generator(self) -> torch.Generator:
        """The augmentation stream of the next batch tensor drawn this round (counted from 1)."""
        self.augment_calls += 1
        gen = self.generator("augment")
        gen.manual_seed(gen.initial_seed() + self.augment_calls)
        return gen


class LocalTrainer:
    """The clients' data, batched for local training (see the module docstring)."""

    def __init__(
        self,
        model: StackedModel,
        data: FederatedData,
        *,
        local_steps: int,
        batch_size: int,
        full_batch: bool,
        client_chunk: int,
        dtype: torch.dtype,
    ):
        self.model, self.data = model, data
        self.local_steps, self.batch_size, self.full_batch = local_steps, batch_size, full_batch
        self.client_chunk, self.dtype = client_chunk, dtype
        # the round's output y^{t,K}, reused once nobody holds it: a fresh (m, d) tensor faults its pages in
        self.outputs = OutputBuffers(keep=2)

    # ------------------------------------------------------------------ 1. batches
    def batches(
        self, clients: Tensor, streams: RoundStreams, steps: int | None = None
    ) -> list[tuple[Tensor, Tensor, Tensor]]:
        """K (or ``steps``) mini-batches for ``clients``: ``(inputs (n,B,...), labels (n,B), weights (n,B))``.

        Each round every client walks through a fresh random permutation of its
        own train split, B samples per step, wrapping around if K·B exceeds its
        size. A client with fewer than B samples uses all of them (the weights
        mask the padding). In full-batch mode every step uses the whole split.
        The permutations (and, for an augmented dataset, the crops and flips) of
        all m clients are drawn, so a client's batches do not depend on which
        other clients take part.
        """
        train = self.data.train
        dev = train.index.device
        ids = clients.to(dev)
        steps = self.local_steps if steps is None else steps
        if self.full_batch:
            return [self.whole_splits(ids)] * steps
        index, counts, mask = train.index[ids], train.counts[ids], train.mask()[ids]  # (n, n_max), (n,)
        m, n_max = train.index.shape
        B = min(self.batch_size, n_max)  # a batch never needs more slots than a client has samples
        keys = torch.rand(m, n_max, generator=streams.generator("batches")).to(dev)[ids]
        perm = keys.masked_fill(~mask, 2.0).argsort(dim=1)  # padding sorts last
        b = counts.clamp(max=B)
        arange = torch.arange(B, device=dev)
        w = (arange[None, :] < b[:, None]).to(self.dtype)  # (n, B)
        rows = clients.cpu()  # which of the m clients' augmentation draws are these (made on the CPU), once a round
        out = []
        for k in range(steps):
            pos = (k * b[:, None] + arange[None, :]) % counts[:, None].clamp(min=1)
            idx = index.gather(1, perm.gather(1, pos))  # (n, B) sample ids
            out.append((self._augment(train.x[idx], streams, rows, m), train.y[idx], w))
        return out

    def whole_splits(self, clients: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every sample of each client's train split, padded: ``(inputs, labels, weights)`` as in :meth:`batches`."""
        train = self.data.train
        ids = clients.to(train.index.device)
        index = train.index[ids]
        return train.x[index], train.y[index], train.mask()[ids].to(self.dtype)

    def _augment(self, inputs: Tensor, streams: RoundStreams, rows: Tensor, m: int) -> Tensor:
        """The dataset's on-device augmentation, if it has one (CIFAR: random crop and flip).

        ``inputs`` are the clients ``rows`` (a CPU tensor) of m; the draws are made for all m clients and indexed by
        ``rows``, so a client's crops and flips, like its permutation, do not depend on which other clients take
        part."""
        if getattr(self.data.dataset, "augmentation", None) is None:
            return inputs
        return self.data.dataset.augment(inputs, streams.next_augment_generator(), rows=rows, num_rows=m)

    # ----------------------------------------------------------- 2. whole splits
    def full_gradient(self, x: Tensor, clients: Tensor) -> Tensor:
        """Each client's gradient of its mean loss over its whole train split at ``x`` (rows = ``clients``).

        One pass over the local data without augmentation (SCAFFOLD option I,
        MimeLite's server statistics, DisPFL's regrowth); in chunks of ``client_chunk`` clients.
        """
        out = torch.empty_like(x)
        for lo in range(0, len(clients), self.client_chunk):
            rows = slice(lo, lo + self.client_chunk)
            out[rows], _ = self.model.loss_and_grad(x[rows], *self.whole_splits(clients[rows]))
        return out

    def bytes_per_client(self) -> int:
        """Peak device memory of one client's gradient on a batch, plus its (d,)-sized buffers and its K batches (CUDA
        probe)."""
        device, d = self.model.device, self.model.d
        one = torch.arange(1)
        batch = [t[:1] for t in self.batches(one, RoundStreams(0, 0))[0]]
        p = torch.zeros(1, d, dtype=self.dtype, device=device)
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        with self.model.eager():  # no compile for one client; the eager pass keeps more intermediates
            self.model.loss_and_grad(p, *batch)
        peak = torch.cuda.max_memory_allocated(device) - before
        buffers = 8 * d * p.element_size()  # x, y, g, u, SAM point, momentum, leaves, out
        steps_held = 1 if self.full_batch else self.local_steps  # full batch: one tensor, K references
        batches = steps_held * sum(t.numel() * t.element_size() for t in batch)  # its K batches, held at once
        return int(2 * peak + buffers + batches)  # 2x: SAM's second pass, allocator slack


def tree_rows(state, ids: Tensor):
    """Rows ``ids`` of every tensor in a rule state (nested NamedTuples and tuples of ``(m, …)`` tensors), typed as it."""
    return map_state(lambda s: s[ids.to(s.device)], state)


def tree_assign_rows(state, ids: Tensor, part) -> None:
    """Write ``part`` (as returned by :func:`tree_rows`) back into rows ``ids`` of ``state``."""
    if isinstance(state, Tensor):
        state[ids.to(state.device)] = part
        return
    for s, p in zip(state, part):
        tree_assign_rows(s, ids, p)
