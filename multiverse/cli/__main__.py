"""``python -m multiverse.cli``: the ``multiverse`` command."""

import sys

from . import main

sys.exit(main())
