"""The simulator's round tools: what an algorithm may use in round t (:class:`~dfl_core.algorithms.RoundTools`).

A :class:`SimulationTools` lives for one round. It lends the algorithm local training (the K steps of its
declared rule on :class:`~.trainer.LocalTrainer`'s mini-batches, :meth:`~SimulationTools.local_train`), gossip with
the round's mixing matrices, client sampling and the round's generators, and it counts what was sent. The driver
loop (:mod:`.loop`) reads the counts, the recorded quantities and the kept states (the rule's, gossip's) back when
the round is over.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import torch
from torch import Tensor

from ..errors import DivergenceError
from ..gossip import MixingOperator
from ..local import LocalRule, LocalStep, local_step, map_state, typed_state
from ..operators import message_bits, quantize
from .buffers import OutputBuffers
from .loop import Hooks
from .trainer import Gradient, LocalTrainer, RoundStreams, tree_assign_rows, tree_rows

__all__ = ["SimulationTools", "learning_rate"]


def learning_rate(config, t: int) -> float:
    """The learning rate of round ``t`` (0-based: ``t`` rounds completed before it): η_t = η · lr_decay^t."""
    return config.lr * config.lr_decay**t


class SimulationTools:
    r"""The tools of round ``t`` (rounds completed before it) of one simulated run, for an algorithm whose state at
    the round's start is ``state`` (the algorithm's declared local rule is built from it).

    ``matrices``: this round's mixing matrices, one per gossip step (none for centralized FL); ``rule_state``: the
    local-rule buffers kept across rounds (``reset_momentum=False``) or ``None``; ``hooks`` observe local training and
    gossip; ``operators``, ``outputs``: the mixing operators and gossip outputs the caller keeps across rounds;
    ``gossip_state``: what gossip keeps across rounds (:func:`dfl_core.gossip.initial_gossip_state`: compressed
    gossip's public copies :math:`\hat x`), or ``None``.
    """

    def __init__(
        self,
        config,
        algorithm,
        state,
        t: int,
        trainer: LocalTrainer,
        matrices: list,
        input_shape: tuple,
        rule_state: Any = None,
        hooks=None,
        operators: dict | None = None,
        outputs: OutputBuffers | None = None,
        gossip_state: Tensor | None = None,
    ):
        self.config, self.algorithm, self.state, self.t = config, algorithm, state, t
        self.params = config.params  # the algorithm's hyperparameters
        self.trainer, self.model = trainer, trainer.model
        self.num_clients, self.input_shape = config.num_clients, input_shape
        self.lr = learning_rate(config, t)  # η_t
        self.streams = RoundStreams(config.seed, t)
        self._matrices = matrices
        self._operators = {} if operators is None else operators  # shared across rounds by the caller
        self._outputs = OutputBuffers() if outputs is None else outputs  # gossip outputs, reused when free
        for key in [k for k, (M, _) in self._operators.items() if not any(M is N for N in matrices)]:
            del self._operators[key]  # a time-varying W of an earlier round
        # this round's copy (a typed rule state keeps its types); the driver keeps it if the round completes
        self.rule_state = None if rule_state is None else map_state(Tensor.clone, rule_state)
        self.gossip_state = gossip_state  # replaced, never written in place: the driver keeps the new one
        self.hooks = Hooks() if hooks is None else hooks  # (Hooks: each method does nothing)
        self.transmissions, self.bits = 0, 0  # messages sent this round, and their bits
        self.records: dict[str, float] = {}  # the algorithm's own per-round quantities

    @cached_property
    def rule(self) -> LocalRule:
        """The algorithm's declared local rule for this round (built once, from the state at the round's start)."""
        return self.algorithm.local_rule(self.params, self.state, self.config)

    # ------------------------------------------------------------- local training
    def local_train(
        self,
        x: Tensor,
        clients: Tensor | None = None,
        *,
        rule: LocalRule | None = None,
        gradient: Gradient | None = None,
    ) -> Tensor:
        """K steps of the declared local rule (or ``rule``) from ``x`` (rows = ``clients``, default all); y^{t,K}.

        Per chunk of ``client_chunk`` clients (whose K mini-batches are drawn when the chunk starts) and per local
        step, ``step`` holds the step's mini-batch ξ and
        :func:`~dfl_core.local.local_step` returns the update u: the rule asks ``step.gradient(point)`` for every
        gradient it needs (SGD once, SAM twice), which is the stacked model's
        :meth:`~dfl_core.stacked.StackedModel.loss_and_grad` on ξ (or ``gradient``, FedRobust's). Then y ← y + u.
        The rule's state starts afresh every round (``rule.init``), or with ``reset_momentum=False`` is the run's
        kept state, each chunk's rows read at its start and written back at its end.
        """
        cfg, trainer = self.config, self.trainer
        clients = torch.arange(cfg.num_clients) if clients is None else clients.cpu()
        rule = self.rule if rule is None else rule
        kept = None if cfg.reset_momentum else self._kept_rule_state(rule, x)
        loss_and_grad = self.model.loss_and_grad if gradient is None else gradient
        out = trainer.outputs.take(x)
        losses = []
        augment_calls = self.streams.augment_calls
        for lo in range(0, len(clients), trainer.client_chunk):
            rows = slice(lo, lo + trainer.client_chunk)
            ids = clients[rows]
            # The chunk's own K batches only, so that memory grows with client_chunk, not m (a client's batches do
            # not depend on the others drawn with it).
            self.streams.replay_augmentation_from(augment_calls)
            batches = trainer.batches(ids, self.streams)
            state = rule.init(x[rows]) if kept is None else tree_rows(kept, ids)
            y, evals = out[rows], []  # trained in place in the output (rules keep no y)
            y.copy_(x[rows])
            for batch in batches:
                step = LocalStep(loss_and_grad, self.lr, batch, ids, self.model, evals)
                u, state = local_step(rule, state, y, step)
                y.add_(u)
            losses.append(torch.stack(evals).cpu())  # every gradient evaluation's losses, in order
            if kept is not None:
                tree_assign_rows(kept, ids, state)
        self._check_finite(torch.cat(losses, dim=1), clients)
        self.hooks.after_local_train(x, out, clients)
        return out

    def _kept_rule_state(self, rule: LocalRule, x: Tensor):
        """The rule's state kept across rounds (``reset_momentum=False``): every client's buffers at 0 at first."""
        if self.rule_state is None:
            self.rule_state = rule.init(
                torch.zeros(self.config.num_clients, self.model.d, dtype=self.trainer.dtype, device=self.model.device)
            )
        else:  # read from a checkpoint: plain tuples
            self.rule_state = typed_state(rule, self.rule_state, x)
        return self.rule_state

    def _check_finite(self, losses: Tensor, clients: Tensor) -> None:
        """Stop on a NaN/inf loss (``losses``: gradient evaluations × clients), naming the round, the evaluation
        and the client."""
        bad = ~torch.isfinite(losses)
        if bad.any():
            evaluation, row = (int(v) for v in bad.nonzero()[0])
            raise DivergenceError(
                f"loss became {float(losses[evaluation, row])} in round {self.t + 1} (local gradient evaluation {evaluation}) "
                f"on client {int(clients[row])}; the run diverged, likely because the learning rate or the "
                f"SAM radius is too large ({', '.join(self.config.step_sizes())}); try a smaller value"
            )

    def full_gradient(self, x: Tensor, clients: Tensor | None = None) -> Tensor:
        """Each client's gradient of its mean loss over its whole train split at ``x`` (rows = ``clients``)."""
        clients = torch.arange(self.config.num_clients) if clients is None else clients.cpu()
        return self.trainer.full_gradient(x, clients)

    # -------------------------------------------------------------------- gossip
    def matrices(self) -> list:
        """This round's mixing matrices (:class:`~dfl_core.topology.MixingMatrix`), one per gossip step."""
        return self._matrices

    def gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        """Q gossip steps :math:`x \\leftarrow W_q x` with this round's matrices; counts the messages and their bits.

        With ``quant_bits`` set, each step sends compressed messages instead (:meth:`compressed_gossip`),
        unless ``bits_per_message`` says the caller quantized what it mixes itself (dfedavgm-q's
        other readings): then ``x`` is mixed exactly and each message is charged ``bits_per_message``.
        """
        if self.gossip_state is not None and bits_per_message is None:  # compressed gossip's x̂
            return self.compressed_gossip(x)
        return self.exact_gossip(x, bits_per_message)

    def exact_gossip(self, x: Tensor, bits_per_message: int | None = None) -> Tensor:
        """Q steps :math:`x \\leftarrow W_q x`, each message charged ``bits_per_message`` (default d·bits_per_param)."""
        for q, M in enumerate(self._matrices):
            self.count_transmissions(M.num_messages, bits_per_message)
            before, x = x, self._operator(M)(x, out=self._outputs.take(x))
            self.hooks.after_gossip(before, x, q)
        return x

    def compressed_gossip(self, x: Tensor) -> Tensor:
        r"""Q steps of CHOCO-Gossip (Koloskova, Stich & Jaggi, ICML 2019, Algorithm 1) with b-bit messages.

        Every client i keeps a public copy :math:`\hat x_i`, which it and each of its neighbours hold
        alike, because it changes only by what i sends. Per step, with :math:`\mathcal Q` the b-bit
        quantizer (:func:`~dfl_core.operators.quantize`: ``quant_bits``, ``quant_step``, ``quant_rounding``,
        ``quant_stochastic``) and γ = ``consensus_step``:

        1. :math:`q_i = \mathcal Q(x_i - \hat x_i)`: client i sends :math:`q_i`, d·b + 32 bits, to each neighbour;
        2. :math:`\hat x_j \leftarrow \hat x_j + q_j` for i and every neighbour j (on every holder of the copy);
        3. :math:`x_i \leftarrow x_i + \gamma \sum_j w_{ij} (\hat x_j - \hat x_i)`, i.e. :math:`x + \gamma (W - I)\hat x`.

        What a client needs, :math:`\hat x_j` of its neighbours, it has built from their messages alone,
        so the bits counted are the bits sent. With exact messages and γ = 1, :math:`\hat x = x` after
        step 2 and step 3 is exact gossip, :math:`x \leftarrow W x`. The copies are gossip's state
        (:attr:`gossip_state`), kept across rounds and checkpointed with the run: the error of one message is sent
        again in the next (error feedback).
        Stochastic rounding draws from the round's ``"quantize"`` stream, one ``(m, d)`` draw per step.
        """
        p = self.params
        public, gen = self.gossip_state, (self.generator("quantize") if p.quant_stochastic else None)
        bits = message_bits(x.shape[1], p.quant_bits)
        for q, M in enumerate(self._matrices):
            self.count_transmissions(M.num_messages, bits)
            message = quantize(x - public, **p.quantizer, generator=gen)  # 1.
            public = public + message  # 2.
            before, x = x, x + p.consensus_step * (self._operator(M)(public) - public)  # 3.
            self.hooks.after_gossip(before, x, q)
        self.gossip_state = public
        return x

    def _operator(self, M):
        """What :meth:`_build_operator` makes of W, built once per matrix object (a static W once per run).

        The cache is the ``operators`` dict the caller shares across rounds; the entries of matrices this round does
        not use (a time-varying W of an earlier round) are dropped when the round's tools are made.
        """
        key = id(M)
        if key not in self._operators or self._operators[key][0] is not M:
            self._operators[key] = (M, self._build_operator(M))
        return self._operators[key][1]

    def _build_operator(self, M) -> MixingOperator:
        """W on the device, ready to multiply the clients' rows (the distributed backend builds a rank's plan)."""
        mode = None if self.config.gossip_mode == "auto" else self.config.gossip_mode
        return MixingOperator(M.W, self.model.device, self.trainer.dtype, mode=mode)

    # --------------------------------------------------------- centralized FL
    def sample_clients(self) -> Tensor:
        """The clients of this round (centralized FL), sorted: :meth:`Config.clients_per_round_count` of them drawn
        uniformly without replacement from the round's ``"clients"`` generator."""
        m, n = self.config.num_clients, self.config.clients_per_round_count()
        return torch.randperm(m, generator=self.generator("clients"))[:n].sort().values

    def client_weights(self, clients: Tensor) -> Tensor:
        """Aggregation weights n_i / Σ n_j over ``clients`` (McMahan et al. 2017), shape ``(n, 1)``."""
        counts = self.trainer.data.train.counts
        n = counts[clients.to(counts.device)].to(self.trainer.dtype)
        return (n / n.sum()).unsqueeze(1).to(self.model.device)

    def count_transmissions(self, models: int, bits_per_message: int | None = None) -> None:
        """Record ``models`` messages (e.g. downloads and uploads of centralized FL) and their bits.

        A message is one model-sized vector; unless the algorithm says otherwise (a quantized message,
        :func:`dfl_core.instruments.quantize.message_bits`) it carries ``d * bits_per_param`` bits.
        """
        bits = self.model.d * self.config.bits_per_param if bits_per_message is None else bits_per_message
        self.transmissions += models
        self.bits += models * int(bits)

    # ------------------------------------------------------------ randomness, records
    def generator(self, purpose: str) -> torch.Generator:
        """This round's random stream for ``purpose`` (a function of the seed, the purpose and t only)."""
        return self.streams.generator(purpose)

    def record(self, **values: float) -> None:
        """Per-round quantities of the algorithm, reported with the next evaluation (e.g. FedGF's c)."""
        self.records.update(values)
