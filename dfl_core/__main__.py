"""``python -m dfl_core``: see :mod:`dfl_core.cli`."""

import sys

from .cli import main

sys.exit(main())
