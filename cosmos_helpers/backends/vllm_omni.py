"""``VllmOmniBackend``: Cosmos3 on a vLLM-Omni server (``vllm serve <model> --omni``) over HTTP.

The wire format follows ``shared/reference/vllm-omni-protocol.md`` (vLLM-Omni 0.30.0) field by field:

* text2image: ``POST /v1/images/generations`` with a JSON body; options go in ``extra_params`` (the key
  ``extra_args`` is silently dropped by the server) with real JSON booleans; the answer is a base64 PNG
  (or the raw image with ``response_format="file"``).
* video (text2video, image2video, video2video, with or without sound): ``POST /v1/videos/sync`` as
  multipart with every text field a string; ``num_frames`` is always sent (an omitted one becomes a
  1-frame video on the server); ``extra_params`` is a JSON-object *string* whose booleans are real JSON
  booleans (``"false"`` would be truthy there). A conditioning image is cropped to the target aspect here
  because the server stretches it to ``size``.
* asynchronous jobs: ``POST /v1/videos`` then ``GET /v1/videos/{id}`` polling, ``GET .../content``,
  ``DELETE``.

The wire format lives in plain functions (:func:`image_body`, :func:`video_form`, :func:`error_from_response`,
...). Every operation (a generation, a readiness wait, a poll loop, a download) is written once as a
generator that *yields* the HTTP calls and sleeps it needs; :class:`VllmOmniBackend` runs those generators
with ``httpx.Client`` and :class:`AsyncVllmOmniBackend` with ``httpx.AsyncClient``. So the blocking and the
asyncio client cannot drift apart.

Generation POSTs are never retried (a retried 500 would re-submit GPU work); readiness, polling, listing,
deleting and downloads retry a bounded number of times. Every call carries an explicit timeout.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Mapping, Sequence

from .. import media
from ..errors import (
    AuthenticationError,
    BackendUnavailableError,
    ConnectionLostError,
    GenerationTimeoutError,
    GuardrailError,
    JobFailedError,
    RequestValidationError,
    ServerBusyError,
    ServerError,
    ValidationError,
)
from ..request import GenerationRequest
from ..result import Generation

API_KEY_ENV = "COSMOS3_VLLM_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8000"
BACKEND_NAME = "vllm-omni"
GUARDRAIL_MARKER = "guardrail"
HINTS = ("edge", "blur", "depth", "seg", "wsm")

ProgressCallback = Callable[[int, int], None]

__all__ = [
    "VllmOmniBackend", "AsyncVllmOmniBackend", "ServeCommand", "serve_command", "curl_command",
    "image_body", "video_form", "extra_params_for", "input_reference_for", "error_from_response",
    "generation_from_image_response", "generation_from_mp4", "round_up_4k1",
]


# =====================================================================================================
# Wire format: pure functions
# =====================================================================================================


def round_up_4k1(num_frames: int) -> int:
    """What vLLM-Omni does to a video frame count: round *up* to the next ``4k+1`` (24 -> 25)."""
    n = int(num_frames)
    return n if (n - 1) % 4 == 0 else n + (4 - (n - 1) % 4)


def extra_params_for(request: GenerationRequest) -> dict[str, Any]:
    """The Cosmos3 ``extra_params`` object for a request: real JSON booleans, never strings.

    The sentence templates only apply to plain-text prompts (a JSON caption gets its metadata injected by
    the server instead), so they are sent as ``false`` for structured captions, as the Diffusers backend
    does. ``use_system_prompt`` is always sent explicitly because vLLM's default (off, except video2video)
    differs from diffusers' (on).
    """
    params: dict[str, Any] = {
        "use_resolution_template": bool(request.add_resolution_template and request.templates_apply),
        "use_duration_template": bool(request.add_duration_template and request.templates_apply),
        "use_system_prompt": bool(request.use_system_prompt),
        "guardrails": bool(request.guardrails),
    }
    if request.mode == "video2video":
        params["condition_frame_indexes_vision"] = [int(i) for i in request.condition_frames]
        params["condition_video_keep"] = request.condition_video_keep
    return params


def image_body(request: GenerationRequest, *, model: str | None = None,
               response_format: str = "b64_json") -> dict[str, Any]:
    """The JSON body of ``POST /v1/images/generations`` for a text2image request."""
    if request.mode != "text2image":
        raise ValidationError("mode", f"/v1/images/generations makes images; got mode={request.mode!r}.",
                              "use video_form() / /v1/videos/sync for video modes.")
    if response_format not in ("b64_json", "file"):
        raise ValidationError("response_format", f"{response_format!r} is not supported by vLLM-Omni.",
                              "use 'b64_json' (default) or 'file'; 'url' is rejected by the server.")
    body: dict[str, Any] = {
        "prompt": request.prompt_text(),
        "negative_prompt": request.negative_prompt_text(),
        "n": 1,
        "size": f"{request.width}x{request.height}",
        "num_inference_steps": request.num_inference_steps,
        "guidance_scale": request.guidance_scale,
        "flow_shift": request.flow_shift,
        "seed": request.seed,
        "response_format": response_format,
        "output_format": "png",
        "extra_params": extra_params_for(request),
    }
    if model:
        body["model"] = model
    return body


def input_reference_for(request: GenerationRequest) -> tuple[str, bytes, str] | None:
    """The ``input_reference`` upload ``(filename, bytes, mime)`` of an image2video / video2video request.

    The image is centre-cropped to the output aspect (the server stretches it to ``size``, which would
    otherwise distort it) and sent as PNG. A video file given by path is uploaded as is (no re-encode);
    an array video is encoded to MP4 first.
    """
    if request.mode == "image2video":
        image = media.center_crop_to_aspect(request.conditioning_image(), request.width, request.height)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return "input_reference.png", buffer.getvalue(), "image/png"
    if request.mode == "video2video":
        source = request.video
        if isinstance(source, (str, Path)) and Path(source).suffix.lower() in media.VIDEO_SUFFIXES:
            path = Path(source)
            return path.name, path.read_bytes(), "video/mp4" if path.suffix.lower() == ".mp4" else "video/*"
        frames = request.conditioning_video()
        with tempfile.TemporaryDirectory(prefix="cosmos-v2v-") as folder:
            target = Path(folder) / "input_reference.mp4"
            media.write_mp4(target, frames, request.fps, crf=10)
            return target.name, target.read_bytes(), "video/mp4"
    return None


def video_form(request: GenerationRequest, *, model: str | None = None,
               with_file: bool = True) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    """The multipart fields of ``POST /v1/videos/sync`` / ``/v1/videos``: ``(text fields, files)``.

    Every text value is a string; ``num_frames`` is always present; ``extra_params`` is a JSON-object
    string; ``generate_sound`` / ``sound_duration`` are sent only for sound requests (a checkpoint without
    sound rejects the field).
    """
    if request.mode == "text2image":
        raise ValidationError("mode", "text2image goes to /v1/images/generations, not the video routes.",
                              "use image_body(), or a video mode.")
    fields: dict[str, str] = {
        "prompt": request.prompt_text(),
        "negative_prompt": request.negative_prompt_text(),
        "size": f"{request.width}x{request.height}",
        "num_frames": str(request.num_frames),
        "fps": _num(request.fps),
        "num_inference_steps": str(request.num_inference_steps),
        "guidance_scale": _num(request.guidance_scale),
        "flow_shift": _num(request.flow_shift),
        "seed": str(request.seed),
        "extra_params": json.dumps(extra_params_for(request), separators=(",", ":")),
    }
    if request.sound:
        fields["generate_sound"] = "true"
        fields["sound_duration"] = f"{request.num_frames / request.fps:.3f}"
    if model:
        fields["model"] = model
    files: dict[str, tuple[str, bytes, str]] = {}
    if with_file:
        upload = input_reference_for(request)
        if upload is not None:
            files["input_reference"] = upload
    return fields, files


def _num(value: float) -> str:
    return repr(float(value))


def curl_command(url: str, request: GenerationRequest, *, api_key: str | None = None, async_job: bool = False,
                 output: str | None = None, reference_path: str | None = None) -> str:
    """The equivalent ``curl`` command for a request (for copying into a terminal next to a real server).

    Text fields use ``--form-string`` (curl's ``-F`` would interpret ``;``, ``@`` and ``<`` inside JSON
    captions). The key is read from ``$COSMOS3_VLLM_API_KEY`` rather than printed.
    """
    base = url.rstrip("/")
    auth = ["-H", f"Authorization: Bearer ${API_KEY_ENV}"] if (api_key or os.environ.get(API_KEY_ENV)) else []
    if request.mode == "text2image":
        body = json.dumps(image_body(request), separators=(",", ":"))
        parts = ["curl", "-sS", "--fail-with-body", "-X", "POST", f"{base}/v1/images/generations",
                 "-H", "Content-Type: application/json", *auth, "-d", body, "-o", output or "image_response.json"]
        return _join(parts) + "  # the PNG is base64 in .data[0].b64_json"
    fields, _ = video_form(request, with_file=False)
    path = "/v1/videos" if async_job else "/v1/videos/sync"
    parts = ["curl", "-sS", "--fail-with-body", "-X", "POST", f"{base}{path}", *auth]
    for name, value in fields.items():
        parts += ["--form-string", f"{name}={value}"]
    note = ""
    if request.mode in ("image2video", "video2video"):
        if reference_path is None:
            source = request.image if request.mode == "image2video" else request.video
            reference_path = str(source) if isinstance(source, (str, Path)) else (
                "input.png" if request.mode == "image2video" else "input.mp4")
        parts += ["-F", f"input_reference=@{reference_path}"]
        if request.mode == "image2video":
            note = f"  # crop the image to {request.width}:{request.height} first: the server stretches it"
    if async_job:
        parts += ["-o", output or "job.json"]
    else:
        parts += ["-H", "Accept: video/mp4", "-o", output or "output.mp4"]
    return _join(parts) + note


def _join(parts: Sequence[str]) -> str:
    out = []
    for part in parts:
        if f"${API_KEY_ENV}" in part:
            out.append('"' + part + '"')  # let the shell expand the key
        else:
            out.append(shlex.quote(part))
    return " ".join(out)


# Responses ------------------------------------------------------------------------------------------


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def _error_message(parsed: Any, content: bytes, status: int) -> str:
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        for key in ("detail", "message"):
            if parsed.get(key):
                value = parsed[key]
                return value if isinstance(value, str) else json.dumps(value)
    text = content.decode("utf-8", "replace").strip()
    return text[:500] or f"HTTP {status}"


def error_from_response(status: int, content: bytes, headers: Mapping[str, str]) -> Exception:
    """Turn an error answer into this package's exception (the server's own message kept)."""
    parsed = _json_or_none(content)
    message = _error_message(parsed, content, status)
    request_id = headers.get("x-request-id")
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        request_id = parsed["error"].get("request_id") or request_id
    if status == 400:
        if GUARDRAIL_MARKER in message.lower():
            return GuardrailError(message)
        return RequestValidationError(status, message, body=parsed, request_id=request_id)
    if status in (401, 403):
        return AuthenticationError(status, f"{message} (send the server's key: VllmOmniBackend(url, api_key=...) "
                                           f"or ${API_KEY_ENV})", body=parsed, request_id=request_id)
    if status == 429:
        retry_after = headers.get("retry-after")
        try:
            seconds = float(retry_after) if retry_after is not None else None
        except ValueError:
            seconds = None
        return ServerBusyError(status, message, retry_after=seconds, body=parsed, request_id=request_id)
    if status == 504:
        return GenerationTimeoutError(f"HTTP 504: {message} (the server's timeout counts queueing time; "
                                      "use an asynchronous job for long generations)")
    return ServerError(status, message, body=parsed, request_id=request_id)


def timings_from_headers(headers: Mapping[str, str]) -> tuple[dict[str, float], dict[str, Any]]:
    """``X-*`` response headers as (timings, provenance)."""
    timings: dict[str, float] = {}
    provenance: dict[str, Any] = {}
    value = headers.get("x-inference-time-s")
    if value:
        try:
            timings["inference_s"] = float(value)
        except ValueError:
            pass
    stages = _json_or_none((headers.get("x-stage-durations") or "").encode())
    if isinstance(stages, dict):
        provenance["stage_durations"] = stages
        for name, seconds in stages.items():
            if isinstance(seconds, (int, float)):
                timings[f"stage_{name}_s"] = float(seconds)
    value = headers.get("x-peak-memory-mb")
    if value:
        try:
            provenance["peak_memory_mb"] = float(value)
        except ValueError:
            pass
    for header, key in (("x-request-id", "request_id"), ("x-model", "served_model")):
        if headers.get(header):
            provenance[key] = headers[header]
    return timings, provenance


def timings_from_job(job: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """A finished job record's metrics as (timings, provenance)."""
    timings: dict[str, float] = {}
    if isinstance(job.get("inference_time_s"), (int, float)):
        timings["inference_s"] = float(job["inference_time_s"])
    stages = job.get("stage_durations") or {}
    for name, seconds in stages.items():
        if isinstance(seconds, (int, float)):
            timings[f"stage_{name}_s"] = float(seconds)
    metrics = job.get("metrics") or {}
    if isinstance(metrics.get("queue_s"), (int, float)):
        timings["queue_s"] = float(metrics["queue_s"])
    provenance = {"job_id": job.get("id"), "stage_durations": stages, "peak_memory_mb": job.get("peak_memory_mb"),
                  "served_model": job.get("model"), "job": dict(job)}
    return timings, provenance


