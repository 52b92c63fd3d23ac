"""Render :class:`~.scenes.Scene` batches to video tensors ``[B, 3, T, H, W]`` in ``[-1, 1]`` (the VAE's layout and
range), fast enough to feed training on the fly: a tensor expression over the whole batch, one loop over frames.
Control videos come from the project's own control-map code: the model is conditioned on exactly those maps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import ValidationError
from .scenes import COLOURS, DEFAULT_FRAMES, DEFAULT_HEIGHT, DEFAULT_WIDTH, FLOORS, Scene

SHADE = 0.12  # the ball's highlight/shade amplitude, a fraction of its colour


def _check(scenes: Sequence[Scene], width: int, height: int, frames: int) -> None:
    if not scenes:
        raise ValidationError("scenes", "no scenes to render.", "pass a list of Scene (see sample_scenes).")
    bad = next((s for s in scenes if not isinstance(s, Scene)), None)
    if bad is not None:
        raise ValidationError("scenes", f"expected Scene objects, got a {type(bad).__name__}.",
                              "build them with sample_scenes(...) or Scene(...).")
    for name, value, example in (("width", width, DEFAULT_WIDTH), ("height", height, DEFAULT_HEIGHT),
                                 ("frames", frames, DEFAULT_FRAMES)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValidationError(name, f"expected a whole number of 1 or more, got {value!r}.",
                                  f"pass e.g. {name}={example}.")


def _parameters(scenes: Sequence[Scene], width: int, height: int, device: Any) -> dict[str, Any]:
    """Per-scene tensors in pixels: start, velocity, radius, colours and shape."""
    import torch

    def tensor(rows: list) -> Any:
        return torch.tensor(rows, dtype=torch.float32, device=device)

    velocity = [s.velocity() for s in scenes]
    return {
        "x0": tensor([s.x0 * width for s in scenes]), "y0": tensor([s.y0 * height for s in scenes]),
        "vx": tensor([v[0] * width for v in velocity]), "vy": tensor([v[1] * height for v in velocity]),
        "r": tensor([s.size * height for s in scenes]), "line": tensor([s.wall * height for s in scenes]),
        "ball": tensor([1.0 if s.shape == "ball" else 0.0 for s in scenes]),
        "colour": tensor([COLOURS[s.colour] for s in scenes]),
        "wall": tensor([FLOORS[s.floor][0] for s in scenes]), "floor": tensor([FLOORS[s.floor][1] for s in scenes]),
    }


def _frame(p: dict[str, Any], background: Any, xs: Any, ys: Any, f: int) -> Any:
    """One frame ``[B, 3, H, W]`` in 0..255: the shape's ~1 px anti-aliased coverage over the background."""
    import torch

    col = lambda t: t[:, None, None]  # noqa: E731  (per-scene value against the pixel grid)
    dx = xs[None, None, :] - col(p["x0"] + p["vx"] * f)
    dy = ys[None, :, None] - col(p["y0"] + p["vy"] * f)
    r = col(p["r"])
    disc = torch.sqrt(dx * dx + dy * dy) - r
    square = torch.maximum(dx.abs(), dy.abs()) - r
    ball = col(p["ball"])
    distance = ball * disc + (1 - ball) * square
    coverage = (0.5 - distance).clamp(0.0, 1.0)  # a 1 px soft edge
    # light from the upper left on the ball only, so it reads as round without leaving its colour class
    light = (-(0.6 * dx + 0.8 * dy) / r).clamp(-1.0, 1.0) * SHADE * ball
    colour = (p["colour"][:, :, None, None] * (1 + light[:, None])).clamp(0.0, 255.0)
    alpha = coverage[:, None]
    return background * (1 - alpha) + colour * alpha


def render(scenes: Sequence[Scene], width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT,
           frames: int = DEFAULT_FRAMES, device: Any = "cpu") -> Any:
    """Clips ``[B, 3, T, H, W]`` float32 in ``[-1, 1]`` (the VAE's range), one per scene, on ``device``."""
    return _render_255(scenes, width, height, frames, device) / 127.5 - 1.0


def _render_255(scenes: Sequence[Scene], width: int, height: int, frames: int, device: Any) -> Any:
    import torch

    _check(scenes, width, height, frames)
    with torch.no_grad():
        p = _parameters(scenes, width, height, device)
        xs = torch.arange(width, dtype=torch.float32, device=device) + 0.5  # pixel centres
        ys = torch.arange(height, dtype=torch.float32, device=device) + 0.5
        wall = (ys[None, :] < p["line"][:, None]).to(torch.float32)[:, None, :, None]
        background = p["wall"][:, :, None, None] * wall + p["floor"][:, :, None, None] * (1 - wall)
        background = background.expand(-1, -1, height, width)
        return torch.stack([_frame(p, background, xs, ys, f) for f in range(frames)], dim=2)


def render_uint8(scenes: Sequence[Scene], width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT,
                 frames: int = DEFAULT_FRAMES, device: Any = "cpu") -> np.ndarray:
    """The same clips as uint8 ``[B, T, H, W, 3]`` numpy arrays: for tests, stills and control maps."""
    import torch

    clips = _render_255(scenes, width, height, frames, device)
    return clips.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 4, 1).cpu().numpy()


def controls(frames_uint8: np.ndarray, kinds: Sequence[str] = ("edge", "blur"),
             presets: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Transfer control videos (``compute_control``'s, as a transfer request would build them) of uint8 clips
    ``[T, H, W, 3]`` or a batch ``[B, T, H, W, 3]``, by kind, each the input's shape."""
    from ..controls.maps import compute_control  # OpenCV loads on first use

    array = np.asarray(frames_uint8)
    if array.ndim not in (4, 5):
        raise ValidationError("frames_uint8", f"expected [T, H, W, 3] or [B, T, H, W, 3], got shape {array.shape}.",
                              "pass render_uint8(...) output (or one clip of it).")
    if isinstance(kinds, str):
        kinds = (kinds,)
    presets = dict(presets or {})
    if array.ndim == 4:
        return {kind: compute_control(kind, array, presets.get(kind)) for kind in kinds}
    with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:  # OpenCV releases the GIL; training needs thousands
        return {kind: np.stack(list(pool.map(lambda clip: compute_control(kind, clip, presets.get(kind)), array)))
                for kind in kinds}
