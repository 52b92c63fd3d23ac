"""Call arguments: what the stock pipeline and the distilled blocks take alike, and an action request's condition and
predicted trajectory. Options left to the pipeline's default are not passed."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import media
from ...request import GenerationRequest


def call_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """Sizes, frames, fps, steps, prompt options (a JSON caption carries its metadata: templates off) and the
    conditioning: an image, or a video fitted to the bucket with which latent frames stay clean."""
    kwargs: dict[str, Any] = dict(prompt=request.prompt_text(), num_frames=request.num_frames,
                                  height=request.height, width=request.width, fps=request.fps,
                                  num_inference_steps=request.num_inference_steps)
    if request.use_system_prompt is not None:
        kwargs["use_system_prompt"] = request.use_system_prompt
    for name in ("add_resolution_template", "add_duration_template"):
        if request.is_structured:
            kwargs[name] = False
        elif getattr(request, name) is not None:
            kwargs[name] = getattr(request, name)
    if request.mode == "image2video":
        kwargs["image"] = request.conditioning_image()
    elif request.mode == "video2video":
        frames = media.fit_to_bucket(request.conditioning_video(), request.width, request.height)
        kwargs["video"] = [media.load_image(frame) for frame in frames]
        if request.condition_frames is not None:
            kwargs["condition_frame_indexes_vision"] = list(request.condition_frames)
        if request.condition_video_keep is not None:
            kwargs["condition_video_keep"] = request.condition_video_keep
    return kwargs


def action_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """An action run (forward/inverse dynamics, policy): ``CosmosActionCondition`` carries the media, the chunk and
    the size, which replace the other modes' arguments (``num_frames``, ``height`` and ``width`` must stay unset,
    pipeline_cosmos3_omni.py:1041-1044)."""
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
    """The predicted trajectory ``(chunk, D)`` of inverse dynamics and policy (none for forward dynamics)."""
    predicted = getattr(output, "action", None)
    return predicted[0].float().cpu().numpy().reshape(request.num_frames - 1, -1) if predicted else None
