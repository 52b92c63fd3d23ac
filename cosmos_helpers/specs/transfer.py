"""Everything a transfer needs before a model is touched (so a bad control fails in milliseconds), read as the
framework reads a transfer sample (``inference/transfer.py:378-480``, bucket and padding as ``inference/vision.py``):
the RGB input fitted to ``resolution`` x ``aspect_ratio`` (without one, the first control sets the aspect); edge and
blur maps computed from the fitted frames; the length from the first control; the fps from the RGB input, else the
sample. Chunks (``transfer.py:43-54``): one if the video fits, else 4k+1-long chunks overlapping by
``num_conditional_frames``. Prompts (``inference/inference.py:422-503``, ``transfer.py:470-476``): metadata or
template sentences for *one chunk* at the integer output fps, the negative's per ``negative_metadata_mode``, then the
control directive.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import media
from ..controls.maps import compute_control
from ..errors import ValidationError
from ..presets import VIDEO_SIZES, normalize_aspect
from ..prompts import parse_caption, with_metadata, with_templates
from ..protocol.framework import (CONTROL_DIRECTIVE, HINT_KINDS, IMAGE_FPS, TRANSFER_SAMPLE_DEFAULTS,
                                  detect_aspect_ratio, round_up_frames)
from .resolve import ResolvedSample, check_tier


def bucket_for(frames_or_size: np.ndarray | Sequence[int], resolution: str | int,
               aspect_ratio: str | None = None) -> tuple[int, int]:
    """(width, height) of the resolution bucket for some frames or a ``(width, height)`` size; without
    ``aspect_ratio`` the aspect is detected (what the framework does for a control without ``vision_path``)."""
    if isinstance(frames_or_size, np.ndarray):
        if frames_or_size.ndim not in (3, 4):
            raise ValidationError("frames", f"expected [T, H, W, 3] or [H, W, 3], got {frames_or_size.shape}.")
        height, width = frames_or_size.shape[-3], frames_or_size.shape[-2]
    else:
        width, height = (int(v) for v in frames_or_size)
    tier = check_tier(resolution)
    aspect = normalize_aspect(aspect_ratio) if aspect_ratio is not None else detect_aspect_ratio(width, height)
    if aspect not in VIDEO_SIZES[tier]:
        raise ValidationError("aspect_ratio", f"unknown aspect ratio {aspect_ratio!r}.",
                              f"use one of {', '.join(VIDEO_SIZES[tier])}.")
    return VIDEO_SIZES[tier][aspect]


def mirror_pad_indices(num_frames: int, length: int) -> list[int]:
    """Frame indices of ``mirror_pad``: 0 … T-1, T-1, T-2 … (edge frame repeated), iterated until long enough."""
    if num_frames < 1:
        raise ValidationError("frames", "cannot pad an empty clip.", "pass at least one frame.")
    indices = list(range(num_frames))
    if num_frames == 1:
        return indices * max(length, 1)
    while len(indices) < length:
        indices += indices[::-1][:min(len(indices) - 1, length - len(indices))]
    return indices


def mirror_pad(frames: np.ndarray, length: int) -> np.ndarray:
    """Pad frames in time to ``length`` the way the framework pads controls (never trims)."""
    array = np.asarray(frames)
    return array if array.shape[0] >= length else array[mirror_pad_indices(array.shape[0], length)]


def load_control(path: str | os.PathLike[str], width: int | None = None, height: int | None = None,
                 max_frames: int | None = None, *, field: str = "control_path") -> tuple[np.ndarray, float]:
    """A precomputed control video (or still: one frame at 1 fps) and its fps, fitted (cover + centre-crop) to
    ``width`` x ``height`` if given; never re-normalised: the model reads a control as the picture it is."""
    if (width is None) != (height is None):
        raise ValidationError("width", "give both width and height, or neither.", "pass the bucket's (width, height).")
    video = media.read_media(path, max_frames=max_frames, field=field)
    frames = video.frames if width is None else media.fit_to_bucket(video.frames, width, height)
    return frames, float(video.fps or IMAGE_FPS)


@dataclass
class PreparedTransfer:
    """A resolved transfer sample with its media read and fitted: ``controls`` maps hint -> uint8 ``(T_i, H, W, 3)``
    (not yet padded), ``rgb`` is the RGB input or ``None``, ``prompt``/``negative`` the exact texts tokenised."""
    spec: ResolvedSample
    width: int
    height: int
    fps: float
    total_frames: int
    chunk_frames: int
    chunks: list[tuple[int, int]]
    controls: dict[str, np.ndarray]
    rgb: np.ndarray | None
    prompt: str
    negative: str | None
    seed: int
    notes: list[str] = field(default_factory=list)


def prepare_transfer(r: ResolvedSample, *, aspect_ratio: str | None = None, fps: float | None = None,
                     emit_warnings: bool = True) -> PreparedTransfer:
    """Read and fit the media of a resolved transfer sample (local paths: URLs are fetched before this).
    ``aspect_ratio`` and ``fps`` replace the framework's rules for both (the vLLM-Omni stand-in picks its own)."""
    if not r.is_transfer:
        raise ValidationError("model_mode", "this sample has no control hint, so it is not a transfer.",
                              "add edge/blur/depth/seg/wsm, or run it as a generation.")
    check_tier(r.resolution)
    if r.seed is None:
        raise ValidationError("seed", "no seed and no output folder to derive one from.",
                              "set seed, or run through run_spec (which derives the framework's seed).")
    notes: list[str] = list(r.notes)
    rgb, rgb_fps, size = None, None, None
    if r.vision_path is not None:
        video = media.read_media(r.vision_path, max_frames=r.max_frames, field="vision_path")
        rgb_fps = float(video.fps or IMAGE_FPS)
        size = VIDEO_SIZES[r.resolution][aspect_ratio or r.aspect_ratio]
        rgb = media.fit_to_bucket(video.frames, *size)
    controls: dict[str, np.ndarray] = {}
    for hint in r.hints:
        if hint.control_path is None:
            controls[hint.kind] = compute_control(hint.kind, rgb, hint.preset)
            continue
        field_name = f"{hint.kind}.control_path"
        frames, control_fps = load_control(hint.control_path, max_frames=r.max_frames, field=field_name)
        size = size or bucket_for(frames, r.resolution, aspect_ratio)  # without vision_path: the control's aspect
        if not controls:
            notes += check_control_consistency(r, frames, control_fps, input_fps=rgb_fps, hint=hint.kind, emit=False)
        controls[hint.kind] = media.fit_to_bucket(frames, *size)
    total = int(next(iter(controls.values())).shape[0])
    for kind, frames in controls.items():
        if frames.shape[0] < total:
            notes.append(f"{kind} control has {frames.shape[0]} frames, fewer than the first control's {total}: it "
                         "is mirror-padded, as the framework does.")
    if r.share_vision_temporal_positions is False:
        notes.append("share_vision_temporal_positions=false: positions stay shared here (the model was trained so).")
    if r.show_input and rgb is None:
        notes.append("show_input needs vision_path; ignored.")
    fps = float(fps) if fps is not None else rgb_fps if rgb_fps is not None else float(r.fps)
    chunk = chunk_length(total, r.chunk_frames or TRANSFER_SAMPLE_DEFAULTS["num_video_frames_per_chunk"])
    chunks = plan_chunks(total, chunk, int(r.num_conditional_frames or 0))
    width, height = size
    prompt, negative = format_transfer_prompt(r.prompt, r.negative_prompt, r, width, height, chunk, fps)
    if emit_warnings:
        for note in notes:
            warnings.warn(note, stacklevel=2)
    return PreparedTransfer(spec=r, width=width, height=height, fps=fps, total_frames=total, chunk_frames=chunk,
                            chunks=chunks, controls=controls, rgb=rgb, prompt=prompt, negative=negative,
                            seed=int(r.seed), notes=notes)


