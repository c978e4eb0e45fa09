"""On-device data augmentation, vectorized over every client and sample at once.

``crop-flip`` is the CIFAR augmentation of the seed papers' code (``RandomCrop(32, padding=4)`` then
``RandomHorizontalFlip()`` in rong-dai/DisPFL's CIFAR loaders; He et al. 2016 §4.2). torchvision applies it
per image on the CPU in a DataLoader; the engine instead holds batches of all m clients as one ``(m, B, C, H, W)``
tensor on the device, so here one gather augments all of them. The draws are made on the CPU, then moved, so a seed
gives the same crops and flips on CPU and GPU.

When ``x`` holds only some clients' batches (partial participation, or one rank's block of a distributed run), pass
``rows`` (those clients' ids) and ``num_rows`` (m): the draws are then made for all m clients, as if ``x`` held every
one of them, and rows ``rows`` are used. So a client's crops and flips do not depend on which other clients take part,
and with ``rows = 0..m-1`` they equal the draws for the full ``(m, B, C, H, W)`` tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

__all__ = ["AUGMENTATIONS", "black_fill", "crop_flip", "crop_flip_params"]


def _check_rows(shape: Sequence[int], rows, num_rows) -> torch.Tensor | None:
    """``rows`` as a 1-D int64 CPU tensor after checking it and ``num_rows`` against ``shape``; None if both unset."""
    if rows is None and num_rows is None:
        return None
    if rows is None or num_rows is None:
        raise ValueError(
            f"crop_flip needs rows and num_rows together (got rows={rows!r}, num_rows={num_rows!r}): "
            "rows are the ids of x's leading rows among num_rows"
        )
    if isinstance(num_rows, bool) or not isinstance(num_rows, int) or num_rows < 1:
        raise ValueError(f"num_rows={num_rows!r} must be an integer >= 1 (the number of rows drawn for, e.g. m)")
    r = torch.as_tensor(rows).cpu()
    if r.dtype == torch.bool or r.is_floating_point() or r.is_complex() or r.dim() != 1:
        raise ValueError(f"rows must be a 1-D tensor of integer ids; got dtype {r.dtype}, shape {tuple(r.shape)}")
    if len(shape) < 4 or shape[0] != len(r):
        raise ValueError(
            f"rows has {len(r)} ids but x of shape {tuple(shape)} has "
            + (f"{shape[0]} leading rows" if len(shape) >= 4 else "no leading row dimension (needs (n, ..., C, H, W))")
            + "; pass one id per leading row"
        )
    if len(r) and (int(r.min()) < 0 or int(r.max()) >= num_rows):
        raise ValueError(
            f"rows must lie in 0..num_rows-1 = 0..{num_rows - 1}; got ids from {int(r.min())} to {int(r.max())}"
        )
    return r.long()


def crop_flip_params(
    shape: Sequence[int],
    generator: torch.Generator,
    padding: int = 4,
    flip_p: float = 0.5,
    *,
    rows: torch.Tensor | Sequence[int] | None = None,
    num_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The random draws of :func:`crop_flip` for images of ``shape`` ``(..., C, H, W)``.

    Returns ``(top, left, flip)``, each of shape ``shape[:-3]`` on the CPU: the crop's offsets into the padded
    image, uniform in ``0..2*padding`` as in torchvision's ``RandomCrop.get_params`` (so the un-padded image sits at
    ``(padding, padding)``), and whether the crop is mirrored (probability ``flip_p``, torchvision's
    ``RandomHorizontalFlip`` default 0.5). Drawn in this order: all tops, all lefts, all flips.

    With ``rows`` and ``num_rows`` (both or neither): the draws are made for shape
    ``(num_rows, *shape[1:-3])``, in the order above, and rows ``rows`` of them are returned (``shape[0]`` must be
    ``len(rows)``, each id in ``0..num_rows-1``). So row ``i`` of the result depends only on its id ``rows[i]``,
    not on which other ids are present; ``rows = arange(num_rows)`` gives exactly the draws without them.
    """
    if len(shape) < 3:
        raise ValueError(f"crop_flip needs images (..., C, H, W); got shape {tuple(shape)}")
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding={padding!r} must be an integer >= 0")
    if not 0.0 <= flip_p <= 1.0:
        raise ValueError(f"flip_p={flip_p!r} must be a probability in [0, 1]")
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        # A CUDA generator would make the draws depend on the device (and torch.randint
        # on the CPU refuses it), which breaks "same seed, same run" across machines.
        raise ValueError("crop_flip needs a CPU torch.Generator (draws are made on the CPU, then moved)")
    ids = _check_rows(shape, rows, num_rows)
    batch = tuple(shape[:-3])
    drawn = batch if ids is None else (num_rows, *batch[1:])
    n = math.prod(drawn)
    top = torch.randint(0, 2 * padding + 1, (n,), generator=generator).reshape(drawn)
    left = torch.randint(0, 2 * padding + 1, (n,), generator=generator).reshape(drawn)
    flip = (torch.rand(n, generator=generator) < flip_p).reshape(drawn)
    if ids is not None:
        top, left, flip = top[ids], left[ids], flip[ids]
    return top, left, flip


