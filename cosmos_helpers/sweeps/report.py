"""What a sweep leaves to look at, rebuilt from the run manifests on every invocation (written atomically):
``summary.csv``, ``contact_sheet.png`` (outputs by parameter), ``times.png`` and ``sweep.html`` linking it all.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

import numpy as np

from .. import media
from ..gallery import list_outputs
from ..views import preview
from ..views.items import as_item
from ..views.pages import Outcomes, esc, href, markdown_table, media_view, page, write_csv
from ..views.plots import new_figure, shorten
from ..views.sheet import labelled_sheet
from .runs import SweepRun

SUMMARY_CSV = "summary.csv"
CONTACT_SHEET = "contact_sheet.png"
TIME_PLOT = "times.png"
PAGE = "sweep.html"
TILE = 160
PREVIEW_SIDE = 320
_CSS = ("body{font:14px system-ui,sans-serif;margin:24px} table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top} th{background:#f3f3f3}"
        "tr.failed td{color:#b42318} table.sheet img,table.sheet video{width:240px;display:block}"
        ".note{color:#b42318;width:240px} img{max-width:100%}")


def _names(runs: Sequence[SweepRun]) -> list[str]:
    return list(dict.fromkeys(name for run in runs for name in run.parameters))


def varying(runs: Sequence[SweepRun]) -> list[str]:
    return [name for name in _names(runs) if len({repr(run.parameters.get(name)) for run in runs}) > 1]


def label(run: SweepRun, names: Sequence[str]) -> str:
    return ", ".join(f"{name}={run.parameters.get(name)!r}" for name in names) or run.name


def outputs_of(run: SweepRun) -> list[tuple[str, Path]]:
    """(name, media path) of every saved result in the run's outputs folder, found by its manifest."""
    if not run.outputs.is_dir():
        return []
    return [(row["name"], run.outputs / row["name"]) for row in list_outputs(run.outputs, display=False)]


def rows(runs: Sequence[SweepRun]) -> list[dict[str, Any]]:
    """The summary table as dictionaries (the CSV's and the notebook view's one source)."""
    names, table = _names(runs), []
    for run in runs:
        slot = run.worker.get("slot", 0)
        worker = (f"{run.worker['server_url']} (worker {slot})" if "server_url" in run.worker else
                  f"gpu {run.worker['gpu']}" if "gpu" in run.worker else f"worker {slot}")
        table.append({"run": run.name, **{name: run.parameters.get(name) for name in names}, "status": run.status,
               "seconds": None if run.seconds is None else round(float(run.seconds), 2),
               "reused": run.reused, "attempt": run.attempt, "worker": worker,
               "outputs": len(outputs_of(run)), "error": ((run.error or "").strip().splitlines() or [""])[-1][:200]})
    return table


def write_time_plot(out: Path, runs: Sequence[SweepRun]) -> Path:
    names = varying(runs)
    figure = new_figure((7, 0.9 + 0.4 * len(runs)), 100)
    axes = figure.add_subplot()
    seconds = [float(run.seconds or 0.0) for run in runs]
    colors = ["#2da44e" if run.ok else "#cf222e" for run in runs]
    labels = [shorten(label(run, names), 48) for run in runs]
    bars = axes.barh(labels, seconds, color=colors)
    for patch, run in zip(bars, runs):
        if run.reused:
            patch.set_hatch("//")
    axes.invert_yaxis()
    axes.set_xlabel("seconds per run (hatched: finished earlier, red: failed)")
    axes.set_title("Time per run")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return media.write_bytes_atomic(out / TIME_PLOT, buffer.getvalue(), overwrite=True)


def sheet_layout(runs: Sequence[SweepRun]) -> tuple[list[str], list[str], dict[tuple[int, int], tuple]]:
    """(row labels, column labels, {(row, col): (run, media path or None)}) for the contact sheet: a matrix of the two
    varying parameters when each run has one output at most, else one row per run and a column per output name."""
    names = varying(runs)
    found = {run.name: outputs_of(run) for run in runs}
    if len(names) == 2 and all(len(found[run.name]) <= 1 for run in runs):
        keys = [[repr(run.parameters.get(name)) for name in names] for run in runs]
        row_values, col_values = (list(dict.fromkeys(key[axis] for key in keys)) for axis in (0, 1))
        cells = {(row_values.index(r), col_values.index(c)): (run, found[run.name][0][1] if found[run.name] else None)
                 for run, (r, c) in zip(runs, keys)}
        return [f"{names[0]}={v}" for v in row_values], [f"{names[1]}={v}" for v in col_values], cells
    columns = list(dict.fromkeys(name for run in runs for name, _ in found[run.name])) or ["output"]
    cells = {(r, c): (run, dict(found[run.name]).get(column))
             for r, run in enumerate(runs) for c, column in enumerate(columns)}
    return [label(run, names) for run in runs], columns, cells


def _tile(run: SweepRun, path: Path | None) -> Any:
    """The middle frame of ``path`` as a thumbnail, or a note saying why there is none."""
    from PIL import Image

    if path is not None and path.is_file():
        try:
            image = Image.fromarray(media.to_uint8(as_item(path).frame())).convert("RGB")
            image.thumbnail((TILE, TILE))
            return image
        except Exception as exc:  # an unreadable file is shown as such, not fatal
            return f"unreadable: {type(exc).__name__}"
    return "failed" if run.status == "failed" else "no output"


