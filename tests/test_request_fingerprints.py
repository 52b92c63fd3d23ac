"""Saved outputs keep skipping on rerun: the records and fingerprints of representative requests are the ones the
code wrote before ``GenerationRequest`` kept what was given apart from what it resolves to (commit 992d058).

A change here makes every saved output look unfinished, so it must be deliberate: regenerate the fixture with
``python -m tests.test_request_fingerprints`` and say why in the commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from cosmos_helpers import GenerationRequest
from cosmos_helpers.samples import render_drive, sample_trajectory
from cosmos_helpers.step_cache import SeaCache

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "request_fingerprints.json"
ASSETS = Path("cookbooks/cosmos3/generator/audiovisual/assets")  # relative: the record keeps the path as given


def cases() -> dict[str, GenerationRequest]:
    """Built from the repository root, so the media paths in the records are the same on every machine."""
    rng = np.random.default_rng(0)
    image = (rng.random((100, 180, 3)) * 255).astype(np.uint8)
    video = (rng.random((9, 100, 180, 3)) * 255).astype(np.uint8)
    start = render_drive(sample_trajectory("av", 8), 64, 48)
    return {
        "t2i": GenerationRequest(mode="t2i", prompt="a red cube on a table"),
        "t2i_nano_caption": GenerationRequest(mode="text2image",
                                              prompt=ASSETS / "prompts/text2image/robot_workshop.json",
                                              profile="nano", tier="480", aspect_ratio="16:9"),
        "t2v_sound": GenerationRequest(mode="t2v", prompt=ASSETS / "prompts/text2video/kettle_robot_sound.json",
                                       sound=True, num_frames=17, fps=16, seed=7,
                                       negative_prompt=ASSETS / "negative_prompt.json"),
        "t2v_options": GenerationRequest(mode="t2v", prompt="A red ball rolls.", use_system_prompt=False,
                                         add_duration_template=True, guidance_interval=(400, 1000), guardrails=True,
                                         num_inference_steps=3, guidance_scale=5, flow_shift=7),
        "i2v_file": GenerationRequest(mode="i2v", prompt=ASSETS / "prompts/image2video/rolling_ball.json",
                                      image=ASSETS / "images/rolling_ball.png"),
        "i2v_array": GenerationRequest(mode="image2video", prompt="a ball", image=image),
        "v2v": GenerationRequest(mode="v2v", prompt="the ball keeps rolling", video=video, condition_frames=(0, 1),
                                 condition_video_keep="last"),
        "v2v_file": GenerationRequest(mode="v2v", prompt="a box", video=ASSETS / "videos/blue_box_slides_left.mp4"),
        "forward_dynamics": GenerationRequest(mode="fd", prompt="drive ahead", image=start[0], embodiment="av",
                                              actions=sample_trajectory("av", 8), view_point="ego_view"),
        "inverse_dynamics": GenerationRequest(mode="inverse_dynamics", prompt="drive", video=start,
                                              embodiment="av", num_inference_steps=2),
        "policy": GenerationRequest(mode="wam", prompt="drive", image=start[0], embodiment="av", tier="480"),
        "step_cache": GenerationRequest(mode="t2v", prompt="a robot", step_cache=SeaCache(threshold=0.25)),
        "step_cache_off": GenerationRequest(mode="t2v", prompt="a robot", step_cache="off"),
        "precision": GenerationRequest(mode="t2v", prompt="a robot", precision="fp8"),
        "explicit_size": GenerationRequest(mode="t2v", prompt="a robot", width=320, height=192, model="/data/ckpt"),
        "edit_keeps_size": GenerationRequest(mode="i2i", prompt="make it blue", image=image, profile="nano"),
        "edit_tier": GenerationRequest(mode="i2i", prompt="make it blue", image=image, tier="480"),
        "distilled": GenerationRequest(mode="t2i", prompt="a cube", profile="super-t2i-4step"),
    }


def records() -> dict[str, dict]:
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        built = cases()
        return {name: {"record": json.loads(json.dumps(request.to_dict(), default=str)),
                       "fingerprint": request.fingerprint()} for name, request in built.items()}
    finally:
        os.chdir(here)


def test_records_and_fingerprints_are_the_ones_saved_outputs_carry():
    expected = json.loads(FIXTURE.read_text())
    got = records()
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert got[name]["record"] == value["record"], name
        assert got[name]["fingerprint"] == value["fingerprint"], name


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(records(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
