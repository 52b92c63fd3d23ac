"""Action requests on ``Cosmos3OmniPipeline``: what the pipeline takes for forward/inverse dynamics and policy,
and the trajectory it predicts. Kept apart from ``backends.diffusers`` because the action condition replaces the
size and media arguments every other mode passes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import media
from ...request import GenerationRequest


def call_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """An action run: ``CosmosActionCondition`` carries the media, the chunk and the size (``num_frames``,
    ``height`` and ``width`` must stay unset, pipeline_cosmos3_omni.py:1041-1044)."""
    import torch
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import CosmosActionCondition

    condition: dict[str, Any] = dict(mode=request.mode, chunk_size=request.num_frames - 1,
                                     domain_name=request.embodiment, resolution_tier=int(request.tier))
    if request.view_point is not None:
        condition["view_point"] = request.view_point
    if request.actions is not None:
        condition["raw_actions"] = torch.as_tensor(np.asarray(request.actions), dtype=torch.float32)
    if request.video is not None:
        condition["video"] = [media.load_image(frame) for frame in request.conditioning_video()[:request.num_frames]]
    else:
        condition["image"] = request.conditioning_image()
    kwargs: dict[str, Any] = dict(
        prompt=request.prompt_text(), negative_prompt=request.negative_prompt_text(), fps=request.fps,
        num_inference_steps=request.num_inference_steps, guidance_scale=request.guidance_scale, enable_sound=False,
        enable_safety_check=False, action=CosmosActionCondition(**condition))
    if request.use_system_prompt is not None:
        kwargs["use_system_prompt"] = request.use_system_prompt
    return kwargs


def predicted_actions(output: Any, request: GenerationRequest) -> np.ndarray | None:
    """The predicted trajectory ``(chunk, D)`` of inverse dynamics and policy (the pipeline returns none for
    forward dynamics, whose trajectory was given)."""
    predicted = getattr(output, "action", None)
    if not predicted:
        return None
    return predicted[0].float().cpu().numpy().reshape(request.num_frames - 1, -1)
