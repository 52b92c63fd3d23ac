"""``show``, ``grid`` and ``compare``: one item view, three layouts, and one place (:func:`_present`) that picks
live widgets or static HTML.
"""

from __future__ import annotations

import string
from typing import Any, Sequence

from . import html as static
from . import preview
from ..display import is_static, present
from .items import Item, as_item


def show(generation_or_path: Any, *, max_side: int | None = preview.DEFAULT_MAX_SIDE, label: str | None = None,
         fps: float = 24.0, display: bool = True):
    """Show one result (a :class:`Generation`, a saved file or its ``.json`` manifest, or uint8 frames ``(T,H,W,3)``):
    an image, or a video player *with sound* on a small preview transcode (at most ``max_side`` pixels), and a
    caption (prompt, seed, backend, time). Displays it (``display=False``: returns it instead)."""
    return _present([as_item(generation_or_path, label, fps=fps)], "single", max_side=max_side, display=display)


def grid(generations: Sequence[Any], columns: int = 3, *, labels: Sequence[str] | None = None,
         max_side: int | None = 240, players: bool = False, display: bool = True):
    """A contact sheet: thumbnails (or players, ``players=True``) with prompt summary, seed, backend and time."""
    items = _items(generations, labels, auto_label=False)
    return _present(items, "grid", columns=columns, max_side=max_side, players=players, display=display)


def compare(a: Any, b: Any, *more: Any, labels: Sequence[str] | None = None, mode: str = "side_by_side",
            frame: int | None = None, max_side: int | None = preview.DEFAULT_MAX_SIDE, fps: float = 24.0,
            psnr: bool = False, display: bool = True):
    """Compare results (as :func:`show` takes them): control vs output, backend A vs B, seed vs seed.

    ``mode="side_by_side"``: players (or images) in a row, each with its caption. ``mode="slider"``: one frame
    (``frame``, default the middle one) of each against the first, wiped by dragging. ``psnr=True`` adds each
    one's PSNR against the first to its caption (e.g. a cached generation against the uncached one).
    """
    items = _items((a, b, *more), labels, fps=fps)
    if psnr:
        _add_psnr(items)
    if mode in ("slider", "wipe"):
        body = "".join(static.slider_html(items[0], other, frame=frame, max_side=max_side) for other in items[1:])
        return present(_html(body), display=display)
    if mode not in ("side_by_side", "side-by-side", "row"):
        raise ValueError(f"unknown compare mode {mode!r}; use 'side_by_side' or 'slider'")
    return _present(items, "row", max_side=max_side, display=display)


def _present(items: list[Item], layout: str, *, max_side: int | None, display: bool, columns: int = 3,
             players: bool = True):
    """Lay ``items`` out as one view, a grid or a row: static HTML in saved documents, widgets in a live kernel."""
    if not items:
        return present(_html("<em>nothing to show</em>"), display=display)
    if is_static():
        body = {"single": lambda: static.figure_html(items[0], max_side),
                "grid": lambda: static.grid_html(items, columns, max_side=max_side, players=players),
                "row": lambda: static.side_by_side_html(items, max_side)}[layout]()
        return present(_html(body), display=display)
    import ipywidgets as widgets

    figures = [live_figure(item, max_side, player=players or layout != "grid") for item in items]
    if layout == "single":
        return present(figures[0], display=display)
    if layout == "grid":
        box = widgets.GridBox(figures, layout=widgets.Layout(
            grid_template_columns=f"repeat({max(1, int(columns))}, max-content)", grid_gap="12px"))
    else:
        box = widgets.HBox(figures, layout=widgets.Layout(flex_flow="row wrap", grid_gap="12px"))
    box.add_class(f"cosmos-helpers-{'grid' if layout == 'grid' else 'compare'}")
    return present(box, display=display)


def live_figure(item: Item, max_side: int | None = preview.DEFAULT_MAX_SIDE, *, player: bool = True):
    """An ipywidgets ``VBox``: ``Video`` (preview bytes, with sound) or ``Image``, over a caption ``HTML``."""
    import ipywidgets as widgets

    width, _ = static.display_size(item, max_side)
    if item.is_image:
        data, fmt = preview.image_bytes(item, max_side)
        view = widgets.Image(value=data, format=fmt, width=width)
    elif player:
        view = widgets.Video(value=preview.ensure_preview(item, max_side).read_bytes(), format="mp4",
                             width=width, autoplay=False, loop=False, controls=True)
    else:
        view = widgets.Image(value=preview.poster_jpeg(item, max_side), format="jpeg", width=width)
    caption = widgets.HTML(item.caption_html(), layout=widgets.Layout(max_width=f"{max(width, 320)}px"))
    box = widgets.VBox([view, caption], layout=widgets.Layout(margin="0 12px 12px 0"))
    box.add_class("cosmos-helpers-show")
    return box


def _items(sources: Sequence[Any], labels: Sequence[str] | None, *, fps: float = 24.0,
           auto_label: bool = True) -> list[Item]:
    sources = list(sources)
    if labels is not None and len(labels) != len(sources):
        raise ValueError(f"got {len(labels)} labels for {len(sources)} inputs")
    items = [as_item(src, labels[i] if labels else None, fps=fps) for i, src in enumerate(sources)]
    if auto_label and labels is None and len(items) > 1:
        for index, item in enumerate(items):
            if not item.label:
                item.label = _default_label(item, items, index)
    return items


def _default_label(item: Item, items: list[Item], index: int) -> str:
    """Name inputs by what differs between them (backend, seed), else A, B, C."""
    for key, fmt in (("backend", "{}"), ("seed", "seed {}")):
        values = [other.details.get(key) for other in items]
        if None not in values and len(set(values)) == len(values):
            return fmt.format(item.details[key])
    return string.ascii_uppercase[index % 26]


def _add_psnr(items: list[Item]) -> None:
    import numpy as np

    reference = items[0].frames()
    for item in items[1:]:
        frames = item.frames()
        if frames.shape != reference.shape:
            item.details["psnr"] = "n/a (another size)"
            continue
        err = float(np.mean((frames.astype(np.float64) - reference.astype(np.float64)) ** 2))
        item.details["psnr"] = f"{10 * np.log10(255.0 ** 2 / err):.1f} dB vs {items[0].label or 'the first'}" \
            if err else f"identical to {items[0].label or 'the first'}"


def _html(body: str):
    from IPython.display import HTML

    return HTML(body)
