"""Shared set-up of the stand-in tests: a real uvicorn server on a free loopback port (a thread of this process)
backed by the tiny DiffusersBackend behind a guardrail double, and helpers to speak to it with raw HTTP.

Requests are small (160x96, 9 frames, 2 steps) so the real model stays fast on a CPU."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import media

SMALL = dict(width=160, height=96, num_inference_steps=2)
BLOCK_WORD = "forbiddenword"
EXTRA = {"use_resolution_template": False, "use_duration_template": False, "guardrails": True}
ROOT = Path(__file__).resolve().parents[2]
DOUBLES = ("-m", "tests.server.serve_doubles")  # ``LocalServer(entry=DOUBLES)``: the model behind test doubles
HOLD = "holdthisrequest"  # with ``--hold-word HOLD``, the first request naming it never finishes


def small_request(mode: str = "text2video", **changes):
    from cosmos_helpers import GenerationRequest

    values = dict(mode=mode, prompt="a small robot crosses a workshop", **SMALL)
    if mode != "text2image":
        values["num_frames"] = 9
    values.update(changes)
    return GenerationRequest(**values)


def form(**overrides) -> dict[str, str]:
    """The cookbook's video form at tiny size; ``None`` drops a field."""
    fields = {"prompt": "a small robot crosses a workshop", "size": "160x96", "num_frames": "9", "fps": "24",
              "num_inference_steps": "2", "guidance_scale": "6.0", "flow_shift": "10.0", "seed": "0",
              "extra_params": json.dumps(EXTRA)}
    for key, value in overrides.items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    return fields


def multipart(fields: dict[str, str], files: dict | None = None) -> list:
    """Every text field as its own multipart part (as curl --form-string and the openai SDK send them)."""
    return [(name, (None, value)) for name, value in fields.items()] + list((files or {}).items())


def png_bytes(array: np.ndarray) -> bytes:
    return media.image_bytes(array, "PNG")


def mp4_bytes(tmp_path: Path, frames: np.ndarray, fps: float = 24, sound=None) -> bytes:
    path = tmp_path / f"clip_{frames.shape[0]}_{time.monotonic_ns()}.mp4"
    media.write_mp4(path, frames, fps, sound=sound)
    return path.read_bytes()


def decode_mp4(tmp_path: Path, content: bytes):
    path = tmp_path / f"answer_{time.monotonic_ns()}.mp4"
    path.write_bytes(content)
    return media.read_video(path, with_audio=True), media.probe_video(path)


def assert_envelope(response, status: int, message_part: str = "", *, type_: str | None = None,
                    param: str | None = None) -> dict:
    """vLLM's error envelope with ``status`` (never FastAPI's ``detail``, never a 422)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == status and isinstance(error["message"], str) and error["message"]
    assert message_part in error["message"], error["message"]
    if type_ is not None:
        assert error["type"] == type_, error
    if param is not None:
        assert error["param"] == param, error
    return error


def wait_status(http, job_id: str, wanted: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = http.get(f"/v1/videos/{job_id}").json()
        if job.get("status") in wanted:
            return job
        time.sleep(0.02)
    raise AssertionError(f"{job_id} never reached {wanted}")


@pytest.fixture(scope="session")
def storage(tmp_path_factory):
    return tmp_path_factory.mktemp("server-storage")


def guarded_tiny_backend():
    """The tiny DiffusersBackend (its pipeline is shared) with a guardrail that blocks ``BLOCK_WORD``."""
    from cosmos_helpers import DiffusersBackend

    from .doubles import WordChecker

    return DiffusersBackend(progress=False, safety_checker=WordChecker(BLOCK_WORD))


@pytest.fixture(scope="session")
def server(storage):
    """The stand-in serving the tiny model, guardrails on, its guardrail blocking ``BLOCK_WORD``: one per test run
    (per pytest-xdist worker), shared by the modules that only talk to it."""
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    with ThreadedServer(guarded_tiny_backend(), storage_dir=storage, guardrails=True, sync_timeout=120) as running:
        yield running


@pytest.fixture(scope="session")
def http(server):
    import httpx

    with httpx.Client(base_url=server.url, timeout=60) as session:
        yield session


def instant_server(tmp_path, backend=None, **options):
    """A ThreadedServer on the model-free double (fast tests of the HTTP layer)."""
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    from .doubles import InstantBackend

    return ThreadedServer(backend if backend is not None else InstantBackend(), storage_dir=tmp_path, **options)
