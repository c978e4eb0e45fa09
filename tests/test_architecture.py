"""The engine's shape: no import cycle, narrow tools, and one entry to add a topology or an algorithm.

The examples below are deliberately small. Each is a complete extension of
the engine made with a single registry entry, then run through ``Config``,
``Simulation`` and the CLI like a built-in one.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import networkx as nx
import pytest
import torch

from dfl_core import ALGORITHMS, Config, Simulation
from dfl_core.algorithms import Algorithm, ClientModels
from dfl_core.algorithms.base import DecentralizedParams, sgd_rule
from dfl_core.cli import configs_for, main
from dfl_core.config import RUN_FIELDS, algorithm_fields
from dfl_core.topology import TOPOLOGIES, StaticTopology, TopologySpec, metropolis_hastings, MixingMatrix

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dfl_core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The modules ``path`` imports anywhere (functions included), except under ``if TYPE_CHECKING``."""
    return imported_modules(path.read_text(), module_name(path), path.name == "__init__.py")


def imported_modules(source: str, name: str, is_package: bool = False) -> set[str]:
    """What module ``name`` (its ``source``) imports, by absolute name: ``from a.b import c`` gives ``a.b``
    and ``a.b.c``; relative imports are resolved; imports inside functions count, ``if TYPE_CHECKING`` ones
    do not (they never run)."""
    tree = ast.parse(source)
    package = name.split(".") if is_package else name.split(".")[:-1]
    type_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found |= {target} | {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 30 and "dfl_core.engine.loop" in graph
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_algorithms_and_local_rules_do_not_import_the_engine():
    graph = import_graph()
    lower = [
        m
        for m in graph
        if m.startswith(
            (
                "dfl_core.algorithms",
                "dfl_core.local",
                "dfl_core.topology",
                "dfl_core.gossip",
                "dfl_core.data",
                "dfl_core.config",
            )
        )
    ]
    for module in lower:
        assert not {m for m in graph[module] if m.startswith(("dfl_core.engine", "dfl_core.distributed"))}, module


def test_algorithms_use_only_public_tools():
    """No algorithm reaches past the RoundTools protocol (``r._anything``) or into the engine's state."""
    for path in (PACKAGE / "algorithms").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "r":
                assert not node.attr.startswith("_"), f"{path.name}: r.{node.attr}"
                assert node.attr != "server", f"{path.name}: r.server (state belongs in the algorithm's state)"


SCANNED = ("dfl_core", "theory", "dfl_book", "benchmarks", "tools")

#: The layers, lowest first: a module may import its own layer and those below, never one above.
LAYERS = ("dfl_core", "theory", "dfl_book")


def layer_violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """``module -> imported module`` for every import of a higher layer (:data:`LAYERS`), inner imports included.

    ``sources`` maps a module name to its source and whether it is a package's ``__init__``.
    """
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    found = []
    for name, (source, is_package) in sources.items():
        own = rank[name.split(".")[0]]
        for target in imported_modules(source, name, is_package):
            top = target.split(".")[0]
            if top in rank and rank[top] > own:
                found.append(f"{name} -> {target}")
    return sorted(found)


def test_the_layers_import_downwards_only():
    """dfl_core ← theory ← dfl_book: the engine imports neither the theory nor the book, the theory not the book."""
    paths = [p for top in LAYERS for p in (ROOT / top).rglob("*.py")]
    sources = {module_name(p): (p.read_text(), p.name == "__init__.py") for p in paths}
    assert {"dfl_core.cli", "theory.measured", "dfl_book.plots", "dfl_book.showcase.runner"} <= set(sources)
    assert {"dfl_book.presets", "dfl_book.stats", "dfl_book.workers"} <= set(sources)  # the book's, not the engine's
    assert layer_violations(sources) == []
    inner = sum(
        isinstance(node, (ast.Import, ast.ImportFrom)) and node.col_offset > 0
        for source, _ in sources.values()
        for node in ast.walk(ast.parse(source))
    )
    assert inner > 0  # the scan sees imports inside functions too


def test_layer_scanner_finds_an_upward_import_even_inside_a_function():
    engine = "import torch\n\ndef f():\n    from dfl_book import plots\n    from ..theory import x\n"
    assert layer_violations(
        {
            "dfl_core.a": (engine, False),
            "theory.b": ("from dfl_core import Config\nimport dfl_book.tables\n", False),
            "dfl_book.c": ("from theory import claims\nfrom dfl_core import cli\n", False),
        }
    ) == [
        "dfl_core.a -> dfl_book",
        "dfl_core.a -> dfl_book.plots",
        "dfl_core.a -> theory",
        "dfl_core.a -> theory.x",
        "theory.b -> dfl_book.tables",
    ]


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str, module: str, modules: set[str], is_package: bool = False) -> list[str]:
    """Every private name (``_x``, not ``__x__``) of *another* of ``modules`` that ``source`` (module ``module``)
    uses, anywhere in the file (functions included): ``from m import _x`` (relative or absolute) and
    ``m._x`` where ``m`` was bound by ``import m``, ``import a.m as m`` or ``from a import m``."""
    tree = ast.parse(source)
    package = module.split(".") if is_package else module.split(".")[:-1]
    bound, found = {}, []  # local name -> the module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if target in modules and target != module and is_private(alias.name):
                    found.append(f"{target}.{alias.name}")
                if f"{target}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                bound[local] = alias.name if alias.asname else local
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                owner = ".".join([bound[value.id], *chain])
                if owner in modules and owner != module:
                    found.append(f"{owner}.{node.attr}")
    return found


