"""VllmOmniBackend / AsyncVllmOmniBackend: asynchronous jobs, readiness, connections that fail, the asyncio client.

Answers come from ``tests/backends/vllm_fake.FakeServer`` through ``httpx.MockTransport``, or from real loopback
sockets where the failure is a connection's (see ``test_vllm_omni_client.py`` for what is sent and read).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import subprocess
import sys
import tempfile
import threading

import httpx
import pytest

from cosmos_helpers.backends import vllm_omni
from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from cosmos_helpers.errors import (AuthenticationError, BackendUnavailableError, ConnectionLostError,
                                   GenerationTimeoutError, GuardrailError, JobFailedError, OutputExistsError,
                                   ServerError)
from cosmos_helpers.protocol import vllm_omni as proto
from tests.backends.vllm_fake import answer, async_client_for, client_for, envelope, mp4_bytes, req

GUARDRAIL = proto.GUARDRAIL_MESSAGE


# =====================================================================================================
# Asynchronous jobs
# =====================================================================================================


def test_job_helpers(client, server, tmp_path):
    seen = []
    job = client.submit(req())
    assert job["status"] == "queued" and proto.JOB_ID.match(job["id"])
    finished = client.wait(job["id"], timeout=60, progress=lambda j: seen.append((j["status"], j["progress"])))
    assert finished["status"] == "completed" and seen == [("in_progress", 0), ("completed", 100)]
    target = client.download(job["id"], tmp_path / "job.mp4")
    assert target.read_bytes() == server.sent[-1]
    before = len(server.requests)
    with pytest.raises(OutputExistsError):
        client.download(job["id"], tmp_path / "job.mp4")
    assert len(server.requests) == before  # refused before asking
    assert client.list_jobs(limit=100)["data"][0]["id"] == job["id"]
    assert server.calls("GET", proto.VIDEOS)[0].url.params["limit"] == "100"
    assert client.delete(job["id"])["deleted"] is True


@pytest.mark.parametrize("keep", [False, True])
def test_generate_async_job(client, server, keep):
    generation = client.generate_async_job(req(sound=True), timeout=60, keep=keep)
    assert generation.finished.data == server.sent[-1] and generation.sound is not None
    assert generation.provenance["job_id"].startswith("video_gen_") and generation.timings["inference_s"] == 1.25
    assert generation.provenance["deleted"] is not keep and generation.model == "tiny"
    assert (generation.provenance["job_id"] in server.jobs) is keep


def test_answers_are_decoded_from_their_bytes_without_temporary_files(server, monkeypatch):
    """The server's MP4 (sync, or a job's content read once) and image are kept and decoded from memory."""
    for sound in (False, True):
        mp4_bytes(160, 96, 9, 24.0, sound)  # the fake's own answers, encoded before the watch starts

    def no_temporary_files(*args, **kwargs):
        raise AssertionError("a temporary file was made")

    for name in ("TemporaryDirectory", "NamedTemporaryFile", "mkstemp", "mkdtemp"):
        monkeypatch.setattr(tempfile, name, no_temporary_files)

    async def on_the_async_client():
        async with async_client_for(server) as client:
            return await client.generate_async_job(req(sound=True), timeout=60)

    with client_for(server) as client:
        made = [client.generate(req()), client.generate(req("text2image")), client.generate_async_job(req())]
    made.append(asyncio.run(on_the_async_client()))
    assert [g.finished.data for g in made] == server.sent
    assert made[-1].sound is not None and made[-1].frames.shape == (9, 96, 160, 3)
    job_contents = [r for r in server.requests if r.method == "GET" and r.url.path.endswith("/content")]
    assert len(job_contents) == 2  # each job's content is fetched once, and only kept in memory


def test_failed_jobs(client, server, tmp_path):
    job = client.submit(req())
    record = server.jobs[job["id"]]["record"]
    record.update(status="failed", error={"code": 400, "message": GUARDRAIL})
    assert client.retrieve(job["id"])["error"]["code"] == 400  # the 400 answer's body is the job
    with pytest.raises(GuardrailError):
        client.wait(job["id"], timeout=60)
    record["error"] = {"code": 500, "message": "Video generation failed: out of memory"}
    with pytest.raises(JobFailedError, match="out of memory"):
        client.wait(job["id"], timeout=60)
    with pytest.raises(ServerError, match="422"):
        client.download(job["id"], tmp_path / "failed.mp4")
    assert list(tmp_path.iterdir()) == []  # no partial file


def test_wait_times_out(client, server):
    job = client.submit(req())
    server.script("GET", f"{proto.VIDEOS}/{job['id']}", *[answer(200, {**job, "status": "in_progress"})] * 50)
    with pytest.raises(GenerationTimeoutError, match="still in_progress"):
        client.wait(job["id"], timeout=0.01, interval=0.005)


class _BrokenStream(httpx.SyncByteStream):
    def __iter__(self):
        yield b"\x00" * 1000
        raise httpx.ReadError("connection reset by peer")


def test_a_broken_download_leaves_no_file(client, server, tmp_path):
    job = client.submit(req())
    path = f"{proto.VIDEOS}/{job['id']}/content"
    def broken(request):
        return httpx.Response(200, stream=_BrokenStream(), headers={"content-type": "video/mp4"})

    server.script("GET", path, broken, broken, broken)
    with pytest.raises(ConnectionLostError, match="download"):
        client.download(job["id"], tmp_path / "job.mp4")
    assert len(server.calls("GET", path)) == 3 and list(tmp_path.iterdir()) == []


# =====================================================================================================
# Readiness, and connections that fail
# =====================================================================================================


def test_wait_until_ready(client, server):
    server.script("GET", proto.HEALTH, httpx.ConnectError("connection refused"), envelope(503, "loading"))
    ready = client.wait_until_ready(10, interval=0.001)
    assert ready["served_model"] == "tiny" and client.served_model == "tiny"
    assert len(server.calls("GET", proto.HEALTH)) == 3
    server.script("GET", proto.HEALTH, envelope(401, "Unauthorized"))
    with pytest.raises(AuthenticationError):  # waiting would not fix a wrong key
        client.wait_until_ready(10, interval=0.001)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_wait_until_ready_fails_fast_when_the_process_exits():
    process = subprocess.Popen([sys.executable, "-c", "import sys; print('model load failed: out of memory'); "
                                                      "sys.exit(3)"], stdout=subprocess.PIPE)
    process.wait(10)
    with pytest.raises(BackendUnavailableError, match="(?s)code 3.*out of memory"):
        VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False).wait_until_ready(600, process=process)


def test_wait_until_ready_times_out_on_a_closed_port():
    with pytest.raises(GenerationTimeoutError, match="connection refused"):
        VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False).wait_until_ready(0.3, interval=0.05)


def test_refused_connection_is_connection_lost():
    client = VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False, retries=1)
    with pytest.raises(ConnectionLostError, match="is the server still running"):
        client.generate(req("text2image"))


class _DyingServer(http.server.BaseHTTPRequestHandler):
    """Answers the model list, then dies in the middle of a video answer (a killed or crashed server)."""

    posts: list[str] = []

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "tiny", "root": "tiny"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "video/mp4")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(mp4_bytes(160, 96, 9, 24.0, False)[:1000])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_connection_dying_mid_answer_raises_and_keeps_nothing(tmp_path):
    _DyingServer.posts = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DyingServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with VllmOmniBackend(f"http://127.0.0.1:{httpd.server_address[1]}", progress=False) as client:
            with pytest.raises(ConnectionLostError, match="video generation"):
                client.generate(req())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _DyingServer.posts == [proto.VIDEOS_SYNC]  # sent once, never retried


# =====================================================================================================
# The asyncio client
# =====================================================================================================


def test_async_client(server, rgb_image, tmp_path):
    async def scenario():
        async with async_client_for(server) as client:
            await client.wait_until_ready(10, interval=0.001)
            image, video = await asyncio.gather(client.generate(req("text2image")),
                                                client.generate(req("image2video", image=rgb_image)))
            job = await client.generate_async_job(req(seed=4), timeout=60)
            with pytest.raises(GuardrailError):
                server.script("POST", proto.VIDEOS_SYNC, envelope(400, GUARDRAIL))
                await client.generate(req())
            return image, video, job

    image, video, job = asyncio.run(scenario())
    assert image.frames.shape == (1, 128, 128, 3) and video.frames.shape == (9, 96, 160, 3)
    assert job.seed == 4 and job.finished.data in server.sent and video.finished.data in server.sent
    assert len(server.calls("GET", proto.MODELS)) == 1
    assert len(server.calls("POST", proto.VIDEOS_SYNC)) == 2  # the failed one was sent once


def test_async_media_work_leaves_the_event_loop_free(server, monkeypatch, rgb_video):
    """Each piece of media work waits until the event loop runs a callback: it would deadlock on the loop."""
    ran: list[str] = []

    def off_the_loop(name, real):
        def spy(*args, **kwargs):
            loop_ran = threading.Event()
            loop.call_soon_threadsafe(loop_ran.set)
            assert loop_ran.wait(10), f"{name} blocked the event loop"
            ran.append(name)
            return real(*args, **kwargs)

        return spy

    for name in ("decode_mp4", "decode_image_reply", "input_reference"):
        monkeypatch.setattr(vllm_omni, name, off_the_loop(name, getattr(vllm_omni, name)))

    async def scenario():
        nonlocal loop
        loop = asyncio.get_running_loop()
        async with async_client_for(server) as client:
            await client.generate(req("text2image"))
            await client.generate(req("video2video", video=rgb_video))
            await client.generate_async_job(req(), timeout=60)

    loop = None
    asyncio.run(scenario())
    assert ran == ["decode_image_reply", "input_reference", "decode_mp4", "input_reference", "decode_mp4"]


def test_async_generation_posts_are_sent_once(server):
    server.script("POST", proto.VIDEOS_SYNC, httpx.RemoteProtocolError("Server disconnected"))

    async def scenario():
        async with async_client_for(server) as client:
            with pytest.raises(ConnectionLostError):
                await client.generate(req())
            server.script("GET", f"{proto.VIDEOS}/video_gen_x", envelope(503, "busy"), envelope(503, "busy"))
            with pytest.raises(ServerError, match="404"):
                await client.retrieve("video_gen_x")

    asyncio.run(scenario())
    assert len(server.calls("POST", proto.VIDEOS_SYNC)) == 1
    assert len(server.calls("GET", f"{proto.VIDEOS}/video_gen_x")) == 3


def test_async_download_is_atomic(server, tmp_path):
    async def scenario():
        async with async_client_for(server) as client:
            job = await client.submit(req())
            await client.wait(job["id"], timeout=60)
            target = await client.download(job["id"], tmp_path / "job.mp4")
            with pytest.raises(OutputExistsError):
                await client.download(job["id"], target)
            return target

    target = asyncio.run(scenario())
    assert target.read_bytes() == server.sent[-1] and [p.name for p in tmp_path.iterdir()] == ["job.mp4"]
