"""m clients' copies of one model, with all parameters in one ``(m, d)`` tensor.

Keeping every client's parameters as one row of a flat matrix makes the rest of
the engine short: a local rule is arithmetic on ``(m, d)`` tensors, SAM's
per-client norm is one reduction over ``dim=1``, gossip is ``W @ X`` and the
consensus distance is one line. The model itself is evaluated functionally on
views into that matrix, so autograd returns all clients' gradients as one
``(m, d)`` tensor.

Three ways to run the forward pass of all clients at once (``strategy``):

* ``"batched"``: an interpreter for ``nn.Sequential`` that turns every
  ``Linear`` into one ``baddbmm`` over clients and every ``Conv2d`` into one
  grouped convolution (``groups=m``). No Python loop over clients.
* ``"vmap"``: ``torch.func.vmap`` over ``functional_call``; works for any module.
* ``"loop"``: a Python loop over clients calling ``functional_call``; kept because
  grouped convolutions are slow on CPU (see ``DEFAULT_STRATEGY``).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

__all__ = ["StackedModel", "STRATEGIES", "choose_strategy"]

STRATEGIES = ("batched", "vmap", "loop")
_BATCHED_LAYERS = (nn.Flatten, nn.Linear, nn.ReLU, nn.Conv2d, nn.MaxPool2d)


def choose_strategy(module: nn.Module, device: torch.device) -> str:
    """The forward strategy the engine uses when ``strategy="auto"``.

    Measured on 2 CPU cores, m = 100, K = 5 SAM steps, B = 32 (benchmarks/):
    for all-linear models the batched matmuls win; for convolutional models on
    CPU a grouped convolution over 100 clients is slower than a loop of
    ordinary convolutions, so the loop is the default there. On CUDA the
    batched form keeps the number of kernel launches independent of m.
    """
    has_conv = any(isinstance(layer, nn.Conv2d) for layer in module.modules())
    sequential_ok = isinstance(module, nn.Sequential) and all(
        isinstance(layer, _BATCHED_LAYERS) for layer in module
    )
    if not sequential_ok:
        return "vmap"
    if has_conv and device.type == "cpu":
        return "loop"
    return "batched"


class _ClientLeaves(dict):
    """:meth:`StackedModel.leaves` of the ``loop`` strategy: ``{(client, layer name): leaf}``, client-major."""


class StackedModel:
    """Parameters of m copies of ``factory()`` stored as the rows of one ``(m, d)`` tensor.

    Args:
        factory: builds the model (called with no arguments).
        strategy: ``"auto"`` or one of :data:`STRATEGIES`.
        device: where the template module lives (only its buffers matter).
    """

    def __init__(self, factory: Callable[[], nn.Module], strategy: str = "auto",
                 device: torch.device | str = "cpu"):
        self.factory = factory
        self.device = torch.device(device)
        self.template = factory().to(self.device)
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
        if strategy == "auto":
            strategy = choose_strategy(self.template, self.device)
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown forward strategy {strategy!r}; allowed: auto, {', '.join(STRATEGIES)}")
        if strategy == "batched" and choose_strategy(self.template, torch.device("cuda")) != "batched":
            raise ValueError("strategy 'batched' needs an nn.Sequential of "
                             + ", ".join(t.__name__ for t in _BATCHED_LAYERS))
        self.strategy = strategy
        self._weight_mask: Tensor | None = None

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

    def forward(self, flat: Tensor | dict, x: Tensor) -> Tensor:
        """Logits ``(m, B, C)`` of client i's model on its inputs ``x[i]``, for all i.

        ``flat`` is ``(m, d)`` (or its :meth:`unflatten` dict, or :meth:`leaves`), ``x`` is ``(m, B, *input_shape)``.
        """
        if isinstance(flat, _ClientLeaves):
            return torch.stack([functional_call(self.template, {n: flat[i, n] for n in self.names}, (x[i],))
                                for i in range(x.shape[0])])
        params = self.unflatten(flat) if isinstance(flat, Tensor) else flat
        if self.strategy == "batched":
            return self._forward_batched(params, x)
        if self.strategy == "vmap":
            return torch.func.vmap(lambda p, xb: functional_call(self.template, p, (xb,)))(params, x)
        return torch.stack([
            functional_call(self.template, {n: p[i] for n, p in params.items()}, (x[i],))
            for i in range(x.shape[0])
        ])

    def forward_one(self, flat: Tensor, x: Tensor) -> Tensor:
        """Logits ``(B, C)`` of the single model ``flat`` (shape ``(d,)``) on ``x``."""
        return functional_call(self.template, self.unflatten(flat), (x,))

    def _forward_batched(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        m, batch = x.shape[0], x.shape[1]
        # Convolutions run on (B, m*C, H, W): client i owns channels [i*C, (i+1)*C).
        h = x
        image_layout = x.dim() == 5
        if image_layout:
            h = x.transpose(0, 1).reshape(batch, m * x.shape[2], *x.shape[3:])
        for name, layer in self.template.named_children():
            if isinstance(layer, nn.Conv2d):
                w = params[f"{name}.weight"]                        # (m, out, in, k, k)
                b = params.get(f"{name}.bias")                      # (m, out)
                h = F.conv2d(h, w.reshape(-1, *w.shape[2:]), None if b is None else b.reshape(-1),
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
