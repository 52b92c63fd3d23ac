"""Long videos by chaining (``extend``, ``long_video``): continuity at the joins, the sound track across them,
resume (saved chunks reused, another run's refused), seeds, every backend (tiny), and the inputs refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import Generation, GenerationRequest
from cosmos_helpers.backends.base import Backend
from cosmos_helpers.chaining import DEFAULT_CONDITIONING_FRAMES, extend, join, join_sound, latent_indexes, overlap_of
from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.longvideo import chunk_starts, long_video

PROMPT = "A red ball rolls slowly to the right across a grey floor."  # a caption of the tiny model's world


@pytest.fixture(scope="module")
def three_chunks(tiny_backend, tmp_path_factory):
    out = tmp_path_factory.mktemp("long")
    return long_video(PROMPT, tiny_backend, chunks=3, out=out, seed=0, sound=True, progress=False), out


# ---------------------------------------------------------------------------------------------- the measurement


def test_three_chunks_join_without_duplicated_frames(three_chunks):
    joined, out = three_chunks
    chunks = [Generation.load(out / "long_video_chunks" / f"chunk_{i:02d}.mp4") for i in range(3)]
    overlap = DEFAULT_CONDITIONING_FRAMES
    assert overlap == 5  # Cosmos3's v2v default: latent frames (0, 1)
    assert joined.num_frames == 9 + 2 * (9 - overlap) == 17
    assert chunk_starts(joined) == [0, 9, 13]
    saved = Generation.load(joined.paths["media"])
    assert saved.num_frames == 17 and saved.provenance["manifest"]["request"]["chunks"][1]["kept_from"] == overlap
    # the continuations' first frames (their re-creation of the conditioning) are not in the joined video
    expected, _, _ = join(chunks, [0, overlap, overlap])
    assert np.array_equal(joined.frames, expected)
    assert np.array_equal(joined.frames[9:13], chunks[1].frames[overlap:])


def test_joins_are_as_continuous_as_the_frames_within_a_chunk(three_chunks, tiny_backend):
    """The issue's measurement: the mean absolute frame difference across each join is no larger than the frame
    differences inside the chunks (their largest), and well below a hard cut to an unrelated clip of the same
    prompt; on the tiny default, deterministic (CPU, one thread, fixed seeds)."""
    joined, _ = three_chunks
    report = joined.provenance["continuity"]
    unrelated = tiny_backend.generate(GenerationRequest(mode="t2v", prompt=PROMPT, seed=99, sound=True))
    cut = float(np.abs(joined.frames[8].astype(np.float32) - unrelated.frames[0]).mean())
    print("\ncontinuity:", {k: v for k, v in report.items() if k != "steps"}, "hard cut:", cut)
    assert len(report["join_steps"]) == 2 and report["join_indexes"] == [8, 12]
    for step in report["join_steps"]:
        assert step <= report["within_max"] and step < cut


def test_the_sound_track_is_continuous_and_as_long_as_the_frames(three_chunks):
    joined, _ = three_chunks
    assert joined.sound is not None
    assert joined.sound.shape[1] == round(joined.num_frames * joined.sample_rate / joined.fps)
    saved = Generation.load(joined.paths["media"])
    assert saved.sound is not None and abs(saved.sound.shape[1] - joined.sound.shape[1]) < 2048  # AAC framing


def _chunk(frames: int, sound: np.ndarray, fps: float = 24.0, rate: int = 48000) -> Generation:
    return Generation(frames=np.zeros((frames, 16, 16, 3), np.uint8), fps=fps, seed=0, sound=sound, sample_rate=rate)


def test_sound_join_reproduces_one_continuous_signal():
    """Two chunks cut from one continuous tone, overlapping by 5 frames: the join is that tone, sample for sample."""
    rate, fps, overlap = 48000, 24.0, 5
    tone = np.sin(2 * np.pi * 440 * np.arange(rate) / rate).astype(np.float32)[None].repeat(2, 0)
    per_frame = rate // int(fps)
    first = _chunk(9, tone[:, :9 * per_frame + 700])  # a longer track (tokenizer padding) is trimmed
    second = _chunk(9, tone[:, 4 * per_frame:13 * per_frame])  # starts at frame 4: the last 5 frames of the first
    track = join_sound([first, second], [0, overlap])
    assert track.shape == (2, 13 * per_frame)
    np.testing.assert_allclose(track, tone[:, :13 * per_frame], atol=1e-6)


def test_sound_join_fades_two_different_tracks_without_a_click():
    rate, fps, overlap = 48000, 24.0, 5
    per_frame = rate // int(fps)
    low = np.full((2, 9 * per_frame), -0.5, np.float32)
    high = np.full((2, 9 * per_frame), 0.5, np.float32)
    track = join_sound([_chunk(9, low), _chunk(9, high)], [0, overlap])
    assert track.shape[1] == 13 * per_frame
    assert np.abs(np.diff(track, axis=1)).max() < 1.0 / (overlap * per_frame) + 1e-6  # a ramp, never a jump
    assert track[0, 4 * per_frame - 1] == -0.5 and track[0, 9 * per_frame] == 0.5


# ---------------------------------------------------------------------------------------------- resume and seeds


def test_a_rerun_reuses_every_saved_chunk_and_the_joined_video(three_chunks, tiny_backend, monkeypatch):
    joined, out = three_chunks

    def refuse(request):
        raise AssertionError("a finished long video was generated again")

    monkeypatch.setattr(tiny_backend, "generate", refuse)
    again = long_video(PROMPT, tiny_backend, chunks=3, out=out, seed=0, sound=True, progress=False)
    assert again.provenance.get("skipped") and again.paths["media"] == joined.paths["media"]
    assert chunk_starts(again) == [0, 9, 13]


def test_a_continuation_given_a_size_drops_the_inherited_aspect_ratio():
    from cosmos_helpers.chaining import continuation_request

    clip = Generation(frames=np.zeros((9, 96, 160, 3), np.uint8), fps=24.0, seed=0, backend="test",
                      request=GenerationRequest(mode="t2v", prompt=PROMPT, aspect_ratio="16:9", num_frames=9))
    square = continuation_request(clip, "next", width=64, height=64).resolve()
    assert (square.width, square.height, square.aspect_ratio) == (64, 64, "1,1")


def test_a_continuation_given_a_tier_keeps_the_clips_aspect_ratio():
    """A tier has no shape of its own: the clip's explicit aspect ratio still holds (not the default 16:9)."""
    from cosmos_helpers.chaining import continuation_request

    clip = Generation(frames=np.zeros((9, 128, 128, 3), np.uint8), fps=24.0, seed=1, backend="test",
                      request=GenerationRequest(mode="t2v", prompt=PROMPT, tier="128", aspect_ratio="1:1",
                                                num_frames=9))
    larger = continuation_request(clip, "next", tier="256").resolve()
    assert (larger.tier, larger.aspect_ratio, larger.width, larger.height) == ("256", "1,1", 256, 256)
    loaded = Generation(frames=np.zeros((9, 96, 96, 3), np.uint8), fps=24.0, seed=1)  # a clip with no request
    larger = continuation_request(loaded, "next", tier="256").resolve()
    assert (larger.tier, larger.aspect_ratio, larger.width, larger.height) == ("256", "1,1", 256, 256)


