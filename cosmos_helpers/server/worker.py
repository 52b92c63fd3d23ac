"""One generation at a time, in arrival order, as Cosmos3 runs on vLLM-Omni (``max_num_seqs`` is 1).

A one-thread ``ThreadPoolExecutor`` is the FIFO queue. What it lacks is added here: a bound on waiting work
(``max_queue``; :class:`QueueFull` becomes 429 + ``Retry-After``, a stand-in feature: vLLM-Omni queues without
limit) and cancelling a *running* task, which stops at its next denoising step through :class:`TaskContext`.
A synchronous call's timeout counts its queueing, exactly like the real server's. At shutdown queued tasks are
dropped and the running one is asked to stop at its next step (the executor's thread is joined at exit).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

Task = Callable[["TaskContext"], Any]


class QueueFull(Exception):
    """``submit`` while ``max_queue`` tasks already wait."""

    def __init__(self, waiting: int, retry_after: float) -> None:
        super().__init__(f"{waiting} generations are already waiting")
        self.waiting = waiting
        self.retry_after = retry_after


class Cancelled(Exception):
    """Raised inside a running task whose job was deleted (checked at every progress report)."""


@dataclass
class TaskContext:
    """What a running task sees: its cancel flag and where its progress goes."""

    key: str
    cancel: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[int, int], None] | None = None
    started: bool = False

    def progress(self, step: int, total: int) -> None:
        """The backend's per-step callback; also the point where a deleted job stops."""
        if self.cancel.is_set():
            raise Cancelled(self.key)
        if self.on_progress is not None:
            self.on_progress(step, total)


class SerialWorker:
    """``submit(key, task) -> Future``; ``cancel(key)``; ``waiting``; bounded by ``max_queue`` (0 = unbounded)."""

    def __init__(self, max_queue: int = 0, name: str = "cosmos-generation") -> None:
        self.max_queue = max_queue
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()  # a cancelled future runs its done-callbacks in the cancelling thread
        self._tasks: dict[str, tuple[Future, TaskContext]] = {}
        self._durations: deque[float] = deque(maxlen=20)  # recent run times, for Retry-After

    def start(self) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)

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
    def waiting(self) -> int:
        """Tasks accepted and not started."""
        with self._lock:
            return sum(1 for _future, context in self._tasks.values() if not context.started)

    def full(self) -> bool:
        return bool(self.max_queue) and self.waiting >= self.max_queue

    def retry_after(self) -> float:
        """Seconds until a queue slot is likely free: the mean recent run time, at least 1."""
        with self._lock:
            recent = list(self._durations)
        return max(1.0, sum(recent) / len(recent)) if recent else 1.0

    def submit(self, key: str, task: Task, *, on_progress: Callable[[int, int], None] | None = None) -> Future:
        """Queue ``task(context)``; :class:`QueueFull` when ``max_queue`` tasks already wait."""
        with self._lock:
            if self._pool is None:
                raise RuntimeError("the generation worker is not running")
            if self.full():
                raise QueueFull(self.waiting, self.retry_after())
            context = TaskContext(key, on_progress=on_progress)
            future = self._pool.submit(self._run, task, context)
            self._tasks[key] = (future, context)
        future.add_done_callback(lambda _done: self._forget(key))
        return future

    def cancel(self, key: str) -> str:
        """``"removed"`` (it was queued), ``"signalled"`` (running: stops at its next step) or ``"unknown"``."""
        with self._lock:
            entry = self._tasks.get(key)
            if entry is None:
                return "unknown"
            future, context = entry
            context.cancel.set()
            return "removed" if future.cancel() else "signalled"

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
