"""A labelled contact sheet of clips: one row per clip, a few frames side by side, for eyeballing training.

Each row's frames come from :func:`cosmos_helpers.views.plots.frame_strip` (the project's strip of evenly spaced
frames), so a sheet looks like every other strip in the cookbooks; this module only adds the row labels.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ValidationError

LABEL_WIDTH = 260
GAP = 6


def contact_sheet(rows: Sequence[tuple[str, np.ndarray]], path: str | Path, *, frames: int = 3,
                  height: int | None = None, overwrite: bool = False) -> Path:
    """Write a PNG grid: per row, its label on the left and ``frames`` evenly spaced frames (first to last).

    ``rows``: ``(label, uint8 frames [T, H, W, 3])``. ``height`` scales the frames down (never up). An existing
    file is kept unless ``overwrite``.
    """
    from PIL import Image, ImageDraw

    from ..media import write_bytes_atomic
    from ..views.plots import frame_strip

    if not rows:
        raise ValidationError("rows", "no rows to draw.", "pass [(label, frames), ...].")
    strips = []
    for i, row in enumerate(rows):
        if not (isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], np.ndarray)):
            raise ValidationError(f"rows[{i}]", "expected a (label, frames) pair.",
                                  "pass a tuple of a text label and uint8 frames [T, H, W, 3].")
        strips.append(frame_strip(row[1], n=frames, height=height, display=False))
    width = LABEL_WIDTH + max(strip.width for strip in strips) + GAP
    total = sum(strip.height + GAP for strip in strips) + GAP
    sheet = Image.new("RGB", (width, total), "white")
    draw = ImageDraw.Draw(sheet)
    y = GAP
    for (label, _), strip in zip(rows, strips):
        sheet.paste(strip, (LABEL_WIDTH, y))
        for line_no, line in enumerate(_wrap(str(label), LABEL_WIDTH - 8)):
            draw.text((4, y + 2 + 12 * line_no), line, fill=(30, 30, 30))
        y += strip.height + GAP
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return write_bytes_atomic(path, buffer.getvalue(), overwrite=overwrite)


def _wrap(text: str, width_px: int, char_px: int = 6) -> list[str]:
    """Greedy word wrap for PIL's default font (about 6 px per character)."""
    limit = max(1, width_px // char_px)
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= limit:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]