def test_a_joined_video_lost_beside_its_manifest_is_joined_again_from_the_saved_chunks(tiny_backend, tmp_path,
                                                                                        monkeypatch):
    first = long_video(PROMPT, tiny_backend, chunks=2, out=tmp_path, seed=0, progress=False)
    first.paths["media"].unlink()  # the manifest stays

    def refuse(request):
        raise AssertionError("a saved chunk was generated again")

    monkeypatch.setattr(tiny_backend, "generate", refuse)
    again = long_video(PROMPT, tiny_backend, chunks=2, out=tmp_path, seed=0, progress=False)
    assert again.paths["media"].is_file() and np.array_equal(again.frames, first.frames)


def test_an_interrupted_run_resumes_after_its_saved_chunks(tiny_backend, tmp_path, monkeypatch):
    calls: list[GenerationRequest] = []
    real = tiny_backend.generate

    def interrupted(request):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(request)
        return real(request)

    monkeypatch.setattr(tiny_backend, "generate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        long_video(PROMPT, tiny_backend, chunks=3, out=tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "long_video_chunks").iterdir()) == [
        "chunk_00.json", "chunk_00.mp4", "chunk_01.json", "chunk_01.mp4"]
    calls.clear()
    monkeypatch.setattr(tiny_backend, "generate", lambda request: (calls.append(request), real(request))[1])
    joined = long_video(PROMPT, tiny_backend, chunks=3, out=tmp_path, progress=False)
    assert [r.seed for r in calls] == [2] and calls[0].mode == "video2video"  # only the missing chunk
    assert calls[0].video == (tmp_path / "long_video_chunks" / "chunk_01.mp4").resolve()
    assert joined.num_frames == 17