def crop_flip(
    x: torch.Tensor,
    generator: torch.Generator,
    padding: int = 4,
    *,
    fill: float | Sequence[float] | torch.Tensor = 0.0,
    flip_p: float = 0.5,
    rows: torch.Tensor | Sequence[int] | None = None,
    num_rows: int | None = None,
) -> torch.Tensor:
    """Random crop with padding, then random horizontal flip, of every image in ``x``.

    ``x`` is ``(..., C, H, W)``, e.g. ``(m, B, C, H, W)``; each image gets its own offsets and flip (from
    :func:`crop_flip_params`). If ``x`` holds only some clients, ``(n, B, C, H, W)``, pass their ids as ``rows``
    and the number of clients m as ``num_rows``: the draws are made for all m and rows ``rows`` used, so a client's
    crops and flips do not depend on the others present (see the module docstring). The output has ``x``'s shape:
    the image is padded by ``padding`` pixels of value ``fill`` on every side and an ``H x W`` window is cut out at
    ``(top, left)``, then mirrored left-right if drawn.

    ``fill`` (a scalar or one value per channel) is what the border shows. Our tensors are already normalized, where
    0 is the channel *mean*, not black; torchvision's ``RandomCrop`` pads the raw image with 0 = black. To reproduce
    it exactly pass ``fill = -mean/std`` per channel (:func:`black_fill`), which is what
    :meth:`dfl_core.data.Dataset.augment` does.

    Vectorized: no padded copy is built; each output pixel's source is computed by index arithmetic, fetched with
    one ``torch.gather``, and pixels whose source falls in the border are replaced by ``fill``.
    """
    top, left, flip = crop_flip_params(x.shape, generator, padding, flip_p, rows=rows, num_rows=num_rows)
    *batch, c, h, w = x.shape
    n = math.prod(batch)
    dev = x.device
    top, left, flip = top.reshape(n).to(dev), left.reshape(n).to(dev), flip.reshape(n).to(dev)
    # Output pixel (i, j) of the crop comes from padded pixel (top+i, left+j), i.e. from
    # original pixel (top+i-padding, left+j-padding); a flip reads column W-1-j instead.
    rows = top[:, None] - padding + torch.arange(h, device=dev)  # (n, H)
    cols = left[:, None] - padding + torch.arange(w, device=dev)  # (n, W)
    cols = torch.where(flip[:, None], cols.flip(-1), cols)
    inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]  # (n, H, W)
    # Clamp so border pixels gather *something* valid; they are overwritten by fill below.
    source = rows.clamp(0, h - 1)[:, :, None] * w + cols.clamp(0, w - 1)[:, None, :]  # (n, H, W)
    flat = x.reshape(n, c, h * w)
    out = torch.gather(flat, 2, source.reshape(n, 1, h * w).expand(n, c, h * w)).reshape(n, c, h, w)
    fill_t = torch.as_tensor(fill, dtype=x.dtype, device=dev)
    if fill_t.numel() not in (1, c):
        raise ValueError(f"fill has {fill_t.numel()} values; expected 1 or one per channel ({c})")
    out = torch.where(inside[:, None], out, fill_t.reshape(-1, 1, 1))
    return out.reshape(x.shape)


def black_fill(mean: Sequence[float], std: Sequence[float]) -> tuple[float, ...]:
    """The normalized value of a black (0) pixel per channel, ``-mean/std``."""
    if len(mean) != len(std):
        raise ValueError(f"mean has {len(mean)} channels but std has {len(std)}")
    return tuple(-m / s for m, s in zip(mean, std))


# Name (as in Dataset.augmentation) -> function(x, generator, *, fill, rows, num_rows) -> augmented x.
AUGMENTATIONS: dict[str, Callable[..., torch.Tensor]] = {"crop-flip": crop_flip}