def write_contact_sheet(out: Path, runs: Sequence[SweepRun]) -> Path:
    """One PNG: the middle frame of every output, labelled by its parameters (see :func:`sheet_layout`)."""
    row_labels, col_labels, cells = sheet_layout(runs)
    label_w = min(320, max(60, 7 * max(len(text) for text in row_labels)))
    rows = [(text, [_tile(*cells[(r, c)]) if (r, c) in cells else None for c in range(len(col_labels))])
            for r, text in enumerate(row_labels)]
    sheet = labelled_sheet(rows, label_width=label_w, columns=col_labels, cell=(TILE, TILE))
    return media.write_png(out / CONTACT_SHEET, np.asarray(sheet), overwrite=True)


def _media_html(out: Path, run: SweepRun, path: Path | None) -> str:
    """An image, or a player on the video's small preview (never the full-resolution file), linking the file."""
    if path is None or not path.is_file():
        return f"<div class='note'>{'failed' if run.status == 'failed' else 'no output'}</div>"
    try:
        item = as_item(path)
        view = media_view(out, path, preview=None if item.is_image else preview.ensure_preview(item, PREVIEW_SIDE))
    except Exception as exc:  # an unreadable file is reported in its cell
        return f"<div class='note'>{esc(path.name)}: {esc(type(exc).__name__)}</div>"
    return f"{view}<div><a href='{href(out, path)}'>{esc(path.name)}</a></div>"


def _matrix_html(out: Path, runs: Sequence[SweepRun]) -> str:
    row_labels, col_labels, cells = sheet_layout(runs)
    head = "<th></th>" + "".join(f"<th>{esc(text)}</th>" for text in col_labels)
    body = []
    for r, text in enumerate(row_labels):
        row = "".join(f"<td>{_media_html(out, *cells[(r, c)]) if (r, c) in cells else ''}</td>"
                      for c in range(len(col_labels)))
        body.append(f"<tr><th>{esc(text)}</th>{row}</tr>")
    return f"<table class='sheet'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def write_page(out: Path, title: str, runs: Sequence[SweepRun], table: list[dict[str, Any]]) -> Path:
    """``sweep.html``: the summary with links to each run's executed notebook and manifest, the outputs side by
    side by parameter (pictures, and videos as small previews), and the time plot."""
    columns = list(table[0]) if table else []
    head = "".join(f"<th>{esc(column)}</th>" for column in columns) + "<th>files</th>"
    body = []
    for run, row in zip(runs, table):
        links = [f"<a href='{href(out, path)}'>{name}</a>" for name, path in
                 (("notebook", run.executed), ("manifest", run.manifest_path)) if path.is_file()]
        cells = "".join(f"<td>{esc(row[column])}</td>" for column in columns)
        body.append(f"<tr class='{esc(run.status)}'>{cells}<td>{' &middot; '.join(links)}</td></tr>")
    sheet = f" (<a href='{quote(CONTACT_SHEET)}'>as one picture</a>)" if (out / CONTACT_SHEET).is_file() else ""
    plot = (f"<h2>Time per run</h2><img src='{quote(TIME_PLOT)}' alt='time per run'>"
            if (out / TIME_PLOT).is_file() else "")
    text = page(title, _CSS, f"<h1>{esc(title)}</h1><h2>Runs</h2><table><thead><tr>{head}</tr></thead><tbody>"
                f"{''.join(body)}</tbody></table><h2>Outputs by parameter{sheet}</h2>{_matrix_html(out, runs)}{plot}")
    return media.write_bytes_atomic(out / PAGE, text.encode("utf-8"), overwrite=True)


@dataclass
class SweepResult(Outcomes):
    """A sweep's runs (finished earlier ones included) and the files summarising them; a table in a notebook."""

    notebook: Path
    out: Path
    runs: list[SweepRun]
    files: dict[str, Path] = field(default_factory=dict)  # summary, contact_sheet, time_plot, page
    _entries = "runs"

    def rows(self) -> list[dict[str, Any]]:
        return rows(self.runs)

    def markdown(self) -> str:
        rows = self.rows()
        return markdown_table(rows, list(rows[0])) if rows else "(no runs)"

    def table(self):
        """A pandas DataFrame of :meth:`rows` when pandas is installed, else the markdown table (as text)."""
        try:
            import pandas
        except ImportError:
            return _Markdown(self.markdown())
        return pandas.DataFrame(self.rows()).set_index("run")

    def _repr_markdown_(self) -> str:
        return f"**Sweep of {self.notebook.name}**: {self.done} of {len(self.runs)} runs ok\n\n{self.markdown()}"

    def __repr__(self) -> str:
        return f"SweepResult({self.notebook.name}: {self.done}/{len(self.runs)} ok, out={self.out})"


class _Markdown(str):
    """Text that Jupyter shows as a rendered markdown table and a terminal prints as is."""

    def _repr_markdown_(self) -> str:
        return str(self)


def write_reports(result: SweepResult) -> dict[str, Path]:
    table = rows(result.runs)
    files = {"summary": write_csv(result.out / SUMMARY_CSV, table, list(table[0]) if table else []),
             "contact_sheet": write_contact_sheet(result.out, result.runs),
             "time_plot": write_time_plot(result.out, result.runs)}
    files["page"] = write_page(result.out, f"Sweep of {result.notebook.name}", result.runs, table)
    return files
