"""One rank's part of a run: its block of clients, trained by the simulator's own code.

:class:`RankRound` is the :class:`~dfl_core.algorithms.RoundTools` of one rank:
``x`` is the rank's block of rows, ``local_train`` is the engine's vectorized
:meth:`~dfl_core.engine.Simulation.local_train` on the rank's clients (a
:class:`~dfl_core.engine.Simulation` built on :func:`~.data.private_data`), and
``gossip`` exchanges rows with the neighbouring ranks (:class:`~.exchange.Exchange`).
So the algorithms' round functions run unchanged; with the same config a run
over P processes follows the simulator's run (same batches: every random draw
is a function of (seed, purpose, round), :meth:`Simulation.round_generator`).

Checkpoints are per rank: ``OUT/checkpoints/rank<r>/round<t>.pt`` holds that
rank's block (parameters, momentum rows, its byte counters, the history). All
ranks pass a barrier before writing round t, and each keeps its two newest
files, so after any crash there is a round every rank has saved; ``--resume``
continues from the newest such round.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from .. import checkpoint as ckpt
from ..config import Config, ConfigError
from ..data import ClientData
from ..engine import DivergenceError, Simulation, _tree_assign, _tree_index, federated_data
from ..metrics import evaluate_clients
from ..results import History
from .data import block_of, private_data
from .exchange import Exchange, GossipPlan

__all__ = ["RankRound", "run_rank", "FORMAT", "FAULT_ENV", "checkpoint_rounds", "load_final_params"]

FORMAT = "dfl-book/distributed-checkpoint/v1"
#: Fault injection for tests and the book: "kill:RANK:ROUND" (SIGKILL) or "stall:RANK:ROUND"
#: (SIGSTOP, the process stops answering) at the start of that 1-based round.
FAULT_ENV = "DFL_DISTRIBUTED_FAULT"


class RankRound:
    """The round tools of one rank (:class:`~dfl_core.algorithms.RoundTools` on a block of rows)."""

    def __init__(self, sim: Simulation, clients: Tensor, exchange: Exchange):
        self.sim, self.clients, self.exchange = sim, clients, exchange
        self.config = sim.config
        self.server = sim.server
        self.default_head = sim.default_head
        self._plans: dict[int, tuple[object, GossipPlan]] = {}

    @property
    def t(self) -> int:
        return self.sim.t

    @property
    def lr(self) -> float:
        return self.sim.lr

    def local_train(self, x: Tensor, clients: Tensor | None = None, head=None) -> Tensor:
        return self.sim.local_train(x, self.clients if clients is None else clients, head)

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        return self.sim.full_gradient(x, self.clients if clients is None else clients)

    def round_generator(self, purpose: str) -> torch.Generator:
        return self.sim.round_generator(purpose)

    def _plan(self, M) -> GossipPlan:
        key = id(M)
        if key not in self._plans or self._plans[key][0] is not M:
            ex = self.exchange
            self._plans[key] = (M, GossipPlan(M.W, ex.rank, ex.world_size, self.sim.device, self.sim.dtype))
        return self._plans[key][1]

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        r"""Q gossip steps :math:`x \leftarrow W_t x` (DFedSAM eq. (5)) on this rank's rows.

        ``bits_per_message`` marks dfedavgm-q's quantized messages; with
        ``quant_mixing="difference"`` (eq. (7)) they travel as integer levels
        and scales. ``"models"`` mixes x + Q(z − x), which a rank can only send
        as floats (it does not hold its neighbours' x), so those go unquantized.
        """
        cfg = self.config
        quantize = None
        if bits_per_message is not None and cfg.quant_mixing == "difference":
            quantize = (cfg.quant_bits, cfg.quant_step)
        matrices = self.sim.matrices(self.t)
        if self.sim.topology.time_varying:
            self._plans = {k: v for k, v in self._plans.items() if any(v[0] is M for M in matrices)}
        for q, M in enumerate(matrices):
            x = self.exchange.step(x, self._plan(M), quantize, label=f"gossip step {q + 1}/{len(matrices)}")
        return x

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        self.sim.count_transmissions(models, bits_per_message)

    def sample_clients(self) -> Tensor:
        raise ConfigError("the distributed backend runs decentralized algorithms only")

    def client_weights(self, clients: Tensor) -> Tensor:
        raise ConfigError("the distributed backend runs decentralized algorithms only")


def _fault(rank: int, round_: int) -> None:
    """Fault injection (:data:`FAULT_ENV`): this rank dies or freezes at the start of a round."""
    spec = os.environ.get(FAULT_ENV, "")
    if not spec:
        return
    try:
        kind, who, when = spec.split(":")
        who, when = int(who), int(when)
    except ValueError:
        raise ConfigError(f"{FAULT_ENV}={spec!r}: expected kill:RANK:ROUND or stall:RANK:ROUND") from None
    if kind not in ("kill", "stall"):
        raise ConfigError(f"{FAULT_ENV}={spec!r}: the kind must be 'kill' or 'stall'")
    if who == rank and when == round_:
        os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)


def checkpoint_rounds(folder: Path) -> list[int]:
    """The rounds saved in one rank's checkpoint folder, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(int(p.stem.removeprefix("round")) for p in folder.glob("round*.pt"))


def _load(path: Path) -> dict:
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ckpt.CheckpointError(f"{str(path)!r} is not a distributed checkpoint ({FORMAT})")
    return state


def load_final_params(out: str | os.PathLike) -> Tensor:
    """All clients' parameters ``(m, d)`` from the newest checkpoint of every rank under ``out``."""
    folders = sorted(Path(out, "checkpoints").glob("rank*"), key=lambda p: int(p.name.removeprefix("rank")))
    if not folders:
        raise ckpt.CheckpointError(f"no rank checkpoints under {str(Path(out, 'checkpoints'))!r}")
    states = [_load(f / f"round{checkpoint_rounds(f)[-1]:06d}.pt") for f in folders]
    rounds = {s["t"] for s in states}
    if len(rounds) != 1:
        raise ckpt.CheckpointError(f"the ranks' newest checkpoints are of different rounds: {sorted(rounds)}")
    return torch.cat([s["x"] for s in sorted(states, key=lambda s: s["rank"])])


class _RankRun:
    """The state and loop of one rank (see :func:`run_rank`)."""

    def __init__(self, cfg: Config, rank: int, world_size: int, exchange: Exchange, out: Path):
        self.cfg, self.rank, self.world_size, self.exchange = cfg, rank, world_size, exchange
        self.clients = block_of(rank, world_size, cfg.num_clients)
        # The deterministic split needs the dataset file; only this rank's clients' samples are kept.
        data = private_data(federated_data(cfg), self.clients)
        self.sim = Simulation(cfg, data=data)
        if self.sim.centralized:
            raise ConfigError(f"algorithm {cfg.algorithm!r} is centralized; the distributed backend runs the "
                              f"decentralized ones (a server would be one more process)")
        self.x = self.sim.x[self.clients.to(self.sim.device)].clone()
        self.tools = RankRound(self.sim, self.clients, exchange)
        self.history = History(config=cfg.to_dict())
        self.bytes_last_round = 0
        self.folder = out / "checkpoints" / f"rank{rank}"
        self._start = time.perf_counter()
        own = self.clients.to(data.train.index.device)
        self._own_train = ClientData(data.train.x, data.train.y, data.train.index[own], data.train.counts[own])
        self._own_test = ClientData(data.test.x, data.test.y, data.test.index[own], data.test.counts[own])

    # ------------------------------------------------------------ measurements
    def _gather(self, values: Tensor) -> Tensor:
        """Every rank's ``values`` (same shape), stacked in rank order (evaluation traffic, not counted)."""
        out = [torch.empty_like(values) for _ in range(self.world_size)]
        self.exchange.wait_all([(dist.all_gather(out, values, async_op=True), None)], "evaluation")
        return torch.stack(out)

    def evaluate(self) -> dict:
        """The simulator's record (:meth:`Simulation.evaluate`), from per-rank sums.

        x̄ and the consensus distance come from sums over blocks. x̄'s train
        numbers are over the union of the clients' train splits, as in the
        simulator; its *test* numbers are over the union of the clients' test
        splits (the simulator uses the whole test set, which no rank holds).
        """
        model, x = self.sim.model, self.x
        x_bar = self._gather(x.sum(0).to(torch.float64)).sum(0).div(self.cfg.num_clients).to(x.dtype)
        tr_acc, tr_loss = evaluate_clients(model, x_bar.expand_as(x), self._own_train, self.sim.client_chunk)
        te_acc, te_loss = evaluate_clients(model, x_bar.expand_as(x), self._own_test, self.sim.client_chunk)
        c_tr_acc, c_tr_loss = evaluate_clients(model, x, self._own_train, self.sim.client_chunk)
        c_te_acc, c_te_loss = evaluate_clients(model, x, self._own_test, self.sim.client_chunk)
        n_tr = self._own_train.counts.cpu().to(torch.float64)
        n_te = self._own_test.counts.cpu().to(torch.float64)
        cd = ((x - x_bar) ** 2).sum(1).to(torch.float64).cpu()
        row = torch.stack([c_tr_acc, c_tr_loss, c_te_acc, c_te_loss, cd, tr_acc * n_tr, tr_loss * n_tr, n_tr,
                           te_acc * n_te, te_loss * n_te, n_te])                     # (11, n)
        counters = torch.tensor([self.exchange.bytes_sent, self.bytes_last_round, self.exchange.rows_sent],
                                dtype=torch.float64)
        everyone = self._gather(torch.cat([row.flatten(), counters]))          # (P, 11·n + 3)
        n = len(self.clients)
        per_client = everyone[:, :11 * n].reshape(self.world_size, 11, n).permute(1, 0, 2).reshape(11, -1)
        (c_tr_acc, c_tr_loss, c_te_acc, c_te_loss, cd, tr_c, tr_l, n_tr, te_c, te_l, n_te) = per_client
        bytes_sent, bytes_last, rows = everyone[:, 11 * n:].T.to(torch.int64).tolist()
        t = self.sim.t
        rec = {
            "round": t, "lr": self.cfg.lr * self.cfg.lr_decay ** max(t - 1, 0),
            "test_acc": float(te_c.sum() / n_te.sum()), "test_loss": float(te_l.sum() / n_te.sum()),
            "train_acc": float(tr_c.sum() / n_tr.sum()), "train_loss": float(tr_l.sum() / n_tr.sum()),
            "client_test_acc": c_te_acc.tolist(), "client_test_loss": c_te_loss.tolist(),
            "client_train_acc": c_tr_acc.tolist(), "client_train_loss": c_tr_loss.tolist(),
            "client_test_acc_mean": float(c_te_acc.mean()), "client_train_acc_mean": float(c_tr_acc.mean()),
            "consensus_distance": float(cd.mean()),
            "transmissions": sum(rows), "bytes_sent": sum(bytes_sent), "bits_sent": 8 * sum(bytes_sent),
            "bits_last_round": 8 * sum(bytes_last),
            "rank_bytes_sent": bytes_sent, "rank_bytes_last_round": bytes_last,
            "wall_time_s": time.perf_counter() - self._start,
        }
        rec["gen_error"] = rec["train_acc"] - rec["test_acc"]
        self.history.records.append(rec)
        return rec

    # ------------------------------------------------------------ checkpoints
    def save(self) -> None:
        """Write this rank's state after a barrier: every rank has completed round t when any saves it."""
        self.exchange.barrier(f"checkpoint of round {self.sim.t}")
        rule_state = None if self.sim.rule_state is None else _tree_index(self.sim.rule_state, self.clients)
        state = {"format": FORMAT, "config": self.cfg.to_dict(), "t": self.sim.t, "rank": self.rank,
                 "world_size": self.world_size, "clients": self.clients.tolist(),
                 "x": self.x.detach().cpu().clone(), "rule_state": rule_state,
                 "counters": {"bytes_sent": self.exchange.bytes_sent, "rows_sent": self.exchange.rows_sent,
                              "bytes_last_round": self.bytes_last_round},
                 "history": list(self.history.records), "elapsed_s": time.perf_counter() - self._start}
        ckpt.save_atomic(state, self.folder / f"round{self.sim.t:06d}.pt")
        for old in checkpoint_rounds(self.folder)[:-2]:                 # keep the two newest
            (self.folder / f"round{old:06d}.pt").unlink(missing_ok=True)

    def resume(self) -> bool:
        """Continue from the newest round every rank has saved; False if no rank has a checkpoint."""
        mine = checkpoint_rounds(self.folder)[-2:]
        padded = torch.tensor((mine + [-1, -1])[:2], dtype=torch.float64)
        everyone = self._gather(padded).to(torch.int64).tolist()
        if all(r == [-1, -1] for r in everyone):
            return False
        common = set.intersection(*({v for v in r if v >= 0} for r in everyone))
        if not common:
            raise ckpt.CheckpointError(f"no round is saved by every rank (rank: rounds = "
                                       f"{dict(enumerate(everyone))}); start again without --resume")
        path = self.folder / f"round{max(common):06d}.pt"
        state = _load(path)
        ckpt.check_compatible(state["config"], self.cfg.to_dict(), state["t"], path)
        if state["world_size"] != self.world_size or state["clients"] != self.clients.tolist():
            raise ckpt.CheckpointError(f"{str(path)!r} was written by rank {state['rank']} of "
                                       f"{state['world_size']}; now rank {self.rank} of {self.world_size}")
        self.x = state["x"].to(self.sim.device, self.sim.dtype)
        self.sim.t = state["t"]
        if state["rule_state"] is not None:
            full = self.sim.rule_state
            if full is None:
                self.sim.rule_state = full = _tree_zeros(state["rule_state"], self.cfg.num_clients)
            _tree_assign(full, self.clients, state["rule_state"])
        counters = state["counters"]
        self.exchange.bytes_sent, self.exchange.rows_sent = counters["bytes_sent"], counters["rows_sent"]
        self.bytes_last_round = counters["bytes_last_round"]
        self.history = History(config=self.cfg.to_dict(), records=list(state["history"]))
        self._start = time.perf_counter() - state["elapsed_s"]
        return True

    # ------------------------------------------------------------------ rounds
    def step(self) -> None:
        """One round of the algorithm on this rank's block (the simulator's :meth:`Simulation.step`)."""
        sim = self.sim
        sim._augment_calls = 0                            # the augmentation stream restarts every round
        self.exchange.start_round(sim.t + 1)
        before = self.exchange.bytes_sent
        with torch.no_grad():
            self.x = sim.algorithm.round(self.x, self.tools).detach()
        self.bytes_last_round = self.exchange.bytes_sent - before
        sim.t += 1
        if not torch.isfinite(self.x.sum()):
            row = int((~torch.isfinite(self.x)).any(1).nonzero()[0])
            raise DivergenceError(f"parameters of client {int(self.clients[row])} became NaN/inf in round "
                                  f"{sim.t}; lower lr={self.cfg.lr}" + (f" or rho={self.cfg.rho}" if self.cfg.rho else ""))


def _tree_zeros(part, m: int):
    if isinstance(part, Tensor):
        return part.new_zeros(m, *part.shape[1:])
    return tuple(_tree_zeros(p, m) for p in part)


def run_rank(cfg: Config, rank: int, world_size: int, exchange: Exchange, out: str | os.PathLike,
             checkpoint_every: int = 10, resume: bool = False, progress: bool = False) -> History:
    """Run this rank's block of ``cfg`` to the end (every rank calls it; the process group is initialised).

    Returns the history, which every rank holds (records are gathered).
    """
    from tqdm import tqdm

    run = _RankRun(cfg.resolved(), rank, world_size, exchange, Path(out))
    cfg = run.cfg
    if not (resume and run.resume()):
        run.evaluate()
    bar = tqdm(total=cfg.rounds, initial=run.sim.t, desc=f"{cfg.algorithm} x{world_size}",
               disable=not progress or rank != 0, leave=False)
    while run.sim.t < cfg.rounds:
        _fault(rank, run.sim.t + 1)
        run.step()
        t = run.sim.t
        if t % cfg.eval_every == 0 or t == cfg.rounds:
            rec = run.evaluate()
            bar.set_postfix(acc=f"{rec['test_acc']:.3f}", cd=f"{rec['consensus_distance']:.2e}")
        if t % checkpoint_every == 0 or t == cfg.rounds:
            run.save()
        bar.update(1)
    bar.close()
    run.history.wall_time_s = time.perf_counter() - run._start
    return run.history
