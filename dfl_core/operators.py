r"""Operators on messages and inputs that algorithms apply and instruments measure with.

* :func:`quantize` (with :func:`encode`, :func:`decode`, :func:`message_bits`): the b-bit quantizer of
  quantized DFedAvgM (Sun et al., "Decentralized Federated Averaging", §3.2), applied by ``dfedavgm-q``,
  by compressed gossip and by the distributed backend's exchange, which sends the levels packed to
  b bits each (:func:`pack_levels`, :func:`unpack_levels`);
* :func:`shift_inputs`: per-client affine shifts :math:`\Lambda_i x + \delta_i` of the inputs
  (Reisizadeh et al., FedRobust, NeurIPS 2020), applied by ``fedrobust``'s training.

This module imports nothing from ``dfl_core``, so :mod:`dfl_core.algorithms` and
:mod:`dfl_core.instruments` both import it at the top. ``dfl_core.instruments.quantize``
and ``dfl_core.instruments.robustness`` re-export them, beside the instruments that measure with them.

**The b-bit quantizer.** *Reconstructed*: the formulas of §3.2 are missing from the copy of the paper this engine
is checked against; the words around them remain. A constant step and b bits set a representable range; a value in
range is replaced by an integer multiple of the step, by a deterministic rule or by an unbiased stochastic one (the
two "perform very similarly" when the step is small); a vector is quantized coordinate by coordinate, eq. (6); the
error is bounded for values in range; and a client sends the pair (step, integers), b bits a coordinate instead of
the float's. From these words we take, with :math:`L = 2^{b-1}` and a step s:

* representable values :math:`\{k s : k \in \{-L, \dots, L-1\}\}`, the range of
  a b-bit two's-complement integer times the step s;
* the deterministic rule, in two readings (``rounding=``):

  - ``"nearest"`` (the default):
    :math:`Q(v) = s \cdot \mathrm{clip}(\lfloor v/s + 1/2 \rfloor, -L, L-1)`,
    ties up, so :math:`|Q(v) - v| \le s/2` for v in :math:`[-Ls, (L-1)s]`;
  - ``"floor"``: the integer k with :math:`ks \le v < (k+1)s`, i.e.
    :math:`Q(v) = s \cdot \mathrm{clip}(\lfloor v/s \rfloor, -L, L-1)`, so
    :math:`0 \le v - Q(v) < s` for v in :math:`[-Ls, Ls)`;

* ``"stochastic"``: :math:`k = \lfloor v/s \rfloor`, round up to k + 1 with probability :math:`v/s - k`, then clip;
  unbiased (:math:`E\,Q(v) = v`) and :math:`|Q(v) - v| < s` for v in range;
* a vector is quantized coordinate by coordinate, eq. (6).

Outside the range every rule clips (saturates) to the end levels; that part of the error is not bounded by s.

**Which deterministic rule the text supports.** "we can find an integer such that and we then use to replace": an
integer is found by a lost condition, and one lost expression replaces v. The stochastic rule that follows chooses
between the two levels around v, so the condition it needs is :math:`ks \le v < (k+1)s`; if that is the lost
condition, the single expression that then replaces v is most naturally ks, i.e. rounding down. A nearest rule would
have to say which of ks and (k+1)s, or find k by another condition (:math:`|v - ks| \le s/2`); the gap may have held
that, but nothing around it suggests it. Second, "For both deterministic and stochastic quantization schemes, we
have [a bound] if [v is in range]": one bound is stated for both rules. It must hold for the stochastic error, which
comes arbitrarily close to s, and rounding down's error is below s too, so one bound fits both tightly; rounding to
nearest would meet it with room to spare (its own bound is s/2), and no separate bound for it survives. So the
surviving words support ``"floor"`` at least as well as ``"nearest"``, and slightly better; only the missing
symbols would settle it. Every quantizing algorithm offers both (``quant_rounding``; the default is ``"nearest"``,
whose error bound is the smaller). A level
computed in floating point, k·s/s, can come out a hair below k; ``"floor"`` counts a value within a few ulps of a
level as that level, so levels quantize to themselves and the adaptive step below puts the largest entry exactly on
the top level.

**Choosing s (our choice, not the paper's).** The paper takes s as a given constant. When ``step`` is ``None`` we
choose it per message from the data, :math:`s = \max_j |v_j| / (L - 1)`, so that the largest coordinate lands
exactly on the top level and the clip never binds; the receiver then needs s, which is the 32-bit scale counted by
:func:`message_bits`. (In the simulation s is kept in the working dtype; it is only *counted* as a 32-bit float.)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "shift_inputs",
    "quantize",
    "encode",
    "decode",
    "Encoded",
    "adaptive_step",
    "quantize_levels",
    "message_bits",
    "pack_levels",
    "unpack_levels",
    "packed_bytes",
    "SCALE_BITS",
    "MAX_BITS",
    "ROUNDINGS",
]

#: Bits for the scale s sent with every quantized message (one float32).
SCALE_BITS = 32
#: Largest supported b (the integer payload is held in an int32).
MAX_BITS = 32
#: The rounding rules: the two readings of the deterministic rule, and the unbiased stochastic one.
ROUNDINGS = ("nearest", "floor", "stochastic")
#: The host's byte order: levels of 8, 16 and 32 bits are packed as their own bytes on little-endian hosts.
_LITTLE_ENDIAN = sys.byteorder == "little"
#: Ulps within which ``"floor"`` counts v/s as the integer above it (float division's error is about 1 ulp).
_LEVEL_ULPS = 4


def quantize_levels(bits: int) -> tuple[int, int]:
    """The smallest and largest integer level of a b-bit quantizer: ``(-2^{b-1}, 2^{b-1} - 1)``."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= MAX_BITS:
        raise ValueError(f"bits must be an integer in [2, {MAX_BITS}], got {bits!r}")
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def adaptive_step(v: Tensor, bits: int, dim: int | None = -1) -> Tensor:
    r"""Our choice of s when none is given: :math:`s = \max |v| / (2^{b-1} - 1)` per message.

    ``dim`` is the axis that holds one message (default the last: row i of an ``(m, d)`` tensor is client i's
    message); ``None`` treats all of ``v`` as one message. The result keeps that dimension (size 1) so it broadcasts
    against ``v``. An all-zero message gets s = 1 (any s quantizes zeros to zero).
    """
    _, top = quantize_levels(bits)
    amax = v.abs().amax() if dim is None else v.abs().amax(dim=dim, keepdim=True)
    return torch.where(amax > 0, amax / top, torch.ones_like(amax))


