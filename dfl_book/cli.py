"""The book's commands of ``python -m dfl_core``: ``showcase`` (a chapter's experiment) and ``table`` (a paper's
table); the figure and the paired verdicts of ``run``; the papers' presets that ``--preset`` starts from.

The engine's CLI (:mod:`dfl_core.cli`) imports nothing of the book; it finds these through the entry point
``dfl_core.cli`` that ``pyproject.toml`` declares (:data:`EXTENSION`), once the package is installed.
"""

from __future__ import annotations

import argparse
import sys

from dfl_core.checkpoint import CheckpointError
from dfl_core.cli import CliExtension, parse_names, parse_seeds, parse_value
from dfl_core.config import RUN_FIELDS, ConfigError, algorithm_fields
from dfl_core.errors import DivergenceError
from dfl_core.results import History

from .plots import plot_comparison
from .presets import PRESETS
from .showcase import run_experiment
from .showcase.experiments import EXPERIMENTS
from .stats import MIN_SEEDS, compare_paired, holm
from .tables import FAST, run_table, write_table

__all__ = ["EXTENSION", "EQUIVALENCE_MARGIN", "add_commands", "run", "paired_table"]

#: The equivalence margin of the command line's verdicts: half a point of test accuracy (dfl_book.stats).
EQUIVALENCE_MARGIN = 0.5


