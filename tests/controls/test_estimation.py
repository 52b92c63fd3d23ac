"""Depth and seg controls from RGB on the tiny random-weight stand-ins of the real transformers classes: the format
the framework reads (3-channel uint8, the clip's frames, size and fps), determinism, the model named is the model
used, and clear errors for bad input before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import media
from cosmos_helpers.controls import (ControlEstimator, color_segments, depth_to_control, estimate_controls,
                                     read_record, resolve_model, tiny_control_model_path, write_control_videos)
from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.samples import rolling_ball_clip

TINY = {"depth": "tiny", "seg": "tiny"}


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    return rolling_ball_clip(5, 64, 36)


@pytest.fixture(scope="module")
def maps(clip):
    return estimate_controls(clip, TINY, progress=False)


def test_maps_have_the_clips_frames_and_size_in_three_channels(clip, maps):
    for kind, result in maps.items():
        assert result.frames.shape == clip.shape and result.frames.dtype == np.uint8, kind
        assert result.model.name == "tiny" and result.kind == kind
    depth = maps["depth"].frames
    assert (depth[..., 0] == depth[..., 1]).all() and (depth[..., 0] == depth[..., 2]).all()  # grey
    assert depth.min() == 0 and depth.max() == 255  # min-max over the whole clip
    colors = {tuple(c) for c in maps["seg"].frames.reshape(-1, 3)}
    assert colors <= set(fw.SEG_COLORS) and set(maps["seg"].labels.values()) == colors
    assert maps["seg"].model.model_class == "SegformerForSemanticSegmentation"
    assert maps["depth"].model.model_class == "DepthAnythingForDepthEstimation"


def test_the_same_clip_gives_the_same_maps_in_any_batching(clip, maps):
    again = estimate_controls(clip, TINY, progress=False, batch_size=2)
    for kind in TINY:
        assert np.array_equal(again[kind].frames, maps[kind].frames), kind


def test_depth_is_normalised_over_the_clip_near_bright():
    depth = np.stack([np.full((4, 4), 1.0), np.full((4, 4), 3.0)])  # relative inverse depth: frame 1 is nearer
    out = depth_to_control(depth)
    assert out[0].max() == 0 and out[1].min() == 255  # per clip, not per frame (per frame both would be flat)
    metric = type("Config", (), {"depth_estimation_type": "metric"})()
    assert depth_to_control(depth, metric)[0].min() == 255  # metres: 1 m is nearer than 3 m
    assert (depth_to_control(np.ones((2, 3, 3))) == 128).all()  # nothing near or far: mid-grey


def test_segments_take_the_frameworks_colours_largest_first():
    labels = np.array([[[2, 2, 2], [2, 0, 0], [5, 5, 5]]])  # class 2: 4 px, 5: 3 px, 0: 2 px
    frames, legend = color_segments(labels, {0: "wall", 2: "sky", 5: "car"})
    assert list(legend) == ["sky", "car", "wall"]
    assert legend["sky"] == fw.SEG_COLORS[0] and tuple(frames[0, 0, 0]) == fw.SEG_COLORS[0]
    many = np.arange(30).reshape(1, 5, 6)
    assert color_segments(many)[0].shape == (1, 5, 6, 3)  # colours repeat after 23 classes, as the framework's do


def test_the_model_named_is_the_model_used(clip, maps, tmp_path):
    other = tiny_control_model_path("depth", seed=1, root=tmp_path)
    named = estimate_controls(clip, {"depth": str(other)}, progress=False)["depth"]
    assert named.model.source == str(other) and named.model.name == str(other)
    assert not np.array_equal(named.frames, maps["depth"].frames)  # other weights, other map: no fallback to tiny
    assert ControlEstimator("depth", str(other)).model.name_or_path == str(other)


BAD_MODELS = [
    ("depth", "seg-folder", "depth.model", "not a depth model"),
    ("seg", "depth-folder", "seg.model", "not a seg model"),
    ("depth", "", "depth.model", "no model named"),
    ("depth", "missing-folder", "depth.model", "cannot read the config"),
    ("normals", "tiny", "normals.model", "cannot estimate"),
    ("edge", "tiny", "edge.model", "computed from vision_path"),
]


@pytest.mark.parametrize(("kind", "name", "field", "message"), BAD_MODELS, ids=[b[3] for b in BAD_MODELS])
def test_a_wrong_model_is_refused_from_its_config(tmp_path, kind, name, field, message):
    folders = {"seg-folder": str(tiny_control_model_path("seg")), "depth-folder": str(tiny_control_model_path("depth")),
               "missing-folder": str(tmp_path / "nothing")}
    with pytest.raises(ValidationError, match=message) as refused:
        resolve_model(kind, folders.get(name, name))
    assert refused.value.field == field and refused.value.fix


BAD_FRAMES = [
    (np.zeros((0, 8, 8, 3), np.uint8), "no frames"),
    (np.zeros((2, 8, 8), np.uint8), "RGB frames"),
    (np.zeros((2, 8, 8, 4), np.uint8), "RGB frames"),
    (np.zeros((2, 8, 8, 3), np.float32), "uint8"),
    (np.zeros((2, 1, 8, 3), np.uint8), "too small"),
]


@pytest.mark.parametrize(("frames", "message"), BAD_FRAMES, ids=[m + str(f.shape) for f, m in BAD_FRAMES])
def test_bad_frames_are_refused_before_a_model_loads(frames, message):
    with pytest.raises(ValidationError, match=message):
        estimate_controls(frames, {"depth": "no/such-model"})  # the frames fail first: no hub lookup


def test_bad_requests_are_refused(clip):
    with pytest.raises(ValidationError, match="batch_size"):
        ControlEstimator("depth", "tiny")(clip, batch_size=0)
    with pytest.raises(ValidationError, match="compute_controls"):
        estimate_controls(clip, {})
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValidationError, match="no CUDA") as device:
            ControlEstimator("depth", "tiny", device="cuda")
        assert device.value.field == "device"


def test_control_videos_keep_the_clips_frames_size_and_fps_and_are_reused_only_when_identical(tmp_path, clip):
    media.write_mp4(tmp_path / "clip.mp4", clip, 12)
    paths = write_control_videos(tmp_path / "clip.mp4", TINY, tmp_path / "run", progress=False)
    for kind, path in paths.items():
        video = media.read_video(path)
        assert video.frames.shape == clip.shape and video.fps == 12.0, kind
        record = read_record(path)
        assert record["model"] == "tiny" and record["frames"] == 5 and record["clip_sha256"] == media.file_sha256(
            tmp_path / "clip.mp4")
    seg = media.read_video(paths["seg"]).frames
    assert seg.std() > 0  # a picture, not a blank
    stamp = paths["depth"].stat().st_mtime_ns
    assert write_control_videos(tmp_path / "clip.mp4", {"depth": "tiny"}, tmp_path / "run") == {"depth": paths["depth"]}
    assert paths["depth"].stat().st_mtime_ns == stamp  # same clip, same model: reused
    other = str(tiny_control_model_path("depth", seed=1, root=tmp_path))
    with pytest.raises(OutputExistsError, match="another clip or model"):
        write_control_videos(tmp_path / "clip.mp4", {"depth": other}, tmp_path / "run")
    write_control_videos(tmp_path / "clip.mp4", {"depth": other}, tmp_path / "run", overwrite=True, progress=False)
    assert read_record(paths["depth"])["source"] == other
    with pytest.raises(ValidationError, match="local RGB clip"):
        write_control_videos("https://example.com/clip.mp4", TINY, tmp_path / "run")
    assert json.loads(Path(paths["seg"]).with_suffix(".json").read_text())["labels"]  # the colour legend is kept


def test_the_segment_colours_are_the_frameworks():
    from ..contracts.conftest import load

    assert [list(c) for c in fw.SEG_COLORS] == load("cosmos_framework")["seg_colors"]  # seg.py, read by ast
