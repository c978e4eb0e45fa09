"""One rank's part of a run: its block of clients, trained by the simulator's own code and loop.

:class:`RankTools` is the :class:`~dfl_core.algorithms.RoundTools` of one rank: the state's ``x`` is the rank's
block of rows, ``local_train`` is the engine's vectorized local training (:class:`~dfl_core.engine.LocalTrainer`) on
the rank's clients (a :class:`~dfl_core.engine.Simulation` built on :func:`~.data.private_data`), and ``gossip``
exchanges rows with the neighbouring ranks (:class:`~.exchange.Exchange`). :func:`run_rank` hands these tools, a
gathered evaluation and per-rank checkpoints to the engine's one driver loop (:func:`dfl_core.engine.drive`), so the
algorithms' round functions and the loop run unchanged; with the same config a run over P processes follows the
simulator's run (same batches: every random draw is a function of (seed, purpose, round), :mod:`dfl_core.rng`).

Checkpoints are per rank: ``OUT/checkpoints/rank<r>/round<t>.pt`` holds that rank's block (parameters, momentum
rows, its byte counters, the history, and with compressed gossip gossip's state: the rows of the public copies x̂
it holds, its own and its neighbours'). All ranks pass a barrier before writing
round t, and each keeps its two newest files, so after any crash there is a round every rank has saved; ``--resume``
continues from the newest such round.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from .. import checkpoint as ckpt
from ..algorithms import ALGORITHMS, ClientModels
from ..config import Config, ConfigError
from ..data import ClientData
from ..engine import (
    Hooks,
    ProgressBar,
    RunState,
    Simulation,
    SimulationTools,
    drive,
    federated_data,
    history_record,
    learning_rate,
)
from ..engine.trainer import tree_assign_rows, tree_rows
from ..gossip import initial_gossip_state
from ..local import map_state
from ..metrics import evaluate_clients
from ..operators import encode
from ..results import History
from .data import block_of, private_data
from .exchange import Exchange, GossipPlan

__all__ = [
    "RankTools",
    "run_rank",
    "FORMAT",
    "FAULT_ENV",
    "distributed_algorithms",
    "check_distributable",
    "checkpoint_rounds",
    "load_final_params",
]

FORMAT = "dfl-book/distributed-checkpoint/v3"
#: Fault injection for tests and the book: "kill:RANK:ROUND" (SIGKILL) or "stall:RANK:ROUND"
#: (SIGSTOP, the process stops answering) at the start of that 1-based round.
FAULT_ENV = "DFL_DISTRIBUTED_FAULT"


def distributed_algorithms() -> list[str]:
    """The registered algorithms a rank can run on its block (``Algorithm.distributable``), in registry order."""
    return [name for name, algorithm in ALGORITHMS.items() if algorithm.distributable]


def check_distributable(algorithm: str) -> None:
    """Refuse an algorithm a rank cannot run on its block (not ``Algorithm.distributable``), naming those it can."""
    if not ALGORITHMS[algorithm].distributable:
        kind = "centralized" if ALGORITHMS[algorithm].kind == "centralized" else "not run over processes"
        raise ConfigError(
            f"algorithm {algorithm!r} is {kind}; the distributed backend runs {', '.join(distributed_algorithms())}"
        )


class RankTools(SimulationTools):
    """The round tools of one rank: the simulator's, on this rank's clients, with gossip over the network.

    The bits the rank puts on the wire (counted by the :class:`Exchange`) are
    its ``bits``, so the run's counters are this rank's bytes sent.
    """

    def __init__(
        self,
        sim: Simulation,
        t: int,
        state,
        rule_state,
        hooks,
        clients: Tensor,
        exchange: Exchange,
        plans: dict,
        gossip_state: Tensor | None = None,
    ):
        super().__init__(
            sim.config,
            sim.algorithm,
            state,
            t,
            sim.trainer,
            sim.matrices(t),
            sim.data.dataset.input_shape,
            rule_state=rule_state,
            hooks=hooks,
            operators=plans,
            gossip_state=gossip_state,
        )
        self.clients, self.exchange = clients, exchange

    def local_train(self, x: Tensor, clients: Tensor | None = None, **kw) -> Tensor:
        return super().local_train(x, self.clients if clients is None else clients, **kw)

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        return super().full_gradient(x, self.clients if clients is None else clients)

    def _build_operator(self, M) -> GossipPlan:
        """This rank's plan for W (kept in the tools' one operator cache, :meth:`SimulationTools._operator`)."""
        ex, mode = self.exchange, self.config.gossip_mode
        return GossipPlan(
            M.W, ex.rank, ex.world_size, self.model.device, self.trainer.dtype, mode=None if mode == "auto" else mode
        )

    def exact_gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        r"""Q gossip steps :math:`x \leftarrow W_t x` (DFedSAM eq. (5)) on this rank's rows, as the simulator's.

        What travels for each reading is listed in :mod:`.exchange`; ``bits_per_message`` (dfedavgm-q's
        ``"differences-only"``) sends packed levels. The rank's ``bits`` are its bytes on the wire (×8),
        not the simulator's charge.
        """
        p = self.params
        quantize = None
        if bits_per_message is not None and getattr(p, "quant_mixing", None) == "differences-only":
            quantize = (p.quant_bits, p.quant_step)
        matrices = self.matrices()
        with self._counting():
            for q, M in enumerate(matrices):
                before, x = (
                    x,
                    self.exchange.step(x, self._operator(M), quantize, label=f"gossip step {q + 1}/{len(matrices)}"),
                )
                self.hooks.after_gossip(before, x, q)
        return x

    def compressed_gossip(self, x: Tensor) -> Tensor:
        r"""The simulator's compressed gossip (:meth:`SimulationTools.compressed_gossip`, CHOCO-Gossip) on this rank.

        The rank holds :math:`\hat x` as an ``(m, d)`` tensor of which it only ever updates its own rows
        and its neighbours'. Stochastic rounding slices its rows of the simulator's ``(m, d)`` draw, so the
        messages equal the simulator's; only the encoded messages travel (:meth:`Exchange.share_messages`),
        and its own rows of :math:`\hat x` add them decoded from the bytes sent, as the neighbours do.
        """
        cfg, p, ex = self.config, self.params, self.exchange
        gen = self.generator("quantize") if p.quant_stochastic else None
        own = self.clients.to(x.device)
        public = self.gossip_state.clone()  # this round's copy; the driver keeps it if the round completes
        matrices = self.matrices()
        with self._counting():
            for q, M in enumerate(matrices):
                plan = self._operator(M)
                noise = None
                if gen is not None:  # the simulator's draw for all m rows; this rank's rows
                    noise = torch.rand((cfg.num_clients, x.shape[1]), generator=gen, dtype=x.dtype)
                    noise = noise[self.clients].to(x.device)
                message = encode(x - public[own], **p.quantizer, noise=noise)  # 1.
                decoded = ex.share_messages(message, plan, x.dtype, label=f"gossip step {q + 1}/{len(matrices)}")
                held = plan.column_ids
                public[held] = public[held] + decoded  # 2.
                mixed = public[held]
                before, x = x, x + p.consensus_step * (plan.mix(mixed) - mixed[plan.own_positions])  # 3.
                self.hooks.after_gossip(before, x, q)
        self.gossip_state = public
        return x

    @contextmanager
    def _counting(self):
        """Add what the exchange sent meanwhile to this round's bits (its bytes × 8) and transmissions (rows)."""
        ex = self.exchange
        bytes_before, rows_before = ex.bytes_sent, ex.rows_sent
        try:
            yield
        finally:
            self.bits += 8 * (ex.bytes_sent - bytes_before)
            self.transmissions += ex.rows_sent - rows_before

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        """Nothing to add: what a rank sends is counted on the wire, by its :class:`Exchange`."""

    def sample_clients(self) -> Tensor:
        raise ConfigError("the distributed backend runs decentralized algorithms only")

    def client_weights(self, clients: Tensor) -> Tensor:
        raise ConfigError("the distributed backend runs decentralized algorithms only")


