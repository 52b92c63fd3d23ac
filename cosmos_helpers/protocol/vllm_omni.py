"""vLLM-Omni 0.30.0's HTTP protocol for Cosmos3 (routes, fields, the pipeline's defaults, tiers, errors, jobs), for
the client and the stand-in. Paths are inside ``vllm_omni/`` of the wheel (``shared/reference/vllm-omni-protocol.md``
explains each); ``tests/contracts/`` checks these tables, the client's requests and the stand-in against the wheel.
"""

from __future__ import annotations

import math
import re
from http import HTTPStatus
from types import MappingProxyType
from typing import Any, Mapping

from . import framework
# The server rounds a video's frame count up to 4k+1 (24 -> 25) as the framework does (pipeline_cosmos3.py:210-216
# `_ceil_video_num_frames`, applied at :3848).
from .framework import round_up_frames  # noqa: F401
from .step_cache import VLLM_CACHE_BACKEND_FLAG, VLLM_CACHE_CONFIG_FLAG

VERSION = "0.30.0"

# entrypoints/openai/api_server.py
HEALTH, MODELS = "/health", "/v1/models"
IMAGES = "/v1/images/generations"
VIDEOS_SYNC, VIDEOS = "/v1/videos/sync", "/v1/videos"
JOB_STATUSES: tuple[str, ...] = ("queued", "in_progress", "completed", "failed")  # protocol/videos.py
JOB_ID = re.compile(r"^video_gen_[0-9a-f]{32}$")
SYNC_TIMEOUT_S = 600.0  # VLLM_OMNI_VIDEO_SYNC_TIMEOUT; it counts time spent queued
GUARDRAIL_MESSAGE = "Input was blocked by Cosmos3 guardrails."  # diffusion/models/cosmos3/guardrails.py:89-95
# pipeline_cosmos3.py:1959-1973 `_validate_edge_generation_mode`: the Edge checkpoint (published under this hub
# id) refuses sound, video2video and transfer requests with a ValueError, after the request was queued.
EDGE_MODEL = "nvidia/Cosmos3-Edge"
EDGE_REFUSES: tuple[str, ...] = ("sound", "video2video", "transfer")
# ``vllm serve <model> --omni``: the Cosmos3 pipeline class (diffusion/models/cosmos3/pipeline_cosmos3.py:881) and
# the flags this project prints. entrypoints/cli/serve.py: --omni :336, --init-timeout :440, --model-class-name
# :546, --ulysses-degree :654, --enable-layerwise-offload :879, --cfg-parallel-size :984, --no-guardrails :1054;
# --port, --tensor-parallel-size, --served-model-name and --api-key are vLLM's own serve flags.
# (--allowed-local-media-path is accepted too but read only by the chat/speech handlers: no use for Cosmos3.)
PIPELINE_CLASS = "Cosmos3OmniDiffusersPipeline"
SERVE_FLAGS: tuple[str, ...] = ("--omni", "--model-class-name", "--port", "--init-timeout", "--tensor-parallel-size",
                                "--cfg-parallel-size", "--ulysses-degree", "--enable-layerwise-offload",
                                "--served-model-name", "--no-guardrails", "--api-key",
                                VLLM_CACHE_BACKEND_FLAG, VLLM_CACHE_CONFIG_FLAG)  # step caching: protocol.step_cache

# The fields of protocol/images.py ImageGenerationRequest this project sends (it ignores unknown keys).
IMAGE_FIELDS: tuple[str, ...] = ("prompt", "model", "n", "size", "response_format", "negative_prompt",
                                 "num_inference_steps", "guidance_scale", "flow_shift", "extra_params", "seed",
                                 "output_format", "output_compression", "return_stage_metrics")
IMAGE_RESPONSE_FORMATS: tuple[str, ...] = ("b64_json", "file")
IMAGE_OUTPUT_FORMATS: tuple[str, ...] = ("png", "jpeg", "jpg", "webp")  # anything else silently becomes jpeg
# The multipart fields of entrypoints/openai/video/generation/helpers.py _parse_video_form this project uses.
VIDEO_FIELDS: tuple[str, ...] = ("prompt", "model", "size", "width", "height", "num_frames", "seconds", "fps",
                                 "negative_prompt", "num_inference_steps", "guidance_scale", "flow_shift", "seed",
                                 "generate_sound", "sound_duration", "quality", "extra_params", "lora",
                                 "return_stage_metrics", "image_reference", "video_reference", "control_type")
