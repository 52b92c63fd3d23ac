"""The audiovisual cookbooks' prompts and inputs come from the tiny model's world, and show what they say.

The committed files are what ``cosmos_helpers.samples.write_world_samples`` writes: the prompts and the image byte
for byte; the clip by its decoded frames within codec tolerance (PSNR >= 45 dB), since libx264's output depends on
its build and thread count (52.3-52.6 dB between 1, 3, 8 and 16 threads; the clip one frame off is 23 dB, the same
scene at another seed 16 dB). On the embedded default each cookbook request at its default seed shows the colour
its prompt names: a newcomer's first notebook shows a blue ball when it asks for one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.samples import WORLD_SAMPLES, write_world_samples
from cosmos_helpers.world import meaning

ASSETS = Path(__file__).resolve().parents[2] / "cookbooks" / "cosmos3" / "generator" / "audiovisual" / "assets"


def test_the_committed_world_samples_are_what_the_code_writes(tmp_path):
    written = write_world_samples(tmp_path)
    assert len(written) == 8
    for name, path in written.items():
        committed = ASSETS / path.relative_to(tmp_path)
        if path.suffix == ".mp4":
            ours, fresh = media.read_video(committed).frames, media.read_video(path).frames
            assert ours.shape == fresh.shape, name
            assert _psnr(ours, fresh) >= 45.0, name
        else:
            assert committed.read_bytes() == path.read_bytes(), name


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def _colour(mode: str) -> str:
    return WORLD_SAMPLES[mode][1][0]


@pytest.mark.parametrize("mode,sound", [("text2image", False), ("text2video", False), ("text2video", True),
                                        ("image2video", False), ("image2video", True), ("video2video", False)])
def test_each_cookbook_request_shows_its_colour(tiny_backend, mode, sound):
    name = WORLD_SAMPLES[mode][0]
    prompt = ASSETS / "prompts" / mode / (f"{name}_sound.json" if sound else f"{name}.txt")
    inputs = {"image2video": {"image": ASSETS / "images" / f"{name}.png"},
              "video2video": {"video": ASSETS / "videos" / f"{name}.mp4", "condition_frames": (0, 1)}}.get(mode, {})
    request = GenerationRequest(mode=mode, prompt=prompt, seed=0, sound=sound, **inputs)
    assert meaning.dominant_colour(tiny_backend.generate(request).frames) == _colour(mode)
