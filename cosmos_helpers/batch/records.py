"""What became of each item of a batch, and the files that say so: ``summary.csv`` and ``batch.json``.

An item is ``ok`` (made now), ``skipped`` (finished by an earlier run: its manifest matched), or ``failed`` (with its
error; every attempt is kept). ``worker`` names where it ran (a Ray worker's host and pid and GPU, a Serve replica,
or this process), and ``started`` / ``finished`` are wall-clock seconds since the batch began, for the timing plots
(:mod:`cosmos_helpers.views.timeline`).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .. import media

# Errors that a second attempt cannot change: refused before any work, or by the server for the item itself.
FINAL_ERRORS = ("ValidationError", "OutputExistsError", "RequestValidationError", "UnknownModelError",
                "SampleSkippedError", "GuardrailError", "NoWorkerError")
COLUMNS = ("name", "kind", "mode", "status", "attempts", "seconds", "worker", "media", "error")


@dataclass
class ItemRecord:
    """One item's outcome (see the module docstring)."""

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
        seconds = self.seconds
        return {"name": self.name, "kind": self.kind, "mode": self.mode, "status": self.status,
                "attempts": len(self.attempts), "seconds": None if seconds is None else round(seconds, 3),
                "worker": self.worker, "media": self.media, "error": self.error}


def retryable(error_type: str) -> bool:
    """Whether a failure may go away on a second attempt (a killed worker, a lost connection, a 500)."""
    return error_type not in FINAL_ERRORS


def write_reports(out: Path, records: Sequence[ItemRecord], facts: dict[str, Any]) -> dict[str, Path]:
    """``summary.csv`` (one row per item) and ``batch.json`` (every record with its attempts, and the batch's facts)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    for record in records:
        writer.writerow(record.row())
    summary = media.write_bytes_atomic(out / "summary.csv", buffer.getvalue().encode(), overwrite=True)
    detail = {"facts": facts, "items": [{**asdict(r), "seconds": r.seconds} for r in records]}
    batch = media.write_bytes_atomic(out / "batch.json", json.dumps(detail, indent=1, default=str).encode(),
                                     overwrite=True)
    return {"summary": summary, "batch": batch}
