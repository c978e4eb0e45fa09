"""The papers' models as plain ``nn.Module`` factories.

Each factory takes the input shape ``(C, H, W)`` and the number of classes, so
the same architecture runs on the 8x8 digits and on 28x28 Fashion-MNIST.
The engine never trains these modules directly: :class:`dfl_core.stacked.StackedModel`
holds the parameters of all m clients in one ``(m, d)`` tensor and evaluates the
module functionally.
"""
from __future__ import annotations

import math
from typing import Callable

from torch import nn

__all__ = ["MODELS", "MODEL_HELP", "mlp_2nn", "cnn_mnist", "build_model", "ModelError"]


class ModelError(ValueError):
    """An unknown model name or an input shape the model cannot take."""


def mlp_2nn(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """The "2NN" of McMahan et al. (2017), used by the DFedAvgM paper (§6).

    Two hidden layers of 200 units with ReLU. On 28x28 inputs it has
    199,210 parameters, the number DFedAvgM §6 states.
    """
    d = math.prod(input_shape)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(d, 200), nn.ReLU(),
        nn.Linear(200, 200), nn.ReLU(),
        nn.Linear(200, num_classes),
    )


def cnn_mnist(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """The MNIST CNN of McMahan et al. (2017), used by the DFedAvgM paper (§6).

    Two 5x5 convolutions (32 and 64 channels, "same" padding), each followed by
    2x2 max-pooling, a fully connected layer of 512 units with ReLU, and the
    output layer. On 28x28 inputs it has 1,663,370 parameters, the number
    DFedAvgM §6 states; the padding of 2 is what makes that count come out.
    """
    if len(input_shape) != 3:
        raise ModelError(f"cnn-mnist needs image input (C, H, W), got input_shape={input_shape}")
    c, h, w = input_shape
    if h < 4 or w < 4:
        raise ModelError(f"cnn-mnist needs images of at least 4x4 pixels, got {h}x{w}")
    flat = 64 * (h // 4) * (w // 4)
    return nn.Sequential(
        nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512), nn.ReLU(),
        nn.Linear(512, num_classes),
    )


MODELS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "2nn": mlp_2nn,
    "cnn-mnist": cnn_mnist,
}
MODEL_HELP: dict[str, str] = {
    "2nn": "MLP with two hidden layers of 200 (McMahan et al. 2017; DFedAvgM §6)",
    "cnn-mnist": "CNN conv32-conv64 (5x5, max-pool) + FC 512 (McMahan et al. 2017; DFedAvgM §6)",
}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Instantiate a model by name; unknown names raise :class:`ModelError`."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")
    return MODELS[name](tuple(input_shape), num_classes)
