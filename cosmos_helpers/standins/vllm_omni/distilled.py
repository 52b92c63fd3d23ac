"""Serving a distilled (4-step) checkpoint as vLLM-Omni 0.30.0 serves one (facts: ``protocol.variants``).

The real pipeline samples the checkpoint's fixed schedule whatever ``num_inference_steps`` says, overrides any
``guidance_scale`` to 1.0 with a warning (the negative prompt then has no effect) and uses the sigmas as they are
(no shift); it refuses text-to-video, video-to-video and sound with one message. The stand-in does the same, so a
client sees here what it would see there. Our own client refuses those values before sending (``limits``).
"""

from __future__ import annotations

from typing import Any

from ...presets import PROFILES
from .errors import value_error

# what the pipeline ignores on a distilled checkpoint: the fixed schedule and the baked-in guidance replace them
_IGNORED = ("num_inference_steps", "guidance_scale", "guidance_interval", "negative_prompt", "flow_shift")
_REFUSED = {"text2video": "text-to-video requests are unsupported.",
            "video2video": "video-to-video requests are unsupported.",
            "sound": "sound generation is unsupported."}


def distilled_profile(model: str) -> str | None:
    """The distilled profile whose model the server runs, or ``None`` for a base checkpoint."""
    return next((p.name for p in PROFILES.values() if p.distilled and p.model == str(model)), None)


def as_served(model: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``GenerationRequest`` fields for the served checkpoint: unchanged for a base model; for a distilled one, its
    refusals raised and what it ignores dropped (so the distilled profile's fixed values apply)."""
    profile = distilled_profile(model)
    if profile is None:
        return fields
    asked = "sound" if fields.get("sound") else fields["mode"]
    if asked in _REFUSED:
        message = "Cosmos3 distilled checkpoints support only text-to-image and image-to-video generation; "
        raise value_error(message + _REFUSED[asked], param="generate_sound" if asked == "sound" else None)
    kept = {k: v for k, v in fields.items() if k not in _IGNORED}
    return {**kept, "profile": profile}
