"""Asynchronous jobs (``/v1/videos``): their records (process-local, as in vLLM-Omni 0.30.0) and their files
(``<storage>/<job id>.mp4``, removed on ``DELETE`` or once the job expires). Job ids are checked before any path is
built, so no path can be smuggled into the store.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...protocol.vllm_omni import JOB_ID, VIDEO_DEFAULTS
from .models import VideoJob, VideoList, VideoRequest


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
    """A record plus what only the server needs."""

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
        if not JOB_ID.fullmatch(job_id):
            return None
        with self._lock:
            return self._jobs.get(job_id)

    def remove(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.pop(job_id, None)

    def update(self, job_id: str, **changes: Any) -> None:
        """Set record fields (and the ``*_ts`` bookkeeping) of a job that still exists."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return
            for name, value in changes.items():
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
        has_more = limit is not None and len(records) > limit
        chosen = records if limit is None else records[:limit]
        return VideoList(data=chosen, first_id=chosen[0].id if chosen else None,
                         last_id=chosen[-1].id if chosen else None, has_more=has_more)

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
            self.path_for(job.record.id).unlink(missing_ok=True)
            for path in job.uploads:
                path.unlink(missing_ok=True)
        orphans = [path for path in self.storage_dir.glob("video_gen_*.mp4") if path.stem not in live]
        for sub in ("uploads", "sync"):
            if (self.storage_dir / sub).is_dir():
                orphans += [path for path in (self.storage_dir / sub).iterdir() if path.is_file()
                            and not any(path.name.startswith(job + "_") for job in live)]
        for path in orphans:
            try:
                if now - os.stat(path).st_mtime > ttl:
                    path.unlink(missing_ok=True)
            except OSError:
                continue
        return [job.record.id for job in expired]