VIDEO_FILES: tuple[str, ...] = ("input_reference", "control_reference")
SIZE_PATTERN = re.compile(r"^\d+x\d+$")
SECONDS_PATTERN = re.compile(r"^[1-9]\d*$")
QUALITY_LEVELS: tuple[str, ...] = ("lossless", "high")  # inputs/data.py DIFFUSION_QUALITY_LEVELS
LIMITS: Mapping[str, tuple[float, float]] = MappingProxyType({  # (min, max) of the pydantic request models
    "n": (1, 10), "num_inference_steps": (1, 200), "guidance_scale": (0.0, 20.0), "output_compression": (0, 100)})
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # protocol/videos.py:24-25: bounds of seed, sizes and frame counts
# protocol/images.py:121-134: the image route's top-level ``use_system_prompt`` is one of these strings (or null);
# Cosmos3 then applies bool() to it, so any of them turns the system prompt on.
USE_SYSTEM_PROMPT_TYPES: tuple[str, ...] = ("dynamic", "en_vanilla", "en_recaption", "en_think_recaption",
                                            "en_unified", "custom")
IMAGE_SEED_MAX = 2**32 - 1  # entrypoints/openai/diffusion.py:19 MAX_UINT32_SEED: an omitted image seed is drawn here
VIDEO_SEED_MAX = 2**31 - 1  # an omitted video seed is drawn by the engine in [0, 2**31 - 1] (reference doc §4)
# serving_video.py:533 video_codec_options and diffusion/utils/media_utils.py:93 crf: how the MP4 is encoded.
VIDEO_ENCODER: Mapping[str, Any] = MappingProxyType({"codec": "libx264", "preset": "ultrafast", "crf": 18})
# pipeline_cosmos3.py:621-625: image2video / video2video without a size take the reference's aspect at this area.
REFERENCE_MAX_AREA = 1280 * 720

# diffusion/models/cosmos3/utils.py VIDEO_RES_SIZE_INFO: the tiers of ``resolution`` (transfer, action); any
# other tier is "Unknown Cosmos3 ... resolution". Same sizes as the framework's for these tiers.
TIERS: tuple[str, ...] = ("256", "480", "704", "720")
SIZES: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType({t: framework.SIZES[t] for t in TIERS})

# ---------------------------------------------------------------------------------------------- defaults

# pipeline_cosmos3.py COSMOS3_* constants: what the server uses for a field the request leaves out.
IMAGE_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "width": 1024, "height": 1024, "num_inference_steps": 50, "guidance_scale": 7.0, "flow_shift": 3.0,
    "guidance_interval": (400.0, 1000.0)})
VIDEO_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "width": 1280, "height": 720, "num_inference_steps": 35, "guidance_scale": 6.0, "flow_shift": 10.0,
    "guidance_interval": None, "fps": 24.0,
    # The generic sampling default wins over Cosmos3's 189 when neither num_frames nor seconds is sent
    # (inputs/data.py:254): the server makes a one-frame "video".
    "num_frames": 1})
EDGE_DEFAULTS: Mapping[str, Any] = MappingProxyType({  # Cosmos3-Edge checkpoints
    "image_size": (640, 640), "video_size": (832, 480), "guidance_scale": 5.0, "flow_shift": 3.0})
MAX_SEQUENCE_LENGTH = 4096
NEGATIVE_METADATA_MODES: tuple[str, ...] = ("none", "same", "inverse")

# Keys of ``extra_params`` the Cosmos3 pipeline reads for generation (pipeline_cosmos3.py _get_sp_param and
# model_extras/cosmos3.py), with the default the pipeline uses when a key is absent.
GENERATION_EXTRA: Mapping[str, Any] = MappingProxyType({
    "use_system_prompt": False,  # True for video2video (``is_v2v``)
    "use_resolution_template": False,
    "use_duration_template": False,
    "negative_metadata_mode": "inverse",
    "guidance_interval": None,  # text2image: IMAGE_DEFAULTS["guidance_interval"]
    "guardrails": True,  # when the server loaded them
    "flow_shift": None,  # the top-level field's value
    "max_sequence_length": MAX_SEQUENCE_LENGTH,
    "system_prompt": None,
    "condition_frame_indexes_vision": (0, 1),
    "condition_video_keep": "first",
    "generate_sound": False,
    "sound_duration": None,
    "aspect_ratio": None,
})
REFERENCE_KEEP: tuple[str, ...] = ("first", "last")

