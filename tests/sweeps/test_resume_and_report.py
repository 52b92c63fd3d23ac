"""Resume rules from run manifests (no notebook runs here), and the report files built from run folders."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cosmos_helpers import Generation
from cosmos_helpers.errors import OutputExistsError
from cosmos_helpers.sweeps import report
from cosmos_helpers.sweeps.report import SweepResult, write_reports
from cosmos_helpers.sweeps.runs import ATTEMPTS, SweepRun, plan, read_run_manifest
from cosmos_helpers.views import sheet as sheet_geometry

NOTEBOOK = "/nb/echo.ipynb"


def _run(out, name, parameters, status="pending", **facts):
    run = SweepRun(name, parameters, out / name, notebook=NOTEBOOK, status=status, **facts)
    if status != "pending":
        run.folder.mkdir(parents=True, exist_ok=True)
        run.write_manifest()
    return run


def test_finished_runs_are_skipped_failed_and_interrupted_are_set_aside_and_rerun(tmp_path):
    done = _run(tmp_path, "seed=0", {"seed": 0}, "ok", seconds=1.25, worker={"slot": 1, "gpu": "1"})
    failed = _run(tmp_path, "seed=1", {"seed": 1}, "failed", error="boom", attempt=2)
    (failed.folder / "partial.txt").write_text("from the failed attempt")
    interrupted = _run(tmp_path, "seed=2", {"seed": 2}, "running")
    fresh = _run(tmp_path, "seed=3", {"seed": 3})
    again = [SweepRun(r.name, r.parameters, r.folder, notebook=NOTEBOOK) for r in (done, failed, interrupted, fresh)]

    todo = plan(again)

    assert [run.name for run in todo] == ["seed=1", "seed=2", "seed=3"]
    assert again[0].reused and again[0].ok and again[0].seconds == 1.25 and again[0].worker["gpu"] == "1"
    assert [run.attempt for run in todo] == [3, 2, 1]
    assert not failed.folder.exists() and not interrupted.folder.exists()  # moved aside, not deleted
    kept = tmp_path / ATTEMPTS / "seed=1.attempt2.failed"
    assert (kept / "partial.txt").read_text() == "from the failed attempt"
    assert read_run_manifest(kept)["error"] == "boom"
    assert (tmp_path / ATTEMPTS / "seed=2.attempt1.running").is_dir()


@pytest.mark.parametrize("change", ["parameters", "notebook"])
def test_a_folder_with_other_parameters_or_notebook_is_never_reused(tmp_path, change):
    _run(tmp_path, "seed=0", {"seed": 0, "profile": "tiny"}, "ok")
    other = SweepRun("seed=0", {"seed": 0, "profile": "nano"} if change == "parameters" else {"seed": 0, "profile":
                     "tiny"}, tmp_path / "seed=0", notebook=NOTEBOOK if change == "parameters" else "/nb/other.ipynb")
    pending = SweepRun("seed=1", {"seed": 1}, tmp_path / "seed=1", notebook=NOTEBOOK)
    failed = _run(tmp_path, "seed=2", {"seed": 2}, "failed")
    with pytest.raises(OutputExistsError, match="never reused"):
        plan([SweepRun(failed.name, failed.parameters, failed.folder, notebook=NOTEBOOK), pending, other])
    assert failed.folder.is_dir() and not (tmp_path / ATTEMPTS).exists()  # refused before changing anything


def test_a_run_of_an_earlier_version_of_the_notebook_is_never_reused(tmp_path):
    from cosmos_helpers.sweeps.runs import code_digest

    notebook = tmp_path / "echo.ipynb"

    def write(code: str) -> str:
        cells = [{"cell_type": "markdown", "source": ["# Echo"]}, {"cell_type": "code", "source": [code]}]
        notebook.write_text(json.dumps({"cells": cells}))
        return code_digest(notebook)

    first = write("guidance = 1.5")
    done = SweepRun("seed=0", {"seed": 0}, tmp_path / "out" / "seed=0", notebook=str(notebook), code=first,
                    status="ok")
    done.folder.mkdir(parents=True)
    done.write_manifest()
    assert plan([SweepRun("seed=0", {"seed": 0}, done.folder, notebook=str(notebook), code=first)]) == []
    edited = write("guidance = 9.5")
    assert edited != first
    with pytest.raises(OutputExistsError, match="earlier version of echo.ipynb"):
        plan([SweepRun("seed=0", {"seed": 0}, done.folder, notebook=str(notebook), code=edited)])
    notebook.write_text(notebook.read_text().replace("# Echo", "# Echo, with more prose"))
    assert code_digest(notebook) == edited  # prose is not code
    failed = SweepRun("seed=1", {"seed": 1}, tmp_path / "out" / "seed=1", notebook=str(notebook), code=first,
                      status="failed")
    failed.folder.mkdir(parents=True)
    failed.write_manifest()  # a failed run of the earlier version: nothing to reuse, run again after the fix
    assert [r.name for r in plan([SweepRun("seed=1", {"seed": 1}, failed.folder, notebook=str(notebook),
                                           code=edited)])] == ["seed=1"]


def test_a_run_another_live_sweep_is_running_is_refused_and_a_dead_ones_is_set_aside(tmp_path):
    import subprocess
    import sys

    from cosmos_helpers.sweeps.runs import this_process

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        busy = _run(tmp_path, "seed=0", {"seed": 0}, "running", owner={**this_process(), "pid": other.pid})
        with pytest.raises(OutputExistsError, match=f"being run by another sweep \\(pid {other.pid}"):
            plan([SweepRun(busy.name, busy.parameters, busy.folder, notebook=NOTEBOOK)])
        assert read_run_manifest(busy.folder)["status"] == "running"  # left alone
    finally:
        other.kill()
        other.wait()
    assert [r.name for r in plan([SweepRun(busy.name, busy.parameters, busy.folder, notebook=NOTEBOOK)])] == \
        ["seed=0"]  # its sweep is gone: an interrupted run, set aside and run again
    assert (tmp_path / ATTEMPTS / "seed=0.attempt1.running").is_dir()


def test_a_sweep_folder_is_held_by_one_sweep_process_and_released_when_it_ends(tmp_path, monkeypatch):
    """A second sweep is refused before it plans (it would set aside the runs the first has yet to start); the OS
    releases the lock of a process that ends, however it ends."""
    import subprocess
    import sys

    from cosmos_helpers.sweeps.runs import LOCK_NAME, holding

    out = tmp_path / "sweep"
    with holding(out):
        with pytest.raises(OutputExistsError, match="in use by a sweep in this process"):
            with holding(out):
                raise AssertionError("entered a folder this process holds")
    assert not out.exists()  # nothing ran: no folder left behind
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, json, os, sys, time\n"
        f"handle = open({str(out / LOCK_NAME)!r}, 'a+')\n"
        "fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "handle.write(json.dumps({'pid': os.getpid(), 'host': 'h', 'started': 'then'})); handle.flush()\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputExistsError, match=f"in use by another sweep \\(pid {holder.pid} on h"):
            with holding(out):
                raise AssertionError("entered a folder another live sweep holds")
        exists = Path.exists
        with monkeypatch.context() as patch:  # both sweeps found the folder missing: the refused one removes nothing
            patch.setattr(Path, "exists", lambda self: False if self == out else exists(self))
            with pytest.raises(OutputExistsError, match="in use by another sweep"):
                with holding(out):
                    raise AssertionError("entered a folder another live sweep holds")
        assert (out / LOCK_NAME).is_file()
    finally:
        holder.kill()
        holder.wait()
    with holding(out):  # killed: its lock went with it
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert out.is_dir()


def test_a_run_still_in_flight_in_this_process_is_not_taken_for_an_interrupted_one(tmp_path):
    """Ctrl-C cannot stop the thread running a single-slot sweep's notebook: run the cell again while it goes on,
    and its run and folder are refused, not set aside and run a second time."""
    from cosmos_helpers.sweeps.runs import holding, in_flight, this_process

    busy = _run(tmp_path, "seed=0", {"seed": 0}, "running", owner=this_process())
    with in_flight(busy.folder):
        with pytest.raises(OutputExistsError, match="in use by a sweep in this process"):
            with holding(tmp_path):
                raise AssertionError("entered a folder with a run in flight")
        with pytest.raises(OutputExistsError, match="being run by another sweep"):
            plan([SweepRun(busy.name, busy.parameters, busy.folder, notebook=NOTEBOOK)])
    assert [r.name for r in plan([SweepRun(busy.name, busy.parameters, busy.folder, notebook=NOTEBOOK)])] == \
        ["seed=0"]  # it ended: an interrupted run, set aside and run again


def test_a_run_is_in_flight_here_while_its_worker_runs_it(tmp_path):
    from cosmos_helpers.sweeps.dispatch import Dispatch, Slot
    from cosmos_helpers.sweeps.runs import in_use_here

    run = SweepRun("seed=0", {"seed": 0}, tmp_path / "seed=0", notebook=NOTEBOOK)
    seen = []

    class Worker:
        def run(self, task):
            seen.append((in_use_here(run.folder), in_use_here(tmp_path), read_run_manifest(run.folder)["status"]))
            return {"seconds": 0.5, "error": None}

    Dispatch().execute(run, Slot(0), Worker())
    assert seen == [(True, True, "running")] and run.ok and not in_use_here(tmp_path)


def test_a_foreign_folder_is_refused(tmp_path):
    (tmp_path / "seed=0").mkdir()
    (tmp_path / "seed=0" / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="not made by this sweep"):
        plan([SweepRun("seed=0", {"seed": 0}, tmp_path / "seed=0", notebook=NOTEBOOK)])


def _with_image(run, value):
    run.outputs.mkdir(parents=True, exist_ok=True)
    Generation(np.full((1, 20, 30, 3), value, dtype=np.uint8), fps=1.0, seed=0).save(run.outputs / "image")
    (run.folder / "echo.ipynb").write_text("{}")
    return run


def test_report_files_matrix_sheet_table_plot_and_page(tmp_path):
    runs = [_with_image(_run(tmp_path, f"g={g},seed={s}", {"seed": s, "g": g}, "ok", seconds=1.0 + s + g), 40 * s + g)
            for s in (0, 1) for g in (2, 3)]
    runs[3].status, runs[3].error = "failed", "Traceback\nRuntimeError: boom"
    runs[0].reused = True
    files = write_reports(SweepResult(tmp_path / "echo.ipynb", tmp_path, runs))

    with open(files["summary"], newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [row["run"] for row in table] == [run.name for run in runs]
    assert table[3]["status"] == "failed" and table[3]["error"] == "RuntimeError: boom"
    assert table[0]["seed"] == "0" and table[0]["g"] == "2" and table[0]["outputs"] == "1"
    assert table[0]["reused"] == "True" and table[2]["seconds"] == "4.0"

    rows, columns, cells = report.sheet_layout(runs)
    assert rows == ["seed=0", "seed=1"] and columns == ["g=2", "g=3"]
    assert cells[(1, 0)][0] is runs[2]
    sheet = Image.open(files["contact_sheet"]).convert("RGB")
    # the tile of seed=1, g=2 (value 42) sits in row 1, column 0
    x = min(320, max(60, 7 * len("seed=1"))) + report.TILE // 2
    y = sheet_geometry.TEXT_H + sheet_geometry.GAP + (report.TILE + sheet_geometry.GAP) + report.TILE // 2
    assert sheet.getpixel((x, y)) == (42, 42, 42)
    assert Image.open(files["time_plot"]).size[0] > 300
    page = files["page"].read_text()
    assert "g%3D2%2Cseed%3D0/echo.ipynb" in page and "contact_sheet.png" in page and "times.png" in page
    matrix = page.split("Outputs by parameter")[1]
    assert matrix.index("<th>seed=0</th>") < matrix.index("g%3D3%2Cseed%3D0/outputs/image.png") < matrix.index(
        "<th>seed=1</th>") < matrix.index("g%3D2%2Cseed%3D1/outputs/image.png")
    result = SweepResult(tmp_path / "echo.ipynb", tmp_path, runs)
    assert "3 of 4 runs ok" in result._repr_markdown_() and "| g=3,seed=1 |" in result.markdown()
    view = result.table()  # a DataFrame with pandas, else the markdown table
    assert view == result.markdown() if isinstance(view, str) else list(view.index) == [run.name for run in runs]


def test_rows_layout_for_other_shapes_and_videos_as_previews(tmp_path):
    runs = [_with_image(_run(tmp_path, f"seed={s}", {"seed": s}, "ok", seconds=1.0), s) for s in (0, 1, 2)]
    Generation(np.zeros((3, 32, 32, 3), dtype=np.uint8), fps=8.0, seed=0).save(runs[1].outputs / "clip")
    rows, columns, _ = report.sheet_layout(runs)
    assert rows == ["seed=0", "seed=1", "seed=2"] and columns == ["image.png", "clip.mp4"]
    assert json.loads(json.dumps(report.rows(runs)))[1]["outputs"] == 2
    page = report.write_page(tmp_path, "t", runs, report.rows(runs)).read_text()
    assert "<video" in page and "seed%3D1/outputs/clip.preview320.mp4" in page
    assert (runs[1].outputs / "clip.preview320.mp4").is_file() and page.count("no output") == 2
