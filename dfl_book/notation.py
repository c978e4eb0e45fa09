"""The book's notation, as data: one row per symbol, the papers' symbols beside it, and a check against ``Config``.

The appendix *Notation* (``book/90_notation``) renders :data:`SYMBOLS` as its
table, so the table exists once. :func:`problems` checks it against the
engine: every :class:`~dfl_core.Config` field whose help text starts with a
symbol (``"K, local steps per round"``) must be listed under that field with
that symbol, and no symbol may name two things. A symbol is written in LaTeX
(``\\alpha_{\\mathrm{Mo}}``); :func:`plain` gives the form the help texts use
(``α_Mo``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

__all__ = ["Symbol", "SYMBOLS", "PAPERS", "plain", "help_symbol", "config_symbols", "problems", "markdown_table"]

#: The papers of the table's columns, in order (the appendix cites each).
PAPERS = ("DFedSAM", "DFedAvgM", "FedSAM / MoFedSAM", "FedGF")


@dataclass(frozen=True)
class Symbol:
    """One symbol of the book: what it means, where it lives in the code, and each paper's symbol for it.

    ``papers`` maps a name of :data:`PAPERS` to that paper's symbol or words ("—": the paper has no such
    quantity; absent: the book does not give the paper's symbol).
    ``fields`` are the ``Config`` fields that set it; ``code`` says where else the code has it.
    """

    symbol: str  # LaTeX, without dollars
    meaning: str
    papers: dict = dataclasses.field(default_factory=dict)
    fields: tuple[str, ...] = ()
    code: str = ""
    index: str = ""  # the index that runs over it, e.g. t for T (LaTeX)


def _s(symbol, meaning, dfedsam=None, dfedavgm=None, fedsam=None, fedgf=None, fields=(), code="", index=""):
    papers = {k: v for k, v in zip(PAPERS, (dfedsam, dfedavgm, fedsam, fedgf)) if v is not None}
    return Symbol(symbol, meaning, papers, tuple(fields), code, index)


SYMBOLS: tuple[Symbol, ...] = (
    # --- the federation and its data
    _s("m", "number of clients", "$m$", "$m$", None, "$N$", fields=["num_clients"], index="i"),
    _s("n_i", "training samples of client $i$", "—", "—", None, "$m_i$", code="(from the partition)"),
    _s("n", "training samples in total", "—", "—", None, "$m$", code="(from the partition)"),
    _s(
        "p_i",
        "weight of client $i$ in an average, $n_i/n$ (over the sampled clients: $p_i^t$)",
        code="`sim.tools(t).client_weights`",
    ),
    _s(
        "\\alpha",
        "Dirichlet concentration of the label split",
        '"Dirichlet 0.3", also $\\beta$ in §5.2 and $\\alpha$ in App. C',
        "—",
        '"Dirichlet 0.6"',
        "$\\alpha$",
        fields=["alpha"],
    ),
    _s("d", "number of model parameters", code="`sim.model.d`"),
    # --- rounds and local work
    _s("T", "communication rounds", "$T$, $t$", None, None, "index $r$", fields=["rounds"], index="t"),
    _s(
        "C",
        "fraction of clients sampled per round (FedAvg's $C$)",
        "— (all take part)",
        "—",
        "participation rate",
        "—",
        fields=["client_fraction"],
    ),
    _s(
        "S_t",
        "set of clients sampled in round $t$",
        "— (all take part)",
        "—",
        None,
        "$S^r$",
        code="`sim.tools(t).sample_clients`",
    ),
    _s(
        "\\lvert S_t \\rvert",
        "number of clients sampled per round",
        "—",
        "—",
        None,
        "$\\lvert S^r \\rvert$",
        fields=["clients_per_round"],
    ),
    _s(
        "K",
        "local steps per round",
        '$K$ "local iterates", but the experiments set 5 *epochs*',
        "$K$",
        "local *epochs*",
        "$K$, index $k$",
        fields=["local_steps"],
        index="k",
    ),
    _s("E", "local epochs per round, $K = E\\lceil n_i/B \\rceil$", fields=["local_epochs"]),
    _s("B", "mini-batch size", fields=["batch_size"]),
    _s("\\xi", "a mini-batch, $\\xi_i^{t,k}$ that of client $i$ in step $k$ of round $t$", "$\\xi$", fedgf="$\\zeta$"),
    _s("\\eta", "local learning rate", "$\\eta$", None, "$\\eta_l$", "$\\eta_l$", fields=["lr"]),
    _s("\\eta_g", "server learning rate", '"global learning rate"', "—", "$\\eta_g$", "—", fields=["server_lr"]),
    _s("\\theta", "heavy-ball momentum of the local steps", '"momentum 0.9"', None, "—", "—", fields=["momentum"]),
    _s(
        "\\theta_g",
        "server momentum of FedAvgM and MimeLite (their papers' $\\beta$)",
        "—",
        "—",
        "—",
        "—",
        fields=["server_momentum"],
    ),
    _s("\\rho", "SAM radius", "$\\rho$", "—", "$\\rho$", "$\\rho$", fields=["rho"]),
    _s(
        "\\alpha_{\\mathrm{Mo}}",
        "MoFedSAM's weight of the SAM gradient",
        "—",
        "—",
        "$\\alpha$",
        "—",
        fields=["mofedsam_alpha"],
    ),
    _s(
        "\\alpha_{\\mathrm{CM}}",
        "FedCM's weight of the gradient (FedCM's $\\alpha$)",
        "—",
        "—",
        "—",
        "—",
        fields=["fedcm_alpha"],
    ),
    _s(
        "\\alpha_{\\mathrm{dyn}}",
        "dynamic regularization coefficient (FedDyn's $\\alpha$, FedSMOO's $\\lambda$)",
        fields=["dyn_alpha"],
    ),
    _s("\\mu", "FedProx's proximal coefficient", fields=["prox_mu"]),
    _s("c_i", "SCAFFOLD's control variate of client $i$"),
    _s("\\alpha_{\\mathrm{GNP}}", "weight of the perturbed gradient in the tutorial's gradient-norm penalty"),
    _s("\\gamma_R", "FedRobust's penalty on the affine shifts (its paper's $\\lambda$)", fields=["robust_lambda"]),
    _s("\\eta_R", "FedRobust's ascent step on the affine shifts", fields=["robust_ascent_lr"]),
    # --- models and losses
    _s("F", "loss of a model on a sample or batch, $F(x; \\xi)$; $F_i$ that of client $i$'s data"),
    _s("f_i", "local objective of client $i$, $f_i(x) = \\frac{1}{n_i}\\sum_{\\xi \\in D_i} F(x; \\xi)$"),
    _s("f", "global objective, $f = \\sum_i p_i f_i$"),
    _s("w^t", "global model of a server in round $t$", "—", "—", fedgf="$w^r$"),
    _s("x^t(i)", "model of client $i$ at the start of round $t$ (no server)", "$x^t(i)$", None, code="`sim.x[i]`"),
    _s("\\bar x^t", "average of the clients' models, $\\frac1m \\sum_i x^t(i)$", "$\\bar x^t$", None),
    _s(
        "y^{t,k}(i)",
        "local iterate of client $i$ after $k$ local steps of round $t$",
        "$y^{t,k}(i)$",
        None,
        fedgf="$w^r_{i,k}$",
    ),
    _s("z^{t,q}(i)", "model of client $i$ after $q$ gossip steps of round $t$", "$z^{t,q}(i)$", "—", "—", "—"),
    _s("\\delta", "SAM's perturbation, $\\delta = \\rho\\, g / \\lVert g \\rVert_2$", fedgf="$\\delta$"),
    _s(
        "\\lambda_{\\max}",
        "largest eigenvalue of the Hessian of the loss (sharpness)",
        code="`dfl_core.instruments.top_hessian_eigenvalue`",
    ),
    # --- assumptions and bounds
    _s(
        "\\beta",
        "data heterogeneity bound (Definition 4.2)",
        "$\\beta$",
        "$\\sigma_g$",
        None,
        "—",
        code="(computed in `theory`)",
    ),
    _s(
        "\\sigma_l",
        "bound on the local gradient noise",
        "$\\sigma_l$",
        None,
        None,
        "—",
        code="(computed in `theory`)",
    ),
    _s(
        "\\sigma_g",
        "bound on the clients' gradient dissimilarity",
        "$\\sigma_g$",
        None,
        None,
        "—",
        code="(computed in `theory`)",
    ),
    _s("L", "smoothness constant", "$L$", "$L$", None, "—", code="(computed in `theory`)"),
    _s(
        "\\Psi",
        "term of Theorem 4.5's bound that does not depend on the graph, $\\Psi(K, \\rho, \\eta)$",
        "$\\alpha(K, \\rho, \\eta)$",
        "—",
        "—",
        "—",
        code="`theory.ALPHA`",
    ),
    _s(
        "\\Omega",
        "term of Theorem 4.5's bound that $\\Phi$ multiplies, $\\Omega(K, \\rho, \\eta)$",
        "$\\beta(K, \\rho, \\eta)$",
        "—",
        "—",
        "—",
        code="`theory.BETA_TERM`",
    ),
    # --- the graph
    _s("W", "mixing matrix, entries $w_{ij}$", "$W$, $w_{i,l}$", "$W$", "—", "—", fields=["topology"]),
    _s(
        "\\lambda",
        "second-largest eigenvalue modulus of $W$; $1 - \\lambda$ is the spectral gap",
        "$\\lambda$ (Def. 4.1)",
        "$\\lambda$",
        "—",
        "—",
        code="`MixingMatrix.lam`",
    ),
    _s("Q", "gossip steps per round", "$Q$", "—", "—", "—", fields=["gossip_steps"], index="q"),
    _s(
        "\\Phi",
        "topology factor of Theorem 4.5, $\\Phi(\\lambda, m, Q)$",
        "$\\Phi(\\lambda, m, Q)$",
        "—",
        "—",
        "—",
        code="`theory.PHI`",
    ),
    _s(
        "\\frac1m\\sum_i\\lVert x^t(i) - \\bar x^t\\rVert^2",
        "consensus distance",
        "$\\lVert X - PX \\rVert^2/m$ in the proofs",
        "—",
        "—",
        "—",
        code="`consensus_distance` (results)",
    ),
    # --- FedGF
    _s(
        "\\Delta^t",
        "last change of the global model, used as a direction (MoFedSAM scales it to a gradient)",
        "—",
        "—",
        "$\\Delta$ (the global model's last update)",
        "$\\Delta^r = w^{r-1} - w^r$",
    ),
    _s("\\Delta_F", "flatness discrepancy", "—", "—", "—", "$\\Delta_{\\mathcal F}$"),
    _s("c", "FedGF's interpolation weight", "—", "—", "—", "$c$", code="(adaptive; reported as `fedgf_c`)"),
    _s(
        "W_c",
        "FedGF's window of rounds for $c$",
        "—",
        "—",
        "—",
        "$W$ (clashes with the mixing matrix)",
        fields=["fedgf_window"],
    ),
    _s("T_D", "FedGF's drift threshold", "—", "—", "—", "$T_D$ (no value given)", fields=["fedgf_threshold"]),
    _s(
        "D^t",
        "FedGF's drift of round $t$, the clients' mean distance from the global model",
        "—",
        "—",
        "—",
        "$D^r$",
        code="(reported as `fedgf_drift`)",
    ),
    # --- quantized messages
    _s("b", "bits per coordinate of a quantized message", "—", None, "—", "—", fields=["quant_bits"]),
    _s("h", "quantization step", "—", None, "—", "—", fields=["quant_step"]),
    _s(
        "\\hat x_i",
        "client $i$'s public copy in compressed gossip, built from its messages alone (CHOCO-Gossip)",
        "—",
        "—",
        "—",
        "—",
        code="`RunState.gossip_state`",
    ),
    _s(
        "\\gamma",
        "consensus step of compressed gossip, $x \\leftarrow x + \\gamma (W - I)\\hat x$",
        "—",
        "—",
        "—",
        "—",
        fields=["consensus_step"],
    ),
    _s(
        "\\mathcal Q",
        "the quantizer, $\\mathcal Q(v) = h\\,k$ for a level $k$",
        "—",
        None,
        "—",
        "—",
        code="`dfl_core.operators.quantize`",
    ),
    # --- comparing methods over seeds
    _s("n_s", "number of seeds of a paired comparison", code="`dfl_book.stats.compare_paired`"),
    _s("s_d", "standard deviation of the paired differences over the seeds", code="`dfl_book.stats.compare_paired`"),
    _s("t_{p,\\nu}", "quantile $p$ of Student's t distribution with $\\nu$ degrees of freedom"),
)

_GREEK = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "eta": "η",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "xi": "ξ",
    "rho": "ρ",
    "sigma": "σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    "Delta": "Δ",
    "zeta": "ζ",
    "nu": "ν",
    "max": "max",
    "lvert": "|",
    "rvert": "|",
}


def plain(latex: str) -> str:
    """The plain-text form of a LaTeX symbol, as help texts write it: ``\\alpha_{\\mathrm{Mo}}`` -> ``α_Mo``."""
    text = re.sub(r"\\(?:mathrm|text|operatorname)\{([^}]*)\}", r"\1", latex)
    text = re.sub(r"\\mathcal\s*\{?Q\}?", "𝒬", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _GREEK.get(m.group(1), m.group(0)), text)
    text = re.sub(r"_\{([^{}]*)\}", r"_\1", text)
    return text.replace(" ", "")


HELP_SYMBOL = re.compile(r"^(?P<symbol>[^\s,'\"]{1,6}), ")


def help_symbol(help_text: str) -> str | None:
    """The symbol a help text starts with (``"K, local steps per round"`` -> ``"K"``), or None."""
    m = HELP_SYMBOL.match(help_text)
    return m.group("symbol") if m else None


def config_symbols() -> dict[str, str]:
    """Run field or hyperparameter -> the symbol its help text starts with, for those that have one."""
    from dfl_core.config import RUN_FIELDS, algorithm_fields

    found = {name: help_symbol(f.metadata["help"]) for name, f in {**RUN_FIELDS, **algorithm_fields()}.items()}
    return {name: s for name, s in found.items() if s}


def problems(symbols: tuple[Symbol, ...] = SYMBOLS, fields: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a notation table: a symbol (or index) named twice, a field listed twice, a field
    whose help's symbol differs from the table's or is missing from it. Empty: the table and ``fields``
    (default: :func:`config_symbols`) agree."""
    fields = config_symbols() if fields is None else fields
    out, by_symbol, by_field = [], {}, {}
    for row in symbols:
        for sym in filter(None, (row.symbol, row.index)):
            key = plain(sym)
            if key in by_symbol:
                out.append(f"symbol {key} names two things: {by_symbol[key]!r} and {row.meaning!r}")
            by_symbol.setdefault(key, row.meaning)
        for name in row.fields:
            if name in by_field:
                out.append(f"field {name} is listed twice: under {by_field[name]} and {plain(row.symbol)}")
            by_field.setdefault(name, plain(row.symbol))
    for name, sym in fields.items():
        if name not in by_field:
            out.append(
                f"field {name} (help: {sym}, ...) is not in the table: add a Symbol to SYMBOLS in dfl_book/notation.py, "
                "then run python tools/book.py links and re-execute book/90_notation"
            )
        elif by_field[name] != sym:
            out.append(f"field {name}: its help says {sym}, the table says {by_field[name]}")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(symbols: tuple[Symbol, ...] = SYMBOLS) -> str:
    """The table as Markdown: meaning, the book's symbol, each paper's, and where it is in the code."""
    head = ["meaning", "this book", *PAPERS, "in `dfl_core`"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in symbols:
        book = f"${row.symbol}$" + (f", index ${row.index}$" if row.index else "")
        code = ", ".join(f"`{f}`" for f in row.fields) or row.code
        cells = [row.meaning, book, *(row.papers.get(p, "") for p in PAPERS), code]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)
