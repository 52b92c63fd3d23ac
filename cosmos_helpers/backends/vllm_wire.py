"""The vLLM-Omni 0.30.0 wire format: what a ``GenerationRequest`` becomes on the wire (no ``model`` field: the served
name may differ from the hub id) and what an answer becomes here. No network I/O; the media work is in plain functions
that the asyncio client runs in a worker thread."""

from __future__ import annotations

import base64
import io
import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .. import media
from ..errors import (AuthenticationError, GenerationTimeoutError, GuardrailError, RequestValidationError,
                      ServerBusyError, ServerError, ValidationError)
from ..protocol import action
from ..protocol import vllm_omni as proto
from ..request import GenerationRequest

API_KEY_ENV = "COSMOS3_VLLM_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8000"
BACKEND_NAME = "vllm-omni"
# request field -> the extra_params key the Cosmos3 pipeline reads it from
OPTION_KEYS: Mapping[str, str] = {"use_system_prompt": "use_system_prompt",
                                  "add_resolution_template": "use_resolution_template",
                                  "add_duration_template": "use_duration_template",
                                  "guidance_interval": "guidance_interval"}
assert set(OPTION_KEYS.values()) <= set(proto.GENERATION_EXTRA)
GUARDRAIL_MARKER = "guardrail"  # in proto.GUARDRAIL_MESSAGE, and in an engine-side block's message
IMAGE_SUFFIX = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp"}

Files = Mapping[str, "tuple[str, bytes, str]"]
# the form fields a hand-built form must carry, and why
FORM_REQUIRED: Mapping[str, str] = {"prompt": "the server requires it",
                                    "num_frames": "an omitted num_frames makes a one-frame video",
                                    "seed": "the server never echoes the seed it draws"}


# Building requests ---------------------------------------------------------------------------------------


def extra_params(request: GenerationRequest) -> dict[str, Any]:
    """Guardrails, the options the caller set (JSON values: ``"false"`` would be truthy), video2video's conditioning."""
    extra: dict[str, Any] = {"guardrails": bool(request.guardrails)}
    for name, key in OPTION_KEYS.items():
        value = getattr(request, name)
        if value is not None:  # else the server's own default applies
            extra[key] = [float(v) for v in value] if name == "guidance_interval" else bool(value)
    if request.mode == "video2video" and request.condition_frames is not None:
        extra["condition_frame_indexes_vision"] = [int(i) for i in request.condition_frames]
    if request.mode == "video2video" and request.condition_video_keep is not None:
        extra["condition_video_keep"] = request.condition_video_keep
    if request.is_action:
        extra.update(action_params(request))
    return extra


def action_params(request: GenerationRequest) -> dict[str, Any]:
    """An action request's ``extra_params`` (``protocol.action``); policy and inverse dynamics need the raw width
    (pipeline_cosmos3.py:2644-2647)."""
    params: dict[str, Any] = {"action_mode": request.mode, "domain_name": request.embodiment,
                              "action_chunk_size": request.num_frames - 1,
                              "raw_action_dim": action.RAW_DIM[request.embodiment]}
    if request.actions is not None:
        params["action"] = np.asarray(request.actions, dtype=np.float32).tolist()
    return params


def refuse_sync_action(request: GenerationRequest) -> None:
    """``/v1/videos/sync`` answers with the MP4 only: an action request's predicted actions would be lost."""
    if request.is_action:
        raise ValidationError("mode", f"{request.mode} goes through an asynchronous job: the sync route returns the "
                              "video only, and the actions come in the job's record.",
                              "call generate() or generate_async_job().")


