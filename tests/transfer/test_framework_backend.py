"""FrameworkBackend: the command line it builds, install help when the framework is missing, the log tail of a
failed run, and a full run against the STAND-IN program (tests/framework_standin, not the real framework)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.backends.framework import FrameworkBackend, request_payload
from cosmos_helpers.errors import BackendUnavailableError, FrameworkRunError
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.transfer import write_video

REPO = Path(__file__).resolve().parents[2]


def standin(tmp_path, **kwargs) -> FrameworkBackend:
    return FrameworkBackend(REPO, python=sys.executable, module="tests.framework_standin", work_dir=tmp_path / "runs",
                            guardrails=False, progress=False, **kwargs)


def test_command_line_flags(tmp_path, monkeypatch):
    backend = FrameworkBackend(tmp_path, python="/opt/fw/bin/python", guardrails=False,
                               extra_args=("--no-diffusion-cache",))
    assert backend.command("in.json", "out", 7) == [
        "/opt/fw/bin/python", "-m", "cosmos_framework.scripts.inference", "--parallelism-preset", "latency",
        "-i", "in.json", "-o", "out", "--checkpoint-path", "Cosmos3-Nano", "--seed", "7", "--no-guardrails",
        "--no-diffusion-cache"]
    multi = FrameworkBackend(tmp_path, python="/opt/fw/bin/python", gpus=4, parallelism_preset="throughput",
                             checkpoint="Cosmos3-Super")
    cmd = multi.command("in.json", "out", None)
    assert cmd[:6] == ["/opt/fw/bin/python", "-m", "torch.distributed.run", "--nproc-per-node", "4", "-m"]
    assert cmd[6:] == ["cosmos_framework.scripts.inference", "--parallelism-preset", "throughput", "-i", "in.json",
                       "-o", "out", "--checkpoint-path", "Cosmos3-Super"]
    monkeypatch.setenv("COSMOS_FRAMEWORK_PYTHON", "/env/python")
    assert FrameworkBackend(tmp_path).python == "/env/python"


def test_missing_framework_explains_how_to_install(tmp_path):
    with pytest.raises(BackendUnavailableError, match="git clone https://github.com/NVIDIA/cosmos-framework"):
        FrameworkBackend(tmp_path / "nowhere").check_available()
    with pytest.raises(BackendUnavailableError, match="cannot import cosmos_framework.scripts.inference"):
        FrameworkBackend(tmp_path, python=sys.executable).check_available()


def test_failing_run_raises_with_the_log_tail(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "fake_fw").mkdir(parents=True)
    (checkout / "fake_fw" / "__init__.py").write_text("")
    (checkout / "fake_fw" / "__main__.py").write_text(
        "import sys\nprint('step 1/35')\nprint('CUDA out of memory in layer 12', file=sys.stderr)\nsys.exit(3)\n")
    backend = FrameworkBackend(checkout, python=sys.executable, module="fake_fw", progress=False)
    with pytest.raises(FrameworkRunError, match="(?s)exited with code 3.*CUDA out of memory in layer 12"):
        backend.run_payload({"name": "x", "prompt": "p"})


def test_standin_bad_spec_fails_with_its_error_line(tmp_path):
    with pytest.raises(FrameworkRunError, match="ERROR: ValidationError: edge.weightt"):
        standin(tmp_path).run_payload({"name": "bad", "prompt": "p", "edge": {"weightt": 1}})


def test_request_payload_is_the_framework_av_payload(tmp_path):
    request = GenerationRequest(mode="i2v", prompt={"subject": "a robot"}, sound=True, image=rolling_ball_clip(
        1, 64, 48)[0], seed=5)
    payload = request_payload(request, name="i2v", image_dir=tmp_path)
    assert payload["model_mode"] == "image2video" and payload["enable_sound"] is True
    assert payload["prompt"] == '{"subject":"a robot"}' and payload["seed"] == 5 and payload["num_frames"] == 9
    assert Path(payload["vision_path"]).is_file()


def test_same_spec_through_the_standin_matches_diffusers(tmp_path):
    from cosmos_helpers.transfer.diffusers_transfer import run_transfer

    write_video(tmp_path / "rgb.mp4", rolling_ball_clip(9, 160, 90), 24)
    spec = {"name": "edge_run", "prompt": "a red ball", "vision_path": "rgb.mp4", "edge": {}, "seed": 2,
            "num_steps": 2, "num_frames": 9, "num_video_frames_per_chunk": 9}
    (tmp_path / "edge.json").write_text(json.dumps(spec))
    result = standin(tmp_path).transfer(tmp_path / "edge.json")
    assert result.backend == "framework" and result.frames.shape == (9, 96, 160, 3)
    assert Path(result.provenance["output"]).name == "vision.mp4" and "edge" in result.provenance["controls"]
    local = run_transfer(tmp_path / "edge.json", progress=False)
    again = media.read_video(local.save_framework_layout(tmp_path / "local", "edge_run")).frames
    assert np.array_equal(result.frames, again)
