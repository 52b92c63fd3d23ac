"""``run_batch(requests, out)``: many items, resumably, here, on a server (``concurrency`` at a time), or on Ray. A
failure is retried once unless a second attempt cannot change it (:func:`retryable`) and never raised
(:attr:`BatchResult.failed`); times are seconds since the batch began (:mod:`cosmos_helpers.views.timeline`).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import media
from ..backends import backend_by_name
from ..errors import ValidationError
from ..gallery import write_gallery
from ..progress import progress_bar
from ..views.pages import Outcomes, markdown_table, write_csv
from .items import BatchItem, load_items, plan, timed_run
from .ray_pool import RayPool

ATTEMPTS = 2  # an item is tried at most twice
RAY_BACKEND = "diffusers"  # the backend each Ray actor keeps (.ray_pool), and the batch's default
# Errors that a second attempt cannot change: refused before any work, or by the server for the item itself.
FINAL_ERRORS = ("ValidationError", "OutputExistsError", "RequestValidationError", "UnknownModelError",
                "SampleSkippedError", "GuardrailError", "NoWorkerError")
COLUMNS = ("name", "kind", "mode", "status", "attempts", "seconds", "worker", "media", "error")


@dataclass
class ItemRecord:
    """One item's outcome: ``ok``, ``skipped`` (its manifest matched) or ``failed``."""

    name: str
    kind: str
    mode: str
    status: str = "pending"
    worker: str | None = None
    started: float | None = None
    finished: float | None = None
    media: str | None = None
    error: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> float | None:
        return None if self.started is None or self.finished is None else self.finished - self.started

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skipped")

    def row(self) -> dict[str, Any]:
        seconds = None if self.seconds is None else round(self.seconds, 3)
        return {**{name: getattr(self, name) for name in COLUMNS}, "attempts": len(self.attempts), "seconds": seconds}


def retryable(error_type: str) -> bool:
    """Whether a failure may go away on a second attempt (a killed worker, a lost connection, a 500)."""
    return error_type not in FINAL_ERRORS


def write_reports(out: Path, records: Sequence[ItemRecord], facts: dict[str, Any]) -> dict[str, Path]:
    """``summary.csv`` (one row per item) and ``batch.json`` (every record with its attempts, and the batch's facts)."""
    summary = write_csv(out / "summary.csv", [record.row() for record in records], COLUMNS)
    detail = {"facts": facts, "items": [{**asdict(r), "seconds": r.seconds} for r in records]}
    batch = media.write_bytes_atomic(out / "batch.json", json.dumps(detail, indent=1, default=str).encode(),
                                     overwrite=True)
    return {"summary": summary, "batch": batch}


@dataclass
class BatchResult(Outcomes):
    """The items of a batch and what became of them; shown in a notebook as a table."""

    out: Path
    records: list[ItemRecord]
    where: str
    files: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0
    _entries = "records"

    def rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.records]

    def _repr_markdown_(self) -> str:
        table = markdown_table(self.rows(), ("name", "mode", "status", "attempts", "seconds", "worker"))
        return f"**Batch** on {self.where}: {self.done} of {len(self.records)} ok in {self.seconds:.1f} s\n\n{table}"

    def __repr__(self) -> str:
        return f"BatchResult({self.done}/{len(self.records)} ok on {self.where}, out={self.out})"


class Tracker:
    """The records, the progress bar and the retry decision, shared by every worker thread (one lock)."""

    def __init__(self, items: Sequence[BatchItem], records: dict[str, ItemRecord], origin: float) -> None:
        self.records, self.origin, self.lock = records, origin, threading.Lock()
        self.bar = progress_bar(total=len(records), desc="batch", unit="item")
        if len(records) > len(items):
            self.bar.update(len(records) - len(items))

    def started(self, item: BatchItem, worker: str) -> None:
        with self.lock:
            record = self.records[item.name]
            record.status, record.worker, record.started = "running", worker, time.time() - self.origin

    def finished(self, item: BatchItem, worker: str, outcome: Mapping[str, Any] | None,
                 error: BaseException | None) -> bool:
        """Record an attempt; True when the item should be tried again."""
        with self.lock:
            record = self.records[item.name]
            record.finished, record.worker = time.time() - self.origin, str((outcome or {}).get("worker") or worker)
            if outcome is not None and "started" in outcome:  # the worker's own clock: no queueing counted
                record.started = float(outcome["started"]) - self.origin
                record.finished = float(outcome["finished"]) - self.origin
            again = False
            if error is None:
                record.status, record.media, record.error = ("skipped" if outcome.get("skipped") else "ok",
                                                             outcome.get("media"), None)
            else:
                kind = type(error).__name__
                record.attempts.append({"worker": record.worker, "error": f"{kind}: {error}"})
                again = retryable(kind) and len(record.attempts) < ATTEMPTS
                record.status, record.error = ("retrying" if again else "failed"), f"{kind}: {error}"
                note = "; trying once more" if again else ""
                print(f"{item.name} failed on {record.worker}: {kind}: {error}{note}", flush=True)
            if not again:
                self.bar.update(1)
                self.bar.set_postfix_str(f"{record.name} {record.status}")
            return again


