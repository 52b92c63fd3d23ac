"""VllmOmniBackend / AsyncVllmOmniBackend against the real local server on loopback, plus the official
``openai`` SDK as a second client and ``curl`` as a third. No mocks of our own code."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.backends.vllm_omni import (
    AsyncVllmOmniBackend,
    VllmOmniBackend,
    curl_command,
    error_from_response,
    image_body,
    input_reference_for,
    video_form,
)
from cosmos_helpers.errors import (
    AuthenticationError,
    BackendUnavailableError,
    ConnectionLostError,
    GenerationTimeoutError,
    GuardrailError,
    OutputExistsError,
    RequestValidationError,
    ServerBusyError,
    ServerError,
)

SMALL = dict(width=160, height=96, num_inference_steps=2)
BLOCK_WORD = "forbiddenword"


def req(mode: str = "text2video", **changes) -> GenerationRequest:
    values = dict(mode=mode, prompt="a small robot crosses a workshop", **SMALL)
    if mode != "text2image":
        values["num_frames"] = 9
    values.update(changes)
    return GenerationRequest(**values)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from cosmos_helpers.server.local import ThreadedServer

    with ThreadedServer(storage_dir=tmp_path_factory.mktemp("client-storage"), block_words=(BLOCK_WORD,),
                        api_key="client-key", step_progress=True) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with VllmOmniBackend(server.url, api_key="client-key", progress=False, poll_interval=0.05) as backend:
        yield backend


# the wire format (pure functions) -------------------------------------------------------------------------


def test_video_form_is_all_strings_with_num_frames_and_json_booleans(assets):
    request = GenerationRequest(mode="t2v", prompt=assets / "prompts/text2video/kettle_robot_sound.json",
                                negative_prompt=assets / "negative_prompt.json", sound=True, **SMALL, num_frames=9)
    fields, files = video_form(request)
    assert all(isinstance(value, str) for value in fields.values())
    assert fields["num_frames"] == "9" and fields["size"] == "160x96" and fields["seed"] == "0"
    assert fields["generate_sound"] == "true" and fields["sound_duration"] == "0.375"
    extra = json.loads(fields["extra_params"])
    assert extra == {"use_resolution_template": False, "use_duration_template": False, "use_system_prompt": True,
                     "guardrails": False}
    assert all(isinstance(extra[key], bool) for key in extra)
    assert json.loads(fields["prompt"])["resolution"] == {"H": 96, "W": 160}
    assert "model" not in fields and files == {}


def test_image_body_uses_extra_params_not_extra_args():
    body = image_body(req("text2image", guardrails=True, prompt="plain words"))
    assert "extra_args" not in body and body["extra_params"]["guardrails"] is True
    assert body["extra_params"]["use_resolution_template"] is True  # plain text: templates apply
    assert body["size"] == "160x96" and body["n"] == 1 and body["response_format"] == "b64_json"


def test_image_reference_is_cropped_to_the_output_aspect(rgb_image):
    from PIL import Image

    name, content, mime = input_reference_for(req("image2video", image=rgb_image, width=96, height=96))
    with Image.open(io.BytesIO(content)) as image:
        assert image.size == (100, 100) and mime == "image/png"  # 180x100 centre-cropped to 1:1


def test_error_mapping():
    def envelope(message):
        return json.dumps({"error": {"message": message, "type": "x", "param": None, "code": 0}}).encode()

    assert isinstance(error_from_response(400, envelope("num_frames: bad"), {}), RequestValidationError)
    assert isinstance(error_from_response(400, envelope("Input was blocked by Cosmos3 guardrails."), {}),
                      GuardrailError)
    assert isinstance(error_from_response(401, b'{"error":"Unauthorized"}', {}), AuthenticationError)
    assert isinstance(error_from_response(403, b"", {}), AuthenticationError)
    busy = error_from_response(429, envelope("busy"), {"retry-after": "7"})
    assert isinstance(busy, ServerBusyError) and busy.retry_after == 7.0
    assert isinstance(error_from_response(504, envelope("timed out"), {}), GenerationTimeoutError)
    failure = error_from_response(500, envelope("Video generation failed: boom"), {"x-request-id": "r1"})
    assert type(failure) is ServerError and failure.status == 500 and failure.request_id == "r1"
    assert "Video generation failed: boom" in str(failure)


# every mode through the client ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode,changes", [
    ("text2image", {}),
    ("text2video", {}),
    ("text2video", {"sound": True}),
    ("image2video", {"image": "IMAGE"}),
    ("image2video", {"image": "IMAGE", "sound": True}),
    ("video2video", {"video": "VIDEO"}),
])
def test_every_mode(client, assets, mode, changes):
    changes = dict(changes)
    if changes.get("image") == "IMAGE":
        changes["image"] = assets / "images/rolling_ball.png"
    if changes.get("video") == "VIDEO":
        changes["video"] = assets / "videos/rolling_ball.mp4"
    generation = client.generate(req(mode, seed=5, **changes))
    frames = 1 if mode == "text2image" else 9
    assert generation.frames.shape == (frames, 96, 160, 3) and generation.frames.dtype == np.uint8
    assert generation.seed == 5 and generation.backend == "vllm-omni" and generation.model == "tiny"
    assert generation.timings["total_s"] > 0 and "stage_denoise_s" in generation.timings
    if mode != "text2image":
        assert generation.timings["inference_s"] > 0
        assert generation.provenance["request_id"].startswith("video_sync-")
    if changes.get("sound"):
        assert generation.sound.shape[0] == 2 and generation.sample_rate == 48000
        assert generation.sound.shape[1] >= int(0.3 * 48000)
    else:
        assert generation.sound is None


def test_image_file_response_format(client):
    request = req("text2image")
    assert np.array_equal(client.generate_image(request, response_format="file").frames,
                          client.generate_image(request).frames)


def test_same_pixels_as_diffusers_directly(client, tiny_backend, tmp_path):
    """PNG: identical. Video: the server encodes H.264, so compare with the direct frames encoded the same way."""
    image_request = req("text2image", seed=11)
    direct = tiny_backend.generate(image_request)
    served = client.generate(image_request)
    assert np.array_equal(direct.frames, served.frames)

    video_request = req("text2video", seed=11)
    direct = tiny_backend.generate(video_request)
    served = client.generate(video_request)
    from cosmos_helpers.server.execute import ENCODER

    media.write_mp4(tmp_path / "direct.mp4", direct.frames, direct.fps, **ENCODER)
    reencoded = media.read_video(tmp_path / "direct.mp4").frames
    assert np.array_equal(reencoded, served.frames)  # same encoder, same settings: bit-identical
    # Against the raw frames only the codec's loss remains. The tiny model paints full-band noise, which
    # H.264 (crf 18) keeps poorly (~19 dB measured), so a PSNR threshold would not separate "same" from
    # "different" here; the bit-identical re-encode above is the real check. A different seed must differ:
    other = client.generate(req("text2video", seed=12))
    assert not np.array_equal(other.frames, served.frames)
    assert psnr(reencoded, served.frames) == float("inf") > psnr(direct.frames, served.frames) > psnr(
        direct.frames, other.frames)


def test_guardrail_and_validation_errors(client):
    with pytest.raises(GuardrailError, match="blocked by Cosmos3 guardrails"):
        client.generate(req(prompt=f"a {BLOCK_WORD}", guardrails=True))
    client.generate(req(prompt=f"a {BLOCK_WORD}", guardrails=False, num_inference_steps=1))
    with pytest.raises(RequestValidationError, match="Model mismatch") as caught:
        VllmOmniBackend(client.url, api_key="client-key", model="nvidia/Cosmos3-Nano").generate(req())
    assert caught.value.status == 400


def test_api_key_from_argument_and_environment(server, monkeypatch):
    monkeypatch.delenv("COSMOS3_VLLM_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="HTTP 401"):
        VllmOmniBackend(server.url, progress=False).wait_until_ready(5)
    with pytest.raises(AuthenticationError):
        VllmOmniBackend(server.url, api_key="wrong").models()
    monkeypatch.setenv("COSMOS3_VLLM_API_KEY", "client-key")
    ready = VllmOmniBackend(server.url, progress=False).wait_until_ready(5)
    assert ready["served_model"] == "tiny"


# asynchronous jobs ------------------------------------------------------------------------------------------


def test_async_job_helpers(client, tmp_path):
    seen = []
    job = client.submit(req(num_inference_steps=6))
    assert job["status"] == "queued"
    finished = client.wait(job["id"], timeout=60, progress=lambda j: seen.append((j["status"], j["progress"])))
    assert finished["status"] == "completed" and seen[-1] == ("completed", 100)
    assert any(status == "in_progress" and 0 < value < 100 for status, value in seen) or len(seen) >= 1
    target = client.download(job["id"], tmp_path / "job.mp4")
    assert media.read_video(target).frames.shape == (9, 96, 160, 3)
    with pytest.raises(OutputExistsError):
        client.download(job["id"], tmp_path / "job.mp4")
    assert client.list_jobs(limit=100)["data"][0]["id"] == job["id"]
    assert client.delete(job["id"])["deleted"] is True


def test_generate_async_job_and_failed_jobs(client, tmp_path):
    generation = client.generate_async_job(req(sound=True, seed=2), timeout=60)
    assert generation.frames.shape == (9, 96, 160, 3) and generation.sound is not None
    assert generation.provenance["job_id"].startswith("video_gen_") and generation.timings["inference_s"] > 0
    assert generation.provenance["deleted"] is True
    with pytest.raises(ServerError, match="404"):
        client.retrieve(generation.provenance["job_id"])

    failed = client.submit(req(prompt=f"{BLOCK_WORD}", guardrails=True))
    with pytest.raises(GuardrailError):
        client.wait(failed["id"], timeout=60)
    record = client.retrieve(failed["id"])  # the 400 answer's body is the job
    assert record["status"] == "failed" and record["error"]["code"] == 400
    target = tmp_path / "failed.mp4"
    with pytest.raises(ServerError, match="422"):
        client.download(failed["id"], target)
    assert not target.exists() and list(tmp_path.iterdir()) == []  # no partial file
    client.delete(failed["id"])


def test_wait_times_out(client):
    job = client.submit(req(num_inference_steps=30))
    with pytest.raises(GenerationTimeoutError, match="still"):
        client.wait(job["id"], timeout=0.2)
    client.delete(job["id"])


def test_async_client(server, assets):
    async def scenario():
        async with AsyncVllmOmniBackend(server.url, api_key="client-key", progress=False,
                                        poll_interval=0.05) as client:
            await client.wait_until_ready(10)
            image, video = await asyncio.gather(client.generate(req("text2image")),
                                                client.generate(req("image2video",
                                                                    image=assets / "images/rolling_ball.png")))
            job_generation = await client.generate_async_job(req(seed=4), timeout=60)
            return image, video, job_generation

    image, video, job_generation = asyncio.run(scenario())
    assert image.frames.shape == (1, 96, 160, 3) and video.frames.shape == (9, 96, 160, 3)
    assert job_generation.seed == 4


# readiness and lost connections ---------------------------------------------------------------------------------


def closed_port() -> int:
    from cosmos_helpers.server.local import free_port

    return free_port()


def test_wait_until_ready_fails_fast_when_the_process_exits():
    process = subprocess.Popen([sys.executable, "-c", "import sys; print('model load failed: out of memory'); "
                                                      "sys.exit(3)"], stdout=subprocess.PIPE)
    process.wait(10)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="(?s)code 3.*out of memory"):
        VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False).wait_until_ready(60, process=process)
    assert time.monotonic() - started < 5


def test_wait_until_ready_times_out_on_a_closed_port():
    with pytest.raises(GenerationTimeoutError, match="connection refused"):
        VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False).wait_until_ready(0.5, interval=0.1)


def test_generation_posts_are_never_retried_but_polls_are():
    """A loopback socket that accepts and drops every connection: one attempt for a POST, several for a GET."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(time.monotonic())
            connection.recv(65536)
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(ConnectionLostError, match="video generation"):
            VllmOmniBackend(url, progress=False).generate(req())
        time.sleep(0.1)
        assert len(accepted) == 1
        with pytest.raises(ConnectionLostError, match="job status"):
            VllmOmniBackend(url, progress=False, retries=3).retrieve("video_gen_x")
        time.sleep(0.1)
        assert len(accepted) == 1 + 3
    finally:
        listener.close()


