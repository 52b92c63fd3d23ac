"""Read the world's meaning back from decoded uint8 frames ``[T, H, W, 3]`` (or one ``[H, W, 3]``): which colour
is there, where it goes, how well edges match.

Each pixel goes to its nearest colour among the object palette *and* the wall/floor tones (background is never an
object), within a distance threshold (blends and noise are left out). Motion is the least-squares slope of the
object's centroid track, robust to a few bad frames. Edges: the project's own Canny, matched within a tolerance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ValidationError
from .scenes import COLOURS, DIRECTION_VECTORS, FLOORS

THRESHOLD = 70.0  # RGB distance beyond which a pixel is nobody's colour
MIN_FRACTION = 0.004  # the least share of all pixels that makes a colour "present" in a clip
MIN_PIXELS = 12  # per frame: fewer object pixels than this and the centroid is unknown (NaN)
MIN_MOVE = 0.05  # the least displacement, as a fraction of the frame's longer side, that counts as moving

_OBJECTS = list(COLOURS)
_PALETTE = np.array([*COLOURS.values(), *(tone for pair in FLOORS.values() for tone in pair)], dtype=np.float32)


def _frames(frames: Any, name: str = "frames", *, clip: bool = False) -> np.ndarray:
    """``frames`` checked as uint8 RGB; ``clip``: one frame becomes a clip of one."""
    array = np.asarray(frames)
    if array.ndim not in (3, 4) or array.shape[-1] != 3:
        raise ValidationError(name, f"expected RGB frames [T, H, W, 3] or one frame [H, W, 3], got shape "
                              f"{array.shape}.", "pass decoded uint8 frames (e.g. render_uint8(...)[0]).")
    if array.dtype != np.uint8:
        raise ValidationError(name, f"expected uint8 frames, got {array.dtype}.",
                              "convert with np.clip(x, 0, 255).astype(np.uint8).")
    return array[None] if clip and array.ndim == 3 else array


def colour_masks(frames: Any, threshold: float = THRESHOLD) -> dict[str, np.ndarray]:
    """For each object colour, a bool mask (the frames' shape without channels) of the pixels that are it."""
    array = _frames(frames)
    pixels = array.reshape(-1, 3).astype(np.float32)
    # squared distances to each palette entry in turn: no [N, K, 3] temporary and no BLAS threads
    d2 = np.stack([((pixels - entry) ** 2).sum(1) for entry in _PALETTE], axis=1)
    nearest = d2.argmin(1)
    close = d2[np.arange(len(pixels)), nearest] < threshold * threshold
    shape = array.shape[:-1]
    return {name: ((nearest == i) & close).reshape(shape) for i, name in enumerate(_OBJECTS)}


def colour_counts(frames: Any, threshold: float = THRESHOLD) -> dict[str, int]:
    """Pixels of each object colour over all frames."""
    return {name: int(mask.sum()) for name, mask in colour_masks(frames, threshold).items()}


def _dominant(masks: dict[str, np.ndarray], min_fraction: float) -> str | None:
    counts = {name: int(mask.sum()) for name, mask in masks.items()}
    best = max(counts, key=counts.__getitem__)
    total = next(iter(masks.values())).size
    return best if counts[best] >= min_fraction * total else None


def dominant_colour(frames: Any, min_fraction: float = MIN_FRACTION) -> str | None:
    """The object colour with the most pixels; ``None`` when even it covers under ``min_fraction`` of the pixels."""
    return _dominant(colour_masks(frames), min_fraction)


def _track(mask: np.ndarray, min_pixels: int) -> np.ndarray:
    """(x, y) centroid per frame of a ``[T, H, W]`` mask, at pixel centres as the renderer places them."""
    out = np.full((mask.shape[0], 2), np.nan)
    for t, frame in enumerate(mask):
        ys, xs = np.nonzero(frame)
        if len(xs) >= min_pixels:
            out[t] = (xs.mean() + 0.5, ys.mean() + 0.5)
    return out


def centroids(frames: Any, colour: str | None = None, min_pixels: int = MIN_PIXELS) -> np.ndarray:
    """``[T, 2]`` (x, y) pixel centroid of ``colour`` per frame (default: the dominant colour); NaN where absent."""
    array = _frames(frames, clip=True)
    if colour is not None and colour not in COLOURS:
        raise ValidationError("colour", f"{colour!r} is not an object colour of this world.",
                              f"use one of {', '.join(map(repr, COLOURS))}.")
    masks = colour_masks(array)
    colour = colour or _dominant(masks, MIN_FRACTION)
    if colour is None:
        return np.full((array.shape[0], 2), np.nan)
    return _track(masks[colour], min_pixels)


def _fit(track: np.ndarray) -> np.ndarray:
    seen = ~np.isnan(track).any(1)
    if seen.sum() < 2:
        return np.array([np.nan, np.nan])
    t = np.nonzero(seen)[0].astype(np.float64)
    slopes = np.polyfit(t, track[seen], 1)[0]  # per-frame velocity, x and y
    return slopes * (len(track) - 1)


def displacement(frames: Any, colour: str | None = None) -> np.ndarray:
    """(dx, dy) in pixels, first to last frame, of a least-squares line through the centroids (NaN: seen < twice)."""
    return _fit(centroids(frames, colour))


def _direction_of(moved: np.ndarray, size: tuple[int, ...], min_move: float) -> str | None:
    if np.isnan(moved).any() or np.hypot(*moved) < min_move * max(size):
        return None
    return max(DIRECTION_VECTORS, key=lambda name: float(np.dot(DIRECTION_VECTORS[name], moved)))


def direction(frames: Any, colour: str | None = None, min_move: float = MIN_MOVE) -> str | None:
    """``"left"``/``"right"``/``"up"``/``"down"`` (image coordinates) of the fitted motion; ``None`` if it barely
    moves (under ``min_move`` of the longer side) or no object is seen."""
    array = _frames(frames)
    return _direction_of(displacement(array, colour), array.shape[-3:-1], min_move)


def psnr(a: Any, b: Any) -> float:
    """Peak signal-to-noise ratio in dB of two uint8 arrays of one shape; ``inf`` when identical."""
    x, y = _frames(a, "a"), _frames(b, "b")
    if x.shape != y.shape:
        raise ValidationError("b", f"shape {y.shape} differs from a's {x.shape}.", "compare clips of one size.")
    mse = float(np.mean((x.astype(np.float64) - y.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(255.0 ** 2 / mse)


def _dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """Square (Chebyshev) dilation of the last two axes by ``radius`` pixels."""
    from scipy.ndimage import binary_dilation

    return binary_dilation(mask, np.ones((1,) * (mask.ndim - 2) + (2 * max(radius, 0) + 1,) * 2, bool))


def _edges(array: np.ndarray) -> np.ndarray:
    return (array[..., 0] if array.ndim >= 3 and array.shape[-1] == 3 else array) > 0


def edge_f1(frames: Any, control_edges: Any, tolerance: int = 1) -> float:
    """F1 of the frames' Canny edges against an edge control video, an edge matched by one within ``tolerance``
    pixels in the other map (both maps empty: 1.0; one empty: 0.0)."""
    from ..controls.maps import edge_map  # OpenCV loads on first use

    array = _frames(frames)
    ours = _edges(edge_map(array))
    theirs = _edges(np.asarray(control_edges))
    if ours.shape != theirs.shape:
        raise ValidationError("control_edges", f"shape {theirs.shape} does not match the frames' {ours.shape}.",
                              "pass the edge control of clips of the same size and length.")
    if not ours.any() and not theirs.any():
        return 1.0
    if not ours.any() or not theirs.any():
        return 0.0
    precision = float((ours & _dilate(theirs, tolerance)).sum() / ours.sum())
    recall = float((theirs & _dilate(ours, tolerance)).sum() / theirs.sum())
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def describe(frames: Any) -> dict[str, Any]:
    """What a clip shows, for reports: dominant colour, direction, displacement (dx, dy) and distance in pixels."""
    array = _frames(frames, clip=True)
    masks = colour_masks(array)
    colour = _dominant(masks, MIN_FRACTION)
    moved = _fit(_track(masks[colour], MIN_PIXELS)) if colour else np.array([np.nan, np.nan])
    return {"colour": colour, "direction": _direction_of(moved, array.shape[-3:-1], MIN_MOVE),
            "displacement": [float(v) for v in moved], "moved_px": float(np.hypot(*moved))}