# Transfer (diffusion/models/cosmos3/transfer.py): a hint in ``extra_params`` makes a request a transfer.
HINT_KINDS: tuple[str, ...] = framework.HINT_KINDS
HINT_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    kind: ("control_path", "control", "control_weight") + (
        (framework.PRESET_FIELDS[kind],) if kind in framework.PRESET_FIELDS else ())
    for kind in framework.HINT_KINDS})
EDGE_PRESETS: tuple[str, ...] = ("none",) + framework.EDGE_PRESETS  # "none" is accepted here, not by the framework
BLUR_PRESETS: tuple[str, ...] = framework.BLUR_PRESETS
PRESET_CHOICES: Mapping[str, tuple[str, ...]] = MappingProxyType({  # a hint's preset field -> the values it takes
    framework.PRESET_FIELDS["edge"]: EDGE_PRESETS, framework.PRESET_FIELDS["blur"]: BLUR_PRESETS})
COMPUTABLE_HINTS: tuple[str, ...] = framework.COMPUTABLE_HINTS  # ``true`` (no control): computed from the RGB input
# cosmos3/transfer.py:632-661 ``load_or_compute_control_frames``: depth and seg come only from ``control`` or
# ``control_path`` (else "requires a precomputed control_path"), read as 3-channel RGB uint8 (:535-565), resized
# bilinearly to cover the bucket and centre-cropped (:520-532), then x / 127.5 - 1 (:436-439): the framework's picture
# (``framework.ESTIMATED_HINTS``).
TRANSFER_SAMPLE_DEFAULTS: Mapping[str, Any] = framework.TRANSFER_SAMPLE_DEFAULTS
TRANSFER_EXTRA: Mapping[str, Any] = MappingProxyType({  # transfer keys beyond the hints, with their defaults
    "control_guidance": 1.0, "control_guidance_interval": None, **framework.TRANSFER_SAMPLE_DEFAULTS,
    "resolution": "720", "guidance_scale": None, "flow_shift": None, "fps": None, "num_frames": None,
    "use_resolution_template": True, "use_duration_template": True, "negative_metadata_mode": "same"})
# cosmos3/transfer.py:238-252: these keys without any hint are an error ("transfer options were provided, but no
# transfer hint was selected"); ``resolution``/``image_size`` are not among them (action requests read them too).
TRANSFER_ONLY: tuple[str, ...] = ("control_guidance", "control_guidance_interval") + tuple(
    framework.TRANSFER_SAMPLE_DEFAULTS)
# Tuned defaults for a single hint, in the server's field names.
HINT_TUNED_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    kind: MappingProxyType({({"guidance": "guidance_scale", "shift": "flow_shift"}).get(k, k): v
                            for k, v in tuned.items()})
    for kind, tuned in framework.HINT_TUNED_DEFAULTS.items()})


def use_system_prompt_default(mode: str) -> bool:
    """The pipeline's ``use_system_prompt`` when a request leaves it out: only video2video turns it on."""
    return mode == "video2video"


def reference_size(width: int, height: int) -> tuple[int, int]:
    """``(W, H)`` of an image2video / video2video request without a size: the reference's aspect at
    ``REFERENCE_MAX_AREA`` pixels, each side rounded down to a multiple of 16 (pipeline_cosmos3.py:621-625)."""
    aspect = height / width
    out_h = round(math.sqrt(REFERENCE_MAX_AREA * aspect)) // 16 * 16
    out_w = round(math.sqrt(REFERENCE_MAX_AREA / aspect)) // 16 * 16
    return out_w, out_h


def closest_bucket(width: int, height: int, tier: str) -> tuple[int, int]:
    """The bucket of ``tier`` nearest to an input's shape, by absolute difference of H/W (cosmos3/action.py)."""
    return min(SIZES[tier].values(), key=lambda size: abs(height / width - size[1] / size[0]))


# ---------------------------------------------------------------------------------------------- errors


def error_body(status: int, message: str, *, type: str | None = None, param: str | None = None) -> dict:
    """vLLM's error envelope. Validation failures are 400 (never 422) with ``type`` "Bad Request"."""
    return {"error": {"message": message, "type": type or HTTPStatus(status).phrase, "param": param,
                      "code": status}}


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """``("N validation error(s):\\n  body.field: msg", "body.field")`` from pydantic's error list."""
    lines = [f"  {'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors]
    param = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else None
    noun = "error" if len(errors) == 1 else "errors"
    return f"{len(errors)} validation {noun}:\n" + "\n".join(lines), param
