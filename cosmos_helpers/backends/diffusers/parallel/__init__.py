"""Multi-GPU Diffusers: a :class:`ParallelPlan` run by worker processes that ``DiffusersBackend(gpus=N)`` starts
and stops itself (:mod:`.workers`). torch and diffusers load only in :mod:`.cfg`, :mod:`.ulysses`, :mod:`.worker`."""

from .plan import ParallelPlan
from .workers import MULTICAST_OFF, WorkerError, WorkerGroup

__all__ = ["ParallelPlan", "WorkerGroup", "WorkerError", "MULTICAST_OFF"]
