"""Depth / seg control videos of a clip, written as the framework reads a supplied control, and reused safely.

One ``estimated_<kind>.mp4`` per kind with the clip's frame count, size (odd sides made even) and fps, so the
framework lines it up with the RGB input frame for frame, at the framework's own control quality (CRF 0); beside it
an ``estimated_<kind>.json`` record (model, clip hash, shape) says when a rerun may reuse it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from .. import media
from ..errors import OutputExistsError, ValidationError
from ..protocol.framework import IMAGE_FPS, PROMPT_DEFAULTS, is_url, video_crf
from .estimation import DEFAULT_BATCH, ControlEstimator, check_models, resolve_model

FORMAT_VERSION = 1
FILE = "estimated_{kind}"


def control_video_path(folder: str | os.PathLike[str], kind: str) -> Path:
    return (Path(folder) / f"{FILE.format(kind=kind)}.mp4").expanduser().resolve()


def write_control_videos(clip: str | os.PathLike[str], models: Mapping[str, str], folder: str | os.PathLike[str], *,
                         max_frames: int | None = None, device: str | None = None, batch_size: int = DEFAULT_BATCH,
                         overwrite: bool = False, progress: bool = True) -> dict[str, Path]:
    """``{kind: path}`` of the control video of ``clip`` for each ``kind -> model`` (made now or reused). Every model
    and every existing file is checked before any model loads."""
    if clip is None or is_url(clip):
        raise ValidationError("vision_path", f"computing controls needs a local RGB clip, got {clip!r}.",
                              "set vision_path to a local video (download it first).")
    specs = {kind: resolve_model(kind, name) for kind, name in check_models(models).items()}
    video = media.read_media(clip, max_frames=max_frames, field="vision_path")
    frames, fps = video.frames, float(video.fps or IMAGE_FPS)
    base = {"format": FORMAT_VERSION, "clip_sha256": media.file_sha256(clip), "max_frames": max_frames,
            "frames": int(frames.shape[0]), "width": int(frames.shape[2]), "height": int(frames.shape[1]), "fps": fps}
    paths = {kind: control_video_path(folder, kind) for kind in specs}
    records = {kind: {**base, **spec.to_dict()} for kind, spec in specs.items()}
    for kind in [kind for kind in specs if not _reusable(paths[kind], records[kind], overwrite)]:
        maps = ControlEstimator(kind, specs[kind], device=device)(frames, batch_size=batch_size, progress=progress)
        record = {**records[kind], "labels": {name: list(color) for name, color in maps.labels.items()}}
        media.write_mp4(paths[kind], maps.frames, fps, crf=video_crf(PROMPT_DEFAULTS["video_save_quality"]),
                        overwrite=True)
        media.write_bytes_atomic(paths[kind].with_suffix(".json"), (json.dumps(record, indent=2) + "\n").encode(),
                                 overwrite=True)
    return paths


def read_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record of a control video written here (model, clip hash, labels...), or ``None``."""
    record = Path(path).with_suffix(".json")
    return json.loads(record.read_text()) if record.is_file() else None


def _reusable(path: Path, record: Mapping[str, Any], overwrite: bool) -> bool:
    """True when ``path`` was made from the same clip with the same model; refuse another run's file."""
    if not path.exists():
        return False
    old = read_record(path)
    if old is not None and {k: old.get(k) for k in record} == dict(record):
        return True
    if overwrite:
        return False
    raise OutputExistsError(f"{path} already exists from another clip or model; pass overwrite=True (--overwrite), "
                            "choose another name, or another output folder.")
