"""Before a batch works: every item checked on its backend, finished ones found, clashing outputs refused.

An item's record is what its manifest will hold: the :class:`GenerationRequest` of a request line, or the sample's
run as ``run_spec`` records it (``plan_spec(...).run``, which applies every check the backend makes before any
work). :func:`plan` then asks :func:`~cosmos_helpers.result.check_free` of each item's folder: finished by this
very record on this backend with these settings (skipped), free (to do), or another request's output (refused, for
the whole batch, before anything runs). A sample with URL inputs is recorded by the content of the copies it
downloads, which a plan cannot know without downloading: such an item is only skipped when found, never refused here
(its own run refuses a clash before it generates).

:func:`run_item` is what a worker does with one item: ``generate_and_save`` or ``run_spec``, both of which skip the
item's finished output and refuse another's again, so a worker racing a rerun cannot overwrite anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..protocol import framework as fw
from ..result import Generation, check_free, find_saved
from ..transfer.runner import plan_spec, run_spec
from ..workflow import generate_and_save
from .items import BatchItem


def plan(items: Sequence[BatchItem], backend: Any, out: str | os.PathLike[str], *, profile: str,
         settings: dict[str, Any]) -> tuple[list[BatchItem], dict[str, Path]]:
    """``(to do, {name: finished media})``; raises for the first item whose folder holds another request's output."""
    todo, done = [], {}
    for item in items:
        if item.kind == "request":  # the item's record on ``backend``, checked there (nothing sent or loaded)
            recorded = item.request()
            backend.check(recorded)
        else:
            recorded = plan_spec(item.sample(), backend=backend, profile=profile, out=out, progress=False).run
        if item.kind == "sample" and any(fw.is_url(value) for value in item.sample().path_fields().values()):
            found = find_saved(item.stem(out), recorded, backend=backend.name, settings=settings)
        else:
            found = check_free(item.stem(out), recorded, backend=backend.name, settings=settings)
        if found is None:
            todo.append(item)
        else:
            done[item.name] = found
    return todo, done


def run_item(item: BatchItem, backend: Any, out: str | os.PathLike[str], *, profile: str) -> Generation:
    """Make (or find) one item's output at ``<out>/<name>/vision.*`` on a backend object."""
    if item.kind == "request":
        return generate_and_save(backend, item.request(), item.stem(out))
    return run_spec(item.sample(), backend=backend, profile=profile, out=out, progress=False)
