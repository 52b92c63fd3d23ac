"""``python -m cosmos_helpers.bench`` = ``cosmos-helpers bench``."""

import sys

from ..cli import main

raise SystemExit(main(["bench", *sys.argv[1:]]))
