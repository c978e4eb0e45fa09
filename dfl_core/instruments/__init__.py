"""Measuring instruments: what the book's claims about flatness, consistency,
communication and privacy are checked with.

* :mod:`.hessian` — top Hessian eigenvalue and Hutchinson trace of a training loss (DFedSAM Fig. 5);
* :mod:`.landscape` — filter-normalised 1-D/2-D loss landscapes and interpolation lines (Li et al. 2018);
* :mod:`.flatness` — FedGF's flatness discrepancy Δ_F (Lee & Yoon 2024);
* :mod:`.quantize` — the b-bit quantizer of quantized DFedAvgM and its message size (Sun et al. §3.2),
  re-exported from :mod:`dfl_core.operators`, where the algorithms that apply it find it too;
* :mod:`.privacy` — the membership inference attack and its ROC AUC (DFedAvgM §6, after ML-Leaks).
"""

from .hessian import (
    HVP_CHUNK,
    SharpnessReport,
    TraceEstimate,
    client_data,
    hessian_trace,
    hessian_vector_product,
    sharpness_report,
    top_hessian_eigenvalue,
    union_data,
)
from .landscape import (
    LossLine,
    LossSurface,
    evaluate_points,
    interpolation_line,
    landscape_around_average,
    loss_line,
    loss_surface,
    random_direction,
)
from .flatness import BallMax, FlatnessDiscrepancy, ball_max, flatness_discrepancy
from .flatness import from_simulation as flatness_from_simulation
from .privacy import MembershipResult, attack_features, client_membership_auc, membership_auc, roc_auc, train_classifier
from .quantize import Encoded, adaptive_step, decode, encode, message_bits, quantize, quantize_levels

__all__ = [
    "top_hessian_eigenvalue",
    "hessian_trace",
    "hessian_vector_product",
    "TraceEstimate",
    "sharpness_report",
    "SharpnessReport",
    "client_data",
    "union_data",
    "HVP_CHUNK",
    "random_direction",
    "loss_line",
    "loss_surface",
    "interpolation_line",
    "landscape_around_average",
    "evaluate_points",
    "LossLine",
    "LossSurface",
    "flatness_discrepancy",
    "flatness_from_simulation",
    "FlatnessDiscrepancy",
    "ball_max",
    "BallMax",
    "quantize",
    "encode",
    "decode",
    "Encoded",
    "adaptive_step",
    "quantize_levels",
    "message_bits",
    "membership_auc",
    "client_membership_auc",
    "MembershipResult",
    "roc_auc",
    "attack_features",
    "train_classifier",
]
