"""VllmOmniBackend: the exact requests, the model check, reading the answers, errors, retries, hand-built forms.

The client runs with real httpx; answers come from ``tests/backends/vllm_fake.FakeServer`` through
``httpx.MockTransport`` (real PNG and H.264/AAC bytes, shaped as vLLM-Omni 0.30.0 answers), or from real loopback
sockets where the failure is a connection's. What the client *sends* is held to the real server's models in
``tests/contracts/test_vllm_client_contract.py``; end-to-end runs against the local stand-in live in
``tests/server``. Jobs, readiness, dying connections and the asyncio client: ``test_vllm_omni_jobs.py``.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from cosmos_helpers import media
from cosmos_helpers.backends import vllm_omni
from cosmos_helpers.backends.vllm_omni import AsyncVllmOmniBackend, VllmOmniBackend
from cosmos_helpers.backends.vllm_wire import RetryPolicy, error_from_response
from cosmos_helpers.errors import (AuthenticationError, ConnectionLostError, GenerationTimeoutError, GuardrailError,
                                   RequestValidationError, ServerBusyError, ServerError, ValidationError)
from cosmos_helpers.protocol import vllm_omni as proto
from tests.backends.vllm_fake import (FakeServer, async_client_for, client_for, envelope, image_file,
                                      mp4_bytes, req, request_form)

GUARDRAIL = proto.GUARDRAIL_MESSAGE


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
    # the pipeline derives the sound's length from num_frames / fps: no rounded copy of it is sent
    assert fields["generate_sound"] == "true" and "sound_duration" not in fields


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
    assert first.standin is None and first.manifest()["standin"] is None  # a real server's card says nothing more
    assert len(server.calls("GET", proto.MODELS)) == 1
    fields = request_form(server.calls("POST", proto.VIDEOS_SYNC)[0])[0]
    assert "model" not in fields


def test_the_client_takes_no_model():
    with pytest.raises(ValidationError) as caught:
        VllmOmniBackend("http://vllm.test", model="nvidia/Cosmos3-Nano")
    assert caught.value.field == "model" and "GenerationRequest" in caught.value.fix


@pytest.mark.parametrize("served,root", [(proto.EDGE_MODEL, None), ("edge", proto.EDGE_MODEL)])
def test_what_an_edge_checkpoint_refuses_is_refused_before_sending(served, root, rgb_video):
    """Cosmos3-Edge's pipeline refuses sound and video2video only once the request is queued (a 500)."""
    server = FakeServer(served=served, root=root)
    client = client_for(server)
    # profile="edge" refuses sound when the request is built; a base profile's request sent to Edge by model=
    # is refused by the client against the served checkpoint
    with pytest.raises(ValidationError, match="no sound pathway"):
        req(sound=True, profile="edge")
    small = dict(profile="nano", model=proto.EDGE_MODEL, tier="256", num_frames=9)
    for request, field in ((req(sound=True, **small), "sound"), (req("video2video", video=rgb_video, **small), "mode")):
        with pytest.raises(ValidationError) as caught:
            client.generate(request)
        assert caught.value.field == field and proto.EDGE_MODEL in str(caught.value)
    assert not [r for r in server.requests if r.method == "POST"]
    assert client.generate(req(**small)).model == served  # silent text2video is what Edge makes


def test_curl_uses_the_clients_settings(server, monkeypatch):
    monkeypatch.delenv("COSMOS3_VLLM_API_KEY", raising=False)
    for make in (client_for, async_client_for):
        command = make(server, image_response_format="file", api_key="k").curl(req("text2image"))
        assert command.startswith("curl ") and f"http://vllm.test{proto.IMAGES}" in command
        assert '"response_format":"file"' in command and "$COSMOS3_VLLM_API_KEY" in command and " k" not in command


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


def test_the_servers_measurements_read_alike_from_every_answer(client, server):
    """Sync headers (text), an images answer's ``metrics`` and a job record go through one parser."""
    server.metrics = {"inference_time_s": 2.0, "stage_durations": {"denoise": 1.5, "decode": 0.25},
                      "peak_memory_mb": 64.0}
    video, image = client.generate(req()), client.generate(req("text2image"))
    job = client.generate_async_job(req(), timeout=60)
    for generation in (video, image, job):
        assert {k: v for k, v in generation.timings.items() if k.startswith("stage_")} == {
            "stage_denoise_s": 1.5, "stage_decode_s": 0.25}
        assert generation.provenance["stage_durations"] == {"denoise": 1.5, "decode": 0.25}
        assert generation.provenance["peak_memory_mb"] == 64.0
    assert video.timings["inference_s"] == job.timings["inference_s"] == 2.0
    assert "inference_s" not in image.timings  # an images answer does not say


def test_measurements_that_are_not_numbers_are_left_out(client, server):
    server.script("POST", proto.VIDEOS_SYNC, lambda r: httpx.Response(200, content=server.video(request_form(r)[0]),
                  headers={"content-type": "video/mp4", "x-inference-time-s": "nan", "x-peak-memory-mb": "n/a",
                           "x-stage-durations": '{"denoise":"1.5","decode":true,"encode":null}'}))
    generation = client.generate(req())
    assert generation.timings["stage_denoise_s"] == 1.5 and "stage_decode_s" not in generation.timings
    assert "inference_s" not in generation.timings and "peak_memory_mb" not in generation.provenance


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
    """A transfer sample runs through ``run_sample`` (its form built in backends.vllm_transfer and sent with
    send_video_form); nothing of the client imports cosmos_helpers.transfer (the old import was a cycle)."""
    assert not hasattr(VllmOmniBackend, "transfer") and not hasattr(AsyncVllmOmniBackend, "transfer")
    for module in ("vllm_omni", "vllm_base", "vllm_wire", "vllm_serve", "vllm_transfer"):
        lines = (Path(vllm_omni.__file__).parent / f"{module}.py").read_text().splitlines()
        imports = [line for line in lines if line.lstrip().startswith(("from ", "import "))]
        assert imports and not [line for line in imports if "..transfer" in line or "helpers.transfer" in line], \
            module




@pytest.mark.parametrize("cache", ["off", "sea"])
def test_a_step_cache_is_the_servers_and_a_request_for_one_is_refused_before_sending(cache):
    server = FakeServer()
    with pytest.raises(ValidationError) as caught:
        client_for(server).generate(req(step_cache=cache))
    assert caught.value.field == "step_cache" and "vllm-omni" in caught.value.problem
    assert "serve_command(model, step_cache=" in caught.value.fix
    assert server.requests == []  # nothing sent, not even the model list
    generation = client_for(server).generate(req())
    assert generation.provenance["step_cache"]["source"].startswith("vllm-omni default: the server's --cache-backend")