def check_action(request: GenerationRequest) -> None:
    if not request.is_action:
        return
    if request.view_point is not None:
        raise ValidationError("view_point", f"vLLM-Omni {proto.VERSION} reads no camera viewpoint for action "
                              "requests (its action caption has no framing sentence).",
                              "drop view_point, or run the request on the diffusers backend.")
    if request.embodiment not in action.VLLM_DOMAIN_ID:
        raise ValidationError("embodiment", f"vLLM-Omni {proto.VERSION} knows no embodiment "
                              f"{request.embodiment!r}.", f"use one of {', '.join(sorted(action.VLLM_DOMAIN_ID))}.")


def refuse_request_cache(step_cache: Any) -> None:
    """A request has no step cache field (``"off"`` is refused too: the client cannot tell what the server runs)."""
    if step_cache is not None:
        raise ValidationError("step_cache", f"the vllm-omni backend cannot set a step cache per request: vLLM-Omni "
                              f"{proto.VERSION} takes it when the server starts, for every request it serves.",
                              f"leave step_cache out, and start the server with it: serve_command(model, "
                              f"step_cache={step_cache!r}) prints the command.")


def _sampling(request: GenerationRequest) -> dict[str, Any]:
    """What every route reads, as typed values; ``negative_prompt`` only when one was given."""
    fields = {"prompt": request.prompt_text(), "size": f"{request.width}x{request.height}",
              "num_inference_steps": request.num_inference_steps, "guidance_scale": request.guidance_scale,
              "flow_shift": request.flow_shift, "seed": request.seed, "extra_params": extra_params(request)}
    negative = request.negative_prompt_text()
    return fields if negative is None else {**fields, "negative_prompt": negative}


def image_body(request: GenerationRequest, response_format: str = "b64_json") -> dict[str, Any]:
    """The JSON body of ``POST /v1/images/generations`` (``ImageGenerationRequest``)."""
    if request.mode != "text2image":
        raise ValidationError("mode", f"{proto.IMAGES} makes images; got mode={request.mode!r}.",
                              "use a video route (generate_video) for video modes.")
    check_response_format(response_format)
    return {**_sampling(request), "response_format": response_format}


def video_fields(request: GenerationRequest) -> dict[str, str]:
    """The text parts of a video POST: every value a string, ``num_frames`` always, ``extra_params`` as JSON."""
    if request.mode == "text2image":
        raise ValidationError("mode", f"text2image goes to {proto.IMAGES}, not the video routes.",
                              "use generate_image(), or a video mode.")
    fields = {**_sampling(request), "num_frames": request.num_frames, "fps": request.fps}
    if request.sound:  # a checkpoint without sound refuses the field, so it is sent only for sound
        # No sound_duration: the pipeline reads it (serving_video.py:439-440 -> pipeline_cosmos3.py:2177), but
        # without it takes exactly num_frames / frame_rate (pipeline_cosmos3.py:2180-2181), which is the
        # request's own length; a value written out here could only round it (121 / 24 s -> "5.042").
        fields["generate_sound"] = "true"
    return {name: _form_text(value) for name, value in fields.items()}


def _form_text(value: Any) -> str:
    """A form value as text: JSON for ``extra_params``, a float as Python writes it (``24.0``), the rest as is."""
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return repr(float(value)) if isinstance(value, float) else str(value)


