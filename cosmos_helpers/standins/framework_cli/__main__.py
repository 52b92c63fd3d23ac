"""``python -m cosmos_helpers.standins.framework_cli``: the framework CLI stand-in (see the package docstring)."""

import sys

from .cli import main

sys.exit(main())
