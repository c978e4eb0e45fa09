"""Keep freed memory in the process: glibc malloc settings for the round's large temporaries.

A round allocates and frees tensors of the same few sizes at every local step: each chunk's gradient, SAM's
perturbed point and the update (``client_chunk × d`` values, about 8 MB on the CPU). By default glibc serves an
allocation above its mmap threshold (128 KiB at start, raised as freed blocks come back, at most 32 MiB) with fresh
pages from the kernel and unmaps them on ``free``, and it trims the top of its heap whenever more than twice that
threshold lies free, so the next step's tensors fault their pages in again, at every local step of every round
(``benchmarks/TRIED.md``). How many depends on the order of frees, so the default's cost varies between machines,
and a setting fixed here makes it the same everywhere.

:func:`retain_freed_memory` fixes the mmap threshold at 32 MiB and the trim threshold at 128 MiB, once per process
(``mallopt``): the step's temporaries come from the heap, and up to 128 MiB of freed memory stays with the process
for the next step. Larger tensors, such as a round's ``(m, d)`` output, are still mapped; the trainer and gossip
reuse those themselves (:class:`dfl_core.engine.buffers.OutputBuffers`). With both, that round takes no page faults.
Only glibc is touched; musl, macOS and preloaded allocators (jemalloc, tcmalloc) are left as they are. Set
``DFL_RETAIN_FREED_MEMORY=0`` to leave malloc alone. The settings change no result, only where memory comes from.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["retain_freed_memory", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "ENV_VAR"]

#: Allocations up to this size come from the heap (32 MiB: the ceiling glibc's own dynamic threshold stops at).
MMAP_THRESHOLD_BYTES = 32 << 20
#: Freed memory kept at the top of the heap before any is returned to the system (128 MiB).
TRIM_THRESHOLD_BYTES = 128 << 20
#: Environment variable that turns :func:`retain_freed_memory` off when set to ``0``.
ENV_VAR = "DFL_RETAIN_FREED_MEMORY"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_applied: bool | None = None


def retain_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds (:data:`MMAP_THRESHOLD_BYTES`, :data:`TRIM_THRESHOLD_BYTES`), once.

    Returns True if they are set, False where the C library is not glibc or
    ``DFL_RETAIN_FREED_MEMORY=0``; any other value of that variable is an error.
    """
    global _applied
    if _applied is not None:
        return _applied
    value = os.environ.get(ENV_VAR, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{ENV_VAR}={value!r}; allowed: 0 (leave malloc alone) or 1 (the default)")
    _applied = False
    if value == "1" and platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        try:
            libc = ctypes.CDLL("libc.so.6")
        except OSError:
            return False
        _applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        )
    return _applied