def test_chunks_of_another_request_are_refused_before_any_work(three_chunks, tiny_backend, monkeypatch):
    _, out = three_chunks
    monkeypatch.setattr(tiny_backend, "generate", lambda request: pytest.fail("generated before refusing"))
    with pytest.raises(OutputExistsError, match="chunk_00"):  # another first prompt: every chunk differs
        long_video(["another scene", PROMPT, PROMPT], tiny_backend, out=out, sound=True, progress=False)
    with pytest.raises(OutputExistsError, match="chunk_02.* chunk 2 of another long video"):  # the last differs
        long_video([PROMPT, PROMPT, "the ball stops"], tiny_backend, out=out, sound=True, progress=False)
    manifest = json.loads((out / "long_video.json").read_text())
    assert [c["prompt"] for c in manifest["request"]["chunks"]] == [PROMPT] * 3  # nothing was overwritten


def test_seeds_are_derived_from_the_base_seed_or_given(tiny_backend, tmp_path, monkeypatch):
    seen: list[int] = []
    real = tiny_backend.generate
    monkeypatch.setattr(tiny_backend, "generate", lambda request: (seen.append(request.seed), real(request))[1])
    long_video(PROMPT, tiny_backend, chunks=2, out=tmp_path / "a", seed=40, progress=False)
    long_video(PROMPT, tiny_backend, chunks=2, out=tmp_path / "b", seeds=[7, 3], progress=False)
    assert seen == [40, 41, 7, 3]
    manifest = json.loads((tmp_path / "b" / "long_video.json").read_text())
    assert [c["seed"] for c in manifest["request"]["chunks"]] == [7, 3] and manifest["seed"] == 7


# ---------------------------------------------------------------------------------------------- extend


def test_extend_continues_a_video_on_its_last_frames(tiny_backend, tmp_path):
    first = tiny_backend.generate(GenerationRequest(mode="t2v", prompt=PROMPT, seed=3))
    chunk = extend(first, "the ball bounces", tiny_backend, conditioning_frames=1)
    request = chunk.request
    assert request.mode == "video2video" and request.condition_frames == (0,) and request.condition_video_keep == "last"
    assert request.seed == 4 and (request.width, request.height, request.num_frames) == (160, 96, 9)
    assert np.array_equal(request.conditioning_video(), first.frames)  # unsaved: its frames, as they are
    frames, _, starts = join([first, chunk], [0, overlap_of(request)])
    assert frames.shape[0] == 9 + 8 and starts == [0, 9]
    first.save(tmp_path / "first")
    assert extend.__module__ == "cosmos_helpers.chaining"
    from cosmos_helpers.chaining import continuation_request

    saved = continuation_request(first, "p", num_frames=17)
    assert saved.video == (tmp_path / "first.mp4").resolve() and saved.num_frames == 17  # saved: its file
    assert saved.condition_frames == latent_indexes(5) == (0, 1)


# ---------------------------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("call, field", [
    (lambda b, o: long_video([], b, out=o), "prompts"),
    (lambda b, o: long_video(PROMPT, b, chunks=0, out=o), "chunks"),
    (lambda b, o: long_video(PROMPT, b, out=o), "chunks"),
    (lambda b, o: long_video([PROMPT, PROMPT], b, chunks=3, out=o), "chunks"),
    (lambda b, o: long_video([PROMPT, ""], b, out=o), "prompt"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, seeds=[1], out=o), "seeds"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, seeds=[1, -1], out=o), "seed"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, conditioning_frames=4, out=o), "conditioning_frames"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, conditioning_frames=9, out=o), "conditioning_frames"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, conditioning_frames=0, out=o), "conditioning_frames"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, mode="text2image", out=o), "mode"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, mode="video2video", out=o), "mode"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, video=np.zeros((5, 96, 160, 3), np.uint8), out=o), "video"),
    (lambda b, o: long_video(PROMPT, b, chunks=2, name="../x", out=o), "name"),
    (lambda b, o: extend(Generation(np.zeros((1, 96, 160, 3), np.uint8), 24.0, 0), PROMPT, b), "generation"),
    (lambda b, o: extend(np.zeros((9, 96, 160, 3), np.uint8), PROMPT, b), "generation"),
    (lambda b, o: extend(Generation(np.zeros((9, 96, 160, 3), np.uint8), 24.0, 0), PROMPT, b,
                         conditioning_frames=13, num_frames=17), "conditioning_frames"),
    (lambda b, o: extend(Generation(np.zeros((9, 96, 160, 3), np.uint8), 24.0, 0), PROMPT, b,
                         mode="text2video"), "mode"),
])
def test_bad_inputs_are_refused_before_any_work(call, field, tmp_path):
    class Untouchable(Backend):
        name = "diffusers"

        def generate(self, request):
            raise AssertionError("generated before refusing")

    with pytest.raises(ValidationError) as refused:
        call(Untouchable(), tmp_path)
    assert refused.value.field == field and refused.value.fix
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------- other backends


