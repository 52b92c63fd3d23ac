"""Faults: the server killed mid-job and restarted; a full disk or a blocked output folder while the client
downloads or ``Generation.save`` writes. Each must end in a clear error, no partial final file, and a
rerun that completes."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import threading
import time

import httpx
import numpy as np
import pytest

from cosmos_helpers import Generation, media
from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from cosmos_helpers.errors import ConnectionLostError, ServerError
from cosmos_helpers.standins.vllm_omni.local import LocalServer, ThreadedServer
from cosmos_helpers.workflow import generate_and_save

from .conftest import DOUBLES, HOLD, ROOT, small_request
from .doubles import InstantBackend


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.slow
def test_server_killed_mid_job_then_restarted(tmp_path):
    """An async job in progress when the server dies: the waiting client gets ConnectionLostError; after a
    restart the job is unknown (404 'Video not found': records are process-local, as on vLLM-Omni); a
    rerun of the same request completes and is saved."""
    request = small_request(prompt=f"a {HOLD} robot")  # the first run of it never ends by itself
    marker = tmp_path / "running"
    server = LocalServer(threads=1, progress=False, ready_timeout=120, storage_dir=tmp_path / "store", entry=DOUBLES,
                         extra_args=["--hold-word", HOLD, "--hold-marker", str(marker)],
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        server.start()
        client = server.client(progress=False, poll_interval=0.1, retries=2)
        outcome: dict = {}

        def run():
            try:
                client.generate_async_job(request)
            except Exception as exc:  # recorded for the assertions
                outcome["error"] = exc

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 60
        while not marker.exists():  # the job is running, and stays so until the kill
            assert time.monotonic() < deadline and worker.is_alive(), outcome
            time.sleep(0.02)
        jobs = httpx.get(f"{server.url}/v1/videos", timeout=30).json()["data"]
        assert [job["status"] for job in jobs] == ["in_progress"], jobs
        job_id = jobs[0]["id"]
        server.kill()
        worker.join(60)
        assert isinstance(outcome.get("error"), ConnectionLostError), outcome
        assert "is the server still running" in str(outcome["error"])

        server.start()  # same port, storage folder and options; the marker lets the rerun run
        with pytest.raises(ServerError) as lost:
            client.retrieve(job_id)
        assert lost.value.status == 404 and "Video not found" in str(lost.value)
        generation = generate_and_save(client, request, tmp_path / "out" / "rerun")
        assert generation.frames.shape == (9, 96, 160, 3)
        assert leftovers(tmp_path / "out") == ["rerun.json", "rerun.mp4"]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory):
    with ThreadedServer(InstantBackend(), storage_dir=tmp_path_factory.mktemp("faults")) as server:
        client = VllmOmniBackend(server.url, progress=False, poll_interval=0.02, retries=1)
        job = client.submit(small_request(width=32, height=32, num_frames=5, num_inference_steps=1))
        client.wait(job["id"], timeout=30)
        yield client, job["id"]


@contextlib.contextmanager
def file_size_limit(max_bytes: int):
    """The OS refuses to grow any file of this process past ``max_bytes`` (EFBIG), as a full disk refuses space."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an error from write(), not a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_download_disk_full_leaves_nothing_and_rerun_works(finished_job, tmp_path):
    client, job_id = finished_job
    target = tmp_path / "downloads" / "clip.mp4"
    with file_size_limit(256), pytest.raises(OSError) as caught:  # the MP4 is ~1.5 KB
        client.download(job_id, target)
    assert caught.value.errno == errno.EFBIG
    assert leftovers(target.parent) == []  # no final file, no temporary file
    client.download(job_id, target)
    assert media.probe_video(target)["width"] == 32


def test_download_into_a_blocked_folder(finished_job, tmp_path):
    client, job_id = finished_job
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should be")
    with pytest.raises(OSError) as caught:
        client.download(job_id, blocker / "clip.mp4")
    assert "not-a-folder" in str(caught.value)
    assert blocker.read_text().startswith("a file")


def generation(frames: int = 5) -> Generation:
    request = small_request(width=32, height=32, num_frames=frames) if frames > 1 else \
        small_request("text2image", width=32, height=32)
    return Generation(frames=np.zeros((frames, 32, 32, 3), dtype=np.uint8), fps=24.0, seed=0, request=request)


def test_save_disk_full_while_encoding(tmp_path, monkeypatch):
    def full(path, *args, **kwargs):
        with open(path, "wb") as handle:
            handle.write(b"\0" * 1000)  # some bytes made it to disk before it filled up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(media.encode, "_encode", full)
    with pytest.raises(OSError, match="No space left"):
        generation().save(tmp_path / "clip")
    assert leftovers(tmp_path) == []  # neither the MP4 nor the manifest, no temporary file
    monkeypatch.undo()
    assert generation().save(tmp_path / "clip").name == "clip.mp4"
    assert leftovers(tmp_path) == ["clip.json", "clip.mp4"]


def test_save_disk_full_while_writing_the_manifest(tmp_path, monkeypatch):
    """The media file is published before the manifest; if the manifest cannot be written the save fails loudly
    and takes the media file back, so a rerun of the same request is not blocked by an unrecognisable orphan."""
    real = media.write_bytes_atomic

    def full(path, data, **kwargs):
        if str(path).endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data, **kwargs)

    monkeypatch.setattr(media, "write_bytes_atomic", full)
    with pytest.raises(OSError, match="No space left"):
        generation(1).save(tmp_path / "still")
    assert not any(name.endswith(".partial.json") for name in leftovers(tmp_path))
    assert leftovers(tmp_path) == []  # the media file is taken back: no orphan without a manifest
    monkeypatch.undo()
    # so a rerun of the same request simply saves again
    assert generation(1).save(tmp_path / "still").name == "still.png"
    assert leftovers(tmp_path) == ["still.json", "still.png"]


def test_save_into_a_blocked_or_read_only_folder(tmp_path):
    blocker = tmp_path / "blocked"
    blocker.write_text("x")
    with pytest.raises(OSError) as caught:
        generation().save(blocker / "clip")
    assert "blocked" in str(caught.value)
    if os.geteuid() == 0:
        pytest.skip("running as root: permission bits do not stop writes (the blocked-path case ran)")
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)
    try:
        with pytest.raises(PermissionError):
            generation().save(readonly / "clip")
        assert leftovers(readonly) == []
    finally:
        readonly.chmod(0o755)