def _rounding_rule(rounding: str) -> str:
    """``rounding``, checked to be one of :data:`ROUNDINGS`."""
    if rounding not in ROUNDINGS:
        raise ValueError(
            f"rounding={rounding!r} is not a rounding rule; allowed: " + ", ".join(repr(r) for r in ROUNDINGS)
        )
    return rounding


def _levels(
    v: Tensor,
    bits: int,
    step: float | Tensor | None,
    rounding: str,
    generator: torch.Generator | None,
    dim: int | None,
    noise: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Integer levels k (as floats in v's dtype) and the step s used, before scaling back.

    Stochastic rounding compares with ``noise`` when given (uniform on [0, 1), v's shape), else with
    ``torch.rand(v.shape, generator=generator)`` drawn here.
    """
    low, high = quantize_levels(bits)
    if not v.is_floating_point():
        raise TypeError(f"quantize needs a floating-point tensor, got {v.dtype}")
    if step is None:
        s = adaptive_step(v, bits, dim)
    else:
        s = torch.as_tensor(step, dtype=v.dtype, device=v.device)
        if not bool((s > 0).all()):
            raise ValueError(f"step must be positive, got {step!r}")
    u = v / s
    if rounding == "stochastic":
        if noise is None:
            noise = torch.rand(v.shape, generator=generator, dtype=v.dtype).to(v.device)
        elif noise.shape != v.shape:
            raise ValueError(f"noise has shape {tuple(noise.shape)}, the values {tuple(v.shape)}")
        k = torch.floor(u)
        k = k + (noise < (u - k)).to(v.dtype)  # up with probability u - floor(u)
    elif rounding == "floor":
        k = torch.floor(u)  # k s <= v < (k + 1) s ...
        # ... where u = v/s, rounded, may fall a few ulps short of the level k + 1 that v is
        slack = _LEVEL_ULPS * torch.finfo(v.dtype).eps * (k + 1).abs().clamp(min=1)
        k = torch.where(k + 1 - u <= slack, k + 1, k)
    else:
        k = torch.floor(u + 0.5)  # nearest level, ties up
    return k.clamp_(low, _representable(high, v.dtype)), s


def _representable(level: int, dtype: torch.dtype) -> float:
    """The largest value of ``dtype`` not above ``level`` (float32 holds 2^31 - 1 only as 2^31, a 33-bit level)."""
    top = torch.tensor(min(level, torch.finfo(dtype).max), dtype=dtype)
    if top.item() > level:
        top = torch.nextafter(top, torch.zeros_like(top))
    return top.item()


def quantize(
    v: Tensor,
    bits: int,
    step: float | Tensor | None = None,
    *,
    rounding: str = "nearest",
    generator: torch.Generator | None = None,
    dim: int | None = -1,
    noise: Tensor | None = None,
) -> Tensor:
    r"""Q(v): every coordinate of ``v`` replaced by its b-bit level :math:`k s`, in v's dtype and shape.

    Args:
        v: the values (any shape, floating point).
        bits: b, 2..32.
        step: s, a positive number or a tensor broadcastable against ``v`` (e.g. one step per row); ``None`` chooses
            it per message by :func:`adaptive_step` along ``dim``.
        rounding: ``"nearest"`` (default; ties up), ``"floor"`` (the k with :math:`ks \le v < (k+1)s`) or
            ``"stochastic"`` (unbiased); the module docstring says which reading of §3.2 each is.
        generator: the random stream of stochastic rounding (drawn on the CPU).
        dim: the message axis for the adaptive step (``None``: one message).
        noise: stochastic rounding's uniform draws, v's shape, instead of drawing them from ``generator`` (a process
            holding some rows of an ``(m, d)`` message slices the draw of all m rows).
    """
    k, s = _levels(v, bits, step, _rounding_rule(rounding), generator, dim, noise)
    return k * s


@dataclass(frozen=True)
class Encoded:
    """A quantized message as it would be sent: integer levels, the step and b."""

    payload: Tensor  # integer levels k, int8 / int16 / int32 by b
    scale: Tensor  # the step s (broadcastable against payload)
    bits: int

    @property
    def num_bits(self) -> int:
        """Bits on the wire, by :func:`message_bits` (one scale for the whole payload)."""
        return message_bits(self.payload.numel(), self.bits)


def _int_dtype(bits: int) -> torch.dtype:
    return torch.int8 if bits <= 8 else torch.int16 if bits <= 16 else torch.int32


def encode(
    v: Tensor,
    bits: int,
    step: float | Tensor | None = None,
    *,
    rounding: str = "nearest",
    generator: torch.Generator | None = None,
    dim: int | None = -1,
    noise: Tensor | None = None,
) -> Encoded:
    """The message for ``v``: the integer levels in the smallest integer type holding b bits, and s.

    ``decode(encode(v, ...))`` equals ``quantize(v, ...)`` with the same arguments
    (and the same generator state or ``noise``, for stochastic rounding).
    """
    k, s = _levels(v, bits, step, _rounding_rule(rounding), generator, dim, noise)
    return Encoded(payload=k.to(_int_dtype(bits)), scale=s, bits=bits)


def decode(message: Encoded, dtype: torch.dtype | None = None) -> Tensor:
    """The receiver's values :math:`k s` (in the scale's dtype unless ``dtype`` is given)."""
    scale = message.scale if dtype is None else message.scale.to(dtype)
    return message.payload.to(scale.dtype) * scale


def packed_bytes(d: int, bits: int) -> int:
    """Bytes of d b-bit levels packed by :func:`pack_levels`: ⌈d·b/8⌉ (under 8 bits of padding)."""
    quantize_levels(bits)
    return (int(d) * int(bits) + 7) // 8


def pack_levels(levels: Tensor, bits: int) -> Tensor:
    r"""Integer levels ``(..., d)`` in :math:`[-2^{b-1}, 2^{b-1} - 1]` packed to b bits each: ``uint8 (..., ⌈d·b/8⌉)``.

    Each message (the last axis) is packed on its own: level j of a row takes bits :math:`jb, \dots, jb + b - 1` of
    the row's bit string, least significant bit first, in b-bit two's complement; byte k holds bits 8k..8k+7 (least
    significant first), and the last byte of a row is padded with zeros. For b = 8, 16, 32 this is the levels' own
    little-endian bytes. The inverse is :func:`unpack_levels`.
    """
    low, high = quantize_levels(bits)
    if levels.is_floating_point() or levels.dtype == torch.bool or levels.is_complex():
        raise TypeError(f"pack_levels needs integer levels, got {levels.dtype}")
    *lead, d = levels.shape
    if levels.numel() and (int(levels.min()) < low or int(levels.max()) > high):
        raise ValueError(f"levels outside [{low}, {high}] cannot be packed to {bits} bits")
    if bits in (8, 16, 32) and _LITTLE_ENDIAN:
        return levels.to(_int_dtype(bits)).contiguous().view(torch.uint8).reshape(*lead, packed_bytes(d, bits))
    unsigned = levels.to(torch.int64) & ((1 << bits) - 1)  # b-bit two's complement
    n = packed_bytes(d, bits)
    if 8 % bits == 0:  # whole levels per byte
        per = 8 // bits
        grouped = torch.nn.functional.pad(unsigned.to(torch.uint8), (0, n * per - d)).unflatten(-1, (n, per))
        packed = grouped[..., 0].clone()
        for i in range(1, per):
            packed |= grouped[..., i] << (i * bits)
        return packed
    bit_string = levels.new_zeros(*lead, 8 * n, dtype=torch.uint8)  # one byte per bit, zero padded
    by_level = bit_string[..., : d * bits].unflatten(-1, (d, bits))
    for i in range(bits):
        by_level[..., i] = (unsigned >> i) & 1
    by_byte = bit_string.unflatten(-1, (n, 8))
    packed = by_byte[..., 0].clone()
    for i in range(1, 8):
        packed |= by_byte[..., i] << i
    return packed


def unpack_levels(packed: Tensor, bits: int, d: int) -> Tensor:
    """The d levels per message that :func:`pack_levels` packed into ``packed`` (``uint8 (..., ⌈d·b/8⌉)``).

    Returns them in the integer type :func:`encode` gives b-bit levels (int8 / int16 / int32).
    """
    quantize_levels(bits)
    if packed.dtype != torch.uint8:
        raise TypeError(f"unpack_levels needs uint8 bytes, got {packed.dtype}")
    *lead, n = packed.shape
    if n != packed_bytes(d, bits):
        raise ValueError(f"{n} bytes per message, but {d} levels of {bits} bits take {packed_bytes(d, bits)}")
    if bits in (8, 16, 32) and _LITTLE_ENDIAN:
        return packed.contiguous().view(_int_dtype(bits)).reshape(*lead, d)
    if 8 % bits == 0:  # whole levels per byte
        per = 8 // bits
        unsigned = packed.new_empty(*lead, n, per)
        for i in range(per):
            unsigned[..., i] = (packed >> (i * bits)) & ((1 << bits) - 1)
        unsigned = unsigned.flatten(-2)[..., :d].to(torch.int64)
        return (unsigned - ((unsigned >> (bits - 1)) << bits)).to(_int_dtype(bits))
    bit_string = packed.new_empty(*lead, n, 8)  # one byte per bit
    for i in range(8):
        bit_string[..., i] = (packed >> i) & 1
    by_level = bit_string.flatten(-2)[..., : d * bits].unflatten(-1, (d, bits))
    unsigned = by_level[..., 0].to(torch.int64)
    for i in range(1, bits):
        unsigned |= by_level[..., i].to(torch.int64) << i
    signed = unsigned - ((unsigned >> (bits - 1)) << bits)  # sign-extend bit b − 1
    return signed.to(_int_dtype(bits))


def message_bits(d: int, bits: int) -> int:
    r"""Bits of one quantized message of d coordinates: :math:`d \cdot b + 32`.

    What is counted: the d integer levels at b bits each (packed, no padding to bytes) and one 32-bit float for the
    step s (DFedAvgM §3.2: "the pair" of scale and integers). Not counted: headers, the sender's id, framing, or any
    entropy coding that could shrink the payload further. An unquantized message costs ``d * bits_per_param`` (32 by
    default) in the same accounting; see :meth:`dfl_core.engine.tools.SimulationTools.count_transmissions`.
    """
    quantize_levels(bits)
    return int(d) * int(bits) + SCALE_BITS


def shift_inputs(inputs: Tensor, shift_matrix: Tensor, shift_offset: Tensor) -> Tensor:
    r"""Client i's inputs seen through its shift: :math:`\Lambda_i x + \delta_i` for every sample.

    ``inputs`` (n, B, *input_shape), ``shift_matrix`` (n, D, D), ``shift_offset`` (n, D); returns
    the shifted inputs in ``inputs``' shape (x is flattened for the product, then reshaped back).
    """
    flat = inputs.flatten(2)  # (n, B, D)
    shifted = torch.baddbmm(shift_offset.unsqueeze(1), flat, shift_matrix.transpose(1, 2))
    return shifted.view_as(inputs)
