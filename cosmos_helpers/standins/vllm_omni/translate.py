"""From a validated request to the stand-in's work: a ``GenerationRequest`` with every value vLLM-Omni 0.30.0 would
use for the served model (its defaults passed explicitly), or a transfer's inputs.

vLLM-Omni's rules (``shared/reference/vllm-omni-protocol.md`` §3, §4, §7; facts in ``protocol.vllm_omni``):
``extra_params`` overrides the video form's fields and is overridden by the image body's top-level ones; Cosmos3
applies ``bool()`` to its switches (``"false"`` is true); omitted ``num_frames`` and ``seconds`` mean one frame;
counts round up to 4k+1; image2video / video2video without a size take the reference's aspect at 1280x720's area.
A distilled (4-step) checkpoint is served as on vLLM-Omni (``protocol.variants``): its fixed schedule, guidance 1.0
(so no negative prompt), sigmas unshifted, and text-to-video, video-to-video and sound refused with its message.
"""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from PIL import Image

from ...presets import PROFILES
from ...prompts import parse_caption
from ...protocol import vllm_omni as vo
from ...request import GenerationRequest
from . import action_task, references
from .action_task import given
from .settings import ServerLimits
from .models import ImageRequest, VideoRequest, bad_request, value_error
from .references import Reference, TransferInputs, Uploads
from .state import ServerState

_EDGE_HUB = vo.EDGE_MODEL.rsplit("/", 1)[-1].lower()
# what the pipeline ignores on a distilled checkpoint: the fixed schedule and the baked-in guidance replace them
_DISTILLED_IGNORES = ("num_inference_steps", "guidance_scale", "guidance_interval", "negative_prompt", "flow_shift")
_DISTILLED_REFUSES = {"text2video": "text-to-video requests are unsupported.",
                      "video2video": "video-to-video requests are unsupported.",
                      "sound": "sound generation is unsupported."}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ``extra_params`` values the pipeline would reject (vLLM-Omni: a 500 from inside it): key -> (test, what it must be)
_EXTRA_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "negative_metadata_mode": (lambda v: v in vo.NEGATIVE_METADATA_MODES,
                               f"one of {', '.join(vo.NEGATIVE_METADATA_MODES)}"),
    "max_sequence_length": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer"),
    "condition_video_keep": (lambda v: v in vo.REFERENCE_KEEP, " or ".join(map(repr, vo.REFERENCE_KEEP))),
    "sound_duration": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "audio_duration": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "flow_shift": (_is_number, "a number"),
}


@dataclass
class VideoTask:
    request: VideoRequest
    generation: GenerationRequest | None
    transfer: TransferInputs | None
    uploads: Uploads


@dataclass
class ImageTask:
    body: ImageRequest
    request: GenerationRequest
    output_format: str  # the image format vLLM-Omni would write


def video_task(req: VideoRequest, files: dict[str, bytes], form_fields: dict[str, str], state: ServerState,
               stem: str) -> VideoTask:
    """Check everything, read the media, and describe the work; nothing is left behind when it fails.
    ``form_fields`` are the text parts as sent (``control_type`` is read from them: it is a form field only)."""
    limits = state.limits
    prompt, negative, extra = _checked(req, req.extra_params or {}, state)
    if req.lora is not None and _too_deep(req.lora, limits.max_json_depth):
        raise bad_request(f"Invalid JSON in form field 'lora': nested deeper than {limits.max_json_depth} levels")
    action = action_task.is_action(extra)
    num_frames = None if action else frame_count(req, limits)
    uploaded_kind = references.control_type(form_fields.get("control_type"), "control_reference" in files, extra)
    transfer = references.check(extra, uploaded_kind)
    if transfer and state.transfer_runner is None:
        raise value_error("transfer is not enabled on this server (start it with a transfer runner)")
    if transfer and _sound(req.generate_sound, extra):
        raise value_error("generate_sound: Cosmos3 transfer does not generate sound; leave it out.",
                          param="generate_sound")
    uploads = Uploads(state.upload_dir, stem)
    try:
        reference = references.read_reference(files.get("input_reference"), req.image_reference,
                                              req.video_reference, uploads, limits)
        if transfer:
            inputs = references.inputs(form_fields, extra, reference, files.get("control_reference"), uploaded_kind,
                                       uploads, limits)
            return VideoTask(req, None, inputs, uploads)
        generation = (action_task.generation(req, prompt, negative, extra, reference, state) if action
                      else _generation(req, prompt, negative, extra, num_frames, reference, state))
        return VideoTask(req, generation, None, uploads)
    except BaseException:
        uploads.discard()
        raise


