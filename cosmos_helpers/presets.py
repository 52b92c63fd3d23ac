"""Resolution buckets, per-mode sampling defaults and the profiles that switch model and sizes together.

The bucket table is the Cosmos Framework's ``VIDEO_RES_SIZE_INFO`` (values are width x height). Keeping it
here, in one place, is what lets every backend agree on the pixels a tier and an aspect ratio mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

ASPECT_RATIOS: tuple[str, ...] = ("16,9", "4,3", "1,1", "3,4", "9,16")

# tier -> aspect -> (width, height). "128" is this project's own CPU tier (half the 256 bucket, still
# multiples of 16) so the embedded tiny model runs in seconds; the others are the framework's. The
# framework's image-only 1080 tier is left out: 1080 is not a multiple of 16, which diffusers requires.
_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "128": {"1,1": (128, 128), "4,3": (160, 128), "3,4": (128, 160), "16,9": (160, 96), "9,16": (96, 160)},
    "256": {"1,1": (256, 256), "4,3": (320, 256), "3,4": (256, 320), "16,9": (320, 192), "9,16": (192, 320)},
    "480": {"1,1": (640, 640), "4,3": (736, 544), "3,4": (544, 736), "16,9": (832, 480), "9,16": (480, 832)},
    "704": {"1,1": (960, 960), "4,3": (1088, 832), "3,4": (832, 1088), "16,9": (1280, 704), "9,16": (704, 1280)},
    "720": {"1,1": (960, 960), "4,3": (1104, 832), "3,4": (832, 1104), "16,9": (1280, 720), "9,16": (720, 1280)},
    "768": {"1,1": (1024, 1024), "4,3": (1184, 880), "3,4": (880, 1184), "16,9": (1360, 768), "9,16": (768, 1360)},
}
VIDEO_SIZES: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType(
    {tier: MappingProxyType(sizes) for tier, sizes in _SIZES.items()}
)
TIERS: tuple[str, ...] = tuple(_SIZES)

SOUND_SAMPLE_RATE = 48_000
DEFAULT_SEED = 0


def normalize_aspect(aspect: str) -> str:
    """Accept ``"16:9"``, ``"16x9"``, ``"16/9"`` and ``"16,9"``; return the framework's ``"16,9"`` spelling."""
    text = str(aspect).strip().replace(" ", "")
    for sep in (":", "x", "/", "X"):
        text = text.replace(sep, ",")
    return text


def normalize_tier(tier: str | int) -> str:
    """Accept ``720``, ``"720"`` and ``"720p"``."""
    text = str(tier).strip().lower()
    return text[:-1] if text.endswith("p") else text


def size_for(tier: str | int, aspect: str = "16,9") -> tuple[int, int]:
    """(width, height) of a tier x aspect bucket; raises ``KeyError`` for an unknown pair."""
    return VIDEO_SIZES[normalize_tier(tier)][normalize_aspect(aspect)]


def nearest_aspect(width: int, height: int) -> str:
    """The framework's aspect auto-detection: nearest ratio by squared difference of W/H."""
    ratio = width / height
    candidates = {"16,9": 16 / 9, "4,3": 4 / 3, "1,1": 1.0, "3,4": 3 / 4, "9,16": 9 / 16}
    return min(candidates, key=lambda name: (candidates[name] - ratio) ** 2)


def floor_to_4k1(num_frames: int) -> int:
    """What the causal VAE silently does to a frame count (2 -> 1, 8 -> 5, 10 -> 9)."""
    return max(1, ((num_frames - 1) // 4) * 4 + 1)


@dataclass(frozen=True)
class Profile:
    """A model and the sampling settings that belong with it; one switch changes both together."""

    name: str
    model: str
    tier: str
    aspect_ratio: str
    num_frames: int
    fps: float
    num_inference_steps: int
    guidance_scale: float
    flow_shift: float
    guardrails: bool
    description: str
    image_tier: str = field(default="")

    def size(self, aspect_ratio: str | None = None, tier: str | None = None) -> tuple[int, int]:
        return size_for(tier or self.tier, aspect_ratio or self.aspect_ratio)


_TINY = Profile(
    name="tiny",
    model="tiny",
    tier="128",
    aspect_ratio="16,9",
    num_frames=9,
    fps=24.0,
    num_inference_steps=4,
    guidance_scale=6.0,
    flow_shift=10.0,
    guardrails=False,
    description="embedded random-weight Cosmos3 (real classes, noise pictures), CPU in seconds",
)
# The published Cosmos3 defaults (NVIDIA's cookbooks): 720p 16:9, 189 frames at 24 fps, 35 steps, guidance 6, shift 10.
_NANO = Profile(
    name="nano",
    model="nvidia/Cosmos3-Nano",
    tier="720",
    aspect_ratio="16,9",
    num_frames=189,
    fps=24.0,
    num_inference_steps=35,
    guidance_scale=6.0,
    flow_shift=10.0,
    guardrails=True,
    description="nvidia/Cosmos3-Nano at the published defaults (720p, 189 frames @ 24 fps, 35 steps)",
)
_SUPER = replace(_NANO, name="super", model="nvidia/Cosmos3-Super",
                 description="nvidia/Cosmos3-Super at the published defaults (multi-GPU host recommended)")
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in (_TINY, _NANO, _SUPER)})


def get_profile(name: str | Profile) -> Profile:
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[str(name).strip().lower()]
    except KeyError:
        raise KeyError(name) from None
