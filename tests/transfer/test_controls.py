"""Control maps against the Cosmos Framework's own maps, the blur parameter table, geometry, padding and reading
controls.

The goldens (``golden/framework_maps-<commit>.npz``) are written by the framework's edge and blur augmentors at that
commit, run on ``control_clip.make_clip()`` for every preset (``scripts/framework_control_maps.py``)::

    python scripts/refresh_contracts.py --only control-maps --framework-git-dir ~/cosmos-framework/.git

With ``use_random=False`` (what inference passes) the framework has no random element, so ours must equal them
exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from cosmos_helpers import media
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.media import fit_to_bucket
from cosmos_helpers.protocol.framework import BLUR_PRESETS, EDGE_PRESETS
from cosmos_helpers.controls.maps import blur_map, blur_parameters, compute_control, edge_map
from cosmos_helpers.specs.transfer import bucket_for, load_control, mirror_pad, mirror_pad_indices

from .control_clip import decode, encode, make_clip, sha256

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN_NAMES = [f"edge_{p}" for p in EDGE_PRESETS] + [f"blur_{p}" for p in BLUR_PRESETS]
FRAMEWORK_COMMIT = "5eee9ed"  # the revision every framework fixture is read from


def compute_maps(clip: np.ndarray) -> dict[str, np.ndarray]:
    maps = {f"edge_{p}": edge_map(clip, p) for p in EDGE_PRESETS}
    maps.update({f"blur_{p}": blur_map(clip, p) for p in BLUR_PRESETS})
    return maps


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    return make_clip()


@pytest.fixture(scope="module")
def maps(clip: np.ndarray) -> dict[str, np.ndarray]:
    return compute_maps(clip)


@pytest.fixture(scope="module")
def framework(clip: np.ndarray) -> dict[str, np.ndarray]:
    """The framework's maps, decoded; checks they describe this clip and came from the framework's code."""
    (path,) = GOLDEN_DIR.glob("framework_maps-*.npz")
    with np.load(path) as golden:
        meta = json.loads(str(golden["meta"]))
        assert meta["clip_sha256"] == sha256(clip), "the clip changed (numpy RNG stream?); refresh the goldens"
        assert path.name == f"framework_maps-{meta['framework_commit']}.npz"
        assert meta["framework_commit"] == FRAMEWORK_COMMIT
        assert meta["writer"] == "scripts/framework_control_maps.py"
        # built as inference/transfer.py builds them: no random thresholds, blur or down-up factors
        assert all(kw["use_random"] is False for kw in meta["inference_keywords"].values())
        return {name: decode(name, golden[name]) for name in GOLDEN_NAMES}


# ---------------------------------------------------------------------- goldens


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_maps_equal_the_frameworks(name: str, clip: np.ndarray, maps: dict[str, np.ndarray],
                                   framework: dict[str, np.ndarray]) -> None:
    assert maps[name].dtype == np.uint8 and maps[name].shape == clip.shape
    assert framework[name].shape == clip.shape
    np.testing.assert_array_equal(maps[name], framework[name])


def test_the_framework_maps_tell_the_presets_apart(clip: np.ndarray, framework: dict[str, np.ndarray]) -> None:
    """The clip is a real test: every preset gives a different map, and only blur "none" is the clip itself."""
    for kind, presets in (("edge", EDGE_PRESETS), ("blur", BLUR_PRESETS)):
        arrays = [framework[f"{kind}_{p}"].tobytes() for p in presets]
        assert len(set(arrays)) == len(presets), kind
    np.testing.assert_array_equal(framework["blur_none"], clip)
    grey = np.stack([cv2.Canny(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), 100, 200) for frame in clip])
    assert not np.array_equal(framework["edge_medium"][..., 0], grey)  # a grey Canny would fail the goldens


def test_golden_encoding_round_trips(maps: dict[str, np.ndarray]) -> None:
    for name in ("edge_low", "blur_high"):
        np.testing.assert_array_equal(decode(name, encode(name, maps[name])), maps[name])


def test_goldens_are_small() -> None:
    sizes = {p.name: p.stat().st_size for p in GOLDEN_DIR.iterdir()}
    assert list(sizes) == [f"framework_maps-{FRAMEWORK_COMMIT}.npz"], sizes
    assert max(sizes.values()) < 150_000, sizes


# ---------------------------------------------------------------------- edge


def test_edge_maps_are_binary_and_grey(maps: dict[str, np.ndarray]) -> None:
    counts = []
    for preset in EDGE_PRESETS:
        edges = maps[f"edge_{preset}"]
        assert set(np.unique(edges)) <= {0, 255}
        assert (edges[..., 0] == edges[..., 1]).all() and (edges[..., 0] == edges[..., 2]).all()
        counts.append(int((edges[..., 0] > 0).sum()))
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == len(counts), counts


def test_edge_uses_three_channel_canny(clip: np.ndarray) -> None:
    import cv2

    frame = clip[1]
    np.testing.assert_array_equal(edge_map(frame, "low")[..., 0], cv2.Canny(frame, 50, 100))
    assert edge_map(frame).shape == frame.shape


def test_unknown_presets_name_the_field(clip: np.ndarray) -> None:
    with pytest.raises(ValidationError) as edge_error:
        edge_map(clip, "none")
    assert edge_error.value.field == "edge.preset_edge_threshold"
    with pytest.raises(ValidationError) as blur_error:
        blur_map(clip, "extreme")
    assert blur_error.value.field == "blur.preset_blur_strength"
    with pytest.raises(ValidationError) as dtype_error:
        edge_map(clip.astype(np.float32))
    assert dtype_error.value.field == "frames"


# ---------------------------------------------------------------------- blur

# reference §6: preset -> (k, d, sigma_color, sigma_space, down-up size) at 1280x720 and 1104x832
BLUR_TABLE = {
    (1280, 720): {
        "very_low": (1, 53, 266.7, 177.8, (320, 180)),
        "low": (4, 13, 66.7, 44.4, (320, 180)),
        "medium": (2, 27, 133.3, 88.9, (128, 72)),
        "high": (1, 53, 266.7, 177.8, (80, 45)),
        "very_high": (4, 13, 66.7, 44.4, (80, 45)),
    },
    (1104, 832): {
        "very_low": (1, 47, 230.0, 153.3, (276, 208)),
        "low": (4, 13, 57.5, 38.3, (276, 208)),
        "medium": (2, 23, 115.0, 76.7, (110, 83)),
        "high": (1, 47, 230.0, 153.3, (69, 52)),
        "very_high": (4, 13, 57.5, 38.3, (69, 52)),
    },
}


@pytest.mark.parametrize("size", list(BLUR_TABLE))
@pytest.mark.parametrize("preset", EDGE_PRESETS)
def test_blur_parameter_table(size: tuple[int, int], preset: str) -> None:
    k, d, sigma_color, sigma_space, down_up = BLUR_TABLE[size][preset]
    params = blur_parameters(*size, preset)
    assert (params.k, params.d, params.down_up_size) == (k, d, down_up)
    assert round(params.sigma_color, 1) == sigma_color and round(params.sigma_space, 1) == sigma_space
    assert params.d % 2 == 1


def test_blur_none_is_identity(clip: np.ndarray, maps: dict[str, np.ndarray]) -> None:
    assert blur_parameters(1280, 720, "none") is None
    np.testing.assert_array_equal(maps["blur_none"], clip)
    assert maps["blur_none"] is not clip


def test_blur_is_the_four_stage_pipeline(clip: np.ndarray) -> None:
    import cv2

    frame = clip[2]
    small = cv2.resize(frame, (80, 48), interpolation=cv2.INTER_AREA)
    filtered = cv2.bilateralFilter(small, 3, 150 * (80 / 720), 100 * (80 / 720))
    up = cv2.resize(filtered, (160, 96), interpolation=cv2.INTER_LINEAR)
    down = cv2.resize(up, (16, 9), interpolation=cv2.INTER_CUBIC)
    expected = cv2.resize(down, (160, 96), interpolation=cv2.INTER_CUBIC)
    assert blur_parameters(160, 96, "medium") == (2, 3, 150 * (80 / 720), 100 * (80 / 720), (16, 9))
    np.testing.assert_array_equal(blur_map(frame, "medium"), expected)


def test_presets_give_different_blurs(maps: dict[str, np.ndarray]) -> None:
    blurs = [maps[f"blur_{p}"] for p in BLUR_PRESETS]
    assert all(not np.array_equal(a, b) for i, a in enumerate(blurs) for b in blurs[i + 1 :])


def test_compute_control_dispatch(clip: np.ndarray, maps: dict[str, np.ndarray]) -> None:
    np.testing.assert_array_equal(compute_control("edge", clip), maps["edge_medium"])
    np.testing.assert_array_equal(compute_control("blur", clip, "high"), maps["blur_high"])
    for kind in ("depth", "seg", "wsm"):
        with pytest.raises(ValidationError, match=f"{kind}.control_path"):
            compute_control(kind, clip)
    with pytest.raises(ValidationError, match="kind"):
        compute_control("normal", clip)


# ---------------------------------------------------------------------- geometry


def _columns(height: int, width: int) -> np.ndarray:
    """A frame whose pixel values encode their column and row, to locate crops exactly."""
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack([xx % 256, yy % 256, (xx // 256)], axis=-1).astype(np.uint8)


def test_fit_to_bucket_crops_the_centre_without_scaling() -> None:
    wide = _columns(96, 200)
    np.testing.assert_array_equal(fit_to_bucket(wide, 160, 96), wide[:, 20:180])
    tall = _columns(200, 160)
    np.testing.assert_array_equal(fit_to_bucket(tall, 160, 96), tall[52:148])
    odd = _columns(96, 161)  # offset round(0.5) == 0, as torchvision's centre crop
    np.testing.assert_array_equal(fit_to_bucket(odd, 160, 96), odd[:, 0:160])
    same = _columns(96, 160)
    out = fit_to_bucket(same, 160, 96)
    np.testing.assert_array_equal(out, same)
    assert np.shares_memory(out, same)


def test_fit_to_bucket_covers_then_crops() -> None:
    import cv2

    frames = np.stack([_columns(180, 320)] * 2)
    out = fit_to_bucket(frames, 320, 192)  # scale 192/180 -> 342x192, crop 11 px each side
    assert out.shape == (2, 192, 320, 3)
    expected = cv2.resize(frames[0], (342, 192), interpolation=cv2.INTER_LINEAR)[:, 11:331]
    np.testing.assert_array_equal(out[0], expected)
    shrunk = fit_to_bucket(_columns(1080, 1920), 1280, 720)
    assert shrunk.shape == (720, 1280, 3)
    np.testing.assert_array_equal(shrunk, cv2.resize(_columns(1080, 1920), (1280, 720), interpolation=cv2.INTER_AREA))
    square = fit_to_bucket(np.zeros((1, 100, 100, 3), np.uint8), 160, 96)
    assert square.shape == (1, 96, 160, 3)


def test_bucket_for() -> None:
    assert bucket_for((1920, 1080), "720") == (1280, 720)
    assert bucket_for((640, 480), 720) == (1104, 832)
    assert bucket_for(np.zeros((2, 96, 160, 3), np.uint8), "128") == (160, 96)
    assert bucket_for(np.zeros((500, 400, 3), np.uint8), "480p") == (544, 736)
    assert bucket_for((640, 480), "720", "16:9") == (1280, 720)
    with pytest.raises(ValidationError, match="resolution"):
        bucket_for((640, 480), "999")
    with pytest.raises(ValidationError, match="aspect_ratio"):
        bucket_for((640, 480), "720", "2,1")


# ---------------------------------------------------------------------- temporal padding


def test_mirror_pad_sequence() -> None:
    assert mirror_pad_indices(3, 10) == [0, 1, 2, 2, 1, 1, 2, 2, 1, 1]
    assert mirror_pad_indices(5, 9) == [0, 1, 2, 3, 4, 4, 3, 2, 1]
    assert mirror_pad_indices(100, 101)[-3:] == [98, 99, 99]
    assert mirror_pad_indices(1, 4) == [0, 0, 0, 0]
    assert mirror_pad_indices(2, 6) == [0, 1, 1, 1, 1, 1]  # the framework's loop never reaches frame 0 for T=2
    frames = np.arange(4)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    padded = mirror_pad(frames, 7)
    assert padded[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 3, 2, 1]
    assert mirror_pad(frames, 3) is frames
    with pytest.raises(ValidationError):
        mirror_pad_indices(0, 3)


# ---------------------------------------------------------------------- reading controls


@pytest.mark.parametrize("fps", [24.0, 10.0, 30000 / 1001])
def test_a_control_reads_back_with_its_frames_and_fps(tmp_path: Path, clip: np.ndarray, fps: float) -> None:
    frames = np.concatenate([clip, clip[::-1]])
    path = media.write_mp4(tmp_path / "clip.mp4", frames, fps)
    decoded, read_fps = load_control(path)
    assert decoded.shape == frames.shape and decoded.dtype == np.uint8
    assert read_fps == pytest.approx(fps, rel=1e-4)
    assert np.abs(decoded.astype(int) - frames).mean() < 4
    assert load_control(path, max_frames=2)[0].shape[0] == 2


def test_load_control_fits_to_bucket(tmp_path: Path, clip: np.ndarray) -> None:
    path = media.write_mp4(tmp_path / "depth.mp4", clip, 10)
    frames, fps = load_control(path, 320, 192)
    assert frames.shape == (3, 192, 320, 3) and fps == pytest.approx(10)
    as_stored, _ = load_control(path, max_frames=2)
    assert as_stored.shape == (2, 96, 160, 3)
    with pytest.raises(ValidationError) as missing:
        load_control(tmp_path / "missing.mp4", field="depth.control_path")
    assert missing.value.field == "depth.control_path"
    with pytest.raises(ValidationError, match="width"):
        load_control(path, 320)


def test_an_image_control_is_one_frame_at_one_fps(tmp_path: Path, clip: np.ndarray) -> None:
    path = media.write_png(tmp_path / "still.png", clip[0])
    frames, fps = load_control(path)
    assert fps == 1.0  # inference/vision.py read_media_frames
    np.testing.assert_array_equal(frames[0], clip[0])