def frame_count(req: VideoRequest, limits: ServerLimits) -> int:
    """``num_frames``, else ``seconds x fps``, else one frame; rounded up to 4k+1 and held to the limit."""
    frames = req.num_frames
    if frames is None and req.seconds is not None:
        if len(req.seconds) > 9:
            raise value_error(f"seconds: {req.seconds[:12]}... is longer than any video this server makes "
                              f"(limit {limits.max_output_frames} frames)", param="seconds")
        frames = int(float(req.seconds) * (req.fps or vo.VIDEO_DEFAULTS["fps"]))
    frames = vo.round_up_frames(max(1, given(frames, vo.VIDEO_DEFAULTS["num_frames"])))
    if frames > limits.max_output_frames:
        raise value_error(f"num_frames {frames} is above the limit of {limits.max_output_frames} frames",
                          param="num_frames")
    return frames


def _generation(req: VideoRequest, prompt: str, negative: str, extra: dict[str, Any], num_frames: int,
                reference: Reference | None, state: ServerState) -> GenerationRequest:
    defaults = served_defaults(state.model, "video")
    mode = {None: "text2video", "image": "image2video", "video": "video2video"}[reference and reference.kind]
    explicit = req.size is not None or (req.width is not None and req.height is not None)
    if req.size is not None:  # ``size`` wins over ``width``/``height`` (both needed), then the reference's aspect
        width, height = parse_size(req.size)
    elif explicit:
        width, height = req.width, req.height
    else:
        width, height = vo.reference_size(*reference.size) if reference else (defaults["width"], defaults["height"])
    check_pixels(width, height, state.limits)
    sound = _sound(req.generate_sound, extra)
    image = reference.image if reference is not None else None
    if image is not None and (width, height) != image.size and explicit:
        image = image.resize((width, height), Image.LANCZOS)  # the serving layer stretches it to the size
    generate = mode
    if num_frames == 1:
        if mode != "text2video":
            raise value_error(f"num_frames: {mode} needs at least 5 frames here and got 1 (the server's default "
                              "when num_frames and seconds are omitted); send num_frames, e.g. 93 or 189.",
                              param="num_frames")
        if sound:
            raise value_error("num_frames: a 1-frame video cannot carry sound; send num_frames (e.g. 189).",
                              param="num_frames")
        generate = "text2image"  # one frame, made with the video settings and returned as a 1-frame MP4
    return GenerationRequest(**as_served(state.model, dict(
        mode=generate, width=width, height=height, num_frames=None if generate == "text2image" else num_frames,
        fps=req.fps or defaults["fps"], seed=given(req.seed, random.randint(0, vo.VIDEO_SEED_MAX)),
        flow_shift=given(_number(extra, "flow_shift"), given(req.flow_shift, defaults["flow_shift"])),
        sound=sound, image=image, video=reference.video if mode == "video2video" else None,
        **(dict(condition_frames=_condition_frames(extra.get("condition_frame_indexes_vision")),
                condition_video_keep=extra.get("condition_video_keep") or vo.GENERATION_EXTRA["condition_video_keep"])
           if mode == "video2video" else {}),
        **_shared(req, prompt, negative, extra, mode, defaults, state))))


