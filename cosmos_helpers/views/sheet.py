"""One labelled contact sheet as a PNG: rows of pictures with a label on the left, optionally under column titles,
in PIL's default font (about 6 px wide, 12 px high per character).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import media
from ..errors import ValidationError
from .plots import frame_strip

GAP = 6
TEXT_H = 14
CHAR_W, LINE_H = 6, 12


def labelled_sheet(rows: Sequence[tuple[str, Sequence[Any]]], *, label_width: int, columns: Sequence[str] = (),
                   cell: tuple[int, int] | None = None) -> Any:
    """A PIL image: per row, its label (word-wrapped to ``label_width``) and its cells, one per column.

    A cell is a PIL image (centred in its box), a note (text drawn in a grey box) or ``None`` (left blank). Every
    box is ``cell`` (width, height); without it, a column is as wide as its widest picture and a row as high as its
    highest. ``columns`` titles the columns above the first row."""
    from PIL import Image, ImageDraw

    count = max([len(cells) for _, cells in rows] + [len(columns), 1])
    if cell is not None:
        widths, heights = [cell[0]] * count, [cell[1]] * len(rows)
    else:
        widths = [max((c.width for _, cells in rows for c in cells[i:i + 1] if _picture(c)), default=0)
                  for i in range(count)]
        heights = [max((c.height for c in cells if _picture(c)), default=LINE_H) for _, cells in rows]
    top = (TEXT_H if columns else 0) + GAP
    lefts = [label_width + sum(w + GAP for w in widths[:i]) for i in range(count)]
    sheet = Image.new("RGB", (label_width + sum(w + GAP for w in widths) + GAP, top + sum(h + GAP for h in heights)),
                      "white")
    draw = ImageDraw.Draw(sheet)
    for x, width, text in zip(lefts, widths, columns):
        text = text[:width // CHAR_W]
        draw.text((x + max(0, (width - draw.textlength(text)) // 2), 2), text, fill=(40, 40, 40))
    y = top
    for (label, cells), height in zip(rows, heights):
        for line_no, line in enumerate(wrap(label, label_width - 8)[:max(1, height // LINE_H)]):
            draw.text((4, y + 2 + LINE_H * line_no), line, fill=(30, 30, 30))
        for x, width, content in zip(lefts, widths, cells):
            if _picture(content):
                sheet.paste(content, (x + (width - content.width) // 2, y + (height - content.height) // 2))
            elif content is not None:
                draw.rectangle((x, y, x + width, y + height), outline=(200, 200, 200), fill=(246, 246, 246))
                draw.text((x + 8, y + height // 2 - 6), str(content), fill=(180, 30, 30))
        y += height + GAP
    return sheet


def _picture(content: Any) -> bool:
    return content is not None and not isinstance(content, str)


def wrap(text: str, width_px: int) -> list[str]:
    """Word wrap for PIL's default font (a word longer than a line is split over lines)."""
    return textwrap.wrap(str(text), max(1, width_px // CHAR_W)) or [""]


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
    return media.write_png(path, np.asarray(labelled_sheet(strips, label_width=260)), overwrite=overwrite)
