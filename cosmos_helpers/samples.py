"""Our own sample media, drawn by code from a seed so they are small, free to redistribute and reproducible: an image,
a clip, a sound, a trajectory per embodiment with a drive rendered along it (inverse dynamics' input and its answer),
and prompts and media of the tiny model's synthetic world (:func:`write_world_samples`).
``python -m cosmos_helpers.samples DIR`` rewrites the committed copies.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from . import media
from .presets import SOUND_SAMPLE_RATE
from .prompting.captions import save_caption
from .protocol import action as proto
from .trajectories import integrate_poses, pose_deltas, yaw_matrix
from .world import caption, caption_json, render_uint8
from .world.scenes import place


def rolling_ball_clip(num_frames: int = 33, width: int = 320, height: int = 180, seed: int = 7) -> np.ndarray:
    """A red ball rolling across a checkered floor under a gradient sky, uint8 ``(T, H, W, 3)``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    horizon = int(height * 0.45)
    sky = np.stack([110 + 60 * yy / horizon, 160 + 50 * yy / horizon, np.full_like(yy, 235)], axis=-1)
    depth = np.maximum(yy - horizon, 1.0)
    u = (xx - width / 2) / depth * 40
    v = 400.0 / depth
    checker = ((np.floor(u / 8) + np.floor(v)) % 2).astype(np.float32)
    floor = np.stack([90 + 100 * checker, 80 + 90 * checker, 60 + 70 * checker], axis=-1)
    background = np.where((yy >= horizon)[..., None], floor, sky)
    background += rng.normal(0, 3, background.shape).astype(np.float32)
    frames = np.empty((num_frames, height, width, 3), np.uint8)
    radius = height * 0.14
    for index in range(num_frames):
        t = index / max(1, num_frames - 1)
        cx = width * (0.15 + 0.7 * t)
        cy = height * 0.72 - abs(math.sin(t * math.pi * 2)) * height * 0.12
        frame = background.copy()
        shadow = ((xx - cx) / (radius * 1.3)) ** 2 + ((yy - height * 0.86) / (radius * 0.35)) ** 2 < 1
        frame[shadow] *= 0.55
        dist = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
        ball = dist < radius
        light = np.clip(1.15 - ((xx - cx + radius * 0.35) ** 2 + (yy - cy + radius * 0.35) ** 2) / (2.2 * radius**2),
                        0.35, 1.15)
        stripe = (np.sin((xx - cx) / radius * 3 + t * 12) > 0.6) & ball
        frame[ball] = np.stack([220 * light, 40 * light, 35 * light], axis=-1)[ball]
        frame[stripe] = [245, 235, 220]
        frames[index] = np.clip(frame, 0, 255).astype(np.uint8)
    return frames


def chime_sound(duration_s: float = 1.0, sample_rate: int = SOUND_SAMPLE_RATE) -> np.ndarray:
    """A two-note chime with a soft bounce rhythm, float32 stereo ``(2, N)`` in [-1, 1]."""
    t = np.arange(int(duration_s * sample_rate), dtype=np.float64) / sample_rate
    envelope = np.exp(-3.0 * (t % 0.5))
    notes = np.array([[440.0], [660.0]])  # left, right
    return (0.4 * np.sin(2 * np.pi * notes * t) * envelope).astype(np.float32)


def write_samples(folder: str | Path, *, overwrite: bool = False) -> dict[str, Path]:
    """Write the sample image, clip and sound into ``folder`` (the cookbooks' ``assets``)."""
    folder = Path(folder)
    clip = rolling_ball_clip()
    paths = {"image": folder / "images" / "rolling_ball.png", "video": folder / "videos" / "rolling_ball.mp4",
             "sound": folder / "sounds" / "chime.wav"}
    media.write_png(paths["image"], clip[0], overwrite=overwrite)
    media.write_mp4(paths["video"], clip, 24.0, crf=23, overwrite=overwrite)
    media.write_wav(paths["sound"], chime_sound(), SOUND_SAMPLE_RATE, overwrite=overwrite)
    return paths


# mode -> (file stem, (colour, shape, direction, speed, floor) of its scene): the cookbooks' prompts and inputs
WORLD_SAMPLES = {
    "text2image": ("red_box", ("red", "box", "left", "quickly", "dark floor")),
    "text2video": ("blue_ball_rolls_left", ("blue", "ball", "left", "slowly", "sand floor")),
    "image2video": ("yellow_ball_rolls_right", ("yellow", "ball", "right", "quickly", "dark floor")),
    "video2video": ("blue_box_slides_left", ("blue", "box", "left", "quickly", "grey floor")),
}
_SOUNDS = {"text2video", "image2video"}  # these also get a structured caption with a sound description


def _world_sound(scene) -> str:
    """The sound :func:`cosmos_helpers.world.sound` makes for ``scene``, in words (short: the model reads bytes)."""
    pan = {"left": "pans from right to left", "right": "pans from left to right"}.get(scene.direction, "stays centred")
    return f"A steady {'pure' if scene.shape == 'ball' else 'hollow'} tone that {pan}."


