"""The framework sample a :class:`~cosmos_helpers.request.GenerationRequest` becomes (``FrameworkBackend``'s wire
format): what the request says, and nothing it leaves unset, so the framework's own defaults apply; and the
command-line flags of its step cache, a setup option of the run rather than a sample field."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import media
from ..errors import ValidationError
from ..models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ..models.tiny_edge import MODEL_NAME as TINY_EDGE
from ..presets import bucket_of
from ..protocol import action as ap
from ..protocol import framework as fw
from ..protocol import step_cache as cache_facts
from ..request import GenerationRequest
from ..step_cache import OFF, SeaCache, StepCache
from ..trajectories import save_trajectory

TINY_MODELS = ("tiny", TINY_DISTILLED, TINY_EDGE)  # this project's embedded models: the framework stand-in's only
# Every flag of the framework's diffusion cache (none of them may come from anywhere but the request).
CACHE_FLAGS = frozenset({cache_facts.FRAMEWORK_ON_FLAG, cache_facts.FRAMEWORK_OFF_FLAG,
                         *(names[2] for names in cache_facts.FIELDS.values() if names[2])})


def cache_flags(step_cache: StepCache) -> list[str]:
    """The framework's flags for a step cache: none for ``None`` (the CLI's own default: SeaCache on, 0.35),
    ``--no-diffusion-cache`` for ``"off"``, ``--diffusion-cache`` and a flag per given field it has one for for a
    :class:`SeaCache` (``check_for_backend`` refused the fields it has none for, unless they ask for its own value)."""
    if step_cache is None:
        return []
    if step_cache == OFF:
        return [cache_facts.FRAMEWORK_OFF_FLAG]
    assert isinstance(step_cache, SeaCache)
    flags = [cache_facts.FRAMEWORK_ON_FLAG]
    for name, value in step_cache.given().items():
        flag = cache_facts.FIELDS[name][2]
        if flag is not None:
            flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return flags


def checkpoint_for(model: str) -> str:
    """The ``--checkpoint-path`` of a model: a framework checkpoint name, or a local folder's absolute path."""
    model = str(model)
    if model in TINY_MODELS:
        raise ValidationError("model", f"the framework cannot run this project's embedded {model} model (diffusers' "
                              "format, not a framework checkpoint).", "use profile 'nano', 'super' or 'edge' (or a "
                              "model such as nvidia/Cosmos3-Nano), or run on diffusers.")
    if model in fw.CHECKPOINTS:
        return fw.CHECKPOINTS[model]
    if model in fw.CHECKPOINTS.values():
        return model
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    raise ValidationError("model", f"{model!r} is neither a framework checkpoint nor a local folder.",
                          f"use one of {', '.join(fw.CHECKPOINTS)} or a checkpoint folder.")


