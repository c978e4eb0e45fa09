"""m clients' copies of one model, with all parameters in one ``(m, d)`` tensor.

Keeping every client's parameters as one row of a flat matrix makes the rest of
the engine short: a local rule is arithmetic on ``(m, d)`` tensors, SAM's
per-client norm is one reduction over ``dim=1``, gossip is ``W @ X`` and the
consensus distance is one line. The model itself is evaluated functionally on
views into that matrix, so autograd returns all clients' gradients as one
``(m, d)`` tensor.

:class:`StackedModel` holds the parameter layout (names, shapes and offsets of the layers in a row) and one
:class:`ForwardStrategy`, the way it computes all clients' logits, losses and gradients at once, chosen by
:func:`forward_strategy` (``strategy``):

* ``"mlp"`` (:class:`MLPStrategy`): for ``nn.Sequential`` stacks of ``Flatten``/``Linear``/``ReLU``
  (the 2NN, softmax regression), the forward *and* backward pass written out by hand with batched matrix
  products, each gradient written straight into its slice of the ``(m, d)`` gradient (no autograd graph, no
  copies); ``"batched"`` computes the same with autograd, and the tests check the two agree;
* ``"batched"`` (:class:`BatchedStrategy`): every ``Linear`` one ``baddbmm`` over clients and every ``Conv2d``
  one grouped convolution (``groups=m``), differentiated by autograd; no Python loop over clients, so the
  number of kernels does not grow with m. A flat ``nn.Sequential`` runs through an interpreter; an image model
  that is not one (VGG-11 and ResNet-18 with GroupNorm) through a *stacked twin* of the module
  (:func:`_stacked_twin`): its own ``forward`` with every Conv2d, GroupNorm and Linear replaced by one call for
  all clients, GroupNorm as one fused kernel over all clients' groups;
* ``"vmap"`` (:class:`VmapStrategy`): ``torch.func.vmap`` over ``functional_call``; works for any module;
* ``"loop"`` (:class:`LoopStrategy`): a Python loop over clients calling ``functional_call``.

``"auto"`` (:func:`choose_strategy`) picks ``"mlp"`` for such stacks; for another flat Sequential of the layers
the interpreter runs, ``"batched"``, except ``"loop"`` on the CPU when it has convolutions (there a loop of
ordinary convolutions is preferred to one grouped convolution over many clients; see ``benchmarks/``); ``"vmap"``
for every other module. :func:`forward_strategy` then moves a convolutional model the batched path can run (a
flat Sequential or a stacked twin) to ``"batched"`` from ``"vmap"`` on CUDA and under autocast, and from any
strategy with the batched path's options (``channels_last``, ``compile``).

On CPU a single model (the loop's clients, :meth:`StackedModel.forward_one`) pools
through :class:`ChannelsLastMaxPool2d`: the same values and gradients, bit for bit,
as PyTorch's NCHW pooling kernel, through PyTorch's channels-last kernel (see ``benchmarks/``).

Four speed options for the GPU, all off by default (off, nothing of the above changes):

* ``autocast_dtype``: mixed precision in local training (:meth:`StackedModel.loss_and_grad`):
  the forward pass runs under ``torch.autocast`` in bfloat16 or float16 (matrix products and
  convolutions in the low precision, the loss in float32); parameters, the returned
  ``(n, d)`` gradients and everything the engine does with them (SAM's norm, the update,
  gossip) stay in float32. float16 scales the loss by :data:`FLOAT16_LOSS_SCALE` (a static
  power of two, so unscaling is exact) and raises :class:`MixedPrecisionOverflow` when a
  gradient overflows; evaluation (:meth:`StackedModel.forward`) stays in float32.
* ``channels_last``: on the ``"batched"`` strategy, the convolutions' inputs and weights in
  ``torch.channels_last`` memory format (what tensor cores prefer); the same values up to
  float rounding.
* ``compile``: local training's forward pass on the ``"batched"`` strategy through
  ``torch.compile``; autograd differentiates the compiled graph. The same function up to float
  rounding (the fused kernels round in other places); evaluation stays eager.
* ``cudnn_benchmark``: cuDNN's autotuner on during local training (grouped convolutions are where cuDNN's
  default choice of algorithm is worst, ``benchmarks/TRIED.md``).
"""

from __future__ import annotations

import abc
import contextlib
import copy
from collections import OrderedDict
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

__all__ = [
    "StackedModel",
    "STRATEGIES",
    "choose_strategy",
    "forward_strategy",
    "ForwardStrategy",
    "MLPStrategy",
    "BatchedStrategy",
    "VmapStrategy",
    "LoopStrategy",
    "STRATEGY_CLASSES",
    "ChannelsLastMaxPool2d",
    "AUTOCAST_DTYPES",
    "FLOAT16_LOSS_SCALE",
    "MixedPrecisionOverflow",
]

