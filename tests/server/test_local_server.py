"""LocalServer: a real serve subprocess whose model load is slow (a test double of the backend, started through
``python -m tests.server.serve_doubles``), refused until loaded, then answering, then killed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from cosmos_helpers.errors import ConnectionLostError
from cosmos_helpers.standins.vllm_omni.local import LocalServer, free_port
from cosmos_helpers.workflow import generate_and_save

from .conftest import DOUBLES, HOLD, ROOT, small_request

pytestmark = pytest.mark.slow  # the module's server takes 3 s to load, by design, in its own process


@pytest.fixture(scope="module")
def marker(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("marker") / "running"


@pytest.fixture(scope="module")
def slow_server(marker):
    """A model load that takes 3 s, while another thread probes /health, recording what it sees."""
    port = free_port()
    probes: list[tuple[float, str]] = []
    stop = threading.Event()

    def probe():
        while not stop.is_set():
            try:
                # a slow first answer on a loaded machine is still an answer: record its status, not a timeout
                status = str(httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code)
            except httpx.ConnectError:
                status = "refused"
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            probes.append((time.monotonic(), status))
            if status == "200":
                return
            time.sleep(0.05)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    server = LocalServer(port=port, threads=1, api_key="local-key", progress=False, ready_timeout=120,
                         entry=DOUBLES, extra_args=["--load-delay", "3", "--hold-word", HOLD,
                                                    "--hold-marker", str(marker)],
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    started = time.monotonic()
    try:
        server.start()
        ready_after = time.monotonic() - started
        thread.join(10)
        yield server, probes, ready_after
    finally:
        stop.set()
        server.stop()


def test_refused_while_loading_then_ready(slow_server):
    server, probes, ready_after = slow_server
    statuses = [status for _, status in probes]
    assert statuses[0] == "refused" and statuses[-1] == "200"
    assert set(statuses[:-1]) == {"refused"}  # no HTTP answer at all before the model is loaded
    assert ready_after >= 3
    assert "Application startup complete" in server.log_tail()


def test_generates_through_the_subprocess(slow_server, tmp_path):
    server, _, _ = slow_server
    generation = generate_and_save(server.client(), small_request(sound=True), tmp_path / "t2v")
    assert generation.frames.shape == (9, 96, 160, 3) and generation.sound is not None
    assert (tmp_path / "t2v.mp4").is_file() and (tmp_path / "t2v.json").is_file()


def test_killed_mid_request(slow_server, marker, tmp_path):
    """The server dies during a generation: a clear ConnectionLostError, no partial output, no orphans."""
    server, _, _ = slow_server
    outcome: dict = {}

    def call():
        try:
            generate_and_save(server.client(), small_request(prompt=f"a {HOLD} robot"), tmp_path / "doomed")
        except Exception as exc:  # recorded for the assertions below
            outcome["error"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 60
    while not marker.exists():  # the generation is running (and never ends by itself)
        assert time.monotonic() < deadline and worker.is_alive(), outcome
        time.sleep(0.02)
    group = server.process.pid
    server.kill()
    worker.join(30)
    assert isinstance(outcome.get("error"), ConnectionLostError), outcome
    assert "is the server still running" in str(outcome["error"])
    assert list(tmp_path.iterdir()) == []  # no .mp4, no manifest, no temporary file
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # the whole process group is gone
    server.stop()  # idempotent after a kill
