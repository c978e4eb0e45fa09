"""pyproject.toml and environment.yml list the same dependencies; nothing reads ../shared."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # conda-forge's name for the same package


def _norm(spec: str) -> str:
    return re.sub(r"\s+", "", spec).lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = list(project["dependencies"]) + extras["test"] + extras["book"] + extras["lint"]
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    listed = {
        _norm(line.strip()[2:])
        for line in text.splitlines()
        if line.strip().startswith("- ") and not line.strip().startswith("- -")
    }
    expected = set()
    for spec in wanted:
        name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0)
        expected.add(_norm(spec.replace(name, CONDA_NAMES.get(name, name), 1)))
    assert expected - listed == set(), f"in pyproject but not environment.yml: {expected - listed}"
    extra = {s for s in listed if not s.startswith(("python", "pip", "-e"))} - expected
    assert extra == set(), f"in environment.yml but not pyproject: {extra}"


def test_repository_url_is_kept_in_one_place():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    url = project["urls"]["Repository"]
    assert url.startswith("https://")


def test_nothing_in_the_repository_reads_shared():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    offenders = [
        f
        for f in files
        if f.endswith((".py", ".md", ".toml", ".yml", ".sh", ".cfg"))
        and f != "tests/test_packaging.py"
        and "../shared" in (ROOT / f).read_text(errors="ignore")
    ]
    assert offenders == []
