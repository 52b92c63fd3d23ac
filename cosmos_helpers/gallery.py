"""A browsable HTML gallery of an output folder: executed notebooks, every result, and a table of runs.

:func:`write_gallery` writes ``<output_dir>/index.html``: every notebook converted beside it, every result found by
its manifest as a thumbnail, a player on its small preview and an action result's trajectories, and a table of runs.
Links are relative, so the folder can be zipped, copied or served as is (``python -m http.server``); previews,
thumbnails and notebook pages are rebuilt only when stale.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from . import media
from .result import MANIFEST_SCHEMA, backend_label, read_manifest
from .views import pages, preview
from .views.items import as_item, request_details
from .views.pages import esc, href
from .views.plots import trajectory_png

GALLERY_NAME = "index.html"
THUMB_SIDE = 320

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.muted{color:#666} .cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:16px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px;background:#fafafa}
.card video,.card img{width:100%;height:auto;display:block;background:#000;border-radius:3px}
.card .name{font-weight:600;margin-top:6px;word-break:break-all} .card .summary{margin:2px 0}
table.runs{border-collapse:collapse;font-size:13px}
table.runs th,table.runs td{border:1px solid #ddd;padding:3px 8px;text-align:left}
table.runs th{background:#f3f3f3} table.runs td.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def write_gallery(output_dir: str | Path, *, title: str | None = None, max_side: int | None = 480,
                  convert_notebooks: bool = True, offline: bool = True) -> Path:
    """Write ``output_dir/index.html`` (see the module docstring) and return its path. ``offline`` (default) makes
    notebook pages self-contained: no require.js / MathJax / widget-manager scripts from a CDN (math shows as TeX)."""
    root = Path(output_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    notebooks = [(nb, _notebook_page(nb, offline) if convert_notebooks else None) for nb in _files(root, "*.ipynb")]
    runs = [_run_entry(root, path, manifest, max_side) for path, manifest in _manifests(root)]
    page = _page(root, title or f"Cosmos 3 outputs: {root.name}", notebooks, runs)
    return media.write_bytes_atomic(root / GALLERY_NAME, page.encode("utf-8"), overwrite=True)


def _files(root: Path, pattern: str) -> list[Path]:
    """The files in ``root`` that match ``pattern``, but none in a hidden folder (a sweep's ``.attempts``)."""
    return sorted(p for p in root.rglob(pattern) if not any(part.startswith(".") for part in p.relative_to(root).parts))


def _manifests(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every generation manifest in ``root`` (one that names its media file)."""
    found = [(path, read_manifest(path)) for path in _files(root, "*.json")]
    return [(path, manifest) for path, manifest in found
            if isinstance(manifest, dict) and manifest.get("schema") == MANIFEST_SCHEMA and manifest.get("media")]


def _notebook_page(notebook: Path, offline: bool = True) -> Path | str:
    """``<name>.html`` beside the notebook (rebuilt when older); an error message string on failure."""
    target = notebook.with_suffix(".html")
    if preview.fresh(target, notebook):
        return target
    try:
        import nbformat
        from nbconvert import HTMLExporter

        node = nbformat.read(str(notebook), as_version=4)
        exporter = HTMLExporter(template_name="lab")
        if offline:
            exporter.require_js_url = exporter.mathjax_url = "data:text/javascript,"  # an empty script
            node.metadata.pop("widgets", None)  # saved widget state would pull the widget manager from a CDN
        body, _ = exporter.from_notebook_node(node, resources={"metadata": {"name": notebook.stem}})
    except Exception as exc:  # one broken notebook must not take the gallery down
        return f"could not convert: {type(exc).__name__}: {exc}"
    return media.write_bytes_atomic(target, body.encode("utf-8"), overwrite=True)


def _run_entry(root: Path, manifest_path: Path, manifest: dict[str, Any], max_side: int | None) -> dict[str, Any]:
    media_path = manifest_path.with_name(manifest["media"])
    entry: dict[str, Any] = {"manifest": manifest_path, "media": media_path, "data": manifest, "error": None}
    if not media_path.is_file():
        entry["error"] = f"missing media file {media_path.name}"
        return entry
    try:
        item = as_item(media_path)
        thumb = media_path.with_name(f"{media_path.stem}.thumb.jpg")
        if not preview.fresh(thumb, media_path):
            media.write_bytes_atomic(thumb, preview.poster_jpeg(item, THUMB_SIDE, frame=0 if item.is_image else None),
                                     overwrite=True)
        entry.update(item=item, thumb=thumb, preview=None if item.is_image else preview.ensure_preview(item, max_side),
                     trajectory=_trajectory(manifest_path, media_path, manifest))
    except Exception as exc:  # an unreadable file is reported in its card, not fatal
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry


def _trajectory(manifest_path: Path, media_path: Path, manifest: dict[str, Any]) -> Path | None:
    """An action result's trajectories (given and/or predicted) drawn beside its media, redrawn when stale."""
    given, predicted = (manifest.get("request") or {}).get("actions"), manifest.get("actions")
    if given is None and predicted is None:
        return None
    target = media_path.with_name(f"{media_path.stem}.trajectory.png")
    if not preview.fresh(target, manifest_path):
        media.write_bytes_atomic(target, trajectory_png(given, predicted), overwrite=True)
    return target


def _page(root: Path, title: str, notebooks: list, runs: list[dict[str, Any]]) -> str:
    parts = [f"<h1>{esc(title)}</h1><div class='muted'>{len(runs)} result(s), {len(notebooks)} notebook(s) &middot; "
             f"written {esc(time.strftime('%Y-%m-%d %H:%M:%S'))} &middot; videos play small previews; "
             "follow &ldquo;full resolution&rdquo; for the original file</div>"]
    if notebooks:
        parts.append("<h2>Notebooks</h2><ul class='notebooks'>")
        for notebook, page in notebooks:
            name, raw = esc(notebook.relative_to(root).as_posix()), f"<a href='{href(root, notebook)}'>.ipynb</a>"
            if isinstance(page, Path):
                parts.append(f"<li><a href='{href(root, page)}'>{name}</a> ({raw})</li>")
            else:
                parts.append(f"<li>{name} ({raw}) <span class='muted'>{esc(page or 'not converted')}</span></li>")
        parts.append("</ul>")
    parts.append("<h2>Results</h2>")
    if not runs:
        parts.append("<p class='muted'>No saved results (no *.json generation manifests) in this folder yet.</p>")
    else:
        parts.append("<div class='cards'>" + "".join(_card(root, run) for run in runs) + "</div>")
        parts.append("<h2>Runs</h2>" + _table(root, runs))
    return pages.page(title, _CSS, "".join(parts))


def _card(root: Path, run: dict[str, Any]) -> str:
    name = run["media"].relative_to(root).as_posix()
    links = (f"<a href='{href(root, run['media'])}'>full resolution</a> &middot; "
             f"<a href='{href(root, run['manifest'])}'>manifest</a>")
    if run["error"]:
        return (f"<div class='card'><div class='name'>{esc(name)}</div><div style='color:#b42318'>"
                f"{esc(run['error'])}</div><div>{links}</div></div>")
    item = run["item"]
    view = pages.media_view(root, run["media"], preview=run["preview"], poster=run["thumb"],
                            size=(item.width, item.height))
    if run.get("trajectory") is not None:
        view += f"<img src='{href(root, run['trajectory'])}' alt='trajectory of {esc(name)}' loading='lazy'>"
    return (f"<div class='card'>{view}<div class='name'>{esc(name)}</div>"
            f"<div class='summary'>{esc(item.summary)}</div><div class='muted'>{esc(' · '.join(item.facts()))}</div>"
            f"<div>{links}</div></div>")


_COLUMNS = ("output", "mode", "size", "frames", "fps", "steps", "guidance", "shift", "seed", "sound", "backend",
            "model", "total s", "created")
_NUMERIC = {3, 4, 5, 6, 7, 8, 12}  # the columns of numbers, right-aligned


def _table(root: Path, runs: list[dict[str, Any]]) -> str:
    rows = []
    for run in runs:
        m = run["data"]
        _, request = request_details(m.get("request") or {})
        total = (m.get("timings") or {}).get("total_s")
        fps = m.get("fps")
        cells = [f"<a href='{href(root, run['media'])}'>{esc(run['media'].relative_to(root).as_posix())}</a>",
                 esc(request["mode"] or m.get("kind")), esc(f"{m.get('width')}×{m.get('height')}"),
                 esc(m.get("num_frames")), esc(f"{fps:g}" if isinstance(fps, (int, float)) else fps),
                 esc(request["steps"]), esc(request["guidance"]), esc(request["shift"]), esc(m.get("seed")),
                 "yes" if m.get("sound") else "no", esc(backend_label(m.get("backend"), m.get("standin"))),
                 esc(m.get("model")), esc(f"{float(total):.2f}" if total is not None else ""), esc(m.get("created"))]
        rows.append("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in _NUMERIC else f"<td>{c}</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
    return f"<table class='runs'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def list_outputs(folder: str | Path, *, display: bool = True) -> list[dict[str, Any]]:
    """The saved results in ``folder`` (by their manifests): name, kind, size, frames, backend, bytes; printed one
    line each unless ``display=False``."""
    root = Path(folder)
    rows = []
    for manifest_path, manifest in _manifests(root) if root.is_dir() else []:
        media_path = manifest_path.with_name(manifest["media"])
        rows.append({"name": media_path.relative_to(root).as_posix(), "kind": manifest.get("kind"),
                     "size": f"{manifest.get('width')}x{manifest.get('height')}",
                     "frames": manifest.get("num_frames"),
                     "backend": backend_label(manifest.get("backend"), manifest.get("standin")),
                     "bytes": media_path.stat().st_size if media_path.is_file() else None})
    if display:
        for row in rows:
            size = f"{row['bytes']:>10,d} bytes" if row["bytes"] is not None else "missing"
            print(f"{row['name']:36s} {row['kind'] or '':5s} {row['size']:>9s} {row['frames'] or '':>4} frames  "
                  f"{row['backend'] or '':10s} {size}")
    return rows
