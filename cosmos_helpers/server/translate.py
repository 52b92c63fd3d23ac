"""From a validated request on the wire to the work the stand-in does: a ``GenerationRequest`` built with every
value vLLM-Omni 0.30.0 would use (its defaults for what the request leaves out, passed explicitly, for the
served model), or the inputs of a transfer for the server's ``transfer_runner``.

The rules are vLLM-Omni's (``shared/reference/vllm-omni-protocol.md`` §3, §4, §7; facts in
``protocol.vllm_omni``): ``extra_params`` overrides the video form's fields and is overridden by the image body's
top-level ones; Cosmos3 applies ``bool()`` to its switches (``"false"`` is true); omitted ``num_frames`` and
``seconds`` mean one frame; counts round up to 4k+1; text-to-image guides only for t in [400, 1000] unless the
request says otherwise; image2video / video2video without a size take the reference's aspect at 1280x720's
area. What the stand-in accepts but cannot reproduce, and where it answers differently, is listed in
:mod:`cosmos_helpers.server` (the package docstring).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import media
from ..prompts import parse_caption
from ..protocol import vllm_omni as vo
from ..request import GenerationRequest
from . import controls
from .errors import bad_request, value_error
from .limits import ServerLimits, json_depth_exceeds
from .references import Uploads, read_reference

if TYPE_CHECKING:
    from .models import ImageRequest, VideoRequest
    from .state import ServerState

TRANSFER_DISABLED = "transfer is not enabled on this server (start it with a transfer runner)"
ACTION_KEYS = ("action_mode", "action", "robot_obs", "observation", "domain_name", "domain_id")
_EDGE_HUB = "cosmos3-edge"


@dataclass
class VideoTask:
    """A parsed video POST: a generation or a transfer, the files it wrote, whether metrics were asked for."""

    request: VideoRequest
    generation: GenerationRequest | None
    transfer: controls.TransferInputs | None
    uploads: Uploads
    metrics: bool


@dataclass
class ImageTask:
    request: GenerationRequest
    n: int
    response_format: str
    output_format: str
    output_compression: int
    metrics: bool


# ---------------------------------------------------------------------------------------------- video


def video_task(req: VideoRequest, files: dict[str, bytes], form_fields: dict[str, str], state: ServerState,
               stem: str) -> VideoTask:
    """Check everything, read the media, and describe the work; nothing is left behind when it fails.

    ``form_fields`` are the text parts as sent (``control_type`` is read from them: it is a form field only)."""
    limits = state.limits
    check_model(req.model, state.served_model_name)
    prompt = check_prompt(req.prompt, "prompt", limits)
    negative = check_prompt(req.negative_prompt or "", "negative_prompt", limits)
    extra = check_extra(req.extra_params or {}, limits)
    if req.lora is not None and json_depth_exceeds(req.lora, limits.max_json_depth):
        raise bad_request(f"Invalid JSON in form field 'lora': nested deeper than {limits.max_json_depth} levels")
    num_frames = frame_count(req, limits)
    uploaded_kind = controls.control_type(form_fields.get("control_type"), "control_reference" in files, extra)
    transfer = controls.check(extra, uploaded_kind)
    if transfer and state.transfer_runner is None:
        raise value_error(TRANSFER_DISABLED)
    if transfer and _sound(req.generate_sound, extra):
        raise value_error("generate_sound: Cosmos3 transfer does not generate sound; leave it out.",
                          param="generate_sound")
    uploads = Uploads(state.upload_dir, stem)
    try:
        reference = read_reference(files.get("input_reference"), req.image_reference, req.video_reference, uploads,
                                   limits)
        if transfer:
            inputs = controls.inputs(form_fields, extra, reference, files.get("control_reference"), uploaded_kind,
                                     uploads, limits)
            return VideoTask(req, None, inputs, uploads, bool(req.return_stage_metrics))
        generation = _generation(req, prompt, negative, extra, num_frames, reference, state)
        return VideoTask(req, generation, None, uploads, bool(req.return_stage_metrics))
    except BaseException:
        uploads.discard()
        raise


def frame_count(req: VideoRequest, limits: ServerLimits) -> int:
    """``num_frames``, else ``seconds x fps``, else one frame; rounded up to 4k+1 and held to the limit."""
    if req.num_frames is not None:
        frames = req.num_frames
    elif req.seconds is not None:
        if len(req.seconds) > 9:
            raise value_error(f"seconds: {req.seconds[:12]}... is longer than any video this server makes "
                              f"(limit {limits.max_output_frames} frames)", param="seconds")
        frames = int(float(req.seconds) * (req.fps or vo.VIDEO_DEFAULTS["fps"]))
    else:
        frames = vo.VIDEO_DEFAULTS["num_frames"]
    frames = vo.round_up_frames(max(1, frames))
    if frames > limits.max_output_frames:
        raise value_error(f"num_frames {frames} is above the limit of {limits.max_output_frames} frames",
                          param="num_frames")
    return frames


def _generation(req: VideoRequest, prompt: str, negative: str, extra: dict[str, Any], num_frames: int,
                reference, state: ServerState) -> GenerationRequest:
    defaults = served_defaults(state.model, "video")
    mode = {None: "text2video", "image": "image2video", "video": "video2video"}[reference and reference.kind]
    width, height = _video_size(req, reference, defaults)
    check_pixels(width, height, state.limits)
    sound = _sound(req.generate_sound, extra)
    image = reference.image if reference is not None else None
    if image is not None and (width, height) != image.size and _explicit_size(req):
        from PIL import Image

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
    flow_shift = _number(extra, "flow_shift")
    return GenerationRequest(
        mode=generate, prompt=prompt, negative_prompt=negative, model=state.model, width=width, height=height,
        num_frames=None if generate == "text2image" else num_frames, fps=req.fps or defaults["fps"],
        num_inference_steps=_given(req.num_inference_steps, defaults["num_inference_steps"]),
        guidance_scale=_given(req.guidance_scale, defaults["guidance_scale"]),
        flow_shift=_given(flow_shift, _given(req.flow_shift, defaults["flow_shift"])),
        seed=_given(req.seed, random.randint(0, vo.VIDEO_SEED_MAX)), sound=sound, image=image,
        video=reference.video if mode == "video2video" else None,
        condition_frames=_condition_frames(extra.get("condition_frame_indexes_vision")),
        condition_video_keep=extra.get("condition_video_keep") or vo.GENERATION_EXTRA["condition_video_keep"],
        guidance_interval=_interval(extra, defaults["guidance_interval"]),
        guardrails=state.guardrails and bool(extra.get("guardrails", True)),
        **_prompt_switches(extra, prompt, mode))


def _explicit_size(req: VideoRequest) -> bool:
    return req.size is not None or (req.width is not None and req.height is not None)


def _video_size(req: VideoRequest, reference, defaults: dict[str, Any]) -> tuple[int, int]:
    """``size`` wins over ``width``/``height`` (both needed); else the reference's aspect; else the default."""
    if req.size is not None:
        width, height = (int(v) for v in req.size.split("x"))
        if width < 1 or height < 1:
            raise value_error(f"Invalid size: {req.size}. Width and height must be positive integers.",
                              param="size")
        return width, height
    if req.width is not None and req.height is not None:
        return req.width, req.height
    if reference is not None:
        if reference.kind == "image":
            return vo.reference_size(*reference.image.size)

        info = media.probe_video(reference.video)
        return vo.reference_size(int(info["width"]), int(info["height"]))
    return defaults["width"], defaults["height"]


