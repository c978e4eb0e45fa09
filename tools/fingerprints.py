"""Fingerprints of the engine's runs: prove that a refactor changed no number.

    python tools/fingerprints.py                 # print one line per run: name, sha256 of its numbers
    python tools/fingerprints.py --out FILE      # ... and write them to FILE (JSON)
    python tools/fingerprints.py --check FILE    # exit 1 if any run's fingerprint differs from FILE's

Each run is short (digits, 6 clients, 3 rounds) and covers one algorithm, or one option that takes its own path
through the engine (float64, momentum, compressed gossip and its readings, MGS, partial participation, the loop
and vmap forward strategies, local epochs, weight decay). A fingerprint hashes every number of the run's
history that does not measure time, and the bytes of every client's final parameters, so two fingerprints are
equal only if the runs are bit-identical. Compare fingerprints taken on one machine: another CPU may round
differently (scripts/emulate_cpu.sh runs a command as on a CPU with fewer vector instructions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import torch

from dfl_core import ALGORITHMS, Config, Simulation

BASE = dict(dataset="digits", model="2nn", num_clients=6, rounds=3, seed=0, train_size=600, test_size=300)

# Hyperparameters the papers give no value for, which the engine asks for explicitly.
NEEDED: dict[str, dict] = {"fedgf": dict(fedgf_threshold=0.5)}

# Options with a path of their own, beyond each algorithm at its defaults.
VARIANTS: dict[str, dict] = {
    "dfedsam-float64": dict(algorithm="dfedsam", dtype="float64"),
    "dfedsam-loop": dict(algorithm="dfedsam", forward_strategy="loop"),
    "dfedsam-vmap": dict(algorithm="dfedsam", forward_strategy="vmap"),
    "dfedsam-epochs": dict(algorithm="dfedsam", local_epochs=1.0, batch_size=16, weight_decay=5e-4),
    "dfedsam-mgs-q2": dict(algorithm="dfedsam-mgs", gossip_steps=2),
    "dfedsam-8bit": dict(algorithm="dfedsam", quant_bits=8),
    "dpsgd-4bit-stochastic": dict(algorithm="dpsgd", quant_bits=4, quant_stochastic=True),
    "dfedavgm-q-differences-only": dict(algorithm="dfedavgm-q", quant_mixing="differences-only"),
    "dfedavgm-q-exact-neighbours": dict(algorithm="dfedavgm-q", quant_mixing="exact-neighbour-models"),
    "fedsam-partial": dict(algorithm="fedsam", clients_per_round=3),
    "dfedavg-full-batch": dict(algorithm="dfedavg", full_batch=True),
    "dfedavg-cnn": dict(
        algorithm="dfedavg", model="cnn-mnist", dataset="fashion-mnist", train_size=120, test_size=60, rounds=1
    ),
}


def runs() -> dict[str, dict]:
    found = {name: dict(algorithm=name, **NEEDED.get(name, {})) for name in ALGORITHMS}
    found.update(VARIANTS)
    return found


def fingerprint(settings: dict) -> str:
    settings = {**BASE, **settings}
    algorithm = settings.pop("algorithm")
    sim = Simulation(Config(algorithm, **settings))
    history = sim.run()
    digest = hashlib.sha256()
    for record in history.records:
        numbers = {k: v for k, v in record.items() if "time" not in k}
        digest.update(json.dumps(numbers, sort_keys=True, default=float).encode())
    digest.update(sim.x.detach().to("cpu").contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--out", help="write the fingerprints to this JSON file")
    parser.add_argument("--check", help="compare with the fingerprints in this JSON file; exit 1 on a difference")
    parser.add_argument("--only", nargs="*", help="fingerprint only these runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one reduction order, whatever the machine's cores
    found = {}
    for name, settings in runs().items():
        if args.only and name not in args.only:
            continue
        try:
            found[name] = fingerprint(settings)
        except Exception as error:  # an option this engine refuses is a difference too
            found[name] = f"error: {type(error).__name__}: {error}"
        print(f"{name:32s} {found[name]}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(found, f, indent=1, sort_keys=True)
    if args.check:
        with open(args.check) as f:
            expected = json.load(f)
        differ = [n for n in found if expected.get(n) != found[n]]
        for name in differ:
            print(f"DIFFERS: {name}: {expected.get(name)} -> {found[name]}")
        print(f"{len(found) - len(differ)} of {len(found)} runs bit-identical")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
