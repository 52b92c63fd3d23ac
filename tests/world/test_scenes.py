"""The world's vocabulary, splits and captions: deterministic, inside the frame, and saying what the scene is."""

from __future__ import annotations

import re

import numpy as np
import pytest

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.prompting import check_caption
from cosmos_helpers.world import scenes as world
from cosmos_helpers.world.scenes import (ALL_KEYS, COLOURS, DIRECTIONS, FLOORS, HELDOUT_KEYS, SHAPES, SPEEDS,
                                         TEMPLATE_HELDOUT, TEMPLATES, TRAIN_KEYS, Scene, caption, caption_json,
                                         parse_caption, sample_scenes)


def test_heldout_is_a_fifth_and_every_value_still_trains():
    assert len(ALL_KEYS) == 240 and len(set(ALL_KEYS)) == 240
    assert len(HELDOUT_KEYS) == 48 and HELDOUT_KEYS <= set(ALL_KEYS)
    assert set(TRAIN_KEYS) == set(ALL_KEYS) - HELDOUT_KEYS
    for axis, values in enumerate((COLOURS, SHAPES, DIRECTIONS, SPEEDS, FLOORS)):
        assert {key[axis] for key in TRAIN_KEYS} == set(values)
        assert {key[axis] for key in HELDOUT_KEYS} == set(values)  # each value is also tested held-out


def test_splits_are_deterministic_and_disjoint():
    train = sample_scenes(400, seed=7, split="train")
    assert train == sample_scenes(400, seed=7, split="train")
    assert train != sample_scenes(400, seed=8, split="train")
    assert not any(scene.heldout for scene in train)
    heldout = sample_scenes(100, seed=7, split="heldout")
    assert all(scene.heldout for scene in heldout) and len({s.key for s in heldout}) > 30
    assert {s.key for s in sample_scenes(2000, seed=1, split="all")} == set(ALL_KEYS)


@pytest.mark.parametrize("frames,width,height", [(9, 160, 96), (9, 96, 96), (5, 320, 192)])
def test_objects_stay_inside_and_start_opposite_their_direction(frames, width, height):
    for scene in sample_scenes(300, seed=3, split="all", frames=frames, width=width, height=height):
        vx, vy = scene.velocity()
        half_x, half_y = scene.size * height / width, scene.size
        for f in (0, frames - 1):
            x, y = scene.x0 + vx * f, scene.y0 + vy * f
            assert half_x <= x <= 1 - half_x and half_y <= y <= 1 - half_y, (scene, f)
        dx, dy = world.DIRECTION_VECTORS[scene.direction]
        start = scene.x0 if dx else scene.y0
        assert (start - 0.5) * (dx or dy) <= 1e-9, scene  # on the side it moves away from
        assert world.SIZE_RANGE[0] <= scene.size <= world.SIZE_RANGE[1]


def test_speeds_travel_a_clear_share_of_the_frame():
    travel = {name: step * 8 for name, step in SPEEDS.items()}  # 9 frames: 8 steps
    assert 0.25 <= travel["slowly"] <= 0.3 and 0.45 <= travel["quickly"] <= 0.55
    assert SPEEDS["quickly"] == pytest.approx(2 * SPEEDS["slowly"])


def test_palette_is_separated_from_itself_and_the_floors():
    """No pixel can be within the classification threshold of two object colours; floors sit well away."""
    from cosmos_helpers.world.meaning import THRESHOLD

    objects = np.array(list(COLOURS.values()), float)
    tones = np.array([tone for pair in FLOORS.values() for tone in pair], float)
    pairwise = np.linalg.norm(objects[:, None] - objects[None], axis=-1) + np.eye(len(objects)) * 1e9
    assert pairwise.min() > 2 * THRESHOLD
    assert np.linalg.norm(objects[:, None] - tones[None], axis=-1).min() > 1.5 * THRESHOLD


def test_every_template_states_the_scene():
    assert len(TEMPLATES) >= 6 and len(TEMPLATE_HELDOUT) >= 1
    templates = TEMPLATES + TEMPLATE_HELDOUT
    for scene in sample_scenes(40, seed=11, split="all"):
        for index, template in enumerate(templates):
            text = caption(scene, index)
            truth = dict(zip(("colour", "shape", "direction", "speed", "floor"), scene.key))
            if not re.search(r"\{(speed|Speed|adj)\}", template):
                truth["speed"] = None
            assert parse_caption(text) == truth, text
    stating_speed = [t for t in TEMPLATES if re.search(r"\{(speed|Speed|adj)\}", t)]
    assert len(stating_speed) > len(TEMPLATES) / 2


