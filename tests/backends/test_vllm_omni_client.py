"""VllmOmniBackend / AsyncVllmOmniBackend: the exact requests, reading the answers, errors, retries, jobs.

The client runs with real httpx; answers come from ``tests/backends/vllm_fake.FakeServer`` through
``httpx.MockTransport`` (real PNG and H.264/AAC bytes, shaped as vLLM-Omni 0.30.0 answers), or from real loopback
sockets where the failure is a connection's. What the client *sends* is held to the real server's models in
``tests/contracts/test_vllm_client_contract.py``; end-to-end runs against the local stand-in live in
``tests/server``.
"""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.backends import vllm_omni
from cosmos_helpers.backends.vllm_omni import AsyncVllmOmniBackend, VllmOmniBackend
from cosmos_helpers.backends.vllm_wire import RetryPolicy, error_from_response
from cosmos_helpers.errors import (AuthenticationError, BackendUnavailableError, ConnectionLostError,
                                   GenerationTimeoutError, GuardrailError, JobFailedError, OutputExistsError,
                                   RequestValidationError, ServerBusyError, ServerError, ValidationError)
from cosmos_helpers.protocol import vllm_omni as proto
from tests.backends.vllm_fake import (FakeServer, answer, async_client_for, client_for, envelope, image_file,
                                      mp4_bytes, request_form)

GUARDRAIL = proto.GUARDRAIL_MESSAGE


def req(mode: str = "text2video", **changes) -> GenerationRequest:
    values = dict(mode=mode, prompt="a small robot crosses a workshop", num_inference_steps=2, seed=5)
    values.update(changes)
    return GenerationRequest(**values)


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def client(server) -> VllmOmniBackend:
    with client_for(server) as backend:
        yield backend


# =====================================================================================================
# What is sent
# =====================================================================================================


def test_text2video_sends_exactly_what_the_request_resolved(client, server):
    client.generate(req(fps=24, guidance_scale=6.5, flow_shift=10.0))
    (post,) = server.calls("POST", proto.VIDEOS_SYNC)
    fields, files = request_form(post)
    assert fields == {"prompt": "a small robot crosses a workshop", "size": "160x96", "num_frames": "9",
                      "fps": "24.0", "num_inference_steps": "2", "guidance_scale": "6.5", "flow_shift": "10.0",
                      "seed": "5", "extra_params": '{"guardrails":false}'}
    assert files == {}  # every part is text: no filename, so the server reads them as form fields
    assert "model" not in fields and "negative_prompt" not in fields and "generate_sound" not in fields


@pytest.mark.parametrize("option,value,key,sent", [
    ("use_system_prompt", True, "use_system_prompt", True),
    ("use_system_prompt", False, "use_system_prompt", False),
    ("add_resolution_template", True, "use_resolution_template", True),
    ("add_duration_template", False, "use_duration_template", False),
    ("guidance_interval", (400, 1000), "guidance_interval", [400.0, 1000.0]),
])
@pytest.mark.parametrize("mode", ["text2image", "text2video"])
def test_backend_default_options_are_sent_only_when_set(client, server, mode, option, value, key, sent):
    client.generate(req(mode))
    client.generate(req(mode, **{option: value}))
    route = proto.IMAGES if mode == "text2image" else proto.VIDEOS_SYNC
    unset, explicit = (_extra_params(r) for r in server.calls("POST", route))
    assert key not in unset  # left to the server's own default
    assert explicit[key] == sent and type(explicit[key]) is type(sent)  # JSON booleans, never "true"/"false"
    if mode == "text2image":
        assert "use_system_prompt" not in json.loads(server.calls("POST", route)[1].read())  # a str enum there


def _extra_params(request: httpx.Request) -> dict:
    if request.url.path == proto.IMAGES:
        return json.loads(request.read())["extra_params"]
    return json.loads(request_form(request)[0]["extra_params"])


def test_negative_prompt_only_when_given(client, server, assets):
    client.generate(req("text2image"))
    client.generate(req("text2image", negative_prompt=assets / "negative_prompt.json"))
    client.generate(req(negative_prompt="blurry"))
    first, second = (json.loads(r.read()) for r in server.calls("POST", proto.IMAGES))
    assert "negative_prompt" not in first
    assert json.loads(second["negative_prompt"]) == json.loads((assets / "negative_prompt.json").read_text())
    assert request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])[0]["negative_prompt"] == "blurry"


def test_image_body(client, server):
    client.generate(req("text2image", guardrails=True))
    body = json.loads(server.calls("POST", proto.IMAGES)[0].read())
    assert body == {"prompt": "a small robot crosses a workshop", "size": "128x128", "num_inference_steps": 2,
                    "guidance_scale": 4.0, "flow_shift": 3.0, "seed": 5, "response_format": "b64_json",
                    "extra_params": {"guardrails": True}}


