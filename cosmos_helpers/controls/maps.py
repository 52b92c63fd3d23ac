"""Edge and blur control maps computed from RGB frames, exactly as the framework's inference augmentors make them
(``inference/vision.py``, ``data/generator/augmentors/transfer_control_input/``: the same OpenCV calls, parameters
and order; ``protocol.framework.EDGE_THRESHOLDS``, ``BLUR_FACTORS``, ``BILATERAL``), because the model was trained on
those maps: a "similar" Canny or blur is a different control signal and visibly different output (tests hold every
preset to maps the framework's own augmentor code makes: ``tests/transfer/golden/framework_maps-5eee9ed.npz``).
Frames are ``uint8`` RGB ``[T, H, W, 3]``; a single ``[H, W, 3]`` frame comes back in the same shape.
"""

from __future__ import annotations

from typing import NamedTuple

import cv2
import numpy as np

from ..errors import ValidationError
from ..protocol.framework import (BILATERAL, BLUR_FACTORS, BLUR_PRESETS, COMPUTABLE_HINTS, EDGE_PRESETS,
                                  EDGE_THRESHOLDS, HINT_KINDS, HINT_PRESET_DEFAULTS)
from .estimation import check_frames


class BlurParameters(NamedTuple):
    """What a blur preset does to a ``width x height`` frame; ``down_up_size`` is (width, height)."""
    k: int
    d: int
    sigma_color: float
    sigma_space: float
    down_up_size: tuple[int, int]


def edge_map(frames: np.ndarray, preset: str = HINT_PRESET_DEFAULTS["edge"]) -> np.ndarray:
    """Canny edges of each RGB frame, replicated to 3 channels (0 or 255). Canny runs on the 3-channel frame (OpenCV's
    multi-channel gradient), not on a grey conversion: that is what the framework's inference augmentor does. (Its
    post-training dataset used grey Canny with random thresholds; that is not what the model sees at inference.)"""
    if preset not in EDGE_THRESHOLDS:
        raise ValidationError("edge.preset_edge_threshold", f"unknown edge preset {preset!r}.",
                              f"use one of {', '.join(EDGE_PRESETS)}.")
    array = check_frames(frames, min_side=1)
    lower, upper = EDGE_THRESHOLDS[preset]
    edges = np.stack([cv2.Canny(np.ascontiguousarray(frame), lower, upper) for frame in array])
    out = np.repeat(edges[..., None], 3, axis=-1)
    return out[0] if np.ndim(frames) == 3 else out


def blur_parameters(width: int, height: int, preset: str) -> BlurParameters | None:
    """The blur pipeline's parameters for a frame size; ``None`` for ``"none"`` (identity). The bilateral filter is
    scaled by the longest side of the *downscaled* frame relative to 720 px, so the blur looks the same everywhere."""
    if preset not in BLUR_PRESETS:
        raise ValidationError("blur.preset_blur_strength", f"unknown blur preset {preset!r}.",
                              f"use one of {', '.join(BLUR_PRESETS)}.")
    if preset == "none":
        return None
    k, f = BLUR_FACTORS[preset]
    small_w, small_h = (max(1, width // k), max(1, height // k)) if k > 1 else (width, height)
    scale = max(small_w, small_h) / BILATERAL["reference_side"]
    d = max(1, round(BILATERAL["d"] * scale)) | 1  # odd
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
    ``"none"`` returns the frames unchanged (a copy)."""
    array = check_frames(frames, min_side=1)
    params = blur_parameters(array.shape[2], array.shape[1], preset)
    out = array.copy() if params is None else np.stack([_blur_frame(np.ascontiguousarray(f), params) for f in array])
    return out[0] if np.ndim(frames) == 3 else out


def compute_control(kind: str, rgb_frames: np.ndarray, preset: str | None = None) -> np.ndarray:
    if kind in ("edge", "blur"):
        return (edge_map if kind == "edge" else blur_map)(rgb_frames, preset or HINT_PRESET_DEFAULTS[kind])
    if kind in HINT_KINDS:
        only = ", ".join(COMPUTABLE_HINTS)
        raise ValidationError(f"{kind}.control_path", f"{kind} maps cannot be computed from RGB here (only {only} "
                              "can).", f"provide a precomputed {kind} video as control_path.")
    raise ValidationError("kind", f"unknown hint {kind!r}.", f"use one of {', '.join(HINT_KINDS)}.")
