"""``python -m cosmos_helpers.sweeps.worker``: one sweep worker's process, executing runs one after another.

papermill changes the process's working directory for the duration of a run and the kernel inherits the
process environment, so parallel runs (each in its notebook's folder, each with its own
``CUDA_VISIBLE_DEVICES``) cannot share one process. Each worker of a sweep is one of these processes, started
with its slot's environment and kept for all the runs that slot takes (papermill is imported once). It
reads one JSON task per line on stdin, runs the notebook through the same runner as ``run-cookbooks`` and
answers one JSON line ``{"seconds", "error"}`` on the stdout it was started with; anything else that would
print to stdout (the notebook's log) is sent to stderr, so it cannot garble the answers.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from ..notebooks import execute_notebook


def main() -> int:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        seconds, error = execute_notebook(task["notebook"], task["executed"], task["parameters"],
                                          kernel=task.get("kernel", "python3"),
                                          log_output=bool(task.get("log_output")))
        answers.write(json.dumps({"seconds": seconds, "error": error}) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover - started as a subprocess by dispatch
    sys.exit(main())