def test_no_module_uses_a_private_name_of_another():
    paths = [p for top in SCANNED for p in (ROOT / top).rglob("*.py")]
    modules = {module_name(p) for p in paths}
    assert {"dfl_book.stats", "theory.spectral", "benchmarks.report"} <= modules
    used = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in paths
        for name in private_uses(p.read_text(), module_name(p), modules, p.name == "__init__.py")
    }
    assert used == set(), sorted(used)


def test_private_name_scanner_finds_each_form():
    modules = {"pkg", "pkg.a", "pkg.b", "other", "other.c"}
    source = """
import torch
import other.c
import other.c as oc
from other import c
from . import b
from .a import public, _hidden
from .. import __version__


def inner():
    from pkg.a import _also
    from .b import _relative
    return oc._d(), c._e(), other.c._f(), b._g, self._own, torch._foreach_add_, _local, c.__name__


_local = 1
"""
    assert sorted(private_uses(source, "pkg.m", modules)) == sorted(
        ["pkg.a._hidden", "pkg.a._also", "pkg.b._relative", "other.c._d", "other.c._e", "other.c._f", "pkg.b._g"]
    )
    assert private_uses("from . import _x\n", "pkg.a", modules) == ["pkg._x"]  # the package's own
    assert private_uses("from .a import _x\n", "pkg", modules, is_package=True) == ["pkg.a._x"]  # __init__
    assert private_uses("from .b import _x\nimport pkg.b\npkg.b._y\n", "pkg.b", modules) == []  # its own


def test_every_algorithm_declares_its_rule_state_and_defaults_in_config_fields():
    declared = set(algorithm_fields())
    for name, algo in ALGORITHMS.items():
        assert callable(algo.local_rule) and callable(algo.init) and callable(algo.round), name
        assert set(algo.defaults) <= declared, (name, set(algo.defaults) - declared)
    used = set().union(*(a.defaults for a in ALGORITHMS.values()))
    assert used == declared, declared - used  # no per-algorithm field nobody reads
    # DFedSAM and DFedAvg share their round; they differ in the declared rule (and its defaults)
    assert ALGORITHMS["dfedsam"].round is ALGORITHMS["dfedavg"].round
    assert ALGORITHMS["dfedsam"].local_rule is not ALGORITHMS["dfedavg"].local_rule


# ---------------------------------------------------------------- one entry: a topology
def path_topology(m: int, seed: int) -> StaticTopology:
    """A path 0 – 1 – … – (m−1): a ring with one edge cut, Metropolis–Hastings weights."""
    W = metropolis_hastings(nx.path_graph(m))
    return StaticTopology("path", MixingMatrix(W, "path", True, True, False, True))


