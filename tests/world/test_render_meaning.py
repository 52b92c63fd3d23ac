"""The renderer draws what the scene says, and the meaning measurements read it back exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.controls.maps import blur_map, edge_map
from cosmos_helpers.world import (FLOORS, Scene, centroids, colour_masks, contact_sheet, controls, describe,
                                  direction, displacement, dominant_colour, edge_f1, psnr, render, render_uint8,
                                  sample_scenes)


@pytest.fixture(scope="module")
def batch():
    scenes = sample_scenes(50, seed=1, split="all")
    return scenes, render_uint8(scenes)


def test_render_layout_range_and_determinism(batch):
    scenes, clips = batch
    video = render(scenes[:4])
    assert video.shape == (4, 3, 9, 96, 160) and video.dtype == torch.float32
    assert video.min() >= -1 and video.max() <= 1
    assert torch.equal(video, render(scenes[:4]))
    back = ((video + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 4, 1).numpy()
    assert np.array_equal(back, clips[:4])
    assert clips.shape == (50, 9, 96, 160, 3) and clips.dtype == np.uint8
    assert render_uint8(scenes[:2], width=64, height=48, frames=3).shape == (2, 3, 48, 64, 3)


def test_background_is_a_wall_band_over_a_floor():
    scene = Scene("red", "box", "right", "slowly", "sand floor", 0.2, 0.8, 0.14)
    frame = render_uint8([scene])[0, 0]
    wall, floor = FLOORS["sand floor"]
    assert tuple(frame[2, -3]) == wall and tuple(frame[40, -3]) == floor
    assert int((frame[:, -3] == wall).all(1).sum()) == math.ceil(0.35 * 96 - 0.5)


def test_colour_and_direction_are_recovered_for_every_scene(batch):
    scenes, clips = batch
    for scene, clip in zip(scenes, clips):
        seen = describe(clip)
        assert (seen["colour"], seen["direction"]) == (scene.colour, scene.direction), scene
        vx, vy = scene.velocity()
        assert np.allclose(seen["displacement"], (vx * 160 * 8, vy * 96 * 8), atol=1.0), (scene, seen)
    masks = [colour_masks(clip) for clip in clips]
    assert all(not m[name].any() for m, s in zip(masks, scenes) for name in m if name != s.colour)


def test_centroids_follow_the_rendered_path():
    scene = Scene("blue", "ball", "down", "quickly", "dark floor", 0.4, 0.3, 0.16)
    track = centroids(render_uint8([scene])[0], "blue")
    truth = np.array([(0.4 * 160, (0.3 + 0.064 * f) * 96) for f in range(9)])
    assert np.abs(track - truth).max() < 0.5
    assert np.isnan(centroids(render_uint8([scene])[0], "red")).all()


def test_static_and_empty_clips_have_no_direction():
    scene = Scene("yellow", "box", "left", "slowly", "grey floor", 0.7, 0.6, 0.15)
    clip = render_uint8([scene])[0]
    still = np.repeat(clip[:1], 9, axis=0)
    assert direction(still) is None and np.allclose(displacement(still), 0, atol=1e-6)
    empty = np.full((9, 96, 160, 3), FLOORS["grey floor"][1], np.uint8)
    assert dominant_colour(empty) is None and direction(empty) is None
    assert describe(empty)["colour"] is None


def test_controls_are_the_projects_own_maps(batch):
    _, clips = batch
    maps = controls(clips[0])
    assert np.array_equal(maps["edge"], edge_map(clips[0])) and np.array_equal(maps["blur"], blur_map(clips[0]))
    both = controls(clips[:2], kinds="edge")
    assert list(both) == ["edge"] and np.array_equal(both["edge"][1], edge_map(clips[1]))
    with pytest.raises(ValidationError):
        controls(clips[0], kinds=("depth",))


def test_edge_f1_separates_a_clip_from_a_shuffled_one(batch):
    _, clips = batch
    edges = controls(clips[:10], kinds="edge")["edge"]
    own = [edge_f1(clips[i], edges[i]) for i in range(10)]
    shuffled = [edge_f1(clips[i], edges[(i + 1) % 10]) for i in range(10)]
    assert min(own) > 0.99
    assert max(shuffled) < 0.8 and np.mean(own) - np.mean(shuffled) > 0.3
    blank = np.zeros_like(edges[0])
    assert edge_f1(clips[0], blank) == 0.0


def test_psnr():
    a = render_uint8(sample_scenes(2, seed=4))
    assert psnr(a[0], a[0]) == math.inf
    assert 5 < psnr(a[0], a[1]) < 40
    noisy = np.clip(a[0].astype(int) + 1, 0, 255).astype(np.uint8)
    assert psnr(a[0], noisy) > 45


def test_contact_sheet_writes_a_labelled_png(tmp_path, batch):
    from PIL import Image

    scenes, clips = batch
    path = contact_sheet([("one", clips[0]), ("two " * 30, clips[1])], tmp_path / "sheet.png")
    image = Image.open(path)
    assert image.width > 3 * 160 and image.height > 2 * 96
    with pytest.raises(FileExistsError):
        contact_sheet([("one", clips[0])], path)
    assert contact_sheet([("again", clips[2])], path, overwrite=True) == path


@pytest.mark.parametrize("call,field", [
    (lambda: render([]), "scenes"),
    (lambda: render(["red ball"]), "scenes"),
    (lambda: render(sample_scenes(1, 0), width=0), "width"),
    (lambda: controls(np.zeros((96, 160, 3), np.uint8)), "frames_uint8"),
    (lambda: dominant_colour(np.zeros((9, 96, 160), np.uint8)), "frames"),
    (lambda: centroids(np.zeros((9, 96, 160, 3), np.float32)), "frames"),
    (lambda: centroids(np.zeros((9, 96, 160, 3), np.uint8), "pink"), "colour"),
    (lambda: psnr(np.zeros((2, 4, 4, 3), np.uint8), np.zeros((2, 4, 5, 3), np.uint8)), "b"),
    (lambda: edge_f1(np.zeros((2, 8, 8, 3), np.uint8), np.zeros((2, 8, 9, 3), np.uint8)), "control_edges"),
    (lambda: contact_sheet([], "x.png"), "rows"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field
