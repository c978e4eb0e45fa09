"""m clients' copies of one model, with all parameters in one ``(m, d)`` tensor.

Keeping every client's parameters as one row of a flat matrix makes the rest of
the engine short: a local rule is arithmetic on ``(m, d)`` tensors, SAM's
per-client norm is one reduction over ``dim=1``, gossip is ``W @ X`` and the
consensus distance is one line. The model itself is evaluated functionally on
views into that matrix, so autograd returns all clients' gradients as one
``(m, d)`` tensor.

Four ways to compute all clients' losses and gradients at once (``strategy``):

* ``"mlp"``: for ``nn.Sequential`` stacks of ``Flatten``/``Linear``/``ReLU``
  (the 2NN, softmax regression), the forward *and* backward pass written out
  by hand with batched matrix products, each gradient written straight into
  its slice of the ``(m, d)`` gradient (no autograd graph, no copies);
  ``"batched"`` computes the same with autograd, and the tests check the two agree;
* ``"batched"``: an interpreter for ``nn.Sequential`` that turns every
  ``Linear`` into one ``baddbmm`` over clients and every ``Conv2d`` into one
  grouped convolution (``groups=m``), differentiated by autograd. No Python
  loop over clients, so the number of kernels does not grow with m (the GPU path);
* ``"vmap"``: ``torch.func.vmap`` over ``functional_call``; works for any module.
* ``"loop"``: a Python loop over clients calling ``functional_call``; kept because
  grouped convolutions are slow on CPU (see :func:`choose_strategy`).

``"batched"`` also runs image models that are not one flat ``nn.Sequential`` (VGG-11 and
ResNet-18 with GroupNorm) through a *stacked twin* of the module (:func:`_stacked_twin`):
its own ``forward`` with every Conv2d, GroupNorm and Linear replaced by one call for all
clients, and GroupNorm as one fused kernel over all clients' groups. ``"auto"`` still picks
``"vmap"`` for them in float32 until a GPU measurement says otherwise (``benchmarks/TRIED.md``);
with either option below it picks ``"batched"`` for every convolutional model that can run it
(under autocast ``vmap``'s convolutions stay float32, and channels-last is a batched-path option).

On CPU a single model (the loop's clients, :meth:`StackedModel.forward_one`) pools
through :class:`ChannelsLastMaxPool2d`: the same values and gradients, bit for bit,
at a fraction of the cost of PyTorch's NCHW pooling kernel.

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
* ``cudnn_benchmark``: cuDNN's autotuner on during local training. Grouped convolutions are where
  cuDNN's default choice of algorithm is worst (benchmarks/TRIED.md).
"""
from __future__ import annotations

import contextlib
import copy
from collections import OrderedDict
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

__all__ = ["StackedModel", "STRATEGIES", "choose_strategy", "ChannelsLastMaxPool2d", "AUTOCAST_DTYPES",
           "FLOAT16_LOSS_SCALE", "MixedPrecisionOverflow"]

STRATEGIES = ("mlp", "batched", "vmap", "loop")
_BATCHED_LAYERS = (nn.Flatten, nn.Linear, nn.ReLU, nn.Conv2d, nn.MaxPool2d)
_MLP_LAYERS = (nn.Flatten, nn.Linear, nn.ReLU)
#: Leaf layers the stacked twin (``"batched"`` on a module that is not one flat Sequential) can run.
_TWIN_LAYERS = (nn.Conv2d, nn.GroupNorm, nn.Linear, nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d,
                nn.Flatten, nn.Identity)

#: ``Config.precision`` -> the dtype local training's forward pass autocasts to (None: no autocast).
AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16,
                                                  "float16": torch.float16}
#: The static loss scale of float16 mixed precision: 2^10. A power of two, so scaling and unscaling the
#: float32 gradients is exact; large enough to keep a mean loss's small gradients out of float16's
#: subnormal range (below 6e-5), small enough that a gradient needs to exceed 64 to overflow (65504 / 2^10).
FLOAT16_LOSS_SCALE = 2.0**10


class MixedPrecisionOverflow(FloatingPointError):
    """A float16 gradient overflowed under the static loss scale (:data:`FLOAT16_LOSS_SCALE`)."""


