"""Audio-conditioned generation (EXPERIMENTAL on diffusers): clip loading, 48 kHz stereo conforming, and that the
generated video depends on the audio while the conditioning image pins the first frame."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosmos_helpers import DiffusersBackend, media
from cosmos_helpers.samples import chime_sound, rolling_ball_clip
from cosmos_helpers.backends.diffusers.audio import conform_audio, load_audio_clip


def test_resample_to_48k_stereo_and_trim_or_pad_to_the_clip_length():
    mono = np.sin(np.linspace(0, 200, 44100, dtype=np.float32))[None]  # 1 s at 44.1 kHz
    out = conform_audio(mono, 44100, num_frames=17, fps=24)
    assert out.shape == (2, int(17 / 24 * 48000)) and out.dtype == np.float32
    assert np.array_equal(out[0], out[1])  # mono duplicated
    long = conform_audio(chime_sound(2.0), 48000, num_frames=9, fps=24)
    assert long.shape == (2, 18000) and np.array_equal(long, chime_sound(2.0)[:, :18000])
    short = conform_audio(chime_sound(0.1), 48000, num_frames=9, fps=24)
    assert short.shape == (2, 18000) and not short[:, 4800:].any()  # zero-padded
    up = conform_audio(np.ones((2, 16000), np.float32), 16000, num_frames=25, fps=25)
    assert up.shape == (2, 48000) and abs(float(up[:, 1000:47000].mean()) - 1.0) < 1e-3


def test_wav_and_the_audio_track_of_a_video_load(tmp_path):
    wav = media.write_wav(tmp_path / "chime.wav", chime_sound(0.5), 48000)
    samples, rate = load_audio_clip(wav)
    assert rate == 48000 and samples.shape == (2, 24000)
    assert np.abs(samples - chime_sound(0.5)).max() < 1e-3
    mp4 = media.write_mp4(tmp_path / "clip.mp4", rolling_ball_clip(12, 64, 48), 24, sound=chime_sound(0.5))
    track, rate = load_audio_clip(mp4)
    assert rate == 48000 and track.shape[0] == 2 and track.shape[1] >= 23000
    with pytest.raises(Exception, match="no audio stream"):
        load_audio_clip(media.write_mp4(tmp_path / "silent.mp4", rolling_ball_clip(4, 64, 48), 24))


def test_video_depends_on_the_audio_and_the_image_pins_the_first_frame():
    from cosmos_helpers.backends.diffusers.audio import generate_with_audio

    image = rolling_ball_clip(1, 320, 180)[0]
    kwargs = dict(image=image, sample_rate=48000, num_steps=1, seed=0, progress=False,
                  backend=DiffusersBackend(progress=False))  # tiny, 160x96, 9 frames
    chime = generate_with_audio("a ball bounces", chime_sound(1.0), **kwargs)
    noise = generate_with_audio("a ball bounces", np.random.default_rng(0).uniform(-1, 1, (2, 48000)).astype(
        np.float32), **kwargs)
    assert chime.frames.shape == (9, 96, 160, 3) and chime.sound.shape == (2, 18000)
    assert not np.array_equal(chime.frames, noise.frames)
    assert np.array_equal(chime.frames[0], noise.frames[0])
    assert "EXPERIMENTAL" in chime.provenance["experimental"]


def test_audio_image2video_sample_runs_through_run_spec(tmp_path):
    from cosmos_helpers.transfer.runner import run_spec

    media.write_wav(tmp_path / "chime.wav", chime_sound(1.0), 48000)
    media.write_png(tmp_path / "first.png", rolling_ball_clip(1, 320, 180)[0])
    spec = {"name": "audio", "model_mode": "audio_image2video", "prompt": "a ball bounces to a chime",
            "vision_path": "first.png", "sound_path": "chime.wav", "fps": 24, "num_steps": 1, "seed": 1}
    (tmp_path / "audio.json").write_text(json.dumps(spec))
    out = run_spec(tmp_path / "audio.json", out=tmp_path / "out", progress=False)
    assert out.frames.shape == (9, 96, 160, 3) and out.seed == 1 and out.sound.shape == (2, 18000)  # tiny: 9 frames
    assert out.paths["media"] == tmp_path / "out" / "audio" / "vision.mp4"
    assert media.read_video(out.paths["media"], with_audio=True).sound.shape[0] == 2  # the clip rides along
    assert json.loads(out.paths["manifest"].read_text())["request"]["input"]["sound_path"] == "chime.wav"


class _Guardrail:
    """A safety checker that blocks every prompt and records what it was shown (DiffusersBackend's hook)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def check_text_safety(self, prompt: str) -> bool:
        self.prompts.append(prompt)
        return False


def test_the_samples_guardrails_check_the_audio_prompt(tmp_path):
    from cosmos_helpers import DiffusersBackend
    from cosmos_helpers.errors import GuardrailError
    from cosmos_helpers.transfer.runner import run_spec

    media.write_wav(tmp_path / "chime.wav", chime_sound(0.5), 48000)
    media.write_png(tmp_path / "first.png", rolling_ball_clip(1, 320, 180)[0])
    spec = {"name": "audio", "model_mode": "audio_image2video", "prompt": "a ball bounces to a chime",
            "vision_path": str(tmp_path / "first.png"), "sound_path": str(tmp_path / "chime.wav"), "num_steps": 1,
            "seed": 1}
    checker = _Guardrail()
    backend = DiffusersBackend(safety_checker=checker, progress=False)
    with pytest.raises(GuardrailError, match="blocked the prompt"):
        run_spec(spec, backend=backend, profile="tiny", guardrails=True, out=tmp_path / "out", progress=False)
    assert len(checker.prompts) == 1 and checker.prompts[0].startswith("a ball bounces to a chime")
    assert not (tmp_path / "out" / "audio").exists()