def generation_from_image_response(content: bytes, content_type: str, request: GenerationRequest
                                   ) -> tuple[Generation, dict[str, Any]]:
    """Decode an images answer (JSON with ``b64_json``, or the raw image of ``response_format="file"``)."""
    import numpy as np
    from PIL import Image

    extra: dict[str, Any] = {}
    if "json" in content_type:
        parsed = _json_or_none(content)
        try:
            raw = base64.b64decode(parsed["data"][0]["b64_json"])
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise ServerError(200, f"the images answer has no data[0].b64_json ({exc})", body=parsed) from None
        extra = {k: parsed.get(k) for k in ("size", "output_format", "metrics", "created")}
    else:
        raw = content
    try:
        with Image.open(io.BytesIO(raw)) as image:
            frames = np.asarray(image.convert("RGB"))[None]
    except Exception as exc:  # PIL raises several types for bad bytes
        raise ServerError(200, f"the server's image could not be decoded ({exc})") from None
    generation = Generation(frames=frames, fps=request.fps, seed=request.seed, request=request,
                            backend=BACKEND_NAME, model=request.model)
    return generation, extra


def generation_from_mp4(path: str | Path, request: GenerationRequest) -> Generation:
    """A decoded MP4 from the server (frames, and sound when muxed) as a ``Generation``."""
    video = media.read_video(path, with_audio=True)
    sound = video.sound if (video.sound is not None and video.sound.shape[-1] > 0) else None
    return Generation(frames=video.frames, fps=request.fps or video.fps, seed=request.seed, request=request,
                      sound=sound, sample_rate=int(video.sample_rate or 48_000), backend=BACKEND_NAME,
                      model=request.model)


