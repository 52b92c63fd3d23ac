"""Real sweeps of a trivial notebook: what each run received (parameters, server URL, GPU), failure, resume.

Each run is a real papermill execution in its own process and kernel; the notebook writes down what it saw,
so the test checks the environment and parameters each run got against what its manifest says its worker was.
"""

from __future__ import annotations

import json
import os

import pytest

from cosmos_helpers.cli import main
from cosmos_helpers.sweeps import sweep
from cosmos_helpers.sweeps.runs import ATTEMPTS, read_run_manifest
from tests.sweeps.conftest import write_echo_notebook


def _record(run_folder):
    return json.loads((run_folder / "outputs" / "record.json").read_text())


@pytest.mark.slow
def test_gpu_workers_failure_then_resume(echo, tmp_path):
    marker = tmp_path / "fail-while"
    marker.write_text("")
    grid = [{"seed": 0, "guidance": 2}, {"seed": 2, "fail_while": str(marker)},
            {"seed": 3, "kill_worker_while": str(marker)}]
    out = tmp_path / "sweep"

    first = sweep(echo, grid, out=out, gpus="0,1")

    assert [run.status for run in first.runs] == ["ok", "failed", "failed"]
    assert "asked to fail" in first.runs[1].error
    assert "worker process exited with code -9" in first.runs[2].error  # and the next run got a new worker
    for run in first.runs:
        record = _record(run.folder)
        assert record["cuda_visible_devices"] == run.worker["gpu"] in ("0", "1")
        assert record["seed"] == run.parameters["seed"] and record["cwd"] == str(echo.parent)
        assert record["server_url"] is None
        manifest = read_run_manifest(run.folder)
        assert manifest["status"] == run.status and manifest["parameters"] == run.parameters
        assert (run.folder / "echo.ipynb").is_file()
    assert _record(first.runs[0].folder)["guidance"] == 2
    finished = (first.runs[0].folder / "sweep-run.json").stat().st_mtime_ns

    marker.unlink()
    second = sweep(echo, grid, out=out, gpus="1")  # one slot: runs in this process, with the GPU set around each


    assert second.ok and [run.reused for run in second.runs] == [True, False, False]
    assert (second.runs[0].folder / "sweep-run.json").stat().st_mtime_ns == finished
    assert second.runs[1].attempt == second.runs[2].attempt == 2
    assert [_record(run.folder)["cuda_visible_devices"] for run in second.runs[1:]] == ["1", "1"]
    assert "CUDA_VISIBLE_DEVICES" not in os.environ or os.environ["CUDA_VISIBLE_DEVICES"] != "1"
    assert (out / ATTEMPTS / f"{second.runs[1].name}.attempt1.failed" / "echo.ipynb").is_file()
    for name in ("summary", "contact_sheet", "time_plot", "page"):
        assert second.files[name].is_file()
    assert second.files["summary"].read_text().count("\n") == 4

    with pytest.raises(Exception, match="never reused"):  # an edited fixed parameter is a different request
        sweep(echo, grid, out=out, parameters={"label": "y"}, gpus="0")


@pytest.mark.slow
def test_cli_with_csv_grid_and_servers(echo, tmp_path, capsys):
    grid = tmp_path / "grid.csv"
    grid.write_text("seed,label\n0,a\n1,b\n")
    out = tmp_path / "sweep"
    assert main(["sweep", str(echo), "--grid", str(grid), "--servers", "http://a:1,http://b:2/",
                 "--out", str(out)]) == 0
    runs = sorted(p for p in out.iterdir() if (p / "sweep-run.json").is_file())
    assert [p.name for p in runs] == ["label=a,seed=0", "label=b,seed=1"]
    for folder in runs:
        manifest, record = read_run_manifest(folder), _record(folder)
        assert record["server_url"] == manifest["worker"]["server_url"] in ("http://a:1", "http://b:2")
        assert record["cuda_visible_devices"] is None and record["label"] == manifest["parameters"]["label"]
    assert "| label=a,seed=0 |" in capsys.readouterr().out


def test_cli_refuses_before_running(echo, tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("sead: [1, 2]\n")
    assert main(["sweep", str(echo), "--grid", str(grid), "--out", str(tmp_path / "o")]) == 1
    assert "grid parameter 'sead'" in capsys.readouterr().err and not (tmp_path / "o").exists()

    grid.write_text("seed: [1]\n")
    assert main(["sweep", str(echo), "--grid", str(grid), "-p", "lable", "y"]) == 1
    assert "fixed parameter 'lable'" in capsys.readouterr().err
    assert main(["sweep", str(echo), "--grid", str(grid), "-p", "seed", "3"]) == 1
    assert "also given as a fixed parameter" in capsys.readouterr().err
    plain = write_echo_notebook(tmp_path / "plain", "seed = 0\noutput_dir = 'x'\n")
    assert main(["sweep", str(plain), "--grid", str(grid), "--servers", "http://a:1"]) == 1
    assert "has no 'server_url' parameter" in capsys.readouterr().err
    no_out = write_echo_notebook(tmp_path / "no_out", "seed = 0\n")
    assert main(["sweep", str(no_out), "--grid", str(grid)]) == 1
    assert "every run would write to the same place" in capsys.readouterr().err
    grid.write_text("seed: [1]\nserver_url: ['http://c:3']\n")
    assert main(["sweep", str(echo), "--grid", str(grid), "--servers", "http://a:1"]) == 1
    assert "set by the sweep itself" in capsys.readouterr().err