# ---------------------------------------------------------------------------------------------- images


def image_task(req: ImageRequest, state: ServerState) -> ImageTask:
    """The image body as one ``GenerationRequest`` (``n`` of them are run with seeds ``seed, seed+1, ...``)."""
    limits = state.limits
    check_model(req.model, state.served_model_name)
    prompt = check_prompt(req.prompt, "prompt", limits)
    negative = check_prompt(req.negative_prompt or "", "negative_prompt", limits)
    extra = check_extra(dict(req.extra_params or {}), limits)
    if req.use_system_prompt is not None:  # the top-level field overrides extra_params (api_server.py:2153-2161)
        extra["use_system_prompt"] = req.use_system_prompt
    defaults = served_defaults(state.model, "image")
    width, height = parse_size(req.size) if req.size is not None else (defaults["width"], defaults["height"])
    check_pixels(width, height, limits)
    fmt = (req.output_format or "png").lower()
    request = GenerationRequest(
        mode="text2image", prompt=prompt, negative_prompt=negative, model=state.model, width=width, height=height,
        num_inference_steps=_given(req.num_inference_steps, defaults["num_inference_steps"]),
        guidance_scale=_given(req.guidance_scale, defaults["guidance_scale"]),
        flow_shift=_given(req.flow_shift, _given(_number(extra, "flow_shift"), defaults["flow_shift"])),
        seed=_given(req.seed, random.randint(0, vo.IMAGE_SEED_MAX)), sound=_sound(False, extra),
        guidance_interval=_interval(extra, defaults["guidance_interval"]),
        guardrails=state.guardrails and bool(extra.get("guardrails", True)),
        **_prompt_switches(extra, prompt, "text2image"))
    return ImageTask(request=request, n=req.n, response_format=req.response_format.value,
                     output_format=fmt if fmt in vo.IMAGE_OUTPUT_FORMATS else "jpeg",
                     output_compression=req.output_compression, metrics=bool(req.return_stage_metrics))


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


# ---------------------------------------------------------------------------------------------- shared


def served_defaults(model: str, kind: str) -> dict[str, Any]:
    """vLLM-Omni's defaults for what a request leaves out, for the served checkpoint (Edge has its own)."""
    values = dict(vo.IMAGE_DEFAULTS if kind == "image" else vo.VIDEO_DEFAULTS)
    if _EDGE_HUB in str(model).lower():
        edge = vo.EDGE_DEFAULTS
        values["width"], values["height"] = edge["image_size" if kind == "image" else "video_size"]
        if kind == "video":
            values.update(guidance_scale=edge["guidance_scale"], flow_shift=edge["flow_shift"])
    return values


