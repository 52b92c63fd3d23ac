"""The transfer cookbook's own sample media, rendered by code: RGB clip, a depth-style control, prompts, a chime
(``python -m cosmos_helpers.transfer.assets DIR`` rewrites the committed copies).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from .. import media
from ..presets import SOUND_SAMPLE_RATE
from ..samples import chime_sound, rolling_ball_clip

CLIP_FRAMES = 33
CLIP_FPS = 24
CLIP_SIZE = (320, 180)

PROMPT = {
    "subject": "a glossy red ball with a cream stripe",
    "action": "the ball rolls from left to right across a checkered tile floor, bouncing twice",
    "setting": "a bright courtyard under a clear blue sky, soft morning light",
    "camera": "static, eye level, wide shot",
    "style": "photorealistic, natural colours, sharp focus",
}
# The specs carry it inline, as ``negative_prompt`` (compact JSON): cosmos-framework 5eee9ed never reads a
# ``negative_prompt_file`` (its mode defaults set a negative prompt first, args.py:885).
NEGATIVE_PROMPT = {
    "negative": "blurry, low resolution, distorted geometry, flickering, watermark, text, cartoon, oversaturated",
}


def depth_style_clip(num_frames: int = CLIP_FRAMES, width: int = CLIP_SIZE[0],
                     height: int = CLIP_SIZE[1]) -> np.ndarray:
    """The scene of :func:`~cosmos_helpers.samples.rolling_ball_clip` as a depth-style control, uint8 ``(T, H, W, 3)``
    like the framework cookbook's depth asset: grey, near = bright, normalised per video; the sky is far (dark), the
    floor brightens towards the camera, the ball is shaded by its distance and its sphere normal."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    horizon = int(height * 0.45)
    nearness = np.clip((yy - horizon) / max(1, height - horizon), 0.0, 1.0) ** 0.8
    background = np.where(yy >= horizon, 40.0 + 180.0 * nearness, 12.0)
    radius = height * 0.14
    frames = np.empty((num_frames, height, width, 3), np.uint8)
    for index in range(num_frames):
        t = index / max(1, num_frames - 1)
        cx = width * (0.15 + 0.7 * t)
        cy = height * 0.72 - abs(math.sin(t * math.pi * 2)) * height * 0.12
        contact = np.clip((height * 0.86 - horizon) / max(1, height - horizon), 0, 1) ** 0.8
        dist2 = ((xx - cx) ** 2 + (yy - cy) ** 2) / radius**2
        ball = dist2 < 1.0
        bulge = np.sqrt(np.clip(1.0 - dist2, 0.0, 1.0))
        frame = background.copy()
        frame[ball] = (40.0 + 180.0 * contact + 35.0 * bulge)[ball]
        frame = (frame - frame.min()) / max(1e-6, frame.max() - frame.min()) * 255.0  # per-video style normalisation
        frames[index] = np.repeat(np.clip(frame, 0, 255).astype(np.uint8)[..., None], 3, axis=-1)
    return frames


def write_transfer_assets(folder: str | Path, *, overwrite: bool = False) -> dict[str, Path]:
    folder = Path(folder)
    clip = rolling_ball_clip(CLIP_FRAMES, *CLIP_SIZE)
    paths = {
        "video": folder / "videos" / "rolling_ball.mp4",
        "depth": folder / "videos" / "rolling_ball_depth_style.mp4",
        "image": folder / "images" / "rolling_ball_first_frame.png",
        "sound": folder / "sounds" / "chime.wav",
        "prompt": folder / "prompts" / "rolling_ball.json",
    }
    media.write_mp4(paths["video"], clip, CLIP_FPS, crf=20, overwrite=overwrite)
    media.write_mp4(paths["depth"], depth_style_clip(), CLIP_FPS, crf=20, overwrite=overwrite)
    media.write_png(paths["image"], clip[0], overwrite=overwrite)
    media.write_wav(paths["sound"], chime_sound(CLIP_FRAMES / CLIP_FPS), SOUND_SAMPLE_RATE, overwrite=overwrite)
    media.write_bytes_atomic(paths["prompt"], (json.dumps(PROMPT, indent=2) + "\n").encode(), overwrite=overwrite)
    return paths


if __name__ == "__main__":  # pragma: no cover
    for name, path in write_transfer_assets(sys.argv[1] if len(sys.argv) > 1 else ".",
                                            overwrite="--overwrite" in sys.argv).items():
        print(f"{name}: {path} ({path.stat().st_size} bytes)")
