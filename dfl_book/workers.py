"""Worker processes for the commands that train several runs at once (``table --jobs``, ``showcase --jobs``)."""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["process_pool"]


def process_pool(jobs: int):
    """A pool of ``jobs`` worker processes that end with the process that started them.

    Spawned, not forked: forking a process that holds torch's threads can hang.
    On Linux each worker asks the kernel for SIGTERM when its parent dies, so a
    killed ``table`` or ``showcase`` command leaves no run training behind it,
    writing checkpoints that a restarted command would then race with.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_end_with_parent, initargs=(os.getpid(),)
    )


def _end_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request above
        os._exit(1)
