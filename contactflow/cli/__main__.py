"""``python -m contactflow.cli``: the ``contactflow`` command."""

import sys

from contactflow.cli import main

sys.exit(main())
