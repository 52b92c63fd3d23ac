"""A labelled contact sheet of clips, one row of evenly spaced frames per clip, drawn with the project's own strip
and sheet (:mod:`cosmos_helpers.views`) so it looks like every other strip in the cookbooks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ..views.plots import frame_strip
from ..views.sheet import labelled_sheet, write_png

LABEL_WIDTH = 260


def contact_sheet(rows: Sequence[tuple[str, np.ndarray]], path: str | Path, *, frames: int = 3,
                  height: int | None = None, overwrite: bool = False) -> Path:
    """Write a PNG grid of ``rows`` ``(label, uint8 frames [T, H, W, 3])``: the label, then ``frames`` evenly spaced
    frames, scaled down (never up) to ``height``. An existing file is kept unless ``overwrite``."""
    if not rows:
        raise ValidationError("rows", "no rows to draw.", "pass [(label, frames), ...].")
    strips = []
    for i, row in enumerate(rows):
        if not (isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], np.ndarray)):
            raise ValidationError(f"rows[{i}]", "expected a (label, frames) pair.",
                                  "pass a tuple of a text label and uint8 frames [T, H, W, 3].")
        strips.append((str(row[0]), [frame_strip(row[1], n=frames, height=height, display=False)]))
    return write_png(labelled_sheet(strips, label_width=LABEL_WIDTH), path, overwrite=overwrite)