def test_refused_connection_is_connection_lost():
    with pytest.raises(ConnectionLostError, match="is the server still running"):
        VllmOmniBackend(f"http://127.0.0.1:{closed_port()}", progress=False).generate(req("text2image"))


# the official openai SDK as a second client --------------------------------------------------------------------


def test_openai_sdk_images(server):
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="client-key", max_retries=0)
    answer = sdk.images.generate(prompt="a workshop", size="160x96", extra_body={
        "num_inference_steps": 2, "seed": 0, "extra_params": {"guardrails": False, "use_system_prompt": True}})
    raw = base64.b64decode(answer.data[0].b64_json)
    assert raw[:4] == b"\x89PNG"
    assert answer.model_extra["metrics"]["peak_memory_mb"] == 0.0
    with pytest.raises(openai.BadRequestError):
        sdk.images.generate(prompt="a workshop", response_format="url")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).images.generate(prompt="x")


def test_openai_sdk_videos(server, tmp_path):
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="client-key", max_retries=0)
    extra = {"extra_params": json.dumps({"guardrails": False, "use_resolution_template": False}),
             "num_frames": 9, "num_inference_steps": 2, "fps": 24, "seed": 1}
    with pytest.warns(DeprecationWarning):
        video = sdk.videos.create(prompt="a robot", size="160x96", extra_body=extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert video.status == "queued" and video.id.startswith("video_gen_")
        deadline = time.monotonic() + 60
        while video.status not in ("completed", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            video = sdk.videos.retrieve(video.id)
        assert video.status == "completed" and video.model_extra["num_frames"] == 9
        assert video.model_extra["fps"] == 24.0 and video.model_extra["file_name"] == f"{video.id}.mp4"
        listed = [item.id for item in sdk.videos.list(limit=100)]
        assert video.id in listed
        content = sdk.videos.download_content(video.id)
        content.write_to_file(tmp_path / "sdk.mp4")
        assert media.read_video(tmp_path / "sdk.mp4").frames.shape == (9, 96, 160, 3)
        assert sdk.videos.delete(video.id).deleted is True

        failed = sdk.videos.create(prompt=f"{BLOCK_WORD}", size="160x96",
                                   extra_body={**extra, "extra_params": json.dumps({"guardrails": True})})
        deadline = time.monotonic() + 30
        with pytest.raises(openai.BadRequestError, match="blocked by Cosmos3 guardrails"):
            while time.monotonic() < deadline:  # a failed job's retrieve() raises instead of returning
                sdk.videos.retrieve(failed.id)
                time.sleep(0.05)
        sdk.videos.delete(failed.id)


# curl, as printed for users ------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_printed_curl_command_runs(server, assets, tmp_path, monkeypatch):
    monkeypatch.setenv("COSMOS3_VLLM_API_KEY", "client-key")
    request = req("image2video", image=assets / "images/rolling_ball.png",
                  prompt=assets / "prompts/image2video/rolling_ball.json")
    output = tmp_path / "curl.mp4"
    command = curl_command(server.url, request, output=str(output))
    assert "--form-string" in command and "$COSMOS3_VLLM_API_KEY" in command and "client-key" not in command
    subprocess.run(["bash", "-c", command], check=True, timeout=60, capture_output=True)
    assert media.read_video(output).frames.shape == (9, 96, 160, 3)
    image_command = curl_command(server.url, req("text2image"), output=str(tmp_path / "image.json"))
    subprocess.run(["bash", "-c", image_command], check=True, timeout=60, capture_output=True)
    answer = json.loads((tmp_path / "image.json").read_text())
    assert base64.b64decode(answer["data"][0]["b64_json"])[:4] == b"\x89PNG"
    assert shlex.split(command.split("  #")[0])[0] == "curl"
