"""Batches: many generation requests or framework samples, resumable, here, on a server, or as Ray tasks.

``run_batch(REQUESTS.jsonl, out)`` (``cosmos-helpers batch``) runs each line into ``<out>/<name>/vision.*``.
"""

from .items import BatchItem, load_items, write_items
from .runner import BatchResult, ItemRecord, run_batch

__all__ = ["BatchItem", "BatchResult", "ItemRecord", "load_items", "run_batch", "write_items"]
