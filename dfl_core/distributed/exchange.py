r"""Gossip across processes: each rank sends only the rows its neighbours' rows of W need.

One gossip step is :math:`x_i \leftarrow \sum_j w_{ij} x_j` (DFedSAM eqs. (4)–(5)). Rank r holds the rows of its
block B_r and needs :math:`x_j` for every column j outside B_r with :math:`w_{ij} \ne 0` for some i in B_r. From W
(which every rank computes itself: static graphs once, time-varying ones from ``(seed, round, step)``) each rank
derives a :class:`GossipPlan`:

* sparse graphs (ring, grid, random neighbours): point-to-point messages (``dist.batch_isend_irecv``), to each
  neighbouring rank exactly the rows it needs, rebuilt whenever W changes;
* graphs where every rank needs every other rank's whole block (complete): one ``all_gather`` of the blocks.

Then the rank mixes with its own rows of W (a :class:`~dfl_core.gossip.MixingOperator` on the columns it holds).

What travels, per row a neighbour needs (:meth:`Exchange.share`):

* exact gossip (no ``quant_bits``): the row's floats in the working dtype, d · 4 bytes in float32
  (:meth:`Exchange.step`);
* compressed gossip (``quant_bits`` b, public copies: :meth:`Exchange.share_messages`, driven by
  :meth:`~.rank.RankTools.compressed_gossip`): only the encoded message :math:`\mathcal Q(x_i - \hat x_i)`, its d
  integer levels packed to b bits each (:func:`~dfl_core.operators.pack_levels`, ⌈d·b/8⌉ bytes) and its scale in the
  working dtype (:func:`wire_pieces`). In float32 that is the d·b + 32 bits the simulator charges
  (:func:`~dfl_core.operators.message_bits`) plus the padding of the last byte, under 8 bits; in float64 the scale
  takes 4 bytes more;
* dfedavgm-q's ``"differences-only"`` reading: its :math:`\mathcal Q(z - x)` rows, encoded and packed the same way
  (:meth:`Exchange.step` with ``quantize``);
* dfedavgm-q's ``"exact-neighbour-models"`` reading: the floats of :math:`x + \mathcal Q(z - x)`, which is what its
  mixing needs: its bytes exceed the bits it charges, because that reading cannot be sent as counted.

Every wait has a deadline: a neighbour that dies (connection closed) or stops answering (deadline passed) ends the
rank with :class:`PeerFailure`, naming the neighbour and the round, and a watchdog thread ends the process if even
the backend's wait does not return.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from ..gossip import MixingOperator
from ..operators import Encoded, decode, encode, pack_levels, unpack_levels

__all__ = ["GossipPlan", "Exchange", "PeerFailure", "Watchdog", "EXIT_PEER_FAILURE", "wire_pieces", "decode_pieces"]

#: Exit code of a rank that lost a neighbour (config errors exit 2, divergence 3, as the CLI).
EXIT_PEER_FAILURE = 4


class PeerFailure(RuntimeError):
    """A neighbouring rank died or did not answer within the timeout."""


class Watchdog:
    """Ends the process if a communication wait outlives its deadline (no hang, whatever the backend does)."""

    def __init__(self, rank: int, timeout_s: float):
        self.rank, self.timeout_s = rank, timeout_s
        # a backstop: the backend's own timeout (which names the rank) should fire first
        self.grace_s = max(2.0, 0.25 * timeout_s)
        self.suspects = lambda: "a neighbour"  # the Exchange names the ranks behind
        self._deadline: float | None = None
        self._what, self._lock = "", threading.Lock()
        threading.Thread(target=self._watch, name="dfl-watchdog", daemon=True).start()

    def arm(self, what: str) -> None:
        with self._lock:
            self._deadline, self._what = time.monotonic() + self.timeout_s + self.grace_s, what

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.1)
            with self._lock:
                expired = self._deadline is not None and time.monotonic() > self._deadline
                what = self._what
            if expired:
                try:
                    who = self.suspects()
                except Exception:
                    who = "a neighbour"
                sys.stderr.write(
                    f"error: rank {self.rank}: {what}: no answer from {who} within --timeout-s="
                    f"{self.timeout_s:g} s; stopping\n"
                )
                sys.stderr.flush()
                os._exit(EXIT_PEER_FAILURE)


class GossipPlan:
    """Who sends which rows to whom for one mixing matrix, and this rank's rows of W on what it holds."""

    def __init__(
        self,
        W: np.ndarray,
        rank: int,
        world_size: int,
        device: torch.device,
        dtype: torch.dtype,
        mode: str | None = None,
    ):
        m = W.shape[0]
        size = m // world_size
        owner = np.arange(m) // size
        nonzero = W != 0
        # needed[s]: the columns outside block s that block s's rows of W use
        needed = [np.flatnonzero(nonzero[s * size : (s + 1) * size].any(0) & (owner != s)) for s in range(world_size)]
        self.collective = world_size > 1 and all(len(n) == m - size for n in needed)
        lo = rank * size
        if self.collective:
            columns = np.arange(m)
            self.sends, self.receives = {}, {}
        else:
            columns = np.union1d(np.arange(lo, lo + size), needed[rank])
            # sends[s]: local row numbers of this block that rank s needs; receives[s]: global ids from rank s
            self.sends = {s: needed[s][owner[needed[s]] == rank] - lo for s in range(world_size) if s != rank}
            self.sends = {s: torch.as_tensor(v) for s, v in self.sends.items() if len(v)}
            self.receives = {s: needed[rank][owner[needed[rank]] == s] for s in range(world_size) if s != rank}
            self.receives = {s: v for s, v in self.receives.items() if len(v)}
        self.columns = columns  # the clients whose rows this rank mixes
        self.column_ids = torch.as_tensor(columns, device=device)
        self.own_positions = torch.as_tensor(np.searchsorted(columns, np.arange(lo, lo + size)))
        self.receive_positions = {s: torch.as_tensor(np.searchsorted(columns, v)) for s, v in self.receives.items()}
        self.operator = MixingOperator(W[lo : lo + size][:, columns], device, dtype, mode=mode)

    def mix(self, held: Tensor) -> Tensor:
        """This rank's rows of :math:`W x` from the rows it holds (``(len(columns), d)`` → ``(n, d)``)."""
        out = None if self.operator.mode == "csr" else held.new_empty(len(self.own_positions), *held.shape[1:])
        return self.operator(held, out=out)

    @property
    def peers(self) -> list[int]:
        return sorted(set(self.sends) | set(self.receives))


