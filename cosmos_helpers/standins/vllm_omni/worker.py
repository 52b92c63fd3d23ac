"""One generation at a time, in arrival order, as Cosmos3 runs on vLLM-Omni (``max_num_seqs`` is 1): a one-thread
``ThreadPoolExecutor``, plus a bound on waiting work (``max_queue``, then 429 + ``Retry-After``: a stand-in feature)
and cancelling a *running* task, which stops at its next denoising step (:class:`TaskContext`).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import ApiError

Task = Callable[["TaskContext"], Any]


class Cancelled(Exception):
    """Raised inside a running task whose job was deleted (checked at every progress report)."""


@dataclass
class TaskContext:
    """A running task's cancel flag, checked at each progress report."""

    key: str
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False

    def progress(self, step: int, total: int) -> None:  # the backend's per-step callback
        if self.cancel.is_set():
            raise Cancelled(self.key)


class SerialWorker:
    """``submit(key, task) -> Future``; ``cancel(key)``; ``waiting``; bounded by ``max_queue`` (0 = unbounded)."""

    def __init__(self, max_queue: int = 0) -> None:
        self.max_queue = max_queue
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()  # a cancelled future runs its done-callbacks in the cancelling thread
        self._tasks: dict[str, tuple[Future, TaskContext]] = {}
        self._durations: deque[float] = deque(maxlen=20)  # recent run times, for Retry-After

    def start(self) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosmos-generation")

    def stop(self) -> None:
        """Drop queued tasks, ask the running one to stop, and do not wait for it."""
        with self._lock:
            for _future, context in self._tasks.values():
                context.cancel.set()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    @property
    def alive(self) -> bool:
        return self._pool is not None

    @property
    def waiting(self) -> int:  # accepted and not started
        with self._lock:
            return sum(1 for _future, context in self._tasks.values() if not context.started)

    def admit(self) -> None:
        """429 with ``Retry-After`` (the mean recent run time, at least 1 s) when ``max_queue`` tasks already wait."""
        with self._lock:
            waiting, recent = self.waiting, list(self._durations)
        if self.max_queue and waiting >= self.max_queue:
            seconds = math.ceil(max(1.0, sum(recent) / len(recent)) if recent else 1.0)
            raise ApiError(429, f"Server busy: {waiting} generations are already queued (limit {self.max_queue})."
                                f" Retry after {seconds} s.", headers={"Retry-After": str(seconds)})

    def submit(self, key: str, task: Task) -> Future:
        """Queue ``task(context)``; 429 (see :meth:`admit`) when the queue is full."""
        with self._lock:
            if self._pool is None:
                raise RuntimeError("the generation worker is not running")
            self.admit()
            context = TaskContext(key)
            future = self._pool.submit(self._run, task, context)
            self._tasks[key] = (future, context)
        future.add_done_callback(lambda _done: self._forget(key))
        return future

    def cancel(self, key: str) -> None:
        """A queued task is removed; a running one stops at its next step."""
        with self._lock:
            future, context = self._tasks.get(key, (None, None))
            if context is not None:
                context.cancel.set()
                future.cancel()

    def _run(self, task: Task, context: TaskContext) -> Any:
        with self._lock:
            context.started = True
        began = time.monotonic()
        try:
            return task(context)
        finally:
            with self._lock:
                self._durations.append(time.monotonic() - began)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._tasks.pop(key, None)
