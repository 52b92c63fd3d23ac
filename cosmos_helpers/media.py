"""The one reader and writer of images, video and sound: atomic, never clobbering, with the usual file mode.

Video goes through PyAV (FFmpeg's libraries): H.264 in yuv420p, which every browser plays, with AAC stereo at
48 kHz muxed in when there is sound. Every write goes to a temporary name in the target folder and is
published with ``os.link`` (which refuses to clobber) or ``os.replace`` when overwriting was asked for, so a
crash or a full disk never leaves a half-written final file. Published files get the mode the process umask
gives (``0666 & ~umask``), like any other tool's output, so a shared workshop folder can read them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import math
import os
import secrets
import shutil
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from .errors import OutputExistsError, ValidationError
from .presets import SOUND_SAMPLE_RATE

# H.264 quality of what this project encodes itself: visually lossless, still small.
DEFAULT_CRF = 18
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


def _create_partial(final: Path) -> Path:
    """A new empty file beside ``final``, created with mode 0666 so the kernel applies the umask (0644 with the
    usual 022) as for any other tool's output; ``mkstemp``'s 0600 would hide it from a shared workshop folder."""
    while True:
        tmp = final.with_name(f".{final.name}.{secrets.token_hex(4)}.partial{final.suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_path(final: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; publish it as ``final`` only if the block succeeds.

    Without ``overwrite`` an existing ``final`` raises :class:`OutputExistsError` (checked before the work
    and again at publish time, so a concurrent writer cannot be clobbered either).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not overwrite:
        raise OutputExistsError(f"{final} already exists; pass overwrite=True or choose another name.")
    tmp = _create_partial(final)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        _publish(tmp, final, overwrite)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _publish(tmp: Path, final: Path, overwrite: bool) -> None:
    if overwrite:
        os.replace(tmp, final)
        return
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise OutputExistsError(f"{final} appeared while writing; pass overwrite=True or choose another name.") \
            from None
    except OSError:
        # Filesystems without hard links: fall back to a checked rename.
        if final.exists():
            raise OutputExistsError(f"{final} already exists; pass overwrite=True or choose another name.") from None
        os.replace(tmp, final)


def write_bytes_atomic(path: str | Path, data: bytes, *, overwrite: bool = False) -> Path:
    with atomic_path(path, overwrite=overwrite) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def copy_file_atomic(source: str | Path, target: str | Path, *, overwrite: bool = False) -> Path:
    """Publish a copy of ``source`` at ``target`` byte for byte (a finished file is never re-encoded)."""
    with atomic_path(target, overwrite=overwrite) as tmp:
        shutil.copyfile(source, tmp)
    return Path(target)


def load_image(source: Any):
    """An RGB PIL image from a path, a PIL image or an ``HxWx3`` (or ``HxW``) array."""
    from PIL import Image

    if isinstance(source, (str, Path)):
        with Image.open(source) as img:
            return img.convert("RGB")
    if isinstance(source, Image.Image):
        return source.convert("RGB")
    if isinstance(source, np.ndarray):
        return Image.fromarray(to_uint8(source if source.ndim == 3 else source[..., None].repeat(3, -1)))
    raise TypeError(f"cannot read an image from {type(source).__name__}")


def check_image(source: Any, *, field: str = "image") -> None:
    """Fail now, with the field named, if ``source`` cannot become an RGB image."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, (str, Path)):
        path = _existing(source, field, "image")
        try:
            with Image.open(path) as img:
                img.verify()
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise ValidationError(field, f"{path} is not a readable image ({exc}).",
                                  "give a PNG, JPEG or WebP file.") from None
        return
    if isinstance(source, Image.Image):
        return
    if isinstance(source, np.ndarray):
        if (source.ndim == 3 and source.shape[-1] in (3, 4)) or source.ndim == 2:
            if min(source.shape[:2]) < 1:
                raise ValidationError(field, f"the image array is empty ({source.shape}).", "pass an HxWx3 array.")
            return
        raise ValidationError(field, f"an image array must be HxWx3, got shape {source.shape}.",
                              "pass an HxWx3 uint8 array (or a PIL image / file path).")
    raise ValidationError(field, f"cannot use a {type(source).__name__} as an image.",
                          "pass a file path, a PIL image or an HxWx3 uint8 array.")


