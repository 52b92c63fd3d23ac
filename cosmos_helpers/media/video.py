"""Reading video (and its sound) through PyAV, fitting frames to a size the way the Cosmos Framework does, and
describing a conditioning input for manifests and fingerprints."""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import ValidationError
from .atomic import file_sha256
from .image import IMAGE_SUFFIXES, _existing, load_image, read_image, to_uint8


@dataclass
class VideoData:
    """Decoded media: frames ``(T,H,W,3)`` uint8, fps (``None`` for a still), and sound ``(C,N)`` float32."""
    frames: np.ndarray
    fps: float | None
    sound: np.ndarray | None = None
    sample_rate: int | None = None


def check_video(source: Any, *, field: str = "video") -> None:
    """Fail now if ``source`` is not a decodable video (path) or a ``TxHxWx3`` array."""
    if isinstance(source, (str, Path)):
        path = _existing(source, field, "video")
        try:
            probe_video(path)
        except Exception as exc:  # PyAV raises many types for broken files
            raise ValidationError(field, f"{path} is not a readable video ({exc}).",
                                  "give an MP4 (H.264) or another FFmpeg-readable video.") from None
        return
    if isinstance(source, np.ndarray):
        if source.ndim == 4 and source.shape[-1] == 3 and source.shape[0] >= 1:
            return
        raise ValidationError(field, f"a video array must be TxHxWx3, got shape {source.shape}.",
                              "pass a TxHxWx3 uint8 array or a video file path.")
    if isinstance(source, (list, tuple)) and source:
        return
    raise ValidationError(field, f"cannot use a {type(source).__name__} as a video.",
                          "pass a file path, a list of PIL images or a TxHxWx3 uint8 array.")


def _open_av(source: str | Path | bytes):
    """A PyAV container for a file, or for an encoded file held in memory (a server's MP4 answer)."""
    import av
    return av.open(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else str(source))


def probe_video(path: str | Path | bytes) -> dict[str, Any]:
    """Frame count, fps, size and audio presence, decoding the first frame to prove it is readable."""
    with _open_av(path) as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        first = next(container.decode(stream))
        fps = float(stream.average_rate or stream.guessed_rate or 0) or None
        audio = container.streams.audio[0] if container.streams.audio else None
        return {"width": first.width, "height": first.height, "fps": fps, "frames": stream.frames or None,
                "audio_rate": audio.rate if audio else None, "audio_channels": audio.channels if audio else None}


def iter_frames(path: str | Path | bytes, *,
                max_frames: int | None = None) -> tuple[Iterator[np.ndarray], float, int, int]:
    """``(frames, fps, width, height)``: the uint8 RGB frames of a video file (or its bytes), decoded lazily."""
    container = _open_av(path)
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    fps = float(stream.average_rate or stream.guessed_rate or stream.base_rate or 24)
    width, height = stream.codec_context.width, stream.codec_context.height

    def frames() -> Iterator[np.ndarray]:
        try:
            for index, frame in enumerate(container.decode(stream)):
                if max_frames is not None and index >= max_frames:
                    break
                yield frame.to_ndarray(format="rgb24")
        finally:
            container.close()

    return frames(), fps, width, height


def read_video(path: str | Path | bytes, *, max_frames: int | None = None, with_audio: bool = False) -> VideoData:
    """A video file (or its bytes) decoded to uint8 ``(T,H,W,3)`` frames, its fps, and (``with_audio``) its sound."""
    frames, fps, _, _ = iter_frames(path, max_frames=max_frames)
    stacked = np.stack(list(frames))
    sound, rate = read_audio(path) if with_audio else (None, None)
    if sound is not None and sound.shape[-1] == 0:
        sound, rate = None, None
    return VideoData(stacked, fps, sound, rate)


