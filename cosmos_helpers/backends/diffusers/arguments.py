"""Call arguments the stock pipeline and the distilled blocks take alike: prompt options and a video's frames."""

from __future__ import annotations

from typing import Any

from ... import media
from ...request import GenerationRequest


def prompt_options(request: GenerationRequest) -> dict[str, Any]:
    """The system prompt and sentence templates where the request sets them (a JSON caption: templates off)."""
    kwargs: dict[str, Any] = {}
    if request.use_system_prompt is not None:
        kwargs["use_system_prompt"] = request.use_system_prompt
    structured = request.is_structured
    for name in ("add_resolution_template", "add_duration_template"):
        if structured:
            kwargs[name] = False
        elif getattr(request, name) is not None:
            kwargs[name] = getattr(request, name)
    return kwargs


def video_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """A video2video call's clip (fitted to the bucket) and which latent frames stay clean, where set."""
    frames = media.fit_to_bucket(request.conditioning_video(), request.width, request.height)
    kwargs: dict[str, Any] = {"video": [media.load_image(frame) for frame in frames]}
    if request.condition_frames is not None:  # else the pipeline's own default
        kwargs["condition_frame_indexes_vision"] = list(request.condition_frames)
    if request.condition_video_keep is not None:
        kwargs["condition_video_keep"] = request.condition_video_keep
    return kwargs
