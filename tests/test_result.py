"""Saving is atomic, never silently overwrites, carries a manifest, and muxes real AAC at 48 kHz."""

import json

import numpy as np
import pytest

from cosmos_helpers import Generation, GenerationRequest, OutputExistsError, find_saved, generate_and_save
from cosmos_helpers import media


def make_generation(sound=True, seed=0, frames=9):
    rng = np.random.default_rng(seed)
    request = GenerationRequest(mode="t2v", prompt="a test clip", sound=sound, seed=seed, num_frames=frames)
    t = np.arange(int(frames / 24 * 48000)) / 48000
    audio = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 660 * t)]).astype(np.float32)
    return Generation(frames=(rng.random((frames, 96, 160, 3)) * 255).astype(np.uint8), fps=24.0, seed=seed,
                      request=request, sound=audio if sound else None, backend="test", model="none",
                      timings={"total_s": 1.5})


def test_video_with_sound_is_h264_with_a_48khz_stereo_aac_track(tmp_path):
    import av

    path = make_generation().save(tmp_path / "clip")
    assert path.name == "clip.mp4"
    with av.open(str(path)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert video.codec_context.name == "h264" and (video.width, video.height) == (160, 96)
        assert audio.codec_context.name == "aac" and audio.rate == 48000 and audio.channels == 2
    decoded, rate = media.read_audio(path)
    assert rate == 48000 and decoded.shape[0] == 2
    assert decoded.shape[1] >= 18000  # 9 frames @ 24 fps = 0.375 s; AAC pads a little
    assert np.abs(decoded).max() > 0.3  # the tone survived encoding
    assert media.read_video(path).frames.shape == (9, 96, 160, 3)


def test_image_saves_as_lossless_png_with_manifest(tmp_path):
    request = GenerationRequest(mode="t2i", prompt="a still", seed=5)
    frame = (np.random.default_rng(2).random((96, 160, 3)) * 255).astype(np.uint8)
    path = Generation(frames=frame, fps=24.0, seed=5, request=request, backend="test").save(tmp_path / "still")
    assert path.suffix == ".png" and np.array_equal(media.read_png(path), frame)
    manifest = json.loads((tmp_path / "still.json").read_text())
    assert manifest["seed"] == 5 and manifest["kind"] == "image" and manifest["media"] == "still.png"
    assert manifest["request"]["mode"] == "text2image" and manifest["fingerprint"] == request.fingerprint()
    assert "numpy" in manifest["versions"] and manifest["timings"] == {}


def test_existing_output_of_another_request_is_never_overwritten(tmp_path):
    first = make_generation(seed=0)
    path = first.save(tmp_path / "clip")
    before = path.read_bytes()
    with pytest.raises(OutputExistsError):
        make_generation(seed=1).save(tmp_path / "clip")
    assert path.read_bytes() == before
    make_generation(seed=1).save(tmp_path / "clip", overwrite=True)
    assert path.read_bytes() != before
    assert json.loads((tmp_path / "clip.json").read_text())["seed"] == 1


def test_saving_the_same_request_again_is_a_rerun_not_a_conflict(tmp_path):
    path = make_generation().save(tmp_path / "clip")
    mtime = path.stat().st_mtime_ns
    assert make_generation().save(tmp_path / "clip") == path
    assert path.stat().st_mtime_ns == mtime


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(media, "_encode", explode)
    with pytest.raises(OSError):
        make_generation().save(tmp_path / "clip")
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_refuses_a_file_that_appeared_meanwhile(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(OutputExistsError):
        with media.atomic_path(target) as tmp:
            tmp.write_bytes(b"ours")
            target.write_bytes(b"theirs")
    assert target.read_bytes() == b"theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_an_output_folder_that_cannot_be_created_fails_before_writing(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the output folder should be")
    with pytest.raises(OSError):
        make_generation().save(blocker / "clip")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder"]


def test_load_reads_back_frames_sound_and_manifest(tmp_path):
    original = make_generation()
    path = original.save(tmp_path / "clip")
    loaded = Generation.load(path)
    assert loaded.frames.shape == original.frames.shape and loaded.seed == 0 and loaded.sound.shape[0] == 2
    assert loaded.fps == 24.0 and loaded.backend == "test"


class CountingBackend:
    name = "counting"

    def __init__(self):
        self.calls = 0

    def generate(self, request):
        self.calls += 1
        generation = make_generation(sound=request.sound, seed=request.seed)
        generation.request = request
        return generation


def test_generate_and_save_skips_finished_work_by_fingerprint(tmp_path):
    backend = CountingBackend()
    request = GenerationRequest(mode="t2v", prompt="a test clip", sound=True)
    generate_and_save(backend, request, tmp_path / "clip")
    again = generate_and_save(backend, request, tmp_path / "clip")
    assert backend.calls == 1 and again.provenance["skipped"]
    assert find_saved(tmp_path / "clip", request) == tmp_path / "clip.mp4"
    assert find_saved(tmp_path / "clip", request.replace(seed=3)) is None
    with pytest.raises(OutputExistsError):
        generate_and_save(backend, request.replace(seed=3), tmp_path / "clip")
    assert backend.calls == 2  # it generated, then refused to overwrite: the old output is intact
    assert json.loads((tmp_path / "clip.json").read_text())["seed"] == 0
