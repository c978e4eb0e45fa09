"""Settings shared by tests/ and book/ when pytest-xdist runs the suite on several workers.

Each worker gets one thread (and so do the processes and notebook kernels it
starts, through OMP_NUM_THREADS): two workers of two threads each on a 2-core
machine would mostly wait for each other.
"""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
