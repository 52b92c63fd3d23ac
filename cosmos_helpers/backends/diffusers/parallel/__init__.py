"""Multi-GPU Diffusers: a :class:`ParallelPlan` (CFG-parallel x Ulysses, ``serve_command``'s vocabulary) run by
worker processes that ``DiffusersBackend(gpus=N, ...)`` starts and stops itself (:mod:`.workers`).

Heavy imports (torch, diffusers) stay inside :mod:`.cfg`, :mod:`.ulysses` and :mod:`.worker`.
"""

from .plan import ParallelPlan
from .workers import MULTICAST_OFF, WorkerError, WorkerGroup

__all__ = ["ParallelPlan", "WorkerGroup", "WorkerError", "MULTICAST_OFF"]
