"""The model zoo: parameter counts, structure, output shapes, input checks, and StackedModel.

Parameter counts are compared with the number a paper states where one does
(DFedAvgM §6 for the MNIST models). For the CIFAR backbones no paper or
reference code states a count, so the expected number is computed here
layer by layer from the architecture (weights + biases of each conv and
linear layer, 2C affine parameters per GroupNorm), independently of the
modules, and also written out as a literal.

The StackedModel checks load the same float64 parameters into ordinary
``nn.Module`` copies, one per client, and compare logits and gradients with
the engine's forward strategies (m = 2 clients, batch 2).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dfl_core.models import MODEL_HELP, MODELS, ModelError, build_model
from dfl_core.stacked import StackedModel


# ------------------------------------------------------------ layer arithmetic
def conv(cin: int, cout: int, k: int, bias: bool = True) -> int:
    return cin * cout * k * k + (cout if bias else 0)


def linear(fin: int, fout: int) -> int:
    return fin * fout + fout


def gn(c: int) -> int:
    return 2 * c  # affine weight and bias


def count_cnn_cifar(num_classes: int, c: int = 3, side: int = 5) -> int:
    return (
        conv(c, 64, 5) + conv(64, 64, 5) + linear(64 * side * side, 384) + linear(384, 192) + linear(192, num_classes)
    )


def count_vgg11_gn(num_classes: int) -> int:
    widths = [64, 128, 256, 256, 512, 512, 512, 512]  # cfg A without the pools
    total, cin = 0, 3
    for w in widths:
        total += conv(cin, w, 3, bias=True) + gn(w)
        cin = w
    return total + linear(512, num_classes)


def count_resnet18_gn(num_classes: int) -> int:
    total = conv(3, 64, 3, bias=False) + gn(64)  # CIFAR stem
    cin = 64
    for planes, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for s in (stride, 1):
            total += conv(cin, planes, 3, bias=False) + gn(planes)
            total += conv(planes, planes, 3, bias=False) + gn(planes)
            if s != 1 or cin != planes:
                total += conv(cin, planes, 1, bias=False) + gn(planes)
            cin = planes
    return total + linear(512, num_classes)


def numel(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------ parameter counts
def test_mnist_models_match_dfedavgm_counts():
    # DFedAvgM §6 states both numbers for MNIST (28x28, 10 classes).
    assert numel(build_model("2nn", (1, 28, 28), 10)) == 199_210
    assert numel(build_model("cnn-mnist", (1, 28, 28), 10)) == 1_663_370


@pytest.mark.parametrize(
    "name, formula, literal10, literal100",
    [
        # No paper states these; the literals are the formulas' values. The two deep
        # ones equal the often-quoted counts of the BatchNorm CIFAR VGG-11 and
        # ResNet-18 (e.g. kuangliu/pytorch-cifar), since BatchNorm and GroupNorm both
        # have 2C affine parameters.
        ("cnn-cifar", count_cnn_cifar, 797_962, 815_332),
        ("vgg11-gn", count_vgg11_gn, 9_231_114, 9_277_284),
        ("resnet18-gn", count_resnet18_gn, 11_173_962, 11_220_132),
    ],
)
def test_cifar_model_counts(name, formula, literal10, literal100):
    assert formula(10) == literal10 and formula(100) == literal100
    assert numel(build_model(name, (3, 32, 32), 10)) == literal10
    assert numel(build_model(name, (3, 32, 32), 100)) == literal100


# ------------------------------------------------------------------- structure
def test_cnn_cifar_matches_reference_layers():
    net = build_model("cnn-cifar", (3, 32, 32), 10)
    assert isinstance(net, nn.Sequential)
    convs = [m for m in net if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (3, 64, (5, 5), (0, 0)),
        (64, 64, (5, 5), (0, 0)),
    ]
    pools = [m for m in net if isinstance(m, nn.MaxPool2d)]
    assert [(p.kernel_size, p.stride) for p in pools] == [(2, 2), (2, 2)]
    lins = [m for m in net if isinstance(m, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in lins] == [(1600, 384), (384, 192), (192, 10)]
    assert StackedModel(lambda: net, strategy="batched").strategy == "batched"


def test_gn_backbones_have_groupnorm_32_and_no_state():
    vgg = build_model("vgg11-gn", (3, 32, 32), 10)
    res = build_model("resnet18-gn", (3, 32, 32), 10)
    for net, n_norm in [(vgg, 8), (res, 20)]:  # VGG: one per conv; ResNet: 17 + 3 shortcuts
        norms = [m for m in net.modules() if isinstance(m, nn.GroupNorm)]
        assert len(norms) == n_norm and all(m.num_groups == 32 for m in norms)
        assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules())
        assert list(net.buffers()) == []
    assert all(m.bias is not None for m in vgg.modules() if isinstance(m, nn.Conv2d))
    assert all(m.bias is None for m in res.modules() if isinstance(m, nn.Conv2d))
    assert [lin.in_features for lin in vgg.modules() if isinstance(lin, nn.Linear)] == [512]
    assert not any(isinstance(m, nn.MaxPool2d) for m in res.modules())
    assert (res.conv1.kernel_size, res.conv1.stride) == ((3, 3), (1, 1))


def test_vgg_init_follows_dispfl():
    torch.manual_seed(0)
    vgg = build_model("vgg11-gn", (3, 32, 32), 10)
    lin = vgg.classifier[0]
    assert torch.all(lin.bias == 0) and abs(lin.weight.std().item() - 0.01) < 0.002
    conv_last = [m for m in vgg.modules() if isinstance(m, nn.Conv2d)][-1]
    fan_out = 512 * 3 * 3  # Kaiming normal, fan_out: std = sqrt(2 / fan_out)
    assert abs(conv_last.weight.std().item() - (2 / fan_out) ** 0.5) < 0.002
    assert torch.all(conv_last.bias == 0)


def test_registry_and_help_agree():
    assert set(MODELS) == set(MODEL_HELP)
    assert {"cnn-cifar", "vgg11-gn", "resnet18-gn"} <= set(MODELS)


# -------------------------------------------------------------- output shapes
@pytest.mark.parametrize(
    "name, shape",
    [
        ("2nn", (1, 28, 28)),
        ("cnn-mnist", (1, 28, 28)),
        ("cnn-cifar", (3, 32, 32)),
        ("cnn-cifar", (1, 28, 28)),
        ("cnn-cifar", (3, 16, 16)),
        ("vgg11-gn", (3, 32, 32)),
        ("vgg11-gn", (3, 64, 40)),
        ("resnet18-gn", (3, 32, 32)),
        ("resnet18-gn", (1, 28, 28)),
        ("resnet18-gn", (1, 8, 8)),
    ],
)
def test_output_shape(name, shape):
    net = build_model(name, shape, 7)
    with torch.no_grad():
        out = net(torch.randn(3, *shape))
    assert out.shape == (3, 7)


# -------------------------------------------------------------- input checks
def test_unknown_model_name():
    with pytest.raises(ModelError, match="unknown model 'resnet50'"):
        build_model("resnet50", (3, 32, 32), 10)


@pytest.mark.parametrize(
    "name, shape, message",
    [
        ("cnn-cifar", (3, 15, 32), "at least 16x16"),
        ("cnn-cifar", (3072,), r"image input \(C, H, W\)"),
        ("vgg11-gn", (3, 28, 28), "at least 32x32"),
        ("vgg11-gn", (3, 32, 31), "at least 32x32"),
        ("vgg11-gn", (3, 32), r"image input \(C, H, W\)"),
        ("resnet18-gn", (3, 7, 32), "at least 8x8"),
        ("resnet18-gn", (0, 32, 32), r"image input \(C, H, W\)"),
        ("cnn-mnist", (784,), r"image input \(C, H, W\)"),
    ],
)
def test_wrong_input_shape(name, shape, message):
    with pytest.raises(ModelError, match=message):
        build_model(name, shape, 10)


# ------------------------------------------------- StackedModel vs plain modules
CASES = [
    ("2nn", (1, 28, 28), ("batched", "vmap", "loop")),
    ("cnn-mnist", (1, 28, 28), ("batched", "vmap", "loop")),
    ("cnn-cifar", (3, 32, 32), ("batched", "vmap", "loop")),
    ("vgg11-gn", (3, 32, 32), ("vmap", "loop")),
    ("resnet18-gn", (3, 32, 32), ("vmap", "loop")),
]


@pytest.mark.parametrize("name, shape, strategy", [(n, s, st) for n, s, sts in CASES for st in sts])
def test_stacked_equals_per_client_modules(name, shape, strategy):
    m, batch, classes = 2, 2, 10
    sm = StackedModel(lambda: build_model(name, shape, classes), strategy=strategy)
    x0 = sm.init_params(m, seed=1, same_init=False, dtype=torch.float64)
    assert not torch.equal(x0[0], x0[1])
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(m, batch, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(classes, (m, batch), generator=gen)

    leaves = sm.leaves(x0)
    logits = sm.forward(leaves, x)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
    grad = sm.gather_grads(torch.autograd.grad(loss, list(leaves.values())), x0)

    for i in range(m):  # the same parameters in an ordinary module
        net = build_model(name, shape, classes).to(torch.float64)
        views = sm.unflatten(x0[i])
        with torch.no_grad():
            for pname, p in net.named_parameters():
                p.copy_(views[pname])
        out = net(x[i])
        ref_grad = torch.autograd.grad(F.cross_entropy(out, y[i], reduction="sum"), list(net.parameters()))
        torch.testing.assert_close(logits[i].detach(), out.detach(), rtol=0, atol=1e-10)
        torch.testing.assert_close(grad[i], torch.cat([g.reshape(-1) for g in ref_grad]), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["vgg11-gn", "resnet18-gn"])
def test_batched_strategy_runs_gn_backbones_through_the_stacked_twin(name):
    """Issue 32: "batched" runs the GroupNorm backbones (tests/test_mixed_precision.py checks it against vmap);
    "auto" still picks vmap for them."""
    assert StackedModel(lambda: build_model(name, (3, 32, 32), 10), strategy="batched").strategy == "batched"
    assert StackedModel(lambda: build_model(name, (3, 32, 32), 10)).strategy == "vmap"


@pytest.mark.parametrize("model", ["2nn", "linear"])
def test_hand_written_mlp_gradient_equals_autograd(model):
    """The "mlp" strategy's forward and backward by hand give autograd's losses and gradients (float64),
    with padded samples (weight 0) ignored."""
    from functools import partial

    from dfl_core.models import build_model
    from dfl_core.stacked import StackedModel

    factory = partial(build_model, model, (1, 28, 28), 10)
    by_hand, reference = StackedModel(factory, "mlp"), StackedModel(factory, "batched")
    gen = torch.Generator().manual_seed(0)
    p = by_hand.init_params(4, 0, same_init=False, dtype=torch.float64)
    x = torch.randn(4, 6, 1, 28, 28, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (4, 6), generator=gen)
    w = torch.ones(4, 6, dtype=torch.float64)
    w[1, 3:] = 0  # client 1 has 3 samples, then padding
    g, loss = by_hand.loss_and_grad(p, x, y, w)
    g_ref, loss_ref = reference.loss_and_grad(p, x, y, w)
    assert by_hand.strategy == "mlp" and float(g.abs().max()) > 1e-3
    assert float((g - g_ref).abs().max()) < 1e-12 and float((loss - loss_ref).abs().max()) < 1e-12
    x_changed = x.clone()
    x_changed[1, 3:] += 1.0  # padding never matters
    assert torch.allclose(by_hand.loss_and_grad(p, x_changed, y, w)[0], g, atol=1e-14, rtol=0)


def test_mlp_strategy_refuses_other_models():
    from functools import partial

    from dfl_core.models import build_model
    from dfl_core.stacked import StackedModel, choose_strategy

    cnn = partial(build_model, "cnn-mnist", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="strategy 'mlp' needs an nn.Sequential of Flatten, then Linear"):
        StackedModel(cnn, "mlp")
    assert choose_strategy(build_model("2nn", (1, 28, 28), 10), torch.device("cpu")) == "mlp"
    assert choose_strategy(cnn(), torch.device("cpu")) == "loop"


POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=(2, 3), stride=(2, 1)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kwargs", POOLS)
def test_channels_last_pool_equals_maxpool_bit_for_bit(kwargs, dtype):
    from dfl_core.stacked import ChannelsLastMaxPool2d

    gen = torch.Generator().manual_seed(0)
    # after a ReLU most windows tie at 0, and halves make ties among positive values too
    x = torch.relu((torch.randn(4, 6, 11, 13, generator=gen, dtype=dtype) * 2).round() / 2)
    upstream = torch.randn_like(nn.MaxPool2d(**kwargs)(x))
    outputs = []
    for pool in (nn.MaxPool2d(**kwargs), ChannelsLastMaxPool2d(**kwargs)):
        xr = x.clone().requires_grad_(True)
        y = pool(xr)
        (g,) = torch.autograd.grad(y, xr, upstream, create_graph=True)
        (gg,) = torch.autograd.grad(g, xr, torch.ones_like(g), allow_unused=True, materialize_grads=True)
        with torch.no_grad():
            outputs.append((y.detach(), g.detach(), gg, pool(x)))
        assert y.is_contiguous() and g.is_contiguous()
    assert float(outputs[0][1].abs().sum()) > 0
    for plain, fast in zip(*outputs):
        assert torch.equal(plain, fast)


def test_single_model_pools_channels_last_on_cpu_only_and_shares_the_layers():
    from dfl_core.stacked import ChannelsLastMaxPool2d

    sm = StackedModel(lambda: build_model("cnn-mnist", (1, 28, 28), 10))
    pools = [c for c in sm.single if isinstance(c, nn.MaxPool2d)]
    assert len(pools) == 2 and all(type(c) is ChannelsLastMaxPool2d for c in pools)
    assert [n for n, _ in sm.single.named_parameters()] == sm.names
    assert all(a is b for a, b in zip(sm.single, sm.template) if not isinstance(a, nn.MaxPool2d))
    mlp = StackedModel(lambda: build_model("2nn", (1, 28, 28), 10))
    assert mlp.single is mlp.template  # nothing to replace
    p = sm.init_params(1, seed=0, dtype=torch.float64)[0]
    x = torch.randn(5, 1, 28, 28, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    plain = torch.func.functional_call(sm.template, sm.unflatten(p), (x,))
    assert torch.equal(sm.forward_one(p, x), plain)
