"""The engine's malloc settings (dfl_core/engine/allocator.py): applied once, opt-out, and they stop page faults."""
import json
import os
import platform
import subprocess
import sys

import pytest

from dfl_core.engine import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# 2NN rounds at m = 20 in a fresh process (the settings are process-wide): the minor page faults of
# rounds 6-8. With the settings the heap grows for a few rounds, then serves every step from freed memory.
ROUND_FAULTS = """
import json, resource, sys
from benchmarks.round import engine_config, synthetic_data
from dfl_core.engine import Simulation, allocator
sim = Simulation(engine_config("2nn", "dfedsam", 20, K=2, B=8), data=synthetic_data((1, 28, 28), 20, 16, 4))
for _ in range(5):
    sim.step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    sim.step()
print(json.dumps({"applied": allocator.retain_freed_memory(),
                  "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _round_faults(retain: str) -> dict:
    env = {**os.environ, allocator.ENV_VAR: retain}
    out = subprocess.run([sys.executable, "-c", ROUND_FAULTS], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC, reason="the settings are glibc's")
def test_retained_memory_stops_the_rounds_page_faults():
    default, retained = _round_faults("0"), _round_faults("1")
    assert not default["applied"] and retained["applied"]
    # measured 17,000-27,000 faults without the settings (each step faults its tensors in again), 0-1 with
    assert default["faults"] > 5000, default
    assert retained["faults"] < default["faults"] / 10, (default, retained)


def test_bad_setting_names_the_value(monkeypatch):
    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv(allocator.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="DFL_RETAIN_FREED_MEMORY='yes'.*allowed: 0"):
        allocator.retain_freed_memory()


def test_applied_once(monkeypatch):
    calls = []
    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv(allocator.ENV_VAR, "1")

    class FakeLibc:
        def mallopt(self, option, value):
            calls.append((option, value))
            return 1
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: FakeLibc())
    first, second = allocator.retain_freed_memory(), allocator.retain_freed_memory()
    assert first == second == GLIBC
    assert calls == ([(-3, allocator.THRESHOLD_BYTES), (-1, allocator.THRESHOLD_BYTES)] if GLIBC else [])
