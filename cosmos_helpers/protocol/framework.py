"""The Cosmos Framework's facts, as of NVIDIA/cosmos-framework 5eee9ed: input files (``-i``) and their meaning,
per-mode defaults, model configs, command line, output layout. Paths are inside ``cosmos_framework/``;
``tests/contracts/`` checks every table against the real code (``scripts/refresh_contracts.py``), so a new framework
version shows up as a failing test, not as a silently different run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

VERSION = "5eee9ed"
MODULE = "cosmos_framework.scripts.inference"

# inference/args.py ModelMode. Action and reasoner modes are the framework's; this project runs the first six.
MODEL_MODES: tuple[str, ...] = ("text2image", "text2video", "image2image", "image2video", "video2video",
                                "audio_image2video", "forward_dynamics", "inverse_dynamics", "wam", "reasoner")
TIERS: tuple[str, ...] = ("256", "480", "704", "720", "768")  # the ``resolution`` enum of a sample
ASPECT_RATIOS: tuple[str, ...] = ("1,1", "4,3", "3,4", "16,9", "9,16")
# data/generator/utils.py VIDEO_RES_SIZE_INFO for the tiers above: (width, height).
SIZES: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType({
    "256": {"1,1": (256, 256), "4,3": (320, 256), "3,4": (256, 320), "16,9": (320, 192), "9,16": (192, 320)},
    "480": {"1,1": (640, 640), "4,3": (736, 544), "3,4": (544, 736), "16,9": (832, 480), "9,16": (480, 832)},
    "704": {"1,1": (960, 960), "4,3": (1088, 832), "3,4": (832, 1088), "16,9": (1280, 704), "9,16": (704, 1280)},
    "720": {"1,1": (960, 960), "4,3": (1104, 832), "3,4": (832, 1104), "16,9": (1280, 720), "9,16": (720, 1280)},
    "768": {"1,1": (1024, 1024), "4,3": (1184, 880), "3,4": (880, 1184), "16,9": (1360, 768), "9,16": (768, 1360)},
})
# inference/defaults/<mode>/sample_args.json, the fields that decide what is generated. Video modes take their
# negative prompt from defaults/neg_prompts.json (a structured negative caption shipped with the framework).
NEGATIVE_PROMPT_FILE = "neg_prompts.json"
_VIDEO = {"num_steps": 35, "guidance": 6.0, "shift": 10.0, "aspect_ratio": "16,9", "fps": 24, "num_frames": 189,
          "negative_prompt_file": NEGATIVE_PROMPT_FILE}
_ACTION = {"num_steps": 30, "guidance": 1.0, "shift": 10.0, "aspect_ratio": "16,9", "fps": 24, "num_frames": 189,
           "negative_prompt": "", "action_chunk_size": 16, "image_size": 256, "domain_name": ""}
MODE_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "text2image": MappingProxyType({"num_steps": 50, "guidance": 4.0, "shift": 3.0, "aspect_ratio": "1,1", "fps": 24,
                                    "num_frames": 1, "negative_prompt": ""}),
    "image2image": MappingProxyType({"num_steps": 35, "guidance": 6.0, "shift": 5.0, "fps": 24,
                                     "negative_prompt": ""}),
    **{mode: MappingProxyType(_VIDEO) for mode in ("text2video", "image2video", "video2video")},
    "audio_image2video": MappingProxyType({**_VIDEO, "enable_sound": True}),
    **{mode: MappingProxyType(_ACTION) for mode in ("forward_dynamics", "inverse_dynamics", "wam")},
})
# Shared by every generation mode's defaults file (the resolution sentence says "image" for image modes).
PROMPT_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "sigma_max": 80.0,
    "normalize_cfg": False,
    "duration_template": "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS.",
    "inverse_duration_template": "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS.",
    "inverse_resolution_template": "This video is not of {height}x{width} resolution.",
    "negative_metadata_mode": "none",
    "negative_prompt_keep_metadata": True,
    "video_save_quality": 10,
    "image_save_quality": 95,
})
RESOLUTION_TEMPLATES: Mapping[str, str] = MappingProxyType({
    "image": "This image is of {height}x{width} resolution.",
    "video": "This video is of {height}x{width} resolution.",
})

# inference/configs/model/<name>.yaml and args.py _NUM_FRAMES_DEFAULTS / _CHECKPOINTS.
MODEL_CONFIGS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    name: MappingProxyType({"hub": f"nvidia/{name}", "resolution": resolution, "use_system_prompt": False, **more})
    for name, resolution, more in (("Cosmos3-Nano", "720", {}), ("Cosmos3-Super", "720", {}),
                                   ("Cosmos3-Edge", "480", {"num_frames": 121}))})
DEFAULT_CHECKPOINT = "Cosmos3-Nano"  # args.py:1281 DEFAULT_CHECKPOINT_NAME: the model of a run that names none
CHECKPOINTS: Mapping[str, str] = MappingProxyType({  # hub repository -> --checkpoint-path name
    f"nvidia/{name}": name for name in (
        "Cosmos3-Nano", "Cosmos3-Super", "Cosmos3-Edge", "Cosmos3-Super-Image2Video", "Cosmos3-Super-Image2Video-4Step",
        "Cosmos3-Super-Text2Image", "Cosmos3-Super-Text2Image-4Step")})

# ---------------------------------------------------------------------------------------------- input files

# Every field of args.py OmniSampleOverrides (any other key is rejected), grouped by what it is about.
SAMPLE_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "sample": ("name", "model", "extra", "seed", "num_outputs", "output_dir", "tensors_file", "pickle_file",
               "defaults_file", "model_mode"),
    "text": ("prompt", "prompt_path", "negative_prompt", "negative_prompt_file", "duration_template",
             "resolution_template", "negative_metadata_mode", "inverse_duration_template",
             "inverse_resolution_template", "negative_prompt_keep_metadata"),
    "vision": ("vision_path", "condition_frame_indexes_vision", "condition_video_keep", "resolution", "aspect_ratio",
               "fps", "num_frames", "video_save_quality", "image_save_quality"),
    "sampling": ("num_steps", "guidance", "guidance_interval", "normalize_cfg", "shift", "sigma_max"),
    "sound": ("enable_sound", "sound_path"),
    "transfer": ("control_guidance", "control_guidance_interval", "edge", "blur", "depth", "seg", "wsm",
                 "num_video_frames_per_chunk", "num_conditional_frames", "max_frames", "show_control_condition",
                 "show_input", "num_first_chunk_conditional_frames", "share_vision_temporal_positions",
                 "emphasize_control_in_prompt"),
    "action": ("action_path", "domain_name", "image_size", "action_chunk_size", "raw_action_dim", "view_point"),
    "reasoner": ("max_new_tokens", "do_sample", "temperature", "top_k", "top_p", "repetition_penalty",
                 "presence_penalty", "video_fps"),
    "upsampling": ("prompt_upsampling", "prompt_upsampler_max_tokens", "prompt_upsampler_temperature",
                   "prompt_upsampler_top_p", "prompt_upsampler_top_k", "prompt_upsampler_repetition_penalty",
                   "prompt_upsampler_presence_penalty", "prompt_upsampler_seed"),
})
ALL_FIELDS: frozenset[str] = frozenset(name for group in SAMPLE_FIELDS.values() for name in group)
PATH_FIELDS: tuple[str, ...] = ("prompt_path", "negative_prompt_file", "vision_path", "sound_path", "action_path",
                                "tensors_file", "pickle_file", "defaults_file")
IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".webp")  # inference/common/args.py
VIDEO_EXTENSIONS: tuple[str, ...] = (".mp4",)

# Transfer (args.py TransferDataOverrides and its class-level defaults).
HINT_KINDS: tuple[str, ...] = ("edge", "blur", "depth", "seg", "wsm")
COMPUTABLE_HINTS: tuple[str, ...] = ("edge", "blur")  # computed from the RGB video when no control_path is given
PRESET_FIELDS: Mapping[str, str] = MappingProxyType({"edge": "preset_edge_threshold", "blur": "preset_blur_strength"})
EDGE_PRESETS: tuple[str, ...] = ("very_low", "low", "medium", "high", "very_high")
BLUR_PRESETS: tuple[str, ...] = ("none", "very_low", "low", "medium", "high", "very_high")
HINT_FIELDS: tuple[str, ...] = ("control_path", "weight")  # plus the hint's preset field
TRANSFER_SAMPLE_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_video_frames_per_chunk": 93, "num_conditional_frames": 1, "max_frames": 5000,
    "show_control_condition": False, "show_input": False, "num_first_chunk_conditional_frames": 0,
    "share_vision_temporal_positions": True, "emphasize_control_in_prompt": True,
})
# Applied only with exactly one hint, to the fields the input does not set.
_TUNED = MappingProxyType({"guidance": 3.0, "control_guidance": 1.5, "shift": 10.0})
HINT_TUNED_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "edge": _TUNED, "blur": _TUNED, "depth": _TUNED, "seg": MappingProxyType({**_TUNED, "control_guidance": 2.0}),
    "wsm": MappingProxyType({"guidance": 1.0, "control_guidance": 3.0, "shift": 10.0, "num_frames": 101, "fps": 10,
                             "num_video_frames_per_chunk": 101}),
})
# The edge and blur maps the framework computes from RGB (data/generator/augmentors/transfer_control_input/):
# Canny thresholds per edge preset (control_input.py:94-104); per blur preset (k, f): the downscale before the
# bilateral filter and the final cubic down-up factor (control_input.py:149-165, down-up factors 4..16); the
# bilateral filter's parameters at the 720 px reference side, scaled to the frame (blur.py:21-23, 41, 130-134).
EDGE_THRESHOLDS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"very_low": (20, 50), "low": (50, 100), "medium": (100, 200), "high": (200, 300), "very_high": (300, 400)})
BLUR_FACTORS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"very_low": (1, 4), "low": (4, 4), "medium": (2, 10), "high": (1, 16), "very_high": (4, 16)})
BILATERAL: Mapping[str, float] = MappingProxyType(
    {"reference_side": 720, "d": 30, "sigma_color": 150.0, "sigma_space": 100.0})
# args.py:847-850 ``_TRANSFER_HINT_DEFAULTS``: the preset of an edge / blur hint that names none.
HINT_PRESET_DEFAULTS: Mapping[str, str] = MappingProxyType({"edge": "medium", "blur": "medium"})
TRANSFER_MODES: tuple[str, ...] = ("text2video", "image2video", "video2video")
# TransferDataOverrides fields that need a hint: any of them set without one is "transfer inference requires at
# least one control hint" (args.py:800-820; ``control_guidance`` only when it is not 1.0).
TRANSFER_ONLY_FIELDS: tuple[str, ...] = (
    "control_guidance_interval", "negative_prompt_file", "num_video_frames_per_chunk", "num_conditional_frames",
    "max_frames", "show_control_condition", "show_input", "num_first_chunk_conditional_frames",
    "share_vision_temporal_positions", "emphasize_control_in_prompt")

# What a sample gets when neither it nor its mode's defaults set these: common/args.py:1024-1025 (num_outputs),
# args.py:521-522 (condition_video_keep), :556 (enable_sound), :747 (control_guidance).
SAMPLE_FALLBACKS: Mapping[str, Any] = MappingProxyType({
    "num_outputs": 1, "condition_video_keep": "first", "enable_sound": False, "control_guidance": 1.0})
# args.py ``_IMAGE_OUTPUT_MODES`` (one frame, saved as vision.jpg), ``ACTION_MODEL_MODES``, ``REASONER_MODEL_MODES``
# and ``SOUND_CONDITION_MODEL_MODES`` (a sound_path is required and enable_sound is forced on).
IMAGE_MODES: tuple[str, ...] = ("text2image", "image2image")
ACTION_MODES: tuple[str, ...] = ("forward_dynamics", "inverse_dynamics", "wam")
REASONER_MODES: tuple[str, ...] = ("reasoner",)
SOUND_CONDITION_MODES: tuple[str, ...] = ("audio_image2video",)
# args.py ``DEFAULT_CONDITION_FRAME_INDEXES_VISION``: latent frames kept clean, by the kind of vision input.
CONDITION_FRAMES: Mapping[str, tuple[int, ...]] = MappingProxyType({"image": (0,), "video": (0, 1)})
TEMPORAL_COMPRESSION = 4  # the Wan2.2 VAE's; args.py ``_build_vision_data`` rounds video frames up to 4k+1
IMAGE_FPS = 1.0  # inference/vision.py ``read_media_frames``: a still image is one frame at 1 fps

# common/args.py ``_resolve_file_or_url``: these prefixes are URLs, anything else a local file that must exist.
URL_PREFIXES: tuple[str, ...] = ("http://", "https://", "s3://")
# The name each downloaded input gets (``download_file(url, output_dir, <name>)`` in args.py:285, 491, 572, 619).
DOWNLOAD_NAMES: Mapping[str, str] = MappingProxyType({
    "vision_path": "vision", "sound_path": "sound", "action_path": "action", "control_path": "transfer_control"})
# common/args.py ``_from_file``: the input file kinds ``-i`` reads (this project reads the JSON ones).
INPUT_SUFFIXES: tuple[str, ...] = (".json", ".jsonl")
CONTROL_DIRECTIVE = (
    "Follow the {hints} control video precisely: shape, contour, silhouette, position, and motion of every "
    "visible structure must align with the {hints} signal at every frame."
)

# ---------------------------------------------------------------------------------------------- running

# Flags of ``python -m cosmos_framework.scripts.inference`` this project passes (all appear in its --help).
CLI_FLAGS: Mapping[str, str] = MappingProxyType({
    "input": "-i", "output": "-o", "checkpoint": "--checkpoint-path", "seed": "--seed",
    "parallelism": "--parallelism-preset", "guardrails": "--guardrails", "no_guardrails": "--no-guardrails",
    # sample fields as flags: the framework merges them over every sample of -i (scripts/inference.py:44-46)
    "resolution": "--resolution", "num_steps": "--num-steps",
})
PARALLELISM_PRESETS: tuple[str, ...] = ("latency", "throughput")
GUARDRAILS_DEFAULT = True  # common/args.py:850 GuardrailOverrides.guardrails
SEED_MAX = 2**31 - 1  # inference.py:282: a sample without a seed gets a 31-bit one
CONTROL_FILE = "control_{hint}{suffix}"
DOWNLOAD_CACHE_ENV = "COSMOS_DOWNLOAD_CACHE_DIR"
# inference.py:1800-1806: each sample's record (an action sample's predicted actions: outputs[0].content.action).
SAMPLE_OUTPUTS = "sample_outputs.json"
# The JSON schema of ``OmniSampleOverrides`` (inference/args.py) that validates every input file, written by
# ``scripts/refresh_contracts.py --framework CHECKOUT`` from the real model; shipped for the framework stand-in.
SAMPLE_SCHEMA_FILE = f"framework_sample_schema-{VERSION}.json"


def sample_overrides_schema() -> dict[str, Any]:
    """The framework's sample JSON schema (a fresh copy: callers may change theirs)."""
    return json.loads(resources.files(__package__).joinpath("data", SAMPLE_SCHEMA_FILE).read_text(encoding="utf-8"))