def test_structured_caption_and_sound(client, server, assets):
    request = req(prompt=assets / "prompts/text2video/kettle_robot_sound.json", sound=True)
    client.generate(request)
    fields = request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])[0]
    assert json.loads(fields["prompt"])["resolution"] == {"H": 96, "W": 160}
    assert fields["generate_sound"] == "true" and fields["sound_duration"] == "0.375"


def test_image2video_reference_is_cropped_to_the_output_aspect(client, server, rgb_image):
    generation = client.generate(req("image2video", image=rgb_image, width=96, height=96))
    _, files = request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])
    name, data, mime = files["input_reference"]
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (100, 100) and image.format == "PNG" and mime == "image/png"  # 180x100 -> 1:1
    note = generation.provenance["input_reference"]
    assert note["cropped"] is True and note["source_size"] == [180, 100] and "stretches" in note["why"]


def test_video2video_uploads_a_file_as_is_and_encodes_an_array_once(client, server, assets, rgb_video):
    path = assets / "videos/rolling_ball.mp4"
    client.generate(req("video2video", video=path, condition_frames=(0,), condition_video_keep="last"))
    client.generate(req("video2video", video=rgb_video))
    from_file, from_array = (request_form(r) for r in server.calls("POST", proto.VIDEOS_SYNC))
    assert from_file[1]["input_reference"] == (path.name, path.read_bytes(), "video/mp4")
    assert json.loads(from_file[0]["extra_params"]) == {"guardrails": False, "condition_frame_indexes_vision": [0],
                                                        "condition_video_keep": "last"}
    with tempfile.TemporaryDirectory() as folder:
        upload = Path(folder) / "upload.mp4"
        upload.write_bytes(from_array[1]["input_reference"][1])
        assert media.read_video(upload).frames.shape == rgb_video.shape


def test_bad_options_fail_before_any_request(client, server):
    with pytest.raises(ValidationError) as caught:
        client.generate_image(req("text2image"), response_format="url")
    assert caught.value.field == "response_format"
    with pytest.raises(ValidationError) as caught:
        client.generate({"mode": "text2video", "prompt": "x"})
    assert caught.value.field == "request"
    with pytest.raises(ValidationError) as caught:
        client.submit(req("text2image"))
    assert caught.value.field == "mode" and server.requests == []
    for options, field in (({"url": "http://host:8000/v1"}, "url"), ({"url": "host:8000"}, "url"),
                           ({"timeout": 0}, "timeout"), ({"retries": 0}, "retries"),
                           ({"image_response_format": "url"}, "response_format")):
        with pytest.raises(ValidationError) as caught:
            VllmOmniBackend(**options)
        assert caught.value.field == field


# =====================================================================================================
# The model comes from the request; the server's is checked
# =====================================================================================================


def test_a_request_for_another_model_is_refused_before_any_generation():
    server = FakeServer(served="nvidia/Cosmos3-Nano")
    with pytest.raises(ValidationError) as caught:
        client_for(server).generate(req())  # profile "tiny"
    assert caught.value.field == "model"
    assert "'nvidia/Cosmos3-Nano'" in str(caught.value) and "profile='nano'" in caught.value.fix
    assert [r.method for r in server.requests] == ["GET"]  # nothing was generated


def test_served_name_or_root_is_accepted_and_the_list_is_read_once():
    server = FakeServer(served="cosmos", root="nvidia/Cosmos3-Nano")
    client = client_for(server)
    first = client.generate(req(model="nvidia/Cosmos3-Nano"))
    second = client.generate(req("text2image", model="cosmos"))
    assert first.model == second.model == "cosmos"  # the served name
    assert len(server.calls("GET", proto.MODELS)) == 1
    fields = request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])[0]
    assert "model" not in fields


def test_the_client_takes_no_model():
    with pytest.raises(ValidationError) as caught:
        VllmOmniBackend("http://vllm.test", model="nvidia/Cosmos3-Nano")
    assert caught.value.field == "model" and "GenerationRequest" in caught.value.fix


# =====================================================================================================
# What comes back
# =====================================================================================================


def test_a_video_keeps_the_servers_bytes(client, server, tmp_path):
    generation = client.generate(req(sound=True))
    (sent,) = server.sent
    assert generation.finished.suffix == ".mp4" and generation.finished.data == sent
    assert generation.frames.shape == (9, 96, 160, 3) and generation.frames.dtype == np.uint8
    assert generation.sound.shape[0] == 2 and generation.sample_rate == 48_000
    assert generation.seed == 5 and generation.backend == "vllm-omni" and generation.model == "tiny"
    assert generation.timings["inference_s"] == 1.25 and generation.timings["stage_denoise_s"] == 1.0
    assert generation.provenance["request_id"] == "video_sync-0123"
    saved = generation.save(tmp_path / "clip")
    assert saved.read_bytes() == sent  # copied, not encoded a second time