def _is_mlp(module: nn.Module) -> bool:
    """``Flatten``, then ``Linear`` layers each optionally followed by one ``ReLU``."""
    if not isinstance(module, nn.Sequential) or not all(isinstance(layer, _MLP_LAYERS) for layer in module):
        return False
    kinds = [type(layer) for layer in module]
    return (kinds.count(nn.Flatten) <= 1 and (nn.Flatten not in kinds or kinds[0] is nn.Flatten)
            and nn.Linear in kinds and all(a is nn.Linear for a, b in zip(kinds, kinds[1:]) if b is nn.ReLU))


def choose_strategy(module: nn.Module, device: torch.device) -> str:
    """The strategy the engine uses when ``strategy="auto"``.

    Measured on 2 CPU cores, m = 100, K = 5 SAM steps, B = 32 (benchmarks/):
    for stacks of linear layers the hand-written batched backward (``"mlp"``)
    is the fastest on every device; for convolutional models on CPU a grouped
    convolution over 100 clients is slower than a loop of ordinary
    convolutions, so the loop is the default there. On CUDA the batched form
    keeps the number of kernel launches independent of m.
    """
    if _is_mlp(module):
        return "mlp"
    sequential_ok = isinstance(module, nn.Sequential) and all(
        isinstance(layer, _BATCHED_LAYERS) for layer in module
    )
    if not sequential_ok:
        return "vmap"
    has_conv = any(isinstance(layer, nn.Conv2d) for layer in module.modules())
    if has_conv and device.type == "cpu":
        return "loop"
    return "batched"


def _pair(v) -> list[int]:
    return [v, v] if isinstance(v, int) else list(v)


class _MaxPool2dChannelsLast(torch.autograd.Function):
    """Max pooling of an NCHW tensor by the channels-last kernel; output, indices and gradient in NCHW.

    On 2 CPU cores PyTorch's NCHW kernel took 4.4 ms for a (32, 64, 28, 28) input, the channels-last
    kernel 0.5 ms with both layout conversions. Both take the first maximum of a window in row-major
    order, so the indices are the same, and the backward pass is PyTorch's own with those indices.
    """

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode):
        y, indices = torch.ops.aten.max_pool2d_with_indices(
            x.contiguous(memory_format=torch.channels_last), kernel_size, stride, padding, dilation, ceil_mode)
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
        pool = (_pair(self.kernel_size), _pair(self.stride if self.stride is not None else self.kernel_size),
                _pair(self.padding), _pair(self.dilation), self.ceil_mode)
        if torch.is_grad_enabled() and x.requires_grad:
            return _MaxPool2dChannelsLast.apply(x, *pool)
        return F.max_pool2d(x.contiguous(memory_format=torch.channels_last), *pool).contiguous()


def _with_channels_last_pools(module: nn.Module) -> nn.Module:
    """``module`` with each ``nn.MaxPool2d`` child of a Sequential replaced; other children are shared, not copied."""
    if not isinstance(module, nn.Sequential) or not any(type(c) is nn.MaxPool2d for c in module):
        return module
    children = [(name, ChannelsLastMaxPool2d(c.kernel_size, c.stride, c.padding, c.dilation, c.return_indices,
                                             c.ceil_mode) if type(c) is nn.MaxPool2d else c)
                for name, c in module.named_children()]
    return nn.Sequential(OrderedDict(children)).train(module.training)


def _twin_supported(module: nn.Module) -> bool:
    """Can :func:`_stacked_twin` run ``module``: every leaf one of :data:`_TWIN_LAYERS`, convolutions zero-padded."""
    leaves = [mod for mod in module.modules()
              if not list(mod.children()) and type(mod) not in (nn.Sequential, nn.ModuleList, nn.ModuleDict)]
    return bool(leaves) and all(isinstance(mod, _TWIN_LAYERS) for mod in leaves) and all(
        mod.padding_mode == "zeros" for mod in leaves if isinstance(mod, nn.Conv2d)) and all(
        mod.start_dim == 1 and mod.end_dim == -1 for mod in leaves if isinstance(mod, nn.Flatten))


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
                return F.group_norm(h, self.num_groups * n, None if w is None else w.to(h.dtype),
                                    None if b is None else b.to(h.dtype), self.eps)
        return F.group_norm(h, self.num_groups * n, w, b, self.eps)


