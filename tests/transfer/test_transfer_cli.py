"""``cosmos-helpers transfer``: a framework spec file runs unchanged on diffusers and over vLLM-Omni (the local
server with the transfer hook), prints the output path, and fails with one readable line."""

from __future__ import annotations

import json

import numpy as np

from cosmos_helpers import media
from cosmos_helpers.cli import main
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.transfer import write_video


def make_spec(tmp_path):
    write_video(tmp_path / "rgb.mp4", rolling_ball_clip(9, 160, 90), 24)
    spec = {"name": "blur_run", "prompt": "a red ball", "vision_path": "rgb.mp4",
            "blur": {"preset_blur_strength": "low"}, "seed": 4, "num_steps": 2, "num_frames": 9,
            "num_video_frames_per_chunk": 9}
    path = tmp_path / "specs" / "blur.json"
    path.parent.mkdir()
    spec["vision_path"] = "../rgb.mp4"
    path.write_text(json.dumps(spec))
    return path


def test_diffusers_and_vllm_omni_backends_run_the_same_spec(tmp_path, capsys):
    from cosmos_helpers.server.local import ThreadedServer
    from cosmos_helpers.transfer.vllm import make_transfer_runner

    spec = make_spec(tmp_path)
    assert main(["transfer", "--spec", str(spec), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed == str(tmp_path / "out" / "blur_run" / "vision.mp4")
    assert (tmp_path / "out" / "blur_run" / "control_blur.mp4").is_file()
    local = media.read_video(printed).frames
    assert local.shape == (9, 96, 160, 3)
    with ThreadedServer(profile="tiny", warmup=False, transfer_runner=make_transfer_runner("tiny"),
                        storage_dir=tmp_path / "server") as server:
        code = main(["transfer", "--spec", str(spec), "--backend", "vllm-omni", "--url", server.url,
                     "--out", str(tmp_path / "served")])
    assert code == 0
    served = media.read_video(capsys.readouterr().out.strip().splitlines()[-1]).frames
    assert served.shape == local.shape
    assert np.abs(served.astype(int) - local.astype(int)).mean() < 8  # same frames, two encoder settings


def test_errors_are_one_line(tmp_path, capsys):
    spec = make_spec(tmp_path)
    assert main(["transfer", "--spec", str(spec), "--backend", "framework", "--checkout",
                 str(tmp_path / "nowhere")]) == 1
    assert "git clone https://github.com/NVIDIA/cosmos-framework" in capsys.readouterr().err
    assert main(["transfer", "--spec", str(spec), "--backend", "vllm-omni"]) == 1
    assert "--url" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"prompt": "p", "depth": {}}))
    assert main(["transfer", "--spec", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "depth.control_path" in err
