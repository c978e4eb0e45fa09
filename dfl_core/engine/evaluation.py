"""What the simulator records after a round: the schema of a history record (:mod:`dfl_core.results`)."""

from __future__ import annotations

from torch import Tensor

from ..data import FederatedData
from ..metrics import consensus_distance, evaluate_clients, evaluate_model
from ..stacked import StackedModel

__all__ = ["Evaluator", "history_record"]


def history_record(
    *,
    t: int,
    lr: float,
    test: tuple[float, float],
    train: tuple[float, float],
    client_test: tuple[Tensor, Tensor],
    client_train: tuple[Tensor, Tensor],
    consensus_distance: float,
    transmissions: int,
    bits_sent: int,
    bits_last_round: int,
    wall_time_s: float,
    extra: dict | None = None,
) -> dict:
    """The record of round ``t``, as both backends write it (the simulator's :class:`Evaluator` and a rank's).

    ``test``, ``train``: x̄'s (accuracy, loss); ``client_test``, ``client_train``:
    every client's own (accuracies, losses), 1-d tensors in client order;
    ``extra``: further keys (the algorithm's own quantities, a rank's byte counts).
    """
    (test_acc, test_loss), (train_acc, train_loss) = test, train
    (c_test_acc, c_test_loss), (c_train_acc, c_train_loss) = client_test, client_train
    return {
        "round": t,
        "lr": lr,
        "test_acc": test_acc,
        "test_loss": test_loss,
        "train_acc": train_acc,
        "train_loss": train_loss,
        "gen_error": train_acc - test_acc,
        "client_test_acc": c_test_acc.tolist(),
        "client_test_loss": c_test_loss.tolist(),
        "client_train_acc": c_train_acc.tolist(),
        "client_train_loss": c_train_loss.tolist(),
        "client_test_acc_mean": float(c_test_acc.mean()),
        "client_train_acc_mean": float(c_train_acc.mean()),
        "consensus_distance": consensus_distance,
        "transmissions": transmissions,
        "bits_sent": bits_sent,
        "bits_last_round": bits_last_round,
        "bytes_sent": bits_sent // 8,
        "wall_time_s": wall_time_s,
        **(extra or {}),
    }


class Evaluator:
    """Measures every client's model and the average model x̄ on the clients' data (which: :mod:`dfl_core.metrics`)."""

    def __init__(self, model: StackedModel, data: FederatedData, client_chunk: int):
        self.model, self.data, self.client_chunk = model, data, client_chunk
        train = data.train
        union = train.index[train.mask()]
        self.train_union = (train.x[union], train.y[union])

    def __call__(
        self,
        x: Tensor,
        *,
        t: int,
        lr: float,
        transmissions: int,
        bits_sent: int,
        bits_last_round: int,
        wall_time_s: float,
        extra: dict | None = None,
    ) -> dict:
        """The record of round ``t`` for client models ``x`` ``(m, d)``; ``extra``: the algorithm's own quantities."""
        x_bar = x.mean(0)
        test = evaluate_model(self.model, x_bar, self.data.test.x, self.data.test.y)
        train = evaluate_model(self.model, x_bar, *self.train_union)
        client_train = evaluate_clients(self.model, x, self.data.train, self.client_chunk)
        client_test = evaluate_clients(self.model, x, self.data.test, self.client_chunk)
        return history_record(
            t=t,
            lr=lr,
            test=test,
            train=train,
            client_test=client_test,
            client_train=client_train,
            consensus_distance=consensus_distance(x),
            transmissions=transmissions,
            bits_sent=bits_sent,
            bits_last_round=bits_last_round,
            wall_time_s=wall_time_s,
            extra=extra,
        )