def test_a_topology_is_one_entry(monkeypatch):
    monkeypatch.setitem(TOPOLOGIES, "path", TopologySpec("a path 0-1-...-(m-1), MH weights", path_topology))
    cfg = Config(algorithm="dfedavg", topology="path", num_clients=6, rounds=2)
    sim = Simulation(cfg)
    W = sim.matrices(0)[0].W
    assert W[0, 5] == 0 and W[0, 1] > 0 and 0 < sim.matrices(0)[0].lam < 1  # the cut edge, a valid W
    sim.run()
    assert len(sim.history.records) == 3
    assert "path" in {cfg.params.topology for cfg in configs_for(cfg, ["dfedavg", "dfedsam"]).values()}


# --------------------------------------------------------------- one entry: an algorithm
def gossip_first(s: ClientModels, r) -> ClientModels:
    """Average with the neighbours first, then train: x^{t+1} = LocalSGD(W x^t)."""
    return ClientModels(r.local_train(r.gossip(s.x)))


def test_an_algorithm_is_one_entry(monkeypatch, tmp_path):
    monkeypatch.setitem(
        ALGORITHMS,
        "gossip-first",
        Algorithm(
            "gossip-first",
            "gossip, then K local SGD steps",
            DecentralizedParams,
            sgd_rule,
            gossip_first,
            ClientModels.init,
        ),
    )
    cfg = Config(algorithm="gossip-first", num_clients=6, rounds=1, dtype="float64", full_batch=True)
    sim = Simulation(cfg)
    r = sim.tools()  # the first round's tools, computed aside
    expected = r.local_train(r.gossip(sim.x))
    sim.step()
    assert torch.equal(sim.x, expected)
    plain = Simulation(cfg.replace(algorithm="dfedavg"))
    plain.step()
    assert not torch.allclose(sim.x, plain.x)  # a different algorithm
    code = main(
        [
            "run",
            "--algorithms",
            "gossip-first",
            "--seeds",
            "0",
            "--num-clients",
            "6",
            "--rounds",
            "2",
            "--no-plot",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0 and (tmp_path / "results.json").exists()


def test_config_fields_carry_their_allowed_values():
    """Validation ranges live beside the fields: every number and name field says what it allows, and so
    does every algorithm's hyperparameter."""
    unchecked = {name for name, f in RUN_FIELDS.items() if f.metadata.get("allowed") is None}
    assert unchecked == {"data_dir"}  # a folder: checked when the data is read
    assert all(f.metadata.get("allowed") is not None for f in algorithm_fields().values())
    with pytest.raises(ValueError, match=r"fedgf_window must be >= 1, got 0"):
        Config(algorithm="fedgf", fedgf_threshold=1.0, fedgf_window=0)


def test_the_architecture_page_names_files_and_symbols_that_exist():
    """The architecture page's diagram and table (docs/architecture.md, linked from the README's Architecture
    section) stay true to the code: every path exists, and every symbol named beside a path is defined in
    that file."""
    import re

    section = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"\b((?:dfl_core|dfl_book|tests)/[\w/]*(?:\.py)?)", section))
    assert len(paths) >= 10
    for path in paths:
        assert (ROOT / path).exists(), path
    for row in [line for line in section.splitlines() if line.startswith("|") and "dfl_core/" in line]:
        files = [ROOT / p for p in re.findall(r"`((?:dfl_core|dfl_book|tests)/[\w/]+\.py)`", row)]
        names = [n for n in re.findall(r"`(\w+)`", row) if not n.endswith("py")]
        for name in names:
            pattern = re.compile(rf"^\s*(def|class)\s+{name}\b|^\s*{name}\s*[:=]|^{name} = ", re.M)
            assert any(pattern.search(f.read_text()) for f in files if f.is_file()), (name, row)


def test_every_hyperparameter_is_declared_once():
    """A hyperparameter's default, help and allowed values are declared in one place: one ``name: type =
    setting(...)`` line in the algorithms (subclasses only change a default), none in the Config."""
    import re

    declared: dict[str, list[str]] = {}
    for path in sorted((ROOT / "dfl_core").rglob("*.py")):
        for name in re.findall(r"^\s+(\w+): [^=\n]+ = setting\(", path.read_text(), re.M):
            declared.setdefault(name, []).append(str(path.relative_to(ROOT)))
    twice = {name: where for name, where in declared.items() if len(where) > 1}
    assert not twice, twice
    assert declared["rho"] == ["dfl_core/algorithms/base.py"]
    per_algorithm = set(algorithm_fields())
    assert per_algorithm <= set(declared) and not per_algorithm & set(RUN_FIELDS)
    for algorithm in ALGORITHMS.values():  # an override keeps the declaration's help and check
        assert all(f.metadata.get("help") and f.metadata.get("allowed") for f in fields(algorithm.params))


