"""What a profile's checkpoint cannot do, refused while a request is built (before any model loads).

A distilled checkpoint samples a fixed schedule with guidance baked in: the framework and vLLM-Omni would silently
ignore a step count, guidance scale or negative prompt given for it, diffusers raises only once the model is loaded.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import ValidationError
from .presets import PROFILES, Profile
from .protocol import variants


def check_mode(profile: Profile, mode: str) -> None:
    """Refuse a mode the profile's checkpoint is not made for, pointing at profiles that are."""
    if mode in profile.modes:
        return
    others = [p.name for p in PROFILES.values() if mode in p.modes and p.distilled == profile.distilled]
    raise ValidationError("mode", f"profile {profile.name!r} ({profile.model}) runs {', '.join(profile.modes)}, "
                          f"not {mode}.", f"use one of those modes, or a profile that runs {mode}: "
                          f"{', '.join(others) or 'none'}.")


def check_profile_limits(request: Any, profile: Profile) -> None:
    """Refuse explicit values the profile's checkpoint cannot honour (``request``: the resolved values, with the
    given ones in ``request.request``)."""
    if request.sound and not profile.sound:
        raise ValidationError("sound", f"profile {profile.name!r} ({profile.model}) has no sound pathway.",
                              "use sound=False, or profile 'nano' / 'super' (or 'tiny') for video with sound.")
    if not profile.distilled:
        return
    steps = len(profile.distilled_sigmas)
    where = f"profile {profile.name!r} is a distilled checkpoint"
    fixed = {"num_inference_steps": (steps, f"it samples its fixed {steps}-step schedule "
                                            f"{list(profile.distilled_sigmas)}"),
             "guidance_scale": (1.0, "classifier-free guidance is baked into its weights"),
             "flow_shift": (1.0, "its schedule's sigmas are used as they are (shift 1)")}
    for name, (value, why) in fixed.items():
        given = getattr(request.request, name)
        if given is not None and not (isinstance(given, (int, float)) and math.isclose(given, value)):
            raise ValidationError(name, f"{where}: {why}; {name}={given!r} cannot be honoured on any backend.",
                                  f"leave {name} out (it is {value:g}), or use a base profile such as 'super' or "
                                  "'tiny' to choose it.")
    for name, why in (("negative_prompt", "there is no unconditional pass to steer"),
                      ("guidance_interval", "there is no classifier-free guidance to limit")):
        if getattr(request.request, name) is not None:
            raise ValidationError(name, f"{where}: {why}.",
                                  f"leave {name} out, or use a base profile such as 'super' or 'tiny'.")


def check_backend_mode(request: Any, backend: str) -> None:
    """Refuse, before any work, a mode the backend's upstream stack does not have (image editing)."""
    if request.mode == "image2image" and backend not in variants.IMAGE2IMAGE_BACKENDS:
        raise ValidationError("mode", f"the {backend} backend cannot run image2image: "
                              f"{variants.IMAGE2IMAGE_REFUSAL[backend]}.",
                              "run it with DiffusersBackend or FrameworkBackend, or use mode='image2video' / "
                              "'text2image'.")
