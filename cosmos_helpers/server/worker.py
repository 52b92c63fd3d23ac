"""One serial FIFO worker thread: generations run one at a time, in arrival order, as Cosmos3 does on vLLM-Omni.

Requests wait in the queue, so a synchronous call's timeout counts its queueing time, exactly like the
real server. Unlike vLLM-Omni the queue can be bounded (``max_queue``): ``submit`` then raises
:class:`QueueFull` (the app answers 429 with ``Retry-After``) instead of letting waiting work pile up.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

Task = Callable[["TaskContext"], Any]


class QueueFull(Exception):
    """``submit`` on a worker whose queue already holds ``max_queue`` waiting tasks."""

    def __init__(self, waiting: int, retry_after: float) -> None:
        super().__init__(f"{waiting} generations are already waiting")
        self.waiting = waiting
        self.retry_after = retry_after


class Cancelled(Exception):
    """Raised inside a running task when its job was deleted (checked between denoising steps)."""


@dataclass
class TaskContext:
    """What a running task can see: its cancel flag and a progress reporter."""

    key: str
    cancel: threading.Event
    on_progress: Callable[[int, int], None] | None = None
    started_at: float = 0.0

    def progress(self, step: int, total: int) -> None:
        if self.cancel.is_set():
            raise Cancelled(self.key)
        if self.on_progress is not None:
            self.on_progress(step, total)


@dataclass
class _Item:
    key: str
    task: Task
    future: Future
    context: TaskContext
    sequence: int
    enqueued_at: float = field(default_factory=time.time)


class SerialWorker:
    """A FIFO queue drained by one daemon thread. ``submit`` returns a ``concurrent.futures.Future``."""

    def __init__(self, name: str = "cosmos-generation-worker", max_queue: int = 0) -> None:
        self.max_queue = max_queue  # waiting tasks (the running one excluded); 0 = unbounded
        self._durations: list[float] = []  # recent task run times, for Retry-After estimates
        self._queue: queue.Queue[_Item | None] = queue.Queue()
        self._counter = itertools.count()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._items: dict[str, _Item] = {}
        self._lock = threading.Lock()
        self.order_log: list[str] = []  # keys in the order they started running
        self.current: str | None = None
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        if self._started:
            self._queue.put(None)
            self._thread.join(timeout)

    @property
    def waiting(self) -> int:
        """Tasks accepted but not started."""
        with self._lock:
            return sum(1 for item in self._items.values() if item.key != self.current)

    def full(self) -> bool:
        return bool(self.max_queue) and self.waiting >= self.max_queue

    def retry_after(self) -> float:
        """Seconds until a queue slot is likely free: the mean recent run time (at least 1 s)."""
        with self._lock:
            recent = self._durations[-20:]
        return max(1.0, sum(recent) / len(recent)) if recent else 1.0

    def submit(self, key: str, task: Task, *, on_progress: Callable[[int, int], None] | None = None) -> Future:
        """Queue ``task``; raises :class:`QueueFull` when ``max_queue`` tasks already wait."""
        future: Future = Future()
        context = TaskContext(key=key, cancel=threading.Event(), on_progress=on_progress)
        item = _Item(key, task, future, context, next(self._counter))
        with self._lock:
            if self.max_queue:
                waiting = sum(1 for other in self._items.values() if other.key != self.current)
                if waiting >= self.max_queue:
                    recent = self._durations[-20:]
                    estimate = max(1.0, sum(recent) / len(recent)) if recent else 1.0
                    raise QueueFull(waiting, estimate)
            self._items[key] = item
        self._queue.put(item)
        return future

    def queued_ahead(self, key: str) -> int:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return 0
            return sum(1 for other in self._items.values() if other.sequence < item.sequence)

    def cancel(self, key: str) -> str:
        """``"removed"`` (was queued), ``"signalled"`` (running; stops at its next step) or ``"unknown"``."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return "unknown"
            item.context.cancel.set()
            if item.future.cancel():
                self._items.pop(key, None)
                return "removed"
            return "signalled"

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if not item.future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            with self._lock:
                self.current = item.key
                self.order_log.append(item.key)
            item.context.started_at = time.time()
            began = time.monotonic()
            try:
                result = item.task(item.context)
            except BaseException as exc:  # delivered to whoever waits on the future
                item.future.set_exception(exc)
            else:
                item.future.set_result(result)
            finally:
                with self._lock:
                    self._durations.append(time.monotonic() - began)
                    del self._durations[:-50]
                    self.current = None
                    self._items.pop(item.key, None)
