"""Control videos for transfer: edge and blur maps computed from RGB, the bucket a control sets, temporal padding.

The maps follow the Cosmos Framework's inference augmentors exactly (same OpenCV calls, same parameters:
``protocol.framework.EDGE_THRESHOLDS``, ``BLUR_FACTORS``, ``BILATERAL``; same order), because the model was
trained on those maps: a "similar" Canny or blur produces a different control signal and visibly different
output. The bucket and temporal padding mirror ``inference/vision.py`` so a control prepared here lines up frame
for frame with what the framework would build from the same file; reading, resizing and writing go through
:mod:`cosmos_helpers.media`.

Frames are numpy ``uint8`` arrays ``[T, H, W, 3]`` in RGB (a single ``[H, W, 3]`` frame is accepted by the
map functions and returned in the same shape).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import cv2
import numpy as np

from .. import media
from ..errors import ValidationError
from ..presets import VIDEO_SIZES, normalize_aspect, normalize_tier
from ..protocol.framework import (BILATERAL, BLUR_FACTORS, BLUR_PRESETS, COMPUTABLE_HINTS, EDGE_PRESETS,
                                  EDGE_THRESHOLDS, HINT_KINDS, HINT_PRESET_DEFAULTS, IMAGE_FPS, detect_aspect_ratio)


class BlurParameters(NamedTuple):
    """What a blur preset does to a ``width x height`` frame; ``down_up_size`` is (width, height)."""

    k: int
    d: int
    sigma_color: float
    sigma_space: float
    down_up_size: tuple[int, int]


def _as_frames(frames: np.ndarray, field_name: str = "frames") -> tuple[np.ndarray, bool]:
    """``[T, H, W, 3]`` uint8 view of the input and whether it was a single ``[H, W, 3]`` frame."""
    array = np.asarray(frames)
    single = array.ndim == 3
    if single:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValidationError(
            field_name,
            f"expected RGB frames [T, H, W, 3] or one frame [H, W, 3], got shape {array.shape}.",
            "pass uint8 RGB frames (e.g. media.read_media(path).frames).",
        )
    if array.dtype != np.uint8:
        raise ValidationError(
            field_name,
            f"expected uint8 frames, got {array.dtype}.",
            "convert with np.clip(x, 0, 255).astype(np.uint8).",
        )
    if array.shape[0] == 0:
        raise ValidationError(field_name, "no frames.", "pass at least one frame.")
    return array, single


# ---------------------------------------------------------------------- maps


def edge_map(frames: np.ndarray, preset: str = HINT_PRESET_DEFAULTS["edge"]) -> np.ndarray:
    """Canny edges of each RGB frame, replicated to 3 channels (0 or 255).

    Canny runs on the 3-channel frame (OpenCV's multi-channel gradient), not on a grey conversion: that is
    what the framework's inference augmentor does. (Its post-training dataset used grey Canny with random
    thresholds; that is not what the model sees at inference.)
    """
    if preset not in EDGE_THRESHOLDS:
        raise ValidationError(
            "edge.preset_edge_threshold", f"unknown edge preset {preset!r}.", f"use one of {', '.join(EDGE_PRESETS)}."
        )
    array, single = _as_frames(frames)
    lower, upper = EDGE_THRESHOLDS[preset]
    edges = np.stack([cv2.Canny(np.ascontiguousarray(frame), lower, upper) for frame in array])
    out = np.repeat(edges[..., None], 3, axis=-1)
    return out[0] if single else out


def blur_parameters(width: int, height: int, preset: str) -> BlurParameters | None:
    """The blur pipeline's parameters for a frame size; ``None`` for ``"none"`` (identity).

    The bilateral filter is scaled by the longest side of the *downscaled* frame relative to 720 px, so
    the blur looks the same at every resolution; ``d`` is rounded (Python's round), kept >= 1 and made
    odd, sigmas are kept >= 1.
    """
    if preset not in BLUR_PRESETS:
        raise ValidationError(
            "blur.preset_blur_strength", f"unknown blur preset {preset!r}.", f"use one of {', '.join(BLUR_PRESETS)}."
        )
    if preset == "none":
        return None
    k, f = BLUR_FACTORS[preset]
    small_w, small_h = (max(1, width // k), max(1, height // k)) if k > 1 else (width, height)
    scale = max(small_w, small_h) / BILATERAL["reference_side"]
    d = max(1, round(BILATERAL["d"] * scale))
    if d % 2 == 0:
        d += 1
    sigma_color = max(1.0, BILATERAL["sigma_color"] * scale)
    sigma_space = max(1.0, BILATERAL["sigma_space"] * scale)
    return BlurParameters(k, d, sigma_color, sigma_space, (max(1, int(width / f)), max(1, int(height / f))))


def _blur_frame(frame: np.ndarray, params: BlurParameters) -> np.ndarray:
    height, width = frame.shape[:2]
    if params.k > 1:
        frame = cv2.resize(frame, (max(1, width // params.k), max(1, height // params.k)), interpolation=cv2.INTER_AREA)
    frame = cv2.bilateralFilter(frame, params.d, params.sigma_color, params.sigma_space)
    if params.k > 1:
        frame = cv2.resize(frame, (width, height), interpolation=cv2.INTER_LINEAR)
    frame = cv2.resize(frame, params.down_up_size, interpolation=cv2.INTER_CUBIC)
    return cv2.resize(frame, (width, height), interpolation=cv2.INTER_CUBIC)


def blur_map(frames: np.ndarray, preset: str = HINT_PRESET_DEFAULTS["blur"]) -> np.ndarray:
    """The framework's 4-stage blur: INTER_AREA down by k, bilateral, INTER_LINEAR up, INTER_CUBIC down-up by f.

    ``"none"`` returns the frames unchanged (a copy).
    """
    array, single = _as_frames(frames)
    params = blur_parameters(array.shape[2], array.shape[1], preset)
    if params is None:
        out = array.copy()
    else:
        out = np.stack([_blur_frame(np.ascontiguousarray(frame), params) for frame in array])
    return out[0] if single else out


def compute_control(kind: str, rgb_frames: np.ndarray, preset: str | None = None) -> np.ndarray:
    """Compute a control map from RGB frames; only edge and blur can be computed."""
    if kind == "edge":
        return edge_map(rgb_frames, preset or HINT_PRESET_DEFAULTS["edge"])
    if kind == "blur":
        return blur_map(rgb_frames, preset or HINT_PRESET_DEFAULTS["blur"])
    if kind in HINT_KINDS:
        raise ValidationError(
            f"{kind}.control_path",
            f"{kind} maps cannot be computed from RGB here (only {', '.join(COMPUTABLE_HINTS)} can).",
            f"provide a precomputed {kind} video as control_path.",
        )
    raise ValidationError("kind", f"unknown hint {kind!r}.", f"use one of {', '.join(HINT_KINDS)}.")


# ---------------------------------------------------------------------- geometry and time


def bucket_for(
    frames_or_size: np.ndarray | Sequence[int], resolution: str | int, aspect_ratio: str | None = None
) -> tuple[int, int]:
    """(width, height) of the resolution bucket for some frames or a ``(width, height)`` size.

    With ``aspect_ratio=None`` the aspect is detected from the frames (the framework's rule), which is what the
    framework does for a control when the sample has no ``vision_path``.
    """
    if isinstance(frames_or_size, np.ndarray):
        if frames_or_size.ndim not in (3, 4):
            raise ValidationError("frames", f"expected [T, H, W, 3] or [H, W, 3], got {frames_or_size.shape}.")
        height, width = frames_or_size.shape[-3], frames_or_size.shape[-2]
    else:
        width, height = (int(v) for v in frames_or_size)
    tier = normalize_tier(resolution)
    if tier not in VIDEO_SIZES:
        raise ValidationError("resolution", f"unknown tier {resolution!r}.", f"use one of {', '.join(VIDEO_SIZES)}.")
    aspect = normalize_aspect(aspect_ratio) if aspect_ratio is not None else detect_aspect_ratio(width, height)
    if aspect not in VIDEO_SIZES[tier]:
        raise ValidationError(
            "aspect_ratio", f"unknown aspect ratio {aspect_ratio!r}.", f"use one of {', '.join(VIDEO_SIZES[tier])}."
        )
    return VIDEO_SIZES[tier][aspect]


def mirror_pad_indices(num_frames: int, length: int) -> list[int]:
    """Frame indices of ``mirror_pad``: 0 … T-1, T-1, T-2 … (edge frame repeated), iterated until long enough."""
    if num_frames < 1:
        raise ValidationError("frames", "cannot pad an empty clip.", "pass at least one frame.")
    indices = list(range(num_frames))
    while len(indices) < length:
        pad = min(len(indices) - 1, length - len(indices))
        if pad <= 0:
            indices += [indices[-1]] * (length - len(indices))
            break
        indices += indices[::-1][:pad]
    return indices


def mirror_pad(frames: np.ndarray, length: int) -> np.ndarray:
    """Pad frames in time to ``length`` the way the framework pads controls (never trims)."""
    array = np.asarray(frames)
    if array.shape[0] >= length:
        return array
    return array[mirror_pad_indices(array.shape[0], length)]


def load_control(
    path: str | os.PathLike[str],
    width: int | None = None,
    height: int | None = None,
    max_frames: int | None = None,
    *,
    field: str = "control_path",
) -> tuple[np.ndarray, float]:
    """Read a precomputed control video (depth/seg/wsm, or a saved edge/blur map) and its fps.

    With ``width`` and ``height`` the frames are fitted to that bucket (cover + centre-crop, as the framework
    does); otherwise they are returned as stored. A still image is one frame at 1 fps, as the framework reads it.
    The values are not otherwise touched: a control is a picture the model reads, and re-normalising it would
    change what it says.
    """
    if (width is None) != (height is None):
        raise ValidationError("width", "give both width and height, or neither.", "pass the bucket's (width, height).")
    video = media.read_media(path, max_frames=max_frames, field=field)
    frames = video.frames
    if width is not None and height is not None:
        frames = media.fit_to_bucket(frames, width, height)
    return frames, float(video.fps or IMAGE_FPS)


__all__ = [
    "BLUR_FACTORS",
    "EDGE_THRESHOLDS",
    "BlurParameters",
    "blur_map",
    "blur_parameters",
    "bucket_for",
    "compute_control",
    "edge_map",
    "load_control",
    "mirror_pad",
    "mirror_pad_indices",
]
