"""Resolution buckets and the profiles that switch model, sizes and sampling settings together, per mode.

The buckets are the Cosmos Framework's plus this project's CPU tier ``128``. Defaults are *per mode*, as Cosmos 3's
differ (text-to-image: 50 steps, guidance 4, shift 3 at 1:1; video: 35 steps, guidance 6, shift 10 at 16:9).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

from .errors import ValidationError
from .protocol import action, framework, variants

ASPECT_RATIOS: tuple[str, ...] = framework.ASPECT_RATIOS
# "128" is this project's own CPU tier (half the 256 bucket, still multiples of 16) for the embedded tiny model.
CPU_TIER = "128"
VIDEO_SIZES: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType({
    CPU_TIER: MappingProxyType({"1,1": (128, 128), "4,3": (160, 128), "3,4": (128, 160), "16,9": (160, 96),
                                "9,16": (96, 160)}),
    **{tier: MappingProxyType(dict(sizes)) for tier, sizes in framework.SIZES.items()},
})
TIERS: tuple[str, ...] = tuple(VIDEO_SIZES)
MODES: tuple[str, ...] = ("text2image", "text2video", "image2video", "video2video", "image2image", *action.MODES)
ACTION_MODES: tuple[str, ...] = action.MODES
MODE_ALIASES: Mapping[str, str] = {
    "t2i": "text2image", "t2v": "text2video", "i2v": "image2video", "v2v": "video2video", "i2i": "image2image",
    "text_to_image": "text2image", "text_to_video": "text2video", "image_to_image": "image2image",
    "image_to_video": "image2video", "video_to_video": "video2video",
    "fd": "forward_dynamics", "id": "inverse_dynamics", "wam": "policy",
}
# An action run is sized by an action tier (protocol.action.RESOLUTION_BINS), its length by the action chunk:
# the framework's defaults (image_size 256, action_chunk_size 16), the smallest tier for the tiny model.
ACTION_TIER = str(framework.MODE_DEFAULTS["wam"]["image_size"])
ACTION_CHUNK = int(framework.MODE_DEFAULTS["wam"]["action_chunk_size"])

SOUND_SAMPLE_RATE = 48_000
DEFAULT_SEED = 0


def normalize_aspect(aspect: str) -> str:
    """Accept ``"16:9"``, ``"16x9"``, ``"16/9"`` and ``"16,9"``; return the framework's ``"16,9"`` spelling."""
    return re.sub("[:x/X]", ",", str(aspect).strip().replace(" ", ""))


def normalize_mode(mode: object) -> str:
    """The mode's canonical name (``"t2v"``, ``"Text-To-Video"`` -> ``"text2video"``), or a clear error."""
    if not isinstance(mode, str):
        raise ValidationError("mode", f"expected a mode name, got {mode!r}.", f"use one of {', '.join(MODES)}.")
    key = mode.strip().lower().replace("-", "_")
    key = MODE_ALIASES.get(key, key)
    if key not in MODES:
        raise ValidationError("mode", f"unknown mode {mode!r}.",
                              f"use one of {', '.join(MODES)} (or t2i, t2v, i2v, v2v, fd, id, wam).")
    return key


def normalize_tier(tier: str | int) -> str:
    """Accept ``720``, ``"720"`` and ``"720p"``."""
    return str(tier).strip().lower().removesuffix("p")


def size_for(tier: str | int, aspect: str = "16,9") -> tuple[int, int]:
    """(width, height) of a tier x aspect bucket; raises ``KeyError`` for an unknown pair."""
    return VIDEO_SIZES[normalize_tier(tier)][normalize_aspect(aspect)]


def bucket_of(width: int, height: int) -> tuple[str, str] | None:
    """``(tier, aspect)`` of the bucket that is exactly ``width x height``, or ``None``."""
    return next(((tier, aspect) for tier, sizes in VIDEO_SIZES.items() for aspect, size in sizes.items()
                 if size == (width, height)), None)