@pytest.mark.slow
@pytest.mark.xdist_group("vllm-omni-server")
def test_chaining_on_the_vllm_omni_standin_server(local_vllm_omni_server, tmp_path):
    with local_vllm_omni_server.client() as backend:
        joined = long_video(PROMPT, backend, chunks=2, out=tmp_path, sound=True, progress=False)
        chunk = Generation.load(tmp_path / "long_video_chunks" / "chunk_01.mp4")
        assert chunk.provenance["manifest"]["request"]["condition_video_keep"] == "last"
        assert chunk.provenance["manifest"]["backend"] == "vllm-omni"
        assert joined.num_frames == 13 and joined.sound.shape[1] == 13 * 2000
        again = long_video(PROMPT, backend, chunks=2, out=tmp_path, sound=True, progress=False)
        assert again.provenance.get("skipped")


@pytest.mark.slow
def test_chaining_on_the_framework_standin(tmp_path):
    from cosmos_helpers.backends.framework import FrameworkBackend

    real = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs", progress=False)
    with pytest.raises(ValidationError) as tiny:  # the framework runs checkpoints, not tiny: refused before any run
        long_video(PROMPT, real, chunks=2, out=tmp_path / "refused", progress=False)
    assert tiny.value.field == "model" and tiny.value.fix and not (tmp_path / "runs").exists()
    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    joined = long_video(PROMPT, backend, chunks=2, out=tmp_path / "out", profile="nano", tier="256",
                        num_frames=9, num_inference_steps=1, guardrails=False, progress=False)
    assert joined.num_frames == 13 and (joined.width, joined.height) == (320, 192) and joined.backend == "framework"
    payload = Generation.load(tmp_path / "out" / "long_video_chunks" / "chunk_01.mp4")
    assert payload.provenance["manifest"]["request"]["condition_frames"] == [0, 1]


# ---------------------------------------------------------------------------------------------- command line


def test_the_long_video_command(tmp_path, capsys):
    from cosmos_helpers import cli

    assert cli.main(["long-video", "--prompt", PROMPT, "--out", str(tmp_path)]) == 1  # one prompt, no --chunks
    assert "chunks" in capsys.readouterr().err and not list(tmp_path.iterdir())
    assert cli.main(["long-video", "--prompt", PROMPT, "--prompt", "it stops", "--seeds", "5", "6",
                     "--out", str(tmp_path), "--name", "cli"]) == 0
    assert Path(capsys.readouterr().out.strip()) == tmp_path / "cli.mp4"
    manifest = json.loads((tmp_path / "cli.json").read_text())
    assert [c["seed"] for c in manifest["request"]["chunks"]] == [5, 6] and manifest["num_frames"] == 13


def test_a_long_video_can_start_from_an_image(tiny_backend, tmp_path, assets):
    image = assets / "images" / "rolling_ball.png"
    joined = long_video(PROMPT, tiny_backend, chunks=2, image=image, out=tmp_path, progress=False)
    modes = [json.loads((tmp_path / "long_video_chunks" / f"chunk_0{i}.json").read_text())["request"]["mode"]
             for i in range(2)]
    assert modes == ["image2video", "video2video"] and joined.num_frames == 13


def test_join_plot_shows_the_frames_around_each_join(three_chunks):
    from cosmos_helpers import join_plot

    joined, _ = three_chunks
    figure = join_plot(Generation.load(joined.paths["media"]), display=False)  # a saved long video, too
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles == [f"join {j}: frame {i}" for j, i in ((1, 7), (1, 8), (1, 9), (1, 10),
                                                           (2, 11), (2, 12), (2, 13), (2, 14))]
    with pytest.raises(ValidationError) as not_long:
        join_plot(Generation(np.zeros((9, 16, 16, 3), np.uint8), 24.0, 0), display=False)
    assert not_long.value.field == "generation"


def test_what_the_served_checkpoint_refuses_is_refused_before_the_first_chunk(tmp_path):
    """A vLLM-Omni server running Cosmos3-Edge, whose pipeline refuses video2video: a long video needs it for
    every continuation, so it is refused before the first chunk is sent (nothing is listening: nothing is sent)."""
    from cosmos_helpers import VllmOmniBackend

    backend = VllmOmniBackend("http://127.0.0.1:9")
    backend._remember_models({"data": [{"id": "nvidia/Cosmos3-Edge", "root": "nvidia/Cosmos3-Edge"}]})  # /v1/models
    with pytest.raises(ValidationError, match="Cosmos3-Edge.*refuses mode='video2video'") as refused:
        long_video(PROMPT, backend, chunks=2, profile="edge", out=tmp_path, progress=False)
    assert refused.value.field == "mode" and "Nano" in refused.value.fix and not list(tmp_path.iterdir())