def test_training_captions_never_use_heldout_phrasings():
    rng = np.random.default_rng(0)
    scenes = sample_scenes(200, seed=5, split="train")
    heldout_texts = {world._fill(t, s) for s in scenes for t in TEMPLATE_HELDOUT}
    train_texts = [caption(s, "train", rng) for s in scenes] + [caption(s) for s in scenes]
    assert not heldout_texts & set(train_texts)
    assert len({caption(s, "train", np.random.default_rng(i)) for i, s in enumerate(scenes[:1] * 50)}) == \
        len(TEMPLATES)
    assert all(caption(s, "heldout") in {world._fill(t, s) for t in TEMPLATE_HELDOUT} for s in scenes[:20])
    assert caption(scenes[0]) == caption(scenes[0])  # no rng: the same sentence every time


def test_parse_caption_reads_synonyms_and_gaps():
    assert parse_caption("Quick! A GREEN box drifts downwards over the gray floor") == {
        "colour": "green", "shape": "box", "direction": "down", "speed": "quickly", "floor": "grey floor"}
    assert parse_caption("a cat") == dict.fromkeys(("colour", "shape", "direction", "speed", "floor"))


def test_caption_json_is_a_valid_video_caption_with_the_facts():
    for scene in sample_scenes(10, seed=2, split="all"):
        data = caption_json(scene)
        assert check_caption(data, "video").ok
        assert parse_caption(data["temporal_caption"]) == dict(zip(("colour", "shape", "direction", "speed",
                                                                        "floor"), scene.key))
        assert scene.colour in data["subjects"][0]["description"] and scene.floor in data["background_setting"]


@pytest.mark.parametrize("call,field", [
    (lambda: Scene("pink", "ball", "left", "slowly", "grey floor", 0.5, 0.5, 0.15), "scene.colour"),
    (lambda: Scene("red", "ball", "north", "slowly", "grey floor", 0.5, 0.5, 0.15), "scene.direction"),
    (lambda: Scene("red", "cone", "left", "slowly", "grey floor", 0.5, 0.5, 0.15), "scene.shape"),
    (lambda: Scene("red", "ball", "left", "fast", "grey floor", 0.5, 0.5, 0.15), "scene.speed"),
    (lambda: Scene("red", "ball", "left", "slowly", "grass", 0.5, 0.5, 0.15), "scene.floor"),
    (lambda: sample_scenes(3, 0, split="test"), "split"),
    (lambda: sample_scenes(-1, 0), "n"),
    (lambda: sample_scenes(3, 0, frames=40), "frames"),
    (lambda: caption(sample_scenes(1, 0)[0], "fancy"), "style"),
    (lambda: caption(sample_scenes(1, 0)[0], 99), "style"),
    (lambda: caption_json(sample_scenes(1, 0)[0], fps=0), "fps"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field


def test_sound_pitch_timbre_and_pan_follow_the_scene():
    from cosmos_helpers.world.scenes import PITCHES, sound

    right = Scene("yellow", "ball", "right", "quickly", "grey floor", 0.2, 0.6, 0.15)
    audio = sound(right, frames=9, fps=9.0, sample_rate=16000)
    assert audio.shape == (2, 16000) and audio.dtype == np.float32 and np.abs(audio).max() <= 1
    spectrum = np.abs(np.fft.rfft(audio.sum(0)))
    assert abs(np.argmax(spectrum) - PITCHES["yellow"]) <= 1  # 1 s of sound: 1 Hz per bin
    first, last = audio[:, :4000], audio[:, -4000:]
    assert np.abs(first[0]).sum() > np.abs(first[1]).sum() and np.abs(last[1]).sum() > np.abs(last[0]).sum()
    box = sound(Scene("yellow", "box", "up", "slowly", "grey floor", 0.5, 0.6, 0.15), 9, 9.0, 16000)
    box_spectrum = np.abs(np.fft.rfft(box.sum(0)))
    assert box_spectrum[3 * 392] > 0.2 * box_spectrum[392] and spectrum[3 * 392] < 0.01 * spectrum[392]
    assert np.allclose(box[0], box[1])  # centred and not moving sideways: balanced
    with pytest.raises(ValidationError) as info:
        sound(right, fps=0)
    assert info.value.field == "fps"


def test_importing_the_world_for_measurement_loads_no_torch():
    import subprocess
    import sys

    code = "import sys, cosmos_helpers.world as w; w.describe; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
