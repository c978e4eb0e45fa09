"""The simulator: all m clients of one run on one machine, stepped round by round.

:class:`Simulation` puts the parts together (data, model and x⁰, topology, local training and evaluation, built
by :func:`~.assembly.build_parts`; then the algorithm's state before round 0) and hands them to the driver loop
(:func:`~.loop.drive`). Each round gets fresh :class:`~.tools.SimulationTools` (:meth:`Simulation.tools`),
so nothing of a round outlives it except what the algorithm returns.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from torch import Tensor
from tqdm import tqdm

from .. import checkpoint as ckpt
from ..algorithms import ALGORITHMS
from ..config import Config, check_int
from ..data import FederatedData
from ..errors import ConfigError, DivergenceError
from ..gossip import initial_gossip_state
from ..results import History
from ..topology import MixingMatrix
from .allocator import retain_freed_memory
from .assembly import build_parts
from .buffers import OutputBuffers
from .loop import HookList, Hooks, RunState, drive, evaluated, play_round
from .tools import SimulationTools, learning_rate
from .trainer import RoundStreams

#: The notes on messages that could not be sent as counted (``params.transmission_notes``) this process
#: has printed on stderr; each is printed once, and every run keeps its own in its history.
announced_notes: set[str] = set()


def announce(notes) -> None:
    """Print each note on stderr the first time this process meets it: said before anything runs (every run
    also keeps its own notes in its history), and once in a sweep of runs."""
    for note in notes:
        if note not in announced_notes:
            announced_notes.add(note)
            print(f"dfl_core: {note}", file=sys.stderr)


__all__ = ["Simulation", "run", "ProgressBar", "Checkpointing"]


class Simulation:
    """All clients of one run. Build it, then call :meth:`step` or :meth:`run`.

    Attributes a reader can check a run with:
        config: the run's :class:`Config`.
        algorithm: the :class:`~dfl_core.algorithms.Algorithm` being run.
        data: the clients' data (``data.train.client_indices()`` lists each client's samples).
        model: the :class:`StackedModel` (parameter layout, forward pass).
        x0: the initial parameters, ``(m, d)``; read-only (an expanded view of one row when all clients start equal).
        x, state, t: every client's model ``(m, d)``, the algorithm's state, the rounds completed; ``run_state``
            holds them with the counters.
        matrices(t): the mixing matrices used in round t; tools(t): the tools the algorithm gets in round t.
    """

    def __init__(self, config: Config, data: FederatedData | None = None):
        if not isinstance(config, Config):
            raise ConfigError(
                f"a run needs a dfl_core.Config, got a {type(config).__name__}; build one with Config(**settings)"
            )
        cfg = config
        self.config, self.algorithm = cfg, ALGORITHMS[cfg.algorithm]
        announce(cfg.params.transmission_notes)
        self.device, self.dtype = cfg.torch_device, cfg.torch_dtype
        if self.device.type == "cpu":
            retain_freed_memory()  # the round's temporaries reuse freed memory (allocator.py)
        # 1-4. data, model and x⁰, communication graph, local training and evaluation (assembly.py)
        self.data, self.model, self.x0, self.topology, self.trainer, self.evaluator = build_parts(
            cfg, self.device, self.centralized, data
        )
        self.matrices(0)  # a bad graph fails here, before training
        self._operators: dict = {}  # mixing operators on the device, reused across rounds
        self._gossip_outputs = OutputBuffers()  # gossip output tensors, reused once nothing holds them
        # 5. the algorithm's state before round 0
        self.restart()

    def restart(self) -> None:
        """Back to round 0: the algorithm's initial state from x⁰, no history, counters at 0."""
        self.run_state = RunState(
            t=0,
            state=self.algorithm.init(self.x0.clone(), self.tools(0, state=None)),
            gossip_state=initial_gossip_state(self.config.params, self.x0, self.config.same_init),
        )
        self.wall_time_s = 0.0
        self._start = time.perf_counter()

    # ---------------------------------------------------------------- the run's parts
    @property
    def centralized(self) -> bool:
        return self.algorithm.kind == "centralized"

    @property
    def t(self) -> int:
        return self.run_state.t

    @property
    def state(self):
        """The algorithm's state (a NamedTuple: ``x`` for decentralized algorithms, ``w`` and more for centralized)."""
        return self.run_state.state

    @property
    def x(self) -> Tensor:
        """Every client's model, ``(m, d)`` (the global model repeated, for centralized FL)."""
        return self.algorithm.client_models(self.run_state.state, self.config.num_clients)

    @property
    def transmissions(self) -> int:
        return self.run_state.transmissions

    @property
    def bits_sent(self) -> int:
        return self.run_state.bits_sent

    @property
    def client_chunk(self) -> int:
        return self.trainer.client_chunk

    @property
    def execution(self) -> dict:
        """How this run computes, with "auto" and unset settings resolved (a results file's ``execution``,
        :mod:`dfl_core.results`): the device, the parameters' dtype, local training's precision, the forward
        strategy and the client chunk."""
        device = self.device
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        out = {
            "device": str(device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "precision": self.config.precision,
            "forward_strategy": self.model.strategy,
            "client_chunk": self.client_chunk,
        }
        if device.type == "cuda":
            out["device_name"] = torch.cuda.get_device_name(device)
        return out

    @property
    def history(self) -> History:
        return History(
            config=self.config.to_dict(),
            records=list(self.run_state.history),
            wall_time_s=self.wall_time_s,
            notes=list(self.config.params.transmission_notes),
            execution=self.execution,
        )

    def matrices(self, t: int) -> list[MixingMatrix]:
        """The mixing matrices of round t, one per gossip step (the same W repeated by default)."""
        if self.topology is None:
            return []
        q = self.config.params.gossip_steps
        if self.topology.time_varying and self.config.fresh_matrix_per_gossip_step:
            return [self.topology.matrix(t, step) for step in range(q)]
        return [self.topology.matrix(t, 0)] * q

    def tools(self, t: int | None = None, hooks: Hooks | None = None, *, state=...) -> SimulationTools:
        """The tools the algorithm gets in round ``t`` (default: the next round), from the current state.

        Calling a tool does not change the simulation: ``sim.tools().local_train(sim.x)``
        is the next round's local training, computed aside.
        """
        t = self.t if t is None else t
        return SimulationTools(
            self.config,
            self.algorithm,
            self.state if state is ... else state,
            t,
            self.trainer,
            self.matrices(t),
            self.data.dataset.input_shape,
            rule_state=None if state is None else self.run_state.rule_state,
            hooks=hooks,
            operators=self._operators,
            outputs=self._gossip_outputs,
            gossip_state=None if state is None else self.run_state.gossip_state,
        )

    def batches(self, clients: Tensor | None = None, steps: int | None = None, t: int | None = None) -> list:
        """The mini-batches ``clients`` (default all) draw in round ``t`` (default the next): ``(inputs, labels, weights)``."""
        clients = torch.arange(self.config.num_clients) if clients is None else clients
        return self.trainer.batches(clients, RoundStreams(self.config.seed, self.t if t is None else t), steps)

    def clients_of_round(self, t: int) -> Tensor:
        """The clients sampled in round t (centralized FL; a function of the seed and t only)."""
        return self.tools(t).sample_clients()

    # ------------------------------------------------------------------- rounds
    def step(self, hooks=()) -> None:
        """Run one round of the algorithm (no evaluation; see :meth:`evaluate`); ``hooks`` observe it."""
        hooks = HookList(hooks)
        hooks.before_round(self.run_state)
        self.run_state = play_round(self.algorithm, self.run_state, self.tools(hooks=hooks), self.config.num_clients)
        hooks.after_round(self.run_state)

    def evaluate(self) -> dict:
        """Measure the current models and append a record to the history; returns the record."""
        self.run_state = evaluated(self.run_state, self._measure, HookList())
        return self.run_state.history[-1]

    def _measure(self, run: RunState) -> dict:
        cfg = self.config
        return self.evaluator(
            self.algorithm.client_models(run.state, cfg.num_clients),
            t=run.t,
            lr=learning_rate(cfg, max(run.t - 1, 0)),
            transmissions=run.transmissions,
            bits_sent=run.bits_sent,
            bits_last_round=run.bits_last_round,
            wall_time_s=time.perf_counter() - self._start,
            extra=run.round_record,
        )

    def run(
        self,
        progress: bool = False,
        desc: str | None = None,
        checkpoint: str | os.PathLike | None = None,
        checkpoint_every: int = 10,
        hooks=(),
    ) -> History:
        """Run all remaining rounds, evaluating every ``eval_every`` rounds and at the end (:func:`~.loop.drive`).

        With ``checkpoint`` (a file path) the state is saved atomically every ``checkpoint_every`` rounds, after the
        last round, and when the run is interrupted (Ctrl-C); :meth:`resume` continues from it. A diverging run
        stops with :class:`DivergenceError` and leaves the last good checkpoint. ``hooks`` (:class:`~.loop.Hooks`)
        observe the loop.
        """
        cfg = self.config
        saver = None
        if checkpoint is not None:
            check_int("checkpoint_every", checkpoint_every, 1)
            saver = Checkpointing(self, checkpoint, checkpoint_every)
        bar = ProgressBar(cfg.rounds, self.t, desc or cfg.algorithm) if progress else None
        try:
            self.run_state = drive(
                self.algorithm,
                self.run_state,
                rounds=cfg.rounds,
                eval_every=cfg.eval_every,
                num_clients=cfg.num_clients,
                tools_for=lambda run, on: self.tools(run.t, on),
                evaluate=self._measure,
                hooks=[_Follow(self), saver, bar, HookList(hooks)],
            )
        except DivergenceError as err:
            if saver is not None and saver.saved_t is not None:
                raise DivergenceError(
                    f"{err}. The last good checkpoint (round {saver.saved_t}) is {str(checkpoint)!r}"
                ) from None
            raise
        finally:
            if bar is not None:
                bar.close()
        self.wall_time_s = time.perf_counter() - self._start
        return self.history

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self, run: RunState | None = None) -> dict:
        """Everything the run carries from round to round, on the CPU (see :mod:`dfl_core.checkpoint`)."""
        return ckpt.pack(
            self.config.to_dict(), self.run_state if run is None else run, time.perf_counter() - self._start
        )

    def load_state_dict(self, saved: dict, path: str | os.PathLike = "") -> None:
        """Continue from ``saved`` (from :meth:`state_dict`); the config must match (see :mod:`dfl_core.checkpoint`)."""
        ckpt.check_compatible(Config.from_dict(saved["config"]).to_dict(), self.config.to_dict(), saved["t"], path)
        self.run_state = RunState(**ckpt.unpack(saved, self.run_state.state, self.device))
        self._start = time.perf_counter() - saved["elapsed_s"]

    def save_checkpoint(self, path: str | os.PathLike, run: RunState | None = None) -> Path:
        """Write :meth:`state_dict` (of ``run``, default the current state) to ``path`` atomically."""
        return ckpt.save_atomic(self.state_dict(run), path)

    @classmethod
    def resume(
        cls, path: str | os.PathLike, config: Config | None = None, data: FederatedData | None = None
    ) -> "Simulation":
        """A simulation continuing from the checkpoint at ``path``.

        ``config`` defaults to the checkpoint's own; a config given here may
        differ only in :data:`dfl_core.checkpoint.RESUMABLE_CHANGES` (e.g. more rounds).
        """
        saved = ckpt.load(path)
        sim = cls(config if config is not None else Config.from_dict(saved["config"]), data=data)
        sim.load_state_dict(saved, path)
        return sim


