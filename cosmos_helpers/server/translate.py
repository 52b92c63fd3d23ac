"""vLLM-Omni form / JSON fields -> a validated job description for the local server.

The rules follow ``shared/reference/vllm-omni-protocol.md`` §3, §4 and §7. Where this stand-in deviates
from vLLM-Omni 0.30.0 it says so here:

* Defaults (size, steps, guidance, flow shift) come from the server's *profile*. For ``nano``/``super``
  they are vLLM-Omni's (1280x720 video, 35 steps, guidance 6, shift 10; images 1024x1024, 50 steps,
  guidance 7, shift 3); for ``tiny`` they shrink to the tiny model's CPU sizes.
* ``num_frames`` and ``seconds`` both omitted -> 1 frame, as vLLM does (a 1-frame "video"). A 1-frame
  text2video runs as a single-frame generation and is returned as a 1-frame MP4; image2video and
  video2video need at least 5 frames here, so a 1-frame request is answered 400 naming ``num_frames``.
* Validation problems of ``extra_params`` values (which vLLM reports as 500 from inside the pipeline)
  are answered 400 with a message naming the field, before the job is queued.
* ``sound_duration``, ``max_sequence_length``, ``negative_metadata_mode``, ``guidance_interval``,
  ``system_prompt``, ``lora`` and encoder keys are validated and accepted but do not change the tiny
  pipeline's output.
* The video2video reference is passed whole to the Diffusers backend (vLLM decodes only the frames it
  conditions on; the pipeline uses the same ones).
* Hardening (:mod:`.limits`): prompts, decoded media, requested output sizes/frames and JSON nesting are
  bounded (400); server-local paths (``control_path``, ``file://`` references, prompts naming a
  ``.json``/``.txt`` file) are refused unless they resolve under ``--allowed-local-media-path``
  (vLLM-Omni 0.30.0 opens ``control_path`` unchecked).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import random
import re
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from struct import error as struct_error
from typing import Any, Mapping

from ..errors import ValidationError
from ..presets import Profile
from ..prompts import _looks_like_prompt_file
from ..request import GenerationRequest
from .limits import ServerLimits, json_depth_exceeds

GUARDRAIL_MESSAGE = "Input was blocked by Cosmos3 guardrails."
TRANSFER_DISABLED = "transfer is not enabled on this server"
HINTS = ("edge", "blur", "depth", "seg", "wsm")
HINT_FIELDS = {"control_path", "control", "control_weight", "preset_edge_threshold", "preset_blur_strength"}
TRANSFER_KEYS = {
    "control_guidance", "control_guidance_interval", "num_video_frames_per_chunk", "num_conditional_frames",
    "num_first_chunk_conditional_frames", "max_frames", "share_vision_temporal_positions",
    "emphasize_control_in_prompt", "show_input", "show_control_condition", "resolution", "image_size",
}
ACTION_KEYS = {"action_mode", "robot_obs", "observation", "action"}
SIZE_RE = re.compile(r"^\d+x\d+$")
SECONDS_RE = re.compile(r"^[1-9]\d*$")
TRUE_WORDS = {"true", "1", "yes", "on", "t", "y"}
FALSE_WORDS = {"false", "0", "no", "off", "f", "n"}
INT64_MAX = 2**63 - 1
MAX_IMAGE_PIXELS = int(os.environ.get("VLLM_MAX_IMAGE_PIXELS", str(7680 * 4320)))


class ApiError(Exception):
    """An HTTP error in vLLM's envelope: ``{"error": {"message", "type", "param", "code"}}``.

    ``body`` replaces the envelope when set (a failed job's GET answers with the job record).
    """

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 body: Any = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or HTTPStatus(status).phrase
        self.param = param
        self.body = body
        self.headers = dict(headers or {})

    def envelope(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}}


def form_error(name: str, problem: str) -> ApiError:
    """A request-validation failure the way FastAPI + vLLM report it (400, ``param`` = ``body.<field>``)."""
    return ApiError(400, f"1 validation error:\n  body.{name}: {problem}", type="Bad Request", param=f"body.{name}")


def value_error(message: str) -> ApiError:
    """A ``ValueError`` raised inside vLLM's form parser: 400 ``BadRequestError`` with the text."""
    return ApiError(400, message, type="BadRequestError")


def from_validation(exc: ValidationError) -> ApiError:
    return ApiError(400, str(exc), type="BadRequestError", param=exc.field)


@dataclass
class ServerSettings:
    """What translation needs to know about the server."""

    profile: Profile
    served_model_name: str
    model_arg: str
    upload_dir: Path
    guardrails: bool = True
    block_words: tuple[str, ...] = ()
    transfer_enabled: bool = False
    limits: ServerLimits = field(default_factory=ServerLimits)

    def video_defaults(self) -> dict[str, Any]:
        p = self.profile
        width, height = p.size()
        return {"width": width, "height": height, "num_inference_steps": p.num_inference_steps,
                "guidance_scale": p.guidance_scale, "flow_shift": p.flow_shift, "fps": 24.0}

    def image_defaults(self) -> dict[str, Any]:
        if self.profile.name == "tiny":
            return {"width": 128, "height": 128, "num_inference_steps": self.profile.num_inference_steps,
                    "guidance_scale": 7.0, "flow_shift": 3.0}
        return {"width": 1024, "height": 1024, "num_inference_steps": 50, "guidance_scale": 7.0, "flow_shift": 3.0}


@dataclass
class VideoSpec:
    """A parsed video POST: either a Cosmos3 generation request or a transfer for the injected runner."""

    kind: str  # "generate" | "transfer"
    prompt: str
    request: GenerationRequest | None
    guardrails: bool
    form: dict[str, str]
    extra_params: dict[str, Any]
    size_field: str | None
    seconds_field: str | None
    quality: str
    fps: float
    num_frames: int
    single_frame_video: bool = False
    rgb_video_path: Path | None = None
    control_paths: dict[str, Path] = field(default_factory=dict)
    uploads: list[Path] = field(default_factory=list)


@dataclass
class ImageSpec:
    request: GenerationRequest
    guardrails: bool
    n: int
    response_format: str
    output_format: str
    output_compression: int


def blocked(prompt: str, guardrails: bool, settings: ServerSettings) -> bool:
    """The stand-in guardrail: a text check against the configured block words."""
    if not guardrails or not settings.guardrails:
        return False
    text = prompt.lower()
    return any(word.lower() in text for word in settings.block_words if word)


# Field parsing ----------------------------------------------------------------------------------------


def _present(values: Mapping[str, Any], name: str) -> str | None:
    value = values.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return value if value != "" else None  # empty strings count as absent
    return value


def _int(values: Mapping[str, Any], name: str) -> int | None:
    raw = _present(values, name)
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise form_error(name, f"Input should be a valid integer [input={raw!r}]")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    try:
        return int(str(raw).strip())
    except ValueError:
        raise form_error(name, f"Input should be a valid integer, unable to parse string as an integer "
                               f"[input={raw!r}]") from None


def _float(values: Mapping[str, Any], name: str) -> float | None:
    raw = _present(values, name)
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise form_error(name, f"Input should be a valid number [input={raw!r}]")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise form_error(name, f"Input should be a valid number, unable to parse string as a number "
                               f"[input={raw!r}]") from None
    if not math.isfinite(value):
        raise form_error(name, f"Input should be a finite number [input={raw!r}]")
    return value


def _bool(values: Mapping[str, Any], name: str) -> bool | None:
    raw = _present(values, name)
    if raw is None:
        return None
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise form_error(name, f"Input should be a valid boolean, unable to interpret input [input={raw!r}]")


def load_json(raw: Any, name: str, max_depth: int = 32) -> Any:
    """``json.loads`` that answers 400 for bad JSON, for nesting deeper than ``max_depth`` and for
    nesting deep enough to exhaust Python's recursion (which would otherwise be a 500)."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise value_error(f"Invalid JSON in form field '{name}': {exc}") from None
    except RecursionError:
        raise value_error(f"Invalid JSON in form field '{name}': nested deeper than {max_depth} levels") from None
    if json_depth_exceeds(value, max_depth):
        raise value_error(f"Invalid JSON in form field '{name}': nested deeper than {max_depth} levels")
    return value


def _json_object(values: Mapping[str, Any], name: str, max_depth: int = 32) -> dict[str, Any] | None:
    raw = _present(values, name)
    if raw is None:
        return None
    if isinstance(raw, dict):
        return raw
    value = load_json(raw, name, max_depth)
    if not isinstance(value, dict):
        raise value_error(f"Invalid JSON in form field '{name}': expected a JSON object, got {type(value).__name__}")
    return value


def _size(values: Mapping[str, Any]) -> tuple[int, int] | None:
    raw = _present(values, "size")
    if raw is None:
        return None
    if not isinstance(raw, str) or not SIZE_RE.match(raw):
        raise form_error("size", f"String should match pattern '^\\d+x\\d+$' [input={raw!r}]")
    width, height = (int(v) for v in raw.split("x"))
    if width < 1 or height < 1:
        raise value_error(f"size: width and height must be positive, got {raw!r}")
    return width, height


def _range(name: str, value: float | int | None, low: float, high: float | None) -> None:
    if value is None:
        return
    if value < low or (high is not None and value > high):
        bound = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
        raise value_error(f"{name} must be {bound}, got {value!r}")


def _check_model(model: Any, settings: ServerSettings) -> None:
    if model in (None, ""):
        return
    if model != settings.served_model_name:
        raise ApiError(400, f"Model mismatch: the server serves {settings.served_model_name!r}, the request asked "
                            f"for {model!r}. Send that name or leave 'model' out.", type="BadRequestError",
                       param="model")


def round_up_4k1(n: int) -> int:
    return n if (n - 1) % 4 == 0 else n + (4 - (n - 1) % 4)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bool_like(value: Any) -> bool:
    """vLLM-Omni applies Python ``bool()`` to these extra_params: ``"false"`` is *true* (protocol §7)."""
    return bool(value)


def _condition_frames(value: Any) -> tuple[int, ...]:
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return (value,)
        if isinstance(value, str):
            return tuple(int(part) for part in value.split(",") if part.strip())
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
    except ValueError:
        pass
    raise value_error(f"extra_params.condition_frame_indexes_vision: {value!r} is not an int, a list of ints or "
                      "a string like '0,1'")


# Media -------------------------------------------------------------------------------------------------


@dataclass
class Upload:
    filename: str
    content: bytes


def sniff(content: bytes, upload_dir: Path, stem: str, field_name: str = "input_reference",
          limits: ServerLimits | None = None):
    """``("image", PIL image)`` or ``("video", saved path)``, decided by content (filename/MIME ignored).

    The image's pixel count is checked from its header before anything is decoded (a decompression bomb
    costs nothing); a video's frame size, frame count and duration are checked before it is accepted.
    """
    from PIL import Image, UnidentifiedImageError

    limits = limits or ServerLimits()
    max_pixels = limits.max_image_pixels
    if not content:
        raise value_error(f"Invalid {field_name}: the file is empty")
    try:
        with Image.open(io.BytesIO(content)) as probe:
            if probe.width * probe.height > max_pixels:
                raise value_error(f"Invalid {field_name}: the image has {probe.width * probe.height} pixels "
                                  f"({probe.width}x{probe.height}), above the limit of {max_pixels}")
            probe.verify()
        image = Image.open(io.BytesIO(content))
        return "image", image.convert("RGB")
    except ApiError:
        raise
    except Image.DecompressionBombError as exc:
        raise value_error(f"Invalid {field_name}: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, IndexError, struct_error):
        pass  # not an image (or a broken one): try it as a video
    upload_dir.mkdir(parents=True, exist_ok=True)
    path = upload_dir / f"{stem}_{field_name}.mp4"
    path.write_bytes(content)
    try:
        check_video(path, field_name, limits)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return "video", path


def check_video(path: Path, field_name: str, limits: ServerLimits) -> dict[str, Any]:
    """Probe a video file (400 if unreadable) and hold it to the pixel, frame and duration limits."""
    from .. import media

    try:
        info = media.probe_video(path)
        if not info.get("frames"):
            info["frames"] = _count_frames(path, limits.max_video_frames + 1)
    except Exception as exc:  # PyAV raises many types
        raise value_error(f"Invalid {field_name}: not a readable image or video ({type(exc).__name__})") from None
    pixels = int(info["width"]) * int(info["height"])
    if pixels > limits.max_image_pixels:
        raise value_error(f"Invalid {field_name}: video frames have {pixels} pixels "
                          f"({info['width']}x{info['height']}), above the limit of {limits.max_image_pixels}")
    frames = int(info.get("frames") or 0)
    if frames > limits.max_video_frames:
        raise value_error(f"Invalid {field_name}: the video has {frames} frames, above the limit of "
                          f"{limits.max_video_frames}")
    fps = info.get("fps") or 0
    if fps and frames / fps > limits.max_video_seconds:
        raise value_error(f"Invalid {field_name}: the video lasts {frames / fps:.1f} s, above the limit of "
                          f"{limits.max_video_seconds:g} s")
    return info


def _count_frames(path: Path, stop_after: int) -> int:
    """Demux (no decoding) up to ``stop_after`` video packets when the container does not state a count."""
    import av

    count = 0
    with av.open(str(path)) as container:
        for packet in container.demux(container.streams.video[0]):
            if packet.size:
                count += 1
                if count >= stop_after:
                    break
    return count


def _fetch_reference(raw: str, name: str, key: str, limits: ServerLimits | None = None) -> bytes:
    limits = limits or ServerLimits()
    value = load_json(raw, name, limits.max_json_depth)
    if not isinstance(value, dict):
        raise value_error(f"Invalid JSON in form field '{name}': expected a JSON object")
    if "file_id" in value:
        raise value_error(f"{name}: file_id references are not supported; upload input_reference or send {key}")
    url = value.get(key)
    if not isinstance(url, str) or not url:
        raise value_error(f"{name}: missing '{key}'")
    if url.startswith("data:"):
        try:
            return base64.b64decode(url.split(",", 1)[1])
        except (IndexError, ValueError) as exc:
            raise value_error(f"{name}: bad data URL ({exc})") from None
    if url.startswith(("http://", "https://")):
        if not limits.allow_url_fetch:
            raise value_error(f"{name}: this server does not fetch URLs ({url}); upload the file as input_reference, "
                              "send a data: URL, or start the server with --allow-url-fetch")
        import httpx

        try:
            with httpx.stream("GET", url, timeout=limits.fetch_timeout, follow_redirects=True) as response:
                response.raise_for_status()
                chunks, size = [], 0
                for chunk in response.iter_bytes(1 << 16):
                    size += len(chunk)
                    if size > limits.max_request_bytes:
                        raise ApiError(413, f"{name}: {url} is larger than the upload limit of "
                                            f"{limits.max_request_bytes} bytes")
                    chunks.append(chunk)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise value_error(f"{name}: could not fetch {url} ({type(exc).__name__}: {exc})") from None
        return b"".join(chunks)
    if url.startswith("file://"):
        path = local_media(url, f"{name}.{key}", limits)
        if path.stat().st_size > limits.max_request_bytes:
            raise ApiError(413, f"{name}: the file is larger than the upload limit of {limits.max_request_bytes} bytes")
        return path.read_bytes()
    raise value_error(f"{name}: {key} must be an http(s), data: or (under --allowed-local-media-path) file:// URL")


def local_media(value: str, what: str, limits: ServerLimits) -> Path:
    """A server-local file named in a request, allowed only under the configured media roots (400 otherwise)."""
    try:
        return limits.local_path(value, what)
    except (PermissionError, FileNotFoundError) as exc:
        raise value_error(str(exc)) from None


def check_prompt(value: Any, name: str, limits: ServerLimits) -> Any:
    """Length limit; no JSON nesting bomb; no server-local file smuggled in as a prompt.

    Returns the value to use (a prompt naming an allowed file becomes its resolved path)."""
    if not isinstance(value, str):
        return value
    if len(value) > limits.max_prompt_chars:
        raise value_error(f"{name} has {len(value)} characters, above the limit of {limits.max_prompt_chars}")
    stripped = value.strip()
    if stripped.startswith("{"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None  # not JSON: plain text
        except RecursionError:
            raise value_error(f"{name}: the JSON caption is nested deeper than {limits.max_json_depth} levels") \
                from None
        if parsed is not None and json_depth_exceeds(parsed, limits.max_json_depth):
            raise value_error(f"{name}: the JSON caption is nested deeper than {limits.max_json_depth} levels")
    if _looks_like_prompt_file(value):
        # GenerationRequest reads a prompt naming an existing .json/.txt file; over HTTP that would read
        # server files, so such prompts must lie under an allowed media root.
        return str(local_media(stripped, name + " (it names a .json/.txt file)", limits))
    return value


def stretch(image, width: int, height: int):
    """What vLLM-Omni does to an image2video reference when ``size`` is given: resize to exactly WxH."""
    from PIL import Image

    return image if image.size == (width, height) else image.resize((width, height), Image.LANCZOS)


def size_from_aspect(width: int, height: int, max_area: int) -> tuple[int, int]:
    """image2video without ``size``: the image's aspect at (at most) ``max_area`` pixels, multiples of 16."""
    aspect = width / height
    out_h = math.sqrt(max_area / aspect)
    out_w = out_h * aspect
    return max(16, int(out_w) // 16 * 16), max(16, int(out_h) // 16 * 16)


# Video POSTs -------------------------------------------------------------------------------------------


def parse_video_form(fields: Mapping[str, str], files: Mapping[str, Upload], settings: ServerSettings,
                     job_stem: str | None = None) -> VideoSpec:
    """Validate and translate the multipart fields of ``/v1/videos/sync`` and ``/v1/videos``."""
    stem = job_stem or uuid.uuid4().hex
    limits = settings.limits
    prompt = _present(fields, "prompt")
    if prompt is None:
        raise form_error("prompt", "Field required")
    prompt = check_prompt(prompt, "prompt", limits)
    negative_field = check_prompt(_present(fields, "negative_prompt"), "negative_prompt", limits)
    _check_model(_present(fields, "model"), settings)
    size = _size(fields)
    width, height = _int(fields, "width"), _int(fields, "height")
    for name, value in (("width", width), ("height", height)):
        if value is not None and value < 1:
            raise form_error(name, f"Input should be greater than or equal to 1 [input={value}]")
    num_frames = _int(fields, "num_frames")
    if num_frames is not None and num_frames < 1:
        raise form_error("num_frames", f"Input should be greater than or equal to 1 [input={num_frames}]")
    seconds = _present(fields, "seconds")
    if seconds is not None and not SECONDS_RE.match(str(seconds)):
        raise form_error("seconds", f"String should match pattern '^[1-9]\\d*$' [input={seconds!r}]")
    if seconds is not None and len(str(seconds)) > 9:
        raise value_error(f"seconds: {seconds[:20]}... is too long a video (limit {limits.max_output_frames} frames)")
    fps = _float(fields, "fps")
    if fps is not None and fps < 1:
        raise form_error("fps", f"Input should be greater than or equal to 1 [input={fps}]")
    steps = _int(fields, "num_inference_steps")
    _range("num_inference_steps", steps, 1, 200)
    guidance = _float(fields, "guidance_scale")
    _range("guidance_scale", guidance, 0, 20)
    flow_shift = _float(fields, "flow_shift")
    seed = _int(fields, "seed")
    if seed is not None and not -(2**63) <= seed <= INT64_MAX:
        raise value_error(f"seed must fit in int64, got {seed}")
    sound = _bool(fields, "generate_sound")
    sound_duration = _float(fields, "sound_duration")
    if sound_duration is not None and sound_duration <= 0:
        raise value_error(f"sound_duration must be greater than 0, got {sound_duration}")
    quality = _present(fields, "quality") or "default"
    if quality not in ("default", "lossless", "high"):
        raise value_error(f"quality must be 'lossless' or 'high', got {quality!r}")
    _json_object(fields, "lora", limits.max_json_depth)
    extra = _json_object(fields, "extra_params", limits.max_json_depth) or {}
    negative = negative_field or ""

    # media
    upload = files.get("input_reference")
    image_ref, video_ref = _present(fields, "image_reference"), _present(fields, "video_reference")
    if upload is not None and (image_ref or video_ref):
        raise value_error("input_reference cannot be combined with image_reference or video_reference")
    if image_ref and video_ref:
        raise value_error("Cosmos3 conditions on one reference: send image_reference or video_reference, not both")
    uploads: list[Path] = []
    kind_media, reference = None, None
    if upload is not None and upload.content:
        kind_media, reference = sniff(upload.content, settings.upload_dir, stem, limits=limits)
    elif image_ref:
        kind_media, reference = sniff(_fetch_reference(image_ref, "image_reference", "image_url", limits),
                                      settings.upload_dir, stem, "image_reference", limits)
    elif video_ref:
        kind_media, reference = sniff(_fetch_reference(video_ref, "video_reference", "video_url", limits),
                                      settings.upload_dir, stem, "video_reference", limits)
    if kind_media == "video":
        uploads.append(reference)

    # extra_params (they win over top-level fields)
    if "generate_sound" in extra or "sound_gen" in extra:
        sound = _bool_like(extra.get("generate_sound", extra.get("sound_gen")))
    for key in ("sound_duration", "audio_duration"):
        if key in extra and not (_is_number(extra[key]) and extra[key] > 0):
            raise value_error(f"extra_params.{key} must be a number above 0, got {extra[key]!r}")
    if "flow_shift" in extra:
        if not _is_number(extra["flow_shift"]):
            raise value_error(f"extra_params.flow_shift must be a number, got {extra['flow_shift']!r}")
        flow_shift = float(extra["flow_shift"])
    if "negative_metadata_mode" in extra and extra["negative_metadata_mode"] not in ("none", "same", "inverse"):
        raise value_error(f"extra_params.negative_metadata_mode must be 'none', 'same' or 'inverse', got "
                          f"{extra['negative_metadata_mode']!r}")
    if "max_sequence_length" in extra and (not isinstance(extra["max_sequence_length"], int)
                                           or isinstance(extra["max_sequence_length"], bool)
                                           or extra["max_sequence_length"] < 1):
        raise value_error(f"extra_params.max_sequence_length must be a positive integer, got "
                          f"{extra['max_sequence_length']!r}")
    keep = extra.get("condition_video_keep", "first")
    if keep not in ("first", "last"):
        raise value_error(f"extra_params.condition_video_keep must be 'first' or 'last', got {keep!r}")
    cond = _condition_frames(extra["condition_frame_indexes_vision"]) if "condition_frame_indexes_vision" in extra \
        else (0, 1)
    guardrails = _bool_like(extra.get("guardrails", True))
    templates = {name: _bool_like(extra.get(name, False)) for name in ("use_resolution_template",
                                                                       "use_duration_template")}
    use_system_prompt = _bool_like(extra.get("use_system_prompt", kind_media == "video"))
    action = sorted(ACTION_KEYS & set(extra))
    if action:
        # vLLM-Omni answers 500 here (its pipeline's ValueError); bad input must not look like a server fault.
        raise ApiError(400, f"{action[0]}: action modes need an action checkpoint; "
                            f"{settings.served_model_name} is not one.")

    # frames and fps
    fps_value = fps if fps is not None else 24.0
    if num_frames is None:
        if seconds is not None and int(seconds) * fps_value > limits.max_output_frames:
            _cleanup(uploads)
            raise value_error(f"seconds x fps = {int(seconds) * fps_value:g} frames, above the limit of "
                              f"{limits.max_output_frames} frames")
        num_frames = int(int(seconds) * fps_value) if seconds is not None else 1
    num_frames = max(1, round_up_4k1(num_frames))
    if num_frames > limits.max_output_frames:
        _cleanup(uploads)
        raise value_error(f"num_frames {num_frames} is above the limit of {limits.max_output_frames} frames")

    # transfer
    control = files.get("control_reference")
    control_type = _present(fields, "control_type")
    try:
        is_transfer = _check_transfer(extra, control, control_type)
    except ApiError:
        _cleanup(uploads)
        raise
    form_strings = {k: v for k, v in fields.items() if isinstance(v, str)}
    common = dict(prompt=prompt, guardrails=guardrails, form=form_strings, extra_params=extra, size_field=
                  fields.get("size") or None, seconds_field=seconds, quality=quality, fps=fps_value,
                  num_frames=num_frames)
    if is_transfer:
        if sound:
            raise value_error("transfer cannot be combined with generate_sound")
        if not settings.transfer_enabled:
            raise ApiError(400, TRANSFER_DISABLED, type="BadRequestError")
        if kind_media == "image":
            raise value_error("transfer conditions on a video: upload the RGB video as input_reference")
        control_paths: dict[str, Path] = {}
        try:
            # server-local control files named by the client: only under an allowed media root
            for hint in HINTS:
                value = extra.get(hint)
                if isinstance(value, str):
                    extra[hint] = str(local_media(value, f"extra_params.{hint}", limits))
                elif isinstance(value, dict) and "control_path" in value:
                    if not isinstance(value["control_path"], str):
                        raise value_error(f"extra_params.{hint}.control_path must be a string path")
                    value["control_path"] = str(local_media(value["control_path"],
                                                            f"extra_params.{hint}.control_path", limits))
            if control is not None:
                settings.upload_dir.mkdir(parents=True, exist_ok=True)
                path = settings.upload_dir / f"{stem}_control_{control_type}.mp4"  # never the client's name
                path.write_bytes(control.content)
                uploads.append(path)
                check_video(path, "control_reference", limits)
                hint = extra.get(control_type)
                extra[control_type] = {**(hint if isinstance(hint, dict) else {}), "control_path": str(path)}
        except ApiError:
            _cleanup(uploads)
            raise
        for hint in HINTS:
            value = extra.get(hint)
            if isinstance(value, str):
                control_paths[hint] = Path(value)
            elif isinstance(value, dict) and isinstance(value.get("control_path"), str):
                control_paths[hint] = Path(value["control_path"])
        return VideoSpec(kind="transfer", request=None, rgb_video_path=reference if kind_media == "video" else None,
                         control_paths=control_paths, uploads=uploads, **common)

    # generation request
    defaults = settings.video_defaults()
    mode = {"image": "image2video", "video": "video2video"}.get(kind_media, "text2video")
    image = None
    if size is None and width is not None and height is not None:
        size = (width, height)
    if kind_media == "image":
        if size is not None:
            image = stretch(reference, *size)
        else:
            size = size_from_aspect(reference.width, reference.height, defaults["width"] * defaults["height"])
            image = reference
    if size is None:
        size = (defaults["width"], defaults["height"])
    if size[0] * size[1] > limits.max_output_pixels:
        _cleanup(uploads)
        raise value_error(f"size {size[0]}x{size[1]} is {size[0] * size[1]} pixels, above the limit of "
                          f"{limits.max_output_pixels}")
    single_frame = False
    if num_frames == 1:
        if mode != "text2video":
            raise value_error(f"num_frames: {mode} needs at least 5 frames and got 1 (the vLLM default when "
                              "num_frames and seconds are omitted). Send num_frames, e.g. 93 or 189.")
        if sound:
            raise value_error("num_frames: a 1-frame video cannot carry sound; send num_frames (e.g. 189)")
        mode, single_frame = "text2image", True
    try:
        request = GenerationRequest(
            mode=mode, prompt=prompt, negative_prompt=negative, profile=settings.profile.name,
            model=settings.model_arg, width=size[0], height=size[1],
            num_frames=None if single_frame else num_frames, fps=fps_value,
            num_inference_steps=steps if steps is not None else defaults["num_inference_steps"],
            guidance_scale=guidance if guidance is not None else defaults["guidance_scale"],
            flow_shift=flow_shift if flow_shift is not None else defaults["flow_shift"],
            seed=seed if seed is not None else random.randint(0, 2**31 - 1),
            sound=bool(sound), image=image, video=reference if kind_media == "video" else None,
            condition_frames=cond, condition_video_keep=keep,
            add_resolution_template=templates["use_resolution_template"],
            add_duration_template=templates["use_duration_template"],
            use_system_prompt=use_system_prompt, guardrails=False,
        )
    except ValidationError as exc:
        for path in uploads:
            path.unlink(missing_ok=True)
        raise from_validation(exc) from None
    return VideoSpec(kind="generate", request=request, single_frame_video=single_frame, uploads=uploads, **common)


def _cleanup(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _check_transfer(extra: dict[str, Any], control: Upload | None, control_type: str | None) -> bool:
    """Pairing rules of protocol §4 / §7.2; True when the request is a transfer."""
    if control_type is not None and control is None:
        raise value_error("control_type was given without a control_reference file")
    if control is not None and control_type is None:
        raise value_error("control_reference needs control_type (one of edge, blur, depth, seg, wsm)")
    if control_type is not None and control_type not in HINTS:
        raise value_error(f"Unsupported control_type {control_type!r}: use one of {', '.join(HINTS)}")
    if control_type is not None:
        hint = extra.get(control_type)
        if hint is not None and hint is not True and not isinstance(hint, dict):
            raise value_error(f"extra_params.{control_type} must be true or an object when control_reference is "
                              "uploaded")
        if isinstance(hint, dict) and ("control" in hint or "control_path" in hint):
            raise value_error(f"extra_params.{control_type} already has a control/control_path; it conflicts with "
                              "the uploaded control_reference")
    hints = [h for h in HINTS if h in extra]
    for hint in hints:
        value = extra[hint]
        if value is True or isinstance(value, str):
            if value is True and hint not in ("edge", "blur") and control_type != hint:
                raise value_error(f"extra_params.{hint}: true computes the map from the input video, which only "
                                  "edge and blur support; give a control_path or upload control_reference")
            continue
        if not isinstance(value, dict):
            raise value_error(f"extra_params.{hint} must be true, a path string or an object, got {value!r}")
        unknown = set(value) - HINT_FIELDS
        if unknown:
            raise value_error(f"extra_params.{hint}: unknown field(s) {', '.join(sorted(unknown))}")
        weight = value.get("control_weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise value_error(f"extra_params.{hint}.control_weight must be a finite number >= 0, got {weight!r}")
    interval = extra.get("control_guidance_interval")
    if interval is not None:
        try:
            lo, hi = (float(v) for v in (interval.split(",") if isinstance(interval, str) else interval))
        except (TypeError, ValueError):
            raise value_error("extra_params.control_guidance_interval must be [lo, hi] or 'lo,hi'") from None
        if lo > hi:
            raise value_error("extra_params.control_guidance_interval needs lo <= hi")
    transfer_only = sorted(TRANSFER_KEYS & set(extra))
    if transfer_only and not hints and control_type is None:
        raise value_error(f"extra_params.{transfer_only[0]} is a transfer option, but no control hint (edge, blur, "
                          "depth, seg, wsm) was given")
    return bool(hints) or control_type is not None


# Images ------------------------------------------------------------------------------------------------


def parse_image_body(body: Any, settings: ServerSettings) -> ImageSpec:
    """Validate and translate the JSON body of ``/v1/images/generations``; unknown keys are ignored."""
    if not isinstance(body, dict):
        raise ApiError(400, "1 validation error:\n  body: Input should be a valid dictionary or object",
                       type="Bad Request", param="body")
    limits = settings.limits
    if json_depth_exceeds(body, limits.max_json_depth):
        raise value_error(f"the JSON body is nested deeper than {limits.max_json_depth} levels")
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise form_error("prompt", "Field required" if prompt is None else f"Input should be a valid string "
                                                                          f"[input={str(prompt)[:80]!r}]")
    prompt = check_prompt(prompt, "prompt", limits)
    negative_field = check_prompt(body.get("negative_prompt"), "negative_prompt", limits)
    _check_model(body.get("model"), settings)
    n = _int(body, "n")
    n = 1 if n is None else n
    _range("n", n, 1, 10)
    size = _size(body)
    response_format = body.get("response_format") or "b64_json"
    if response_format not in ("b64_json", "file"):
        raise value_error(f"response_format {response_format!r} is not supported: use 'b64_json' or 'file'")
    negative = negative_field or ""
    if not isinstance(negative, str):
        raise form_error("negative_prompt", "Input should be a valid string")
    steps = _int(body, "num_inference_steps")
    _range("num_inference_steps", steps, 1, 200)
    guidance = _float(body, "guidance_scale")
    _range("guidance_scale", guidance, 0, 20)
    _range("true_cfg_scale", _float(body, "true_cfg_scale"), 0, 20)
    flow_shift = _float(body, "flow_shift")
    seed = _int(body, "seed")
    if seed is not None and not -(2**63) <= seed <= INT64_MAX:
        raise value_error(f"seed must fit in int64, got {seed}")
    output_format = body.get("output_format") or "png"
    if output_format not in ("png", "jpeg", "jpg", "webp"):
        output_format = "jpeg"  # vLLM-Omni silently falls back to JPEG
    compression = _int(body, "output_compression")
    compression = 100 if compression is None else compression
    _range("output_compression", compression, 0, 100)
    extra = body.get("extra_params") or {}
    if not isinstance(extra, dict):
        raise form_error("extra_params", "Input should be a valid dictionary")
    if "flow_shift" in extra and _is_number(extra["flow_shift"]):
        flow_shift = float(extra["flow_shift"])
    system = extra.get("use_system_prompt", body.get("use_system_prompt") or False)
    defaults = settings.image_defaults()
    width, height = size or (defaults["width"], defaults["height"])
    if width * height > limits.max_output_pixels:
        raise value_error(f"size {width}x{height} is {width * height} pixels, above the limit of "
                          f"{limits.max_output_pixels}")
    try:
        request = GenerationRequest(
            mode="text2image", prompt=prompt, negative_prompt=negative, profile=settings.profile.name,
            model=settings.model_arg, width=width, height=height,
            num_inference_steps=steps if steps is not None else defaults["num_inference_steps"],
            guidance_scale=guidance if guidance is not None else defaults["guidance_scale"],
            flow_shift=flow_shift if flow_shift is not None else defaults["flow_shift"],
            seed=seed if seed is not None else random.randint(0, 2**32 - 1),
            add_resolution_template=_bool_like(extra.get("use_resolution_template", False)),
            add_duration_template=_bool_like(extra.get("use_duration_template", False)),
            use_system_prompt=_bool_like(system), guardrails=False,
        )
    except ValidationError as exc:
        raise from_validation(exc) from None
    return ImageSpec(request=request, guardrails=_bool_like(extra.get("guardrails", True)), n=n,
                     response_format=response_format, output_format=output_format, output_compression=compression)
