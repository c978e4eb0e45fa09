"""The papers' models as plain ``nn.Module`` factories.

Each factory takes the input shape ``(C, H, W)`` and the number of classes, so
the same architecture runs on the 8x8 digits and on 28x28 Fashion-MNIST; the
CIFAR backbones (``cnn-cifar``, ``vgg11-gn``, ``resnet18-gn``) state in their
docstrings which input sizes they take and raise :class:`ModelError` otherwise.
The engine never trains these modules directly: :class:`dfl_core.stacked.StackedModel`
holds the parameters of all m clients in one ``(m, d)`` tensor and evaluates the
module functionally.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Callable

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "MODELS",
    "MODEL_HELP",
    "linear",
    "mlp_2nn",
    "cnn_mnist",
    "cnn_cifar",
    "vgg11_gn",
    "resnet18_gn",
    "build_model",
    "ModelError",
]


class ModelError(ValueError):
    """An unknown model name or an input shape the model cannot take."""


def linear(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """Multinomial logistic (softmax) regression: one ``Linear`` layer on the flattened input.

    With the engine's cross-entropy loss this is a convex problem whose
    smoothness constant is known: the Hessian of a client's mean loss is
    ``(1/n) Σ_j (diag(p_j) − p_j p_jᵀ) ⊗ x̃_j x̃_jᵀ`` with ``x̃ = [x, 1]``, so
    ``L ≤ λ_max(X̃ᵀX̃)/(2n)`` (:func:`theory.problems.softmax_regression_constants`).
    :mod:`theory.measured` runs it to put measured quantities next to the
    DFedSAM bounds. ``prod(input_shape) · C + C`` parameters: 650 on the 8x8 digits.
    """
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


def mlp_2nn(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """The "2NN" of McMahan et al. (2017), used by the DFedAvgM paper (§6).

    Two hidden layers of 200 units with ReLU. On 28x28 inputs it has
    199,210 parameters, the number DFedAvgM §6 states.
    """
    d = math.prod(input_shape)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(d, 200),
        nn.ReLU(),
        nn.Linear(200, 200),
        nn.ReLU(),
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
        nn.Conv2d(c, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512),
        nn.ReLU(),
        nn.Linear(512, num_classes),
    )


def _image_shape(name: str, input_shape: tuple[int, ...], min_side: int) -> tuple[int, int, int]:
    """``(C, H, W)`` from ``input_shape``, or :class:`ModelError` if ``name`` cannot take it."""
    if len(input_shape) != 3 or any(int(v) < 1 for v in input_shape):
        raise ModelError(f"{name} needs image input (C, H, W), got input_shape={tuple(input_shape)}")
    c, h, w = (int(v) for v in input_shape)
    if h < min_side or w < min_side:
        raise ModelError(
            f"{name} needs images of at least {min_side}x{min_side} pixels, got {h}x{w} "
            f"(input_shape={tuple(input_shape)})"
        )
    return c, h, w


def cnn_cifar(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """The small CIFAR CNN of FedSAM/FedASAM (Caldarola et al., ECCV 2022) and FedGF (Lee & Yoon, ICML 2024).

    Checked against both public codes, which agree layer for layer:
    ``ClientModel`` in ``models/cifar10/cnn.py`` of debcaldarola/fedsam and
    ``FedsamCNN_CIFAR10`` in ``fedlab/models/FedSAMcnn.py`` of hwan-sig/Official-FedGF::

        Conv2d(3, 64, 5)  -> ReLU -> MaxPool2d(2)      # no padding; pool kernel 2, stride 2
        Conv2d(64, 64, 5) -> ReLU -> MaxPool2d(2)
        Flatten -> Linear(64*5*5, 384) -> ReLU -> Linear(384, 192) -> ReLU -> Linear(192, C)

    Every layer has a bias; there is no normalisation and no dropout (FedGF's
    ``FedsamCNN_CIFAR100`` is the same network with 100 outputs). On 3x32x32
    inputs it has 797,962 parameters for 10 classes and 815,332 for 100.
    Neither paper states the number; it is the layer-by-layer sum checked in
    ``tests/test_models.py``.

    The unpadded 5x5 convolutions take 4 pixels off each side and the pools
    halve it (rounding down), so a side of h pixels is ``((h - 4) // 2 - 4) // 2``
    after the second pool: 5 at h = 32. The reference codes hard-code ``64*5*5``;
    here the first linear layer is sized from ``input_shape``. At 3x32x32 the
    network is exactly the reference one, and it also takes e.g. 1x28x28
    (flatten size 64*4*4). Sides below 16 pixels leave nothing to flatten and raise
    :class:`ModelError`.

    The result is one ``nn.Sequential`` of Conv2d/ReLU/MaxPool2d/Flatten/Linear
    only, so the engine's ``"batched"`` strategy can run it (see
    :func:`dfl_core.stacked.choose_strategy`).
    """
    c, h, w = _image_shape("cnn-cifar", input_shape, 16)

    def side(s: int) -> int:  # conv5, pool2, conv5, pool2
        return ((s - 4) // 2 - 4) // 2

    return nn.Sequential(
        nn.Conv2d(c, 64, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * side(h) * side(w), 384),
        nn.ReLU(),
        nn.Linear(384, 192),
        nn.ReLU(),
        nn.Linear(192, num_classes),
    )


GN_GROUPS = 32
"""Groups of every GroupNorm in ``vgg11-gn`` and ``resnet18-gn`` (as in DisPFL's code)."""


def _gn(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=GN_GROUPS, num_channels=channels)


VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
"""VGG configuration "A" (Simonyan & Zisserman, 2015): conv widths, ``"M"`` = 2x2 max-pool."""


def vgg11_gn(input_shape: tuple[int, ...], num_classes: int) -> nn.Sequential:
    """VGG-11 with GroupNorm, the CIFAR-10 backbone of DFedSAM (Shi et al., ICML 2023, App. B.1).

    Follows ``vgg11`` in ``fedml_api/model/cv/vgg.py`` of rong-dai/DisPFL (the
    code base DFedSAM's experiments build on), checked there:

    * configuration "A": 64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M;
    * each conv is ``Conv2d(k=3, padding=1)`` *with* bias, followed by
      ``GroupNorm(32 groups)`` and then ReLU; each M is ``MaxPool2d(2, 2)``;
    * the classifier is a single ``Linear(512, C)`` (no 4096-wide layers, no dropout);
    * initialisation as DisPFL's ``_initialize_weights``: convs Kaiming-normal
      (``fan_out``, ReLU) with zero bias, GroupNorm weight 1 and bias 0, the
      linear layer N(0, 0.01²) with zero bias.

    Differences that do not change the function: DisPFL's ReLUs are in-place
    (here not, so autograd and ``torch.func.vmap`` never see in-place ops), and
    its feature extractor ends with ``AvgPool2d(kernel_size=1, stride=1)``, an
    identity, left out. The parameter names match DisPFL's (``features.0.weight``
    ... ``classifier.0.weight``). On 3x32x32 inputs it has 9,231,114 parameters
    for 10 classes (9,277,284 for 100); no paper states it, the layer-by-layer
    sum is checked in ``tests/test_models.py``.

    Input size: the five max-pools divide each side by 32, so sides below 32
    raise :class:`ModelError`. DisPFL flattens into exactly 512 features, which
    works for sides of 32 to 63 pixels; here the linear layer takes
    ``512 * (H // 32) * (W // 32)`` features, the same at CIFAR size.

    Why GroupNorm: DFedSAM App. B.1 says only that "the batch-norm layers are
    replaced by group-norm layers due to a detrimental effect of batch-norm".
    The effect, studied for decentralised learning by Hsieh et al. ("The
    Non-IID Data Quagmire of Decentralized Machine Learning", ICML 2020, who
    propose GroupNorm as the fix): BatchNorm normalises with the statistics of
    the local mini-batch and keeps running means and variances as buffers,
    not parameters. With non-IID clients those statistics differ from client
    to client, and gossip averages only the parameters, so the averaged
    weights meet normalisation statistics that fit no one's data. GroupNorm
    (Wu & He, 2018) normalises each sample over groups of channels, with no
    batch dependence and no running state: a client's model is its parameter
    vector, which is also what lets the engine hold all clients in one
    ``(m, d)`` tensor and evaluate them with ``functional_call``/``vmap``.
    32 groups is Wu & He's default and DisPFL's choice; every width here
    (64 to 512) is a multiple of 32.
    """
    c, h, w = _image_shape("vgg11-gn", input_shape, 32)
    layers: list[nn.Module] = []
    in_ch = c
    for v in VGG11_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers += [nn.Conv2d(in_ch, v, kernel_size=3, padding=1), _gn(v), nn.ReLU()]
            in_ch = v
    model = nn.Sequential(
        OrderedDict(
            features=nn.Sequential(*layers),
            flatten=nn.Flatten(),
            classifier=nn.Sequential(nn.Linear(512 * (h // 32) * (w // 32), num_classes)),
        )
    )
    for mod in model.modules():  # DisPFL's _initialize_weights
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.GroupNorm):
            nn.init.ones_(mod.weight)
            nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.Linear):
            nn.init.normal_(mod.weight, 0.0, 0.01)
            nn.init.zeros_(mod.bias)
    return model


class BasicBlockGN(nn.Module):
    """ResNet basic block: two 3x3 convs (no bias), each followed by GroupNorm, plus the shortcut.

    The shortcut is the identity, or a 1x1 conv (no bias) + GroupNorm when the
    stride or the width changes. Attribute names follow DisPFL (``bn1``,
    ``bn2``, ``shortcut``), although the layers are GroupNorm.
    """

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = _gn(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = _gn(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                _gn(planes),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))  # not in place (DisPFL: out += ...)


class ResNet18GN(nn.Module):
    """ResNet-18 with a CIFAR stem and GroupNorm; see :func:`resnet18_gn`."""

    def __init__(self, in_channels: int, num_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = _gn(64)
        in_planes = 64
        for i, (planes, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
            blocks = [BasicBlockGN(in_planes, planes, stride), BasicBlockGN(planes, planes, 1)]
            setattr(self, f"layer{i}", nn.Sequential(*blocks))
            in_planes = planes
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def resnet18_gn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """ResNet-18 with GroupNorm, the CIFAR-100 backbone of DFedSAM (Shi et al., ICML 2023, App. B.1).

    Follows ``customized_resnet18`` in ``fedml_api/model/cv/resnet.py`` of
    rong-dai/DisPFL, checked there:

    * CIFAR stem: one ``Conv2d(3, 64, 3, stride=1, padding=1, bias=False)``,
      norm, ReLU, and *no* max-pool (the ImageNet stem is a 7x7 stride-2 conv
      followed by a max-pool);
    * four stages of two basic blocks, widths 64/128/256/512, strides 1/2/2/2;
      all convs without bias; 1x1 conv + norm shortcuts where the shape changes;
    * every BatchNorm replaced by ``GroupNorm(32 groups)`` (DisPFL builds the
      BatchNorm model and swaps the 20 norm layers, stem included);
    * average pooling, then ``Linear(512, C)``; PyTorch's default initialisation.

    DisPFL pools with ``F.avg_pool2d(out, 4)``, which on a 32x32 input is the
    mean over the final 4x4 map; here the pooling is global
    (``adaptive_avg_pool2d(out, 1)``, as in DisPFL's ``tiny_resnet18`` for
    64x64 Tiny-ImageNet), identical at CIFAR size and defined for any size.
    So the network takes sides of 8 pixels or more (the three stride-2
    stages bring 8 down to 1); smaller inputs raise :class:`ModelError`. On
    3x32x32 inputs it has 11,173,962 parameters for 10 classes and 11,220,132
    for 100; no paper states it, the layer-by-layer sum is checked in
    ``tests/test_models.py``. Residual additions are not in place, so the
    module runs under ``torch.func.functional_call`` and ``vmap``.

    Why GroupNorm, and why 32 groups: see :func:`vgg11_gn`.
    """
    c, _, _ = _image_shape("resnet18-gn", input_shape, 8)
    return ResNet18GN(c, num_classes)


MODELS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "2nn": mlp_2nn,
    "cnn-mnist": cnn_mnist,
    "cnn-cifar": cnn_cifar,
    "vgg11-gn": vgg11_gn,
    "resnet18-gn": resnet18_gn,
    "linear": linear,
}
MODEL_HELP: dict[str, str] = {
    "2nn": "MLP with two hidden layers of 200 (McMahan et al. 2017; DFedAvgM §6)",
    "cnn-mnist": "CNN conv32-conv64 (5x5, max-pool) + FC 512 (McMahan et al. 2017; DFedAvgM §6)",
    "cnn-cifar": "CNN conv64-conv64 (5x5, max-pool) + FC 384-192, no normalisation "
    "(FedSAM/FedASAM, FedGF; 797,962 params on CIFAR-10)",
    "vgg11-gn": "VGG-11 (cfg A) with GroupNorm(32), Linear(512, C); needs H, W >= 32 "
    "(DFedSAM App. B.1, CIFAR-10; DisPFL code)",
    "resnet18-gn": "ResNet-18, CIFAR stem, GroupNorm(32); H, W >= 8 (DFedSAM App. B.1, CIFAR-100; DisPFL code)",
    "linear": "softmax regression (convex; used by theory/ to compare runs with the bounds)",
}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Instantiate a model by name.

    Unknown names, and input shapes the model cannot take, raise :class:`ModelError`.
    """
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")
    return MODELS[name](tuple(input_shape), num_classes)
