"""What every route of one server shares (``app.state.server``, the routes' ``State``): model, settings, worker, jobs.

The worker runs one generation at a time, in arrival order, as Cosmos3 runs on vLLM-Omni (``max_num_seqs`` is 1),
with a bound on waiting work (``max_queue``, then 429 + ``Retry-After``: a stand-in feature) and cancellation of a
*running* task at its next denoising step. Job records are process-local, as in vLLM-Omni 0.30.0, their files
``<storage>/<job id>.mp4``; ids are checked before any path is built, so no path can be smuggled into the store.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable

from fastapi import Depends, Request

from ...protocol.vllm_omni import JOB_ID, SYNC_TIMEOUT_S, VERSION, VIDEO_DEFAULTS
from .settings import ServerLimits, describe_server
from .models import ApiError, VideoJob, VideoList, VideoRequest
from .references import TransferRunner, Uploads


class Cancelled(Exception):
    """Raised inside a running task whose job was deleted (checked at every progress report)."""


@dataclass
class TaskContext:
    """A task's cancel flag, checked at each progress report (``progress`` is the backend's per-step callback)."""

    key: str
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False

    def progress(self, step: int, total: int) -> None:
        if self.cancel.is_set():
            raise Cancelled(self.key)


Task = Callable[[TaskContext], Any]


class SerialWorker:
    def __init__(self, max_queue: int = 0) -> None:
        self.max_queue = max_queue  # tasks that may wait (0: unbounded)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()  # a cancelled future runs its done-callbacks in the cancelling thread
        self._tasks: dict[str, tuple[Future, TaskContext]] = {}
        self._durations: deque[float] = deque(maxlen=20)  # recent run times, for Retry-After

    def start(self) -> None:
        self._pool = self._pool or ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosmos-generation")

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

    def admit(self) -> None:
        """429 with ``Retry-After`` (the mean recent run time, at least 1 s) when ``max_queue`` tasks already wait."""
        with self._lock:  # waiting: accepted and not started
            waiting = sum(1 for _future, context in self._tasks.values() if not context.started)
            recent = list(self._durations)
        if self.max_queue and waiting >= self.max_queue:
            seconds = math.ceil(max(1.0, sum(recent) / len(recent)) if recent else 1.0)
            raise ApiError(429, f"Server busy: {waiting} generations are already queued (limit {self.max_queue})."
                                f" Retry after {seconds} s.", headers={"Retry-After": str(seconds)})

    def submit(self, key: str, task: Task) -> Future:
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


def new_record(job_id: str, model: str, request: VideoRequest) -> VideoJob:
    """The queued record vLLM-Omni makes from a request (video/generation/helpers.py:280-299): ``size`` and
    ``seconds`` echo the fields, frames come from ``num_frames`` or ``seconds x fps``; results replace them."""
    fps = request.fps or VIDEO_DEFAULTS["fps"]
    num_frames = request.num_frames
    if num_frames is None and request.seconds is not None:
        num_frames = int(float(request.seconds) * fps)
    duration = float(request.seconds) if request.seconds is not None else (num_frames / fps if num_frames else None)
    return VideoJob(id=job_id, model=model, prompt=request.prompt, size=request.size,
                    seconds=request.seconds or "4", quality=request.quality or "default", fps=fps,
                    num_frames=num_frames, duration_s=duration)


@dataclass
class Job:
    record: VideoJob
    uploads: list[Path] = field(default_factory=list)
    future: Future | None = None
    created_ts: float = field(default_factory=time.time)
    finished_ts: float | None = None


class JobStore:
    """Thread-safe job records, with the finished files under ``storage_dir``."""

    def __init__(self, storage_dir: Path) -> None:
        self.storage_dir = Path(storage_dir)
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def add(self, job: Job) -> Job:
        with self._lock:
            self._jobs[job.record.id] = job
        return job

    def get(self, job_id: str) -> Job | None:
        """The job, or ``None`` for an unknown or malformed id (nothing else reaches the file store)."""
        with self._lock:
            return self._jobs.get(job_id) if JOB_ID.fullmatch(job_id) else None

    def remove(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.pop(job_id, None)

    def update(self, job_id: str, **changes: Any) -> None:
        """Set record fields (and the ``*_ts`` bookkeeping) of a job that still exists."""
        with self._lock:
            job = self._jobs.get(job_id)
            for name, value in changes.items() if job is not None else ():
                setattr(job if name.endswith("_ts") else job.record, name, value)

    def path_for(self, job_id: str) -> Path:
        if not JOB_ID.fullmatch(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.storage_dir / f"{job_id}.mp4"

    def page(self, *, after: str | None, limit: int | None, order: str) -> VideoList:
        """``GET /v1/videos`` (api_server.py:2782-2816): sorted by ``created_at`` (whole seconds; ties keep arrival
        order, even descending), everything when ``limit`` is omitted; an unknown ``after`` gives an empty page."""
        with self._lock:
            records = [job.record.model_copy() for job in self._jobs.values()]
        records.sort(key=lambda record: record.created_at, reverse=order == "desc")
        if after is not None:
            ids = [record.id for record in records]
            records = records[ids.index(after) + 1:] if after in ids else []
        chosen = records if limit is None else records[:limit]
        return VideoList(data=chosen, first_id=chosen[0].id if chosen else None,
                         last_id=chosen[-1].id if chosen else None, has_more=len(chosen) < len(records))

    def sweep(self, ttl: float, now: float | None = None) -> list[str]:
        """Drop jobs finished more than ``ttl`` seconds ago (record, file, uploads), and files older than ``ttl``
        that no live job owns (an earlier server's job files, sync outputs and uploads). Returns the dropped ids."""
        if ttl <= 0:
            return []
        now = time.time() if now is None else now
        with self._lock:
            expired = [job for job in self._jobs.values()
                       if job.finished_ts is not None and now - job.finished_ts > ttl]
            for job in expired:
                del self._jobs[job.record.id]
            live = set(self._jobs)
        for job in expired:
            for path in (self.path_for(job.record.id), *job.uploads):
                path.unlink(missing_ok=True)
        orphans = [path for path in self.storage_dir.glob("video_gen_*.mp4") if path.stem not in live]
        orphans += [path for path in (*self.storage_dir.glob("uploads/*"), *self.storage_dir.glob("sync/*"))
                    if path.is_file() and not any(path.name.startswith(job + "_") for job in live)]
        for path in orphans:
            with contextlib.suppress(OSError):
                if now - os.stat(path).st_mtime > ttl:
                    path.unlink(missing_ok=True)
        return [job.record.id for job in expired]


@dataclass
class ServerState:
    backend: Any
    model: str  # what the backend loads (``--model``)
    served_model_name: str  # what clients may send as ``model``
    jobs: JobStore
    worker: SerialWorker
    limits: ServerLimits
    guardrails: bool = False
    sync_timeout: float = SYNC_TIMEOUT_S
    step_progress: bool = False
    transfer_runner: TransferRunner | None = None
    warmup: bool = True
    step_cache: Any = None  # the server's --cache-backend / --cache-config, given to every request
    started_at: float = field(default_factory=time.time)

    @property
    def storage(self) -> Path:
        return self.jobs.storage_dir

    @property
    def upload_dir(self) -> Path:
        return self.storage / "uploads"

    def standin_record(self) -> dict[str, Any]:
        """What this server is and runs, in its ``/v1/models`` card (the client records it in every manifest)."""
        return {"of": "vllm-omni", "version": VERSION, "program": __package__, "model_run": self.model,
                "step_cache": describe_server(self.step_cache)}

    def submit(self, key: str, task: Task, cleanup: Uploads | None = None) -> Future:
        """Queue ``task``; a full queue is a 429, and ``cleanup``'s uploads and the job ``key`` (if any) are removed."""
        try:
            return self.worker.submit(key, task)
        except ApiError:
            self.jobs.remove(key)
            if cleanup is not None:
                cleanup.discard()
            raise


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]