def check_model(model: str | None, served: str) -> None:
    if model is not None and model != served:
        raise bad_request(f"Model mismatch: request specifies '{model}' but server is running '{served}'.",
                          param="model")


def check_prompt(value: str, name: str, limits: ServerLimits) -> str:
    """Length limit, and no JSON caption nested deep enough to exhaust the parser. A prompt is always text:
    one that looks like a file name is never read as a file."""
    if len(value) > limits.max_prompt_chars:
        raise value_error(f"{name} has {len(value)} characters, above the limit of {limits.max_prompt_chars}",
                          param=name)
    if value.lstrip().startswith("{"):
        try:
            too_deep = json_depth_exceeds(json.loads(value), limits.max_json_depth)
        except RecursionError:
            too_deep = True
        except ValueError:
            return value  # not JSON: plain text
        if too_deep:
            raise value_error(f"{name}: the JSON caption is nested deeper than {limits.max_json_depth} levels",
                              param=name)
    return value


def check_extra(extra: dict[str, Any], limits: ServerLimits) -> dict[str, Any]:
    """The values of ``extra_params`` the pipeline would reject (vLLM-Omni: a 500 from inside it), as 400s."""
    if json_depth_exceeds(extra, limits.max_json_depth):
        raise bad_request(f"Invalid JSON in form field 'extra_params': nested deeper than {limits.max_json_depth} "
                          "levels", param="extra_params")
    action = [key for key in ACTION_KEYS if key in extra]
    if action:
        raise value_error(f"extra_params.{action[0]}: action modes need an action checkpoint; this server's model "
                          "is not one.", param=f"extra_params.{action[0]}")
    mode = extra.get("negative_metadata_mode")
    if mode is not None and mode not in vo.NEGATIVE_METADATA_MODES:
        raise value_error(f"extra_params.negative_metadata_mode must be one of {', '.join(vo.NEGATIVE_METADATA_MODES)}"
                          f", got {mode!r}", param="extra_params.negative_metadata_mode")
    length = extra.get("max_sequence_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
        raise value_error(f"extra_params.max_sequence_length must be a positive integer, got {length!r}",
                          param="extra_params.max_sequence_length")
    keep = extra.get("condition_video_keep")
    if keep is not None and keep not in vo.REFERENCE_KEEP:
        raise value_error(f"extra_params.condition_video_keep must be 'first' or 'last', got {keep!r}",
                          param="extra_params.condition_video_keep")
    for key in ("sound_duration", "audio_duration", "flow_shift"):
        value = extra.get(key)
        if value is not None and not (_is_number(value) and (key == "flow_shift" or value > 0)):
            raise value_error(f"extra_params.{key} must be a number{' above 0' if key != 'flow_shift' else ''}, "
                              f"got {value!r}", param=f"extra_params.{key}")
    _condition_frames(extra.get("condition_frame_indexes_vision"))
    return extra


def check_pixels(width: int, height: int, limits: ServerLimits) -> None:
    if width * height > limits.max_output_pixels:
        raise value_error(f"size {width}x{height} is {width * height} pixels, above the limit of "
                          f"{limits.max_output_pixels}", param="size")


def _prompt_switches(extra: dict[str, Any], prompt: str, mode: str) -> dict[str, Any]:
    """The system prompt and sentence templates vLLM-Omni would use (bool() of the request's values). A JSON
    caption gets its metadata injected instead of the templates, on every backend."""
    structured = isinstance(parse_caption(prompt), dict)
    switches: dict[str, Any] = {"use_system_prompt": bool(extra["use_system_prompt"])
                                if extra.get("use_system_prompt") is not None else vo.use_system_prompt_default(mode)}
    for key, name in (("use_resolution_template", "add_resolution_template"),
                      ("use_duration_template", "add_duration_template")):
        value = extra.get(key)
        switches[name] = False if structured else bool(value) if value is not None else vo.GENERATION_EXTRA[key]
    return switches


def _interval(extra: dict[str, Any], default: tuple[float, float] | None) -> tuple[float, float] | None:
    value = extra.get("guidance_interval")
    if value is None:
        return default
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise value_error(f"extra_params.guidance_interval must be [lo, hi] timesteps, got {value!r}",
                          param="extra_params.guidance_interval") from None
    return lo, hi


def _condition_frames(value: Any) -> tuple[int, ...]:
    if value is None:
        return tuple(vo.GENERATION_EXTRA["condition_frame_indexes_vision"])
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    try:
        if isinstance(value, str):
            return tuple(int(part) for part in value.split(",") if part.strip())
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
    except ValueError:
        pass
    raise value_error(f"extra_params.condition_frame_indexes_vision: {value!r} is not an int, a list of ints or a "
                      "string like '0,1'", param="extra_params.condition_frame_indexes_vision")


def _sound(field: bool | None, extra: dict[str, Any]) -> bool:
    for key in ("generate_sound", "sound_gen"):  # extra_params wins over the form field
        if extra.get(key) is not None:
            return bool(extra[key])
    return bool(field)


def _number(extra: dict[str, Any], key: str) -> float | None:
    value = extra.get(key)
    return float(value) if _is_number(value) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value
