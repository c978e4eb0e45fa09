r"""The algorithms, each written like its paper's Algorithm box, and their registry.

An algorithm is one :class:`Algorithm` record (see :mod:`.base`). :data:`ALGORITHMS` maps names to
them; the config, the CLI and the book look names up there, so registering an algorithm is one entry
(``ALGORITHMS[name] = Algorithm(...)``). The modules: :mod:`.decentralized` (dpsgd, dfedavg, dfedavgm, dfedavgm-q,
dfedsam, dfedsam-mgs), :mod:`.dispfl`, :mod:`.centralized` (fedavg, fedsam, fedasam, fedprox, fedavgm, fedcm,
mofedsam, mimelite), :mod:`.controlled` (scaffold, fedgamma, feddyn, fedsmoo), :mod:`.fedgf`, :mod:`.fedrobust`.
"""

from __future__ import annotations

from .base import REQUIRED, Algorithm, ClientModels, GlobalModel, RoundTools
from .centralized import FEDASAM, FEDAVG, FEDAVGM, FEDCM, FEDPROX, FEDSAM, MIMELITE, MOFEDSAM, MOFEDSAM_VARIANTS
from .controlled import FEDDYN, FEDGAMMA, FEDSMOO, FEDSMOO_VARIANTS, SCAFFOLD, SCAFFOLD_OPTIONS
from .decentralized import (
    DFEDAVG,
    DFEDAVGM,
    DFEDAVGM_Q,
    DFEDSAM,
    DFEDSAM_MGS,
    DPSGD,
    QUANT_MIXINGS,
    QUANT_ROUNDINGS,
    UNTRANSMITTABLE_MIXINGS,
)
from .dispfl import DISPFL, DISPFL_MASK_INIT, DISPFL_REGROW
from .fedgf import FEDGF, FEDGF_C_READINGS
from .fedrobust import FEDROBUST

__all__ = [
    "Algorithm",
    "ALGORITHMS",
    "RoundTools",
    "REQUIRED",
    "ClientModels",
    "GlobalModel",
    "MOFEDSAM_VARIANTS",
    "FEDSMOO_VARIANTS",
    "SCAFFOLD_OPTIONS",
    "QUANT_MIXINGS",
    "QUANT_ROUNDINGS",
    "UNTRANSMITTABLE_MIXINGS",
    "DISPFL_REGROW",
    "DISPFL_MASK_INIT",
    "FEDGF_C_READINGS",
]

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in [
        DPSGD,
        DFEDAVG,
        DFEDAVGM,
        DFEDAVGM_Q,
        DFEDSAM,
        DFEDSAM_MGS,
        DISPFL,
        FEDAVG,
        FEDAVGM,
        FEDPROX,
        SCAFFOLD,
        FEDDYN,
        FEDCM,
        MIMELITE,
        FEDSAM,
        FEDASAM,
        MOFEDSAM,
        FEDSMOO,
        FEDGAMMA,
        FEDGF,
        FEDROBUST,
    ]
}
