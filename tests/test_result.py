"""Saving is atomic, never silently overwrites, carries a manifest, and muxes real AAC at 48 kHz."""

import json

import numpy as np
import pytest

from cosmos_helpers import Generation, GenerationRequest, generate_and_save, media
from cosmos_helpers.errors import OutputExistsError
from cosmos_helpers.result import find_saved
from cosmos_helpers.backends.base import Backend


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
    assert path.suffix == ".png" and np.array_equal(media.read_image(path), frame)
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

    monkeypatch.setattr(media.encode, "_encode", explode)
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


class CountingBackend(Backend):
    name = "counting"

    def __init__(self):
        self.calls = 0

    def generate(self, request):
        self.calls += 1
        generation = make_generation(sound=request.sound, seed=request.seed)
        generation.request, generation.backend = request, self.name
        return generation


def test_generate_and_save_skips_finished_work_by_fingerprint(tmp_path):
    backend = CountingBackend()
    request = GenerationRequest(mode="t2v", prompt="a test clip", sound=True)
    generate_and_save(backend, request, tmp_path / "clip")
    again = generate_and_save(backend, request, tmp_path / "clip")
    assert backend.calls == 1 and again.provenance["skipped"]
    assert find_saved(tmp_path / "clip", request) == tmp_path / "clip.mp4"
    assert find_saved(tmp_path / "clip", request, backend="counting") == tmp_path / "clip.mp4"
    assert find_saved(tmp_path / "clip", request.replace(seed=3)) is None
    with pytest.raises(OutputExistsError):
        generate_and_save(backend, request.replace(seed=3), tmp_path / "clip")
    assert backend.calls == 1  # refused before generating: the old output is intact, no minutes wasted
    assert json.loads((tmp_path / "clip.json").read_text())["seed"] == 0
    with pytest.raises(OutputExistsError, match="skip_existing"):
        generate_and_save(backend, request, tmp_path / "clip", skip_existing=False)
    assert backend.calls == 1


def test_an_output_made_without_guardrails_does_not_serve_a_request_that_asks_for_them(tmp_path):
    """Guardrails stay out of the fingerprint, but an unchecked output must not pass for a checked one."""
    backend = CountingBackend()
    unchecked = GenerationRequest(mode="t2v", prompt="a test clip", guardrails=False)
    checked = unchecked.replace(guardrails=True)
    assert checked.fingerprint() == unchecked.fingerprint()
    generate_and_save(backend, unchecked, tmp_path / "clip")
    assert find_saved(tmp_path / "clip", checked) is None
    with pytest.raises(OutputExistsError, match="without guardrails.*overwrite=True"):
        generate_and_save(backend, checked, tmp_path / "clip")
    assert backend.calls == 1 and json.loads((tmp_path / "clip.json").read_text())["request"]["guardrails"] is False
    generate_and_save(backend, checked, tmp_path / "checked")
    assert find_saved(tmp_path / "checked", unchecked) == tmp_path / "checked.mp4"  # a checked output serves either


def test_a_save_racing_another_at_the_same_stem_never_replaces_its_manifest(tmp_path, monkeypatch):
    """Both passed the check; the other one's manifest lands first: this save fails and takes its media back."""
    video = make_generation()
    image = Generation(frames=video.frames[:1], fps=24.0, seed=0, backend="test",
                       request=GenerationRequest(mode="t2i", prompt="a test still"))
    write_media = Generation._write_media

    def racing(self, target, overwrite):
        write_media(self, target, overwrite)
        # meanwhile the other save, past its own check too, publishes its media and manifest
        write_media(video, tmp_path / "shot.mp4", False)
        media.write_bytes_atomic(tmp_path / "shot.json", json.dumps(video.manifest(tmp_path / "shot.mp4")).encode())

    monkeypatch.setattr(Generation, "_write_media", racing)
    with pytest.raises(OutputExistsError):
        image.save(tmp_path / "shot")
    assert not (tmp_path / "shot.png").exists()
    assert json.loads((tmp_path / "shot.json").read_text())["media"] == "shot.mp4"


def test_an_overwrite_cut_short_leaves_no_manifest_naming_the_new_media(tmp_path, monkeypatch):
    """Killed between the new media and its manifest: the old manifest must not vouch for the new video."""
    old, new = make_generation(seed=0), make_generation(seed=1)
    old.save(tmp_path / "clip")
    write_bytes_atomic = media.write_bytes_atomic

    def killed(path, *args, **kwargs):
        if str(path).endswith(".json"):
            raise KeyboardInterrupt
        return write_bytes_atomic(path, *args, **kwargs)

    monkeypatch.setattr(media, "write_bytes_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "clip", overwrite=True)
    assert not (tmp_path / "clip.json").exists()
    assert find_saved(tmp_path / "clip", old.request) is None


def test_an_overwrite_interrupted_while_encoding_keeps_the_old_output_whole(tmp_path, monkeypatch):
    old, new = make_generation(seed=0), make_generation(seed=1)
    old.save(tmp_path / "clip")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(media, "write_mp4", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "clip", overwrite=True)
    assert find_saved(tmp_path / "clip", old.request) == tmp_path / "clip.mp4"  # video and manifest as they were


def test_an_overwrite_with_another_kind_of_media_interrupted_keeps_the_old_output(tmp_path, monkeypatch):
    """An image replaced by a video: the image goes only once the video is written, so its manifest never names a
    deleted file."""
    old = Generation(frames=np.zeros((1, 96, 160, 3), np.uint8), fps=24.0, seed=0, backend="test",
                     request=GenerationRequest(mode="t2i", prompt="a test image", seed=0))
    old.save(tmp_path / "clip")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(media, "write_mp4", interrupted)
    with pytest.raises(KeyboardInterrupt):
        make_generation(seed=1).save(tmp_path / "clip", overwrite=True)
    assert find_saved(tmp_path / "clip", old.request) == tmp_path / "clip.png"
    monkeypatch.undo()
    assert make_generation(seed=1).save(tmp_path / "clip", overwrite=True) == tmp_path / "clip.mp4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.json", "clip.mp4"]
    (tmp_path / "clip.png").write_bytes((tmp_path / "clip.mp4").read_bytes()[:0])  # a video-to-image save cut off
    old.save(tmp_path / "clip", overwrite=True)  # after its image was written: every other kind goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.json", "clip.png"]


