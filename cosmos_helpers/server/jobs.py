"""Asynchronous job records (``/v1/videos``) and their store; finished MP4s live on disk as ``<id>.mp4``.

Records are process-local and lost on restart, as in vLLM-Omni 0.30.0. A finished job's file is removed
on ``DELETE`` or, with a TTL, when the job expires (``expires_at``); :meth:`JobStore.sweep` also removes
job files and upload leftovers that no record owns (a previous server process) once they are older than
the TTL. Job ids are validated before any path is built, so no path can be smuggled into the store.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .limits import valid_job_id


def new_job_id() -> str:
    return f"video_gen_{uuid.uuid4().hex}"


@dataclass
class JobRecord:
    id: str
    prompt: str
    model: str
    size: str | None
    seconds: str
    quality: str
    fps: float
    num_frames: int | None
    created_ts: float = field(default_factory=time.time)
    sequence: int = 0
    status: str = "queued"
    progress: int = 0
    completed_at: int | None = None
    expires_at: int | None = None
    error: dict[str, Any] | None = None
    file_name: str | None = None
    inference_time_s: float | None = None
    duration_s: float | None = None
    metrics: dict[str, Any] | None = None
    stage_durations: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float = 0.0
    uploads: list[Path] = field(default_factory=list)
    started_ts: float | None = None
    finished_ts: float | None = None

    def __post_init__(self) -> None:
        if self.duration_s is None and self.num_frames and self.fps:
            self.duration_s = self.num_frames / self.fps

    @property
    def created_at(self) -> int:
        return int(self.created_ts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "video", "model": self.model, "prompt": self.prompt, "status": self.status,
            "progress": self.progress, "size": self.size, "seconds": self.seconds, "quality": self.quality,
            "created_at": self.created_at, "completed_at": self.completed_at, "expires_at": self.expires_at,
            "remixed_from_video_id": None, "error": self.error, "media_type": "video/mp4",
            "file_name": self.file_name, "inference_time_s": self.inference_time_s, "fps": self.fps,
            "num_frames": self.num_frames, "duration_s": self.duration_s, "metrics": self.metrics,
            "stage_durations": self.stage_durations, "peak_memory_mb": self.peak_memory_mb, "action": None,
        }


class JobStore:
    """Thread-safe job records, with the finished files under ``storage_dir``."""

    def __init__(self, storage_dir: Path) -> None:
        self.storage_dir = Path(storage_dir)
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, JobRecord] = {}
        self._lock = threading.Lock()
        self._sequence = itertools.count()

    def add(self, record: JobRecord) -> JobRecord:
        with self._lock:
            record.sequence = next(self._sequence)
            self._jobs[record.id] = record
        return record

    def get(self, job_id: str) -> JobRecord | None:
        with self._lock:
            return self._jobs.get(job_id)

    def remove(self, job_id: str) -> JobRecord | None:
        with self._lock:
            return self._jobs.pop(job_id, None)

    def path_for(self, job_id: str) -> Path:
        if not valid_job_id(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.storage_dir / f"{job_id}.mp4"

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def sweep(self, ttl: float, now: float | None = None) -> list[str]:
        """Drop jobs finished more than ``ttl`` seconds ago (record, file and uploads); also remove job
        files, sync outputs and uploads older than ``ttl`` that no live record owns. Returns the dropped ids."""
        if ttl <= 0:
            return []
        now = time.time() if now is None else now
        with self._lock:
            expired = [r for r in self._jobs.values() if r.finished_ts is not None and now - r.finished_ts > ttl]
            for record in expired:
                self._jobs.pop(record.id, None)
            live = set(self._jobs)
        for record in expired:
            self.path_for(record.id).unlink(missing_ok=True)
            for path in record.uploads:
                path.unlink(missing_ok=True)
        candidates = list(self.storage_dir.glob("video_gen_*.mp4"))
        for sub in ("uploads", "sync"):
            folder = self.storage_dir / sub
            if folder.is_dir():
                candidates += [p for p in folder.iterdir() if p.is_file()]
        for path in candidates:
            if path.parent == self.storage_dir and path.stem in live:
                continue
            if path.parent.name == "uploads" and any(path.name.startswith(job + "_") for job in live):
                continue
            try:
                if now - os.stat(path).st_mtime > ttl:
                    path.unlink(missing_ok=True)
            except OSError:
                continue
        return [record.id for record in expired]

    def update(self, job_id: str, **changes: Any) -> None:
        with self._lock:
            record = self._jobs.get(job_id)
            if record is not None:
                for name, value in changes.items():
                    setattr(record, name, value)

    def page(self, *, after: str | None, limit: int, order: str) -> dict[str, Any]:
        """One page of ``GET /v1/videos``: sorted by creation; an unknown ``after`` gives an empty page."""
        with self._lock:
            records = sorted(self._jobs.values(), key=lambda r: (r.created_ts, r.sequence), reverse=order == "desc")
        if after is not None:
            ids = [r.id for r in records]
            records = records[ids.index(after) + 1:] if after in ids else []
        chosen = records[:limit]
        data = [r.to_dict() for r in chosen]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": len(records) > len(chosen)}
