"""Batch items as Ray tasks on an actor pool (each actor one ``DiffusersBackend``), on the session's Ray instance."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import numpy as np
import psutil
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.batch import run_batch

from .conftest import write_items

pytestmark = pytest.mark.slow


def busy_worker() -> psutil.Process | None:
    """A worker of this test's Ray instance running an item now (Ray titles it ``ray::ItemWorker.run`` while it
    does). Only this process's descendants count: the Ray cookbook's kernel, on another pytest-xdist worker, runs
    ItemWorkers of its own Ray instance, and killing one of those would take an item from the wrong batch."""
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any("ItemWorker.run" in part for part in process.cmdline()):
                return process
    return None


def test_items_run_as_ray_tasks_on_two_workers_a_killed_worker_is_reported_and_its_item_retried(
        ray_instance, tmp_path, tiny_backend):
    requests = tmp_path / "requests.jsonl"
    items = write_items(requests, 4)
    outcome: dict = {}
    driver = threading.Thread(target=lambda: outcome.update(result=run_batch(
        requests, tmp_path / "out", ray=True, workers=2, item_timeout=120, gallery=False)), daemon=True)
    driver.start()
    deadline, victim = time.monotonic() + 120, None
    while time.monotonic() < deadline and driver.is_alive():
        if (victim := busy_worker()) is not None:
            victim.send_signal(signal.SIGKILL)  # at once: an item a loaded machine lets finish is not a lost one
            break
        time.sleep(0.1)
    assert victim is not None, "no Ray worker ever ran an item"
    driver.join(timeout=240)
    assert not driver.is_alive(), "the batch hung after its worker was killed"
    result = outcome["result"]
    assert result.ok, result.failed
    retried = [r for r in result.records if r.attempts]
    workers = {r.worker for r in result.records} | {a["worker"] for r in retried for a in r.attempts}
    assert result.where == "Ray: 2 workers on CPUs" and len(workers) == 2, workers
    assert len(retried) == 1 and "WorkerLostError" in retried[0].attempts[0]["error"], retried
    assert "died while running" in retried[0].attempts[0]["error"]
    for item in items:  # lossless PNGs: exactly DiffusersBackend's frames at the same seed
        request = GenerationRequest(**{k: v for k, v in item.items() if k != "name"})
        np.testing.assert_array_equal(media.read_image(tmp_path / "out" / item["name"] / "vision.png"),
                                      tiny_backend.generate(request).frames[0])