def test_an_output_made_with_other_backend_settings_is_not_reused(tmp_path, tiny_backend):
    """The same request on a backend with another scheduler (or dtype, FP8 weights...) is another generation."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    from cosmos_helpers import DiffusersBackend

    request = GenerationRequest(mode="t2i", prompt="a red cube", tier="128", num_inference_steps=2)
    first = generate_and_save(tiny_backend, request, tmp_path / "cube")
    assert json.loads((tmp_path / "cube.json").read_text())["settings"] == {"dtype": "float32", "scheduler": None}
    assert generate_and_save(tiny_backend, request, tmp_path / "cube").provenance["skipped"]
    euler = DiffusersBackend(progress=False, scheduler=FlowMatchEulerDiscreteScheduler)
    assert find_saved(tmp_path / "cube", request, backend="diffusers", settings=euler.output_settings()) is None
    with pytest.raises(OutputExistsError, match="other diffusers settings"):
        generate_and_save(euler, request, tmp_path / "cube")
    again = generate_and_save(euler, request, tmp_path / "cube", overwrite=True)
    assert not again.provenance.get("skipped") and not np.array_equal(again.frames, first.frames)
    saved = json.loads((tmp_path / "cube.json").read_text())
    assert saved["settings"]["scheduler"] == "FlowMatchEulerDiscreteScheduler"


def test_another_backends_output_is_not_reused(tmp_path):
    """Same request, another backend: another generation. It must neither be skipped to nor overwritten."""
    request = GenerationRequest(mode="t2v", prompt="a test clip", sound=True)
    first = CountingBackend()
    generate_and_save(first, request, tmp_path / "clip")
    other = CountingBackend()
    other.name = "elsewhere"
    assert find_saved(tmp_path / "clip", request, backend="elsewhere") is None
    with pytest.raises(OutputExistsError):
        generate_and_save(other, request, tmp_path / "clip")
    assert other.calls == 0 and json.loads((tmp_path / "clip.json").read_text())["backend"] == "counting"


def test_published_files_follow_the_umask_like_any_other_tool(tmp_path):
    import os
    import stat

    previous = os.umask(0o022)
    try:
        path = make_generation().save(tmp_path / "shared")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o644
        os.umask(0o002)
        still = media.write_png(tmp_path / "group.png", np.zeros((4, 4, 3), np.uint8))
        assert stat.S_IMODE(still.stat().st_mode) == 0o664
    finally:
        os.umask(previous)


def test_a_finished_file_is_kept_byte_for_byte(tmp_path):
    """What a server or the framework delivered is copied, not decoded and encoded a second time."""
    source = make_generation(sound=True).save(tmp_path / "source")
    delivered = source.read_bytes()
    video = media.read_video(source, with_audio=True)
    request = GenerationRequest(mode="t2v", prompt="a delivered clip", sound=True)
    from cosmos_helpers.result import FinishedFile

    kept = Generation(frames=video.frames, fps=24.0, seed=0, request=request, sound=video.sound, backend="server",
                      finished=FinishedFile(".mp4", data=delivered))
    path = kept.save(tmp_path / "copy")
    assert path.read_bytes() == delivered
    assert json.loads((tmp_path / "copy.json").read_text())["as_delivered"] is True
    still = Generation(frames=np.zeros((8, 8, 3), np.uint8), fps=24.0, seed=0, backend="framework",
                       finished=FinishedFile(".jpg", path=tmp_path / "vision.jpg"))
    (tmp_path / "vision.jpg").write_bytes(media.image_bytes(np.zeros((8, 8, 3), np.uint8), "JPEG"))
    saved = still.save(tmp_path / "still")
    assert saved.name == "still.jpg" and saved.read_bytes() == (tmp_path / "vision.jpg").read_bytes()
    assert Generation.load(saved).frames.shape == (1, 8, 8, 3)


def test_an_encoded_answer_decodes_from_memory_like_its_file(tmp_path):
    """A server's MP4 answer is decoded from the bytes it arrived as: same frames, fps and sound as from a file."""
    path = make_generation(sound=True).save(tmp_path / "clip")
    from_file = media.read_video(path, with_audio=True)
    from_bytes = media.read_video(path.read_bytes(), with_audio=True)
    assert np.array_equal(from_file.frames, from_bytes.frames) and from_file.fps == from_bytes.fps == 24.0
    assert np.array_equal(from_file.sound, from_bytes.sound) and from_bytes.sample_rate == 48000
    assert media.probe_video(path.read_bytes())["width"] == 160


def test_the_crf_a_generation_carries_is_the_one_it_is_saved_at(tmp_path):
    """The framework's video_save_quality becomes a CRF on the generation; a higher CRF is a smaller file."""
    sharp, rough = make_generation(sound=False), make_generation(sound=False)
    rough.crf = 40
    assert rough.save(tmp_path / "rough").stat().st_size < sharp.save(tmp_path / "sharp").stat().st_size