# =====================================================================================================
# serve_command
# =====================================================================================================


@dataclass
class ServeCommand:
    """A ``vllm serve ... --omni`` command line; ``argv`` to run, ``shell()`` to print, ``docker()`` to wrap."""

    argv: list[str]
    port: int
    gpus: int
    image: str = "vllm/vllm-omni:cosmos3"
    use_docker: bool = False

    def shell(self) -> str:
        return " ".join(shlex.quote(part) for part in self.argv)

    def docker(self, image: str | None = None) -> str:
        """The same command inside the vLLM-Omni container (GPUs, shared memory, HF cache and token)."""
        wrapper = ["docker", "run", "--rm", "--gpus", "all", "--ipc=host", "-p", f"{self.port}:{self.port}",
                   "-v", "$HOME/.cache/huggingface:/root/.cache/huggingface", "-e", "HF_TOKEN",
                   image or self.image]
        return " ".join(p if p.startswith("$HOME") else shlex.quote(p) for p in wrapper) + " " + self.shell()

    def __str__(self) -> str:
        return self.docker() if self.use_docker else self.shell()


def serve_command(model: str, gpus: int = 1, *, port: int = 8000, tensor_parallel: int | None = None,
                  cfg_parallel: int | None = None, ulysses: int | None = None, layerwise_offload: bool = False,
                  init_timeout: int = 1800, api_key: str | None = None, docker: bool = False,
                  served_model_name: str | None = None, guardrails: bool = True) -> ServeCommand:
    """The ``vllm serve <model> --omni`` command for a Cosmos3 checkpoint on ``gpus`` GPUs.

    GPUs per request = tensor_parallel x cfg_parallel x ulysses; that product must fit ``gpus``. With
    more than one GPU and no degree given, tensor parallelism takes them all (the cookbook's Super setup).
    ``api_key`` is written as ``$COSMOS3_VLLM_API_KEY`` in the printed command, never in clear.
    ``docker=True`` makes ``str(command)`` the ``docker run`` form (``.argv`` stays the bare command).
    """
    if not isinstance(model, str) or not model.strip():
        raise ValidationError("model", f"expected a model id or folder, got {model!r}.", "e.g. 'nvidia/Cosmos3-Nano'.")
    degrees = {"gpus": gpus, "tensor_parallel": tensor_parallel, "cfg_parallel": cfg_parallel, "ulysses": ulysses,
               "port": port, "init_timeout": init_timeout}
    for name, value in degrees.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(name, f"expected a positive integer, got {value!r}.", f"pass e.g. {name}=1.")
    if not 1 <= port <= 65535:
        raise ValidationError("port", f"{port} is not a TCP port.", "use 1..65535, e.g. 8000.")
    if cfg_parallel not in (None, 1, 2):
        raise ValidationError("cfg_parallel", f"CFG parallelism splits the two guidance branches, so it is 1 or 2, "
                              f"got {cfg_parallel}.", "use cfg_parallel=2 (or leave it out).")
    if gpus > 1 and tensor_parallel is None and cfg_parallel is None and ulysses is None:
        tensor_parallel = gpus
    tp, cfg, sp = tensor_parallel or 1, cfg_parallel or 1, ulysses or 1
    product = tp * cfg * sp
    if product > gpus:
        culprit = next(name for name, value in (("tensor_parallel", tensor_parallel), ("cfg_parallel", cfg_parallel),
                                                ("ulysses", ulysses)) if value not in (None, 1))
        raise ValidationError(culprit, f"tensor_parallel x cfg_parallel x ulysses = {tp} x {cfg} x {sp} = {product} "
                              f"GPUs per request, but only gpus={gpus} are available.",
                              f"lower {culprit} so the product is at most {gpus}, or raise gpus.")
    argv = ["vllm", "serve", model, "--omni", "--model-class-name", "Cosmos3OmniDiffusersPipeline",
            "--allowed-local-media-path", "/", "--port", str(port), "--init-timeout", str(init_timeout)]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    if cfg > 1:
        argv += ["--cfg-parallel-size", str(cfg)]
    if sp > 1:
        argv += ["--ulysses-degree", str(sp)]
    if layerwise_offload:
        argv.append("--enable-layerwise-offload")
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if not guardrails:
        argv.append("--no-guardrails")
    if api_key:
        argv += ["--api-key", f"${API_KEY_ENV}"]
    return ServeCommand(argv=argv, port=port, gpus=gpus, use_docker=docker)


