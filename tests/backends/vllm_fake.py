"""A vLLM-Omni 0.30.0 server's answers for client tests, through ``httpx.MockTransport``, and a multipart reader.

``FakeServer`` answers the routes the way the protocol reference (``shared/reference/vllm-omni-protocol.md``
§1-§6) describes, with real PNG and H.264/AAC bytes, and records every request. It is a test double, not an
oracle: what the client sends is held to the real server's models in ``tests/contracts``.
"""

from __future__ import annotations

import base64
import functools
import json
import tempfile
from email import policy
from email.parser import BytesParser
from pathlib import Path

import httpx
import numpy as np

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.backends.vllm_omni import AsyncVllmOmniBackend, VllmOmniBackend
from cosmos_helpers.backends.vllm_wire import RetryPolicy
from cosmos_helpers.protocol import vllm_omni as proto


def req(mode: str = "text2video", **changes) -> GenerationRequest:
    """A small request of ``mode`` (the tiny profile: 160x96 video, 128x128 image), two steps, seed 5."""
    values = dict(mode=mode, prompt="a small robot crosses a workshop", num_inference_steps=2, seed=5)
    values.update(changes)
    return GenerationRequest(**values)


def parse_form(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    """A multipart/form-data body as (text parts, file parts) with the stdlib's MIME parser."""
    message = BytesParser(policy=policy.HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n"
                                                         + body)
    assert message.is_multipart(), content_type
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes, str]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        if part.get_filename() is None:
            fields[name] = data.decode("utf-8")
        else:
            files[name] = (part.get_filename(), data, part.get_content_type())
    return fields, files


def request_form(request: httpx.Request) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    return parse_form(request.headers["content-type"], request.read())


@functools.lru_cache(maxsize=None)
def mp4_bytes(width: int, height: int, frames: int, fps: float, sound: bool) -> bytes:
    """A real H.264 (+ AAC stereo 48 kHz) MP4, as a server would send it."""
    video = (np.random.default_rng(frames).random((frames, height, width, 3)) * 255).astype(np.uint8)
    audio = None
    if sound:
        t = np.arange(int(48_000 * frames / fps)) / 48_000
        audio = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)]).astype(np.float32) * 0.3
    with tempfile.TemporaryDirectory() as folder:
        return media.write_mp4(Path(folder) / "v.mp4", video, fps, sound=audio).read_bytes()


def image_file(width: int, height: int, fmt: str = "PNG") -> bytes:
    pixels = (np.random.default_rng(width).random((height, width, 3)) * 255).astype(np.uint8)
    return media.image_bytes(pixels, fmt)


def answer(status: int, body=None, **headers) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def envelope(status: int, message: str) -> httpx.Response:
    return answer(status, proto.error_body(status, message))