# ------------------------------------------------------------------ one round, readable
#: The most frames of dfl_core between ``drive`` and the model's loss and gradient in a DFedSAM round.
ROUND_DEPTH = 7


def traced_round_path() -> list[tuple[str, str]]:
    """``(file under dfl_core, function's qualified name)`` of every dfl_core frame from :func:`drive` down to
    :meth:`StackedModel.loss_and_grad`, at the first loss-and-gradient of one DFedSAM round."""
    import inspect

    from dfl_core.stacked import StackedModel

    stacks = []
    real = StackedModel.loss_and_grad

    def spy(self, *args, **kwargs):
        stacks.append([(Path(f.filename).resolve(), f.frame.f_code.co_qualname) for f in inspect.stack()])
        return real(self, *args, **kwargs)

    cfg = Config(
        algorithm="dfedsam", dataset="digits", num_clients=4, rounds=1, local_steps=1, train_size=200, test_size=100
    )
    sim = Simulation(cfg)
    StackedModel.loss_and_grad = spy
    try:
        sim.run()
    finally:
        StackedModel.loss_and_grad = real
    stack = stacks[0]  # innermost first: the spy, standing in for loss_and_grad
    drive = [name for _, name in stack].index("drive")
    callers = [
        (str(path.relative_to(PACKAGE)), name)
        for path, name in reversed(stack[1 : drive + 1])
        if PACKAGE in path.parents
    ]
    return callers + [("stacked.py", "StackedModel.loss_and_grad")]


def documented_round_path() -> list[tuple[str, str]]:
    """The path the docstring of :mod:`dfl_core.engine.loop` states, as ``(file, qualified name)``."""
    import dfl_core.engine.loop as loop

    block = loop.__doc__.split("traces it and fails if it changes)::")[1].split("\n\n")[1]
    return [(line.split()[1], line.split()[0]) for line in block.splitlines() if line.strip()]


def test_one_round_reaches_the_gradient_in_a_few_documented_calls():
    """From ``drive`` to the model's loss and gradient, a DFedSAM round passes through the functions that
    ``dfl_core/engine/loop.py``'s docstring lists, in order, and no more than :data:`ROUND_DEPTH` in between. A
    new layer (a pass-through included) fails here: document it, or better, leave it out."""
    path = traced_round_path()
    assert path == documented_round_path()
    assert path[0] == ("engine/loop.py", "drive") and path[-1] == ("stacked.py", "StackedModel.loss_and_grad")
    assert len(path) - 2 <= ROUND_DEPTH, path


# ------------------------------------------------------------------ class sizes
MAX_CLASS_LINES = 250

#: Classes of dfl_core still over :data:`MAX_CLASS_LINES`, each with the change that brings it under. The test
#: fails when one of them is no longer over (delete its entry then), so this list only shrinks.
STILL_OVER: dict[tuple[str, str], str] = {}


def long_classes(source: str, limit: int = MAX_CLASS_LINES) -> list[tuple[str, int]]:
    """``(name, lines)`` of every class in ``source`` longer than ``limit`` lines (decorators not counted)."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_class_in_dfl_core_is_over_250_lines():
    over = {
        (str(p.relative_to(ROOT)), name): lines
        for p in PACKAGE.rglob("*.py")
        for name, lines in long_classes(p.read_text())
    }
    assert set(over) - set(STILL_OVER) == set(), f"classes over {MAX_CLASS_LINES} lines: {over}; split them"
    assert set(STILL_OVER) - set(over) == set(), "no longer over the limit: delete these entries of STILL_OVER"


def test_the_class_size_check_counts_a_long_class():
    source = "class Big:\n" + "    x = 1\n" * 300 + "\n\nclass Small:\n    pass\n"
    assert long_classes(source) == [("Big", 301)]
