"""Linked HTML pages written beside the files they show (the output gallery, a sweep's report): media linked by
relative paths, so the folder can be zipped or served as is, and videos play their small preview transcode; and what
a sweep's and a batch's results share (their tables, ``ok`` and ``failed``).
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from .. import media


def href(root: Path, path: Path) -> str:
    """``path`` relative to the page's folder ``root``, URL-quoted; a file outside it (a preview that had to go to
    the cache folder) by file URL as a last resort."""
    try:
        return quote(path.resolve().relative_to(root.resolve()).as_posix())
    except ValueError:
        return path.resolve().as_uri()


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def page(title: str, css: str, body: str) -> str:
    """One complete page: ``title``, one inline style sheet, no scripts."""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width,initial-scale=1'><title>{esc(title)}</title><style>{css}</style></head>"
            f"<body>{body}</body></html>")


def media_view(root: Path, path: Path, *, preview: Path | None = None, poster: Path | None = None,
               size: tuple[int, int] | None = None) -> str:
    """A player on a video's ``preview`` (with ``poster``), or the picture (or ``poster``) linked to the original."""
    if preview is None:
        picture = href(root, poster or path)
        return f"<a href='{href(root, path)}'><img src='{picture}' alt='{esc(path.name)}' loading='lazy'></a>"
    extra = f" poster='{href(root, poster)}'" if poster is not None else ""
    extra += f" width='{size[0]}' height='{size[1]}'" if size is not None else ""
    return (f"<video controls preload='metadata' playsinline{extra}><source src='{href(root, preview)}' "
            "type='video/mp4'></video>")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """``columns`` of ``rows`` as a markdown table, for a result's notebook view (``None``: an empty cell)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(" --- " for _ in columns) + "|"]
    for row in rows:
        cells = ("" if row[c] is None else str(row[c]).replace("|", "\\|") for c in columns)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Path:
    """``columns`` of ``rows`` as a CSV file, written atomically (a result's ``summary.csv``)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return media.write_bytes_atomic(path, buffer.getvalue().encode("utf-8"), overwrite=True)


class Outcomes:
    """``ok`` and ``failed`` of a sweep's or a batch's result, over its entries (the attribute named ``_entries``)."""

    _entries = ""

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list:
        return [entry for entry in getattr(self, self._entries) if not entry.ok]

    @property
    def done(self) -> int:
        return sum(entry.ok for entry in getattr(self, self._entries))