def _existing(source: str | Path, field: str, kind: str) -> Path:
    path = Path(source)
    if not path.is_file():
        raise ValidationError(field, f"{kind} file {path} does not exist.",
                              f"check the path (relative paths are resolved from {Path.cwd()}).")
    return path


def image_bytes(frame: np.ndarray, fmt: str = "PNG", *, quality: int = 95) -> bytes:
    """One frame encoded as PNG, JPEG or WebP (``quality`` for the lossy ones)."""
    from PIL import Image

    buffer = io.BytesIO()
    options = {} if fmt.upper() == "PNG" else {"quality": int(quality)}
    Image.fromarray(to_uint8(frame)).save(buffer, format=fmt.upper(), **options)
    return buffer.getvalue()


def write_png(path: str | Path, frame: np.ndarray, *, overwrite: bool = False) -> Path:
    return write_bytes_atomic(path, image_bytes(frame, "PNG"), overwrite=overwrite)


def read_image(path: str | Path) -> np.ndarray:
    """A still image file as uint8 ``(H, W, 3)``."""
    return np.asarray(load_image(path))


def to_uint8(array: np.ndarray) -> np.ndarray:
    """Float frames in [0, 1] become uint8 the way diffusers' PIL output does (round half to even x 255)."""
    array = np.asarray(array)
    if array.dtype == np.uint8:
        return array
    if np.issubdtype(array.dtype, np.floating):
        return np.clip(np.round(array * 255.0), 0, 255).astype(np.uint8)
    return np.clip(array, 0, 255).astype(np.uint8)


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
    path = Path(path)
    if not path.is_file():
        raise ValidationError(field, f"file not found: {path}.", "check the path.")
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
    if isinstance(source, np.ndarray):
        frames = to_uint8(source)
    else:
        frames = np.stack([np.asarray(load_image(item)) for item in source])
    return (frames[:max_frames] if max_frames else frames), None


def read_audio(path: str | Path | bytes) -> tuple[np.ndarray | None, int | None]:
    """Decoded audio as float32 ``(channels, samples)`` and its sample rate, or ``(None, None)``."""
    with _open_av(path) as container:
        if not container.streams.audio:
            return None, None
        stream = container.streams.audio[0]
        chunks = []
        for frame in container.decode(stream):
            data = frame.to_ndarray()
            if frame.format.is_planar:
                chunks.append(data.astype(np.float32))
            else:
                chunks.append(data.reshape(-1, stream.channels).T.astype(np.float32))
        return (np.concatenate(chunks, axis=1) if chunks else np.zeros((stream.channels, 0), np.float32)), stream.rate


def write_mp4(path: str | Path, frames: np.ndarray | Iterable[np.ndarray], fps: float, *,
              sound: np.ndarray | None = None, sample_rate: int = SOUND_SAMPLE_RATE, crf: int = DEFAULT_CRF,
              preset: str = "medium", max_side: int | None = None, faststart: bool = False,
              profile: str | None = None, audio_bitrate: int | None = None, overwrite: bool = False) -> Path:
    """Encode frames (an array ``(T,H,W,3)`` or any iterable of ``(H,W,3)``) as H.264 yuv420p, with AAC stereo
    when ``sound`` (``(C,N)`` floats in [-1, 1]) is given.

    ``max_side`` downsizes (keeping the aspect, even sizes) for browser previews; ``faststart`` puts the index
    first so a player starts before the download ends.
    """
    with atomic_path(path, overwrite=overwrite) as tmp:
        _encode(tmp, iter(frames), fps, sound, sample_rate, crf=crf, preset=preset, max_side=max_side,
                faststart=faststart, profile=profile, audio_bitrate=audio_bitrate)
    return Path(path)


def _encode(target: Path, frames: Iterator[np.ndarray], fps: float, sound: np.ndarray | None, sample_rate: int,
            **options: Any) -> None:
    import av

    first = next(frames, None)
    if first is None:
        raise ValueError("no frames to encode")
    height, width = first.shape[:2]
    out_w, out_h = even_size(width, height, options["max_side"])
    container_options = {"movflags": "+faststart"} if options["faststart"] else {}
    with av.open(str(target), mode="w", format="mp4", options=container_options) as container:
        vstream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        vstream.width, vstream.height = out_w, out_h
        vstream.pix_fmt = "yuv420p"
        vstream.options = {"crf": str(options["crf"]), "preset": options["preset"],
                           **({"profile": options["profile"]} if options["profile"] else {})}
        astream = None
        if sound is not None and np.asarray(sound).size:
            astream = container.add_stream("aac", rate=int(sample_rate))
            astream.layout = "stereo"
            if options["audio_bitrate"]:
                astream.bit_rate = options["audio_bitrate"]
        for array in itertools.chain([first], frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(to_uint8(array)), format="rgb24")
            if (out_w, out_h) != (width, height):
                frame = frame.reformat(width=out_w, height=out_h, interpolation="AREA")
            container.mux(vstream.encode(frame))
        container.mux(vstream.encode())
        if astream is not None:
            _encode_audio(container, astream, sound, int(sample_rate))


