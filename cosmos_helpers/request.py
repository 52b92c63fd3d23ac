"""``GenerationRequest``: one validated, backend-neutral description of a generation.

Everything a backend needs is resolved here, at construction, from the profile's defaults for the mode and the
caller's values, and every mistake is reported here, before a model loads or a request leaves the machine.
Backends translate a request into their own wire format; the request knows nothing about them.

Two kinds of fields:

* what to generate (mode, prompt, size, frames, fps, steps, guidance, shift, seed, sound, inputs): always
  concrete after construction. An omitted one comes from the *profile*, per mode, and every backend is sent
  the resolved value, so the same request makes the same video everywhere.
* how a backend prepares it (``negative_prompt``, ``use_system_prompt``, the sentence templates,
  ``guidance_interval``): ``None`` means *that backend's own default* (they differ, see the README's table);
  a value given here is forwarded to every backend, or refused by one that cannot honour it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Union

import numpy as np

from . import action_request, media
from .errors import ValidationError
from .limits import check_mode, check_profile_limits
from .presets import (
    ACTION_MODES,
    ASPECT_RATIOS,
    DEFAULT_PROFILE,
    DEFAULT_SEED,
    MODES,
    PROFILES,
    VIDEO_SIZES,
    floor_to_4k1,
    get_profile,
    normalize_aspect,
    normalize_tier,
)
from .prompts import Caption, PromptLike, compact, load_caption, parse_caption, with_metadata
from .protocol import variants
from .protocol.framework import detect_aspect_ratio
from .result import record_fingerprint
from .precision import Precision, check_precision, precision_record
from .step_cache import StepCache, check_step_cache, step_cache_record

MODE_ALIASES: Mapping[str, str] = {
    "t2i": "text2image", "t2v": "text2video", "i2v": "image2video", "v2v": "video2video", "i2i": "image2image",
    "text_to_image": "text2image", "text_to_video": "text2video", "image_to_image": "image2image",
    "image_to_video": "image2video", "video_to_video": "video2video",
    "fd": "forward_dynamics", "id": "inverse_dynamics", "wam": "policy",
}
MediaLike = Union[str, Path, np.ndarray, Any]  # Any: a PIL image

# Conditioning input -> (the mode that takes it, the forms it may take, its check).
_CONDITIONING = {"image": (("image2video", "image2image"), "a path, a PIL image or an HxWx3 uint8 array",
                           media.check_image),
                 "video": (("video2video",), "a path or a TxHxWx3 uint8 array", media.check_video)}
IMAGE_MODES: tuple[str, ...] = ("text2image", "image2image")  # one frame out
MAX_STEPS = 200
MAX_GUIDANCE = 20.0
MAX_FPS = 120.0
MAX_SEED = 2**63 - 1
MAX_TIMESTEP = 1000.0


@dataclass(frozen=True, eq=False)
class GenerationRequest:
    """What to generate, independent of where it runs.

    Args:
        mode: ``text2image``, ``text2video``, ``image2video``, ``video2video`` (``t2i``/``t2v``/``i2v``/``v2v``),
            ``image2image`` (``i2i``, image editing on Diffusers and the Cosmos Framework: without a tier, aspect
            ratio or size the output keeps the input's shape, longer side 512, as in the framework), or an action
            mode: ``forward_dynamics``, ``inverse_dynamics``, ``policy``
            (``fd``/``id``/``wam``).
        prompt: text, a structured caption dict, or a ``pathlib.Path`` to a ``.json``/``.txt`` file (a ``str`` is
            always the prompt itself).
        negative_prompt: the same forms; ``None`` keeps each backend's own default (the framework's negative
            caption file for video, empty elsewhere).
        profile: ``tiny`` (default, embedded model), ``nano``, ``super``, ``edge``, the distilled
            ``super-t2i-4step`` / ``super-i2v-4step``, or the stand-ins ``tiny-distilled`` / ``tiny-edge``; supplies
            the model and, per mode, every omitted setting below, and refuses what its checkpoint cannot do
            (``cosmos_helpers.limits``).
        model: another model than the profile's (hub id, local folder, or ``"tiny"``). This is the one place a
            model is chosen; every backend runs it or refuses.
        tier / aspect_ratio: a resolution bucket (``"480"``, ``"16,9"``); or give ``width`` and ``height``.
        num_frames: 1 for images, ``4k+1`` for video (the causal VAE's constraint).
        fps: frame rate; it conditions the model (mRoPE, duration metadata), not only playback.
        num_inference_steps, guidance_scale, flow_shift: sampling settings.
        seed: always recorded; the default is fixed so reruns reproduce.
        sound: generate a 48 kHz stereo soundtrack with the video.
        image: the conditioning image of ``image2video`` (path, PIL image or HxWx3 array).
        video: the conditioning video of ``video2video`` (path or TxHxWx3 array).
        condition_frames / condition_video_keep: which latent frames of ``video`` stay clean, from which end;
            ``None`` keeps the backend's default (all three: ``(0, 1)`` from the ``"first"`` end).
        use_system_prompt: Cosmos3's built-in system prompt; ``None`` keeps the backend's default.
        add_resolution_template / add_duration_template: append the sentence templates to a *plain-text*
            prompt (a JSON caption gets its metadata injected instead); ``None`` keeps the backend's default.
        guidance_interval: ``(lo, hi)`` timesteps (0-1000) inside which classifier-free guidance applies;
            ``None`` keeps the backend's default (vLLM-Omni: ``(400, 1000)`` for images).
        guardrails: run the Cosmos guardrails; ``None`` takes the profile's choice.
        actions: the trajectory ``forward_dynamics`` plays: a ``(num_frames - 1, D)`` array, nested lists or a
            ``.json``/``.npz``/LeRobot ``.parquet`` file (:mod:`cosmos_helpers.trajectories`); it sets
            ``num_frames`` when that is left out.
        embodiment: whose actions (``protocol.action.RAW_DIM``: ``"av"``, ``"bridge_orig_lerobot"``, ...); it
            fixes ``D`` and the model's action weights. Action modes only.
        view_point: the camera's viewpoint sentence of the action caption (``"ego_view"``, ...); ``None`` keeps the
            backend's default.
        step_cache: step caching: ``None`` keeps the backend's default (off in diffusers and vLLM-Omni, SeaCache 0.35
            in the Cosmos Framework's CLI; the manifest records it), ``"off"`` runs every step in full, and
            ``SeaCache(...)`` (``"sea"``: its defaults) skips steps whose input barely changed
            (:mod:`cosmos_helpers.step_cache`). It changes the pictures, so a cached result never serves an uncached
            request or the other way round.
        precision: ``None`` (the checkpoint's bf16 weights), ``"fp8"`` / ``FP8(...)`` (NVIDIA's ModelOpt FP8 revision
            with its per-step W8A16/W8A8 policy, or overrides of it), ``"mxfp8"`` / ``"nvfp4"`` (the Cosmos
            Framework's load-time quantization, Blackwell only); a backend that cannot run it refuses
            (:mod:`cosmos_helpers.precision`). It changes the numbers, so it is in the fingerprint.

    Action modes (``forward_dynamics``, ``inverse_dynamics``, ``policy``) take ``image`` (the start frame) or, for
    inverse dynamics, ``video``; their size comes from that media and ``tier`` (an action tier: 256, 480, 704, 720).
    """

    mode: str
    prompt: PromptLike
    negative_prompt: PromptLike | None = None
    profile: str = DEFAULT_PROFILE
    model: str | None = None
    tier: str | None = None
    aspect_ratio: str | None = None
    width: int | None = None
    height: int | None = None
    num_frames: int | None = None
    fps: float | None = None
    num_inference_steps: int | None = None
    guidance_scale: float | None = None
    flow_shift: float | None = None
    seed: int = DEFAULT_SEED
    sound: bool = False
    image: MediaLike | None = None
    video: MediaLike | None = None
    condition_frames: tuple[int, ...] | None = None
    condition_video_keep: str | None = None
    use_system_prompt: bool | None = None
    add_resolution_template: bool | None = None
    add_duration_template: bool | None = None
    guidance_interval: tuple[float, float] | None = None
    guardrails: bool | None = None
    actions: Any = None
    embodiment: str | None = None
    view_point: str | None = None
    step_cache: StepCache = None
    precision: Precision = None
    _caption: Caption = field(init=False, repr=False)
    _negative: Caption | None = field(init=False, repr=False)
    _inputs: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        inputs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        object.__setattr__(self, "_inputs", inputs)
        self._resolve()

    @property
    def is_image(self) -> bool:
        return self.mode in IMAGE_MODES

    @property
    def is_action(self) -> bool:
        return self.mode in ACTION_MODES

    @property
    def keeps_image_size(self) -> bool:
        """An edit given no tier, aspect ratio or size: the framework's own default, the input's shape with its
        longer side at 512 (``protocol.variants.edit_size``), and no aspect ratio. Given a tier or an aspect ratio an
        edit takes a bucket: the framework needs both for one, so the other is filled in (the input's nearest aspect
        ratio, the profile's tier) and both are sent."""
        return self.mode == "image2image" and not any(
            self._inputs.get(name) is not None for name in ("tier", "aspect_ratio", "width", "height"))

    @property
    def duration_s(self) -> float:
        return 0.0 if self.is_image else self.num_frames / self.fps

    @property
    def caption(self) -> Caption:
        """The prompt as loaded: a dict for structured captions, else text."""
        return self._caption

    @property
    def is_structured(self) -> bool:
        """A JSON caption: it gets metadata injected, and the sentence templates do not apply."""
        return isinstance(self._caption, dict)

    def prompt_text(self) -> str:
        """The prompt as every backend receives it: a JSON caption with the generation metadata injected."""
        if isinstance(self._caption, dict):
            return with_metadata(self._caption, width=self.width, height=self.height, num_frames=self.num_frames,
                                 fps=self.fps, aspect_ratio=self.aspect_ratio)
        return self._caption

    def negative_prompt_text(self) -> str | None:
        """The negative prompt to send, or ``None`` to leave the backend's default in place."""
        return self._negative

    def explicit(self, name: str) -> bool:
        """Whether ``name`` was given by the caller (not filled in from the profile). Meaningful for the fields
        that default to ``None``; ``seed`` and ``sound`` always have a value to send."""
        return self._inputs.get(name) is not None

    def conditioning_image(self):
        """The conditioning image as an RGB PIL image (decoded on demand, validated at construction)."""
        return None if self.image is None else media.load_image(self.image)

    def conditioning_video(self) -> np.ndarray | None:
        """The conditioning video as uint8 ``(T, H, W, 3)``."""
        return None if self.video is None else media.load_video_frames(self.video)[0]

    def replace(self, **changes: Any) -> "GenerationRequest":
        """A new, re-validated request with some fields changed (like ``dataclasses.replace``)."""
        values = dict(self._inputs)
        values.update(changes)
        return GenerationRequest(**values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record of the resolved request (media as path + content hash) for manifests."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if not f.init or f.name in ("prompt", "negative_prompt"):
                continue
            value = getattr(self, f.name)
            if f.name in ("image", "video"):
                value = None if value is None else media.describe_media(value)
            elif isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, tuple):
                value = list(value)
            elif f.name == "step_cache":
                if value is None:  # the backend's default, as every request was before the option existed
                    continue
                value = step_cache_record(value)
            elif f.name == "precision":
                if value is None:  # the checkpoint's own weights, as every request was before the option existed
                    continue
                value = precision_record(value)
            out[f.name] = value
        out["prompt"] = self.prompt_text()
        out["negative_prompt"] = self.negative_prompt_text()
        return out

    def fingerprint(self) -> str:
        """What a rerun compares to skip finished work (:func:`~cosmos_helpers.result.record_fingerprint`)."""
        return record_fingerprint(self.to_dict())

    def summary(self) -> str:
        what = "image" if self.is_image else f"{self.num_frames} frames @ {self.fps:g} fps"
        if self.is_action:
            what += f", {self.embodiment} actions"
        sound = " + sound" if self.sound else ""
        return (f"{self.mode} {self.width}x{self.height}, {what}{sound}, {self.num_inference_steps} steps, "
                f"guidance {self.guidance_scale:g}, shift {self.flow_shift:g}, seed {self.seed}, model {self.model}")

    # Resolution: the profile's defaults for the mode filled in, and every field validated as a person would check.

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _resolve(self) -> None:
        self._set("mode", _resolve_mode(self.mode))
        if not isinstance(self.profile, str) or self.profile.strip().lower() not in PROFILES:
            raise ValidationError("profile", f"unknown profile {self.profile!r}.", f"use one of {', '.join(PROFILES)}.")
        profile = get_profile(self.profile)
        self._set("profile", profile.name)
        if self.model is not None and (not isinstance(self.model, (str, Path)) or not str(self.model).strip()):
            raise ValidationError("model", f"expected a model name, got {self.model!r}.",
                                  "pass 'tiny', a hub id such as 'nvidia/Cosmos3-Nano', or a checkpoint folder.")
        self._set("model", str(self.model) if self.model is not None else profile.model)
        check_mode(profile, self.mode)
        defaults = profile.defaults(self.mode)
        self._resolve_prompts()
        if self.is_action:
            frames = action_request.frames_from_actions(self)
            self._resolve_frames(defaults if frames is None else replace(defaults, num_frames=frames))
            self._resolve_sampling(defaults)
            for name, value in action_request.resolve(self, defaults).items():
                self._set(name, value)
            self._set("aspect_ratio", detect_aspect_ratio(self.width, self.height))
        else:
            action_request.refuse_action_fields(self)
            self._resolve_size(defaults)
            self._resolve_frames(defaults)
            self._resolve_sampling(defaults)
            self._resolve_media()
        self._resolve_backend_options()
        if self.guardrails is None:
            self._set("guardrails", profile.guardrails)
        if self.sound and self.is_image:
            raise ValidationError("sound", f"{self.mode} produces a still image, which cannot carry sound.",
                                  "use mode='text2video' (or image2video) with sound=True, or sound=False.")
        check_profile_limits(self, profile)

    def _resolve_prompts(self) -> None:
        if self.prompt is None:
            raise ValidationError("prompt", "no prompt given.", "pass the text, a caption dict or a Path to a file.")
        caption = load_caption(self.prompt, field="prompt")
        if isinstance(caption, str):
            caption = parse_caption(caption)
        if (isinstance(caption, str) and not caption.strip()) or (isinstance(caption, dict) and not caption):
            raise ValidationError("prompt", "the prompt is empty.", "describe the scene to generate.")
        negative: Caption | None = None
        if self.negative_prompt is not None:
            negative = load_caption(self.negative_prompt, field="negative_prompt")
            negative = parse_caption(negative) if isinstance(negative, str) else negative
            # A negative caption is sent as compact JSON: metadata injection is for the positive prompt only.
            negative = compact(negative) if isinstance(negative, dict) else negative
        self._set("_caption", caption)
        self._set("_negative", negative)

    def _resolve_size(self, defaults) -> None:
        tier = None
        if self.width is not None or self.height is not None:
            self._explicit_size()
            detected = detect_aspect_ratio(self.width, self.height)
            aspect = detected if self.aspect_ratio is None else normalize_aspect(self.aspect_ratio)
            if aspect in ASPECT_RATIOS and aspect != detected:
                raise ValidationError("aspect_ratio", f"{self.aspect_ratio!r} contradicts width={self.width}, "
                                      f"height={self.height} (whose aspect ratio is {detected!r}): the size and the "
                                      "ratio sent would differ.",
                                      "drop aspect_ratio= (the size sets it), or drop width=/height= and pick tier=.")
        elif self.keeps_image_size and self.image is not None:  # no bucket: no tier, no aspect ratio
            media.check_image(self.image, field="image")
            width, height = variants.edit_size(*media.load_image(self.image).size)
            self._set("width", width)
            self._set("height", height)
            return
        else:
            tier = normalize_tier(self.tier if self.tier is not None else defaults.tier)
            if tier not in VIDEO_SIZES:
                raise ValidationError("tier", f"unknown resolution tier {self.tier!r}.",
                                      f"use one of {', '.join(VIDEO_SIZES)} (or width=/height=).")
            aspect = normalize_aspect(self.aspect_ratio if self.aspect_ratio is not None else self._default_aspect(
                defaults))
        if aspect not in ASPECT_RATIOS:
            raise ValidationError("aspect_ratio", f"unknown aspect ratio {self.aspect_ratio!r}.",
                                  f"use one of {', '.join(ASPECT_RATIOS)} (\"16:9\" is accepted too).")
        self._set("aspect_ratio", aspect)
        if tier is not None:
            self._set("tier", tier)
            self._set("width", VIDEO_SIZES[tier][aspect][0])
            self._set("height", VIDEO_SIZES[tier][aspect][1])

    def _default_aspect(self, defaults) -> str:
        """An edit keeps its input's shape (the framework's image2image keeps the input size): the bucket aspect
        closest to the image's; every other mode takes the profile's."""
        if self.mode != "image2image" or self.image is None:
            return defaults.aspect_ratio
        media.check_image(self.image, field="image")
        width, height = media.load_image(self.image).size
        return detect_aspect_ratio(width, height)

    def _explicit_size(self) -> None:
        if self.width is None or self.height is None:
            missing = "height" if self.width is not None else "width"
            raise ValidationError(missing, "width and height must be given together.",
                                  f"also pass {missing}=..., or use tier=/aspect_ratio= instead.")
        if self.tier is not None:
            raise ValidationError("tier", "give either a tier or an explicit width x height, not both.",
                                  "drop tier=, or drop width=/height=.")
        for name in ("width", "height"):
            value = getattr(self, name)
            if not _is_int(value):
                raise ValidationError(name, f"expected an integer number of pixels, got {value!r}.",
                                      f"pass {name} as an int, e.g. 1280.")
            if value < 16:
                raise ValidationError(name, f"{value} px is too small.", "use at least 16 px.")
            if value % 16:
                lower, upper = value // 16 * 16, (value // 16 + 1) * 16
                raise ValidationError(name, f"{value} is not a multiple of 16 (the VAE's spatial stride).",
                                      f"use {lower} or {upper}.")
            self._set(name, int(value))

    def _resolve_frames(self, defaults) -> None:
        if self.is_image:
            if self.num_frames not in (None, 1):
                raise ValidationError("num_frames", f"{self.mode} makes one frame, got num_frames={self.num_frames}.",
                                      "drop num_frames, or use mode='text2video'.")
            self._set("num_frames", 1)
        else:
            frames = defaults.num_frames if self.num_frames is None else self.num_frames
            if not _is_int(frames):
                raise ValidationError("num_frames", f"expected an integer, got {frames!r}.", "pass e.g. 17 or 189.")
            if frames < 5:
                raise ValidationError("num_frames", f"{frames} frames is not a video.",
                                      "use 5 or more frames (4k+1: 5, 9, 17, ...), or mode='text2image'.")
            if (frames - 1) % 4:
                floored = floor_to_4k1(frames)
                raise ValidationError(
                    "num_frames", f"{frames} is not of the form 4k+1 (the causal VAE keeps 1 + 4k frames); "
                    f"diffusers would silently make it {floored}.", f"use {floored} or {floored + 4}.")
            self._set("num_frames", int(frames))
        fps = defaults.fps if self.fps is None else self.fps
        if not _is_number(fps):
            raise ValidationError("fps", f"expected a number, got {fps!r}.", "pass e.g. fps=24.")
        if not 1 <= fps <= MAX_FPS:
            raise ValidationError("fps", f"{fps} fps is out of range.", f"use 1 to {MAX_FPS:g} (Cosmos3 is trained "
                                                                         "at 10-30).")
        self._set("fps", float(fps))

    def _resolve_sampling(self, defaults) -> None:
        steps = defaults.num_inference_steps if self.num_inference_steps is None else self.num_inference_steps
        if not _is_int(steps) or not 1 <= steps <= MAX_STEPS:
            raise ValidationError("num_inference_steps", f"{steps!r} is not an integer from 1 to {MAX_STEPS}.",
                                  "use e.g. 35 (the Cosmos3 video default) or fewer for a quick look.")
        self._set("num_inference_steps", int(steps))
        guidance = defaults.guidance_scale if self.guidance_scale is None else self.guidance_scale
        if not _is_number(guidance) or not 0 <= guidance <= MAX_GUIDANCE:
            raise ValidationError("guidance_scale", f"{guidance!r} is outside 0..{MAX_GUIDANCE:g}.",
                                  "use 6.0 (the Cosmos3 video default); 1.0 turns classifier-free guidance off.")
        self._set("guidance_scale", float(guidance))
        shift = defaults.flow_shift if self.flow_shift is None else self.flow_shift
        if not _is_number(shift) or not 0 < shift <= 100:
            raise ValidationError("flow_shift", f"{shift!r} must be a number above 0 (and at most 100).",
                                  "use 10.0 (the Cosmos3 default for video); lower values keep more detail early.")
        self._set("flow_shift", float(shift))
        seed = self.seed
        if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
            raise ValidationError("seed", f"{seed!r} is not an integer from 0 to 2**63-1.", "pass e.g. seed=0.")
        self._set("seed", int(seed))

    def _resolve_media(self) -> None:
        for name, (modes, _, _) in _CONDITIONING.items():
            if self.mode not in modes and getattr(self, name) is not None:
                raise ValidationError(name, f"{self.mode} takes no conditioning {name}.",
                                      f"use mode='{modes[0]}', or drop {name}=.")
        for name, (modes, forms, check) in _CONDITIONING.items():
            if self.mode in modes and getattr(self, name) is None:
                raise ValidationError(name, f"{self.mode} needs a conditioning {name}.", f"pass {name}= {forms}.")
            if self.mode in modes:
                check(getattr(self, name), field=name)
        for name in ("condition_frames", "condition_video_keep"):
            if self.mode != "video2video" and getattr(self, name) is not None:
                raise ValidationError(name, f"{self.mode} takes no {name}: it says how a conditioning video is "
                                      "continued, and only video2video has one.", f"drop {name}= (or use "
                                      "mode='video2video').")
        if self.condition_frames is not None:
            self._check_condition_frames()
        if self.condition_video_keep not in (None, "first", "last"):
            raise ValidationError("condition_video_keep",
                                  f"{self.condition_video_keep!r} is neither 'first' nor 'last'.",
                                  "use 'first' (continue from the start of the clip) or 'last'.")

    def _check_condition_frames(self) -> None:
        frames = self.condition_frames
        if isinstance(frames, (int, np.integer)):
            frames = (int(frames),)
        if not isinstance(frames, (tuple, list)) or not frames or not all(_is_int(i) and i >= 0 for i in frames):
            raise ValidationError("condition_frames",
                                  f"{self.condition_frames!r} is not a list of latent frame indexes.",
                                  "pass e.g. (0, 1): the first two latent frames stay clean.")
        latent_frames = (self.num_frames - 1) // 4 + 1
        if self.mode == "video2video" and max(frames) >= latent_frames:
            raise ValidationError("condition_frames", f"index {max(frames)} is past the {latent_frames} latent frames "
                                  f"of a {self.num_frames}-frame video.", "use smaller indexes or more frames.")
        self._set("condition_frames", tuple(int(i) for i in frames))

    def _resolve_backend_options(self) -> None:
        self._set("step_cache", check_step_cache(self.step_cache))
        self._set("precision", check_precision(self.precision))
        for name in ("use_system_prompt", "add_resolution_template", "add_duration_template", "guardrails", "sound"):
            value = getattr(self, name)
            if value is None and name != "sound":
                continue
            if not isinstance(value, (bool, np.bool_)):
                raise ValidationError(name, f"expected True or False, got {value!r}.",
                                      f"pass {name}=True or {name}=False"
                                      + (" (or leave it out for the backend's default)." if name != "sound" else "."))
            self._set(name, bool(value))
        for name in ("add_resolution_template", "add_duration_template"):
            if getattr(self, name) and self.is_structured:
                raise ValidationError(name, "the sentence templates apply to plain-text prompts; this prompt is a "
                                            "structured caption, which gets its metadata injected instead.",
                                      f"leave {name} out (or use a plain-text prompt).")
        if self.guidance_interval is not None:
            interval = self.guidance_interval
            if (not isinstance(interval, (tuple, list)) or len(interval) != 2 or not all(map(_is_number, interval))
                    or not 0 <= interval[0] <= interval[1] <= MAX_TIMESTEP):
                raise ValidationError("guidance_interval", f"{interval!r} is not a (lo, hi) pair with "
                                      f"0 <= lo <= hi <= {MAX_TIMESTEP:g}.",
                                      "pass e.g. (400, 1000) to guide only the noisy first steps, or leave it out.")
            self._set("guidance_interval", (float(interval[0]), float(interval[1])))


def _resolve_mode(mode: str) -> str:
    if not isinstance(mode, str):
        raise ValidationError("mode", f"expected a mode name, got {mode!r}.", f"use one of {', '.join(MODES)}.")
    key = mode.strip().lower().replace("-", "_")
    key = MODE_ALIASES.get(key, key)
    if key not in MODES:
        raise ValidationError("mode", f"unknown mode {mode!r}.",
                              f"use one of {', '.join(MODES)} (or t2i, t2v, i2v, v2v, fd, id, wam).")
    return key


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(value))
