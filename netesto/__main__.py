"""``python -m netesto`` is the ``netesto`` command."""

import sys

from netesto.cli import main

sys.exit(main())