# =====================================================================================================
# One implementation of every operation, as generators of I/O steps
# =====================================================================================================


@dataclass
class _Call:
    """One HTTP exchange for a driver to perform."""

    method: str
    path: str
    timeout: Any
    json: Any = None
    data: dict[str, str] | None = None
    files: dict[str, tuple[str, bytes, str]] | None = None
    params: dict[str, Any] | None = None
    stream_to: Path | None = None  # write a 2xx body here while it streams
    on_bytes: Callable[[int, int | None], None] | None = None  # (received, total) while streaming


@dataclass
class _Reply:
    status: int
    headers: Mapping[str, str]
    content: bytes
    elapsed_s: float = 0.0

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


@dataclass
class _Sleep:
    seconds: float


Op = Generator[Any, Any, Any]


def _is_timeout(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.TimeoutException)


def _is_transport(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.TransportError)


def _no_progress() -> bool:
    return bool(os.environ.get("COSMOS_HELPERS_NO_PROGRESS"))


def _tqdm(**kwargs):
    from ..progress import progress_bar

    return progress_bar(**kwargs)


@dataclass
class _Core:
    """Configuration and the generator implementation shared by both clients."""

    url: str = DEFAULT_URL
    api_key: str | None = None
    model: str | None = None  # sent as "model" only when set (the server checks it against its served name)
    timeout: float = 1800.0  # generation calls: the server's own sync timeout counts queueing
    connect_timeout: float = 5.0
    poll_interval: float = 2.0
    retries: int = 3
    progress: bool = True
    image_response_format: str = "b64_json"
    served_model: str | None = field(default=None, init=False)

    name = BACKEND_NAME

    def __post_init__(self) -> None:
        if self.url is None:
            self.url = DEFAULT_URL
        self.url = str(self.url).rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise ValidationError("url", f"{self.url!r} is not an http(s) URL.", "pass e.g. 'http://127.0.0.1:8000'.")
        if self.api_key is None:
            self.api_key = os.environ.get(API_KEY_ENV) or None

    # timeouts ---------------------------------------------------------------------------------------

    def _t(self, read: float):
        import httpx

        return httpx.Timeout(connect=self.connect_timeout, read=read, write=max(60.0, read), pool=self.connect_timeout)

    @property
    def headers(self) -> dict[str, str]:
        headers = {"User-Agent": "cosmos-helpers"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    # the retry / error-mapping step -------------------------------------------------------------------

    def _exchange(self, call: _Call, *, attempts: int = 1, what: str = "request",
                  retry_statuses: tuple[int, ...] = (502, 503),
                  passthrough: Callable[[_Reply], bool] | None = None) -> Op:
        """Perform ``call``; map transport failures and error statuses; retry only when ``attempts > 1``.

        ``passthrough(reply)`` may accept an error status as an answer (a failed job's GET)."""
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                reply = yield call
            except Exception as exc:
                if _is_timeout(exc):
                    if not last:
                        yield _Sleep(min(2.0 ** attempt * 0.25, 5.0))
                        continue
                    raise GenerationTimeoutError(
                        f"{what} to {self.url}{call.path} timed out ({type(exc).__name__}); the server may still "
                        "be working on it. Raise timeout= or use an asynchronous job.") from exc
                if _is_transport(exc):
                    if not last:
                        yield _Sleep(min(2.0 ** attempt * 0.25, 5.0))
                        continue
                    raise ConnectionLostError(
                        f"lost the connection to {self.url} during {what} ({type(exc).__name__}: {exc}); "
                        "is the server still running?") from exc
                raise
            if reply.status in retry_statuses and not last:
                yield _Sleep(min(2.0 ** attempt * 0.25, 5.0))
                continue
            if reply.status >= 400 and not (passthrough is not None and passthrough(reply)):
                raise error_from_response(reply.status, reply.content, reply.headers)
            return reply
        raise AssertionError("unreachable")

    # readiness ----------------------------------------------------------------------------------------

    def _op_health(self) -> Op:
        reply = yield from self._exchange(_Call("GET", "/health", self._t(5.0)), attempts=self.retries,
                                          what="health check", retry_statuses=())
        return _json_or_none(reply.content) or {}

    def _op_models(self) -> Op:
        reply = yield from self._exchange(_Call("GET", "/v1/models", self._t(10.0)), attempts=self.retries,
                                          what="model list")
        return _json_or_none(reply.content) or {}

    def _op_wait_until_ready(self, timeout: float, process: Any, log: Any, interval: float | None,
                             progress: bool | None) -> Op:
        interval = 2.0 if interval is None else interval
        show = (self.progress if progress is None else progress) and not _no_progress()
        bar = _tqdm(total=int(timeout), desc=f"waiting for {self.url}", unit="s", leave=False) if show else None
        start = time.monotonic()
        state = "not started"
        try:
            while True:
                if process is not None and process.poll() is not None:
                    raise BackendUnavailableError(
                        f"the server process exited with code {process.returncode} before it became ready. "
                        f"Last log lines:\n{_log_tail(process, log)}")
                try:
                    reply = yield _Call("GET", "/health", self._t(min(5.0, max(interval, 1.0))))
                    state = f"HTTP {reply.status}"
                    if reply.status == 200:
                        break
                except Exception as exc:
                    if not (_is_timeout(exc) or _is_transport(exc)):
                        raise
                    state = "connection refused" if "refused" in str(exc).lower() or "ConnectError" in type(
                        exc).__name__ else type(exc).__name__
                elapsed = time.monotonic() - start
                if bar is not None:
                    bar.n = min(int(elapsed), bar.total)
                    bar.set_postfix_str(state, refresh=True)
                if elapsed >= timeout:
                    raise GenerationTimeoutError(
                        f"{self.url} was not ready after {timeout:g} s (last answer: {state}). A real Cosmos3 server "
                        "needs minutes to load (and longer to download); raise timeout= or check its log.")
                yield _Sleep(interval)
        finally:
            if bar is not None:
                bar.close()
        models = yield from self._op_models()
        data = models.get("data") or []
        if data and isinstance(data[0], dict):
            self.served_model = data[0].get("id")
        return {"status": "healthy", "served_model": self.served_model, "ready_after_s": time.monotonic() - start}

    # images ------------------------------------------------------------------------------------------

    def _op_generate_image(self, request: GenerationRequest, response_format: str | None) -> Op:
        fmt = response_format or self.image_response_format
        body = image_body(request, model=self.model, response_format=fmt)
        started = time.perf_counter()
        reply = yield from self._exchange(_Call("POST", "/v1/images/generations", self._t(self.timeout), json=body),
                                          what="image generation", attempts=1)
        generation, extra = generation_from_image_response(reply.content, reply.content_type, request)
        total = time.perf_counter() - started
        timings: dict[str, float] = {"request_s": total, "total_s": total}
        provenance: dict[str, Any] = {"url": self.url, "endpoint": "/v1/images/generations", "response_format": fmt}
        metrics = (extra.get("metrics") or {}) if isinstance(extra.get("metrics"), dict) else {}
        stages = metrics.get("stage_durations") or {}
        for name, seconds in stages.items():
            if isinstance(seconds, (int, float)):
                timings[f"stage_{name}_s"] = float(seconds)
        if stages:
            provenance["stage_durations"] = stages
        if metrics.get("peak_memory_mb") is not None:
            provenance["peak_memory_mb"] = metrics.get("peak_memory_mb")
        header_timings, header_prov = timings_from_headers(reply.headers)
        timings.update(header_timings)
        provenance.update(header_prov)
        provenance["server_size"] = extra.get("size")
        return self._finish(generation, timings, provenance)

    # sync video --------------------------------------------------------------------------------------

    def _op_generate_video(self, request: GenerationRequest) -> Op:
        fields, files = video_form(request, model=self.model)
        started = time.perf_counter()
        reply = yield from self._exchange(
            _Call("POST", "/v1/videos/sync", self._t(self.timeout), data=fields, files=files or None),
            what="video generation", attempts=1)
        if "video/mp4" not in reply.content_type or not reply.content:
            raise ServerError(reply.status, f"expected video/mp4 from /v1/videos/sync, got {reply.content_type!r} "
                              f"({len(reply.content)} bytes)")
        with tempfile.TemporaryDirectory(prefix="cosmos-vllm-") as folder:
            path = Path(folder) / "sync.mp4"
            path.write_bytes(reply.content)
            generation = generation_from_mp4(path, request)
        total = time.perf_counter() - started
        timings, provenance = timings_from_headers(reply.headers)
        timings.update(request_s=reply.elapsed_s or total, total_s=total)
        provenance.update(url=self.url, endpoint="/v1/videos/sync", mp4_bytes=len(reply.content))
        return self._finish(generation, timings, provenance)

    def _op_transfer(self, spec: Any, profile: str | None) -> Op:
        from ..transfer.vllm import spec_to_vllm_form

        fields, files = spec_to_vllm_form(spec, profile=profile)
        started = time.perf_counter()
        reply = yield from self._exchange(
            _Call("POST", "/v1/videos/sync", self._t(self.timeout), data=fields, files=files or None),
            what="transfer", attempts=1)
        if "video/mp4" not in reply.content_type or not reply.content:
            raise ServerError(reply.status, f"expected video/mp4 from /v1/videos/sync, got {reply.content_type!r}")
        with tempfile.TemporaryDirectory(prefix="cosmos-vllm-") as folder:
            path = Path(folder) / "transfer.mp4"
            path.write_bytes(reply.content)
            video = media.read_video(path, with_audio=True)
        generation = Generation(frames=video.frames, fps=float(video.fps or 24), seed=int(fields.get("seed", 0)),
                                backend=BACKEND_NAME, model=self.served_model or "")
        timings, provenance = timings_from_headers(reply.headers)
        timings.update(request_s=reply.elapsed_s, total_s=time.perf_counter() - started)
        provenance.update(url=self.url, endpoint="/v1/videos/sync", workflow="transfer", form=fields)
        return self._finish(generation, timings, provenance)

    def _finish(self, generation: Generation, timings: dict[str, float], provenance: dict[str, Any]) -> Generation:
        generation.timings.update({k: float(v) for k, v in timings.items()})
        generation.provenance.update(provenance)
        generation.provenance.setdefault("seed_recorded_client_side", True)
        served = provenance.get("served_model") or self.served_model
        if served:
            generation.model = str(served)
        return generation

    # async jobs ---------------------------------------------------------------------------------------

    def _op_submit(self, request: GenerationRequest) -> Op:
        fields, files = video_form(request, model=self.model)
        reply = yield from self._exchange(
            _Call("POST", "/v1/videos", self._t(120.0), data=fields, files=files or None), what="job submission")
        job = _json_or_none(reply.content)
        if not isinstance(job, dict) or "id" not in job:
            raise ServerError(reply.status, "the job submission answer has no id", body=job)
        return job

    def _op_retrieve(self, job_id: str) -> Op:
        """The job record; a failed job is returned too (its GET answers with the failure's status)."""

        def failed_job(reply: _Reply) -> bool:
            body = _json_or_none(reply.content)
            return isinstance(body, dict) and body.get("id") == job_id and body.get("status") == "failed"

        reply = yield from self._exchange(_Call("GET", f"/v1/videos/{job_id}", self._t(30.0)), attempts=self.retries,
                                          what="job status", passthrough=failed_job)
        return _json_or_none(reply.content)

    def _op_wait(self, job_id: str, timeout: float | None, progress: Any, interval: float | None) -> Op:
        interval = self.poll_interval if interval is None else interval
        timeout = self.timeout if timeout is None else timeout
        callback = progress if callable(progress) else None
        show = (self.progress if progress is None else bool(progress)) and not _no_progress()
        bar = _tqdm(total=100, desc=f"job {job_id[-8:]}", unit="%", leave=False) if show else None
        start = time.monotonic()
        try:
            while True:
                job = yield from self._op_retrieve(job_id)
                status = job.get("status")
                value = int(job.get("progress") or 0)
                if bar is not None:
                    bar.n = value
                    bar.set_postfix_str(f"{status}, {time.monotonic() - start:.0f} s", refresh=True)
                if callback is not None:
                    callback(job)
                if status == "completed":
                    return job
                if status == "failed":
                    error = job.get("error") or {}
                    if GUARDRAIL_MARKER in str(error.get("message", "")).lower():
                        raise GuardrailError(str(error.get("message")))
                    raise JobFailedError(job)
                if time.monotonic() - start >= timeout:
                    raise GenerationTimeoutError(
                        f"job {job_id} was still {status} after {timeout:g} s; it keeps running on the server. "
                        "Call wait() again, or delete() it.")
                yield _Sleep(interval)
        finally:
            if bar is not None:
                bar.close()

    def _op_download(self, job_id: str, path: str | Path, overwrite: bool, progress: bool | None) -> Op:
        """Stream the job's MP4 to a temporary file beside ``path``; publish it only when complete."""
        path = Path(path)
        show = (self.progress if progress is None else progress) and not _no_progress()
        for attempt in range(1, self.retries + 1):
            bar = _tqdm(desc=f"download {path.name}", unit="B", unit_scale=True, leave=False) if show else None

            def on_bytes(received: int, total: int | None, bar=bar) -> None:
                if bar is not None:
                    if total and bar.total != total:
                        bar.total = total
                    bar.n = received
                    bar.refresh()

            try:
                with media.atomic_path(path, overwrite=overwrite) as tmp:
                    yield from self._exchange(
                        _Call("GET", f"/v1/videos/{job_id}/content", self._t(120.0), stream_to=tmp, on_bytes=on_bytes),
                        what="download", attempts=1)
                    if tmp.stat().st_size == 0:
                        raise ServerError(200, f"job {job_id} content is empty")
                return path
            except (ConnectionLostError, GenerationTimeoutError):
                if attempt == self.retries:
                    raise
                yield _Sleep(0.5 * attempt)
            finally:
                if bar is not None:
                    bar.close()
        raise AssertionError("unreachable")

    def _op_delete(self, job_id: str) -> Op:
        reply = yield from self._exchange(_Call("DELETE", f"/v1/videos/{job_id}", self._t(30.0)),
                                          attempts=self.retries + 2, what="job deletion",
                                          retry_statuses=(409, 502, 503))
        return _json_or_none(reply.content)

    def _op_list(self, limit: int, order: str, after: str | None) -> Op:
        params: dict[str, Any] = {"limit": limit, "order": order}
        if after:
            params["after"] = after
        reply = yield from self._exchange(_Call("GET", "/v1/videos", self._t(30.0), params=params),
                                          attempts=self.retries, what="job list")
        return _json_or_none(reply.content)

    def _op_generate_async_job(self, request: GenerationRequest, timeout: float | None, progress: Any,
                               keep: bool) -> Op:
        if request.mode == "text2image":
            raise ValidationError("mode", "asynchronous jobs make videos; text2image uses /v1/images/generations.",
                                  "call generate() for images.")
        started = time.perf_counter()
        job = yield from self._op_submit(request)
        job_id = job["id"]
        job = yield from self._op_wait(job_id, timeout, progress, None)
        with tempfile.TemporaryDirectory(prefix="cosmos-vllm-") as folder:
            target = Path(folder) / f"{job_id}.mp4"
            yield from self._op_download(job_id, target, False, False)
            generation = generation_from_mp4(target, request)
        if not keep:
            yield from self._op_delete(job_id)
        total = time.perf_counter() - started
        timings, provenance = timings_from_job(job)
        timings.update(total_s=total)
        provenance.update(url=self.url, endpoint="/v1/videos", deleted=not keep)
        return self._finish(generation, timings, provenance)

    def _op_generate(self, request: GenerationRequest, progress: ProgressCallback | None) -> Op:
        if request.mode == "text2image":
            generation = yield from self._op_generate_image(request, None)
        else:
            generation = yield from self._op_generate_video(request)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation


def _log_tail(process: Any, log: Any, lines: int = 40) -> str:
    if callable(log):
        return str(log())
    if isinstance(log, (str, Path)) and Path(log).is_file():
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-lines:])
    stream = getattr(process, "stdout", None)
    if stream is not None and hasattr(stream, "read"):
        try:
            data = stream.read()
            text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
            return "\n".join(text.splitlines()[-lines:])
        except Exception:  # a closed or unreadable pipe: no log to show
            pass
    return "(no log captured)"