class Exchange:
    """The communication of one rank: gossip steps, with the bytes it hands to the backend counted.

    ``bytes_sent`` counts the tensor bytes this rank passes to ``send`` (point to point), and for ``all_gather`` P −
    1 times the block it passes in: its block must reach the P − 1 other ranks, and that is also what each rank puts
    on the wire in gloo's ring all_gather (it forwards P − 1 blocks to its successor). ``rows_sent`` counts
    model-sized rows in the same way. Framing and the backend's headers are not counted.
    """

    def __init__(self, rank: int, world_size: int, timeout_s: float, watchdog: Watchdog | None = None):
        self.rank, self.world_size, self.timeout_s, self.watchdog = rank, world_size, timeout_s, watchdog
        self.bytes_sent, self.rows_sent = 0, 0
        self.round, self._store = 0, None  # the 1-based round in progress (for messages), the rendezvous store
        if watchdog is not None:
            watchdog.suspects = self._behind

    def wait_all(self, works: list[tuple[object, int | None]], what: str) -> None:
        """Wait for every (work, peer) pair; a failure names the peer (None: any rank of a collective)."""
        timeout = timedelta(seconds=self.timeout_s)
        if self.watchdog is not None:
            self.watchdog.arm(f"round {self.round}: {what}")
        try:
            for work, peer in works:
                try:
                    ok = work.wait(timeout)
                except Exception as err:  # gloo: connection closed, or its own timeout
                    raise self._lost(what, peer, err) from None
                if ok is False:
                    who = f"rank {peer}" if peer is not None else self._behind()
                    raise PeerFailure(
                        f"round {self.round}: {what}: {who} did not answer within --timeout-s={self.timeout_s:g} s"
                    )
        finally:
            if self.watchdog is not None:
                self.watchdog.disarm()

    def posted(self, post: Callable[[], Any], what: str, peer: int | None = None) -> Any:
        """``post()``, the call that puts operations on the wire (their works, for :meth:`wait_all`).

        A peer already gone can make the call itself raise (gloo: connection reset by peer): the same failure
        :meth:`wait_all` reports, and reported the same way, not as an error of the program.
        """
        try:
            return post()
        except Exception as err:
            raise self._lost(what, peer, err) from None

    def _lost(self, what: str, peer: int | None, err: Exception) -> PeerFailure:
        """The failure of ``what`` with ``peer`` (None: any rank of a collective), from the backend's error."""
        who = f"rank {peer}" if peer is not None else self._behind()
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        first = first.split(" This is typically")[0]  # gloo's generic advice
        return PeerFailure(f"round {self.round}: {what}: lost {who} ({first})")

    def start_round(self, round_: int) -> None:
        """Mark in the rendezvous store that this rank has started round ``round_`` (1-based).

        When a collective fails, the marks tell which ranks never reached the
        round (a collective's error does not say whom it lost).
        """
        self.round = round_
        if self._store is None:
            try:
                self._store = dist.distributed_c10d._get_default_store()
            except Exception:  # no store: failures name no rank, but still stop
                return
        self._store.set(f"dfl/round/{self.rank}", str(round_))

    def _behind(self) -> str:
        """The ranks whose mark shows they never started the current round, for an error message."""
        if self._store is None:
            return "a rank of the collective"
        try:
            self._store.set_timeout(timedelta(seconds=2))
            keys = {s: f"dfl/round/{s}" for s in range(self.world_size) if s != self.rank}
            marks = {s: int(self._store.get(k)) if self._store.check([k]) else 0 for s, k in keys.items()}
        except Exception:
            return "a rank of the collective (the rendezvous store did not answer: rank 0's host may be down)"
        behind = [s for s, r in marks.items() if r < self.round]
        if not behind:
            return "a rank of the collective (every rank started this round)"
        return ", ".join(f"rank {s} (last started round {marks[s]})" for s in behind)

    def _count(self, tensors: list[Tensor], rows: int) -> None:
        self.bytes_sent += sum(t.numel() * t.element_size() for t in tensors)
        self.rows_sent += rows

    def share(self, pieces: list[Tensor], plan: GossipPlan, label: str = "gossip") -> list[tuple[Tensor, list[Tensor]]]:
        """Send this rank's rows of ``pieces`` to the ranks that need them, and receive theirs.

        ``pieces`` are the parts of one message per row (the floats; or packed levels and the scale), each with this
        rank's n rows first: row i of every piece travels whenever row i is needed. Returns, per source, the
        positions in ``plan.columns`` of the rows received and their pieces (for ``all_gather``: every block, this
        rank's included, at positions ``0..m-1``). Counts the bytes and rows sent (:class:`Exchange`).
        """
        n = pieces[0].shape[0]
        if plan.collective:
            outs = [[torch.empty_like(p) for _ in range(self.world_size)] for p in pieces]
            works = [
                (self.posted(lambda: dist.all_gather(out, p.contiguous(), async_op=True), label), None)
                for out, p in zip(outs, pieces)
            ]
            self._count(pieces * (self.world_size - 1), n * (self.world_size - 1))
            self.wait_all(works, f"{label} (all_gather)")
            return [(torch.arange(len(plan.columns)), [torch.cat(o) for o in outs])]
        ops, incoming = [], {}
        for s, rows in plan.sends.items():
            out = [p[rows].contiguous() for p in pieces]
            self._count(out, len(rows))
            ops += [dist.P2POp(dist.isend, p, s) for p in out]
        for s, ids in plan.receives.items():
            incoming[s] = [p.new_empty(len(ids), *p.shape[1:]) for p in pieces]
            ops += [dist.P2POp(dist.irecv, p, s) for p in incoming[s]]
        if ops:
            works = self.posted(lambda: dist.batch_isend_irecv(ops), f"{label} with ranks {plan.peers}")
            self.wait_all([(work, op.peer) for work, op in zip(works, ops)], f"{label} with ranks {plan.peers}")
        return [(plan.receive_positions[s], got) for s, got in incoming.items()]

    def step(
        self, x: Tensor, plan: GossipPlan, quantize: tuple[int, float | None] | None = None, label: str = "gossip"
    ) -> Tensor:
        """One gossip step on this rank's block ``x`` (n, d): send, receive, mix with this rank's rows of W.

        The rows travel as floats; with ``quantize = (bits, step)`` (dfedavgm-q's ``"differences-only"``)
        each row travels as its b-bit levels, packed (:func:`wire_pieces`), and its scale instead. Those
        rows must already be quantized, as dfedavgm-q's Q(z − x) is, so decoding returns them to rounding.
        The rank mixes its own rows as it holds them, never a decoded copy.
        """
        pieces = [x] if quantize is None else wire_pieces(encode(x, *quantize), x.dtype)
        gathered = x.new_empty(len(plan.columns), x.shape[1])
        for positions, received in self.share(pieces, plan, label):
            gathered[positions] = (
                received[0] if quantize is None else decode_pieces(received, quantize[0], x.shape[1], x.dtype)
            )
        gathered[plan.own_positions] = x
        return plan.mix(gathered)

    def share_messages(self, message: Encoded, plan: GossipPlan, dtype: torch.dtype, label: str = "gossip") -> Tensor:
        r"""Compressed gossip's messages: send this rank's (n rows, encoded once), receive the neighbours'.

        Only :func:`wire_pieces` travel. Returns the decoded message of every column of ``plan``
        (``(len(plan.columns), d)``), this rank's own rows decoded from the same pieces, as the neighbours decode them.
        """
        n, d = message.payload.shape
        pieces = wire_pieces(message, dtype)
        decoded = torch.empty(len(plan.columns), d, dtype=dtype, device=message.payload.device)
        for positions, received in self.share(pieces, plan, label):
            decoded[positions] = decode_pieces(received, message.bits, d, dtype)
        decoded[plan.own_positions] = decode_pieces(pieces, message.bits, d, dtype)
        return decoded

    def barrier(self, what: str) -> None:
        """All ranks reached this point (before a checkpoint is written), under the same deadline."""
        flag = torch.ones(1)
        self.wait_all([(self.posted(lambda: dist.all_reduce(flag, async_op=True), what), None)], what)


def wire_pieces(message: Encoded, dtype: torch.dtype) -> list[Tensor]:
    """What travels for the n rows of an encoded ``(n, d)`` message: ``[levels, scale]`` (cost: see the module).

    ``levels``: ``uint8 (n, ⌈d·b/8⌉)``, the b-bit levels of each row packed (:func:`~dfl_core.operators.pack_levels`;
    as bytes also for b = 16, 32 because gloo's collectives have no int16 type); ``scale``: ``(n, 1)`` in ``dtype``.
    """
    n, d = message.payload.shape
    scale = torch.as_tensor(message.scale).to(dtype).expand(n, 1).contiguous()
    return [pack_levels(message.payload, message.bits), scale]


def decode_pieces(pieces: list[Tensor], bits: int, d: int, dtype: torch.dtype) -> Tensor:
    """The rows of :func:`wire_pieces` decoded: levels times scale, as :func:`~dfl_core.operators.decode`."""
    packed, scale = pieces
    return decode(Encoded(unpack_levels(packed, bits, d), scale, bits), dtype)
