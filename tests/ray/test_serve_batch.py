"""A batch through real Ray Serve: the stand-in app with two replicas on a local Ray instance.

Held to the framework's contract on every exchange (``contract.Recorder``), and to ``DiffusersBackend`` on the
frames: the stand-in writes ``vision.jpg`` at the framework's ``image_save_quality`` (95), so the reference is this
process's generation of the same request, encoded the same way.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray
from PIL import Image

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.batch import run_batch
from cosmos_helpers.errors import OutputExistsError
from cosmos_helpers.protocol import ray_serve as rs

from .conftest import write_items
from .contract import Recorder

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
QUALITY = 95  # the framework's image_save_quality default (protocol.framework.MODE_DEFAULTS)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def manifests(out: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/vision.json")}


def test_a_12_item_batch_survives_a_killed_driver_resumes_without_redoing_and_matches_diffusers(
        standin, tmp_path, tiny_backend):
    requests = tmp_path / "requests.jsonl"
    items = write_items(requests, 12)
    out = tmp_path / "out"
    driver = subprocess.Popen([sys.executable, "-m", "cosmos_helpers.cli", "batch", str(requests), "--out", str(out),
                               "--backend", "framework-serve", "--url", standin.url, "--concurrency", "1"],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(manifests(out)) >= 3 or driver.poll() is not None, 120, "three finished items")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finished = manifests(out)
    assert 3 <= len(finished) < 12, finished

    recorder = Recorder()
    result = run_batch(requests, out, backend=standin.backend(transport=recorder, timeout=120), gallery=False)
    assert result.ok and len(result.records) == 12
    skipped = {r.name for r in result.records if r.status == "skipped"}
    assert skipped == set(finished) and {n: m for n, m in manifests(out).items() if n in finished} == finished
    assert len(recorder.posts()) == 12 - len(finished)  # every one checked against the 5eee9ed schemas as it went
    made = [r for r in result.records if r.status == "ok"]
    assert len({r.worker for r in made}) == 2, [r.worker for r in made]  # both replicas took work
    assert (out / "summary.csv").is_file() and json.loads((out / "batch.json").read_text())["items"][0]["name"]

    manifest = json.loads((out / "item_00" / "vision.json").read_text())
    assert manifest["backend"] == "framework-serve" and manifest["provenance"]["standin"]["model_ran"] == "tiny"
    for item in items[:3]:  # the same frames as DiffusersBackend at the same seed
        request = GenerationRequest(**{k: v for k, v in item.items() if k != "name"})
        local = tiny_backend.generate(request).frames[0]
        expected = np.asarray(Image.open(io.BytesIO(media.image_bytes(local, "JPEG", quality=QUALITY))))
        served = media.read_image(out / item["name"] / "vision.jpg")
        np.testing.assert_array_equal(served, expected)
    assert not np.array_equal(media.read_image(out / "item_00" / "vision.jpg"),
                              media.read_image(out / "item_04" / "vision.jpg"))  # same prompt, another seed

    changed = items[5] | {"seed": 99}  # another request at a finished item's name: refused before any work
    requests.write_text("".join(json.dumps(i) + "\n" for i in [*items[:5], changed, *items[6:]]))
    refused = Recorder()
    with pytest.raises(OutputExistsError, match="item_05"):
        run_batch(requests, out, backend=standin.backend(transport=refused), gallery=False)
    assert refused.posts() == []


def test_a_killed_replica_is_reported_and_its_item_retried_on_the_other_never_hung(standin, tmp_path):
    requests = tmp_path / "requests.jsonl"
    write_items(requests, 2, mode="text2video", num_frames=9)
    since = time.time()

    def started() -> bool:  # both items begun, one on each replica (each writes its sample_args.json first)
        return sum(p.stat().st_mtime > since for p in standin.output_dir.glob("generate_*/sample_args.json")) >= 2

    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(result=run_batch(
        requests, tmp_path / "out", backend=standin.backend(timeout=180), gallery=False)), daemon=True)
    worker.start()
    wait_for(started, 60, "both items to start on the replicas")
    replicas = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                      if a["name"].startswith(f"SERVE_REPLICA::{rs.APP_NAME}#tiny#"))
    assert len(replicas) == 2
    ray.kill(ray.get_actor(replicas[0], namespace="serve"))  # as an out-of-memory kill would
    worker.join(timeout=240)
    assert not worker.is_alive(), "the batch hung after a replica was killed"
    result = outcome["result"]
    assert result.ok, result.failed
    (retried,) = [r for r in result.records if r.attempts]
    assert "HTTP 500" in retried.attempts[0]["error"] and retried.status == "ok"
