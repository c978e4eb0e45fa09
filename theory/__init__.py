"""Theory of decentralized FL with flat minima, executable: spectra, Φ, bounds, and a claims checker.

* :mod:`theory.spectral`: λ and the spectral gap of every mixing matrix the
  engine (:mod:`dfl_core.topology`) builds; closed forms in m and their series;
  the time-varying schemes' mean-square contraction; Definition 4.1; Lemma D.1.
* :mod:`theory.phi`: Φ(λ, m, Q) of DFedSAM eq. (6) and its properties.
* :mod:`theory.bounds`: Theorem 4.5, Corollaries 4.6/4.8 and the proofs'
  constants as sympy expressions; what the seed texts lost (``MISSING``).
* :mod:`theory.derivation`: Theorem 4.5 re-derived from Appendix D's
  per-step inequalities, step by step, and compared term by term.
* :mod:`theory.reading`: how to read Theorem 4.5: vacuous or not against 2LΔ,
  the transient rounds after which its topology term stops dominating, the
  proof's step-size condition, and ρ as a pure cost; one table per graph and Q.
* :mod:`theory.rates`: the O(·) displays (Corollaries 4.6/4.8, Appendix
  D.2/D.3) term by term against the derived bound.
* :mod:`theory.problems`: problems with known L, σ_l, σ_g, β; gossip and
  consensus measurements; a numpy reference DFedSAM for offline bound checks.
* :mod:`theory.measured`: ``dfl_core`` runs on softmax regression, measured
  quantities next to the bounds' predictions (imported on first use: it loads
  torch, the rest of ``theory`` does not).
* :mod:`theory.claims`: ``python -m theory check``.

References: Shi et al., "Improving the Model Consistency of Decentralized
Federated Learning", ICML 2023 (DFedSAM); Qu et al., ICML 2022 (FedSAM,
MoFedSAM); Sun et al., "Decentralized Federated Averaging", TPAMI (DFedAvgM);
Lee & Yoon, ICML 2024 (FedGF).
"""

from .bounds import (
    ALPHA,
    BETA_TERM,
    COROLLARY_4_6,
    COROLLARY_4_8,
    D_DENOM,
    LEMMA_D5,
    LEMMA_D6,
    MISSING,
    STEPSIZE_CONDITION,
    SYMBOLS,
    THEOREM_4_5,
    consensus_bound,
    consensus_lemma,
    derived_rate,
    evaluate,
    predictions,
    theorem45_terms,
)
from .claims import REQUIRED_IDS, VERDICTS, Claim, all_claims, format_claim, format_table
from .phi import PHI, phi_limit_q_infinity, phi_monotone_symbolic, phi_q1, phi_table
from .problems import (
    DiagonalQuadratics,
    LeastSquares,
    LogisticRegression,
    ProblemConstants,
    ShiftedQuadratics,
    consensus_distance,
    diagonal_quadratics,
    gossip_contraction,
    reference_dfedsam,
    run_decentralized,
    shifted_quadratics,
    softmax_regression_constants,
)
from .spectral import (
    CLOSED_FORMS,
    STATIC,
    TIME_VARYING,
    as_coded_exact,
    check_closed_forms,
    closed_form_lambda,
    gap_series,
    grid_gap_scaling,
    lemma_d1_static,
    mean_square_contraction,
    spectral_table,
    static_spectrum,
)
from .tables import load_quotes, load_table, quote

__all__ = [
    "ALPHA",
    "BETA_TERM",
    "COROLLARY_4_6",
    "COROLLARY_4_8",
    "D_DENOM",
    "LEMMA_D5",
    "LEMMA_D6",
    "consensus_bound",
    "consensus_lemma",
    "MISSING",
    "STEPSIZE_CONDITION",
    "SYMBOLS",
    "THEOREM_4_5",
    "derived_rate",
    "evaluate",
    "predictions",
    "theorem45_terms",
    "REQUIRED_IDS",
    "VERDICTS",
    "Claim",
    "all_claims",
    "format_claim",
    "format_table",
    "PHI",
    "phi_limit_q_infinity",
    "phi_monotone_symbolic",
    "phi_q1",
    "phi_table",
    "LeastSquares",
    "LogisticRegression",
    "ProblemConstants",
    "ShiftedQuadratics",
    "consensus_distance",
    "gossip_contraction",
    "reference_dfedsam",
    "shifted_quadratics",
    "softmax_regression_constants",
    "DiagonalQuadratics",
    "diagonal_quadratics",
    "run_decentralized",
    "CLOSED_FORMS",
    "STATIC",
    "TIME_VARYING",
    "as_coded_exact",
    "check_closed_forms",
    "closed_form_lambda",
    "gap_series",
    "grid_gap_scaling",
    "lemma_d1_static",
    "mean_square_contraction",
    "spectral_table",
    "static_spectrum",
    "load_quotes",
    "load_table",
    "quote",
    "measure_against_bounds",
    "format_report",
    "objective_and_gradients",
    "simulation_constants",
    "theory_config",
]

#: names of :mod:`theory.measured`, imported on first use (it needs torch and the engine)
_LAZY = {"measure_against_bounds", "format_report", "objective_and_gradients", "simulation_constants", "theory_config"}


def __getattr__(name: str):
    if name in _LAZY:
        from . import measured

        return getattr(measured, name)
    raise AttributeError(f"module 'theory' has no attribute {name!r}")
