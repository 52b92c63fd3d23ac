"""Batch items as Ray tasks on a pool of actors, each keeping one ``DiffusersBackend`` (the model loads once per GPU).

One actor per GPU (or ``workers`` on CPUs) writes its items into ``out``, a folder every node sees. Every wait has a
deadline: an item past ``item_timeout`` has its actor killed (Ray restarts it once) and is retried once.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

from ..presets import model_for
from .items import BatchItem, timed_run


class ItemWorker:
    """One Ray actor: a ``DiffusersBackend`` in its process, with the batch profile's model loaded once and kept."""

    def __init__(self, out: str, profile: str, threads: int) -> None:
        import torch

        from ..backends.diffusers import DiffusersBackend

        torch.set_num_threads(max(1, threads))
        self.out, self.profile = out, profile
        self.backend = DiffusersBackend(progress=False)
        self.backend.pipeline(model_for(profile))  # the batch profile's model, loaded once; others on first use

    def describe(self) -> dict[str, Any]:
        """Where this actor runs and the backend settings that shape its outputs (for the driver's plan)."""
        import ray

        gpus = [str(g) for g in ray.get_gpu_ids()]
        label = f"{socket.gethostname()}:{os.getpid()}" + (f" gpu {','.join(gpus)}" if gpus else "")
        return {"label": label, "settings": self.backend.output_settings()}

    def run(self, item: dict[str, Any]) -> dict[str, Any]:
        return timed_run(BatchItem.from_dict(item), self.backend, self.out, profile=self.profile)


class RayPool:
    """The actors of one batch: joins Ray (``address``: a cluster, ``auto``, or None for a new local instance)."""

    def __init__(self, out: str, *, profile: str, address: str | None = None, workers: int | None = None,
                 num_cpus: float = 1, item_timeout: float = 1800.0, start_timeout: float = 600.0) -> None:
        from ..standins.ray_serve.local import join_ray

        local_cpus = int(max(1, workers * num_cpus)) if workers and not address else None  # None: every core
        self._started = join_ray(address, num_cpus=local_cpus)
        import ray

        gpus = int(ray.cluster_resources().get("GPU", 0))
        cpus = int(ray.cluster_resources().get("CPU", 1))
        count = workers or gpus or max(1, int(cpus // max(num_cpus, 1e-3)))
        options = {"num_gpus": 1, "num_cpus": num_cpus} if gpus else {"num_cpus": num_cpus}
        remote = ray.remote(max_restarts=1, max_task_retries=0, **options)(ItemWorker)
        self.actors = [remote.remote(str(out), profile, max(1, int(num_cpus))) for _ in range(count)]
        self.item_timeout, self.start_timeout = item_timeout, start_timeout
        described = ray.get([a.describe.remote() for a in self.actors], timeout=start_timeout)
        self.labels = [d["label"] for d in described]
        self.settings = described[0]["settings"]
        self.label = f"Ray: {count} workers on " + (f"{gpus} GPUs" if gpus else "CPUs")
        from ..backends.diffusers import DiffusersBackend

        self.backend = DiffusersBackend(progress=False)  # the driver's, for the checks before any work; loads nothing

    def run(self, pending: list[BatchItem], started: Callable[[BatchItem, str], None],
            finished: Callable[[BatchItem, str, dict[str, Any] | None, BaseException | None], bool]) -> None:
        """Run ``pending`` (``finished`` returns True to retry an item) until none is left. A dead worker is probed
        (``describe``) until Ray has restarted it, or dropped after ``start_timeout``; with none left the rest fail."""
        import ray

        free = list(range(len(self.actors)))
        # every ref in flight: an item's run (item, slot, started at), or a dead worker's probe (None, slot, give up at)
        running: dict[Any, tuple[BatchItem | None, int, float]] = {}
        while pending or any(item is not None for item, _, _ in running.values()):
            while pending and free:
                item, slot = pending.pop(0), free.pop(0)
                started(item, self.labels[slot])
                running[self.actors[slot].run.remote(item.to_dict())] = (item, slot, time.monotonic())
            if pending and not free and not running:
                for item in pending:  # every worker is gone: nothing can run them
                    finished(item, "no worker", None, NoWorkerError("every Ray worker of the batch died"))
                return
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                item, slot, since = running.pop(ref)
                try:
                    outcome, error = ray.get(ref, timeout=self.start_timeout), None
                    free.append(slot)
                except ray.exceptions.RayActorError as exc:  # the worker died (or is restarting)
                    if item is None:  # still restarting: ask again (after a pause) until its deadline
                        time.sleep(0.5)
                        self._probe(running, slot, since)
                        continue
                    outcome, error = None, WorkerLostError(f"the Ray worker {self.labels[slot]} died while running "
                                                           f"{item.name} ({type(exc).__name__}: {exc})")
                    self._probe(running, slot, time.monotonic() + self.start_timeout)
                except Exception as exc:  # the item's own error, which a RayTaskError wraps as its cause
                    cause = getattr(exc, "cause", None)
                    outcome, error = None, cause if isinstance(cause, BaseException) else exc
                    free.append(slot)
                if item is not None and finished(item, self.labels[slot], outcome, error):
                    pending.append(item)
            self._expire(running, finished, pending)

    def _probe(self, running: dict, slot: int, deadline: float) -> None:
        """Ask a dead worker's actor whether Ray has restarted it; a worker past ``deadline`` is dropped."""
        if time.monotonic() < deadline:
            running[self.actors[slot].describe.remote()] = (None, slot, deadline)

    def _expire(self, running: dict, finished: Callable, pending: list[BatchItem]) -> None:
        """Kill the actor of an item past its deadline (Ray restarts it) and report the item as timed out; drop a
        worker that has not come back by its deadline."""
        import ray

        for ref, (item, slot, since) in list(running.items()):
            if item is None:
                if time.monotonic() > since:
                    running.pop(ref)
            elif time.monotonic() - since > self.item_timeout:
                ray.kill(self.actors[slot], no_restart=False)
                running.pop(ref)
                self._probe(running, slot, time.monotonic() + self.start_timeout)
                error = TimeoutError(f"{item.name} ran longer than {self.item_timeout:g} s on "
                                     f"{self.labels[slot]}; its worker was restarted")
                if finished(item, self.labels[slot], None, error):
                    pending.append(item)

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self._started:
            ray.shutdown()


class WorkerLostError(RuntimeError):
    """The actor running an item died (killed, out of memory, its node lost); Ray restarts it once."""


class NoWorkerError(RuntimeError):
    """Every worker of the pool died and none came back: the items left cannot run."""