class FakeServer:
    """vLLM-Omni 0.30.0's answers (protocol reference §1-§6) through ``httpx.MockTransport``; records requests.

    ``script(method, path, *answers)`` queues answers (responses, exceptions to raise, or callables) that
    replace the default route for the next calls. ``metrics`` are the measurements every answer reports, each
    in its own route's way (sync headers, an images answer's ``metrics``, a finished job's record).
    """

    def __init__(self, served: str = "tiny", root: str | None = None) -> None:
        self.served, self.root = served, root or served
        self.requests: list[httpx.Request] = []
        self.scripted: dict[tuple[str, str], list] = {}
        self.jobs: dict[str, dict] = {}
        self.sent: list[bytes] = []  # media bodies answered
        self.metrics = {"inference_time_s": 1.25, "stage_durations": {"denoise": 1.0, "decode": 0.25},
                        "peak_memory_mb": 12.5}

    def script(self, method: str, path: str, *answers) -> None:
        self.scripted.setdefault((method, path), []).extend(answers)

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if (r.method, r.url.path) == (method, path)]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self.scripted.get((request.method, request.url.path))
        if queue:
            item = queue.pop(0)
            if isinstance(item, BaseException):
                raise item
            return item(request) if callable(item) else item
        return self.route(request)

    def route(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        if path == proto.HEALTH:
            return answer(200, {"status": "healthy"})
        if path == proto.MODELS:
            return answer(200, {"object": "list", "data": [{"id": self.served, "object": "model", "created": 1,
                                                            "owned_by": "vllm", "root": self.root, "parent": None,
                                                            "max_model_len": None, "permission": [{}]}]})
        if path == proto.IMAGES:
            return self.image(json.loads(request.read()))
        if path == proto.VIDEOS_SYNC:
            data = self.video(request_form(request)[0])
            return httpx.Response(200, content=data, headers={  # api_server.py:2772-2777
                "content-type": "video/mp4", "x-request-id": "video_sync-0123", "x-model": self.served,
                "x-inference-time-s": f"{self.metrics['inference_time_s']:.3f}",
                "x-stage-durations": json.dumps(self.metrics["stage_durations"], separators=(",", ":")),
                "x-peak-memory-mb": f"{self.metrics['peak_memory_mb']:.3f}"})
        return self.job_route(method, path, request)

    def image(self, body: dict) -> httpx.Response:
        width, height = (int(v) for v in body["size"].split("x"))
        data = image_file(width, height)
        self.sent.append(data)
        if body.get("response_format") == "file":
            return httpx.Response(200, content=data, headers={"content-type": "image/png"})
        return answer(200, {"created": 1, "data": [{"b64_json": base64.b64encode(data).decode(), "url": None,
                                                    "revised_prompt": None}], "output_format": "png",
                            "size": body["size"], "cot_output": None,  # api_server.py:1984-1994
                            "metrics": {"stage_durations": self.metrics["stage_durations"] or None,
                                        "peak_memory_mb": self.metrics["peak_memory_mb"] or None}})

    def video(self, fields: dict[str, str]) -> bytes:
        width, height = (int(v) for v in fields["size"].split("x"))
        data = mp4_bytes(width, height, int(fields.get("num_frames", 1)), float(fields.get("fps", 24)),
                         fields.get("generate_sound") == "true")
        self.sent.append(data)
        return data

    def job_route(self, method: str, path: str, request: httpx.Request) -> httpx.Response:
        if (method, path) == ("POST", proto.VIDEOS):
            fields = request_form(request)[0]
            job_id = f"video_gen_{len(self.jobs):032x}"
            record = {"id": job_id, "object": "video", "model": self.served, "prompt": fields["prompt"],
                      "status": "queued", "progress": 0, "error": None, "inference_time_s": None,
                      "stage_durations": {}, "peak_memory_mb": 0.0, "fps": float(fields["fps"]),
                      "num_frames": int(fields["num_frames"])}
            self.jobs[job_id] = {"record": record, "fields": fields}
            return answer(200, record)
        if (method, path) == ("GET", proto.VIDEOS):
            data = [job["record"] for job in self.jobs.values()]
            return answer(200, {"object": "list", "data": data, "first_id": None, "last_id": None,
                                "has_more": False})
        job_id = path.split("/")[3]
        job = self.jobs.get(job_id)
        if job is None:
            return envelope(404, "Video not found")
        record = job["record"]
        if method == "DELETE":
            del self.jobs[job_id]
            return answer(200, {"id": job_id, "deleted": True, "object": "video.deleted"})
        if path.endswith("/content"):
            if record["status"] == "failed":
                return envelope(422, "Video generation failed. Check job status for error details.")
            if record["status"] != "completed":
                return envelope(404, "Generation is still in-progress")
            return httpx.Response(200, content=self.video(job["fields"]), headers={"content-type": "video/mp4"})
        if record["status"] == "queued":
            record.update(status="in_progress", progress=0)
        elif record["status"] == "in_progress":
            record.update(status="completed", progress=100, file_name=f"{job_id}.mp4", **self.metrics)
        if record["status"] == "failed":
            return answer(record["error"]["code"], record)
        return answer(200, record)


def client_for(server: FakeServer, **options) -> VllmOmniBackend:
    options.setdefault("progress", False)
    options.setdefault("poll_interval", 0.001)
    backend = VllmOmniBackend("http://vllm.test", transport=server.transport(), **options)
    backend.retry = RetryPolicy(backend.retries, base=0.001)  # keep the policy, shorten its waits
    return backend


def async_client_for(server: FakeServer, **options) -> AsyncVllmOmniBackend:
    options.setdefault("progress", False)
    options.setdefault("poll_interval", 0.001)
    backend = AsyncVllmOmniBackend("http://vllm.test", transport=server.transport(), **options)
    backend.retry = RetryPolicy(backend.retries, base=0.001)
    return backend
