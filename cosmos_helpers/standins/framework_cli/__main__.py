"""``python -m cosmos_helpers.standins.framework_cli``: the framework CLI stand-in (see the package docstring)."""

import sys

# jsonschema registers an "iri" format check when rfc3987_syntax is installed (the test extra brings it), and that
# module builds 38 grammars as it is imported: about a second of every stand-in run. The sample check here uses no
# format checker, so this process goes without it.
sys.modules.setdefault("rfc3987_syntax", None)

from .cli import main  # noqa: E402

sys.exit(main())