def _encode_audio(container, stream, sound: np.ndarray, sample_rate: int) -> None:
    import av

    audio = np.asarray(sound, dtype=np.float32)
    if audio.ndim == 1:
        audio = audio[None]
    if audio.shape[0] == 1:
        audio = np.repeat(audio, 2, axis=0)
    audio = np.clip(audio[:2], -1.0, 1.0)
    chunk = 1024
    for start in range(0, audio.shape[1], chunk):
        piece = np.ascontiguousarray(audio[:, start:start + chunk])
        frame = av.AudioFrame.from_ndarray(piece, format="fltp", layout="stereo")
        frame.sample_rate = sample_rate
        frame.pts = start
        frame.time_base = Fraction(1, sample_rate)
        container.mux(stream.encode(frame))
    container.mux(stream.encode())


def even_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """``(width, height)`` scaled so the longer side is at most ``max_side``, both even (yuv420p)."""
    scale = 1.0 if not max_side or max(width, height) <= max_side else max_side / max(width, height)
    return max(2, int(round(width * scale / 2)) * 2), max(2, int(round(height * scale / 2)) * 2)


def fit_to_bucket(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Scale uint8 frames (``(T,H,W,3)`` or one ``(H,W,3)``) to cover ``width x height``, then centre-crop.

    The Cosmos Framework's resize (``inference/vision.py``): ``ceil`` of the scaled size, crop offset
    ``round((size - target) / 2)``, never a stretch. It resamples with torchvision's antialiased bilinear; here
    OpenCV's INTER_AREA (shrinking) / INTER_LINEAR (enlarging) do the same job, so pixels can differ by a few
    levels but the geometry is identical.
    """
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


def center_crop_to_aspect(image, width: int, height: int):
    """Crop a PIL image to the target aspect (centre), keeping as many pixels as possible.

    A server that stretches an input to ``WxH`` then leaves it undistorted.
    """
    src_w, src_h = image.size
    target = width / height
    if abs(src_w / src_h - target) < 1e-3:
        return image
    if src_w / src_h > target:
        new_w = max(1, round(src_h * target))
        left = (src_w - new_w) // 2
        return image.crop((left, 0, left + new_w, src_h))
    new_h = max(1, round(src_w / target))
    top = (src_h - new_h) // 2
    return image.crop((0, top, src_w, top + new_h))


def write_wav(path: str | Path, sound: np.ndarray, sample_rate: int, *, overwrite: bool = False) -> Path:
    """16-bit PCM WAV from float ``(C, N)`` samples in [-1, 1]."""
    import wave

    audio = np.asarray(sound, dtype=np.float32)
    audio = audio[None] if audio.ndim == 1 else audio
    pcm = (np.clip(audio, -1, 1) * 32767).round().astype("<i2").T.tobytes()
    with atomic_path(path, overwrite=overwrite) as tmp:
        with wave.open(str(tmp), "wb") as handle:
            handle.setnchannels(audio.shape[0])
            handle.setsampwidth(2)
            handle.setframerate(sample_rate)
            handle.writeframes(pcm)
    return Path(path)


def describe_media(source: Any) -> dict[str, Any]:
    """A JSON-safe description of a conditioning input: its path (if any) and a content hash."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        return {"path": str(path), "sha256": file_sha256(path) if path.is_file() else None}
    if isinstance(source, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(source).tobytes()).hexdigest()
        return {"array": list(source.shape), "sha256": digest}
    try:
        array = np.asarray(load_image(source))
    except TypeError:
        array = load_video_frames(source)[0]
    return {"array": list(array.shape), "sha256": hashlib.sha256(array.tobytes()).hexdigest()}


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()
