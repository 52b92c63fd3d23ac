"""A sound track for a scene, so the world can exercise audio generation too: hear the colour, hear where it is.

Each colour has its own pitch (a pentatonic set, so no two are confusable or dissonant), a ball is a pure sine
and a box adds a soft third harmonic (a hollower timbre), and the stereo balance follows the object's x position
with an equal-power pan: a ball rolling right moves from the left speaker to the right. numpy only.
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..presets import SOUND_SAMPLE_RATE
from .scenes import DEFAULT_FRAMES, Scene

PITCHES: dict[str, float] = {"red": 220.0, "green": 261.63, "blue": 293.66, "yellow": 392.0, "purple": 440.0}
LOUDNESS = 0.3
FADE_SECONDS = 0.01  # short fades so the clip starts and ends without a click


def sound(scene: Scene, frames: int = DEFAULT_FRAMES, fps: float = 16.0,
          sample_rate: int = SOUND_SAMPLE_RATE) -> np.ndarray:
    """Stereo float32 ``[2, N]`` in [-1, 1] lasting ``frames / fps`` seconds (the shape media.write_video takes)."""
    if not isinstance(scene, Scene):
        raise ValidationError("scene", f"expected a Scene, got a {type(scene).__name__}.",
                              "pass one of sample_scenes(...).")
    for name, value in (("frames", frames), ("fps", fps), ("sample_rate", sample_rate)):
        if not isinstance(value, (int, float, np.integer, np.floating)) or value <= 0:
            raise ValidationError(name, f"expected a positive number, got {value!r}.", f"pass e.g. {name}=16.")
    count = max(1, int(round(frames / fps * sample_rate)))
    t = np.arange(count, dtype=np.float64) / sample_rate
    phase = 2 * np.pi * PITCHES[scene.colour] * t
    wave = np.sin(phase) if scene.shape == "ball" else (np.sin(phase) + np.sin(3 * phase) / 3) * 0.75
    fade = np.clip(np.minimum(t, t[-1] - t) / FADE_SECONDS, 0.0, 1.0)
    x = np.clip(scene.x0 + scene.velocity()[0] * t * fps, 0.0, 1.0)  # position at each sample, frame-rate time
    angle = x * np.pi / 2
    mono = LOUDNESS * wave * fade
    return np.stack([mono * np.cos(angle), mono * np.sin(angle)]).astype(np.float32)