def checkpoint_rounds(folder: Path) -> list[int]:
    """The rounds saved in one rank's checkpoint folder, oldest first."""
    return sorted(int(p.stem.removeprefix("round")) for p in folder.glob("round*.pt")) if folder.is_dir() else []


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


class _FaultInjection(Hooks):
    """:data:`FAULT_ENV`: this rank dies or freezes at the start of a round (tests and the book)."""

    def __init__(self, rank: int):
        self.rank = rank

    def before_round(self, run: RunState) -> None:
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
        if who == self.rank and when == run.t + 1:
            os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)


class _RankRun(Hooks):
    """One rank's run: its simulation on private data, its tools, evaluation and checkpoints (see :func:`run_rank`)."""

    def __init__(self, cfg: Config, rank: int, world_size: int, exchange: Exchange, out: Path, checkpoint_every: int):
        self.cfg, self.rank, self.world_size, self.exchange = cfg, rank, world_size, exchange
        self.checkpoint_every = checkpoint_every
        self.clients = block_of(rank, world_size, cfg.num_clients)
        check_distributable(cfg.algorithm)
        # The deterministic split needs the dataset file; only this rank's clients' samples are kept.
        data = private_data(federated_data(cfg), self.clients)
        self.sim = Simulation(cfg, data=data)
        own = self.clients.to(self.sim.device)
        self.run = RunState(
            t=0,
            state=ClientModels(self.sim.x[own].clone()),
            gossip_state=initial_gossip_state(cfg.params, self.sim.x0, cfg.same_init),
        )  # x̂⁰
        self.plans: dict = {}
        self.folder = out / "checkpoints" / f"rank{rank}"
        self._start = time.perf_counter()
        own = self.clients.to(data.train.index.device)
        self._own_train, self._own_test = (
            ClientData(split.x, split.y, split.index[own], split.counts[own]) for split in (data.train, data.test)
        )

    def tools(self, run: RunState, hooks) -> RankTools:
        """The tools of round ``run.t``, after marking the round started (for messages naming the ranks behind)."""
        self.exchange.start_round(run.t + 1)
        return RankTools(
            self.sim,
            run.t,
            run.state,
            run.rule_state,
            hooks,
            self.clients,
            self.exchange,
            self.plans,
            gossip_state=run.gossip_state,
        )

    # ------------------------------------------------------------ measurements
    def _gather(self, values: Tensor) -> Tensor:
        """Every rank's ``values`` (same shape), stacked in rank order (evaluation traffic, not counted)."""
        out = [torch.empty_like(values) for _ in range(self.world_size)]
        work = self.exchange.posted(lambda: dist.all_gather(out, values, async_op=True), "evaluation")
        self.exchange.wait_all([(work, None)], "evaluation")
        return torch.stack(out)

    def evaluate(self, run: RunState) -> dict:
        """The simulator's record (:class:`~dfl_core.engine.evaluation.Evaluator`), from per-rank sums.

        x̄ and the consensus distance come from sums over blocks. x̄'s train numbers are over the union of the
        clients' train splits, as in the simulator; its *test* numbers are over the union of the clients' test
        splits (the simulator uses the whole test set, which no rank holds).
        """
        model, x, chunk = self.sim.model, run.state.x, self.sim.client_chunk
        x_bar = self._gather(x.sum(0).to(torch.float64)).sum(0).div(self.cfg.num_clients).to(x.dtype)
        tr_acc, tr_loss = evaluate_clients(model, x_bar.expand_as(x), self._own_train, chunk)
        te_acc, te_loss = evaluate_clients(model, x_bar.expand_as(x), self._own_test, chunk)
        c_tr_acc, c_tr_loss = evaluate_clients(model, x, self._own_train, chunk)
        c_te_acc, c_te_loss = evaluate_clients(model, x, self._own_test, chunk)
        n_tr = self._own_train.counts.cpu().to(torch.float64)
        n_te = self._own_test.counts.cpu().to(torch.float64)
        cd = ((x - x_bar) ** 2).sum(1).to(torch.float64).cpu()
        row = torch.stack(
            [
                c_tr_acc,
                c_tr_loss,
                c_te_acc,
                c_te_loss,
                cd,
                tr_acc * n_tr,
                tr_loss * n_tr,
                n_tr,
                te_acc * n_te,
                te_loss * n_te,
                n_te,
            ]
        )  # (11, n)
        counters = torch.tensor([run.bits_sent // 8, run.bits_last_round // 8, run.transmissions], dtype=torch.float64)
        everyone = self._gather(torch.cat([row.flatten(), counters]))  # (P, 11·n + 3)
        n = len(self.clients)
        per_client = everyone[:, : 11 * n].reshape(self.world_size, 11, n).permute(1, 0, 2).reshape(11, -1)
        (c_tr_acc, c_tr_loss, c_te_acc, c_te_loss, cd, tr_c, tr_l, n_tr, te_c, te_l, n_te) = per_client
        bytes_sent, bytes_last, rows = everyone[:, 11 * n :].T.to(torch.int64).tolist()
        return history_record(
            t=run.t,
            lr=learning_rate(self.cfg, max(run.t - 1, 0)),
            test=(float(te_c.sum() / n_te.sum()), float(te_l.sum() / n_te.sum())),
            train=(float(tr_c.sum() / n_tr.sum()), float(tr_l.sum() / n_tr.sum())),
            client_test=(c_te_acc, c_te_loss),
            client_train=(c_tr_acc, c_tr_loss),
            consensus_distance=float(cd.mean()),
            transmissions=sum(rows),
            bits_sent=8 * sum(bytes_sent),
            bits_last_round=8 * sum(bytes_last),
            wall_time_s=time.perf_counter() - self._start,
            extra={"rank_bytes_sent": bytes_sent, "rank_bytes_last_round": bytes_last},
        )

    # ------------------------------------------------------------ checkpoints
    def after_round(self, run: RunState) -> None:
        if run.t % self.checkpoint_every == 0 or run.t == self.cfg.rounds:
            self.save(run)

    def save(self, run: RunState) -> None:
        """Write this rank's state after a barrier: every rank has completed round t when any saves it."""
        self.exchange.barrier(f"checkpoint of round {run.t}")
        rule_state = None if run.rule_state is None else tree_rows(run.rule_state, self.clients)
        held = None
        if run.gossip_state is not None:  # the rows of x̂ it holds (its gossip plans' columns): its own, and
            # those its rows of W mix, the rows RankTools.compressed_gossip updates
            rows = sorted(set().union(*(plan.columns.tolist() for _, plan in self.plans.values())))
            public = run.gossip_state
            held = {"rows": rows, "values": public[torch.as_tensor(rows, device=public.device)].detach().cpu()}
        state = {
            "format": FORMAT,
            "config": self.cfg.to_dict(),
            "t": run.t,
            "rank": self.rank,
            "world_size": self.world_size,
            "clients": self.clients.tolist(),
            "x": run.state.x.detach().cpu().clone(),
            "rule_state": ckpt.to_cpu(rule_state),
            "counters": {
                "bytes_sent": run.bits_sent // 8,
                "rows_sent": run.transmissions,
                "bytes_last_round": run.bits_last_round // 8,
            },
            "history": list(run.history),
            "elapsed_s": time.perf_counter() - self._start,
            "gossip_state": held,
        }
        ckpt.save_atomic(state, self.folder / f"round{run.t:06d}.pt")
        for old in checkpoint_rounds(self.folder)[:-2]:  # keep the two newest
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
            raise ckpt.CheckpointError(
                f"no round is saved by every rank (rank: rounds = "
                f"{dict(enumerate(everyone))}); start again without --resume"
            )
        path = self.folder / f"round{max(common):06d}.pt"
        saved = _load(path)
        ckpt.check_compatible(Config.from_dict(saved["config"]).to_dict(), self.cfg.to_dict(), saved["t"], path)
        if saved["world_size"] != self.world_size or saved["clients"] != self.clients.tolist():
            raise ckpt.CheckpointError(
                f"{str(path)!r} was written by rank {saved['rank']} of "
                f"{saved['world_size']}; now rank {self.rank} of {self.world_size}"
            )
        rule_state = None
        if saved["rule_state"] is not None:  # every client's rows, this rank's filled in
            own = ckpt.to_device(saved["rule_state"], self.sim.device)
            rule_state = map_state(lambda t: t.new_zeros(self.cfg.num_clients, *t.shape[1:]), own)
            tree_assign_rows(rule_state, self.clients, own)
        public = initial_gossip_state(self.cfg.params, self.sim.x0, self.cfg.same_init)  # x̂⁰, held rows replaced
        held = saved["gossip_state"]
        if public is not None:
            if held is None:
                raise ckpt.CheckpointError(
                    f"{str(path)!r} holds no public copies, which compressed gossip "
                    f"(quant_bits={self.cfg.params.quant_bits}) needs; start again without "
                    "--resume"
                )
            public[torch.as_tensor(held["rows"], device=public.device)] = held["values"].to(public.device, public.dtype)
        counters = saved["counters"]
        self.exchange.bytes_sent, self.exchange.rows_sent = counters["bytes_sent"], counters["rows_sent"]
        self.run = RunState(
            t=saved["t"],
            state=ClientModels(saved["x"].to(self.sim.device, self.sim.dtype)),
            rule_state=rule_state,
            transmissions=counters["rows_sent"],
            bits_sent=8 * counters["bytes_sent"],
            bits_last_round=8 * counters["bytes_last_round"],
            history=tuple(saved["history"]),
            gossip_state=public,
        )
        self._start = time.perf_counter() - saved["elapsed_s"]
        return True


def run_rank(
    cfg: Config,
    rank: int,
    world_size: int,
    exchange: Exchange,
    out: str | os.PathLike,
    checkpoint_every: int = 10,
    resume: bool = False,
    progress: bool = False,
) -> History:
    """Run this rank's block of ``cfg`` to the end (every rank calls it; the process group is initialised).

    The engine's driver loop (:func:`dfl_core.engine.drive`) with this rank's tools, the gathered
    evaluation and per-rank checkpoints. Returns the history, which every rank holds (records are gathered).
    """
    rank_run = _RankRun(cfg, rank, world_size, exchange, Path(out), checkpoint_every)
    cfg = rank_run.cfg
    if resume:
        rank_run.resume()
    bar = ProgressBar(cfg.rounds, rank_run.run.t, f"{cfg.algorithm} x{world_size}") if progress and rank == 0 else None
    final = drive(
        rank_run.sim.algorithm,
        rank_run.run,
        rounds=cfg.rounds,
        eval_every=cfg.eval_every,
        num_clients=len(rank_run.clients),
        tools_for=rank_run.tools,
        evaluate=rank_run.evaluate,
        hooks=[_FaultInjection(rank), rank_run, bar],
    )
    if bar is not None:
        bar.close()
    return History(
        config=cfg.to_dict(),
        records=list(final.history),
        wall_time_s=time.perf_counter() - rank_run._start,
        # what differs from the simulator's record: test numbers over the clients' own test splits (no rank holds
        # the whole test set), and transmissions counted as the rows the ranks sent each other
        execution=rank_run.sim.execution
        | {
            "world_size": world_size,
            "test_set": "union of the clients' test splits",
            "transmissions": "rows sent between ranks",
        },
    )
