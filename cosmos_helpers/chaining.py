"""Continuing a video: ``extend`` one ``Generation``, and how chained chunks join into one clip.

Cosmos3's video2video mode keeps some *latent* frames of a conditioning clip clean and denoises the rest
(``condition_frame_indexes_vision``; ``condition_video_keep='last'`` takes them from the end of the clip). Latent
indexes ``0..k-1`` hold ``4(k-1)+1`` pixel frames (the VAE's temporal stride), so a continuation is conditioned
on ``1, 5, 9, ...`` pixel frames of the previous clip, and its output *starts* with its own re-creation of them.

Joining drops those re-created frames (no frame twice, no crossfade); over them the old sound track fades linearly
into the new one, so the joined track is as long as the joined frames, without a click at the join.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .errors import ValidationError
from .protocol.framework import CONDITION_FRAMES, TEMPORAL_COMPRESSION, detect_aspect_ratio
from .request import GenerationRequest, ResolvedRequest
from .result import Generation

# Cosmos3's video2video default (latent frames (0, 1)) in pixel frames: 5.
DEFAULT_CONDITIONING_FRAMES = max(CONDITION_FRAMES["video"]) * TEMPORAL_COMPRESSION + 1
# What a continuation inherits from the request of the clip it continues (the rest is the continuation's own).
_NOT_INHERITED = ("mode", "prompt", "seed", "image", "video", "condition_frames", "condition_video_keep")


def latent_indexes(conditioning_frames: int) -> tuple[int, ...]:
    """The latent frames kept clean for ``conditioning_frames`` pixel frames (``1 + 4k`` of them)."""
    return tuple(range((conditioning_frames - 1) // TEMPORAL_COMPRESSION + 1))


def check_conditioning_frames(value: Any, num_frames: int, *, available: int | None = None) -> int:
    """The pixel frames a continuation is conditioned on (``None``: Cosmos3's v2v default): ``1 + 4k``, leaving a new
    latent frame in a ``num_frames`` chunk, at most the ``available`` frames of the clip continued."""
    stride = TEMPORAL_COMPRESSION
    if value is None:
        value = min(DEFAULT_CONDITIONING_FRAMES, num_frames - stride) if num_frames > stride else 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError("conditioning_frames", f"expected a whole number of frames, got {value!r}.",
                              f"pass e.g. conditioning_frames={DEFAULT_CONDITIONING_FRAMES}.")
    value = int(value)
    largest = num_frames - stride  # one latent frame (4 pixel frames) must stay new
    if value < 1 or (value - 1) % stride:
        lower = max(1, (value - 1) // stride * stride + 1)
        raise ValidationError("conditioning_frames", f"{value} is not of the form 1 + 4k: video2video keeps whole "
                              "latent frames clean (1 pixel frame, then 4 per latent frame).",
                              f"use {lower} or {lower + stride}.")
    if value > largest:
        raise ValidationError("conditioning_frames", f"{value} conditioning frames leave no new frame in a "
                              f"{num_frames}-frame chunk (each chunk must add at least {stride}).",
                              f"use at most {max(largest, 1)}, or more frames per chunk (num_frames).")
    if available is not None and value > available:
        raise ValidationError("conditioning_frames", f"the video to continue has only {available} frames, fewer "
                              f"than the {value} to condition on.", f"use at most {available}.")
    return value


def continuation_request(generation: Generation, prompt: Any, *, conditioning_frames: int | None = None,
                         seed: int | None = None, video: Any = None, **options: Any) -> GenerationRequest:
    """The video2video request that continues ``generation`` (see :func:`extend`); nothing is generated. ``video``
    is the clip sent (default: the generation's saved file, else its frames)."""
    if not isinstance(generation, Generation):
        raise ValidationError("generation", f"expected a Generation (a video to continue), got "
                              f"{type(generation).__name__}.", "pass what generate() returned, or "
                              "Generation.load('clip.mp4').")
    if generation.is_image:
        raise ValidationError("generation", "it is a single image; only a video can be continued.",
                              "generate a video first (mode='text2video' or 'image2video'), or start from the "
                              "image with mode='image2video'.")
    mode = options.pop("mode", "video2video")
    if mode not in ("video2video", "v2v"):
        raise ValidationError("mode", f"a continuation is a video2video generation, not {mode!r}.", "leave mode out.")
    settings = {**_inherited(generation, options), **options}
    media_path = generation.paths.get("media")
    source = video if video is not None else (Path(media_path).resolve() if media_path else generation.frames)
    request = GenerationRequest(mode="video2video", prompt=prompt, video=source, condition_frames=(0,),
                                condition_video_keep="last", seed=generation.seed + 1 if seed is None else seed,
                                **settings)
    count = check_conditioning_frames(conditioning_frames, request.resolve().num_frames,
                                      available=generation.num_frames)
    return request.replace(condition_frames=latent_indexes(count))


def extend(generation: Generation, prompt: Any, backend: Any, *, conditioning_frames: int | None = None,
           seed: int | None = None, **options: Any) -> Generation:
    """Continue a video: a video2video generation conditioned on its last ``conditioning_frames`` frames.

    Its other settings are those of the generation it continues (``options``, e.g. ``num_frames=17``, win); the seed
    defaults to its seed + 1. ``join([generation, chunk], [0, overlap_of(chunk.request)])`` makes one clip of them.
    """
    return backend.generate(continuation_request(generation, prompt, conditioning_frames=conditioning_frames,
                                                 seed=seed, **options))


def overlap_of(request: Any) -> int:
    """Pixel frames a chunk's request re-creates from the previous chunk (0 for the first chunk)."""
    if not isinstance(request, (GenerationRequest, ResolvedRequest)):
        return 0
    request = request.resolve()
    return max(request.condition_frames) * TEMPORAL_COMPRESSION + 1 if request.mode == "video2video" else 0


def join(chunks: Sequence[Generation], overlaps: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """``(frames, sound, starts)`` of chained chunks: ``overlaps[i]`` leading frames of chunk ``i`` dropped (the sound
    faded over them); ``starts[i]`` is where chunk ``i``'s kept frames begin in the joined video."""
    if len(chunks) != len(overlaps) or not chunks:
        raise ValueError("one overlap per chunk, and at least one chunk")
    first = chunks[0]
    if any(chunk.fps != first.fps or chunk.frames.shape[1:] != first.frames.shape[1:] for chunk in chunks):
        raise ValueError("chunks differ in size or frame rate; they cannot be joined")
    kept = [chunk.frames[overlap:] for chunk, overlap in zip(chunks, overlaps)]
    starts = np.cumsum([0] + [len(part) for part in kept[:-1]]).tolist()
    frames = np.concatenate(kept)
    with_sound = [chunk.sound is not None for chunk in chunks]
    if any(with_sound) and not all(with_sound):
        raise ValueError("some chunks have sound and some do not")
    return frames, join_sound(chunks, overlaps) if all(with_sound) else None, starts


def join_sound(chunks: Sequence[Generation], overlaps: Sequence[int]) -> np.ndarray:
    """One continuous track for the joined frames: each chunk's sound cut to its frames, the overlap faded."""
    rate, fps = chunks[0].sample_rate, chunks[0].fps

    def samples(frames: int) -> int:
        return int(round(frames * rate / fps))

    track = _fit(chunks[0].sound, samples(chunks[0].num_frames))
    for chunk, overlap in zip(chunks[1:], overlaps[1:]):
        sound = _fit(chunk.sound, samples(chunk.num_frames))
        fade = min(samples(overlap), track.shape[1])
        if fade:
            ramp = (np.arange(fade, dtype=np.float32) + 0.5) / fade
            track[:, -fade:] = track[:, -fade:] * (1 - ramp) + sound[:, :fade] * ramp
        track = np.concatenate([track, sound[:, samples(overlap):]], axis=1)
    return track


def _fit(sound: np.ndarray, length: int) -> np.ndarray:
    """Exactly ``length`` samples: a long tail trimmed, a short one padded with its last sample (no gap mid-clip)."""
    sound = np.asarray(sound, dtype=np.float32)
    if sound.shape[1] >= length:
        return sound[:, :length].copy()
    return np.pad(sound, ((0, 0), (0, length - sound.shape[1])), mode="edge")


def join_continuity(frames: np.ndarray, starts: Sequence[int]) -> dict[str, Any]:
    """How continuous a joined video is: the frame step across each join against the steps within chunks."""
    # the mean absolute difference (0-255) of each pair of consecutive frames: steps[i] is frame i -> i+1
    steps = np.abs(np.diff(np.asarray(frames, dtype=np.float32), axis=0)).mean(axis=(1, 2, 3))
    joins = [int(s) - 1 for s in starts[1:]]  # the step from a chunk's last kept frame to the next chunk's first
    within = np.delete(steps, joins)
    return {"join_steps": [float(steps[j]) for j in joins], "within_mean": float(within.mean()),
            "within_max": float(within.max()), "within_min": float(within.min()), "steps": steps.tolist(),
            "join_indexes": joins}


def _inherited(generation: Generation, options: dict[str, Any]) -> dict[str, Any]:
    """The settings of the clip continued: what its request was given, or a loaded clip's size, frame rate and sound."""
    request = generation.request
    if isinstance(request, (GenerationRequest, ResolvedRequest)):
        resolved = request.resolve()
        inherited = {name: getattr(resolved.request, name) for name in resolved.given.difference(_NOT_INHERITED)}
    else:
        # a loaded clip, or a joined long video: its picture and sound; the chunk length is the profile's
        inherited = {"width": generation.width, "height": generation.height, "fps": generation.fps,
                     "sound": generation.sound is not None}
    width, height = inherited.get("width"), inherited.get("height")
    if {"tier", "width", "height"} & set(options):  # a size given replaces the inherited one, however it was given
        inherited = {name: value for name, value in inherited.items() if name not in ("tier", "width", "height")}
    if {"width", "height"} & set(options):  # an exact size has its own shape; a tier keeps the clip's aspect ratio
        inherited.pop("aspect_ratio", None)
    elif "tier" in options and "aspect_ratio" not in inherited and width and height:
        inherited["aspect_ratio"] = detect_aspect_ratio(width, height)  # the clip's shape (as the framework reads it)
    return inherited
