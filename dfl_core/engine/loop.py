"""The driver loop, written once: the simulator and the distributed backend both run it.

A run is a :class:`RunState` (the algorithm's state, the round number, the counters and the history: everything a
checkpoint holds) advanced by :func:`drive`. Whoever calls it supplies the round's tools (the simulator's
:class:`~.tools.SimulationTools`, or one rank's tools in :mod:`dfl_core.distributed`), the evaluation, and
:class:`Hooks` that observe the loop (progress, checkpoints, gossip steps, timings) without changing it.

One round of DFedSAM, call by call, from the loop to the model's gradients (``tests/test_architecture.py``
traces it and fails if it changes)::

    drive                          engine/loop.py               the loop over rounds
    play_round                     engine/loop.py               one round, the divergence check, the counters
    local_steps_then_gossip        algorithms/decentralized.py  algorithm.round: r.local_train, then r.gossip
    SimulationTools.local_train    engine/tools.py              per chunk of clients and local step: its batch ξ
    local_step                     local.py                     the step's update u from the declared rule
    Chain.update                   local.py                     the rule chain(sam(ρ), sgd(wd)), piece by piece
    sam.<locals>.update            local.py                     SAM's two gradients, at y and at y + ρg/‖g‖
    LocalStep.gradient             local.py                     one gradient on ξ, its losses kept
    StackedModel.loss_and_grad     stacked.py                   all clients' losses and gradients at once

and from there the model's forward strategy (:class:`dfl_core.stacked.ForwardStrategy`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from ..errors import DivergenceError

__all__ = [
    "RunState",
    "Hooks",
    "HookList",
    "RoundLog",
    "play_round",
    "evaluated",
    "drive",
    "evaluates",
    "evaluation_rounds",
]


class RunState(NamedTuple):
    """Everything a run carries from one round to the next (a checkpoint is this, on the CPU)."""

    t: int  # rounds completed
    state: Any  # the algorithm's state (a NamedTuple of tensors)
    rule_state: Any = None  # local-rule buffers kept across rounds (reset_momentum=False)
    transmissions: int = 0  # messages sent so far
    bits_sent: int = 0  # their bits
    bits_last_round: int = 0
    round_record: dict = {}  # the algorithm's own quantities of the last round (e.g. FedGF's c)
    history: tuple = ()  # one record per evaluation
    gossip_state: Any = None  # what gossip keeps across rounds (compressed gossip's x̂), or None


class Hooks:
    """Observers of :func:`drive`; subclass and override what you need (every method here does nothing).

    Hooks watch; they do not change the run. Tools call :meth:`after_local_train`
    and :meth:`after_gossip` during a round; :func:`drive` calls the others.
    """

    def before_round(self, run: RunState) -> None:
        """Round ``run.t`` (0-based) is about to start."""

    def after_local_train(self, start, trained, clients) -> None:
        """Local training of ``clients`` went from ``start`` to ``trained`` (both ``(n, d)``)."""

    def after_gossip(self, before, after, step: int) -> None:
        """Gossip step ``step`` of the round turned ``before`` into ``after`` (both ``(m, d)``)."""

    def after_round(self, run: RunState) -> None:
        """Round ``run.t`` is complete (and evaluated, if it was an evaluation round)."""

    def before_evaluate(self, run: RunState) -> None:
        """The models after round ``run.t`` are about to be measured."""

    def after_evaluate(self, run: RunState, record: dict) -> None:
        """``record`` was measured after round ``run.t`` and appended to the history."""

    def on_interrupt(self, run: RunState) -> None:
        """The run was interrupted (Ctrl-C) during the round after ``run``, the last completed one."""


class RoundLog(Hooks):
    """Keeps every round's ``round_record``: the algorithm's own quantities (e.g. FedGF's c and drift D^r),
    which the history holds only for evaluated rounds."""

    def __init__(self):
        self.records: list[dict] = []

    def after_round(self, run: RunState) -> None:
        self.records.append(run.round_record)

    def series(self, key: str) -> list:
        """One quantity over the rounds run with this hook, e.g. ``log.series("fedgf_c")``."""
        return [r[key] for r in self.records]


class HookList(Hooks):
    """Several hooks (or one), called in order (a hook may define only some of the methods)."""

    def __init__(self, hooks=()):
        self.hooks = [h for h in (hooks if isinstance(hooks, (list, tuple)) else [hooks]) if h is not None]
        methods = [name for name in vars(Hooks) if not name.startswith("_")]
        for hook in self.hooks:  # a function or a number would otherwise never be called, silently
            if not any(callable(getattr(hook, name, None)) for name in methods):
                raise TypeError(
                    f"hook {hook!r} defines none of the hook methods ({', '.join(methods)}); "
                    "subclass dfl_core.engine.Hooks and override the ones you need"
                )

    def _each(self, name: str, *args) -> None:
        for hook in self.hooks:
            method = getattr(hook, name, None)
            if method is not None:
                method(*args)

    def before_round(self, run):
        self._each("before_round", run)

    def after_local_train(self, start, trained, clients):
        self._each("after_local_train", start, trained, clients)

    def after_gossip(self, before, after, step):
        self._each("after_gossip", before, after, step)

    def after_round(self, run):
        self._each("after_round", run)

    def before_evaluate(self, run):
        self._each("before_evaluate", run)

    def after_evaluate(self, run, record):
        self._each("after_evaluate", run, record)

    def on_interrupt(self, run):
        self._each("on_interrupt", run)


def play_round(algorithm, run: RunState, tools, num_clients: int) -> RunState:
    """Steps 2–4 of :func:`drive`: one round of ``algorithm`` from ``run`` with the round's ``tools``."""
    with torch.no_grad():
        state = algorithm.round(run.state, tools)  # 2.
    models = algorithm.client_models(state, num_clients)
    if not torch.isfinite(models.sum()):  # 3. one cheap pass
        # the sum can overflow while every entry is finite: parameters near float's limit diverged as well
        broken = (~torch.isfinite(models)).any(1).nonzero()
        client = int(broken[0]) if len(broken) else int(models.abs().amax(1).argmax())
        what = "became NaN/inf" if len(broken) else "grew so large that their sum overflows"
        raise DivergenceError(
            f"parameters of client {client} {what} in round {run.t + 1}; the learning rate or the SAM radius "
            f"is likely too large; lower " + " or ".join(tools.config.step_sizes())
        )
    return run._replace(
        t=run.t + 1,
        state=state,
        rule_state=tools.rule_state,  # 4.
        transmissions=run.transmissions + tools.transmissions,
        bits_sent=run.bits_sent + tools.bits,
        bits_last_round=tools.bits,
        round_record=dict(tools.records),
        gossip_state=tools.gossip_state,
    )


def evaluated(run: RunState, evaluate: Callable[[RunState], dict], hooks: Hooks) -> RunState:
    """``run`` with one more record in its history (:meth:`Hooks.after_evaluate` sees it)."""
    hooks.before_evaluate(run)
    record = evaluate(run)
    run = run._replace(history=(*run.history, record))
    hooks.after_evaluate(run, record)
    return run


def evaluates(t: int, rounds: int, eval_every: int) -> bool:
    """Whether :func:`drive` evaluates after round ``t``: round 0, every ``eval_every``-th round and the last."""
    return t % eval_every == 0 or t == rounds


def evaluation_rounds(rounds: int, eval_every: int) -> list[int]:
    """The rounds a complete run's history records, in order (see :func:`evaluates`)."""
    return [t for t in range(rounds + 1) if evaluates(t, rounds, eval_every)]


def drive(
    algorithm,
    run: RunState,
    *,
    rounds: int,
    eval_every: int,
    num_clients: int,
    tools_for: Callable[[RunState, Hooks], Any],
    evaluate: Callable[[RunState], dict],
    hooks=(),
) -> RunState:
    """Run ``algorithm`` from ``run`` until ``rounds`` rounds are complete; returns the final :class:`RunState`.

    0. a run that has not started is evaluated first (the round-0 record);
    then for every round t = run.t, …, rounds − 1:

    1. the round's tools: η_t, W_t, the round's generators, the declared local rule (``tools_for``);
    2. state ← ``algorithm.round(state, tools)``;
    3. stop with :class:`DivergenceError` if a parameter became NaN or infinite;
    4. t ← t + 1, and the round's messages are added to the counters;
    5. every ``eval_every`` rounds and after the last: ``evaluate`` → history;
    6. hooks (progress, checkpoints, observation) see the completed round.

    An interrupt (Ctrl-C) leaves the last completed round to :meth:`Hooks.on_interrupt`, also when it comes
    during step 6; nothing of the interrupted round is kept, since ``run`` is only replaced once a round is
    complete.
    """
    hooks = HookList(hooks)
    if run.t == 0 and not run.history:  # 0.
        run = evaluated(run, evaluate, hooks)
    while run.t < rounds:
        try:
            hooks.before_round(run)
            tools = tools_for(run, hooks)  # 1.
            new = play_round(algorithm, run, tools, num_clients)  # 2.–4.
            if evaluates(new.t, rounds, eval_every):  # 5.
                new = evaluated(new, evaluate, hooks)
        except KeyboardInterrupt:
            hooks.on_interrupt(run)
            raise
        run = new
        try:
            hooks.after_round(run)  # 6.
        except KeyboardInterrupt:  # the round is complete: it is the one to keep
            hooks.on_interrupt(run)
            raise
    return run
