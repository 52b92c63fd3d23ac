"""A transfer's chunk plan, the prompt text it tokenises, and what the framework does when a control disagrees.

Chunks: ``inference/transfer.py:43-54``: one chunk when the video fits, else chunks of the 4k+1-rounded length that
overlap by ``num_conditional_frames``. Prompts (``inference/inference.py:422-503``, ``transfer.py:470-476``): the
metadata of a JSON caption or the sentence templates of plain text are written for *one chunk* at the output fps
(an integer), the negative gets the same or inverse sentences per ``negative_metadata_mode``, then the control
directive is appended. The metadata itself is :func:`cosmos_helpers.prompts.with_metadata` /
:func:`~cosmos_helpers.prompts.with_templates`, the one home of that rule.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import ValidationError
from ..prompts import parse_caption, with_metadata, with_templates
from ..protocol.framework import (CONTROL_DIRECTIVE, HINT_KINDS, TRANSFER_SAMPLE_DEFAULTS, detect_aspect_ratio,
                                  round_up_frames)
from ..specs.resolve import ResolvedSample


def chunk_length(total_frames: int, chunk: int) -> int:
    """The chunk the framework generates: 1 for a single frame, else ``chunk`` rounded up to 4k+1."""
    return 1 if total_frames == 1 else round_up_frames(chunk)


def plan_chunks(total_frames: int, chunk: int, n_cond: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` frame ranges of the autoregressive chunks.

    Each range is sliced from the controls and mirror-padded to the chunk length; chunk c > 0 reuses the last
    ``n_cond`` frames of chunk c - 1, so consecutive ranges overlap by ``n_cond`` frames.
    """
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
    """The (prompt, negative) text the framework tokenises for a transfer run; an empty negative is ``None``.

    ``chunk_frames`` is the chunk length (not the video length) and ``fps`` the output fps, used as the integer the
    framework passes. A JSON-object prompt gets its metadata injected; a plain prompt the duration and resolution
    sentences of ``r``'s templates.
    """
    fps_int = round(float(fps))
    caption = parse_caption(prompt)
    if isinstance(caption, dict):
        text = with_metadata(caption, width=width, height=height, num_frames=chunk_frames, fps=fps_int,
                             aspect_ratio=r.aspect_ratio)
    else:
        text = with_templates(prompt, width=width, height=height, num_frames=chunk_frames, fps=fps_int,
                              duration_template=r.duration_template, resolution_template=r.resolution_template)
    neg = negative
    if r.negative_metadata_mode in ("same", "inverse"):
        inverse = r.negative_metadata_mode == "inverse"
        neg = with_templates(negative or "", width=width, height=height, num_frames=chunk_frames, fps=fps_int,
                             duration_template=r.inverse_duration_template if inverse else r.duration_template,
                             resolution_template=r.inverse_resolution_template if inverse else r.resolution_template,
                             force_duration=inverse).lstrip(".").strip()
    if r.emphasize_control_in_prompt and r.hints:
        text = text.rstrip() + " " + control_directive(r.hint_kinds)
    return text, neg or None


def check_control_consistency(r: ResolvedSample, control_frames: Any, control_fps: float, *,
                              input_fps: float | None = None, hint: str | None = None,
                              emit: bool = True) -> list[str]:
    """Say what the framework will do when the first control disagrees with the sample.

    The length comes from the first control (``num_frames`` does not cap it), the output fps from ``vision_path``
    if set (else the sample's ``fps``, never the control's), and without ``vision_path`` the geometry from the
    control's own aspect while the prompt metadata keeps ``aspect_ratio``. ``control_frames`` is a frame count or
    the frames ``[T, H, W, 3]``. Each message is returned and, with ``emit``, also warned.
    """
    kind = hint or (r.hint_kinds[0] if r.hints else "control")
    shape = getattr(control_frames, "shape", None)
    count = int(shape[0]) if shape is not None else int(control_frames)
    messages: list[str] = []
    frames = count
    if r.max_frames is not None and count > r.max_frames:
        frames = r.max_frames
        messages.append(f"{kind} control has {count} frames, more than max_frames {r.max_frames}: the framework reads "
                        f"only the first {r.max_frames}.")
    if frames != r.num_frames and not r.sources.get("num_frames", "").startswith("profile"):
        messages.append(f"{kind} control has {frames} frames, the sample asks {r.num_frames}: the output will have "
                        f"{frames} frames, as the framework does (the length comes from the first control; "
                        "num_frames does not cap it).")
    chunk = r.chunk_frames
    if chunk is not None and 1 < frames < chunk:
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


__all__ = ["check_control_consistency", "chunk_length", "control_directive", "format_transfer_prompt",
           "plan_chunks"]
