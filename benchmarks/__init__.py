"""Speed of the dfl_core engine against per-client loops and the hardware floor.

Run ``python -m benchmarks`` (``--help`` for options); results go to
``benchmarks/RESULTS.md``. See ``benchmarks/README.md``.
"""
