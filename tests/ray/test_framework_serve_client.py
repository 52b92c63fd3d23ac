"""``FrameworkServeBackend`` against the Ray Serve app's contract (cosmos-framework 5eee9ed), without Ray.

The server here is an httpx ``MockTransport`` that answers as the framework's router does, and every exchange is
checked against the fixtures (``contract.Recorder``): the body against the real ``OmniSampleOverrides`` schema, the
answers against ``SampleOutputs``. What is tested is the client: what it sends, what it refuses before sending, and
how it reads each kind of answer.
"""

from __future__ import annotations

import io
import json

import httpx
import numpy as np
import pytest
from PIL import Image

from cosmos_helpers import GenerationRequest
from cosmos_helpers.backends import backend_by_name
from cosmos_helpers.backends.framework_serve import FrameworkServeBackend, deployment_name
from cosmos_helpers.errors import (ConnectionLostError, GenerationTimeoutError, RequestValidationError,
                                   SampleFailedError, SampleSkippedError, ServerError, UnknownModelError,
                                   ValidationError)
from cosmos_helpers.specs import Sample
from cosmos_helpers.step_cache import SeaCache
from cosmos_helpers.transfer.runner import plan_spec, run_spec

from .contract import RAY, Recorder

URL = "http://ray-head:8000"
PICTURE = np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8)


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(PICTURE).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


class App:
    """The router's answers (serve.py): /models, /info, /generate, /outputs; ``status`` scripts the next reply."""

    def __init__(self, models=("Cosmos3-Nano", "tiny"), status: int | str = "success") -> None:
        self.models, self.status, self.seen = list(models), status, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.url.path))
        if request.url.path == "/models":
            return httpx.Response(200, json=self.models)
        if request.url.path == "/info":
            return httpx.Response(200, json={"environment": {"cosmos3_version": "3.0", "commit_sha": "5eee9ed"},
                                             "models": self.models, "output_dir": "/srv/out"})
        if request.url.path.startswith("/outputs/generate_x/"):
            return httpx.Response(200, content=jpeg())
        sample = json.loads(request.content)
        if isinstance(self.status, int):
            detail = ([{"type": "literal_error", "loc": ["body", "resolution"], "msg": "Input should be '256', "
                        "'480', '704', '720' or '768'", "input": "128"}] if self.status == 422 else
                      f"Model '{sample.get('model')}' not found. Available models: {self.models}"
                      if self.status == 404 else "Internal Server Error")
            return httpx.Response(self.status, json={"detail": detail}) if self.status != 500 else \
                httpx.Response(500, text=detail)
        args = {**sample, "seed": sample.get("seed", 1234), "output_dir": "/srv/out/generate_x"}
        reply = {"args": args, "status": self.status, "message": None, "stack_trace": None, "outputs": []}
        if self.status == "success":
            reply["outputs"] = [{"content": {}, "files": ["generate_x/vision.jpg"]}]
        else:
            reply.update(message=f"Error generating sample '{sample['name']}': boom", stack_trace="Traceback ...")
        return httpx.Response(200, json=reply)


def client(app: App, **kwargs) -> tuple[FrameworkServeBackend, Recorder]:
    recorder = Recorder(httpx.MockTransport(app))
    return FrameworkServeBackend(URL, transport=recorder, **kwargs), recorder


def image_request(**kwargs) -> GenerationRequest:
    return GenerationRequest(mode="text2image", prompt="a red ball", tier="256", seed=7, **kwargs)


def test_a_request_goes_as_the_framework_sample_of_the_framework_backend_and_comes_back_with_its_bytes(tmp_path):
    backend, recorder = client(App())
    generation = backend.generate(image_request())
    (sent,) = recorder.posts()
    assert sent["model"] == "tiny" and sent["model_mode"] == "text2image" and sent["resolution"] == "256"
    assert sent["seed"] == 7 and "guardrails" not in sent  # the setup's, not a sample field
    assert generation.backend == "framework-serve" and generation.model == "tiny" and generation.seed == 7
    assert generation.finished.data == jpeg() and generation.frames.shape == (1, 64, 64, 3)
    assert generation.provenance["files"] == ["generate_x/vision.jpg"]
    assert generation.provenance["step_cache"]["choice"] == "default"
    assert "diffusion_cache" in generation.provenance["step_cache"]["source"]
    generation.request = image_request()
    saved = generation.save(tmp_path / "t2i")
    assert saved.suffix == ".jpg" and saved.read_bytes() == jpeg()
    assert json.loads(saved.with_suffix(".json").read_text())["backend"] == "framework-serve"


def test_the_model_is_checked_against_models_before_anything_is_posted():
    app = App(models=["tiny"])
    backend, _ = client(app)
    with pytest.raises(ValidationError) as error:
        backend.generate(image_request(profile="nano", guardrails=False))
    assert error.value.field == "model" and "'Cosmos3-Nano'" in str(error.value) and "['tiny']" in str(error.value)
    assert ("POST", "/generate") not in app.seen and ("GET", "/models") in app.seen
    assert deployment_name("nvidia/Cosmos3-Nano") == "Cosmos3-Nano" == \
        next(iter(RAY["configs"]["throughput.yaml"]["applications"][0]["args"]["models"]))


