"""Small, browser-safe previews (H.264 + AAC, ``+faststart``, capped at ``max_side``): never ship a full-resolution
file to a browser or into a notebook. A saved ``clip.mp4`` gets ``clip.preview.mp4`` beside it; anything else gets
one in :func:`cache_dir`, named by a content hash.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Iterable

import numpy as np

from .. import media
from ..presets import SOUND_SAMPLE_RATE
from .items import Item

DEFAULT_MAX_SIDE = 480
PREVIEW_CRF = 28
PREVIEW_PRESET = "veryfast"
AUDIO_BITRATE = 128_000


def cache_dir() -> Path:
    path = Path(os.environ.get("COSMOS_HELPERS_PREVIEW_DIR") or Path(tempfile.gettempdir(), "cosmos-helpers-previews"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_preview(item: Item, max_side: int | None = DEFAULT_MAX_SIDE) -> Path:
    """The preview MP4 of a video item, made (or remade, when stale) on demand (where: the module docstring)."""
    if item.is_image:
        raise ValueError("images have no video preview; use poster_jpeg() or image_bytes()")
    if item.path is not None:
        if ".preview" in item.path.name and item.path.suffix == ".mp4":  # already a preview
            return item.path
        if item.is_output:  # a saved result: the preview lives beside it (galleries link it there)
            tag = "" if max_side == DEFAULT_MAX_SIDE else str(max_side or "full")  # clip.preview320.mp4 for 320
            target = item.path.with_name(f"{item.path.stem}.preview{tag}.mp4")
            with suppress(PermissionError):
                if not fresh(target, item.path):
                    transcode_file(item.path, target, max_side=max_side)
                return target
        # Inputs (assets, control videos) and read-only folders: never write beside them; use the cache.
        key = hashlib.sha1(f"{item.path.resolve()}|{item.path.stat().st_mtime_ns}|{max_side}".encode()).hexdigest()
        target = cache_dir() / f"{item.path.stem}-{key[:16]}.preview.mp4"
        if not fresh(target, item.path):
            transcode_file(item.path, target, max_side=max_side)
        return target
    frames = item.frames()
    sound, rate = item.sound()
    digest = hashlib.sha1(np.ascontiguousarray(frames).tobytes())
    digest.update(f"{item.fps}|{max_side}|{rate}".encode())
    if sound is not None:
        digest.update(np.ascontiguousarray(sound).tobytes())
    target = cache_dir() / f"{digest.hexdigest()[:20]}.preview.mp4"
    if not target.exists():
        _write_preview(target, iter(frames), item.fps, sound, rate, max_side)
    return target


def fresh(target: Path, source: Path) -> bool:
    """``target`` was made from ``source`` after its last change (and is not an empty leftover)."""
    try:
        return target.stat().st_mtime_ns >= source.stat().st_mtime_ns and target.stat().st_size > 0
    except FileNotFoundError:
        return False


def transcode_file(source: str | Path, target: str | Path, *, max_side: int | None = DEFAULT_MAX_SIDE) -> Path:
    """Stream ``source`` (any FFmpeg-readable video) into a small H.264 + AAC preview at ``target``."""
    frames, fps, _, _ = media.iter_frames(source)
    sound, rate = media.read_audio(source)
    _write_preview(Path(target), frames, fps, sound, rate or SOUND_SAMPLE_RATE, max_side)
    return Path(target)


def _write_preview(target: Path, frames: Iterable[np.ndarray], fps: float, sound: np.ndarray | None,
                   sample_rate: int, max_side: int | None) -> None:
    media.write_mp4(target, frames, fps, sound=sound, sample_rate=sample_rate, crf=PREVIEW_CRF,
                    preset=PREVIEW_PRESET, max_side=max_side, faststart=True, profile="main",
                    audio_bitrate=AUDIO_BITRATE, overwrite=True)


def still_bytes(frame: np.ndarray, max_side: int | None = DEFAULT_MAX_SIDE, fmt: str = "JPEG", *,
                quality: int = 85, size: tuple[int, int] | None = None) -> bytes:
    """One frame as JPEG or PNG: shrunk to fit ``max_side``, or resized to exactly ``size`` (width, height)."""
    from PIL import Image

    image = Image.fromarray(media.to_uint8(frame))
    if size is None and max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    if size is not None and image.size != tuple(size):
        image = image.resize(tuple(size), Image.LANCZOS)
    return media.image_bytes(np.asarray(image), fmt, quality=quality)


def poster_jpeg(item: Item, max_side: int | None = DEFAULT_MAX_SIDE, frame: int | None = None) -> bytes:
    """A JPEG of one frame (the middle one by default): posters, thumbnails, contact sheets."""
    return still_bytes(item.frame(frame), max_side)


def image_bytes(item: Item, max_side: int | None = DEFAULT_MAX_SIDE) -> tuple[bytes, str]:
    """A still for display: PNG when small enough to stay lossless, else JPEG. Returns (bytes, format)."""
    data = still_bytes(item.frame(0), max_side, "PNG")
    if len(data) <= 400_000:
        return data, "png"
    return still_bytes(item.frame(0), max_side, quality=90), "jpeg"


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def embed_limit() -> int:
    """Largest preview (bytes) embedded in a static document; ``COSMOS_HELPERS_EMBED_LIMIT`` overrides."""
    try:
        return int(os.environ.get("COSMOS_HELPERS_EMBED_LIMIT", "") or 2_000_000)
    except ValueError:
        return 2_000_000