def vision_file(num_frames: int) -> str:
    """``<out>/<name>/`` holds this file: ``vision.jpg`` for one frame, else ``vision.mp4`` (args.py:437)."""
    return "vision.jpg" if num_frames == 1 else "vision.mp4"


def detect_aspect_ratio(width: int, height: int) -> str:
    """The framework's aspect detection (inference/vision.py): nearest ratio by squared difference of W/H."""
    ratios = {"16,9": 16 / 9, "4,3": 4 / 3, "1,1": 1.0, "3,4": 3 / 4, "9,16": 9 / 16}
    return min(ratios, key=lambda name: (ratios[name] - width / height) ** 2)


def is_url(value: str) -> bool:
    return str(value).startswith(URL_PREFIXES)


def round_up_frames(num_frames: int) -> int:
    """A video's frame count as the framework runs it: rounded *up* to 4k+1 (args.py ``_build_vision_data``)."""
    n, k = int(num_frames), TEMPORAL_COMPRESSION
    return n if n <= 1 else math.ceil((n - 1) / k) * k + 1


def video_crf(video_save_quality: int) -> int:
    """The H.264 CRF ``vision.mp4`` is written at: tools/visualize/video.py:97 passes ``video_save_quality`` to
    easy_io's imageio handler (imageio_video_handler.py:177) as imageio's ``quality``, which imageio-ffmpeg 0.8.1
    (_io.py:540-545) turns into ``-crf int((1 - q/10) * 51)``: the default 10 is CRF 0 (lossless)."""
    return int((1 - int(video_save_quality) / 10.0) * 51)