class _StackedLinear(nn.Linear):
    """n clients' linear layers as one batched product: ``(B, n·in)`` (image features, flattened) or
    ``(n, B, in)`` in, ``(n, B, out)`` out; ``weight`` is ``(n, out, in)``."""

    def forward(self, h: Tensor) -> Tensor:
        n = self.weight.shape[0]
        if h.dim() == 2:                                            # (B, n·in): client i's features are a block
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


class _ClientLeaves(dict):
    """:meth:`StackedModel.leaves` of the ``loop`` strategy: ``{(client, layer name): leaf}``, client-major."""


class StackedModel:
    """Parameters of m copies of ``factory()`` stored as the rows of one ``(m, d)`` tensor.

    Args:
        factory: builds the model (called with no arguments).
        strategy: ``"auto"`` or one of :data:`STRATEGIES`.
        device: where the template module lives (only its buffers matter).
        autocast_dtype: ``None`` (default: every pass in the parameters' dtype), ``torch.bfloat16`` or
            ``torch.float16``: local training's forward pass under ``torch.autocast`` (see the module docstring;
            :data:`AUTOCAST_DTYPES` maps ``Config.precision`` to it). Float32 parameters only.
        channels_last: convolutions in channels-last layout; the ``"batched"`` strategy only.
        compile: ``True``: local training's forward pass (the ``"batched"`` strategy) through ``torch.compile``
            (inductor), which fuses the normalisation, activation, pooling and casts around the convolutions;
            a string names another ``torch.compile`` backend (the tests use ``"aot_eager"``).
        cudnn_benchmark: ``torch.backends.cudnn.benchmark`` on during :meth:`loss_and_grad`: cuDNN times its
            algorithms for every new convolution shape and keeps the fastest (CUDA only; which algorithm wins can
            differ between runs, and so can the rounding).
    """

    def __init__(self, factory: Callable[[], nn.Module], strategy: str = "auto",
                 device: torch.device | str = "cpu", *, autocast_dtype: torch.dtype | None = None,
                 channels_last: bool = False, compile: bool | str = False, cudnn_benchmark: bool = False):
        self.factory = factory
        self.device = torch.device(device)
        if autocast_dtype not in AUTOCAST_DTYPES.values():
            raise ValueError(f"autocast_dtype={autocast_dtype!r} is not allowed; allowed: None (no mixed precision), "
                             "torch.bfloat16, torch.float16")
        if autocast_dtype is torch.bfloat16 and self.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError("precision 'bfloat16' needs a GPU with bfloat16 support; "
                             f"{torch.cuda.get_device_name(self.device)} has none: use precision 'float16'")
        if not isinstance(channels_last, bool):
            raise ValueError(f"channels_last={channels_last!r} must be True or False")
        if not isinstance(cudnn_benchmark, bool):
            raise ValueError(f"cudnn_benchmark={cudnn_benchmark!r} must be True or False")
        self.cudnn_benchmark = cudnn_benchmark
        if not isinstance(compile, (bool, str)) or compile == "":
            raise ValueError(f"compile={compile!r} must be True, False or the name of a torch.compile backend")
        self.autocast_dtype, self.channels_last = autocast_dtype, channels_last
        self.template = factory().to(self.device)
        # what evaluates one client's model (the loop strategy, forward_one): the template, pooling channels-last on CPU
        self.single = _with_channels_last_pools(self.template) if self.device.type == "cpu" else self.template
        self.names: list[str] = []
        self.shapes: list[torch.Size] = []
        self.offsets: list[int] = []
        offset = 0
        for name, p in self.template.named_parameters():
            self.names.append(name)
            self.shapes.append(p.shape)
            self.offsets.append(offset)
            offset += p.numel()
        self.d = offset
        # flat Sequentials run "batched" through the interpreter (_forward_batched), other image models through a twin
        sequential = choose_strategy(self.template, torch.device("cuda")) in ("mlp", "batched")
        has_conv = any(isinstance(layer, nn.Conv2d) for layer in self.template.modules())
        can_batch = sequential or _twin_supported(self.template)
        if strategy == "auto":
            strategy = choose_strategy(self.template, self.device)
            # A convolutional model that can run batched does, where vmap was measured slower or wrong: on CUDA
            # (H100, m = 100, K = 20, B = 128, float32: VGG-11-GN 13.95 s a round against vmap's 15.97 s,
            # ResNet-18-GN 28.50 s against 37.08 s; benchmarks/GPU_RESULTS.md), under autocast (vmap leaves the
            # convolutions in float32: its batching rule calls them below autocast's casts), and with
            # channels-last or compile (options of the batched path only). CPU float32 runs keep their strategy.
            if has_conv and can_batch and ((strategy == "vmap" and (self.device.type == "cuda"
                                                                    or autocast_dtype is not None))
                                           or ((channels_last or compile) and strategy != "batched")):
                strategy = "batched"
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown forward strategy {strategy!r}; allowed: auto, {', '.join(STRATEGIES)}")
        if strategy == "batched" and not can_batch:
            raise ValueError("strategy 'batched' needs an nn.Sequential of "
                             + ", ".join(t.__name__ for t in _BATCHED_LAYERS) + ", or a module whose layers "
                             "are all " + ", ".join(t.__name__ for t in _TWIN_LAYERS))
        if strategy == "mlp" and not _is_mlp(self.template):
            raise ValueError("strategy 'mlp' needs an nn.Sequential of Flatten, then Linear layers each "
                             "optionally followed by ReLU")
        if channels_last and (strategy != "batched" or not has_conv):
            raise ValueError("channels_last=True applies to the convolutions of the 'batched' strategy; this model "
                             + (f"runs strategy {strategy!r} (set forward_strategy 'batched' or 'auto', or "
                                "channels_last=False)" if has_conv else "has no convolutions"))
        if compile and strategy != "batched":
            raise ValueError(f"compile={compile!r} compiles the 'batched' strategy's forward pass; this model runs "
                             f"strategy {strategy!r} " + ("(its own hand-written backward pass: nothing to compile)"
                                                          if strategy == "mlp" else
                                                          "(set forward_strategy 'batched' or 'auto', or compile off)"))
        self.strategy = strategy
        self._twin: nn.Module | None = (_stacked_twin(self.template, channels_last)
                                        if strategy == "batched" and not sequential else None)
        # Local training's forward pass (loss_and_grad): forward, or compiled on request. Evaluation stays eager: its batches
        # vary in size, and every new shape would compile again. dynamic=False: one specialised graph per
        # client-chunk shape (a run has at most two: the full chunks and the last).
        self._train_forward = self.forward
        if compile:
            self._train_forward = torch.compile(self._forward_stacked, dynamic=False,
                                                backend="inductor" if compile is True else compile)
        self.compile = compile
        self._weight_mask: Tensor | None = None
        children = list(self.template.named_children())               # (name, ReLU follows) of each Linear
        self._linear_layers = [(name, i + 1 < len(children) and isinstance(children[i + 1][1], nn.ReLU))
                               for i, (name, layer) in enumerate(children) if isinstance(layer, nn.Linear)]

    # ----------------------------------------------------------------- parameters
    def init_params(self, m: int, seed: int, *, same_init: bool = True,
                    dtype: torch.dtype = torch.float32) -> Tensor:
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
                mask[o:o + shape.numel()] = "weight" in name
            self._weight_mask = mask
        return self._weight_mask

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Views ``{name: (m, *shape)}`` (or ``(*shape)`` for a ``(d,)`` input) into ``flat``."""
        lead = flat.shape[:-1]
        return {name: flat[..., o:o + shape.numel()].view(*lead, *shape)
                for name, shape, o in zip(self.names, self.shapes, self.offsets)}

    # -------------------------------------------------------------------- forward
    def leaves(self, flat: Tensor) -> dict:
        """Per-layer views of ``flat`` that autograd treats as leaves.

        Differentiating with respect to these views, not ``flat`` itself, keeps
        autograd from materialising an ``(m, d)`` zero tensor per layer in the
        backward pass of the slicing (it made a 2NN round six times slower).
        With the ``loop`` strategy each client's layers are leaves of their own
        (keys ``(i, name)``, client-major), so that the loop's per-client
        indexing has no backward pass at all (a zero fill and a copy per
        layer and client, a quarter of a CNN round's time).
        """
        if self.strategy == "loop" and flat.dim() == 2:
            return _ClientLeaves(((i, n), v.requires_grad_(True)) for i in range(flat.shape[0])
                                 for n, v in self.unflatten(flat[i].detach()).items())
        return {n: v.requires_grad_(True) for n, v in self.unflatten(flat.detach()).items()}

    def gather_grads(self, grads: tuple[Tensor, ...], like: Tensor) -> Tensor:
        """Gradients for :meth:`leaves` (in the order of its values) back into one ``(m, d)`` tensor."""
        g = torch.empty_like(like)
        layers = len(self.names)
        for k, gr in enumerate(grads):                      # per layer, or per client and layer (loop)
            i, layer = divmod(k, layers)
            o, n = self.offsets[layer], self.shapes[layer].numel()
            if len(grads) == layers:
                g[:, o:o + n] = gr.reshape(g.shape[0], -1)
            else:
                g[i, o:o + n] = gr.reshape(-1)
        return g

    def loss_and_grad(self, p: Tensor, inputs: Tensor, labels: Tensor, weights: Tensor,
                      input_grad: bool = False) -> tuple[Tensor, ...]:
        r"""Each client's mean cross-entropy on its batch and its gradient: ``(g (n, d), losses (n,))``.

        ``inputs`` (n, B, *input_shape), ``labels`` (n, B), ``weights`` (n, B): sample weights,
        0 on padding; client i's loss is :math:`\sum_b w_{ib} \ell_{ib} / \sum_b w_{ib}`.
        With ``input_grad`` the gradient with respect to the inputs comes third (FedRobust's shifts).
        """
        if self.cudnn_benchmark and not torch.backends.cudnn.benchmark:
            torch.backends.cudnn.benchmark = True               # for this call only (a global flag of PyTorch)
            try:
                return self.loss_and_grad(p, inputs, labels, weights, input_grad)
            finally:
                torch.backends.cudnn.benchmark = False
        if self.autocast_dtype is not None:
            return self._mixed_loss_and_grad(p, inputs, labels, weights, input_grad)
        if self.strategy == "mlp":
            return self._mlp_loss_and_grad(p, inputs, labels, weights, input_grad)
        with torch.enable_grad():
            leaves = self.leaves(p)
            inputs = inputs.detach().requires_grad_(input_grad)
            logits = self._train_forward(leaves, inputs)             # (n, B, C)
            ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
            losses = (ce.view_as(weights) * weights).sum(1) / weights.sum(1)
            grads = torch.autograd.grad(losses.sum(), [*leaves.values(), *([inputs] if input_grad else [])])
        if input_grad:
            return self.gather_grads(grads[:-1], p), losses.detach(), grads[-1]
        return self.gather_grads(grads, p), losses.detach()

    def _mixed_loss_and_grad(self, p: Tensor, inputs: Tensor, labels: Tensor, weights: Tensor,
                             input_grad: bool) -> tuple[Tensor, ...]:
        """:meth:`loss_and_grad` with the forward pass under ``torch.autocast(self.autocast_dtype)``.

        The logits are cast to float32 before the loss, so the losses and the loss's own backward are float32;
        the gradients come back in the parameters' dtype (float32: autocast's casts differentiate back to it).
        float16 scales the summed loss by :data:`FLOAT16_LOSS_SCALE` before the backward pass and divides the
        gradients by it (exact: a power of two), and raises :class:`MixedPrecisionOverflow` if a gradient is
        not finite while every loss is (a diverging run, whose losses are not finite either, is the engine's
        own business).
        """
        if p.dtype != torch.float32:
            raise ValueError(f"mixed precision ({self.autocast_dtype}) needs float32 parameters, got {p.dtype}; "
                             "use precision 'float32' with dtype float64")
        scale = FLOAT16_LOSS_SCALE if self.autocast_dtype is torch.float16 else None
        with torch.autocast(self.device.type, dtype=self.autocast_dtype):
            if self.strategy == "mlp":
                out = self._mlp_loss_and_grad(p, inputs, labels, weights, input_grad, loss_scale=scale)
            else:
                with torch.enable_grad():
                    leaves = self.leaves(p)
                    x = inputs.detach().requires_grad_(input_grad)
                    logits = self._train_forward(leaves, x).float()      # (n, B, C), the loss in float32
                    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
                    losses = (ce.view_as(weights) * weights).sum(1) / weights.sum(1)
                    total = losses.sum() if scale is None else losses.sum() * scale
                    grads = torch.autograd.grad(total, [*leaves.values(), *([x] if input_grad else [])])
                g = self.gather_grads(grads[:-1] if input_grad else grads, p)
                out = (g, losses.detach(), grads[-1]) if input_grad else (g, losses.detach())
        if input_grad:                       # float32 like the inputs (the hand-written backward's is low precision)
            out = (*out[:2], out[2].to(inputs.dtype))
        if scale is not None:
            for grad in (out[0], *out[2:]):
                grad.div_(scale)
            if not bool(torch.isfinite(out[0]).all()) and bool(torch.isfinite(out[1]).all()):
                raise MixedPrecisionOverflow(
                    f"precision 'float16': a gradient overflowed float16 under the static loss scale "
                    f"{FLOAT16_LOSS_SCALE:g} (finite losses, non-finite gradient); use precision 'bfloat16' "
                    "where the device has it, or 'float32'")
        return out

    def _mlp_loss_and_grad(self, p: Tensor, x: Tensor, labels: Tensor, weights: Tensor,
                           input_grad: bool = False, loss_scale: float | None = None) -> tuple[Tensor, ...]:
        r""":meth:`loss_and_grad` of a Flatten/Linear/ReLU stack, forward and backward by hand.

        Forward: :math:`z_l = h_{l-1} W_l^\top + b_l`, :math:`h_l = \max(z_l, 0)` (one ``baddbmm``
        over clients per layer). Backward from :math:`\delta_L = (\mathrm{softmax}(z_L) - e_y)\, w/\sum w`:
        :math:`\nabla W_l = \delta_l^\top h_{l-1}`, :math:`\nabla b_l = \sum_b \delta_l`,
        :math:`\delta_{l-1} = (\delta_l W_l) \odot 1[h_{l-1} > 0]`; each gradient goes straight
        into its slice of the ``(n, d)`` output. Under autocast (:meth:`_mixed_loss_and_grad`) the products run
        in the low precision, the softmax and the loss in float32 (PyTorch's CPU autocast would leave
        ``log_softmax`` in the low precision), and ``loss_scale`` multiplies :math:`\delta_L` (float16's scaling).
        """
        n, batch = x.shape[0], x.shape[1]
        params = self.unflatten(p)
        g = torch.empty_like(p)
        grads = self.unflatten(g)
        h = x.reshape(n, batch, -1)                                          # Flatten
        inputs = []                                                          # h_{l-1} of every linear layer
        for name, relu in self._linear_layers:
            inputs.append(h)
            W, b = params[f"{name}.weight"], params.get(f"{name}.bias")      # (n, out, in), (n, out)
            h = torch.bmm(h, W.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), h, W.transpose(1, 2))
            if relu:
                h.clamp_min_(0)                                              # (n, B, out)
        if self.autocast_dtype is not None:
            h = h.float()
        logp = torch.log_softmax(h, dim=-1)                                  # (n, B, C)
        share = weights / weights.sum(1, keepdim=True)                       # w / Σw, (n, B)
        picked = labels.unsqueeze(-1)
        losses = -(logp.gather(-1, picked).squeeze(-1) * share).sum(1)
        delta = logp.exp_().scatter_add_(-1, picked, torch.full_like(picked, -1, dtype=logp.dtype))
        delta.mul_(share.unsqueeze(-1))                                      # ∂loss_i/∂z_L
        if loss_scale is not None:
            delta.mul_(loss_scale)
        for k in range(len(self._linear_layers) - 1, -1, -1):
            name, _ = self._linear_layers[k]
            W = params[f"{name}.weight"]
            # ∇W = δᵀ h. A (n, out, in) view of g is not contiguous across clients, and bmm into it runs
            # one GEMM per client at about 0.6x the batched rate; computing contiguously and copying is faster.
            grads[f"{name}.weight"].copy_(torch.bmm(delta.transpose(1, 2), inputs[k]))
            if f"{name}.bias" in grads:
                torch.sum(delta, dim=1, out=grads[f"{name}.bias"])                        # ∇b = Σ_b δ
            if k > 0 or input_grad:
                delta = torch.bmm(delta, W)                                               # δ W
                if k > 0 and self._linear_layers[k - 1][1]:                               # through the ReLU
                    delta = torch.ops.aten.threshold_backward(delta, inputs[k], 0.0)
        return (g, losses, delta.view_as(x)) if input_grad else (g, losses)

    def forward(self, flat: Tensor | dict, x: Tensor) -> Tensor:
        """Logits ``(m, B, C)`` of client i's model on its inputs ``x[i]``, for all i.

        ``flat`` is ``(m, d)`` (or its :meth:`unflatten` dict, or :meth:`leaves`), ``x`` is ``(m, B, *input_shape)``.
        """
        if isinstance(flat, _ClientLeaves):
            return torch.stack([self._forward_client({n: flat[i, n] for n in self.names}, x[i])
                                for i in range(x.shape[0])])
        params = self.unflatten(flat) if isinstance(flat, Tensor) else flat
        if self.strategy in ("mlp", "batched"):
            return self._forward_stacked(params, x)
        if self.strategy == "vmap":
            return torch.func.vmap(lambda p, xb: functional_call(self.template, p, (xb,)))(params, x)
        return torch.stack([self._forward_client({n: p[i] for n, p in params.items()}, x[i])
                            for i in range(x.shape[0])])

    @contextlib.contextmanager
    def eager(self):
        """Within it, local training's forward pass runs eagerly even where ``compile`` is on: for a one-off call
        of another shape (the memory probe's single client), which would otherwise compile a graph of its own."""
        compiled, self._train_forward = self._train_forward, self.forward
        try:
            yield self
        finally:
            self._train_forward = compiled

    def _forward_stacked(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """The ``mlp``/``batched`` strategies' forward pass: the twin, or the interpreter of a flat Sequential."""
        return self._forward_twin(params, x) if self._twin is not None else self._forward_batched(params, x)

    def _forward_client(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """One client's logits (the ``loop`` strategy)."""
        return functional_call(self.single, params, (x,))

    def forward_one(self, flat: Tensor, x: Tensor) -> Tensor:
        """Logits ``(B, C)`` of the single model ``flat`` (shape ``(d,)``) on ``x``."""
        return functional_call(self.single, self.unflatten(flat), (x,))

    def _forward_batched(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        m, batch = x.shape[0], x.shape[1]
        # Convolutions run on (B, m*C, H, W): client i owns channels [i*C, (i+1)*C).
        h = x
        image_layout = x.dim() == 5
        if image_layout:
            h = x.transpose(0, 1).reshape(batch, m * x.shape[2], *x.shape[3:])
            if self.channels_last:
                h = h.contiguous(memory_format=torch.channels_last)
        for name, layer in self.template.named_children():
            if isinstance(layer, nn.Conv2d):
                w = params[f"{name}.weight"]                        # (m, out, in, k, k)
                b = params.get(f"{name}.bias")                      # (m, out)
                w = w.reshape(-1, *w.shape[2:])
                if self.channels_last:
                    w = w.contiguous(memory_format=torch.channels_last)
                h = F.conv2d(h, w, None if b is None else b.reshape(-1),
                             stride=layer.stride, padding=layer.padding, groups=m)
            elif isinstance(layer, nn.MaxPool2d):
                h = F.max_pool2d(h, layer.kernel_size, layer.stride, layer.padding)
            elif isinstance(layer, nn.ReLU):
                h = torch.relu(h)
            elif isinstance(layer, nn.Flatten):
                if image_layout:                                    # back to (m, B, features)
                    h = h.reshape(batch, m, -1).transpose(0, 1)
                    image_layout = False
                else:
                    h = h.reshape(m, batch, -1)
            elif isinstance(layer, nn.Linear):
                w = params[f"{name}.weight"]                        # (m, out, in)
                b = params.get(f"{name}.bias")                      # (m, out)
                h = (torch.bmm(h, w.transpose(1, 2)) if b is None
                     else torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2)))
        return h

    def _forward_twin(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """The ``batched`` strategy on a module that is not one flat Sequential (:func:`_stacked_twin`)."""
        if x.dim() != 5:
            raise ValueError(f"strategy 'batched' on {type(self.template).__name__} needs image inputs "
                             f"(n, B, C, H, W), got shape {tuple(x.shape)}")
        m, batch = x.shape[0], x.shape[1]
        h = x.transpose(0, 1).reshape(batch, m * x.shape[2], *x.shape[3:])    # client i: channels [i·C, (i+1)·C)
        if self.channels_last:
            h = h.contiguous(memory_format=torch.channels_last)
        out = functional_call(self._twin, params, (h,))
        if out.dim() != 3 or out.shape[:2] != (m, batch):
            raise ValueError(f"strategy 'batched': {type(self.template).__name__} must end in a Linear layer to run "
                             f"stacked (output (n, B, C) = ({m}, {batch}, C) expected, got {tuple(out.shape)}); "
                             "use forward_strategy 'vmap'")
        return out