def test_each_kind_of_answer_becomes_its_own_error():
    for status, kind, words in ((404, UnknownModelError, "not found"), (500, ServerError, "keep_going"),
                                ("error", SampleFailedError, "boom"), ("skip", SampleSkippedError, "skip")):
        backend, _ = client(App(status=status))
        with pytest.raises(kind) as error:
            backend.generate(image_request())
        assert words in str(error.value), (status, str(error.value))
    backend, _ = client(App(status=404))
    with pytest.raises(UnknownModelError) as error:
        backend.generate(image_request())
    assert error.value.models == ["Cosmos3-Nano", "tiny"]
    backend, _ = client(App(status="error"))
    with pytest.raises(SampleFailedError) as error:
        backend.generate(image_request())
    assert error.value.stack_trace == "Traceback ..." and not isinstance(error.value, SampleSkippedError)


def test_a_422_names_the_field():
    backend, _ = client(App(status=422))
    with pytest.raises(RequestValidationError) as error:
        backend.send({"name": "x", "prompt": "p", "resolution": "128"})
    assert "resolution:" in str(error.value) and "'256'" in str(error.value) and error.value.status == 422


def test_a_generation_is_sent_once_and_a_timeout_says_so_while_reads_are_retried():
    calls = {"POST": 0, "GET": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls[request.method] += 1
        if request.method == "GET":
            return httpx.Response(503) if calls["GET"] == 1 else httpx.Response(200, json=["tiny"])
        raise httpx.ReadTimeout("read timed out", request=request)

    backend = FrameworkServeBackend(URL, transport=httpx.MockTransport(handler), timeout=3)
    backend.retry.base = 0.01
    with pytest.raises(GenerationTimeoutError, match="timed out after 3 s"):
        backend.generate(image_request())
    assert calls == {"GET": 2, "POST": 1}

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    backend = FrameworkServeBackend(URL, transport=httpx.MockTransport(refused), retries=1)
    with pytest.raises(ConnectionLostError, match="serve status"):
        backend.models()


@pytest.mark.parametrize("options, field", [({"step_cache": "off"}, "step_cache"), ({"step_cache": "sea"},
                                            "step_cache"), ({"guardrails": True}, "guardrails"),
                                            ({"precision": "fp8"}, "precision")])
def test_what_is_the_deployments_setup_is_refused_before_any_call(options, field):
    app = App()
    backend, _ = client(app)
    with pytest.raises(ValidationError) as error:
        backend.generate(image_request(**options))
    assert error.value.field == field and "serve config" in str(error.value)
    assert app.seen == []


def test_the_framework_backends_own_refusals_apply_and_local_media_needs_a_shared_filesystem(tmp_path):
    backend, _ = client(App())
    with pytest.raises(ValidationError) as error:  # tier 128 is this project's CPU tier, not a framework bucket
        backend.check(GenerationRequest(mode="text2image", prompt="p"))
    assert error.value.field == "tier"
    i2v = GenerationRequest(mode="image2video", prompt="p", tier="256", image=PICTURE, num_frames=5)
    with pytest.raises(ValidationError) as error:
        backend.check(i2v)
    assert error.value.field == "image" and "shared_files=True" in str(error.value)
    shared, recorder = client(App(), shared_files=True, work_dir=tmp_path)
    shared.check(i2v)
    sent = shared.generate(i2v).provenance["payload"]
    assert sent["vision_path"].startswith(str(tmp_path)) and recorder.posts()[0]["vision_path"] == sent["vision_path"]


def test_a_framework_sample_runs_as_written_through_run_spec_and_a_rerun_finds_it(tmp_path):
    picture = tmp_path / "start.png"
    Image.fromarray(PICTURE).save(picture)
    written = {"name": "i2v", "model_mode": "image2video", "prompt": "a ball", "vision_path": str(picture),
               "resolution": "256", "num_frames": 5, "seed": 3}
    sample = Sample.from_dict(written, base_dir=tmp_path)
    backend, _ = client(App())
    with pytest.raises(ValidationError) as error:
        run_spec(sample, backend=backend, out=tmp_path / "out")
    assert error.value.field == "vision_path"
    url_sample = Sample.from_dict({**written, "vision_path": "https://example.com/start.png"}, base_dir=tmp_path,
                                  check_files=False)
    app = App()
    backend, recorder = client(app)
    generation = run_spec(url_sample, backend=backend, out=tmp_path / "out", overrides={"num_steps": 2})
    (sent,) = recorder.posts()
    assert sent == {**written, "vision_path": "https://example.com/start.png", "num_steps": 2, "model": "tiny"}
    assert generation.paths["media"] == tmp_path / "out" / "i2v" / "vision.jpg"
    again = run_spec(url_sample, backend=backend, out=tmp_path / "out", overrides={"num_steps": 2})
    assert again.provenance.get("skipped") and len(recorder.posts()) == 1
    assert plan_spec(url_sample, backend=backend, out=tmp_path / "out").payload["model"] == "tiny"
    for step_cache in ("off", SeaCache(threshold=0.5)):  # the deployment's setup: a run cannot ask for one
        with pytest.raises(ValidationError, match="deployment's setup") as error:
            run_spec(url_sample, backend=backend, out=tmp_path / "other", step_cache=step_cache)
        assert error.value.field == "step_cache"
    assert len(recorder.posts()) == 1 and not (tmp_path / "other").exists()


def test_backend_by_name_builds_it_from_a_url_only():
    assert isinstance(backend_by_name("framework-serve", url=URL), FrameworkServeBackend)
    with pytest.raises(ValidationError, match="url"):
        backend_by_name("framework-serve")
    with pytest.raises(ValidationError, match="world_size"):
        backend_by_name("framework-serve", url=URL, gpus=2)
    with pytest.raises(ValidationError, match="url"):
        backend_by_name("diffusers", url=URL)
