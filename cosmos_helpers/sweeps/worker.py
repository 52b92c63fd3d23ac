"""The processes that execute a sweep's runs: ``python -m cosmos_helpers.sweeps.worker`` (papermill changes the working
directory and the kernel inherits the environment, so parallel runs need a process each: one JSON task per stdin line,
one JSON answer per stdout line, the notebook's log on stderr), and Ray actors (restarted once, the run retried once).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from typing import Any

from ..errors import ValidationError
from ..notebooks import execute_notebook

RETRY_WAIT_S = 600.0  # how long a restarted actor may take to come back


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Execute one run's notebook (what every kind of sweep worker does): ``{"seconds", "error"}``."""
    seconds, error = execute_notebook(task["notebook"], task["executed"], task["parameters"],
                                      kernel=task.get("kernel", "python3"), log_output=bool(task.get("log_output")))
    return {"seconds": seconds, "error": error}


def main() -> int:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    for line in filter(str.strip, sys.stdin):  # blank lines skipped
        print(json.dumps(run_task(json.loads(line))), file=answers, flush=True)
    return 0


class NotebookWorker:
    """One Ray actor of a sweep: executes runs as ``cosmos_helpers.sweeps.worker`` does, one at a time."""

    def __init__(self, environment: dict[str, str]) -> None:
        os.environ.update(environment)

    def describe(self) -> str:
        """Where it runs: the probe :meth:`RayWorker._back` waits on."""
        return f"{socket.gethostname()}:{os.getpid()}"

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        return run_task(task)


def ray_slot_count(address: Any, jobs: int | None) -> tuple[int, bool]:
    """``(slots, on GPUs)``: one per GPU of the cluster, else ``jobs`` (default: one per CPU)."""
    from ..standins.ray_serve.local import join_ray

    join_ray(None if address is True else str(address), num_cpus=None)
    import ray

    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus and jobs is not None:
        raise ValidationError("jobs", f"the Ray cluster has {gpus} GPUs, one worker each.", "drop jobs with --ray.")
    return (gpus, True) if gpus else (jobs or max(1, int(ray.cluster_resources().get("CPU", 1))), False)


class RayWorker:
    """A sweep slot served by one Ray actor (``run``/``close`` as the local workers have them)."""

    def __init__(self, slot: Any, dispatch: Any) -> None:
        import ray

        self.slot, self.dispatch = slot, dispatch
        options = {"num_gpus": 1} if slot.ray == "gpu" else {"num_cpus": 1}
        actor = ray.remote(max_restarts=1, max_task_retries=0, **options)(NotebookWorker)
        self.actor = actor.remote(dispatch.environment(slot))

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        import ray

        for attempt in (1, 2):
            try:
                return ray.get(self.actor.run.remote(task))
            except ray.exceptions.RayActorError as exc:
                error = f"the Ray worker of slot {self.slot.index} died during the run ({type(exc).__name__}: {exc})"
                print(error + ("; trying once more" if attempt == 1 else ""), flush=True)
                if attempt == 2 or not self._back():
                    break
        return {"seconds": None, "error": error}

    def _back(self) -> bool:
        """Wait (with a deadline) until Ray has restarted the actor."""
        import ray

        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            try:
                ray.get(self.actor.describe.remote(), timeout=RETRY_WAIT_S)
                return True
            except ray.exceptions.RayActorError:
                time.sleep(0.5)
        return False

    def close(self, *, kill: bool = False) -> None:
        import ray

        if ray.is_initialized():
            ray.kill(self.actor, no_restart=True)


if __name__ == "__main__":  # pragma: no cover - started as a subprocess by dispatch
    sys.exit(main())
