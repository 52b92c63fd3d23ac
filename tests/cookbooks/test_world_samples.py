"""The audiovisual cookbooks' prompts and inputs come from the tiny model's world, and show what they say.

The committed files are what ``cosmos_helpers.samples.write_world_samples`` writes (the prompts and the image
byte for byte; the clip by its decoded frames, since H.264 bytes depend on the encoder build), and on the embedded
default each cookbook request at its default seed shows the colour its prompt names: a newcomer's first notebook
shows a blue ball when it asks for one.
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
            assert np.array_equal(media.read_video(committed).frames, media.read_video(path).frames), name
        else:
            assert committed.read_bytes() == path.read_bytes(), name


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
