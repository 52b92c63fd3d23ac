"""Batches: many generation requests or framework samples, resumable, here, on a server, or as Ray tasks.

``run_batch(REQUESTS.jsonl, out)`` (and ``cosmos-helpers batch``) runs each line into ``<out>/<name>/vision.*``:
:mod:`.items` reads and checks the lines, finds finished items and refuses clashes before any work, :mod:`.runner`
runs the rest (in this process, ``concurrency`` at a time against a server, or on a Ray actor pool: :mod:`.ray_pool`)
with retries and a progress bar, and writes ``summary.csv`` and ``batch.json``.
"""

from __future__ import annotations

from .items import BatchItem, load_items, write_items
from .runner import BatchResult, ItemRecord, run_batch

__all__ = ["BatchItem", "BatchResult", "ItemRecord", "load_items", "run_batch", "write_items"]
