"""An action request (``extra_params.action_mode``) made into a ``GenerationRequest`` by vLLM-Omni 0.30.0's rules
(``protocol.action``; pipeline_cosmos3.py):

* the chunk: ``action_chunk_size``, else ``num_frames - 1``, else 16 (:3825-3836); ``num_frames`` defaults to
  ``chunk + 1``. vLLM-Omni also accepts ``num_frames == chunk``; the stand-in makes ``chunk + 1`` only, and says so.
* the size: ``size`` when sent, else the closest canvas of ``resolution`` / ``image_size`` (default 480, :352-364);
  the conditioning image is scaled down (never up) and padded into it (:393-412) and the video keeps that size.
* defaults: 30 steps, guidance 1.0, shift 5.0 (:3842-3844); ``raw_action_dim`` is required for policy and inverse
  dynamics (:2644-2647), ``action`` (a ``[T][D]`` array) for forward dynamics (:2636).

Things the stand-in cannot do are refused as 400s naming the key: RoboLab observations, a bare ``domain_id``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from PIL import Image

from ... import media
from ...protocol import action as proto
from ...protocol import vllm_omni as vo
from ...request import GenerationRequest
from .models import value_error

UNSUPPORTED = ("robot_obs", "observation")
DEFAULT_CHUNK = 16
DEFAULT_TIER = "480"


def is_action(extra: dict[str, Any]) -> bool:
    return extra.get("action_mode") not in (None, "")


def check(extra: dict[str, Any]) -> None:
    """Refuse, as 400s, the action keys the stand-in cannot serve and malformed ones vLLM-Omni would fail on."""
    for key in UNSUPPORTED:
        if key in extra:
            raise value_error(f"extra_params.{key}: RoboLab policy serving is not part of this stand-in.",
                              param=f"extra_params.{key}")
    if not is_action(extra):
        for key in ("action", "domain_name", "domain_id", "action_chunk_size", "raw_action_dim"):
            if key in extra:
                raise value_error(f"extra_params.{key} is read for action requests only; set "
                                  "extra_params.action_mode.", param=f"extra_params.{key}")
        return
    mode = str(extra["action_mode"]).strip().lower()
    if mode not in proto.MODES:
        raise value_error(f"Unsupported Cosmos3 action_mode={extra['action_mode']!r}; expected one of "
                          f"{sorted(proto.MODES)}.", param="extra_params.action_mode")
    name = str(extra.get("domain_name") or "").strip().lower()
    if name not in proto.VLLM_DOMAIN_ID or name not in proto.RAW_DIM:
        raise value_error(f"extra_params.domain_name {extra.get('domain_name')!r}: the stand-in needs an embodiment "
                          f"name with a known width, one of {sorted(set(proto.VLLM_DOMAIN_ID) & set(proto.RAW_DIM))}",
                          param="extra_params.domain_name")


def generation(req: Any, prompt: str, negative: str, extra: dict[str, Any], reference: Any,
               state: Any) -> GenerationRequest:
    """The action request for ``state``'s model, guardrails and step cache (the server's, as for every request)."""
    mode = str(extra["action_mode"]).strip().lower()
    embodiment = str(extra["domain_name"]).strip().lower()
    chunk, frames = _chunk(req, extra)
    width = proto.RAW_DIM[embodiment]
    raw = extra.get("raw_action_dim")
    if raw is None and mode != "forward_dynamics":
        raise value_error("Cosmos3 action_mode='policy' and 'inverse_dynamics' require extra_args['raw_action_dim'].",
                          param="extra_params.raw_action_dim")
    if raw is not None and int(raw) != width:
        raise value_error(f"extra_params.raw_action_dim {raw} is not {embodiment}'s width {width}.",
                          param="extra_params.raw_action_dim")
    if reference is None:
        raise value_error(f"action_mode {mode!r} needs an input_reference (the start image, or the video).",
                          param="input_reference")
    size = _size(req, extra, reference)
    media_kwargs: dict[str, Any] = {}
    if mode == "inverse_dynamics":
        if reference.kind != "video":
            raise value_error("inverse_dynamics infers actions from a video: send the clip as input_reference.",
                              param="input_reference")
        frames_in = media.load_video_frames(reference.video, max_frames=frames)[0]
        media_kwargs["video"] = np.stack([np.asarray(pad_into(Image.fromarray(f), *size)) for f in frames_in])
    else:
        first = reference.image if reference.kind == "image" else Image.fromarray(
            media.load_video_frames(reference.video, max_frames=1)[0][0])
        media_kwargs["image"] = pad_into(first, *size)
    if mode == "forward_dynamics":
        if extra.get("action") is None:
            raise value_error("Cosmos3 forward_dynamics action mode requires extra_args['action'] (a JSON array / "
                              "nested list / tensor of shape [T, D]).", param="extra_params.action")
        media_kwargs["actions"] = _rows(extra["action"], chunk)
    return GenerationRequest(
        mode=mode, prompt=prompt, negative_prompt=negative or None, model=state.model, embodiment=embodiment,
        tier=_tier(*size), num_frames=frames, fps=req.fps or vo.VIDEO_DEFAULTS["fps"],
        num_inference_steps=req.num_inference_steps or proto.VLLM_DEFAULTS["num_inference_steps"],
        guidance_scale=given(req.guidance_scale, proto.VLLM_DEFAULTS["guidance_scale"]),
        flow_shift=given(extra.get("flow_shift"), given(req.flow_shift, proto.VLLM_DEFAULTS["flow_shift"])),
        seed=given(req.seed, random.randint(0, vo.VIDEO_SEED_MAX)), step_cache=state.step_cache,
        guardrails=state.guardrails and bool(extra.get("guardrails", True)), **media_kwargs)


def video_action(request: Any, predicted: np.ndarray | None) -> dict[str, Any] | None:
    """The job record's ``action`` (``VideoAction``, protocol/videos.py:332): the predicted actions, or forward
    dynamics' conditioned (given) ones, as vLLM-Omni returns them for every action mode."""
    request = None if request is None else request.resolve()
    if request is None or not request.is_action:
        return None
    data = np.asarray(predicted if predicted is not None else request.actions, dtype=np.float32)
    return {"data": data.tolist(), "shape": list(data.shape), "dtype": "torch.float32",
            "raw_action_dim": int(data.shape[-1]), "action_mode": request.mode,
            "domain_id": proto.VLLM_DOMAIN_ID[request.embodiment]}