# ------------------------------------------------------------------------ hooks
class _Follow(Hooks):
    """Keeps ``sim.run_state`` at the last completed round while :func:`drive` runs (so hooks and a
    Ctrl-C see the simulation as it is)."""

    def __init__(self, sim: Simulation):
        self.sim = sim

    def after_round(self, run: RunState) -> None:
        self.sim.run_state = run

    def after_evaluate(self, run: RunState, record: dict) -> None:
        if run.t == 0:
            self.sim.run_state = run

    def on_interrupt(self, run: RunState) -> None:
        self.sim.run_state = run


class Checkpointing(Hooks):
    """Save the run every ``every`` rounds, after the last one, and on Ctrl-C (the last completed round)."""

    def __init__(self, sim: Simulation, path: str | os.PathLike, every: int):
        self.sim, self.path, self.every = sim, path, every
        self.saved_t: int | None = None

    def after_round(self, run: RunState) -> None:
        if run.t % self.every == 0 or run.t == self.sim.config.rounds:
            self.sim.save_checkpoint(self.path, run)
            self.saved_t = run.t

    def on_interrupt(self, run: RunState) -> None:
        self.sim.save_checkpoint(self.path, run)


class ProgressBar(Hooks):
    """A tqdm bar over the rounds, with the last accuracy and consensus distance."""

    def __init__(self, total: int, done: int, desc: str):
        self.bar = tqdm(total=total, initial=done, desc=desc, leave=False)

    def after_evaluate(self, run: RunState, record: dict) -> None:
        self.bar.set_postfix(acc=f"{record['test_acc']:.3f}", cd=f"{record['consensus_distance']:.2e}")

    def after_round(self, run: RunState) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def run(
    config: Config,
    progress: bool = False,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    data: FederatedData | None = None,
    hooks=(),
) -> History:
    """Run one configuration to the end and return its :class:`History`.

    With ``checkpoint``, save there as :meth:`Simulation.run` does; with
    ``resume`` also continue from that file when it exists.
    """
    if resume and checkpoint is not None and Path(checkpoint).exists():
        sim = Simulation.resume(checkpoint, config, data=data)
    else:
        sim = Simulation(config, data=data)
    return sim.run(progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every, hooks=hooks)