def check_response_format(response_format: str) -> None:
    if response_format not in proto.IMAGE_RESPONSE_FORMATS:
        raise ValidationError("response_format", f"{response_format!r} is not an answer vLLM-Omni can give.",
                              f"use one of {', '.join(proto.IMAGE_RESPONSE_FORMATS)} ('url' is rejected).")


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart form, and what was done to it on the way (for provenance)."""

    filename: str
    data: bytes
    mime: str
    note: Mapping[str, Any] = field(default_factory=dict)


def upload_files(upload: Upload | None) -> dict[str, tuple[str, bytes, str]]:
    return {} if upload is None else {"input_reference": (upload.filename, upload.data, upload.mime)}


def input_reference(request: GenerationRequest) -> Upload | None:
    """The ``input_reference`` of image2video, video2video and the action modes (media work); a video file is
    uploaded as it is, an array encoded to MP4 once."""
    if request.is_action and request.image is not None:  # padded into its canvas there, so sent as it is
        image = request.conditioning_image()
        return Upload("input_reference.png", media.image_bytes(np.asarray(image), "PNG"), "image/png",
                      {"kind": "image", "source_size": list(image.size), "sent": "the image as it is"})
    if request.is_action:  # inverse dynamics: the frames it reads, encoded once
        return _video_upload(request.conditioning_video()[:request.num_frames], request.fps)
    if request.mode == "image2video":
        image = request.conditioning_image()
        cropped = media.center_crop_to_aspect(image, request.width, request.height)
        note = {"kind": "image", "source_size": list(image.size), "sent_size": list(cropped.size),
                "cropped": cropped.size != image.size,
                "why": "centre-cropped to the output aspect here: the server stretches the image to size"}
        return Upload("input_reference.png", media.image_bytes(np.asarray(cropped), "PNG"), "image/png", note)
    if request.mode == "video2video":
        source = request.video
        if isinstance(source, (str, Path)):
            path = Path(source)
            mime = "video/mp4" if path.suffix.lower() == ".mp4" else "application/octet-stream"  # sniffed anyway
            return Upload(path.name, path.read_bytes(), mime, {"kind": "video", "sent": "the file as it is"})
        return _video_upload(request.conditioning_video(), request.fps)
    return None


def _video_upload(frames: np.ndarray, fps: float) -> Upload:
    with tempfile.TemporaryDirectory(prefix="cosmos-v2v-") as folder:
        target = media.write_mp4(Path(folder) / "input_reference.mp4", frames, fps, crf=10)
        return Upload(target.name, target.read_bytes(), "video/mp4",
                      {"kind": "video", "sent": "the array encoded once (H.264, crf 10)"})


def form_parts(fields: Mapping[str, str], files: Files) -> list[tuple[str, tuple]]:
    """httpx multipart parts: text as ``(None, value)`` (no filename), then the files."""
    return [(name, (None, value)) for name, value in fields.items()] + [(name, tuple(f)) for name, f in files.items()]


def check_form(fields: Mapping[str, Any], files: Files) -> tuple[int, float | None]:
    """Refuse a hand-built video form the server would misread, before it is sent; returns the seed and fps it asks
    for, recorded client side (the server echoes neither)."""
    for name, value in fields.items():
        if name not in proto.VIDEO_FIELDS:
            raise ValidationError(name, "is not a form field of vLLM-Omni's video routes (it would be ignored).",
                                  f"use only {', '.join(proto.VIDEO_FIELDS)}.")
        if not isinstance(value, str):
            raise ValidationError(name, f"form values are strings, got {type(value).__name__} {value!r}.",
                                  "convert it (json.dumps for extra_params; 'true'/'false' for booleans).")
    for name, why in FORM_REQUIRED.items():
        if name not in fields:
            raise ValidationError(name, f"missing from the form ({why}).", f"add {name}=... as a string.")
    if "extra_params" in fields and not isinstance(parse_json(fields["extra_params"]), dict):
        raise ValidationError("extra_params", f"{fields['extra_params'][:80]!r} is not a JSON object "
                              "(the server answers 400).", "pass json.dumps({...}).")
    for name, part in files.items():
        if name not in proto.VIDEO_FILES:
            raise ValidationError(name, "is not a file field of vLLM-Omni's video routes.",
                                  f"use {' or '.join(proto.VIDEO_FILES)}.")
        if not (isinstance(part, tuple) and len(part) == 3 and isinstance(part[1], bytes)):
            raise ValidationError(name, "a file is (filename, bytes, mime).", "e.g. ('clip.mp4', data, 'video/mp4').")
    values: dict[str, Any] = {}
    for name, kind in (("seed", int), ("fps", float)):
        try:
            values[name] = kind(fields[name]) if fields.get(name) else None
        except ValueError:
            raise ValidationError(name, f"{fields[name]!r} is not a {kind.__name__}.",
                                  f"send {name} as a {kind.__name__} written as a string.") from None
    return values["seed"], values["fps"]


# Calls, replies, and the retry policy ---------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One HTTP exchange for a sender to perform; ``accept`` may take an error status as the answer."""

    method: str
    path: str
    what: str
    timeout: Any  # httpx.Timeout
    json: Any = None
    files: list | None = None
    params: Mapping[str, Any] | None = None
    accept: Callable[[int, bytes], bool] | None = None

    def kwargs(self) -> dict[str, Any]:
        return {"method": self.method, "url": self.path, "timeout": self.timeout, "json": self.json,
                "files": self.files, "params": self.params}