def to_strict(interval: tuple[float, float] | list[float]) -> tuple[float, float]:
    """An inclusive ``[lo, hi]`` (diffusers and vLLM-Omni: guidance iff ``lo <= t <= hi``) as the framework's
    interval holding the same timesteps: the framework guides iff ``lo < t < hi`` (model/generator/
    omni_mot_model.py:3325, inference/transfer.py:345), so each bound moves one float outwards. Exact for every
    ``t`` but ``t == 0`` with ``lo == 0``: the framework's bounds are non-negative (args.py:81), so that ``lo``
    stays 0 (no sampler step runs at ``t == 0``)."""
    lo, hi = float(interval[0]), float(interval[1])
    return (math.nextafter(lo, -math.inf) if lo > 0 else 0.0, math.nextafter(hi, math.inf))


def to_inclusive(interval: tuple[float, float] | list[float]) -> tuple[float, float]:
    """The framework's strict ``(lo, hi)`` as the inclusive interval holding the same timesteps (each bound one
    float inwards): the inverse of :func:`to_strict`."""
    lo, hi = float(interval[0]), float(interval[1])
    return math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf)


def default_name(input_file: str | os.PathLike[str], index: int) -> str:
    """A sample's ``name`` when it has none: the file's stem, ``<stem>_<line>`` in a JSONL file (args.py:1000-1012)."""
    path = Path(input_file)
    return f"{path.stem}_{index}" if path.suffix.lower() == ".jsonl" else path.stem