def chunk_length(total_frames: int, chunk: int) -> int:
    return 1 if total_frames == 1 else round_up_frames(chunk)


def plan_chunks(total_frames: int, chunk: int, n_cond: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` frame ranges of the autoregressive chunks, each mirror-padded to the chunk length;
    chunk c > 0 reuses the last ``n_cond`` frames of chunk c - 1, so consecutive ranges overlap by ``n_cond``."""
    if total_frames < 1:
        raise ValidationError("total_frames", f"must be >= 1, got {total_frames}.", "pass a non-empty control.")
    if chunk < 1:
        raise ValidationError("num_video_frames_per_chunk", f"must be >= 1, got {chunk}.",
                              f"use e.g. {TRANSFER_SAMPLE_DEFAULTS['num_video_frames_per_chunk']}.")
    if n_cond < 0:
        raise ValidationError("num_conditional_frames", f"must be >= 0, got {n_cond}.", "use e.g. 1.")
    length = chunk_length(total_frames, chunk)
    if total_frames <= length:
        return [(0, total_frames)]
    stride = length - n_cond
    if stride <= 0:
        raise ValidationError("num_conditional_frames", f"{n_cond} overlap frames leave no new frames in a "
                              f"{length}-frame chunk.", f"use fewer than {length}.")
    count = 1 + math.ceil((total_frames - length) / stride)
    return [(c * stride, min(c * stride + length, total_frames)) for c in range(count)]


def control_directive(hint_kinds: Sequence[str]) -> str:
    """The sentence the framework appends to transfer prompts (hints in canonical order)."""
    return CONTROL_DIRECTIVE.format(hints=", ".join(k for k in HINT_KINDS if k in hint_kinds))


def format_transfer_prompt(prompt: str, negative: str | None, r: ResolvedSample, width: int, height: int,
                           chunk_frames: int, fps: float) -> tuple[str, str | None]:
    """The (prompt, negative) text the framework tokenises for a transfer run (an empty negative is ``None``)."""
    size = dict(width=width, height=height, num_frames=chunk_frames, fps=round(float(fps)))
    caption = parse_caption(prompt)
    if isinstance(caption, dict):
        text = with_metadata(caption, **size, aspect_ratio=r.aspect_ratio)
    else:
        text = with_templates(prompt, **size, duration_template=r.duration_template,
                              resolution_template=r.resolution_template)
    if r.negative_metadata_mode in ("same", "inverse"):
        inverse = r.negative_metadata_mode == "inverse"
        negative = with_templates(
            negative or "", **size, force_duration=inverse,
            duration_template=r.inverse_duration_template if inverse else r.duration_template,
            resolution_template=r.inverse_resolution_template if inverse else r.resolution_template).lstrip(".").strip()
    if r.emphasize_control_in_prompt and r.hints:
        text = text.rstrip() + " " + control_directive(r.hint_kinds)
    return text, negative or None


def check_control_consistency(r: ResolvedSample, control_frames: Any, control_fps: float, *,
                              input_fps: float | None = None, hint: str | None = None,
                              emit: bool = True) -> list[str]:
    """Say (return and, with ``emit``, warn) what the framework will do when the first control (a frame count or
    its ``[T, H, W, 3]`` frames) disagrees with the sample: see the messages."""
    kind = hint or (r.hint_kinds[0] if r.hints else "control")
    shape = getattr(control_frames, "shape", None)
    count = int(shape[0]) if shape is not None else int(control_frames)
    frames = count if r.max_frames is None else min(count, r.max_frames)
    messages: list[str] = []
    if frames < count:
        messages.append(f"{kind} control has {count} frames, more than max_frames {r.max_frames}: the framework reads "
                        f"only the first {r.max_frames}.")
    if frames != r.num_frames and not r.sources.get("num_frames", "").startswith("profile"):
        messages.append(f"{kind} control has {frames} frames, the sample asks {r.num_frames}: the output will have "
                        f"{frames} frames, as the framework does (the length comes from the first control; "
                        "num_frames does not cap it).")
    if (chunk := r.chunk_frames) is not None and 1 < frames < chunk:
        messages.append(f"{kind} control has {frames} frames, fewer than the {chunk}-frame chunk: the controls are "
                        f"mirror-padded to {chunk} frames and the output is trimmed back to {frames}.")
    if r.vision_path is not None:
        if input_fps is not None and control_fps and abs(float(input_fps) - float(control_fps)) > 1e-3:
            messages.append(f"{kind} control is {control_fps:g} fps but vision_path is {input_fps:g} fps: the output "
                            f"is written at {input_fps:g} fps (from vision_path), as the framework does.")
    elif control_fps and abs(float(control_fps) - r.fps) > 1e-3:
        ratio = float(control_fps) / r.fps
        speed = f"{ratio:.3g}x slower" if ratio > 1 else f"{1 / ratio:.3g}x faster"
        messages.append(f"{kind} control is {control_fps:g} fps, the sample's fps is {r.fps}: the output is written "
                        f"at {r.fps} fps (without vision_path the framework uses the sample's fps), so it plays "
                        f"{speed} than the control.")
    if r.vision_path is None and shape is not None and len(shape) >= 3:
        detected = detect_aspect_ratio(int(shape[2]), int(shape[1]))
        if detected != r.aspect_ratio:
            messages.append(f"{kind} control is {shape[2]}x{shape[1]} (aspect {detected}) but aspect_ratio is "
                            f"{r.aspect_ratio}: without vision_path the framework sizes the output from the control "
                            f"({detected}) while the prompt metadata says {r.aspect_ratio}; set "
                            f'"aspect_ratio": "{detected}".')
    if emit:
        for message in messages:
            warnings.warn(message, stacklevel=2)
    return messages
