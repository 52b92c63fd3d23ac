"""``sweep(..., ray=...)``: each notebook run is a Ray task on an actor of the session's Ray instance."""

from __future__ import annotations

import json

import nbformat
import pytest

from cosmos_helpers.sweeps import sweep

pytestmark = pytest.mark.slow

BODY = '''import json, os, signal
from pathlib import Path

out = Path(output_dir)
out.mkdir(parents=True, exist_ok=True)
(out / "record.json").write_text(json.dumps({"seed": seed, "pid": os.getppid()}))
if kill_once and Path(kill_once).exists():  # the first attempt takes its worker down with it
    Path(kill_once).unlink()
    os.kill(os.getppid(), signal.SIGKILL)
'''


def test_runs_go_to_ray_workers_and_a_killed_worker_is_reported_and_the_run_retried(ray_instance, tmp_path, capsys):
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('seed = 0\noutput_dir = "out"\nkill_once = None')
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [parameters, nbformat.v4.new_code_cell(BODY)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "nb" / "echo.ipynb"
    path.parent.mkdir()
    nbformat.write(notebook, str(path))
    marker = tmp_path / "kill-once"
    marker.write_text("")

    result = sweep(path, [{"seed": 1}, {"seed": 2, "kill_once": str(marker)}], out=tmp_path / "sweep", ray=True,
                   jobs=2, write_report=False)

    assert result.ok, [run.error for run in result.runs]
    assert {run.worker["ray"] for run in result.runs} == {"cpu"}
    assert not marker.exists() and "died during the run" in capsys.readouterr().out  # reported, then tried again
    records = [json.loads((run.folder / "outputs" / "record.json").read_text()) for run in result.runs]
    assert [r["seed"] for r in records] == [1, 2]
