"""Settings shared by tests/ and book/ when pytest runs the suite (on several xdist workers or one process).

Each worker gets one thread (and so do the processes and notebook kernels it
starts, through OMP_NUM_THREADS): two workers of two threads each on a 2-core
machine would mostly wait for each other.

torch.compile's inductor keeps the kernels it generates in a cache shared by every process of the machine
(/tmp/torchinductor_<user>). A kernel cached by another run, one under another emulated CPU
(scripts/emulate_cpu.sh) or one written while a second process compiled the same graph, aborted a test
process in a clean clone's run; so each test process (each xdist worker, and the notebook kernels it starts) compiles into a cache of its
own, which starts empty.
"""

import os
import tempfile

worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"dfl-inductor-{worker}-")

if worker != "main":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