def request_payload(request: GenerationRequest, *, name: str, image_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The framework sample of a :class:`GenerationRequest`: what the request says, and nothing it leaves unset.

    Sizes must be a framework bucket; a ``guidance_interval`` (inclusive here) becomes the framework's strict
    ``(lo, hi)`` with the same timesteps (``protocol.framework.to_strict``); conditioning arrays are written to
    ``image_dir``.
    """
    request = request.resolve()
    check_request(request)
    if request.is_action:
        return _action_payload(request, name=name, folder=Path(image_dir))
    bucket = _bucket(request)
    payload: dict[str, Any] = {"name": name, "model_mode": request.mode,
                               "prompt": request.caption if isinstance(request.caption, str) else
                               json.dumps(request.caption, ensure_ascii=False)}
    negative = request.negative_prompt_text()
    if negative is not None:
        payload["negative_prompt"] = negative
    if bucket is not None:  # else an edit keeping its input's shape: the framework's default without either
        payload.update(resolution=bucket[0], aspect_ratio=bucket[1])
    payload.update(fps=int(request.fps), num_steps=request.num_inference_steps, guidance=request.guidance_scale,
                   shift=request.flow_shift, seed=request.seed)
    if not request.is_image:
        payload["num_frames"] = request.num_frames
    if request.sound:
        payload["enable_sound"] = True
    if request.guidance_interval is not None:
        payload["guidance_interval"] = list(fw.to_strict(request.guidance_interval))
    if request.mode in ("image2video", "image2image"):
        payload["vision_path"] = _media_path(request.image, request, Path(image_dir), ".png")
    if request.mode == "video2video":
        payload["vision_path"] = _media_path(request.video, request, Path(image_dir), ".mp4")
        if request.explicit("condition_frames"):
            payload["condition_frame_indexes_vision"] = list(request.condition_frames)
        if request.explicit("condition_video_keep"):
            payload["condition_video_keep"] = request.condition_video_keep
    return payload


def _action_payload(request: GenerationRequest, *, name: str, folder: Path) -> dict[str, Any]:
    """An action request as the framework's action sample (inputs/omni/action_*.json): ``image_size`` is the action
    tier, the trajectory a ``[T][D]`` JSON file (inference/action.py:56-58), policy is ``wam``."""
    payload: dict[str, Any] = {
        "name": name, "model_mode": ap.FRAMEWORK_MODES[request.mode], "prompt": request.prompt_text(),
        "domain_name": request.embodiment, "action_chunk_size": request.num_frames - 1,
        "image_size": int(request.tier), "fps": int(request.fps), "num_steps": request.num_inference_steps,
        "guidance": request.guidance_scale, "shift": request.flow_shift, "seed": request.seed}
    if request.guidance_interval is not None:  # read for every sample, actions too (inference.py:1709)
        payload["guidance_interval"] = list(fw.to_strict(request.guidance_interval))
    if request.view_point is not None:
        payload["view_point"] = request.view_point
    if request.video is not None:
        payload["vision_path"] = _media_path(request.video, request, folder, ".mp4")
    else:
        payload["vision_path"] = _media_path(request.image, request, folder, ".png")
    if request.actions is not None:
        target = folder / f"{request.fingerprint()}-actions.json"
        if not target.exists():
            save_trajectory(target, request.actions)
        payload["action_path"] = str(target)
    return payload


def check_request(request: GenerationRequest) -> None:
    """Refuse, before anything is written, what the framework's sample cannot say as the request asks."""
    if not request.is_action:
        _bucket(request)
    if not float(request.fps).is_integer():
        raise ValidationError("fps", f"the framework's fps is an integer, not {request.fps:g}.",
                              f"use fps={math.floor(request.fps)} or {math.ceil(request.fps)}.")
    if request.use_system_prompt is not None:
        raise ValidationError("use_system_prompt", "the framework's system prompt is a model-config setting "
                              "(Nano/Super/Edge: off), not a sample field.",
                              "leave use_system_prompt out on the framework backend, or run on diffusers/vLLM-Omni.")
    if request.is_action:
        if request.negative_prompt is not None:
            raise ValidationError("negative_prompt", "the framework's action batch has no negative caption "
                                  "(inference.py get_sample_data: get_action_sample_data takes none), so it would be "
                                  "ignored.", "leave negative_prompt out, or run the request on diffusers.")
        return
    for name in ("add_resolution_template", "add_duration_template"):
        if getattr(request, name) is False:
            raise ValidationError(name, "the framework always appends its sentence templates to a plain-text prompt.",
                                  f"leave {name} out on the framework backend, or use a structured (JSON) caption.")


def _bucket(request: GenerationRequest) -> tuple[str, str] | None:
    """The request's framework bucket ``(tier, aspect)`` (``None``: an edit keeping its input's shape); refuses a
    size the framework does not generate."""
    bucket = (request.tier, request.aspect_ratio) if request.tier else bucket_of(request.width, request.height)
    if request.keeps_image_size:
        return None
    if bucket is None or bucket[0] not in fw.TIERS:
        what = f"tier {bucket[0]} (this project's CPU tier)" if bucket else f"{request.width}x{request.height}"
        raise ValidationError("tier" if bucket else "width", f"the framework generates its buckets only "
                              f"({', '.join(fw.TIERS)} x {', '.join(fw.ASPECT_RATIOS)}), not {what}.",
                              "use tier= and aspect_ratio= with a framework tier (e.g. tier='480'), or a profile "
                              "other than 'tiny'; or run on diffusers.")
    return bucket


def _media_path(source: Any, request: GenerationRequest, folder: Path, suffix: str) -> str:
    """A conditioning input as a file the framework can read: its own path, or an array written once by content."""
    if isinstance(source, (str, os.PathLike)):
        return str(Path(source).expanduser().resolve())
    target = folder / f"{request.fingerprint()}{suffix}"
    if not target.exists():
        if suffix == ".png":
            media.write_png(target, np.asarray(request.conditioning_image()))
        else:
            media.write_mp4(target, request.conditioning_video(), request.fps)
    return str(target)


__all__ = ["CACHE_FLAGS", "cache_flags", "check_request", "checkpoint_for", "request_payload"]
