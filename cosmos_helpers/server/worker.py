"""One serial FIFO worker thread: generations run one at a time, in arrival order, as Cosmos3 does on vLLM-Omni.

Requests are accepted immediately and wait in the queue (no admission limit, no 429), so a synchronous
call's timeout counts its queueing time, exactly like the real server.
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

    def __init__(self, name: str = "cosmos-generation-worker") -> None:
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

    def submit(self, key: str, task: Task, *, on_progress: Callable[[int, int], None] | None = None) -> Future:
        future: Future = Future()
        context = TaskContext(key=key, cancel=threading.Event(), on_progress=on_progress)
        item = _Item(key, task, future, context, next(self._counter))
        with self._lock:
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
            try:
                result = item.task(item.context)
            except BaseException as exc:  # delivered to whoever waits on the future
                item.future.set_exception(exc)
            else:
                item.future.set_result(result)
            finally:
                with self._lock:
                    self.current = None
                    self._items.pop(item.key, None)
