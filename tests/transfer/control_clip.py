"""The synthetic clip the edge/blur goldens describe, and how a map is stored in them.

Shared by ``tests/transfer/test_controls.py`` (ours against the goldens) and ``scripts/framework_control_maps.py``
(which writes the goldens by running the framework's own augmentors on this clip).
"""

from __future__ import annotations

import hashlib

import numpy as np


def make_clip() -> np.ndarray:
    """3 frames of 96x160 RGB: flat shapes of high, medium and low contrast (so every Canny preset differs),
    a moving disc and box, a gradient strip and a noise patch; flat areas keep the goldens small."""
    rng = np.random.default_rng(0)
    height, width = 96, 160
    yy, xx = np.mgrid[0:height, 0:width]
    clip = np.zeros((3, height, width, 3), np.uint8)
    for t in range(3):
        frame = np.full((height, width, 3), 90, np.int64)
        frame[(xx - 40 - 6 * t) ** 2 + (yy - 44) ** 2 < 18**2] = [230, 60, 40]
        frame[18:50, 96 + 4 * t : 136 + 4 * t] = [90, 122, 90]
        frame[60:84, 100:140] = [104, 90, 96]
        frame[86:96, :, 0] = xx[86:96] * 255 // width
        frame[70:90, 10:34] += rng.integers(-40, 41, (20, 24, 3))
        clip[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return clip


def encode(name: str, array: np.ndarray) -> np.ndarray:
    """Edge maps are stored as one channel; blur maps as left-to-right differences (mod 256), which
    compress several times better than the smooth pixels themselves. Both decode exactly."""
    if name.startswith("edge_"):
        if not (array == array[..., :1]).all():
            raise ValueError(f"{name}: an edge map's three channels differ")
        return array[..., 0]
    return np.diff(array.astype(np.int16), axis=2, prepend=0).astype(np.uint8)


def decode(name: str, stored: np.ndarray) -> np.ndarray:
    if name.startswith("edge_"):
        return np.repeat(stored[..., None], 3, axis=-1)
    return np.cumsum(stored, axis=2, dtype=np.uint8)


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