@pytest.mark.parametrize("response_format", ["b64_json", "file"])
def test_an_image_keeps_the_servers_bytes(server, tmp_path, response_format):
    generation = client_for(server, image_response_format=response_format).generate(req("text2image"))
    (sent,) = server.sent
    assert generation.finished.data == sent and generation.finished.suffix == ".png"
    assert generation.frames.shape == (1, 128, 128, 3)
    assert generation.save(tmp_path / "still").read_bytes() == sent


def test_a_file_answer_keeps_its_own_format(client, server, tmp_path):
    jpeg = image_file(128, 128, "JPEG")
    server.script("POST", proto.IMAGES, httpx.Response(200, content=jpeg, headers={"content-type": "image/jpeg"}))
    generation = client.generate_image(req("text2image"), response_format="file")
    assert generation.finished.suffix == ".jpg"
    assert generation.save(tmp_path / "still") == tmp_path / "still.jpg"
    assert (tmp_path / "still.jpg").read_bytes() == jpeg


@pytest.mark.parametrize("reply", [
    httpx.Response(200, content=b"<html>proxy</html>", headers={"content-type": "text/html"}),
    httpx.Response(200, content=b"", headers={"content-type": "video/mp4"}),  # action-only output
])
def test_a_sync_answer_must_be_an_mp4(client, server, reply):
    server.script("POST", proto.VIDEOS_SYNC, reply)
    with pytest.raises(ServerError, match="expected video/mp4"):
        client.generate(req())


def test_error_envelope_mapping():
    def body(message):
        return json.dumps(proto.error_body(400, message)).encode()

    assert isinstance(error_from_response(400, body("num_frames: bad"), {}), RequestValidationError)
    assert isinstance(error_from_response(400, body(GUARDRAIL), {}), GuardrailError)
    assert isinstance(error_from_response(401, b'{"error":"Unauthorized"}', {}), AuthenticationError)
    assert isinstance(error_from_response(403, b"", {}), AuthenticationError)
    busy = error_from_response(429, body("busy"), {"retry-after": "7"})
    assert isinstance(busy, ServerBusyError) and busy.retry_after == 7.0
    assert isinstance(error_from_response(504, body("Video generation timed out after 600.0s"), {}),
                      GenerationTimeoutError)
    failure = error_from_response(500, body("Video generation failed: boom"), {"x-request-id": "r1"})
    assert type(failure) is ServerError and failure.status == 500 and failure.request_id == "r1"
    assert "Video generation failed: boom" in str(failure)


def test_errors_through_the_client(client, server):
    server.script("POST", proto.VIDEOS_SYNC, envelope(400, GUARDRAIL), envelope(400, "1 validation error"),
                  envelope(500, "Video generation failed: no sound head"))
    with pytest.raises(GuardrailError, match="blocked by Cosmos3 guardrails"):
        client.generate(req())
    with pytest.raises(RequestValidationError) as caught:
        client.generate(req())
    assert caught.value.status == 400
    with pytest.raises(ServerError, match="no sound head"):
        client.generate(req())


def test_api_key_from_argument_and_environment(server, monkeypatch):
    monkeypatch.setenv("COSMOS3_VLLM_API_KEY", "from-env")
    client_for(server).health()
    client_for(server, api_key="given").health()
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer from-env", "Bearer given"]
    server.script("GET", proto.MODELS, envelope(401, "Unauthorized"))
    with pytest.raises(AuthenticationError, match="COSMOS3_VLLM_API_KEY"):
        client_for(server).models()


# =====================================================================================================
# One retry policy; a generation POST is sent once
# =====================================================================================================


