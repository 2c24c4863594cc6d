"""``python -m feedstock``: the maintainers' one command (see :mod:`feedstock.cli`)."""

import sys

from feedstock.cli import main

sys.exit(main())
