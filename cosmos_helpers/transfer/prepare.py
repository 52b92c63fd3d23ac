"""Everything a transfer needs before a model is touched: geometry, control videos, length, fps, chunks, prompts.

This is the framework's reading of a transfer sample (``inference/transfer.py:378-480``): the RGB input is fitted to
``resolution`` x ``aspect_ratio``; without one, the first control sets the aspect; edge and blur maps are computed
from the fitted RGB frames; the first control sets the length; the output fps is the RGB input's, else the
sample's; the prompt is formatted for one chunk. No model is loaded here, so a bad control fails in milliseconds.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import media
from ..errors import ValidationError
from ..presets import VIDEO_SIZES
from ..protocol.framework import IMAGE_FPS, TRANSFER_SAMPLE_DEFAULTS
from ..specs.resolve import ResolvedSample
from .controls import bucket_for, compute_control, load_control
from .plan import check_control_consistency, chunk_length, format_transfer_prompt, plan_chunks


@dataclass
class PreparedTransfer:
    """A resolved transfer sample with its media read and fitted.

    ``controls`` maps hint -> uint8 ``(T_i, H, W, 3)`` fitted to the bucket (not yet padded); ``rgb`` is the fitted
    RGB input (or ``None``); ``prompt``/``negative`` are the exact texts that are tokenised.
    """

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

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        return tuple(self.controls)

    @property
    def weights(self) -> tuple[float, ...]:
        return self.spec.normalized_weights

    @property
    def num_steps(self) -> int:
        return self.spec.num_steps

    def tokens_per_item(self, patch: int = 2, spatial: int = 16, temporal: int = 4) -> int:
        """Vision tokens of one item (control or target) of a chunk: ``latent_t * ceil(H/32) * ceil(W/32)``."""
        latent_t = (self.chunk_frames - 1) // temporal + 1
        return latent_t * math.ceil(self.height / spatial / patch) * math.ceil(self.width / spatial / patch)

    def summary(self) -> str:
        r = self.spec
        hints = ", ".join(f"{k} ({w:.2f})" for k, w in zip(self.hint_kinds, self.weights))
        return (f"transfer {self.width}x{self.height}, {self.total_frames} frames @ {self.fps:g} fps in "
                f"{len(self.chunks)} chunk(s) of {self.chunk_frames}, hints {hints}, {r.num_steps} steps, guidance "
                f"{r.guidance:g}, control_guidance {r.control_guidance:g}, shift {r.shift:g}, seed {self.seed}")


def prepare_transfer(r: ResolvedSample, *, aspect_ratio: str | None = None, fps: float | None = None,
                     emit_warnings: bool = True) -> PreparedTransfer:
    """Read and fit the media of a resolved transfer sample (local paths: URLs are fetched before this).

    ``aspect_ratio`` and ``fps`` replace the framework's rules for the bucket's aspect and the output fps (vLLM-Omni
    picks both its own way; see ``transfer.vllm``).
    """
    if not r.is_transfer:
        raise ValidationError("model_mode", "this sample has no control hint, so it is not a transfer.",
                              "add edge/blur/depth/seg/wsm, or run it as a generation.")
    if r.resolution not in VIDEO_SIZES:
        raise ValidationError("resolution", f"unknown tier {r.resolution!r}.", f"use one of {', '.join(VIDEO_SIZES)}.")
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
        field_name = f"{hint.kind}.control_path"
        if hint.control_path is not None:
            if size is None:  # the framework: the aspect comes from the first control without vision_path
                probe = media.read_media(hint.control_path, max_frames=1, field=field_name).frames
                size = bucket_for(probe, r.resolution, aspect_ratio)
            frames, control_fps = load_control(hint.control_path, *size, max_frames=r.max_frames, field=field_name)
            if not controls:
                raw = media.read_media(hint.control_path, max_frames=r.max_frames, field=field_name).frames
                notes += check_control_consistency(r, raw, control_fps, input_fps=rgb_fps, hint=hint.kind, emit=False)
        else:
            frames = compute_control(hint.kind, rgb, hint.preset)
        controls[hint.kind] = frames
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


__all__ = ["PreparedTransfer", "prepare_transfer"]
