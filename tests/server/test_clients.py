"""Real clients against the stand-in on loopback: this project's ``VllmOmniBackend`` (with the tiny model behind
the server) and the official ``openai`` SDK (on the model-free double), each seeing what a real vLLM-Omni
server would make them see, errors included."""

from __future__ import annotations

import base64
import json
import time
import warnings

import httpx
import pytest

from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from cosmos_helpers.errors import (
    AuthenticationError,
    GenerationTimeoutError,
    GuardrailError,
    JobFailedError,
    ServerBusyError,
)

from .conftest import BLOCK_WORD, instant_server, small_request, wait_status
from .doubles import InstantBackend
from .test_jobs import Gated


@pytest.fixture(scope="module")
def client(server):
    with VllmOmniBackend(server.url, progress=False, poll_interval=0.05, timeout=120) as backend:
        yield backend


def test_the_client_generates_every_mode(client, rgb_image):
    assert client.health() == {"status": "healthy"} and client.models()["data"][0]["id"] == "tiny"
    video = client.generate(small_request())
    assert video.frames.shape == (9, 96, 160, 3) and video.finished.suffix == ".mp4"
    assert client.generate(small_request("text2image")).frames.shape == (1, 96, 160, 3)
    sound = client.generate(small_request("image2video", image=rgb_image, sound=True))
    assert sound.frames.shape == (9, 96, 160, 3) and sound.sound is not None and sound.sound.shape[0] == 2
    job = client.generate_async_job(small_request(seed=3))
    assert job.frames.shape == (9, 96, 160, 3)
    said = {"of": "vllm-omni", "version": "0.30.0", "program": "cosmos_helpers.standins.vllm_omni", "model_run": "tiny",
            "step_cache": {"cache_backend": "none"}}
    assert video.standin == job.standin == said  # the server says it is a stand-in; every manifest records it
    assert video.manifest()["standin"] == said and "vllm-omni (stand-in):tiny" in repr(video)


def test_the_client_sees_the_guardrail(client):
    with pytest.raises(GuardrailError, match="blocked by Cosmos3 guardrails"):
        client.generate(small_request(prompt=f"a {BLOCK_WORD} scene", guardrails=True))
    allowed = client.generate(small_request(prompt=f"a {BLOCK_WORD} scene", guardrails=False))
    assert allowed.frames.shape[0] == 9


def test_client_errors(tmp_path):
    request = small_request(width=32, height=32, num_frames=5, num_inference_steps=1)
    backend = Gated()
    with instant_server(tmp_path / "busy", backend, max_queue=1, sync_timeout=0.5) as server:
        client = VllmOmniBackend(server.url, progress=False, poll_interval=0.05, retries=1)
        holder = client.submit(request)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_status(http, holder["id"], {"in_progress"})
        client.submit(request)  # waits in the queue (limit 1)
        with pytest.raises(ServerBusyError) as busy:
            client.submit(request)
        assert busy.value.retry_after >= 1
        backend.gate.set()
    slow = Gated()
    with instant_server(tmp_path / "slow", slow, sync_timeout=0.3) as server:
        with pytest.raises(GenerationTimeoutError, match="504"):
            VllmOmniBackend(server.url, progress=False, retries=1).generate(request)
        slow.gate.set()
    with instant_server(tmp_path / "locked", api_key="s3cret") as server:
        with pytest.raises(AuthenticationError):
            VllmOmniBackend(server.url, api_key="wrong", progress=False).generate(request)
        assert VllmOmniBackend(server.url, api_key="s3cret", progress=False).generate(request).frames.shape[0] == 5


def test_a_failed_job_reaches_the_client(tmp_path):
    class Failing(InstantBackend):
        def generate(self, request, progress=None, **kwargs):
            raise RuntimeError("the model fell over")

    with instant_server(tmp_path, Failing()) as server:
        client = VllmOmniBackend(server.url, progress=False, poll_interval=0.05, retries=1)
        job = client.submit(small_request(width=32, height=32, num_frames=5, num_inference_steps=1))
        with pytest.raises(JobFailedError, match="the model fell over") as caught:
            client.wait(job["id"], timeout=30)
        assert caught.value.job["error"] == {"code": 500, "message": "the model fell over"}


def test_the_openai_sdk(tmp_path):
    openai = pytest.importorskip("openai")
    with instant_server(tmp_path) as server:
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        images = sdk.images.generate(prompt="a robot", size="32x32", n=2,  # type: ignore[arg-type]
                                     extra_body={"num_inference_steps": 1, "extra_params": {"guardrails": False}})
        assert len(images.data) == 2 and base64.b64decode(images.data[0].b64_json)[:4] == b"\x89PNG"
        assert images.model_extra["metrics"]["stage_durations"] is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the SDK marks its videos API as deprecated
            video = sdk.videos.create(prompt="a robot", size="32x32",  # type: ignore[arg-type]
                                      extra_body={"num_frames": 5, "num_inference_steps": 1, "fps": 8,
                                                  "extra_params": json.dumps({"guardrails": False})})
            assert video.status == "queued" and video.model_extra["num_frames"] == 5
            deadline = time.monotonic() + 30
            while (video := sdk.videos.retrieve(video.id)).status != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            content = sdk.videos.download_content(video.id).content
            assert content[4:8] == b"ftyp"
            assert [item.id for item in sdk.videos.list()] == [video.id]
            assert sdk.videos.delete(video.id).deleted is True
        with pytest.raises(openai.BadRequestError) as bad:
            sdk.images.generate(prompt="x", response_format="url")
        assert "Only 'b64_json' or 'file'" in bad.value.body["message"]