def pad_into(image: Image.Image, width: int, height: int) -> Image.Image:
    """vLLM-Omni's ``_resize_and_pad_action_image``: scale down (never up) to fit, pad right and bottom."""
    image = image.convert("RGB")
    scale = min(width / image.width, height / image.height, 1.0)
    resized = (max(1, int(scale * image.width + 0.5)), max(1, int(scale * image.height + 0.5)))
    if resized != image.size:
        image = image.resize(resized, Image.Resampling.BICUBIC)
    pad_h, pad_w = height - resized[1], width - resized[0]
    if not pad_h and not pad_w:
        return image
    mode = "reflect" if pad_h < resized[1] and pad_w < resized[0] else "edge"
    return Image.fromarray(np.pad(np.asarray(image), ((0, pad_h), (0, pad_w), (0, 0)), mode=mode))


def _chunk(req: Any, extra: dict[str, Any]) -> tuple[int, int]:
    frames, chunk = req.num_frames, extra.get("action_chunk_size")
    chunk = int(chunk) if chunk is not None else DEFAULT_CHUNK if frames is None else frames - 1
    frames = chunk + 1 if frames is None else frames
    if chunk <= 0 or frames not in (chunk, chunk + 1):
        raise value_error("Cosmos3 action requests require num_frames to equal action_chunk_size or "
                          f"action_chunk_size + 1; got num_frames={frames}, action_chunk_size={chunk}.",
                          param="num_frames")
    if frames == chunk:
        raise value_error("num_frames == action_chunk_size: the stand-in makes action_chunk_size + 1 frames only.",
                          param="num_frames")
    return chunk, frames


def _size(req: Any, extra: dict[str, Any], reference: Any) -> tuple[int, int]:
    if req.size is not None:
        return tuple(map(int, req.size.lower().split("x")))
    if req.width is not None and req.height is not None:
        return int(req.width), int(req.height)
    tier = str(extra.get("resolution", extra.get("image_size", DEFAULT_TIER)))
    if tier not in proto.TIERS:
        raise value_error(f"Unknown Cosmos3 action resolution={tier!r}; expected one of {list(proto.TIERS)}.",
                          param="extra_params.resolution")
    height, width = proto.closest_bin(tier, reference.size[1], reference.size[0])
    return width, height


def _tier(width: int, height: int) -> str:
    """The action tier whose canvas holds ``width x height`` unscaled, so the video keeps the size asked for."""
    for tier in proto.TIERS:
        if proto.output_size(tier, height, width) == (height, width):
            return tier
    raise value_error(f"size {width}x{height}: the stand-in makes action videos in multiples of 16 that fit a "
                      f"{'/'.join(proto.TIERS)} canvas.", param="size")


def _rows(value: Any, chunk: int) -> np.ndarray:
    """vLLM-Omni's ``load_action_tensor`` then its fit to the chunk: a short trajectory repeats its last row, a long
    one is cut (pipeline_cosmos3.py:2636-2643)."""
    try:
        rows = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise value_error("extra_params.action is not numeric.", param="extra_params.action") from None
    if rows.ndim == 3 and rows.shape[0] == 1:
        rows = rows[0]
    if rows.ndim != 2 or not len(rows):
        raise value_error(f"Cosmos3 action must have shape [T, D], got {tuple(rows.shape)}.",
                          param="extra_params.action")
    if len(rows) < chunk:
        rows = np.concatenate([rows, np.repeat(rows[-1:], chunk - len(rows), axis=0)])
    return rows[:chunk]


def given(value: Any, default: Any) -> Any:
    return default if value is None else value
