"""The command line: errors are one readable line; generate and run-cookbooks produce what they promise."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cosmos_helpers import cli

ROOT = Path(__file__).resolve().parents[2]


def cosmos(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "cosmos_helpers.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_bad_input_is_one_line_and_exit_code_1_before_any_model_loads(capsys):
    code = cli.main(["generate", "--mode", "t2v", "--prompt", "a robot", "--frames", "10"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "num_frames" in err[0] and "use 9 or 13" in err[0] and "Traceback" not in err[0]


def test_missing_command_prints_help():
    assert cli.main([]) == 2


@pytest.mark.slow
def test_generate_writes_media_and_manifest(tmp_path):
    result = cosmos("generate", "--mode", "t2v", "--prompt", "a red ball", "--sound", "--steps", "2",
                    "--seed", "4", "--out", str(tmp_path), "--name", "ball")
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == tmp_path / "ball.mp4"
    manifest = json.loads((tmp_path / "ball.json").read_text())
    assert manifest["seed"] == 4 and manifest["sound"]["channels"] == 2 and manifest["backend"] == "diffusers"
    again = cosmos("generate", "--mode", "t2v", "--prompt", "a red ball", "--sound", "--steps", "2", "--seed", "5",
                   "--out", str(tmp_path), "--name", "ball")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert json.loads((tmp_path / "ball.json").read_text())["seed"] == 4


@pytest.mark.slow
def test_tiny_prints_the_model_folder(tmp_path):
    """The trained default, or the random-weight model of a seed: two folders, both loadable checkpoints."""
    trained = cosmos("tiny", "--out", str(tmp_path))
    random = cosmos("tiny", "--random-seed", "0", "--out", str(tmp_path))
    assert trained.returncode == 0 and random.returncode == 0, trained.stderr + random.stderr
    folders = [Path(r.stdout.strip()) for r in (trained, random)]
    assert folders[0] != folders[1] and all((f / "model_index.json").is_file() for f in folders)
    assert "world" in folders[0].name and "seed0" in folders[1].name


@pytest.mark.slow
def test_run_cookbooks_puts_everything_in_one_folder(cookbook_runs):
    # the suite's run of this cookbook: `run-cookbooks --only audiovisual/run_with_diffusers.ipynb --out OUT -p seed 3`
    run = cookbook_runs.get("audiovisual/run_with_diffusers.ipynb")
    assert run.ok, run.error
    folder = run.out / "audiovisual" / "run_with_diffusers"
    assert (run.out / "audiovisual" / "run_with_diffusers.ipynb").is_file()
    assert (folder / "text2image.png").is_file()
    assert json.loads((folder / "text2video_sound.json").read_text())["sound"]["sample_rate"] == 48000
    assert json.loads((folder / "video2video.json").read_text())["seed"] == 3
    summary = json.loads((run.out / "summary.json").read_text())
    assert [entry["ok"] for entry in summary] == [True]
    assert (run.out / "index.html").is_file() and "| audiovisual/run_with_diffusers.ipynb | ok |" in run.printed


@pytest.fixture
def started(monkeypatch):
    """What `cosmos-helpers lab` hands the process over to (execv replaced so the test keeps running)."""
    from cosmos_helpers.commands import lab

    calls = []
    monkeypatch.setattr(lab.os, "execv", lambda path, argv: calls.append(argv))
    return calls


def test_lab_opens_the_cookbooks_with_this_environments_python(started):
    assert cli.main(["lab", "--no-browser", "--port", "9999", "--", "--ServerApp.terminals_enabled=False"]) == 0
    (command,) = started
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={ROOT / 'cookbooks' / 'cosmos3' / 'generator'}" in command
    assert {"--ServerApp.ip=127.0.0.1", "--ServerApp.port=9999", "--no-browser"} <= set(command)
    assert command[-1] == "--ServerApp.terminals_enabled=False" and "--" not in command
    assert not any(arg.startswith("--IdentityProvider.token") for arg in command)  # Jupyter's own random token


def test_lab_for_a_workshop_takes_the_rooms_token_and_refuses_none_on_the_network(started, capsys):
    assert cli.main(["lab", "--ip", "0.0.0.0", "--token", "robots"]) == 0
    assert {"--ServerApp.ip=0.0.0.0", "--IdentityProvider.token=robots"} <= set(started[0])
    assert cli.main(["lab", "--ip", "0.0.0.0", "--token", ""]) == 1
    assert len(started) == 1 and "token" in capsys.readouterr().err


def test_generate_and_long_video_take_a_step_cache(tmp_path, capsys):
    assert cli.main(["generate", "--prompt", "a red ball", "--steps", "12", "--step-cache", "sea:0.4",
                     "--out", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "text2video.json").read_text())
    assert manifest["request"]["step_cache"] == {"sea_cache": {"threshold": 0.4}}
    record = manifest["provenance"]["step_cache"]
    assert record["values"]["threshold"] == 0.4 and record["passes_computed"] < record["passes"] == 24
    assert cli.main(["long-video", "--prompt", "a red ball", "--chunks", "2", "--steps", "2", "--step-cache", "off",
                     "--out", str(tmp_path)]) == 0
    chunk = json.loads(next((tmp_path / "long_video_chunks").glob("*.json")).read_text())
    assert chunk["request"]["step_cache"] == "off"
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:
        cli.main(["generate", "--prompt", "x", "--step-cache", "sea:lots"])
    assert usage.value.code == 2
    assert "--step-cache: 'lots' is not a number" in capsys.readouterr().err
