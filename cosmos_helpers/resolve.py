"""``ResolvedRequest``: what a :class:`~cosmos_helpers.request.GenerationRequest` asks for, every value concrete.

:func:`resolve` fills in the profile's defaults for the mode and checks every value as a person would. Backends
translate this, never the request as given, so the same request makes the same video everywhere.
"""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, fields, replace
from pathlib import Path
from typing import Any, Union

import numpy as np

from . import action_request, media
from .errors import ValidationError
from .limits import check_mode, check_profile_limits
from .precision import check_precision, precision_record
from .presets import (ACTION_MODES, ASPECT_RATIOS, PROFILES, VIDEO_SIZES, floor_to_4k1, get_profile,
                      normalize_aspect, normalize_mode, normalize_tier)
from .prompts import compact, load_caption, parse_caption, with_metadata
from .protocol import variants
from .protocol.framework import detect_aspect_ratio
from .result import record_fingerprint
from .step_cache import check_step_cache, step_cache_record

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
_SIZE_FIELDS = frozenset({"tier", "aspect_ratio", "width", "height"})


class ResolvedRequest:
    """A request with every value resolved (the names of :class:`~cosmos_helpers.request.GenerationRequest`), plus
    ``caption`` / ``negative`` (the prompts as loaded), ``request`` (as given) and ``given`` (the names set there).
    :func:`resolve` fills it in step by step (a later step reads the earlier ones' results), then freezes it."""

    def __init__(self, request: Any) -> None:
        given = {f.name: getattr(request, f.name) for f in fields(request)}
        self.__dict__.update(given, request=request, caption=None, negative=None,
                             given=frozenset(name for name, value in given.items() if value is not None))

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        self.__dict__[name] = value

    def __repr__(self) -> str:
        values = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self.request))
        return f"ResolvedRequest({values})"

    @property
    def is_image(self) -> bool:
        return self.mode in IMAGE_MODES

    @property
    def is_action(self) -> bool:
        return self.mode in ACTION_MODES

    @property
    def is_structured(self) -> bool:
        """A JSON caption: it gets metadata injected, and the sentence templates do not apply."""
        return isinstance(self.caption, dict)

    @property
    def keeps_image_size(self) -> bool:
        """An edit given no tier, aspect ratio or size keeps its input's shape, longer side 512 (``edit_size``)."""
        return self.mode == "image2image" and not self.given & _SIZE_FIELDS

    @property
    def duration_s(self) -> float:
        return 0.0 if self.is_image else self.num_frames / self.fps

    def explicit(self, name: str) -> bool:
        """Whether the caller gave ``name`` (not the profile); ``seed`` and ``sound`` always have a value to send."""
        return name in self.given

    def resolve(self) -> "ResolvedRequest":
        """Itself: code that takes a request accepts either kind and calls ``resolve()`` once."""
        return self

    def replace(self, **changes: Any) -> "ResolvedRequest":
        """The request given with some values changed, resolved again (as ``dataclasses.replace`` on it)."""
        return self.request.replace(**changes).resolve()

    def prompt_text(self) -> str:
        """The prompt as every backend receives it: a JSON caption with the generation metadata injected."""
        if isinstance(self.caption, dict):
            return with_metadata(self.caption, width=self.width, height=self.height, num_frames=self.num_frames,
                                 fps=self.fps, aspect_ratio=self.aspect_ratio)
        return self.caption

    def negative_prompt_text(self) -> str | None:
        """The negative prompt to send, or ``None`` to leave the backend's default in place."""
        return self.negative

    def conditioning_image(self):
        """The conditioning image as an RGB PIL image (decoded on demand, checked when the request was built)."""
        return None if self.image is None else media.load_image(self.image)

    def conditioning_video(self) -> np.ndarray | None:
        """The conditioning video as uint8 ``(T, H, W, 3)``."""
        return None if self.video is None else media.load_video_frames(self.video)[0]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record for manifests (media as path + hash), the prompts last, as sent."""
        out: dict[str, Any] = {}
        for name in (f.name for f in fields(self.request) if f.name not in ("prompt", "negative_prompt")):
            value = getattr(self, name)
            if name in ("image", "video"):
                value = None if value is None else media.describe_media(value)
            elif isinstance(value, (np.ndarray, tuple)):
                value = np.asarray(value).tolist()
            elif name in _RECORDS:
                if value is None:  # the backend's default, as every request was before the option existed
                    continue
                value = _RECORDS[name](value)
            out[name] = value
        return {**out, "prompt": self.prompt_text(), "negative_prompt": self.negative_prompt_text()}

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


_RECORDS = {"step_cache": step_cache_record, "precision": precision_record}


def resolve(request: Any) -> ResolvedRequest:
    """Every value of ``request`` (a ``GenerationRequest``) concrete and checked, or a ``ValidationError``."""
    d = ResolvedRequest(request)
    d.mode = normalize_mode(d.mode)
    if not isinstance(d.profile, str) or d.profile.strip().lower() not in PROFILES:
        raise ValidationError("profile", f"unknown profile {d.profile!r}.", f"use one of {', '.join(PROFILES)}.")
    profile = get_profile(d.profile)
    d.profile = profile.name
    if d.model is not None and (not isinstance(d.model, (str, Path)) or not str(d.model).strip()):
        raise ValidationError("model", f"expected a model name, got {d.model!r}.",
                              "pass 'tiny', a hub id such as 'nvidia/Cosmos3-Nano', or a checkpoint folder.")
    d.model = str(d.model) if d.model is not None else profile.model
    check_mode(profile, d.mode)
    defaults = profile.defaults(d.mode)
    _prompts(d)
    if d.is_action:
        frames = action_request.frames_from_actions(d)
        _frames(d, defaults if frames is None else replace(defaults, num_frames=frames))
        _sampling(d, defaults)
        vars(d).update(action_request.resolve(d, defaults))
        d.aspect_ratio = detect_aspect_ratio(d.width, d.height)
    else:
        action_request.refuse_action_fields(d)
        _size(d, defaults)
        _frames(d, defaults)
        _sampling(d, defaults)
        _media(d)
    _backend_options(d)
    d.guardrails = profile.guardrails if d.guardrails is None else d.guardrails
    if d.sound and d.is_image:
        raise ValidationError("sound", f"{d.mode} produces a still image, which cannot carry sound.",
                              "use mode='text2video' (or image2video) with sound=True, or sound=False.")
    check_profile_limits(d, profile)
    d.__dict__["_frozen"] = True
    return d


def _prompts(d: ResolvedRequest) -> None:
    if d.prompt is None:
        raise ValidationError("prompt", "no prompt given.", "pass the text, a caption dict or a Path to a file.")
    d.caption = parse_caption(load_caption(d.prompt, field="prompt"))
    if (isinstance(d.caption, str) and not d.caption.strip()) or (isinstance(d.caption, dict) and not d.caption):
        raise ValidationError("prompt", "the prompt is empty.", "describe the scene to generate.")
    if d.negative_prompt is not None:  # sent as compact JSON: metadata injection is for the positive prompt only
        d.negative = compact(parse_caption(load_caption(d.negative_prompt, field="negative_prompt")))


def _size(d: ResolvedRequest, defaults) -> None:
    tier = None
    if d.width is not None or d.height is not None:
        _explicit_size(d)
        detected = detect_aspect_ratio(d.width, d.height)
        aspect = detected if d.aspect_ratio is None else normalize_aspect(d.aspect_ratio)
        if aspect in ASPECT_RATIOS and aspect != detected:
            raise ValidationError("aspect_ratio", f"{d.aspect_ratio!r} contradicts width={d.width}, "
                                  f"height={d.height} (whose aspect ratio is {detected!r}): the size and the "
                                  "ratio sent would differ.",
                                  "drop aspect_ratio= (the size sets it), or drop width=/height= and pick tier=.")
    elif d.keeps_image_size and d.image is not None:  # no bucket: no tier, no aspect ratio
        d.width, d.height = variants.edit_size(*_image_size(d.image))
        return
    else:
        tier = normalize_tier(d.tier if d.tier is not None else defaults.tier)
        if tier not in VIDEO_SIZES:
            raise ValidationError("tier", f"unknown resolution tier {d.tier!r}.",
                                  f"use one of {', '.join(VIDEO_SIZES)} (or width=/height=).")
        if d.aspect_ratio is not None:
            aspect = normalize_aspect(d.aspect_ratio)
        elif d.mode == "image2image" and d.image is not None:  # an edit: the bucket closest to its image's
            aspect = detect_aspect_ratio(*_image_size(d.image))
        else:
            aspect = defaults.aspect_ratio
    if aspect not in ASPECT_RATIOS:
        raise ValidationError("aspect_ratio", f"unknown aspect ratio {d.aspect_ratio!r}.",
                              f"use one of {', '.join(ASPECT_RATIOS)} (\"16:9\" is accepted too).")
    d.aspect_ratio = aspect
    if tier is not None:
        d.tier = tier
        d.width, d.height = VIDEO_SIZES[tier][aspect]


def _image_size(image: MediaLike) -> tuple[int, int]:
    """``(width, height)`` of a conditioning image, checked first (a bad one is named as the image)."""
    media.check_image(image, field="image")
    return media.load_image(image).size


def _explicit_size(d: ResolvedRequest) -> None:
    if d.width is None or d.height is None:
        missing = "height" if d.width is not None else "width"
        raise ValidationError(missing, "width and height must be given together.",
                              f"also pass {missing}=..., or use tier=/aspect_ratio= instead.")
    if d.tier is not None:
        raise ValidationError("tier", "give either a tier or an explicit width x height, not both.",
                              "drop tier=, or drop width=/height=.")
    for name in ("width", "height"):
        value = getattr(d, name)
        if not _is_int(value):
            raise ValidationError(name, f"expected an integer number of pixels, got {value!r}.",
                                  f"pass {name} as an int, e.g. 1280.")
        if value < 16:
            raise ValidationError(name, f"{value} px is too small.", "use at least 16 px.")
        if value % 16:
            raise ValidationError(name, f"{value} is not a multiple of 16 (the VAE's spatial stride).",
                                  f"use {value // 16 * 16} or {value // 16 * 16 + 16}.")
        setattr(d, name, int(value))


def _frames(d: ResolvedRequest, defaults) -> None:
    if d.is_image:
        if d.num_frames not in (None, 1):
            raise ValidationError("num_frames", f"{d.mode} makes one frame, got num_frames={d.num_frames}.",
                                  "drop num_frames, or use mode='text2video'.")
        d.num_frames = 1
    else:
        frames = defaults.num_frames if d.num_frames is None else d.num_frames
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
        d.num_frames = int(frames)
    fps = defaults.fps if d.fps is None else d.fps
    if not _is_number(fps):
        raise ValidationError("fps", f"expected a number, got {fps!r}.", "pass e.g. fps=24.")
    if not 1 <= fps <= MAX_FPS:
        raise ValidationError("fps", f"{fps} fps is out of range.",
                              f"use 1 to {MAX_FPS:g} (Cosmos3 is trained at 10-30).")
    d.fps = float(fps)


# The sampling numbers: name -> (its type, whether a value is in range, the problem, the fix).
_SAMPLING = {
    "num_inference_steps": (int, lambda v: 1 <= v <= MAX_STEPS, f"{{!r}} is not an integer from 1 to {MAX_STEPS}.",
                            "use e.g. 35 (the Cosmos3 video default) or fewer for a quick look."),
    "guidance_scale": (float, lambda v: 0 <= v <= MAX_GUIDANCE, f"{{!r}} is outside 0..{MAX_GUIDANCE:g}.",
                       "use 6.0 (the Cosmos3 video default); 1.0 turns classifier-free guidance off."),
    "flow_shift": (float, lambda v: 0 < v <= 100, "{!r} must be a number above 0 (and at most 100).",
                   "use 10.0 (the Cosmos3 default for video); lower values keep more detail early."),
}


def _sampling(d: ResolvedRequest, defaults) -> None:
    for name, (kind, in_range, problem, fix) in _SAMPLING.items():
        value = getattr(defaults, name) if getattr(d, name) is None else getattr(d, name)
        if not (_is_int(value) if kind is int else _is_number(value)) or not in_range(value):
            raise ValidationError(name, problem.format(value), fix)
        setattr(d, name, kind(value))
    if not _is_int(d.seed) or not 0 <= d.seed <= MAX_SEED:
        raise ValidationError("seed", f"{d.seed!r} is not an integer from 0 to 2**63-1.", "pass e.g. seed=0.")
    d.seed = int(d.seed)


def _media(d: ResolvedRequest) -> None:
    for name, (modes, _, _) in _CONDITIONING.items():
        if d.mode not in modes and getattr(d, name) is not None:
            raise ValidationError(name, f"{d.mode} takes no conditioning {name}.",
                                  f"use mode='{modes[0]}', or drop {name}=.")
    for name, (modes, forms, check) in _CONDITIONING.items():
        if d.mode in modes and getattr(d, name) is None:
            raise ValidationError(name, f"{d.mode} needs a conditioning {name}.", f"pass {name}= {forms}.")
        if d.mode in modes:
            check(getattr(d, name), field=name)
    for name in ("condition_frames", "condition_video_keep"):
        if d.mode != "video2video" and getattr(d, name) is not None:
            raise ValidationError(name, f"{d.mode} takes no {name}: it says how a conditioning video is "
                                  "continued, and only video2video has one.", f"drop {name}= (or use "
                                  "mode='video2video').")
    if d.condition_frames is not None:
        d.condition_frames = _condition_frames(d)
    if d.condition_video_keep not in (None, "first", "last"):
        raise ValidationError("condition_video_keep", f"{d.condition_video_keep!r} is neither 'first' nor 'last'.",
                              "use 'first' (continue from the start of the clip) or 'last'.")


def _condition_frames(d: ResolvedRequest) -> tuple[int, ...]:
    frames = d.condition_frames
    if isinstance(frames, (int, np.integer)):
        frames = (int(frames),)
    if not isinstance(frames, (tuple, list)) or not frames or not all(_is_int(i) and i >= 0 for i in frames):
        raise ValidationError("condition_frames", f"{d.condition_frames!r} is not a list of latent frame indexes.",
                              "pass e.g. (0, 1): the first two latent frames stay clean.")
    latent_frames = (d.num_frames - 1) // 4 + 1
    if max(frames) >= latent_frames:  # only video2video gets here
        raise ValidationError("condition_frames", f"index {max(frames)} is past the {latent_frames} latent frames "
                              f"of a {d.num_frames}-frame video.", "use smaller indexes or more frames.")
    return tuple(int(i) for i in frames)


def _backend_options(d: ResolvedRequest) -> None:
    d.step_cache = check_step_cache(d.step_cache)
    d.precision = check_precision(d.precision)
    for name in ("use_system_prompt", "add_resolution_template", "add_duration_template", "guardrails", "sound"):
        value = getattr(d, name)
        if value is None and name != "sound":
            continue
        if not isinstance(value, (bool, np.bool_)):
            raise ValidationError(name, f"expected True or False, got {value!r}.",
                                  f"pass {name}=True or {name}=False"
                                  + (" (or leave it out for the backend's default)." if name != "sound" else "."))
        setattr(d, name, bool(value))
    for name in ("add_resolution_template", "add_duration_template"):
        if getattr(d, name) and d.is_structured:
            raise ValidationError(name, "the sentence templates apply to plain-text prompts; this prompt is a "
                                        "structured caption, which gets its metadata injected instead.",
                                  f"leave {name} out (or use a plain-text prompt).")
    interval = d.guidance_interval
    if interval is not None:
        if (not isinstance(interval, (tuple, list)) or len(interval) != 2 or not all(map(_is_number, interval))
                or not 0 <= interval[0] <= interval[1] <= MAX_TIMESTEP):
            raise ValidationError("guidance_interval", f"{interval!r} is not a (lo, hi) pair with "
                                  f"0 <= lo <= hi <= {MAX_TIMESTEP:g}.",
                                  "pass e.g. (400, 1000) to guide only the noisy first steps, or leave it out.")
        d.guidance_interval = (float(interval[0]), float(interval[1]))


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(value))