# =====================================================================================================
# Drivers
# =====================================================================================================


def _request_kwargs(call: _Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"timeout": call.timeout}
    if call.json is not None:
        kwargs["json"] = call.json
    if call.data is not None:
        kwargs["data"] = call.data
    if call.files:
        kwargs["files"] = call.files
    if call.params is not None:
        kwargs["params"] = call.params
    return kwargs


def _multipart_body(call: _Call) -> tuple[bytes, str] | None:
    """Multipart body for a form without files (httpx would url-encode it; vLLM's routes need multipart)."""
    if call.data is None or call.files:
        return None
    import uuid

    boundary = uuid.uuid4().hex
    chunks = []
    for name, value in call.data.items():
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        chunks.append(str(value).encode("utf-8") + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


class VllmOmniBackend(_Core):
    """A blocking client for a vLLM-Omni server; ``generate(request)`` like every backend.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``.
        api_key: sent as ``Authorization: Bearer``; default ``$COSMOS3_VLLM_API_KEY``.
        model: sent as ``model`` (must equal the served name); default: not sent, which is always safe.
        timeout: read timeout of generation calls in seconds (the server's own sync timeout, 600 s by
            default, counts queueing time).
        poll_interval: seconds between job polls (2-5 s for a real server).
        retries: attempts for idempotent calls (readiness, polling, listing, deleting, downloads).
        progress: tqdm progress displays for waits, polls and downloads.
        image_response_format: ``b64_json`` (default) or ``file`` for text2image.
    """

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, **options: Any) -> None:
        super().__init__(url=url, api_key=api_key, **options)
        self._client = None

    def __repr__(self) -> str:
        return f"VllmOmniBackend({self.url!r})"

    @property
    def client(self):
        import httpx

        if self._client is None:
            self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=self._t(30.0))
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> "VllmOmniBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _perform(self, call: _Call) -> _Reply:
        started = time.perf_counter()
        kwargs = _request_kwargs(call)
        raw = _multipart_body(call)
        if raw is not None:
            kwargs.pop("data", None)
            kwargs["content"], kwargs["headers"] = raw[0], {"Content-Type": raw[1]}
        if call.stream_to is None:
            response = self.client.request(call.method, call.path, **kwargs)
            return _Reply(response.status_code, response.headers, response.content, time.perf_counter() - started)
        with self.client.stream(call.method, call.path, **kwargs) as response:
            if response.status_code >= 400:
                return _Reply(response.status_code, response.headers, response.read(), time.perf_counter() - started)
            total = int(response.headers.get("content-length") or 0) or None
            received = 0
            with open(call.stream_to, "wb") as handle:
                for chunk in response.iter_bytes(1 << 16):
                    handle.write(chunk)
                    received += len(chunk)
                    if call.on_bytes is not None:
                        call.on_bytes(received, total)
            if total is not None and received != total:
                import httpx

                raise httpx.RemoteProtocolError(f"download ended after {received} of {total} bytes")
            return _Reply(response.status_code, response.headers, b"", time.perf_counter() - started)

    def _drive(self, op: Op) -> Any:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            if isinstance(step, _Sleep):
                time.sleep(step.seconds)
                continue
            try:
                value = self._perform(step)
            except Exception as exc:  # handed back to the operation, which maps it
                error = exc

    # public API ---------------------------------------------------------------------------------------

    def health(self) -> dict:
        """``GET /health`` (``{"status": "healthy"}``)."""
        return self._drive(self._op_health())

    def models(self) -> dict:
        """``GET /v1/models``."""
        return self._drive(self._op_models())

    def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                         interval: float | None = None, progress: bool | None = None) -> dict:
        """Poll ``/health`` until 200 (refused connections, timeouts and 503 mean "not ready yet").

        ``process`` (a ``subprocess.Popen``) makes the wait fail at once, with ``log``'s tail (a path or a
        callable), if the server exits. Then reads the served model name from ``/v1/models``.
        """
        return self._drive(self._op_wait_until_ready(timeout, process, log, interval, progress))

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Images through ``/v1/images/generations``, every video mode through ``/v1/videos/sync``."""
        return self._drive(self._op_generate(request, progress))

    def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        return self._drive(self._op_generate_image(request, response_format))

    def generate_video(self, request: GenerationRequest) -> Generation:
        return self._drive(self._op_generate_video(request))

    def transfer(self, spec: Any, *, profile: str | None = None) -> Generation:
        """Run a Cosmos Framework transfer spec (path or ``TransferSpec``) through ``/v1/videos/sync``."""
        return self._drive(self._op_transfer(spec, profile))

    def submit(self, request: GenerationRequest) -> dict:
        """``POST /v1/videos``: queue a job and return its record (``status`` ``queued``)."""
        return self._drive(self._op_submit(request))

    def retrieve(self, job_id: str) -> dict:
        return self._drive(self._op_retrieve(job_id))

    def wait(self, job_id: str, timeout: float | None = None, progress: Any = None,
             interval: float | None = None) -> dict:
        """Poll a job until it completes (``JobFailedError`` if it fails); ``progress`` may be a callable(job)."""
        return self._drive(self._op_wait(job_id, timeout, progress, interval))

    def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                 progress: bool | None = None) -> Path:
        """Stream the job's MP4 to ``path`` atomically: a failed download leaves no file behind."""
        return self._drive(self._op_download(job_id, path, overwrite, progress))

    def delete(self, job_id: str) -> dict:
        return self._drive(self._op_delete(job_id))

    def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return self._drive(self._op_list(limit, order, after))

    def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None, progress: Any = None,
                           keep: bool = False) -> Generation:
        """submit + wait (with progress) + download + delete, as one call returning a ``Generation``."""
        return self._drive(self._op_generate_async_job(request, timeout, progress, keep))

    def curl(self, request: GenerationRequest, **kwargs: Any) -> str:
        return curl_command(self.url, request, api_key=self.api_key, **kwargs)


