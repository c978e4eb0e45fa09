"""The b-bit quantizer of quantized DFedAvgM, re-exported from :mod:`dfl_core.operators`.

The quantizer is an operator that ``dfedavgm-q`` and the distributed exchange
apply, so it lives in :mod:`dfl_core.operators`, whose docstring gives the
reading of Sun et al. §3.2 in full; this module keeps the names importable
from here, where the book's chapters import them.
"""
from ..operators import (MAX_BITS, ROUNDINGS, SCALE_BITS, Encoded, adaptive_step, decode, encode, message_bits,
                         quantize, quantize_levels)

__all__ = ["quantize", "encode", "decode", "Encoded", "adaptive_step", "quantize_levels",
           "message_bits", "SCALE_BITS", "MAX_BITS", "ROUNDINGS"]