class ThreadPool:
    """Items from ``concurrency`` threads on one backend object (a server's client; a local one with one thread)."""

    def __init__(self, backend: Any, out: Path, *, profile: str, concurrency: int, label: str) -> None:
        self.backend, self.out, self.profile, self.concurrency, self.label = backend, out, profile, concurrency, label
        self.settings = backend.output_settings()

    def run(self, pending: list[BatchItem], started: Callable, finished: Callable) -> None:
        work: "queue.Queue[BatchItem | None]" = queue.Queue()
        for item in pending:
            work.put(item)

        def worker(slot: int) -> None:
            label = f"{self.label} slot {slot}" if self.concurrency > 1 else self.label
            while (item := work.get()) is not None:
                started(item, label)
                try:
                    outcome, error = timed_run(item, self.backend, self.out, profile=self.profile), None
                except Exception as exc:  # recorded per item; the others go on
                    outcome, error = None, exc
                if finished(item, label, outcome, error):
                    work.put(item)  # tried again, after the items already waiting
                work.task_done()

        for slot in range(self.concurrency):
            threading.Thread(target=worker, args=(slot,), daemon=True).start()
        work.join()  # every item done, retries included (each is put back before its first try is done)
        for _ in range(self.concurrency):
            work.put(None)

    def close(self) -> None:
        pass


def run_batch(requests: str | os.PathLike[str] | Sequence[Mapping[str, Any]], out: str | os.PathLike[str], *,
              backend: Any = RAY_BACKEND, url: str | None = None, ray: Any = None, workers: int | None = None,
              num_cpus: float = 1, concurrency: int | None = None, profile: str = "tiny", item_timeout: float = 1800.0,
              gallery: bool = True) -> BatchResult:
    """Run every item of ``requests`` (a JSONL path or a list of objects) into ``out``; finished items are skipped,
    another request's output stops the batch before any work; writes ``summary.csv``, ``batch.json``, ``index.html``.

    Args:
        backend: ``"diffusers"`` (in this process, or on Ray workers with ``ray``), ``"framework-serve"`` or
            ``"vllm-omni"`` (with ``url``), or a backend object.
        ray: a Ray address (``"auto"``, ``"ray://head:10001"``, ``"host:6379"``) or ``True`` for a local instance.
        workers / num_cpus: Ray actors without GPUs, and the CPUs each asks for (default: one per CPU).
        concurrency: items in flight at once: default 2 for a server (one per replica of the stand-in), 1 in this
            process.
        profile: fills what framework samples leave unset (``tiny``: CPU sizes); request lines carry their own.
        item_timeout: seconds an item may run on a Ray worker before the worker is restarted.
    """
    out = Path(out).expanduser().resolve()
    items = load_items(requests)
    pool = _pool(backend, url=url, ray=ray, out=out, profile=profile, workers=workers, num_cpus=num_cpus,
                 concurrency=concurrency, item_timeout=item_timeout)
    origin = time.time()
    try:
        todo, done = plan(items, pool.backend, out, profile=profile, settings=pool.settings)
        records = {i.name: ItemRecord(i.name, i.kind, str(i.data.get("mode") or i.data.get("model_mode") or ""))
                   for i in items}
        for name, media in done.items():
            records[name].status, records[name].media = "skipped", str(media)
        if done:
            print(f"{len(done)} of {len(items)} items already finished in {out}; running {len(todo)}", flush=True)
        tracker = Tracker(todo, records, origin)
        with tracker.bar:
            pool.run(list(todo), tracker.started, tracker.finished)
    finally:
        pool.close()
    result = BatchResult(out, [records[i.name] for i in items], pool.label, seconds=time.time() - origin)
    out.mkdir(parents=True, exist_ok=True)
    result.files = write_reports(out, result.records, {"where": pool.label, "seconds": result.seconds,
                                                        "origin": origin, "items": len(items)})
    if gallery:
        result.files["gallery"] = write_gallery(out, title=f"Batch: {out.name}", convert_notebooks=False)
    return result


def _pool(backend: Any, *, url: str | None, ray: Any, out: Path, profile: str, workers: int | None, num_cpus: float,
          concurrency: int | None, item_timeout: float) -> Any:
    if ray:
        if backend != RAY_BACKEND or url:
            raise ValidationError("ray", "Ray workers run the items on DiffusersBackend; a server spreads them over "
                                  "its own replicas.", "drop ray= to send the items to the server, or drop "
                                  "backend= / url= to run them as Ray tasks.")
        return RayPool(str(out), profile=profile, address=None if ray is True else str(ray), workers=workers,
                       num_cpus=num_cpus, item_timeout=item_timeout)
    runner = backend_by_name(backend, url=url, progress=False) if isinstance(backend, str) else backend
    concurrency = concurrency or (2 if runner.remote else 1)  # a client may overlap; in-process not
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValidationError("concurrency", f"{concurrency!r} is not a positive integer.", "pass e.g. 2.")
    label = repr(runner) if runner.remote else "this process"
    return ThreadPool(runner, out, profile=profile, concurrency=concurrency, label=label)