class RetryPolicy:
    """Whether a call is sent again, and after how long. Only GET and DELETE are retried (a DELETE after 409 too:
    "cancellation in progress"): a retried generation POST could start the same GPU work twice."""

    STATUSES: Mapping[str, tuple[int, ...]] = {"GET": (429, 502, 503), "DELETE": (409, 429, 502, 503)}

    def __init__(self, attempts: int = 3, *, base: float = 0.5, cap: float = 8.0) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValidationError("retries", f"expected a positive number of attempts, got {attempts!r}.",
                                  "pass e.g. retries=3 (1 = no retry).")
        self.attempts, self.base, self.cap = attempts, base, cap

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before attempt ``attempt + 1``: the server's ``Retry-After`` if it gave one, else doubling."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap)
        return min(self.cap, self.base * 2 ** (attempt - 1))

    def after_error(self, call: Call, attempt: int) -> float | None:
        """The wait before resending ``call`` after a transport failure, or ``None``: give up."""
        return self.backoff(attempt) if call.method in self.STATUSES and attempt < self.attempts else None

    def after_status(self, call: Call, attempt: int, status: int, headers: Mapping[str, str]) -> float | None:
        """The wait before resending ``call`` after an answer with ``status``, or ``None``: keep the answer."""
        if status not in self.STATUSES.get(call.method, ()) or attempt >= self.attempts:
            return None
        return self.backoff(attempt, _number(headers.get("retry-after")))


def parse_json(content: bytes | str) -> Any:
    try:
        return json.loads(content)
    except ValueError:  # not UTF-8, or not JSON
        return None


def error_message(parsed: Any, content: bytes, status: int) -> str:
    """The server's own words: vLLM's envelope, FastAPI's ``detail``, else the body's text."""
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        for key in ("detail", "message"):
            if parsed.get(key):
                return parsed[key] if isinstance(parsed[key], str) else json.dumps(parsed[key])
    return content.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"


def error_from_response(status: int, content: bytes, headers: Mapping[str, str]) -> Exception:
    """An error answer as this package's exception, with the server's own message (vLLM's envelope)."""
    parsed = parse_json(content)
    message = error_message(parsed, content, status)
    request_id = headers.get("x-request-id")
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        request_id = parsed["error"].get("request_id") or request_id
    context = {"body": parsed, "request_id": request_id}
    if status == 400:
        return guardrail_error(message) or RequestValidationError(status, message, **context)
    if status in (401, 403):
        return AuthenticationError(status, f"{message} (send the server's key: VllmOmniBackend(url, api_key=...) "
                                           f"or ${API_KEY_ENV})", **context)
    if status == 429:  # the local stand-in's queue cap; the real server has none
        return ServerBusyError(status, message, retry_after=_number(headers.get("retry-after")), **context)
    if status == 504:
        return GenerationTimeoutError(f"HTTP 504: {message} (the server's timeout counts queueing time; "
                                      "use an asynchronous job for long generations)")
    return ServerError(status, message, **context)


def guardrail_error(message: str) -> GuardrailError | None:
    """The guardrails' refusal, told by its message wherever it comes (a 400 answer, a failed job's record)."""
    return GuardrailError(message) if GUARDRAIL_MARKER in message.lower() else None