def add_commands(sub) -> None:
    """The ``showcase`` and ``table`` parsers, on the engine CLI's subparsers."""
    showcase = sub.add_parser(
        "showcase",
        help="run a chapter's showcase experiment (every arm x seed) into its results file",
        description="Run every arm x seed of a showcase experiment (dfl_book.showcase) and write "
        "OUT/NAME.json after every finished run; rerunning the command continues an interrupted "
        "regeneration (finished runs are kept, unfinished ones resume from their checkpoints).",
    )
    showcase.add_argument("name", nargs="?", help="an experiment (omit with --list)")
    showcase.add_argument("--list", action="store_true", help="list the experiments and their arms")
    showcase.add_argument("--profile", default="showcase", help="showcase (default) or fast (a quick check)")
    showcase.add_argument("--jobs", type=int, default=1, help="trainings at once, one process each (default: 1)")
    showcase.add_argument("--seeds", default=None, help="comma-separated seeds (default: the experiment's)")
    showcase.add_argument(
        "--out", default=None, help="folder of the results file (default: the committed dfl_book/showcase/results)"
    )
    showcase.add_argument(
        "--checkpoints",
        default=None,
        metavar="DIR",
        help="where unfinished runs checkpoint (default: $DFL_CHECKPOINTS/showcase/NAME)",
    )
    showcase.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    table = sub.add_parser(
        "table",
        help="rerun a paper's table (a preset) over seeds; write it as CSV and Markdown",
        description="Rerun every cell (algorithm x setting) of a paper preset for every seed and write "
        "OUT/NAME-PROFILE.csv and .md: mean ± std of the final test accuracy, the paper's number "
        "beside it, and the command, seeds, versions and machine. 'fast' is a CPU-sized copy of "
        f"the table ({FAST['dataset']}, {FAST['model']}, {FAST['num_clients']} clients, "
        f"{FAST['rounds']} rounds; see dfl_book.tables); 'showcase' runs every cell at the book's "
        "showcase scale (all of Fashion-MNIST, 2NN, 100 clients, 100 rounds, 600 for centralized FL); "
        "'full' is the paper's scale, for a GPU. With 'showcase' and 'full' every run checkpoints, and "
        "rerunning the command continues an interrupted table.",
    )
    table.add_argument("name", help="a preset: " + ", ".join(PRESETS))
    table.add_argument("--profile", default="fast", help="fast, showcase or full (default: %(default)s)")
    table.add_argument(
        "--seeds", default="0,1,2,3,4", help="comma-separated seeds (default: %(default)s, the five a verdict needs)"
    )
    table.add_argument("--algorithms", default=None, help="only these rows (comma-separated)")
    table.add_argument("--settings", default=None, help="only these columns (comma-separated)")
    table.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a config field of every cell, e.g. --set rounds=5 (repeatable)",
    )
    table.add_argument(
        "--tag", default=None, help="append -TAG to the output names, e.g. for a rerun with --set (a code variant)"
    )
    table.add_argument("--out", default="dfl_tables", help="output folder (default: %(default)s)")
    table.add_argument(
        "--checkpoints",
        default=None,
        metavar="DIR",
        help="keep each run's checkpoint and the finished runs here, so that rerunning the "
        "command continues an interrupted table (default: none for fast; for showcase and full "
        "$DFL_CHECKPOINTS/tables/NAME)",
    )
    table.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="trainings at once, one process each; the numbers do not depend on it (default: 1)",
    )
    table.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(name: str, parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> int:
    """Run the book's command ``name`` (``showcase`` or ``table``); the exit code."""
    return (_showcase if name == "showcase" else _table)(parser, args, command)


def _table(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> int:
    types = {name: f.type for name, f in {**RUN_FIELDS, **algorithm_fields()}.items()}  # the live registry
    if args.tag is not None and not args.tag.replace("-", "").isalnum():
        parser.error(f"--tag must be letters, digits and '-', got {args.tag!r}")
    changes = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in types:
            parser.error(f"--set expects FIELD=VALUE with a config field, got {item!r}; fields: {', '.join(types)}")
        try:
            changes[key] = parse_value(value, types[key])
        except argparse.ArgumentTypeError as err:
            parser.error(f"--set {item}: {err}")
    seeds = parse_seeds(parser, args.seeds)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    try:
        result = run_table(
            args.name,
            args.profile,
            seeds,
            algorithms=tuple(parse_names(args.algorithms) or ()),
            settings=tuple(parse_names(args.settings) or ()),
            changes=changes,
            progress=not args.no_progress,
            command=command,
            checkpoints=args.checkpoints,
            jobs=args.jobs,
        )
    except (ConfigError, CheckpointError, ValueError) as err:  # (data errors say data_dir=, as --set does)
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DivergenceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    csv_path, md_path = write_table(result, args.out, tag=args.tag)
    print(md_path.read_text())
    print(f"table: {csv_path}\n       {md_path}")
    return 0


def _showcase(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> int:
    if args.list or not args.name:
        for exp in EXPERIMENTS.values():
            print(f"{exp.name:<22} (chapter {exp.chapter}) {exp.question}\n{'':<24}arms: {', '.join(exp.arms)}")
        return 0 if args.list else 2
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    try:
        path = run_experiment(
            args.name,
            args.profile,
            jobs=args.jobs,
            out=args.out,
            checkpoints=args.checkpoints,
            seeds=parse_seeds(parser, args.seeds) if args.seeds else None,
            progress=not args.no_progress,
            command=command,
        )
    except (ConfigError, CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DivergenceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    print(f"results: {path}")
    return 0


def paired_table(
    results: dict[str, list[History]], reference: str | None = None, margin: float = EQUIVALENCE_MARGIN
) -> str:
    """Each method against ``reference`` (default: dfedavg if it ran, else the first method), seed by seed.

    The claim judged is "the method beats the reference" in final test
    accuracy: the paired difference (points) with its 95% t-interval and the
    verdict of :func:`dfl_book.stats.compare_paired`, EQUIVALENT within
    ±``margin`` points, and beside it the verdict that stands after Holm's
    correction over the table's comparisons (one family). Empty when fewer than 2 seeds are shared.
    """
    if not results:
        return ""
    reference = reference or ("dfedavg" if "dfedavg" in results else next(iter(results)))
    ref = {h.config["seed"]: 100 * h.final["test_acc"] for h in results[reference]}
    rows = []
    for name, hs in results.items():
        if name == reference:
            continue
        own = {h.config["seed"]: 100 * h.final["test_acc"] for h in hs}
        seeds = sorted(set(own) & set(ref))
        if len(seeds) < 2:
            return ""
        rows.append((name, compare_paired([own[s] for s in seeds], [ref[s] for s in seeds], margin=margin)))
    after = holm([c for _, c in rows])  # over one comparison, Holm leaves its verdict as it is
    head = f"{'algorithm':<14} {'Δ test acc vs ' + reference + ' (points)':>34}   {'verdict':<33} after Holm"
    lines = [
        f"Paired with {reference} seed by seed (claim: the method beats {reference}; 95% t-intervals; "
        f"EQUIVALENT: within ±{margin:g} points; after Holm: over "
        f"{'this comparison' if len(rows) == 1 else f'these {len(rows)} comparisons'}):",
        head,
        "-" * len(head),
    ]
    lines += [f"{name:<14} {c.interval():>34}   {c.verdict_note():<33} {a}" for (name, c), a in zip(rows, after)]
    if len(ref) < MIN_SEEDS:
        lines.append(f"({len(ref)} seeds: the book asks for at least {MIN_SEEDS} before calling a verdict)")
    return "\n".join(lines)


#: What ``pyproject.toml``'s entry point ``dfl_core.cli: book`` names.
EXTENSION = CliExtension(
    commands=("showcase", "table"),
    add_commands=add_commands,
    run=run,
    plot_comparison=plot_comparison,
    paired_table=paired_table,
    presets=PRESETS,
)
