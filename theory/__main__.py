"""``python -m theory check``: print every claim of the seed papers the checker transcribes, with a verdict.

Usage::

    python -m theory check            # one line per claim: ID | VERDICT | claim [location] | computed
    python -m theory check --only table2 --only ring-gap   # claims whose ID starts with these
    python -m theory check --json     # the same records as JSON
    python -m theory tables           # λ table of the engine's topologies and Φ at m = 100, Q = 1..4
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict


def _tables() -> str:
    from .phi import phi_table
    from .spectral import TIME_VARYING, mean_square_contraction, spectral_table

    out = ["topology          lambda     gap        ||W-P||   Def4.1   closed form"]
    for s in spectral_table(100):
        ok = all(s.definition_4_1[k] for k in ("graph", "symmetry", "null_space", "spectral"))
        cf = "-" if s.closed_form is None else f"{s.closed_form:.6f}"
        out.append(f"{s.name:<17} {s.lam:<10.6f} {s.gap:<10.3e} {s.op_norm:<9.6f} {str(ok):<8} {cf}")
    for name in TIME_VARYING:
        st = mean_square_contraction(name, 100, draws=100)
        out.append(
            f"{name:<17} mean SLEM {st.mean_slem:.4f}; rho_ms {st.rho_ms:.5f} (sqrt {st.rho_ms**0.5:.4f}); "
            f"drift {st.drift:.2e}"
        )
    out.append("")
    out.append(
        "Phi(lambda, m=100, Q)   Q=1          Q=2          Q=3          Q=4          Q for Phi<=1.1  lambda used"
    )
    for r in phi_table(100):
        out.append(
            f"{r.name:<22} " + " ".join(f"{v:<12.5g}" for v in r.values) + f" {str(r.q_for_1_1):<15} "
            f"{r.lam:.4f} ({r.lam_kind})"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m theory", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="print the claims table")
    c.add_argument("--only", action="append", default=[], help="keep claims whose ID starts with this (repeatable)")
    c.add_argument("--json", action="store_true", help="print JSON records instead of lines")
    sub.add_parser("tables", help="print the lambda and Phi tables")
    a = p.parse_args(argv)
    if a.cmd == "tables":
        print(_tables())
        return 0
    from .claims import all_claims, format_table

    claims = [x for x in all_claims() if not a.only or any(x.id.startswith(o) for o in a.only)]
    if not claims:
        p.error(f"--only {' '.join(a.only)}: no claim's ID starts with that; the IDs: python -m theory check --json")
    if a.json:
        print(json.dumps([asdict(x) for x in claims], ensure_ascii=False, indent=1))
    else:
        print(format_table(claims))
    return 0


if __name__ == "__main__":
    sys.exit(main())