def write_world_samples(folder: str | Path, *, overwrite: bool = False, fps: float = 24.0,
                        frames: int = 9, width: int = 320, height: int = 180) -> dict[str, Path]:
    """Prompts (a sentence each, and a structured caption with sound for two of them), the image-to-video image
    and the video-to-video clip, for :data:`WORLD_SAMPLES`, into ``folder``."""
    folder, paths = Path(folder), {}
    for mode, (name, key) in WORLD_SAMPLES.items():
        scene = place(key, np.random.default_rng(0), frames=frames, width=width, height=height)
        paths[f"{mode}_prompt"] = folder / "prompts" / mode / f"{name}.txt"
        media.write_bytes_atomic(paths[f"{mode}_prompt"], (caption(scene, style=0) + "\n").encode(),
                                 overwrite=overwrite)
        if mode in _SOUNDS:
            rich = {**caption_json(scene, frames=frames, fps=fps), "audio_description": _world_sound(scene)}
            paths[f"{mode}_sound_prompt"] = save_caption(rich, folder / "prompts" / mode / f"{name}_sound.json",
                                                         overwrite=overwrite)
        if mode in ("image2video", "video2video"):
            clip = render_uint8([scene], width=width, height=height, frames=frames)[0]
            if mode == "image2video":
                paths["world_image"] = media.write_png(folder / "images" / f"{name}.png", clip[0],
                                                       overwrite=overwrite)
            else:
                paths["world_video"] = media.write_mp4(folder / "videos" / f"{name}.mp4", clip, fps, crf=18,
                                                       overwrite=overwrite)
    return paths


def sample_trajectory(embodiment: str, steps: int, *, speed: float = 0.5, turn_deg: float = 2.0) -> np.ndarray:
    """``(steps, D)`` float32 for ``embodiment``: forward ``speed`` while turning ``turn_deg`` per step; each further
    9-D pose block repeats it at a tenth of the size, each grasp value closes (0 -> 1) at half-way."""
    width = proto.RAW_DIM[embodiment]
    t = np.arange(steps)
    yaw = np.full(steps, np.radians(turn_deg))
    translation = np.stack([np.full(steps, speed), 0.02 * speed * np.sin(t / 3.0), np.zeros(steps)], axis=-1)
    pose = pose_deltas(translation, yaw_matrix(yaw))
    rows, used = ([pose], proto.POSE_DIM) if width >= proto.POSE_DIM else ([], 0)
    while width - used >= proto.POSE_DIM + 1:  # further arms: a smaller pose delta and a gripper each
        rows += [pose_deltas(translation * 0.1, yaw_matrix(yaw * 0.5)), (t >= steps // 2)[:, None].astype(np.float32)]
        used += proto.POSE_DIM + 1
    if width - used > 0:
        rows.append(np.repeat((t >= steps // 2)[:, None], width - used, axis=1).astype(np.float32))
    return np.concatenate(rows, axis=1)[:, :width].astype(np.float32)


def render_drive(actions: np.ndarray, width: int = 128, height: int = 80, *, seed: int = 3,
                 camera_height: float = 1.2, focal: float | None = None) -> np.ndarray:
    """uint8 ``(T + 1, height, width, 3)``: the view from a camera that starts at the origin looking along +x
    (z up) and moves by each row's pose delta, over a road lined with coloured posts."""
    positions, rotations = integrate_poses(actions)
    rng = np.random.default_rng(seed)
    length = float(np.abs(positions[:, 0]).max() + np.abs(positions[:, 1]).max()) + 30.0
    count = 60
    posts = np.stack([rng.uniform(2.0, length, count), rng.choice([-1.0, 1.0], count) * rng.uniform(2.5, 6.0, count),
                      np.zeros(count)], axis=-1)
    colours = rng.integers(40, 255, (count, 3)).astype(np.uint8)
    focal = focal or 0.9 * width
    frames = []
    for position, rotation in zip(positions, rotations):
        frame = np.empty((height, width, 3), dtype=np.uint8)
        horizon = height // 2
        frame[:horizon], frame[horizon:] = (150, 190, 235), (96, 100, 92)  # sky, ground
        local = (posts - position) @ rotation  # world -> camera axes (x forward, y left, z up)
        for index in np.argsort(-local[:, 0]):  # far to near
            depth, side = local[index, 0], local[index, 1]
            if depth < 0.5:
                continue
            u = width / 2 - focal * side / depth
            half = max(1.0, focal * 0.25 / depth)
            top, bottom = horizon - focal * (2.5 - camera_height) / depth, horizon + focal * camera_height / depth
            x0, x1 = int(max(0, u - half)), int(min(width, u + half + 1))
            y0, y1 = int(max(0, top)), int(min(height, bottom + 1))
            if x0 < x1 and y0 < y1:
                frame[y0:y1, x0:x1] = colours[index]
        frames.append(frame)
    return np.stack(frames)


if __name__ == "__main__":  # pragma: no cover
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    written = {**write_samples(folder, overwrite="--overwrite" in sys.argv),
               **write_world_samples(folder, overwrite="--overwrite" in sys.argv)}
    for name, path in written.items():
        print(f"{name}: {path} ({path.stat().st_size} bytes)")