def test_backoff():
    policy = RetryPolicy(6, base=0.5, cap=8.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert policy.backoff(1, retry_after=3.0) == 3.0 and policy.backoff(1, retry_after=60.0) == 8.0


@pytest.mark.parametrize("failure", [envelope(503, "not ready"), envelope(500, "engine died"),
                                     httpx.RemoteProtocolError("Server disconnected"),
                                     httpx.ConnectError("connection refused")])
@pytest.mark.parametrize("method,route", [("generate", proto.VIDEOS_SYNC), ("generate_image", proto.IMAGES),
                                          ("submit", proto.VIDEOS)])
def test_generation_posts_are_sent_once(client, server, method, route, failure):
    server.script("POST", route, failure)
    with pytest.raises((ServerError, ConnectionLostError)):
        getattr(client, method)(req("text2image" if route == proto.IMAGES else "text2video"))
    assert len(server.calls("POST", route)) == 1


def test_idempotent_calls_retry_then_give_up(client, server):
    job = client.submit(req())
    path = f"{proto.VIDEOS}/{job['id']}"
    server.script("GET", path, envelope(503, "busy"), httpx.ReadTimeout("slow"))
    assert client.retrieve(job["id"])["status"] == "in_progress"
    assert len(server.calls("GET", path)) == 3
    server.script("GET", path, *[httpx.ConnectError("refused")] * 3)
    with pytest.raises(ConnectionLostError, match="job status"):
        client.retrieve(job["id"])
    assert len(server.calls("GET", path)) == 3 + 3  # retries=3: three attempts in all
    server.script("GET", path, envelope(404, "Video not found"))
    with pytest.raises(ServerError, match="404"):
        client.retrieve(job["id"])
    assert len(server.calls("GET", path)) == 3 + 3 + 1  # a 404 is an answer, not a hiccup
    server.script("DELETE", path, envelope(409, "Cancellation in progress"))
    assert client.delete(job["id"])["deleted"] is True and len(server.calls("DELETE", path)) == 2


def test_every_call_has_a_timeout(server):
    client = client_for(server, timeout=77.0, connect_timeout=3.0)
    client.generate(req())
    client.generate(req("text2image"))
    client.generate_async_job(req())
    client.list_jobs()
    for request in server.requests:
        timeout = request.extensions["timeout"]
        assert all(timeout[k] is not None for k in ("connect", "read", "write", "pool")), request.url
        assert timeout["connect"] == 3.0
    for route in (proto.VIDEOS_SYNC, proto.IMAGES):
        assert server.calls("POST", route)[0].extensions["timeout"]["read"] == 77.0


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
    assert generation.provenance["job_id"].startswith("video_gen_") and generation.timings["inference_s"] == 2.5
    assert generation.provenance["deleted"] is not keep and generation.model == "tiny"
    assert (generation.provenance["job_id"] in server.jobs) is keep


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
# A hand-built form (transfer): send_video_form
# =====================================================================================================


def test_send_video_form(client, server):
    control = mp4_bytes(160, 96, 9, 24.0, False)
    fields = {"prompt": "a robot arm", "num_frames": "9", "fps": "16.0", "seed": "3", "size": "160x96",
              "control_type": "edge", "extra_params": json.dumps({"edge": {"control_weight": 0.5}})}
    generation = client.send_video_form(fields, {"control_reference": ("edge.mp4", control, "video/mp4")},
                                        what="transfer")
    sent_fields, sent_files = request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])
    assert sent_fields == fields and sent_files == {"control_reference": ("edge.mp4", control, "video/mp4")}
    assert generation.seed == 3 and generation.fps == 16.0 and generation.request is None
    assert generation.finished.data == server.sent[-1] and generation.provenance["workflow"] == "transfer"


@pytest.mark.parametrize("fields,files,field", [
    ({"prompt": "x", "num_frames": 9, "seed": "1"}, {}, "num_frames"),  # not a string
    ({"prompt": "x", "num_frames": "9", "seed": "1", "edge": "true"}, {}, "edge"),  # not a form field
    ({"prompt": "x", "seed": "1"}, {}, "num_frames"),  # omitted: a one-frame video
    ({"prompt": "x", "num_frames": "9"}, {}, "seed"),  # the server never echoes its own
    ({"prompt": "x", "num_frames": "9", "seed": "1", "extra_params": "[1]"}, {}, "extra_params"),
    ({"prompt": "x", "num_frames": "9", "seed": "1"}, {"mask": ("m.mp4", b"", "video/mp4")}, "mask"),
])
def test_send_video_form_refuses_bad_forms_before_sending(client, server, fields, files, field):
    with pytest.raises(ValidationError) as caught:
        client.send_video_form(fields, files)
    assert caught.value.field == field and server.requests == []


def test_a_model_for_a_form_is_checked(client, server):
    with pytest.raises(ValidationError, match="runs 'tiny'"):
        client.send_video_form({"prompt": "x", "num_frames": "9", "seed": "1"}, model="nvidia/Cosmos3-Super")
    assert not server.calls("POST", proto.VIDEOS_SYNC)


def test_no_transfer_method_and_no_transfer_import():
    """Transfer forms are built by cosmos_helpers.transfer, which calls send_video_form (the old import was a cycle)."""
    assert not hasattr(VllmOmniBackend, "transfer") and not hasattr(AsyncVllmOmniBackend, "transfer")
    for module in ("vllm_omni", "vllm_base", "vllm_wire", "vllm_serve"):
        lines = (Path(vllm_omni.__file__).parent / f"{module}.py").read_text().splitlines()
        imports = [line for line in lines if line.lstrip().startswith(("from ", "import "))]
        assert imports and not [line for line in imports if "transfer" in line], module


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

    loop = None
    asyncio.run(scenario())
    assert ran == ["decode_image_reply", "input_reference", "decode_mp4"]


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