def read_media(path: str | Path, *, max_frames: int | None = None, field: str = "path") -> VideoData:
    """An image (one frame, ``fps`` ``None``) or a video, by its suffix; a clear error for anything else."""
    path = _existing(path, field, "media")
    if max_frames is not None and max_frames < 1:
        raise ValidationError("max_frames", f"must be >= 1, got {max_frames}.", "use None for all frames.")
    if path.suffix.lower() in IMAGE_SUFFIXES:
        try:
            return VideoData(read_image(path)[None], None)
        except OSError as exc:
            raise ValidationError(field, f"cannot read image {path} ({exc}).", "use a PNG or JPEG file.") from None
    try:
        video = read_video(path, max_frames=max_frames)
    except Exception as exc:  # PyAV raises many types for broken files
        raise ValidationError(field, f"cannot decode {path} ({exc}).", "re-encode it as H.264 MP4.") from None
    if not len(video.frames):
        raise ValidationError(field, f"{path} contains no frames.", "pass a non-empty video.")
    return video


def load_video_frames(source: Any, *, max_frames: int | None = None) -> tuple[np.ndarray, float | None]:
    """uint8 ``(T, H, W, 3)`` frames and the fps (``None`` for arrays) from a path, array or list of images."""
    if isinstance(source, (str, Path)):
        video = read_video(source, max_frames=max_frames)
        return video.frames, video.fps
    frames = to_uint8(source if isinstance(source, np.ndarray) else np.stack([load_image(item) for item in source]))
    return (frames[:max_frames] if max_frames else frames), None


def read_audio(path: str | Path | bytes) -> tuple[np.ndarray | None, int | None]:
    """Decoded audio as float32 ``(channels, samples)`` and its sample rate, or ``(None, None)``."""
    with _open_av(path) as container:
        if not container.streams.audio:
            return None, None
        stream = container.streams.audio[0]
        chunks = []
        for frame in container.decode(stream):
            data = frame.to_ndarray()  # planar: (channels, samples); packed: interleaved samples
            chunks.append((data if frame.format.is_planar else data.reshape(-1, stream.channels).T).astype(np.float32))
        return (np.concatenate(chunks, axis=1) if chunks else np.zeros((stream.channels, 0), np.float32)), stream.rate


def fit_to_bucket(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Scale uint8 frames (``(T,H,W,3)`` or one ``(H,W,3)``) to cover ``width x height``, then centre-crop, with the
    Cosmos Framework's geometry (``inference/vision.py``: ``ceil`` of the scaled size, crop offset ``round((size -
    target) / 2)``, never a stretch); OpenCV's INTER_AREA / INTER_LINEAR stand in for torchvision's antialiased
    bilinear, so pixels can differ by a few levels."""
    import cv2
    array = np.asarray(frames)
    single = array.ndim == 3
    array = array[None] if single else array
    src_h, src_w = array.shape[1:3]
    if (src_w, src_h) != (width, height):
        scale = max(width / src_w, height / src_h)
        resize_w, resize_h = math.ceil(scale * src_w), math.ceil(scale * src_h)
        if (resize_w, resize_h) != (src_w, src_h):
            interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
            array = np.stack([cv2.resize(f, (resize_w, resize_h), interpolation=interpolation) for f in array])
        top, left = round((resize_h - height) / 2.0), round((resize_w - width) / 2.0)
        array = np.ascontiguousarray(array[:, top:top + height, left:left + width])
    return array[0] if single else array


def describe_media(source: Any) -> dict[str, Any]:
    """A JSON-safe description of a conditioning input: its path (if any) or shape, and a content hash."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        return {"path": str(path), "sha256": file_sha256(path) if path.is_file() else None}
    if isinstance(source, np.ndarray):
        array = np.ascontiguousarray(source)
    else:
        try:
            array = np.asarray(load_image(source))
        except TypeError:
            array = load_video_frames(source)[0]
    return {"array": list(array.shape), "sha256": hashlib.sha256(array.tobytes()).hexdigest()}