def image_task(req: ImageRequest, state: ServerState) -> ImageTask:
    """The image body as one ``GenerationRequest`` (``n`` of them are run with seeds ``seed, seed+1, ...``)."""
    prompt, negative, extra = _checked(req, dict(req.extra_params or {}), state)
    if req.use_system_prompt is not None:  # the top-level field overrides extra_params (api_server.py:2153-2161)
        extra["use_system_prompt"] = req.use_system_prompt
    defaults = served_defaults(state.model, "image")
    width, height = parse_size(req.size) if req.size is not None else (defaults["width"], defaults["height"])
    check_pixels(width, height, state.limits)
    fmt = (req.output_format or "png").lower()
    request = GenerationRequest(**as_served(state.model, dict(
        mode="text2image", width=width, height=height,
        flow_shift=given(req.flow_shift, given(_number(extra, "flow_shift"), defaults["flow_shift"])),
        seed=given(req.seed, random.randint(0, vo.IMAGE_SEED_MAX)), sound=_sound(False, extra),
        **_shared(req, prompt, negative, extra, "text2image", defaults, state))))
    return ImageTask(req, request, fmt if fmt in vo.IMAGE_OUTPUT_FORMATS else "jpeg")


def parse_size(size: str) -> tuple[int, int]:
    """``"WxH"`` the way vLLM-Omni parses it (image_api_utils.py:33-66), its messages included."""
    parts = size.split("x")
    if len(parts) != 2:
        raise value_error(f"Invalid size format: '{size}'. Expected format: 'WIDTHxHEIGHT' (e.g., '1024x1024').",
                          param="size")
    try:
        width, height = int(parts[0]), int(parts[1])
    except ValueError:
        raise value_error(f"Invalid size format: '{size}'. Width and height must be integers.",
                          param="size") from None
    if width <= 0 or height <= 0:
        raise value_error(f"Invalid size: {width}x{height}. Width and height must be positive integers.",
                          param="size")
    return width, height


def served_defaults(model: str, kind: str) -> dict[str, Any]:
    """vLLM-Omni's defaults for what a request leaves out, for the served checkpoint (Edge has its own)."""
    values = dict(vo.IMAGE_DEFAULTS if kind == "image" else vo.VIDEO_DEFAULTS)
    if _EDGE_HUB in str(model).lower():
        edge = vo.EDGE_DEFAULTS
        values["width"], values["height"] = edge["image_size" if kind == "image" else "video_size"]
        if kind == "video":
            values.update(guidance_scale=edge["guidance_scale"], flow_shift=edge["flow_shift"])
    return values


def _checked(req: ImageRequest | VideoRequest, extra: dict[str, Any], state: ServerState
             ) -> tuple[str, str, dict[str, Any]]:
    """The served model, both prompts and ``extra_params`` checked: ``(prompt, negative_prompt, extra_params)``."""
    if req.model is not None and req.model != state.served_model_name:
        raise bad_request(f"Model mismatch: request specifies '{req.model}' but server is running "
                          f"'{state.served_model_name}'.", param="model")
    return (check_prompt(req.prompt, "prompt", state.limits),
            check_prompt(req.negative_prompt or "", "negative_prompt", state.limits), check_extra(extra, state.limits))


def check_prompt(value: str, name: str, limits: ServerLimits) -> str:
    """Length limit, and no JSON caption nested deep enough to exhaust the parser. A prompt is always text:
    one that looks like a file name is never read as a file."""
    if len(value) > limits.max_prompt_chars:
        raise value_error(f"{name} has {len(value)} characters, above the limit of {limits.max_prompt_chars}",
                          param=name)
    if value.lstrip().startswith("{"):
        try:
            too_deep = _too_deep(json.loads(value), limits.max_json_depth)
        except (RecursionError, ValueError) as exc:  # a ValueError: not JSON, so plain text
            too_deep = isinstance(exc, RecursionError)
        if too_deep:
            raise value_error(f"{name}: the JSON caption is nested deeper than {limits.max_json_depth} levels",
                              param=name)
    return value


