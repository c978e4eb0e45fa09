"""The b-bit quantizer of quantized DFedAvgM, re-exported from :mod:`dfl_core.operators` (its home, whose docstring
gives the reading of Sun et al. §3.2), where the book's chapters import it."""

from ..operators import (
    MAX_BITS,
    ROUNDINGS,
    SCALE_BITS,
    Encoded,
    adaptive_step,
    decode,
    encode,
    message_bits,
    quantize,
    quantize_levels,
)

__all__ = [
    "quantize",
    "encode",
    "decode",
    "Encoded",
    "adaptive_step",
    "quantize_levels",
    "message_bits",
    "SCALE_BITS",
    "MAX_BITS",
    "ROUNDINGS",
]
