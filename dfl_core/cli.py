"""Command line: ``python -m dfl_core run …``, ``python -m dfl_core list`` and
``python -m dfl_core convert-results OLD.json [-o NEW.json]`` (a results file of an earlier version, converted once).

With no options, ``run`` performs the default comparison: D-PSGD, DFedAvg, DFedAvgM, DFedSAM and DFedSAM-MGS (Q = 4)
on 20 clients of the bundled digits data (Dirichlet 0.3, ring, 2NN, K = 5, 30 rounds), 5 seeds each. It prints the
final test accuracy and consensus distance as mean ± std over seeds, then (with the book's package installed) each
method's per-seed paired difference from DFedAvg with its 95% interval and verdict, before and after Holm's correction
over the comparisons (``dfl_book.cli.paired_table``),
writes a JSON results file (schema in :mod:`dfl_core.results`) and a plot.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import re
from dataclasses import dataclass, field
import shlex
import statistics
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tqdm import tqdm

from .algorithms import ALGORITHMS
from .config import RUN_FIELDS, Config, ConfigError, algorithm_fields, check_int
from .data import DATASETS, PARTITIONS, DataError, register_image_folder
from .data.augment import AUGMENTATIONS
from .data.imagefiles import LAYOUT as IMAGE_FOLDER_LAYOUT
from .engine import DivergenceError, run
from .models import MODEL_HELP
from .checkpoint import CheckpointError
from .results import History, convert_results_file, read_results, write_results
from .topology import TOPOLOGIES

__all__ = [
    "main",
    "DEFAULT_ALGORITHMS",
    "DEFAULT_SEEDS",
    "compare",
    "summary_table",
    "add_config_arguments",
    "config_overrides",
    "configs_from_options",
    "parse_value",
    "parse_names",
    "parse_seeds",
    "CliExtension",
    "cli_extensions",
    "cli_presets",
    "find_preset",
    "EXTENSION_GROUP",
]

#: The entry-point group through which installed packages add commands (and ``run``'s presets, figure and
#: verdicts) to this CLI.
EXTENSION_GROUP = "dfl_core.cli"


@dataclass(frozen=True)
class CliExtension:
    """Commands another package adds to ``python -m dfl_core`` (the book's ``showcase`` and ``table``).

    ``add_commands(subparsers)`` adds their parsers; ``run(name, parser, args, command)`` runs one and returns the
    exit code; ``plot_comparison(results, path)`` (optional) draws ``run``'s figure; ``paired_table(results)``
    (optional) is the text of ``run``'s paired verdicts ("" for none); ``presets`` (name -> preset) are what
    ``--preset`` starts from: each has ``description``, ``settings``, ``algorithms`` and
    ``config(algorithm, setting, **changes)`` (the book's ``dfl_book.presets.Preset``). The engine finds extensions
    by entry point (group :data:`EXTENSION_GROUP`), so it imports no package above it.
    """

    commands: tuple[str, ...]
    add_commands: Callable[[Any], None]
    run: Callable[..., int]
    plot_comparison: Callable[[dict, Path], Path] | None = None
    paired_table: Callable[[dict], str] | None = None
    presets: Mapping[str, Any] = field(default_factory=dict)


@functools.cache
def cli_extensions() -> tuple[CliExtension, ...]:
    """The installed extensions of this CLI, in entry-point name order (``dfl_book``'s when the book is installed)."""
    return tuple(ep.load() for ep in sorted(entry_points(group=EXTENSION_GROUP), key=lambda ep: ep.name))


def cli_presets() -> dict[str, Any]:
    """The presets of the installed extensions by name (the papers' presets, when the book is installed)."""
    return {name: preset for extension in cli_extensions() for name, preset in extension.presets.items()}


def find_preset(name: str) -> Any:
    """The installed preset ``name`` (:func:`cli_presets`), for ``--preset``.

    :class:`ConfigError` when no extension brings presets, :class:`ValueError` listing the allowed names
    when none is called ``name``.
    """
    presets = cli_presets()
    if not presets:
        raise ConfigError(
            f"--preset {name}: no presets; the papers' presets come with the book's package, "
            "dfl_book, which is not installed"
        )
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(presets)}")
    return presets[name]


#: ``--dataset imagefolder --data-dir DIR``: the user's own images, registered under this name before the configs are
#: built (:func:`dfl_core.data.register_image_folder`), so that ``Config`` sees their sizes.
IMAGE_FOLDER = "imagefolder"
_IMAGE_FOLDER_HELP = (
    f"your own images, DIR/train/<class>/<image> and DIR/test/<class>/<image>: --dataset "
    f"{IMAGE_FOLDER} --data-dir DIR (one image size, classes from the folder names; see "
    "--image-normalization, --image-augmentation). CIFAR-10 as image files: --dataset cifar10 "
    "--data-dir DIR"
)

DEFAULT_ALGORITHMS = ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam-mgs")
DEFAULT_SEEDS = (0, 1, 2, 3, 4)  # the book's rule: a verdict needs 5 seeds (dfl_book.stats.MIN_SEEDS)


def _catalogue() -> str:
    def block(title: str, items: dict[str, Any]) -> str:
        lines = [f"  {name:<22} {getattr(v, 'summary', v)}" for name, v in items.items()]
        return f"{title}:\n" + "\n".join(lines)

    return "\n\n".join(
        [
            block("algorithms", ALGORITHMS),
            block("topologies", TOPOLOGIES),
            block("datasets", DATASETS | {IMAGE_FOLDER: _IMAGE_FOLDER_HELP}),
            block("models", MODEL_HELP),
            block("partitions", PARTITIONS),
            block(
                "presets (--preset; --setting one of the listed columns)",
                {p.name: f"{p.description} [settings: {', '.join(p.settings)}]" for p in cli_presets().values()}
                or {"none": "the papers' presets come with the book's package, dfl_book, which is not installed"},
            ),
        ]
    )


#: The spellings of true and false on the command line, and how numbers are read (with what they must be).
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
_NUMBERS = {"int": (int, "an integer"), "float": (float, "a number")}


def parse_value(text: str, annotation: str) -> Any:
    """Parse a command-line string by the dataclass field's annotation."""
    if "None" in annotation and text.lower() in ("none", "null", ""):
        return None
    base = annotation.replace("| None", "").strip()
    if base == "bool":
        if text.lower() not in _BOOLEANS:
            raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
        return _BOOLEANS[text.lower()]
    if base in _NUMBERS:
        parse, expected = _NUMBERS[base]
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    return text


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dfl_core",
        description="Simulate decentralized federated learning (DFedSAM and friends) on one machine.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run one algorithm or a comparison, over several seeds",
        description=(
            "Run algorithms over seeds; with no options, the default comparison of "
            + ", ".join(DEFAULT_ALGORITHMS)
            + " over seeds 0,1,2,3,4 on the bundled digits data."
        ),
        epilog=_catalogue(),
    )
    run.add_argument(
        "--algorithms",
        "--algorithm",
        default=None,
        help="comma-separated algorithm names (default: " + ",".join(DEFAULT_ALGORITHMS) + ", or the preset's rows)",
    )
    run.add_argument(
        "--preset", default=None, help="start from a paper's setting (see the list below); other options override it"
    )
    run.add_argument("--setting", default=None, help="the preset's column, e.g. dir0.6 or iid")
    run.add_argument(
        "--seeds", default=",".join(map(str, DEFAULT_SEEDS)), help="comma-separated seeds (default: %(default)s)"
    )
    run.add_argument(
        "--out",
        default="dfl_results",
        help="folder for results.json, the plot and the checkpoints; one that already holds "
        "results is refused unless --overwrite or --resume (default: %(default)s)",
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results already in OUT (they stay until this command's first run is saved)",
    )
    run.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument(
        "--checkpoint-every",
        type=int,
        default=10,
        metavar="N",
        help="save each run's state to OUT/checkpoints every N rounds (default: %(default)s)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted invocation with the same options: finished runs are read "
        "from OUT/results.json, unfinished ones continue from OUT/checkpoints",
    )
    run.add_argument(
        "--image-normalization",
        default=None,
        choices=("train", "none"),
        help=f"--dataset {IMAGE_FOLDER} only: normalize each channel by the train split's mean and std "
        "(train, the default) or keep pixels in [0, 1] (none)",
    )
    run.add_argument(
        "--image-augmentation",
        default=None,
        choices=("none", *AUGMENTATIONS),
        help=f"--dataset {IMAGE_FOLDER} only: training augmentation (default: none; crop-flip is the "
        "CIFAR papers' random 4-pixel crop and horizontal flip)",
    )
    add_config_arguments(run)
    sub.add_parser("list", help="list algorithms, topologies, datasets, models and partitions")
    convert = sub.add_parser(
        "convert-results",
        help="convert a results file written by an earlier version to this version's configs",
        description="Rewrite every run's config of a results file written by an earlier version (a CLI results.json "
        "or a showcase results file) in this version's form (dfl_core.results.convert_results): "
        "hyperparameters the run's algorithm does not read dropped, renamed quant_mixing readings "
        "under their current names, fields added since at their defaults. Histories, provenance and "
        "every number are kept; a file already current is left as it is.",
    )
    convert.add_argument("path", metavar="OLD.json", help="the results file to convert")
    convert.add_argument(
        "-o",
        "--out",
        metavar="NEW.json",
        default=None,
        help="write the converted file here (default: replace OLD.json, atomically)",
    )
    for extension in cli_extensions():  # e.g. the book's showcase and table commands
        extension.add_commands(sub)
    return parser


def add_config_arguments(parser: argparse.ArgumentParser, skip: Sequence[str] = ("algorithm", "seed")) -> None:
    """One ``--field-name`` option per run field of :class:`Config` and per hyperparameter of any algorithm
    (except ``skip``), each from its declaration (help, type, default); unset options stay absent.

    Shared with the distributed launcher (``python -m dfl_core.distributed``), so both take the same config options.
    """
    # the live registry, not a copy taken at import: an algorithm registered since then gets its options too
    per_algorithm = algorithm_fields()
    declared = {"algorithm": dataclasses.fields(Config)[0], **RUN_FIELDS, **per_algorithm}
    for name, f in declared.items():
        if name in skip:
            continue
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            metavar=f.type.split()[0].upper(),
            type=lambda s, a=f.type: parse_value(s, a),
            default=argparse.SUPPRESS,
            help=_help_with_default(f, per_algorithm),
        )


#: What an unset (None) field that no algorithm sets means, where its help does not say.
_UNSET = {"train_size": "all", "test_size": "all"}


def _help_with_default(f: dataclasses.Field, per_algorithm: Mapping[str, dataclasses.Field]) -> str:
    """A field's help with exactly one default: its own words if it names one, else ``(default: ...)``.

    A hyperparameter's defaults are read from the algorithms that use it, grouped by value when they differ;
    ``per_algorithm`` holds every algorithm's hyperparameters (:func:`algorithm_fields`).
    """
    text = f.metadata.get("help", "")
    if re.search(r"(?<!code's )\bdefault\b|\brequired\b", text):
        return text  # the help names its default (a public code's does not count)

    def shown(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    if f.name not in per_algorithm:
        default = "unset" if f.default is None else shown(f.default)
        return f"{text} (default: {_UNSET.get(f.name, default)})"
    by_value: dict[str, list[str]] = {}
    for name, algorithm in ALGORITHMS.items():
        if f.name in algorithm.defaults:
            by_value.setdefault(shown(algorithm.defaults[f.name]), []).append(name)
    if len(by_value) == 1:
        value = next(iter(by_value))
        return f"{text} (default: {'unset' if value == 'None' else value})"
    groups = "; ".join(f"{value} for {', '.join(names)}" for value, names in by_value.items())
    return f"{text} (default: {groups})"


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The run fields and hyperparameters given on the command line (by :func:`add_config_arguments`)."""
    names = ("algorithm", "seed", *RUN_FIELDS, *algorithm_fields())
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def configs_from_options(
    preset: str | None, setting: str | None, algorithms: Sequence[str], overrides: Mapping[str, Any]
) -> dict[str, Config]:
    """One config per algorithm, as ``run`` and the distributed launcher build them from their options.

    With ``preset``, its config for ``setting`` (its rows when ``algorithms`` is empty); else
    :func:`configs_for` (default: :data:`DEFAULT_ALGORITHMS`); ``overrides`` change either.
    """
    if preset:
        found = find_preset(preset)
        return {a: found.config(a, setting, **overrides) for a in algorithms or found.algorithms}
    if setting:
        raise ConfigError("--setting needs --preset")
    return configs_for(overrides, algorithms or DEFAULT_ALGORITHMS)


def configs_for(base: Config | Mapping[str, Any], algorithms: Sequence[str]) -> dict[str, Config]:
    """One config per algorithm from ``base`` (a config, or the settings given: run fields and hyperparameters).

    When several algorithms are compared, each takes the hyperparameters it uses (say ``rho``, not for DFedAvg) and
    can set (``local_steps`` or ``local_epochs``, not for D-PSGD, which takes one step a round); one that no compared
    algorithm uses is refused, as is, for a single algorithm, one it does not use (as :class:`Config` refuses it).
    """
    settings = dict(base.settings() if isinstance(base, Config) else base)
    settings.pop("algorithm", None)
    unknown = [name for name in algorithms if name not in ALGORITHMS]
    if unknown:
        raise ConfigError(f"unknown algorithm {unknown[0]!r}; allowed: {', '.join(ALGORITHMS)}")
    if len(algorithms) == 1:
        return {algorithms[0]: Config(algorithm=algorithms[0], **settings)}
    per_algorithm = algorithm_fields()

    def takes(name: str, key: str) -> bool:
        algorithm = ALGORITHMS[name]
        if key == "local_epochs":  # a run field that sets K
            return "local_steps" not in algorithm.fixed
        return key not in per_algorithm or (key in algorithm.defaults and key not in algorithm.fixed)

    for key, value in settings.items():
        if value is not None and not any(takes(name, key) for name in algorithms):
            users = ", ".join(a.name for a in ALGORITHMS.values() if key in a.defaults and key not in a.fixed)
            raise ConfigError(
                f"{key}={value} is used by none of the algorithms compared ({', '.join(algorithms)}); "
                f"algorithms that use it: {users or 'none'}"
            )
    return {
        name: Config(algorithm=name, **{k: v for k, v in settings.items() if takes(name, k)}) for name in algorithms
    }


def compare(
    configs: dict[str, Config],
    seeds: Sequence[int],
    progress: bool = True,
    checkpoints: Path | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    done: dict[tuple[str, int], History] | None = None,
    on_run_done: Callable[[dict[str, list[History]]], None] | None = None,
) -> dict[str, list[History]]:
    """Run every config for every seed; every config is validated before anything runs.

    With ``checkpoints`` (a folder), each run saves ``<algorithm>-seed<seed>.pt`` there every ``checkpoint_every``
    rounds; with ``resume`` a run continues from its file, and runs found in ``done`` (keyed by algorithm and seed,
    with the same config) are not rerun. ``on_run_done`` sees the results so far after every finished run (the CLI
    writes its results file there).
    """
    runs = [cfg.replace(seed=seed) for cfg in configs.values() for seed in seeds]
    out: dict[str, list[History]] = {name: [] for name in configs}
    for cfg in tqdm(runs, desc="runs", disable=not progress):
        previous = (done or {}).get((cfg.algorithm, cfg.seed))
        if previous is not None and previous.config == cfg.to_dict():
            out[cfg.algorithm].append(previous)
            continue
        path = checkpoints / f"{cfg.algorithm}-seed{cfg.seed}.pt" if checkpoints is not None else None
        out[cfg.algorithm].append(
            run(cfg, progress=progress, checkpoint=path, checkpoint_every=checkpoint_every, resume=resume)
        )
        if on_run_done is not None:
            on_run_done(out)
        if path is not None:
            path.unlink(missing_ok=True)  # the results file now holds this run
    return out


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summary_table(results: dict[str, list[History]]) -> str:
    """Final test accuracy (%) and consensus distance, mean ± std over seeds (no spread for one seed)."""
    head = f"{'algorithm':<14} {'Q':>2} {'test acc (%)':>16} {'consensus distance':>24} {'seeds':>6}"
    lines = [head, "-" * len(head)]
    for name, hs in results.items():
        acc = _mean_std([100 * h.final["test_acc"] for h in hs])
        cd = _mean_std([h.final["consensus_distance"] for h in hs])
        q = hs[0].config.get("gossip_steps") or "-"  # a server has no gossip
        if len(hs) > 1:
            acc_text, cd_text = f"{acc[0]:>9.2f} ± {acc[1]:<5.2f}", f"{cd[0]:>12.3e} ± {cd[1]:<9.2e}"
        else:  # one seed has no spread: print none, not "± 0.00"
            acc_text, cd_text = f"{acc[0]:>9.2f}" + " " * 8, f"{cd[0]:>12.3e}" + " " * 12
        lines.append(f"{name:<14} {q:>2} {acc_text} {cd_text} {len(hs):>6}")
    lines += [
        "test acc: the clients' average model x̄ (with a server: the global model) on the test split, last round;",
        "consensus distance: the mean squared distance of the clients' models from x̄; Q: gossip steps a round.",
    ]
    return "\n".join(lines)


def parse_names(text: str | None) -> list[str]:
    return [a.strip() for a in (text or "").split(",") if a.strip()]


def parse_seeds(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers, got {text!r}")
    if not seeds:
        parser.error(f"--seeds needs at least one seed (comma-separated integers), got {text!r}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        parser.error(
            f"--seeds repeats seed {', '.join(map(str, repeated))}: a seed given twice is the same run twice; "
            f"give each seed once, got {text!r}"
        )
    return seeds


def _in_flags(message: str) -> str:
    """An error's message with each config field it spells as in Python (``data_dir=``, ``lr must be``) spelt as
    its flag.

    The data layer and :class:`Config` speak the Python API's language (``load_dataset(..., data_dir=...)``,
    ``Config(train_size=...)``, "lr must be in (0.0, inf)"); on the command line the same value was given as
    ``--data-dir``, ``--train-size`` or ``--lr``.
    """
    fields = "|".join([*RUN_FIELDS, *algorithm_fields()])
    message = re.sub(
        rf"\b({fields})=(\S?)",
        lambda m: "--" + m.group(1).replace("_", "-") + (" " + m.group(2) if m.group(2) else ""),
        message,
    )
    return re.sub(rf"(?<![-\w])({fields}) must be\b", lambda m: f"--{m.group(1).replace('_', '-')} must be", message)


#: Files a run writes into OUT; finding one there means an earlier invocation used the folder.
_RESULT_FILES = ("results.json", "comparison.png")


def check_out_options(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse ``--resume`` with ``--overwrite``, and an ``--out`` that is a file (also the distributed backend's
    check)."""
    if resume and overwrite:
        raise ConfigError(
            "--resume and --overwrite contradict each other: --resume continues the earlier run in --out, "
            "--overwrite replaces it"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")


def make_out_folder(out: Path) -> bool:
    """Create ``out`` and check that a file can be written there, before anything runs (also the distributed
    backend's check); returns whether it was created."""
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise ConfigError(f"cannot write --out {str(out)!r}: {err.strerror or err}") from None
    return created


def used_folder_refusal(out: Path, files: list[str], checkpoints: list[Path]) -> str:
    """Why ``out``, which holds an earlier run's ``files`` and ``checkpoints``, is not written over, and the three
    ways on (also the distributed backend's message)."""
    if files:
        held = ", ".join(files) + (" and the checkpoints of an interrupted run" if checkpoints else "")
        return (
            f"{out} already holds {held} from an earlier run; pass --out DIR for a new folder, --overwrite "
            "to replace them, or --resume to continue that run with the same options"
        )
    names = ", ".join(p.name for p in checkpoints[:3]) + (", ..." if len(checkpoints) > 3 else "")
    return (
        f"{out} holds the checkpoints of an interrupted run (checkpoints/{names}); pass --resume to continue "
        "it with the same options, --out DIR for a new folder, or --overwrite to start afresh"
    )


#: The run options that only some partitions read.
_PARTITION_FIELDS = {"dirichlet": ("alpha", "dirichlet_method"), "shards": ("shards_per_client",)}


def _check_given_options_apply(given: Mapping[str, Any], configs: Mapping[str, Config]) -> None:
    """Refuse a run option given on the command line that none of the runs reads (``--degree`` on a ring, ``--alpha``
    with ``--partition iid``), as a hyperparameter that no algorithm reads is refused."""
    optional = {f for fs in _PARTITION_FIELDS.values() for f in fs} | set().union(
        *(t.config_fields for t in TOPOLOGIES.values())
    )
    read: set[str] = set()
    for cfg in configs.values():
        topology = TOPOLOGIES.get(getattr(cfg.params, "topology", None))  # None: a server
        read |= topology.config_fields if topology else set()
        read |= set(_PARTITION_FIELDS.get(cfg.partition, ()))
    for name in sorted((optional & set(given)) - read):
        readers = [f"--topology {t}" for t, spec in TOPOLOGIES.items() if name in spec.config_fields]
        readers += [f"--partition {p}" for p, fs in _PARTITION_FIELDS.items() if name in fs]
        runs = {
            f"--topology {c.params.topology}" if hasattr(c.params, "topology") else "a server" for c in configs.values()
        }
        runs |= {f"--partition {c.partition}" for c in configs.values()}
        raise ConfigError(
            f"--{name.replace('_', '-')} {given[name]} has no effect on these runs ({', '.join(sorted(runs))}); "
            f"it applies to {' or '.join(readers)}"
        )


def _check_resumable(
    path: Path, done: Mapping[tuple[str, int], History], configs: Mapping[str, Config], seeds: Sequence[int]
) -> None:
    """Refuse to resume into a results file whose runs this command would not keep: one of another algorithm or
    seed, or of the same ones with other options (the results file would lose it)."""
    for (algorithm, seed), history in done.items():
        if algorithm not in configs or seed not in seeds:
            raise ConfigError(
                f"--resume: {path} holds a run ({algorithm}, seed {seed}) that this command does not ask for; "
                "give the same --algorithms and --seeds as the command that made it, or --out DIR for a new folder"
            )
        wanted = configs[algorithm].replace(seed=seed).to_dict()
        differ = [k for k in wanted if history.config.get(k) != wanted[k]]
        if differ:
            k = differ[0]
            raise ConfigError(
                f"--resume: {path}'s run ({algorithm}, seed {seed}) has {k}={history.config.get(k)!r}, this command "
                f"asks {k}={wanted[k]!r}; give the same options as the command that made it, or --out DIR for a "
                "new folder"
            )


def _register_folder_dataset(args: argparse.Namespace, overrides: Mapping[str, Any]) -> None:
    """``--dataset imagefolder --data-dir DIR``: register DIR as the dataset ``imagefolder`` (with the
    ``--image-*`` options); those options without it are refused."""
    image_options = [
        f"--image-{name}"
        for name in ("normalization", "augmentation")
        if getattr(args, f"image_{name}", None) is not None
    ]
    if overrides.get("dataset") != IMAGE_FOLDER:
        if image_options:
            raise ConfigError(
                f"{', '.join(image_options)} apply to --dataset {IMAGE_FOLDER} only; the built-in "
                "datasets carry their own normalization and augmentation"
            )
        return
    if not overrides.get("data_dir"):
        raise DataError(f"--dataset {IMAGE_FOLDER} needs data_dir= a folder holding {IMAGE_FOLDER_LAYOUT}")
    augmentation = args.image_augmentation if args.image_augmentation not in (None, "none") else None
    register_image_folder(
        overrides["data_dir"],
        IMAGE_FOLDER,
        normalization=args.image_normalization or "train",
        augmentation=augmentation,
    )


def _convert_results(path: str, out: str | None) -> int:
    """``convert-results OLD.json [-o NEW.json]``: :func:`dfl_core.results.convert_results_file`."""
    try:
        written, changed = convert_results_file(path, out)
    except (OSError, ValueError, KeyError, TypeError) as err:  # ConfigError is a ValueError
        print(f"error: cannot convert {path}: {err}", file=sys.stderr)
        return 2
    print(f"{written}: {changed} run config(s) converted")
    return 0


@dataclass
class _OutFolder:
    """``run``'s ``--out`` folder: what an earlier invocation left there, and this command's writes to it."""

    path: Path
    to_replace: list[Path] = field(default_factory=list)  # --overwrite: they go once the first run is saved
    created: bool = False

    def check(self, resume: bool, overwrite: bool) -> list[Path]:
        """Refuse a folder an earlier run used unless ``--resume`` or ``--overwrite``; the interrupted run's
        checkpoints found there."""
        out = self.path
        check_out_options(out, resume, overwrite)
        earlier = [name for name in _RESULT_FILES if (out / name).exists()]  # left by an earlier invocation
        stale = sorted((out / "checkpoints").glob("*-seed*.pt")) if (out / "checkpoints").is_dir() else []
        if (earlier or stale) and not (resume or overwrite):
            raise ConfigError(used_folder_refusal(out, earlier, stale))
        # --overwrite: the earlier files go once this command's first run is saved, not before (a bad option or a
        # diverging first run leaves them as they were).
        if overwrite:
            self.to_replace = [out / name for name in earlier if name != "results.json"] + stale
        return stale

    def finished_runs(
        self, resume: bool, stale: list[Path], configs: Mapping[str, Config], seeds: Sequence[int]
    ) -> dict[tuple[str, int], History]:
        """``--resume``: the runs the folder's results file holds, checked to be this command's."""
        path = self.path / "results.json"
        if not resume:
            return {}
        if not path.exists():
            if not stale:
                print(f"note: --resume: {self.path} holds no earlier run; starting afresh", file=sys.stderr)
            return {}
        try:
            earlier_runs = read_results(path)
        except (OSError, ValueError) as err:  # not a results file (the message names the path and why)
            raise ConfigError(f"--resume: cannot continue from {path}: {err}") from None
        done = {(h.config["algorithm"], h.config["seed"]): h for h in earlier_runs}
        _check_resumable(path, done, configs, seeds)
        return done

    def make(self) -> None:
        """Create the folder before the first run trains, not when its results are saved."""
        self.created = make_out_folder(self.path)

    def save(self, results_so_far: dict[str, list[History]], command: str) -> None:
        """Write the results file after every run (an interruption loses at most one run's rounds)."""
        write_results(self.path / "results.json", [h for hs in results_so_far.values() for h in hs], command=command)
        while self.to_replace:  # (results.json itself was just replaced)
            self.to_replace.pop().unlink(missing_ok=True)

    def remove_if_unused(self) -> None:
        """A folder this command made and left empty goes again (after an error)."""
        if self.created:
            for folder in (self.path / "checkpoints", self.path):
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _run_configs(args: argparse.Namespace) -> dict[str, Config]:
    """The config of every algorithm ``run`` compares, from the command line's preset, setting and options."""
    overrides = config_overrides(args)
    dataset = overrides.get("dataset")
    if dataset is not None and dataset not in DATASETS and dataset != IMAGE_FOLDER:
        raise ConfigError(
            f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}, or {IMAGE_FOLDER} with --data-dir DIR "
            "(your own images)"
        )
    _register_folder_dataset(args, overrides)
    algorithms = parse_names(args.algorithms)
    if args.algorithms is not None and not algorithms:
        raise ConfigError(
            f"--algorithms is empty; give one or more of {', '.join(ALGORITHMS)} (comma-separated), or leave "
            "it out for the default comparison"
        )
    configs = configs_from_options(args.preset, args.setting, algorithms, overrides)
    _check_given_options_apply(overrides, configs)
    check_int("--checkpoint-every", args.checkpoint_every, 1)
    return configs


def _report(results: dict[str, list[History]], out: Path, plot: bool) -> None:
    """Print the summary table, the paired verdicts and where the results file and the figure are."""
    print(summary_table(results))
    if len(results) > 1:
        tables = [e.paired_table for e in cli_extensions() if e.paired_table is not None]
        if not tables:
            print("\npaired verdicts: none (they come with the book's package, dfl_book, which is not installed)")
        elif paired := tables[0](results):
            print("\n" + paired)
    print(f"\nresults: {out / 'results.json'}")
    if plot:
        figures = [e.plot_comparison for e in cli_extensions() if e.plot_comparison is not None]
        if figures:
            print(f"plot:    {figures[0](results, out / 'comparison.png')}")
        else:
            print("plot:    none (the figure comes with the book's package, dfl_book, which is not installed)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    command = "python -m dfl_core " + shlex.join(argv)  # as given, for the results' provenance
    if args.command == "list":
        print(_catalogue())
        return 0
    if args.command == "convert-results":
        return _convert_results(args.path, args.out)
    for extension in cli_extensions():
        if args.command in extension.commands:
            return extension.run(args.command, parser, args, command)
    seeds = parse_seeds(parser, args.seeds)
    folder = _OutFolder(Path(args.out))
    try:
        stale = folder.check(args.resume, args.overwrite)
        configs = _run_configs(args)
        done = folder.finished_runs(args.resume, stale, configs, seeds)
        folder.make()
        results = compare(
            configs,
            seeds,
            progress=not args.no_progress,
            checkpoints=folder.path / "checkpoints",
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            done=done,
            on_run_done=lambda results_so_far: folder.save(results_so_far, command),
        )
    except (ConfigError, CheckpointError, DataError, ValueError) as err:  # topology/data errors are ValueErrors too
        print(f"error: {_in_flags(str(err))}", file=sys.stderr)  # spelt with this command line's flags
        folder.remove_if_unused()
        return 2
    except DivergenceError as err:
        print(f"error: {err}", file=sys.stderr)
        folder.remove_if_unused()
        return 3
    except KeyboardInterrupt:
        out = folder.path
        finished = f"the finished runs are in {out / 'results.json'} and " if (out / "results.json").exists() else ""
        print(
            f"\ninterrupted: {finished}the running one's state is in {out / 'checkpoints'}; "
            "the same command with --resume continues",
            file=sys.stderr,
        )
        return 130
    folder.save(results, command)
    with contextlib.suppress(OSError):
        (folder.path / "checkpoints").rmdir()  # empty once every run has finished
    _report(results, folder.path, plot=not args.no_plot)
    return 0
