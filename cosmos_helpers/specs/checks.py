"""What the framework rejects about a sample beyond field types, reported when the file is read.

Each rule is one the framework applies when it validates or builds a sample (``inference/args.py``), or one that
would only fail minutes later inside a run (a depth hint with nothing to read, overlapping chunks); a few catch
inputs the framework would silently run differently than written (both ``prompt`` and ``prompt_path``).
Every error names the field and says what to write.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ValidationError
from ..protocol import framework as fw

if TYPE_CHECKING:
    from .load import Sample

# Local files the framework requires to exist when it validates an input (FilePath / FilePathOrUrl fields).
_LOCAL_FILES: tuple[str, ...] = ("prompt_path", "vision_path", "sound_path", "action_path", "tensors_file",
                                 "pickle_file", "defaults_file")


def check_sample(sample: Sample, *, check_files: bool = True) -> None:
    """Raise :class:`ValidationError` for the first rule ``sample`` breaks."""
    f = sample.fields
    if f.prompt is not None and f.prompt_path is not None:
        raise ValidationError("prompt_path", "both prompt and prompt_path are given (the framework would silently "
                              "use prompt).", "keep only one of them.")
    _check_vision(sample)
    _check_modes(sample)
    if sample.is_transfer:
        _check_transfer(sample)
    else:
        _check_transfer_only_fields(sample)
    for key in ("guidance_interval", "control_guidance_interval"):
        interval = getattr(f, key)
        if interval is not None and interval[0] > interval[1]:
            raise ValidationError(key, f"lo > hi in {list(interval)}: the interval is empty (active iff lo < t < hi).",
                                  f"write [{interval[1]:g}, {interval[0]:g}].")
    if check_files:
        _check_files(sample)


def _check_vision(sample: Sample) -> None:
    vision = sample.fields.vision_path
    if vision is None:
        return
    suffix = Path(vision.split("?")[0]).suffix.lower()
    if suffix not in fw.IMAGE_EXTENSIONS + fw.VIDEO_EXTENSIONS:
        raise ValidationError("vision_path", f"{suffix or 'no extension'} is not an input the framework reads "
                              "(\"Invalid vision extension\").",
                              f"use an image ({', '.join(fw.IMAGE_EXTENSIONS)}) or an .mp4 video.")


def _check_modes(sample: Sample) -> None:
    f, mode = sample.fields, sample.mode
    if mode in fw.SOUND_CONDITION_MODES and f.sound_path is None:
        raise ValidationError("sound_path", f"model_mode {mode} needs a conditioning audio clip.", "set sound_path.")
    if mode == "forward_dynamics" and f.action_path is None:
        raise ValidationError("action_path", "model_mode forward_dynamics needs the actions to play.",
                              "set action_path to the action JSON file.")
    if mode in ("image2video", "image2image") and f.vision_path is None:
        raise ValidationError("vision_path", f"model_mode {mode} needs a conditioning image.", "set vision_path.")
    if mode == "video2video" and f.vision_path is None and not sample.is_transfer:
        raise ValidationError("vision_path", "model_mode video2video needs a conditioning video.", "set vision_path.")


def _check_transfer_only_fields(sample: Sample) -> None:
    for key in fw.TRANSFER_ONLY_FIELDS:
        if sample.given(key):
            raise ValidationError(key, "is a transfer field, but the sample has no control hint (the framework "
                                  "rejects it).", f"add a hint ({', '.join(fw.HINT_KINDS)}) or remove {key}.")
    guidance = sample.fields.control_guidance
    if guidance is not None and guidance != 1.0:
        raise ValidationError("control_guidance", f"{guidance:g} needs a control hint (the framework rejects it).",
                              f"add a hint ({', '.join(fw.HINT_KINDS)}) or remove control_guidance.")


def _check_transfer(sample: Sample) -> None:
    f, mode = sample.fields, sample.mode
    if mode not in fw.TRANSFER_MODES:
        inferred = "" if f.model_mode else " (inferred from num_frames 1)"
        raise ValidationError("model_mode", f"transfer cannot run as {mode}{inferred}: it produces video.",
                              'set "model_mode": "video2video"; the output length comes from the control, so image '
                              "transfer needs a one-frame control, not num_frames 1.")
    if f.sound_path is not None or f.enable_sound:
        field = "sound_path" if f.sound_path is not None else "enable_sound"
        raise ValidationError(field, "transfer cannot be combined with sound (control guidance rejects it).",
                              f"remove {field}, or run the sound generation as its own sample.")
    weights = []
    for kind in sample.hint_kinds:
        hint = getattr(f, kind)
        if kind not in fw.COMPUTABLE_HINTS and hint.control_path is None:
            raise ValidationError(f"{kind}.control_path", f"{kind} maps cannot be computed from RGB; a precomputed "
                                  "control video is required.", f"set {kind}.control_path to the {kind} video.")
        if hint.control_path is None and f.vision_path is None:
            raise ValidationError(f"{kind}.control_path", f"the {kind} hint has neither a control_path nor a "
                                  "vision_path to compute it from.", f"set {kind}.control_path or vision_path.")
        weight = 1.0 if hint.weight is None else float(hint.weight)
        if not math.isfinite(weight) or weight < 0:
            raise ValidationError(f"{kind}.weight", f"must be a finite number >= 0, got {hint.weight}.",
                                  "use e.g. 1.0.")
        weights.append(weight)
    if sum(weights) <= 0:
        raise ValidationError("weight", f"all hint weights are zero ({dict(zip(sample.hint_kinds, weights))}); "
                              "they are normalised by their sum.", "give at least one hint a positive weight.")
    defaults = fw.TRANSFER_SAMPLE_DEFAULTS
    tuned = fw.HINT_TUNED_DEFAULTS[sample.hint_kinds[0]] if len(sample.hint_kinds) == 1 else {}
    chunk_given = f.num_video_frames_per_chunk or tuned.get("num_video_frames_per_chunk")
    chunk = fw.round_up_frames(chunk_given or defaults["num_video_frames_per_chunk"])
    n_cond = defaults["num_conditional_frames"] if f.num_conditional_frames is None else f.num_conditional_frames
    if n_cond >= chunk:
        raise ValidationError("num_conditional_frames", f"{n_cond} overlap frames leave no new frames in a "
                              f"{chunk}-frame chunk.", f"use fewer than {chunk} (usually 1), or a longer "
                              "num_video_frames_per_chunk.")
    if (f.num_first_chunk_conditional_frames or 0) > 0 and f.vision_path is None:
        raise ValidationError("num_first_chunk_conditional_frames", "first-chunk conditioning frames come from "
                              "vision_path, which is not set.", "set vision_path or use 0.")


def _check_files(sample: Sample) -> None:
    checks = [(key, getattr(sample.fields, key)) for key in _LOCAL_FILES]
    checks += [(f"{kind}.control_path", getattr(sample.fields, kind).control_path) for kind in sample.hint_kinds]
    for key, value in checks:
        if value is None or fw.is_url(value):
            continue
        path = Path(sample.path(value))
        if not path.is_file():
            fix = "fix the path (relative paths are relative to the input file's folder)"
            if key in ("edge.control_path", "blur.control_path"):
                fix += ", or remove control_path to compute the map from vision_path"
            raise ValidationError(key, f"file not found: {path}.", fix + ".")
    negative = sample.fields.negative_prompt_file
    if negative is not None and not fw.is_url(negative):
        path = Path(sample.path(negative))
        if not path.is_file() and Path(negative).parent != Path("."):
            raise ValidationError("negative_prompt_file", f"file not found: {path}.",
                                  "fix the path, or give the bare name of a file in the framework's defaults/.")