STRATEGIES = ("mlp", "batched", "vmap", "loop")
_BATCHED_LAYERS = (nn.Flatten, nn.Linear, nn.ReLU, nn.Conv2d, nn.MaxPool2d)
_MLP_LAYERS = (nn.Flatten, nn.Linear, nn.ReLU)
#: Leaf layers the stacked twin (``"batched"`` on a module that is not one flat Sequential) can run.
_TWIN_LAYERS = (
    nn.Conv2d,
    nn.GroupNorm,
    nn.Linear,
    nn.ReLU,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.Flatten,
    nn.Identity,
)

#: ``Config.precision`` -> the dtype local training's forward pass autocasts to (None: no autocast).
AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: The static loss scale of float16 mixed precision: 2^10. A power of two, so scaling and unscaling the
#: float32 gradients is exact; large enough to keep a mean loss's small gradients out of float16's
#: subnormal range (below 6e-5), small enough that a gradient needs to exceed 64 to overflow (65504 / 2^10).
FLOAT16_LOSS_SCALE = 2.0**10


class MixedPrecisionOverflow(FloatingPointError):
    """A float16 gradient overflowed under the static loss scale (:data:`FLOAT16_LOSS_SCALE`)."""


def _is_sequential_of(module: nn.Module, layers: tuple[type, ...]) -> bool:
    """``module`` is one flat ``nn.Sequential`` whose children are all ``layers``."""
    return isinstance(module, nn.Sequential) and all(isinstance(layer, layers) for layer in module)


def _is_mlp(module: nn.Module) -> bool:
    """``Flatten``, then ``Linear`` layers each optionally followed by one ``ReLU``."""
    if not _is_sequential_of(module, _MLP_LAYERS):
        return False
    kinds = [type(layer) for layer in module]
    return (
        kinds.count(nn.Flatten) <= 1
        and (nn.Flatten not in kinds or kinds[0] is nn.Flatten)
        and nn.Linear in kinds
        and all(a is nn.Linear for a, b in zip(kinds, kinds[1:]) if b is nn.ReLU)
    )


def choose_strategy(module: nn.Module, device: torch.device) -> str:
    """The strategy ``"auto"`` starts from (:func:`forward_strategy` may move it to ``"batched"``).

    ``"mlp"`` for a stack of linear layers (its hand-written backward needs no autograd graph and batches every
    layer's products over the clients; see ``benchmarks/``); for another flat Sequential of
    :data:`_BATCHED_LAYERS`, ``"loop"`` on the CPU if it has convolutions (there a loop of ordinary convolutions
    is preferred to one grouped convolution over many clients; see ``benchmarks/``), else
    ``"batched"`` (the number of kernel launches does not grow with m); ``"vmap"`` for any other module.
    """
    if _is_mlp(module):
        return "mlp"
    if not _is_sequential_of(module, _BATCHED_LAYERS):
        return "vmap"
    has_conv = any(isinstance(layer, nn.Conv2d) for layer in module.modules())
    if has_conv and device.type == "cpu":
        return "loop"
    return "batched"


def _pair(v) -> list[int]:
    return [v, v] if isinstance(v, int) else list(v)


class _MaxPool2dChannelsLast(torch.autograd.Function):
    """Max pooling of an NCHW tensor by the channels-last kernel; output, indices and gradient in NCHW.

    On CPU this takes PyTorch's channels-last kernel, both layout conversions included, rather than its NCHW
    kernel, for speed (see ``benchmarks/RESULTS.md``). Both take the first maximum of a window in row-major
    order, so the indices are the same, and the backward pass is PyTorch's own with those indices.
    """

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode):
        y, indices = torch.ops.aten.max_pool2d_with_indices(
            x.contiguous(memory_format=torch.channels_last), kernel_size, stride, padding, dilation, ceil_mode
        )
        indices = indices.contiguous()
        ctx.save_for_backward(x, indices)
        ctx.pool = (kernel_size, stride, padding, dilation, ceil_mode)
        return y.contiguous()

    @staticmethod
    def backward(ctx, grad_y):
        x, indices = ctx.saved_tensors
        grad_x = torch.ops.aten.max_pool2d_with_indices_backward(grad_y, x, *ctx.pool, indices)
        return grad_x, None, None, None, None, None


class ChannelsLastMaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` computed by the channels-last kernel (see :class:`_MaxPool2dChannelsLast`)."""

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or self.return_indices:
            return super().forward(x)
        pool = (
            _pair(self.kernel_size),
            _pair(self.stride if self.stride is not None else self.kernel_size),
            _pair(self.padding),
            _pair(self.dilation),
            self.ceil_mode,
        )
        if torch.is_grad_enabled() and x.requires_grad:
            return _MaxPool2dChannelsLast.apply(x, *pool)
        return F.max_pool2d(x.contiguous(memory_format=torch.channels_last), *pool).contiguous()


def _with_channels_last_pools(module: nn.Module) -> nn.Module:
    """``module`` with each ``nn.MaxPool2d`` child of a Sequential replaced; other children are shared, not copied."""
    if not isinstance(module, nn.Sequential) or not any(type(c) is nn.MaxPool2d for c in module):
        return module
    children = [
        (
            name,
            ChannelsLastMaxPool2d(c.kernel_size, c.stride, c.padding, c.dilation, c.return_indices, c.ceil_mode)
            if type(c) is nn.MaxPool2d
            else c,
        )
        for name, c in module.named_children()
    ]
    return nn.Sequential(OrderedDict(children)).train(module.training)


def _twin_supported(module: nn.Module) -> bool:
    """Can :func:`_stacked_twin` run ``module``: every leaf one of :data:`_TWIN_LAYERS`, convolutions zero-padded."""
    leaves = [
        mod
        for mod in module.modules()
        if not list(mod.children()) and type(mod) not in (nn.Sequential, nn.ModuleList, nn.ModuleDict)
    ]
    return (
        bool(leaves)
        and all(isinstance(mod, _TWIN_LAYERS) for mod in leaves)
        and all(mod.padding_mode == "zeros" for mod in leaves if isinstance(mod, nn.Conv2d))
        and all(mod.start_dim == 1 and mod.end_dim == -1 for mod in leaves if isinstance(mod, nn.Flatten))
    )


class _StackedConv2d(nn.Conv2d):
    """n clients' convolutions as one grouped convolution on ``(B, n·C, H, W)``: client i owns channels
    ``[i·C, (i+1)·C)`` of the input and output; ``weight`` is ``(n, out, in/groups, k, k)``."""

    channels_last = False

    def forward(self, h: Tensor) -> Tensor:
        n = self.weight.shape[0]
        w = self.weight.reshape(-1, *self.weight.shape[2:])
        if self.channels_last:
            w = w.contiguous(memory_format=torch.channels_last)
        b = None if self.bias is None else self.bias.reshape(-1)
        return F.conv2d(h, w, b, self.stride, self.padding, self.dilation, self.groups * n)


class _StackedGroupNorm(nn.GroupNorm):
    """n clients' GroupNorms as one: ``num_groups · n`` groups over ``(B, n·C, H, W)`` (a client's groups never
    cross into another's channels), affine parameters ``(n, C)`` flattened to ``n·C``: one fused kernel for all
    clients, where ``vmap`` normalises and then applies the per-client affine map in separate passes.

    Under autocast PyTorch runs ``group_norm`` in float32 (its CUDA policy), which would cast every low-precision
    activation up and the next convolution's input back down; here a bfloat16/float16 input is normalised in its
    own dtype (PyTorch's kernel accumulates the statistics in float32) with the affine parameters cast to it.
    """

    def forward(self, h: Tensor) -> Tensor:
        n = h.shape[1] // self.num_channels
        w = None if self.weight is None else self.weight.reshape(-1)
        b = None if self.bias is None else self.bias.reshape(-1)
        if h.dtype in (torch.bfloat16, torch.float16) and torch.is_autocast_enabled(h.device.type):
            with torch.autocast(h.device.type, enabled=False):
                return F.group_norm(
                    h,
                    self.num_groups * n,
                    None if w is None else w.to(h.dtype),
                    None if b is None else b.to(h.dtype),
                    self.eps,
                )
        return F.group_norm(h, self.num_groups * n, w, b, self.eps)


class _StackedLinear(nn.Linear):
    """n clients' linear layers as one batched product: ``(B, n·in)`` (image features, flattened) or
    ``(n, B, in)`` in, ``(n, B, out)`` out; ``weight`` is ``(n, out, in)``."""

    def forward(self, h: Tensor) -> Tensor:
        n = self.weight.shape[0]
        if h.dim() == 2:  # (B, n·in): client i's features are a block
            h = h.reshape(h.shape[0], n, -1).transpose(0, 1)
        w = self.weight.transpose(1, 2)
        return torch.bmm(h, w) if self.bias is None else torch.baddbmm(self.bias.unsqueeze(1), h, w)


_TWIN_CLASSES = {nn.Conv2d: _StackedConv2d, nn.GroupNorm: _StackedGroupNorm, nn.Linear: _StackedLinear}


def _stacked_twin(module: nn.Module, channels_last: bool) -> nn.Module:
    """A copy of ``module`` whose Conv2d, GroupNorm and Linear layers run n clients at once.

    Called through ``functional_call`` with ``(n, *shape)`` parameters on an input of layout
    ``(B, n·C, H, W)``; everything else in the module's ``forward`` (ReLU, pooling, residual sums,
    ``flatten(1)``) acts per channel or per element, so it runs unchanged on the stacked layout. The output
    must come from a Linear layer, ``(n, B, C)`` (checked at every call). The copy's own parameter values are
    never used.
    """
    twin = copy.deepcopy(module)
    for mod in twin.modules():
        cls = _TWIN_CLASSES.get(type(mod))
        if cls is not None:
            mod.__class__ = cls
            if cls is _StackedConv2d:
                mod.channels_last = channels_last
    return twin


# ------------------------------------------------------------------------------------------- forward strategies
class _ClientLeaves(dict):
    """:meth:`StackedModel.leaves` of the ``loop`` strategy: ``{(client, layer name): leaf}``, client-major."""


class ForwardStrategy(abc.ABC):
    """One way to compute every client's logits at once; local training's losses and gradients follow from them.

    A strategy gets the :class:`StackedModel` whose parameter layout it reads. :meth:`forward` maps the parameter
    views ``{name: (n, *shape)}`` and inputs ``(n, B, *input_shape)`` to logits ``(n, B, C)``;
    :meth:`loss_and_grad` differentiates :attr:`train_forward` (the same function, compiled where ``compile`` is
    on) by autograd. :class:`MLPStrategy` replaces the autograd pass by a hand-written one.
    """

    name = ""

    def __init__(self, model: StackedModel):
        self.model = model
        self.train_forward: Callable[[dict, Tensor], Tensor] = self.forward  # local training's forward pass

    def leaves(self, flat: Tensor) -> dict:
        """Per-layer views ``{name: (n, *shape)}`` of ``flat`` (``(n, d)``, or ``(d,)``), autograd's leaves."""
        return {n: v.requires_grad_(True) for n, v in self.model.unflatten(flat.detach()).items()}

    @abc.abstractmethod
    def forward(self, params: dict, x: Tensor) -> Tensor:
        """Every client's logits ``(n, B, C)``: each strategy computes them its own way."""

    def loss_and_grad(
        self, p: Tensor, inputs: Tensor, labels: Tensor, weights: Tensor, input_grad: bool, loss_scale: float | None
    ) -> tuple[Tensor, ...]:
        """:meth:`StackedModel.loss_and_grad` by autograd; under autocast the logits are cast to float32 before the
        loss, and ``loss_scale`` (float16's) multiplies the summed loss before the backward pass."""
        model = self.model
        with torch.enable_grad():
            leaves = model.leaves(p)
            x = inputs.detach().requires_grad_(input_grad)
            logits = self.train_forward(leaves, x)  # (n, B, C)
            if model.autocast_dtype is not None:
                logits = logits.float()  # the loss in float32
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
            losses = (ce.view_as(weights) * weights).sum(1) / weights.sum(1)
            total = losses.sum() if loss_scale is None else losses.sum() * loss_scale
            grads = torch.autograd.grad(total, [*leaves.values(), *([x] if input_grad else [])])
        g = model.gather_grads(grads[:-1] if input_grad else grads, p)
        return (g, losses.detach(), grads[-1]) if input_grad else (g, losses.detach())


class BatchedStrategy(ForwardStrategy):
    """``"batched"``: every ``Linear`` one ``baddbmm`` over clients and every ``Conv2d`` one grouped convolution
    (``groups=n``): a flat ``nn.Sequential`` through an interpreter (:meth:`_sequential`), any other module whose
    layers are all :data:`_TWIN_LAYERS` through its stacked twin (:func:`_stacked_twin`). Image inputs run as
    ``(B, n·C, H, W)``: client i owns channels ``[i·C, (i+1)·C)``. ``channels_last``: the convolutions' inputs and
    weights in channels-last layout; ``compile``: :attr:`train_forward` through ``torch.compile``.
    """

    name = "batched"

    def __init__(self, model: StackedModel, channels_last: bool = False, compile: bool | str = False):
        super().__init__(model)
        self.channels_last = channels_last
        flat = _is_sequential_of(model.template, _BATCHED_LAYERS)
        self.twin = None if flat else _stacked_twin(model.template, channels_last)
        if compile:
            # Evaluation stays eager: its batches vary in size, and every new shape would compile again.
            # dynamic=False: one graph per client-chunk shape (a run has at most two: the full chunks and the last).
            self.train_forward = torch.compile(
                self.forward, dynamic=False, backend="inductor" if compile is True else compile
            )

    def forward(self, params: dict, x: Tensor) -> Tensor:
        return self._sequential(params, x) if self.twin is None else self._through_twin(params, x)

    def _stacked_images(self, x: Tensor) -> Tensor:
        """``(n, B, C, H, W)`` as ``(B, n·C, H, W)``, channels-last if asked."""
        n, batch = x.shape[0], x.shape[1]
        h = x.transpose(0, 1).reshape(batch, n * x.shape[2], *x.shape[3:])
        return h.contiguous(memory_format=torch.channels_last) if self.channels_last else h

    def _sequential(self, params: dict, x: Tensor) -> Tensor:
        """The interpreter of a flat ``nn.Sequential`` of :data:`_BATCHED_LAYERS`."""
        m, batch = x.shape[0], x.shape[1]
        image_layout = x.dim() == 5
        h = self._stacked_images(x) if image_layout else x
        for name, layer in self.model.template.named_children():
            if isinstance(layer, nn.Conv2d):
                w = params[f"{name}.weight"]  # (m, out, in, k, k)
                b = params.get(f"{name}.bias")  # (m, out)
                w = w.reshape(-1, *w.shape[2:])
                if self.channels_last:
                    w = w.contiguous(memory_format=torch.channels_last)
                h = F.conv2d(
                    h, w, None if b is None else b.reshape(-1), stride=layer.stride, padding=layer.padding, groups=m
                )
            elif isinstance(layer, nn.MaxPool2d):
                h = F.max_pool2d(h, layer.kernel_size, layer.stride, layer.padding)
            elif isinstance(layer, nn.ReLU):
                h = torch.relu(h)
            elif isinstance(layer, nn.Flatten):
                if image_layout:  # back to (m, B, features)
                    h = h.reshape(batch, m, -1).transpose(0, 1)
                    image_layout = False
                else:
                    h = h.reshape(m, batch, -1)
            elif isinstance(layer, nn.Linear):
                w = params[f"{name}.weight"]  # (m, out, in)
                b = params.get(f"{name}.bias")  # (m, out)
                h = (
                    torch.bmm(h, w.transpose(1, 2))
                    if b is None
                    else torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
                )
        return h

    def _through_twin(self, params: dict, x: Tensor) -> Tensor:
        """A module that is not one flat Sequential, through its stacked twin."""
        template = self.model.template
        if x.dim() != 5:
            raise ValueError(
                f"strategy 'batched' on {type(template).__name__} needs image inputs "
                f"(n, B, C, H, W), got shape {tuple(x.shape)}"
            )
        m, batch = x.shape[0], x.shape[1]
        out = functional_call(self.twin, params, (self._stacked_images(x),))
        if out.dim() != 3 or out.shape[:2] != (m, batch):
            raise ValueError(
                f"strategy 'batched': {type(template).__name__} must end in a Linear layer to run "
                f"stacked (output (n, B, C) = ({m}, {batch}, C) expected, got {tuple(out.shape)}); "
                "use forward_strategy 'vmap'"
            )
        return out


class MLPStrategy(BatchedStrategy):
    r"""``"mlp"``: a ``Flatten``/``Linear``/``ReLU`` stack (the 2NN, softmax regression). The forward pass is the
    batched one; :meth:`loss_and_grad` writes the backward pass out by hand.

    Forward: :math:`z_l = h_{l-1} W_l^\top + b_l`, :math:`h_l = \max(z_l, 0)` (one ``baddbmm`` over clients per
    layer). Backward from :math:`\delta_L = (\mathrm{softmax}(z_L) - e_y)\, w/\sum w`:
    :math:`\nabla W_l = \delta_l^\top h_{l-1}`, :math:`\nabla b_l = \sum_b \delta_l`,
    :math:`\delta_{l-1} = (\delta_l W_l) \odot 1[h_{l-1} > 0]`; each gradient goes straight into its slice of the
    ``(n, d)`` output (no autograd graph, no copies). Under autocast the products run in the low precision, the
    softmax and the loss in float32 (PyTorch's CPU autocast would leave ``log_softmax`` in the low precision).
    """

    name = "mlp"

    def __init__(self, model: StackedModel):
        super().__init__(model)
        children = list(model.template.named_children())  # (name, a ReLU follows) of each Linear
        self.linear_layers = [
            (name, i + 1 < len(children) and isinstance(children[i + 1][1], nn.ReLU))
            for i, (name, layer) in enumerate(children)
            if isinstance(layer, nn.Linear)
        ]

    def loss_and_grad(
        self, p: Tensor, x: Tensor, labels: Tensor, weights: Tensor, input_grad: bool, loss_scale: float | None
    ) -> tuple[Tensor, ...]:
        model = self.model
        n, batch = x.shape[0], x.shape[1]
        params = model.unflatten(p)
        g = torch.empty_like(p)
        grads = model.unflatten(g)
        h = x.reshape(n, batch, -1)  # Flatten
        inputs = []  # h_{l-1} of every linear layer
        for name, relu in self.linear_layers:
            inputs.append(h)
            W, b = params[f"{name}.weight"], params.get(f"{name}.bias")  # (n, out, in), (n, out)
            h = torch.bmm(h, W.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), h, W.transpose(1, 2))
            if relu:
                h.clamp_min_(0)  # (n, B, out)
        if model.autocast_dtype is not None:
            h = h.float()
        logp = torch.log_softmax(h, dim=-1)  # (n, B, C)
        share = weights / weights.sum(1, keepdim=True)  # w / Σw, (n, B)
        picked = labels.unsqueeze(-1)
        losses = -(logp.gather(-1, picked).squeeze(-1) * share).sum(1)
        delta = logp.exp_().scatter_add_(-1, picked, torch.full_like(picked, -1, dtype=logp.dtype))
        delta.mul_(share.unsqueeze(-1))  # ∂loss_i/∂z_L
        if loss_scale is not None:
            delta.mul_(loss_scale)
        for k in range(len(self.linear_layers) - 1, -1, -1):
            name, _ = self.linear_layers[k]
            W = params[f"{name}.weight"]
            # ∇W = δᵀ h. A (n, out, in) view of g is not contiguous across clients, and bmm into it runs one GEMM
            # per client; so the product is computed contiguously in one batched GEMM, then copied into g.
            grads[f"{name}.weight"].copy_(torch.bmm(delta.transpose(1, 2), inputs[k]))
            if f"{name}.bias" in grads:
                torch.sum(delta, dim=1, out=grads[f"{name}.bias"])  # ∇b = Σ_b δ
            if k > 0 or input_grad:
                delta = torch.bmm(delta, W)  # δ W
                if k > 0 and self.linear_layers[k - 1][1]:  # through the ReLU
                    delta = torch.ops.aten.threshold_backward(delta, inputs[k], 0.0)
        return (g, losses, delta.view_as(x)) if input_grad else (g, losses)


class VmapStrategy(ForwardStrategy):
    """``"vmap"``: ``torch.func.vmap`` over ``functional_call`` of the template; works for any module."""

    name = "vmap"

    def forward(self, params: dict, x: Tensor) -> Tensor:
        template = self.model.template
        return torch.func.vmap(lambda p, xb: functional_call(template, p, (xb,)))(params, x)


class LoopStrategy(ForwardStrategy):
    """``"loop"``: a Python loop over clients, each through ``functional_call`` of the single model
    (:attr:`StackedModel.single`). Its leaves are per client and layer (keys ``(i, name)``, client-major), so the
    loop's per-client indexing has no backward pass (a zero fill and a copy per layer and client)."""

    name = "loop"

    def leaves(self, flat: Tensor) -> dict:
        if flat.dim() != 2:
            return super().leaves(flat)
        return _ClientLeaves(
            ((i, n), v.requires_grad_(True))
            for i in range(flat.shape[0])
            for n, v in self.model.unflatten(flat[i].detach()).items()
        )

    def forward(self, params: dict, x: Tensor) -> Tensor:
        model = self.model
        if isinstance(params, _ClientLeaves):
            clients = [{n: params[i, n] for n in model.names} for i in range(x.shape[0])]
        else:
            clients = [{n: p[i] for n, p in params.items()} for i in range(x.shape[0])]
        return torch.stack([functional_call(model.single, client, (x[i],)) for i, client in enumerate(clients)])


#: Each strategy's class (:func:`forward_strategy` builds one).
STRATEGY_CLASSES: dict[str, type[ForwardStrategy]] = {
    "mlp": MLPStrategy,
    "batched": BatchedStrategy,
    "vmap": VmapStrategy,
    "loop": LoopStrategy,
}


def forward_strategy(
    model: StackedModel, strategy: str = "auto", *, channels_last: bool = False, compile: bool | str = False
) -> ForwardStrategy:
    """The forward strategy ``model`` runs: ``strategy``, or for ``"auto"`` :func:`choose_strategy`'s choice, moved to
    ``"batched"`` for a convolutional model that can run it where an option needs it (below); checked against the
    model and the options.

    ``"auto"`` picks ``"batched"`` instead of ``"vmap"`` for a convolutional model the batched path runs (a flat
    Sequential or a stacked twin) on CUDA and under autocast (vmap's batching rule calls the convolutions below
    autocast's casts, so they would stay float32), and instead of any other strategy with ``channels_last`` or
    ``compile`` (options of the batched path only). A CPU float32 run keeps :func:`choose_strategy`'s choice.
    """
    template, device = model.template, model.device
    flat = _is_sequential_of(template, _BATCHED_LAYERS)
    has_conv = any(isinstance(layer, nn.Conv2d) for layer in template.modules())
    can_batch = flat or _twin_supported(template)
    if strategy == "auto":
        strategy = choose_strategy(template, device)
        if (
            has_conv
            and can_batch
            and (
                (strategy == "vmap" and (device.type == "cuda" or model.autocast_dtype is not None))
                or ((channels_last or compile) and strategy != "batched")
            )
        ):
            strategy = "batched"
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown forward strategy {strategy!r}; allowed: auto, {', '.join(STRATEGIES)}")
    if strategy == "batched" and not can_batch:
        raise ValueError(
            "strategy 'batched' needs an nn.Sequential of "
            + ", ".join(t.__name__ for t in _BATCHED_LAYERS)
            + ", or a module whose layers "
            "are all " + ", ".join(t.__name__ for t in _TWIN_LAYERS)
        )
    if strategy == "mlp" and not _is_mlp(template):
        raise ValueError(
            "strategy 'mlp' needs an nn.Sequential of Flatten, then Linear layers each optionally followed by ReLU"
        )
    if channels_last and (strategy != "batched" or not has_conv):
        raise ValueError(
            "channels_last=True applies to the convolutions of the 'batched' strategy; this model "
            + (
                f"runs strategy {strategy!r} (set forward_strategy 'batched' or 'auto', or channels_last=False)"
                if has_conv
                else "has no convolutions"
            )
        )
    if compile and strategy != "batched":
        raise ValueError(
            f"compile={compile!r} compiles the 'batched' strategy's forward pass; this model runs "
            f"strategy {strategy!r} "
            + (
                "(its own hand-written backward pass: nothing to compile)"
                if strategy == "mlp"
                else "(set forward_strategy 'batched' or 'auto', or compile off)"
            )
        )
    if strategy == "batched":
        return BatchedStrategy(model, channels_last, compile)
    return STRATEGY_CLASSES[strategy](model)


# ------------------------------------------------------------------------------------------- the stacked model
class StackedModel:
    """Parameters of m copies of ``factory()`` stored as the rows of one ``(m, d)`` tensor, and the forward strategy
    (:class:`ForwardStrategy`) that computes all their logits, losses and gradients at once.

    Args:
        factory: builds the model (called with no arguments).
        strategy: ``"auto"`` or one of :data:`STRATEGIES` (:func:`forward_strategy` resolves and checks it).
        device: where the template module lives (only its buffers matter).
        autocast_dtype: ``None`` (default: every pass in the parameters' dtype), ``torch.bfloat16`` or
            ``torch.float16``: local training's forward pass under ``torch.autocast`` (:meth:`loss_and_grad`;
            :data:`AUTOCAST_DTYPES` maps ``Config.precision`` to it). Float32 parameters only.
        channels_last: convolutions in channels-last layout; the ``"batched"`` strategy only.
        compile: ``True``: local training's forward pass (the ``"batched"`` strategy) through ``torch.compile``
            (inductor); a string names another ``torch.compile`` backend (the tests use ``"aot_eager"``).
        cudnn_benchmark: ``torch.backends.cudnn.benchmark`` on during :meth:`loss_and_grad`: cuDNN times its
            algorithms for every new convolution shape and keeps the fastest (CUDA only; which algorithm wins can
            differ between runs, and so can the rounding).
    """

    def __init__(
        self,
        factory: Callable[[], nn.Module],
        strategy: str = "auto",
        device: torch.device | str = "cpu",
        *,
        autocast_dtype: torch.dtype | None = None,
        channels_last: bool = False,
        compile: bool | str = False,
        cudnn_benchmark: bool = False,
    ):
        self.factory = factory
        self.device = torch.device(device)
        if autocast_dtype not in AUTOCAST_DTYPES.values():
            raise ValueError(
                f"autocast_dtype={autocast_dtype!r} is not allowed; allowed: None (no mixed precision), "
                "torch.bfloat16, torch.float16"
            )
        if autocast_dtype is torch.bfloat16 and self.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError(
                "precision 'bfloat16' needs a GPU with bfloat16 support; "
                f"{torch.cuda.get_device_name(self.device)} has none: use precision 'float16'"
            )
        for name, value in (("channels_last", channels_last), ("cudnn_benchmark", cudnn_benchmark)):
            if not isinstance(value, bool):
                raise ValueError(f"{name}={value!r} must be True or False")
        if not isinstance(compile, (bool, str)) or compile == "":
            raise ValueError(f"compile={compile!r} must be True, False or the name of a torch.compile backend")
        self.autocast_dtype, self.channels_last = autocast_dtype, channels_last
        self.compile, self.cudnn_benchmark = compile, cudnn_benchmark
        self.template = factory().to(self.device)
        # what evaluates one client's model (the loop strategy, forward_one): the template, pooling channels-last on CPU
        self.single = _with_channels_last_pools(self.template) if self.device.type == "cpu" else self.template
        params = list(self.template.named_parameters())
        self.names: list[str] = [name for name, _ in params]
        self.shapes: list[torch.Size] = [p.shape for _, p in params]
        sizes = [p.numel() for _, p in params]
        self.offsets: list[int] = [sum(sizes[:k]) for k in range(len(sizes))]
        self.d = sum(sizes)
        self._weight_mask: Tensor | None = None
        self.forward_strategy = forward_strategy(self, strategy, channels_last=channels_last, compile=compile)
        self.strategy: str = self.forward_strategy.name

    # ----------------------------------------------------------------- parameters
    def init_params(self, m: int, seed: int, *, same_init: bool = True, dtype: torch.dtype = torch.float32) -> Tensor:
        """``(m, d)`` initial parameters from PyTorch's default initialisation.

        The global RNG is forked and seeded, so the caller's random state is
        untouched and the result depends on ``seed`` only. With ``same_init``
        every client starts from the same model (as in the public code);
        otherwise each client draws its own.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            rows = [self.flatten(self.factory()) for _ in range(1 if same_init else m)]
        x = torch.stack(rows).to(device=self.device, dtype=dtype)
        return x.expand(m, -1).clone() if same_init else x

    def flatten(self, module: nn.Module) -> Tensor:
        """One module's parameters as a ``(d,)`` vector in this model's order."""
        params = dict(module.named_parameters())
        return torch.cat([params[n].detach().reshape(-1).cpu() for n in self.names])

    def weight_mask(self) -> Tensor:
        """``(d,)`` bool: True on parameters whose name contains "weight" (the ASAM code's rule); built once."""
        if self._weight_mask is None:
            mask = torch.zeros(self.d, dtype=torch.bool, device=self.device)
            for name, shape, o in zip(self.names, self.shapes, self.offsets):
                mask[o : o + shape.numel()] = "weight" in name
            self._weight_mask = mask
        return self._weight_mask

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Views ``{name: (m, *shape)}`` (or ``(*shape)`` for a ``(d,)`` input) into ``flat``."""
        lead = flat.shape[:-1]
        return {
            name: flat[..., o : o + shape.numel()].view(*lead, *shape)
            for name, shape, o in zip(self.names, self.shapes, self.offsets)
        }

    def leaves(self, flat: Tensor) -> dict:
        """Per-layer views of ``flat`` that autograd treats as leaves (the strategy's: per client with ``loop``).

        Differentiating with respect to these views, not ``flat`` itself, keeps
        autograd from materialising an ``(m, d)`` zero tensor per layer in the
        backward pass of the slicing.
        """
        return self.forward_strategy.leaves(flat)

    def gather_grads(self, grads: tuple[Tensor, ...], like: Tensor) -> Tensor:
        """Gradients for :meth:`leaves` (in the order of its values) back into one ``(m, d)`` tensor."""
        g = torch.empty_like(like)
        layers = len(self.names)
        for k, gr in enumerate(grads):  # per layer, or per client and layer (loop)
            i, layer = divmod(k, layers)
            o, n = self.offsets[layer], self.shapes[layer].numel()
            if len(grads) == layers:
                g[:, o : o + n] = gr.reshape(g.shape[0], -1)
            else:
                g[i, o : o + n] = gr.reshape(-1)
        return g

    # --------------------------------------------------------------------- passes
    def forward(self, flat: Tensor | dict, x: Tensor) -> Tensor:
        """Logits ``(m, B, C)`` of client i's model on its inputs ``x[i]``, for all i (eager, in the parameters' dtype).

        ``flat`` is ``(m, d)`` (or its :meth:`unflatten` dict, or :meth:`leaves`), ``x`` is ``(m, B, *input_shape)``.
        """
        return self.forward_strategy.forward(self.unflatten(flat) if isinstance(flat, Tensor) else flat, x)

    def forward_one(self, flat: Tensor, x: Tensor) -> Tensor:
        """Logits ``(B, C)`` of the single model ``flat`` (shape ``(d,)``) on ``x``."""
        return functional_call(self.single, self.unflatten(flat), (x,))

    def loss_and_grad(
        self,
        p: Tensor,
        inputs: Tensor,
        labels: Tensor,
        weights: Tensor,
        clients: Tensor | None = None,
        *,
        input_grad: bool = False,
    ) -> tuple[Tensor, ...]:
        r"""Each client's mean cross-entropy on its batch and its gradient: ``(g (n, d), losses (n,))``.

        ``inputs`` (n, B, *input_shape), ``labels`` (n, B), ``weights`` (n, B): sample weights, 0 on padding;
        client i's loss is :math:`\sum_b w_{ib} \ell_{ib} / \sum_b w_{ib}`. ``clients``, the rows' ids, which every
        :data:`dfl_core.local.Gradient` receives, does not enter this loss. With ``input_grad`` the gradient with
        respect to the inputs comes third (FedRobust's shifts), in the inputs' dtype.

        The strategy computes it (:meth:`ForwardStrategy.loss_and_grad`). With ``autocast_dtype`` its forward pass
        runs under ``torch.autocast``; the losses and the gradients come back in float32, the parameters' dtype.
        float16 scales the summed loss by :data:`FLOAT16_LOSS_SCALE` before the backward pass and divides the
        gradients by it (exact: a power of two), and raises :class:`MixedPrecisionOverflow` if a gradient is not
        finite while every loss is (a diverging run, whose losses are not finite either, is the engine's own
        business). ``cudnn_benchmark`` turns cuDNN's autotuner on for the call.
        """
        if self.autocast_dtype is not None and p.dtype != torch.float32:
            raise ValueError(
                f"mixed precision ({self.autocast_dtype}) needs float32 parameters, got {p.dtype}; "
                "use precision 'float32' with dtype float64"
            )
        scale = FLOAT16_LOSS_SCALE if self.autocast_dtype is torch.float16 else None
        autotune = self.cudnn_benchmark and not torch.backends.cudnn.benchmark  # a global flag of PyTorch
        autocast = (
            torch.autocast(self.device.type, dtype=self.autocast_dtype)
            if self.autocast_dtype is not None
            else contextlib.nullcontext()
        )
        try:
            if autotune:
                torch.backends.cudnn.benchmark = True
            with autocast:
                out = self.forward_strategy.loss_and_grad(p, inputs, labels, weights, input_grad, scale)
        finally:
            if autotune:
                torch.backends.cudnn.benchmark = False
        if self.autocast_dtype is None:
            return out
        if input_grad:  # float32 like the inputs (the hand-written backward's is low precision)
            out = (*out[:2], out[2].to(inputs.dtype))
        if scale is not None:
            for grad in (out[0], *out[2:]):
                grad.div_(scale)
            if not bool(torch.isfinite(out[0]).all()) and bool(torch.isfinite(out[1]).all()):
                raise MixedPrecisionOverflow(
                    f"precision 'float16': a gradient overflowed float16 under the static loss scale "
                    f"{FLOAT16_LOSS_SCALE:g} (finite losses, non-finite gradient); use precision 'bfloat16' "
                    "where the device has it, or 'float32'"
                )
        return out

    @contextlib.contextmanager
    def eager(self):
        """Within it, local training's forward pass runs eagerly even where ``compile`` is on: for a one-off call
        of another shape (the memory probe's single client), which would otherwise compile a graph of its own."""
        strategy = self.forward_strategy
        compiled, strategy.train_forward = strategy.train_forward, strategy.forward
        try:
            yield self
        finally:
            strategy.train_forward = compiled
