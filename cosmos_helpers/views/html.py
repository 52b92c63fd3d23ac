"""Static, self-contained HTML for previews, what an executed notebook keeps as its output: only small previews and
JPEG posters embedded, no ``<script>`` and no external resources (the slider's only behaviour is an inline ``oninput``,
which JupyterLab trusted output and nbconvert HTML both run).
"""

from __future__ import annotations

import html
from typing import Sequence

from ..media import even_size
from . import preview
from .items import SEP, Item

_BOX = "display:inline-block;vertical-align:top;margin:0 12px 12px 0;max-width:100%"
_CAPTION = "font:13px/1.35 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:{w}px;margin-top:4px"
MIN_DISPLAY_SIDE = 320
_FILL = "position:absolute;inset:0;width:100%;height:100%"


def display_size(item: Item, max_side: int | None) -> tuple[int, int]:
    """The size a preview is shown at: the source size capped at ``max_side`` (the transcode's rule), and
    small results (the tiny model's 160x96) shown at 2x, 3x, ... until their long side reaches 320 px."""
    if not item.width or not item.height:
        item.height, item.width = item.frame(0).shape[:2]
    if item.is_image:
        scale = min(1.0, max_side / max(item.width, item.height)) if max_side else 1.0
        width, height = max(1, round(item.width * scale)), max(1, round(item.height * scale))
    else:
        width, height = even_size(item.width, item.height, max_side)
    factor = max(1, min(MIN_DISPLAY_SIDE, max_side or MIN_DISPLAY_SIDE) // max(width, height))
    return width * factor, height * factor


def media_html(item: Item, max_side: int | None = preview.DEFAULT_MAX_SIDE, *, player: bool = True) -> str:
    """An ``<img>`` or a ``<video controls>`` for one item: the preview embedded as a data URI when it is under the
    embed limit, else the poster with the file's path."""
    width, height = display_size(item, max_side)
    size = (f'width="{width}" height="{height}" style="max-width:100%;height:auto;display:block;background:#000;'
            'image-rendering:pixelated"')
    if item.is_image:
        data, fmt = preview.image_bytes(item, max_side)
        return f'<img src="{preview.data_uri(data, f"image/{fmt}")}" alt="{html.escape(item.caption_text())}" {size}>'
    poster_src = preview.data_uri(preview.poster_jpeg(item, max_side, frame=0), "image/jpeg")
    if not player:
        return f'<img src="{poster_src}" alt="{html.escape(item.caption_text())}" {size}>'
    path = preview.ensure_preview(item, max_side)
    data = path.read_bytes()
    if len(data) > preview.embed_limit():
        return (f'<img src="{poster_src}" {size}><div style="font-size:85%;color:#666">'
                f'preview not embedded ({len(data) / 1e6:.1f} MB): {html.escape(str(item.path or path))}</div>')
    src = preview.data_uri(data, "video/mp4")
    return (f'<video controls preload="metadata" playsinline {size} poster="{html.escape(poster_src)}">'
            f'<source src="{html.escape(src)}" type="video/mp4">'
            f'your viewer cannot play video: {html.escape(item.caption_text())}</video>')


def figure_html(item: Item, max_side: int | None = preview.DEFAULT_MAX_SIDE, *, player: bool = True) -> str:
    width, _ = display_size(item, max_side)
    return (f'<figure class="cosmos-helpers-figure" style="{_BOX};margin:0 12px 12px 0">'
            f'{media_html(item, max_side, player=player)}'
            f'<figcaption style="{_CAPTION.format(w=max(width, 320))}">{item.caption_html()}</figcaption></figure>')


def grid_html(items: Sequence[Item], columns: int = 3, *, max_side: int | None = 240, players: bool = False) -> str:
    """A contact sheet: a table of thumbnails (or players) with prompt summary, seed, backend and time."""
    columns = max(1, int(columns))
    cells = ['<td style="vertical-align:top;padding:6px;border:1px solid #ddd">'
             f'{figure_html(item, max_side, player=players)}</td>' for item in items]
    rows = "".join("<tr>" + "".join(cells[i:i + columns]) + "</tr>" for i in range(0, len(cells), columns))
    return f'<table class="cosmos-helpers-grid" style="border-collapse:collapse">{rows}</table>'


def side_by_side_html(items: Sequence[Item], max_side: int | None = preview.DEFAULT_MAX_SIDE) -> str:
    figures = "".join(figure_html(item, max_side) for item in items)
    style = "display:flex;flex-wrap:wrap;align-items:flex-start"
    return f'<div class="cosmos-helpers-compare" style="{style}">{figures}</div>'


def slider_html(a: Item, b: Item, *, frame: int | None = None, max_side: int | None = preview.DEFAULT_MAX_SIDE) -> str:
    """Two frames stacked; dragging the range input reveals ``a`` (left) over ``b`` (right)."""
    width, height = display_size(a, max_side)
    img_a, img_b = (preview.data_uri(preview.still_bytes(x.frame(frame), quality=88, size=(width, height)),
                                     "image/jpeg") for x in (a, b))
    label_a, label_b = html.escape(a.label or "A"), html.escape(b.label or "B")
    tag = ("position:absolute;top:6px;padding:1px 6px;background:rgba(0,0,0,.6);color:#fff;"
           "font:12px system-ui,sans-serif;border-radius:3px")
    on_input = ("var b=this.parentNode;"
                "b.querySelector('.chx-top').style.clipPath='inset(0 '+(100-this.value)+'% 0 0)';"
                "b.querySelector('.chx-bar').style.left=this.value+'%';")
    which = "middle frame" if frame is None else f"frame {frame}"
    facts = "".join(f'<div style="color:#666;font-size:90%"><b>{html.escape(x.label or "")}</b>: '
                    f'{html.escape(SEP.join(x.facts()))}</div>' for x in (a, b))
    summary = a.summary if a.summary == b.summary else ""
    caption = (f'<div style="{_CAPTION.format(w=max(width, 320))}">'
               f'<b>{label_a}</b> (left) vs <b>{label_b}</b> (right), {which}: drag across the picture.'
               f'{"<div>" + html.escape(summary) + "</div>" if summary else ""}{facts}</div>')
    return (f'<div class="cosmos-helpers-slider" style="{_BOX}">'
            f'<div style="position:relative;width:{width}px;max-width:100%;aspect-ratio:{width}/{height};'
            'overflow:hidden;user-select:none;background:#000">'
            f'<img class="chx-bottom" src="{img_b}" alt="{label_b}" style="{_FILL}">'
            f'<img class="chx-top" src="{img_a}" alt="{label_a}" style="{_FILL};clip-path:inset(0 50% 0 0)">'
            '<div class="chx-bar" style="position:absolute;top:0;bottom:0;left:50%;width:2px;margin-left:-1px;'
            'background:#fff;box-shadow:0 0 3px #000;pointer-events:none"></div>'
            f'<span style="{tag};left:6px">{label_a}</span><span style="{tag};right:6px">{label_b}</span>'
            f'<input type="range" min="0" max="100" value="50" step="0.5" aria-label="compare {label_a} and {label_b}" '
            f'oninput="{html.escape(on_input)}" style="position:absolute;inset:0;width:100%;height:100%;margin:0;'
            'opacity:0.01;cursor:ew-resize"></div>'
            f'{caption}</div>')
