"""Writing video and sound: H.264 yuv420p (every browser plays it) with AAC stereo at 48 kHz muxed in, and WAV."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ..presets import SOUND_SAMPLE_RATE
from .atomic import atomic_path
from .image import to_uint8

# H.264 quality of what this project encodes itself: visually lossless, still small.
DEFAULT_CRF = 18


def write_mp4(path: str | Path, frames: np.ndarray | Iterable[np.ndarray], fps: float, *,
              sound: np.ndarray | None = None, sample_rate: int = SOUND_SAMPLE_RATE, crf: int = DEFAULT_CRF,
              preset: str = "medium", max_side: int | None = None, faststart: bool = False,
              profile: str | None = None, audio_bitrate: int | None = None, overwrite: bool = False) -> Path:
    """Encode frames (``(T,H,W,3)`` or any iterable of ``(H,W,3)``) as H.264 yuv420p, with AAC stereo for ``sound``
    (``(C,N)`` floats in [-1, 1]). ``max_side`` downsizes (even sizes) for previews; ``faststart`` puts the index
    first so a player starts before the download ends."""
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
    audio = np.atleast_2d(np.asarray(sound, dtype=np.float32))
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


def write_wav(path: str | Path, sound: np.ndarray, sample_rate: int, *, overwrite: bool = False) -> Path:
    """16-bit PCM WAV from float ``(C, N)`` samples in [-1, 1]."""
    import wave
    audio = np.atleast_2d(np.asarray(sound, dtype=np.float32))
    pcm = (np.clip(audio, -1, 1) * 32767).round().astype("<i2").T.tobytes()
    with atomic_path(path, overwrite=overwrite) as tmp:
        with wave.open(str(tmp), "wb") as handle:
            handle.setnchannels(audio.shape[0])
            handle.setsampwidth(2)
            handle.setframerate(sample_rate)
            handle.writeframes(pcm)
    return Path(path)
