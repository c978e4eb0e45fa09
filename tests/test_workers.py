"""Worker processes of ``--jobs``: a killed command leaves no run training behind it."""

import os
import select
import subprocess
import sys

import pytest

# The parent starts a pool, has its worker print its pid and then nap for ten minutes, and waits.
PARENT = """
import time
from dfl_book.workers import process_pool
pool = process_pool(1)
pool.submit(exec, "import os, time; print(os.getpid(), flush=True); time.sleep(600)")
time.sleep(600)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"),
    reason="PR_SET_PDEATHSIG and pidfd are Linux's",
)
def test_a_busy_worker_ends_when_its_parent_is_killed(tmp_path):
    # stderr to a file: the killed parent's resource tracker warns about its semaphores there
    with open(tmp_path / "stderr", "w") as err:
        parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=err, text=True)
    line = parent.stdout.readline()  # printed from inside the task: the worker is busy
    assert line.strip().isdigit(), (tmp_path / "stderr").read_text()
    worker = int(line)
    watch = os.pidfd_open(worker)  # readable once the worker has ended
    try:
        parent.kill()
        parent.wait()
        ended, _, _ = select.select([watch], [], [], 60)  # a hang guard, not a timing: it ends at once
        assert ended, f"worker {worker} still trains a minute after its parent was killed"
    finally:
        os.close(watch)
        if not ended:
            os.kill(worker, 9)