def fallback_seed(name: str, output_dir: str | os.PathLike[str]) -> int:
    """The seed of a sample without one: derived from its name and output folder (inference.py ``_fallback_seed``).
    ``output_dir`` is ``<-o>/<name>``, where the framework writes the sample."""
    identity = f"{name}|{output_dir}".encode("utf-8")
    return int.from_bytes(hashlib.sha256(identity).digest()[:4], "big") & SEED_MAX


def vision_kind(vision_path: str | None) -> str | None:
    """``"image"`` or ``"video"``, by the vision input's extension (a URL's query ignored); ``None`` without one."""
    if not vision_path:
        return None
    return "image" if Path(str(vision_path).split("?")[0]).suffix.lower() in IMAGE_EXTENSIONS else "video"


def infer_mode(vision_path: str | None, num_frames: int | None) -> str:
    """``model_mode`` when an input omits it: from the vision input's extension and ``num_frames``."""
    return f"{vision_kind(vision_path) or 'text'}2{'image' if num_frames == 1 else 'video'}"


def download_cache_path(url: str, name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Where the framework caches a downloaded input (inference/common/args.py ``_resolve_url_download``). ``name`` is
    ``vision<ext>``, ``sound<ext>``, ... With ``$COSMOS_DOWNLOAD_CACHE_DIR`` unset the framework downloads to a fresh
    temporary folder every run, so there is no cache path (``None``)."""
    root = cache_dir if cache_dir is not None else os.environ.get(DOWNLOAD_CACHE_ENV)
    return Path(root) / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name}" if root else None

# ---------------------------------------------------------------------------------------------- estimated controls

# Depth and segmentation controls: the framework never computes them (inference/transfer.py:106-119: without an
# existing control_path a depth/seg hint is "Missing pre-computed control input"). A supplied control is any media
# file read like the RGB input (inference/vision.py:197-227): 3-channel RGB uint8, an .mp4 or an image, its first
# max_frames frames, aspect-preserving resize + centre crop to the bucket, then x / 127.5 - 1 (vision.py:229-231):
# the pixel values are what the model sees, nothing re-normalises them. Training read the same pictures:
# AddControlInputDepth only resizes the decoded depth video, bilinearly (control_input.py:262-292), and a
# colour-coded segmentation video is used as it is, resized nearest (control_input.py:459-468).
ESTIMATED_HINTS: tuple[str, ...] = ("depth", "seg")
CONTROL_CHANNELS = 3
# The training depth is the key "depth_pervideo_video_depth_anything" (merge_datadict.py:41): Video Depth Anything's
# relative inverse depth (near is bright), normalised per video, stored as a video (grey in all three channels).
# The training segmentation is a colour video of masks (seg.py:55-83 ``segmentation_color_mask``): masks sorted by
# pixel count, largest first, each painted one colour for the whole clip, uncovered pixels black (0, 0, 0); the
# colours are random HSV or, with ``use_fixed_color_list``, a permutation of these 23 (seg.py:10-36; the fixture
# key ``seg_colors``, read from seg.py by scripts/refresh_contracts.py, holds the same list).
SEG_COLORS: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255), (255, 140, 0),
    (255, 105, 180), (0, 0, 139), (0, 128, 128), (75, 0, 130), (128, 0, 128), (255, 69, 0), (34, 139, 34),
    (128, 128, 0), (70, 130, 180), (255, 215, 0), (255, 222, 173), (144, 238, 144), (255, 99, 71),
    (221, 160, 221), (0, 255, 127), (255, 255, 255))