def floor_to_4k1(num_frames: int) -> int:
    """What the causal VAE silently does to a frame count (2 -> 1, 8 -> 5, 10 -> 9)."""
    return max(1, ((num_frames - 1) // 4) * 4 + 1)


@dataclass(frozen=True)
class ModeDefaults:
    """What a profile generates for one mode when a request leaves a field out."""

    tier: str
    aspect_ratio: str
    num_frames: int
    fps: float
    num_inference_steps: int
    guidance_scale: float
    flow_shift: float


@dataclass(frozen=True)
class Profile:
    """A model and the settings that belong with it, per mode; one switch changes them all together."""

    name: str
    model: str
    description: str
    guardrails: bool
    modes: Mapping[str, ModeDefaults]
    # A distilled checkpoint's fixed schedule (flow sigmas, one per step): guidance is baked into its weights, so
    # steps, guidance, shift and the negative prompt are the checkpoint's, not the caller's. ``None``: a base model.
    distilled_sigmas: tuple[float, ...] | None = None
    sound: bool = True  # whether the checkpoint has the sound pathway

    @property
    def distilled(self) -> bool:
        return self.distilled_sigmas is not None

    def defaults(self, mode: str) -> ModeDefaults:
        return self.modes[mode]


def _checkpoint_profile(name: str, checkpoint: str, description: str, **extra) -> Profile:
    """A checkpoint's per-mode defaults as the framework resolves them (defaults files + model config)."""
    config = framework.MODEL_CONFIGS[checkpoint]
    video_frames = config.get("num_frames", framework.MODE_DEFAULTS["text2video"]["num_frames"])
    image = framework.MODE_DEFAULTS["text2image"]
    modes = {mode: ModeDefaults(tier=config["resolution"], aspect_ratio=d.get("aspect_ratio", image["aspect_ratio"]),
                                num_frames=1 if mode in framework.IMAGE_MODES else video_frames, fps=float(d["fps"]),
                                num_inference_steps=d["num_steps"], guidance_scale=d["guidance"], flow_shift=d["shift"])
             for mode, d in ((mode, framework.MODE_DEFAULTS[action.FRAMEWORK_MODES.get(mode, mode)])
                             for mode in MODES)}
    for mode in action.MODES:
        modes[mode] = replace(modes[mode], tier=ACTION_TIER, num_frames=ACTION_CHUNK + 1)
    return Profile(name=name, model=config["hub"], description=description, guardrails=True,
                   modes=MappingProxyType(modes), **extra)


def _distilled_profile(name: str, hub: str) -> Profile:
    """A 4-step checkpoint: its one published mode at its resolution, with its fixed schedule."""
    _, tier, mode = variants.DISTILLED_CHECKPOINTS[hub]
    steps = len(variants.DISTILLED_T_LIST)
    defaults = replace(_SUPER.defaults(mode), tier=tier, num_inference_steps=steps,
                       guidance_scale=variants.DISTILLED_GUIDANCE, flow_shift=variants.DISTILLED_SHIFT)
    description = f"{hub}: distilled, {steps} fixed steps, guidance baked in; {mode} at {tier}p"
    return Profile(name=name, model=hub, description=description, guardrails=True,
                   modes=MappingProxyType({mode: defaults}), distilled_sigmas=variants.DISTILLED_T_LIST, sound=False)


_NANO = _checkpoint_profile("nano", "Cosmos3-Nano",
                            "nvidia/Cosmos3-Nano at the published defaults (video: 720p, 189 frames @ 24 fps, "
                            "35 steps, guidance 6, shift 10; image: 50 steps, guidance 4, shift 3, 1:1)")
_SUPER = _checkpoint_profile("super", "Cosmos3-Super", "nvidia/Cosmos3-Super at the published defaults "
                             "(multi-GPU host recommended)")
_EDGE = _checkpoint_profile("edge", "Cosmos3-Edge", "nvidia/Cosmos3-Edge at the published defaults (480p, video "
                            "121 frames; no sound pathway)", sound=variants.EDGE_SOUND)
_SUPER_T2I_4STEP = _distilled_profile("super-t2i-4step", "nvidia/Cosmos3-Super-Text2Image-4Step")
_SUPER_I2V_4STEP = _distilled_profile("super-i2v-4step", "nvidia/Cosmos3-Super-Image2Video-4Step")


def _on_cpu(profile: Profile) -> Mapping[str, ModeDefaults]:
    """A checkpoint's defaults shrunk for the embedded CPU models: the CPU tier (the action tier for action modes,
    whose canvas has no smaller bucket), at most 9 frames, 4 steps."""
    return MappingProxyType({mode: replace(d, tier=ACTION_TIER if mode in action.MODES else CPU_TIER,
                                           num_frames=min(d.num_frames, 9), num_inference_steps=4)
                             for mode, d in profile.modes.items()})


_TINY = Profile(
    name="tiny", model="tiny", guardrails=False,
    description="embedded Cosmos3 trained on a synthetic world of coloured balls and boxes (real classes): Nano's "
                "guidance and shift at the CPU tier, 9 frames, 4 steps",
    modes=_on_cpu(_NANO),
)
# Stand-ins of the variants on the embedded weights for CPU runs and CI: their modes, schedule and limits, tiny sizes.
_TINY_DISTILLED = Profile(
    name="tiny-distilled", model="tiny-distilled", guardrails=False,
    description="embedded random-weight Cosmos3 in the distilled format (diffusers' Cosmos3DistilledBlocks): the "
                "published 4-step schedule, guidance baked in; the 4-step checkpoints' modes at the CPU tier",
    modes=MappingProxyType({mode: replace(_TINY.defaults(mode), num_inference_steps=len(variants.DISTILLED_T_LIST),
                                          guidance_scale=variants.DISTILLED_GUIDANCE,
                                          flow_shift=variants.DISTILLED_SHIFT)
                            for mode in variants.DISTILLED_MODES["framework"]}),
    distilled_sigmas=variants.DISTILLED_T_LIST, sound=False)
_TINY_EDGE = Profile(
    name="tiny-edge", model="tiny-edge", guardrails=False, sound=False,
    description="embedded random-weight Cosmos3 with Edge's backbone (Nemotron dense), defaults and limits (no "
                "sound) at the CPU tier",
    modes=_on_cpu(_EDGE))
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in (
    _TINY, _NANO, _SUPER, _EDGE, _TINY_DISTILLED, _TINY_EDGE, _SUPER_T2I_4STEP, _SUPER_I2V_4STEP)})
# What runs when nobody names a profile or a model: the embedded model, so every cookbook runs on a laptop.
DEFAULT_PROFILE = "tiny"


def get_profile(name: str | Profile) -> Profile:
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[str(name).strip().lower()]
    except KeyError:
        raise KeyError(name) from None


def model_for(profile: str | Profile | None = None, model: str | None = None) -> str:
    """The one rule for which model runs: an explicit ``model`` wins, else the profile's, else the default profile's."""
    return str(model) if model else get_profile(profile or DEFAULT_PROFILE).model