def server_metrics(source: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """The server's own measurements as ``(timings, provenance)``, whichever answer carried them (an image's
    ``metrics``, a job's record, a sync video's ``X-*`` headers), so ``stage_<name>_s`` means one thing everywhere."""
    source = source if isinstance(source, Mapping) else {}
    stages = dict(source["stage_durations"]) if isinstance(source.get("stage_durations"), Mapping) else None
    timings = {"inference_s": _number(source.get("inference_time_s")),
               **{f"stage_{k}_s": _number(v) for k, v in (stages or {}).items()}}
    provenance = {"stage_durations": stages, "peak_memory_mb": _number(source.get("peak_memory_mb"))}
    return ({k: v for k, v in timings.items() if v is not None}, {k: v for k, v in provenance.items() if v is not None})


def _number(value: Any) -> float | None:
    """A JSON number or a header's text as a finite float, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def timings_from_headers(headers: Mapping[str, str]) -> tuple[dict[str, float], dict[str, Any]]:
    timings, provenance = server_metrics({"inference_time_s": headers.get("x-inference-time-s"),
                                          "stage_durations": parse_json(headers.get("x-stage-durations") or ""),
                                          "peak_memory_mb": headers.get("x-peak-memory-mb")})
    provenance.update({key: headers[h] for h, key in (("x-request-id", "request_id"), ("x-model", "served_model"))
                       if headers.get(h)})
    return timings, provenance


def timings_from_job(job: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    timings, provenance = server_metrics({**job, "stage_durations": job.get("stage_durations") or {}})
    provenance.update({"job_id": job.get("id"), "served_model": job.get("model"), "job": dict(job)})
    return timings, provenance


def decode_image(raw: bytes) -> tuple[np.ndarray, str | None]:
    """Frames ``(1, H, W, 3)`` and format (media work)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as image:
            return np.asarray(image.convert("RGB"))[None], image.format
    except Exception as exc:  # PIL raises several types for bad bytes
        raise ServerError(200, f"the server's image could not be decoded ({exc})") from None


def decode_image_reply(response: Any) -> tuple[bytes, np.ndarray, str, dict[str, Any]]:
    """``(image bytes, frames, suffix, answer fields)`` of an images answer (media work)."""
    extra: dict[str, Any] = {}
    raw = response.content
    if "json" in response.headers.get("content-type", ""):
        parsed = parse_json(raw)
        try:
            raw = base64.b64decode(parsed["data"][0]["b64_json"], validate=True)
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise ServerError(200, f"the images answer has no data[0].b64_json ({exc})", body=parsed) from None
        extra = {k: parsed.get(k) for k in ("size", "output_format", "metrics", "created")}
    frames, kind = decode_image(raw)
    if kind not in IMAGE_SUFFIX:
        raise ServerError(200, f"the server sent a {kind} image, which cannot be kept as it came")
    return raw, frames, IMAGE_SUFFIX[kind], extra


def decode_mp4(content: bytes) -> media.VideoData:
    """The server's MP4 decoded from its bytes (frames, and sound when muxed) for previews (media work)."""
    try:
        return media.read_video(content, with_audio=True)
    except Exception as exc:  # PyAV raises many types for broken files
        raise ServerError(200, f"the server's MP4 ({len(content)} bytes) could not be decoded ({exc})") from None


def check_mp4_reply(response: Any) -> None:
    """A sync answer is accepted only as a non-empty ``video/mp4`` body (action-only output is empty)."""
    content_type, content = response.headers.get("content-type", ""), response.content
    if not content_type.startswith("video/mp4") or not content:
        raise ServerError(response.status_code, f"expected video/mp4 from {proto.VIDEOS_SYNC}, got "
                          f"{content_type!r} ({len(content)} bytes)", body=parse_json(content))