def check_extra(extra: dict[str, Any], limits: ServerLimits) -> dict[str, Any]:
    """The values of ``extra_params`` the pipeline would reject (vLLM-Omni: a 500 from inside it), as 400s."""
    if _too_deep(extra, limits.max_json_depth):
        raise bad_request(f"Invalid JSON in form field 'extra_params': nested deeper than {limits.max_json_depth} "
                          "levels", param="extra_params")
    action_task.check(extra)
    for key, (test, what) in _EXTRA_RULES.items():
        if extra.get(key) is not None and not test(extra[key]):
            raise value_error(f"extra_params.{key} must be {what}, got {extra[key]!r}", param=f"extra_params.{key}")
    _condition_frames(extra.get("condition_frame_indexes_vision"))
    return extra


def check_pixels(width: int, height: int, limits: ServerLimits) -> None:
    if width * height > limits.max_output_pixels:
        raise value_error(f"size {width}x{height} is {width * height} pixels, above the limit of "
                          f"{limits.max_output_pixels}", param="size")


def _too_deep(value: object, limit: int) -> bool:
    """True when ``value`` nests deeper than ``limit`` (iterative: safe on any depth)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def _shared(req: ImageRequest | VideoRequest, prompt: str, negative: str, extra: dict[str, Any], mode: str,
            defaults: dict[str, Any], state: ServerState) -> dict[str, Any]:
    """What image and video requests set alike: prompts, model, steps, guidance (and its interval), guardrails, and
    the system prompt and sentence templates vLLM-Omni would use (bool() of the request's values). A JSON caption gets
    its metadata injected instead of the templates, on every backend."""
    structured = isinstance(parse_caption(prompt), dict)
    value = extra.get("guidance_interval")
    switches: dict[str, Any] = {
        "prompt": prompt, "negative_prompt": negative, "model": state.model,
        "num_inference_steps": given(req.num_inference_steps, defaults["num_inference_steps"]),
        "guidance_scale": given(req.guidance_scale, defaults["guidance_scale"]),
        "guidance_interval": defaults["guidance_interval"] if value is None else references.interval(
            value, "guidance_interval"),
        "guardrails": state.guardrails and bool(extra.get("guardrails", True)), "step_cache": state.step_cache,
        "use_system_prompt": bool(extra["use_system_prompt"]) if extra.get("use_system_prompt") is not None
        else vo.use_system_prompt_default(mode)}
    for key, name in (("use_resolution_template", "add_resolution_template"),
                      ("use_duration_template", "add_duration_template")):
        value = extra.get(key)
        switches[name] = False if structured else bool(value) if value is not None else vo.GENERATION_EXTRA[key]
    return switches


def _condition_frames(value: Any) -> tuple[int, ...]:
    if value is None:
        return tuple(vo.GENERATION_EXTRA["condition_frame_indexes_vision"])
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    with contextlib.suppress(ValueError):
        if isinstance(value, str):
            return tuple(int(part) for part in value.split(",") if part.strip())
    raise value_error(f"extra_params.condition_frame_indexes_vision: {value!r} is not an int, a list of ints or a "
                      "string like '0,1'", param="extra_params.condition_frame_indexes_vision")


def _sound(field: bool | None, extra: dict[str, Any]) -> bool:
    asked = (extra[key] for key in ("generate_sound", "sound_gen") if extra.get(key) is not None)
    return bool(next(asked, field))  # extra_params wins over the form field


def _number(extra: dict[str, Any], key: str) -> float | None:
    value = extra.get(key)
    return float(value) if _is_number(value) else None


def as_served(model: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``GenerationRequest`` fields for the served checkpoint: for a distilled one, its refusals raised and what it
    ignores dropped (so the distilled profile's fixed values apply)."""
    profile = next((p.name for p in PROFILES.values() if p.distilled and p.model == str(model)), None)
    if profile is None:
        return fields
    asked = "sound" if fields.get("sound") else fields["mode"]
    if asked in _DISTILLED_REFUSES:
        message = "Cosmos3 distilled checkpoints support only text-to-image and image-to-video generation; "
        raise value_error(message + _DISTILLED_REFUSES[asked], param="generate_sound" if asked == "sound" else None)
    return {**{k: v for k, v in fields.items() if k not in _DISTILLED_IGNORES}, "profile": profile}