class AsyncVllmOmniBackend(_Core):
    """The asyncio twin of :class:`VllmOmniBackend` (same operations, ``await``-able)."""

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, **options: Any) -> None:
        super().__init__(url=url, api_key=api_key, **options)
        self._client = None

    def __repr__(self) -> str:
        return f"AsyncVllmOmniBackend({self.url!r})"

    @property
    def client(self):
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self._t(30.0))
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> "AsyncVllmOmniBackend":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _perform(self, call: _Call) -> _Reply:
        started = time.perf_counter()
        kwargs = _request_kwargs(call)
        raw = _multipart_body(call)
        if raw is not None:
            kwargs.pop("data", None)
            kwargs["content"], kwargs["headers"] = raw[0], {"Content-Type": raw[1]}
        if call.stream_to is None:
            response = await self.client.request(call.method, call.path, **kwargs)
            return _Reply(response.status_code, response.headers, response.content, time.perf_counter() - started)
        async with self.client.stream(call.method, call.path, **kwargs) as response:
            if response.status_code >= 400:
                return _Reply(response.status_code, response.headers, await response.aread(),
                              time.perf_counter() - started)
            total = int(response.headers.get("content-length") or 0) or None
            received = 0
            with open(call.stream_to, "wb") as handle:
                async for chunk in response.aiter_bytes(1 << 16):
                    handle.write(chunk)
                    received += len(chunk)
                    if call.on_bytes is not None:
                        call.on_bytes(received, total)
            if total is not None and received != total:
                import httpx

                raise httpx.RemoteProtocolError(f"download ended after {received} of {total} bytes")
            return _Reply(response.status_code, response.headers, b"", time.perf_counter() - started)

    async def _drive(self, op: Op) -> Any:
        import asyncio

        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            if isinstance(step, _Sleep):
                await asyncio.sleep(step.seconds)
                continue
            try:
                value = await self._perform(step)
            except Exception as exc:
                error = exc

    async def health(self) -> dict:
        return await self._drive(self._op_health())

    async def models(self) -> dict:
        return await self._drive(self._op_models())

    async def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                               interval: float | None = None, progress: bool | None = None) -> dict:
        return await self._drive(self._op_wait_until_ready(timeout, process, log, interval, progress))

    async def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        return await self._drive(self._op_generate(request, progress))

    async def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        return await self._drive(self._op_generate_image(request, response_format))

    async def generate_video(self, request: GenerationRequest) -> Generation:
        return await self._drive(self._op_generate_video(request))

    async def transfer(self, spec: Any, *, profile: str | None = None) -> Generation:
        return await self._drive(self._op_transfer(spec, profile))

    async def submit(self, request: GenerationRequest) -> dict:
        return await self._drive(self._op_submit(request))

    async def retrieve(self, job_id: str) -> dict:
        return await self._drive(self._op_retrieve(job_id))

    async def wait(self, job_id: str, timeout: float | None = None, progress: Any = None,
                   interval: float | None = None) -> dict:
        return await self._drive(self._op_wait(job_id, timeout, progress, interval))

    async def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                       progress: bool | None = None) -> Path:
        return await self._drive(self._op_download(job_id, path, overwrite, progress))

    async def delete(self, job_id: str) -> dict:
        return await self._drive(self._op_delete(job_id))

    async def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return await self._drive(self._op_list(limit, order, after))

    async def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None,
                                 progress: Any = None, keep: bool = False) -> Generation:
        return await self._drive(self._op_generate_async_job(request, timeout, progress, keep))

    def curl(self, request: GenerationRequest, **kwargs: Any) -> str:
        return curl_command(self.url, request, api_key=self.api_key, **kwargs)
