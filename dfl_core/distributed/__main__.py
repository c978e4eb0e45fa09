"""``torchrun --nproc_per_node=N -m dfl_core.distributed``: see :mod:`dfl_core.distributed.cli`."""

import sys

from .cli import main

sys.exit(main())
