"""Previews, static HTML, comparisons, plots and the generate form (cosmos_helpers.widgets)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from cosmos_helpers import Generation, GenerationRequest, ValidationError
from cosmos_helpers import widgets as W
from cosmos_helpers import display as context

T, H, WIDTH, FPS, RATE = 9, 96, 160, 24.0, 48_000
ASSETS = Path(__file__).resolve().parents[1] / "cookbooks/cosmos3/generator/audiovisual/assets"


def make_generation(*, sound: bool = True, seed: int = 0, image: bool = False,
                    backend: str = "diffusers") -> Generation:
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (1 if image else T, H, WIDTH, 3), dtype=np.uint8)
    audio = None
    if sound and not image:
        t = np.arange(int(RATE * T / FPS)) / RATE
        audio = np.stack([0.4 * np.sin(2 * np.pi * 440 * t), 0.4 * np.sin(2 * np.pi * 660 * t)]).astype(np.float32)
    request = GenerationRequest(mode="text2image" if image else "text2video", prompt=f"a yellow robot, take {seed}",
                                width=WIDTH, height=H, num_frames=None if image else T, sound=audio is not None,
                                seed=seed, num_inference_steps=2)
    return Generation(frames=frames, fps=FPS, seed=seed, request=request, sound=audio, backend=backend, model="tiny",
                      timings={"total_s": 1.25})


@pytest.fixture(autouse=True)
def _static(monkeypatch, tmp_path):
    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "1")
    monkeypatch.setenv("COSMOS_HELPERS_PREVIEW_DIR", str(tmp_path / "preview-cache"))


@pytest.fixture
def saved(tmp_path) -> Generation:
    generation = make_generation()
    generation.save(tmp_path / "out" / "clip")
    return generation


def streams(path: Path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        out = {"video": video.codec_context.name, "pix_fmt": video.codec_context.pix_fmt,
               "size": (video.codec_context.width, video.codec_context.height)}
        if container.streams.audio:
            audio = container.streams.audio[0]
            out.update(audio=audio.codec_context.name, rate=audio.rate, channels=audio.channels)
        return out


def embedded_videos(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:video/mp4;base64,([A-Za-z0-9+/=]+)"', html)]


# Import hygiene --------------------------------------------------------------------------------------------


def test_import_is_light():
    code = ("import sys, cosmos_helpers.widgets, cosmos_helpers.gallery; "
            "heavy = [m for m in ('torch', 'diffusers', 'ipywidgets', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_exports():
    import cosmos_helpers

    assert cosmos_helpers.show is W.show and cosmos_helpers.GenerateForm is W.GenerateForm


# Preview transcode -----------------------------------------------------------------------------------------


def test_preview_is_small_h264_aac_beside_the_output(saved):
    view = W.show(saved)
    media_path = saved.paths["media"]
    preview = media_path.with_name("clip.preview.mp4")
    assert preview.is_file()
    info = streams(preview)
    assert info["video"] == "h264" and info["pix_fmt"] == "yuv420p" and info["size"] == (WIDTH, H)
    assert info["audio"] == "aac" and info["rate"] == 48_000 and info["channels"] == 2
    assert preview.stat().st_size < 300_000
    assert embedded_videos(view.data) == [preview.read_bytes()]


def test_preview_caps_size_and_drops_audio_when_silent(tmp_path):
    generation = make_generation(sound=False)
    generation.save(tmp_path / "quiet")
    W.show(generation, max_side=80)
    preview = tmp_path / "quiet.preview80.mp4"
    info = streams(preview)
    assert info["size"] == (80, 48) and "audio" not in info


def test_preview_rebuilt_only_when_stale(saved):
    W.show(saved)
    preview = saved.paths["media"].with_name("clip.preview.mp4")
    first = preview.stat().st_mtime_ns
    W.show(saved)
    assert preview.stat().st_mtime_ns == first, "a fresh preview must be reused"
    old = saved.paths["media"].stat().st_mtime - 100
    os.utime(preview, (old, old))
    W.show(saved)
    assert preview.stat().st_mtime_ns > first - 100 * 10**9 and preview.stat().st_mtime > old


def test_unsaved_generation_and_arrays_preview_in_cache(tmp_path):
    generation = make_generation(seed=5)
    view = W.show(generation)
    cached = list((tmp_path / "preview-cache").glob("*.preview.mp4"))
    assert len(cached) == 1 and embedded_videos(view.data) == [cached[0].read_bytes()]
    assert streams(cached[0])["audio"] == "aac"
    W.show(generation.frames, fps=12)
    assert len(list((tmp_path / "preview-cache").glob("*.preview.mp4"))) == 2


# Static HTML -----------------------------------------------------------------------------------------------


def test_static_show_embeds_preview_not_full_resolution(saved):
    view = W.show(saved)
    html = view.data
    assert "<video" in html and "controls" in html and 'src="data:video/mp4;base64,' in html
    full = base64.b64encode(saved.paths["media"].read_bytes()).decode()
    assert full[:400] not in html
    for text in ("a yellow robot", "seed 0", "diffusers:tiny", "1.2 s", "160×96", "sound"):
        assert text in html, text


def test_static_show_from_path_manifest_and_image(saved, tmp_path):
    for source in (saved.paths["media"], saved.paths["manifest"], str(saved.paths["media"])):
        html = W.show(source).data
        assert "<video" in html and "a yellow robot" in html and "seed 0" in html
    picture = make_generation(image=True, seed=2)
    picture.save(tmp_path / "still")
    html = W.show(tmp_path / "still.png").data
    assert "<img" in html and "<video" not in html and "text2image" in html


def test_inputs_without_manifest_are_never_written_beside(tmp_path):
    from cosmos_helpers import media

    assets = tmp_path / "assets"
    clip = media.write_mp4(assets / "control.mp4", make_generation(sound=False).frames, FPS)
    html = W.compare(clip, make_generation(seed=4), labels=["control", "output"]).data
    assert sorted(p.name for p in assets.iterdir()) == ["control.mp4"]
    assert html.count("<video") == 2 and list((tmp_path / "preview-cache").glob("control-*.preview.mp4"))


def test_show_generation_loaded_back_from_disk(saved):
    loaded = Generation.load(saved.paths["media"])
    html = W.show(loaded).data
    assert "a yellow robot" in html and "seed 0" in html and "<video" in html


def test_large_preview_falls_back_to_poster(saved, monkeypatch):
    monkeypatch.setenv("COSMOS_HELPERS_EMBED_LIMIT", "1000")
    html = W.show(saved).data
    assert "<video" not in html and "preview not embedded" in html and "data:image/jpeg" in html


def test_grid_contact_sheet(saved):
    items = [saved, make_generation(seed=1), make_generation(image=True, seed=2)]
    html = W.grid(items, columns=2).data
    assert html.count("<tr>") == 2 and html.count("<figure") == 3
    assert "<video" not in html, "thumbnails by default"
    for seed in (0, 1, 2):
        assert f"seed {seed}" in html
    players = W.grid(items, players=True).data
    assert players.count("<video") == 2


def test_compare_side_by_side_and_slider(saved):
    control = np.full((T, H, WIDTH, 3), 128, np.uint8)
    html = W.compare(control, saved, labels=["control", "output"]).data
    assert html.count("<video") == 2 and "control" in html and "output" in html
    slider = W.compare(control, saved, labels=["control", "output"], mode="slider").data
    assert slider.count("<img") == 2 and slider.count('type="range"') == 1 and "oninput" in slider
    three = W.compare(saved, make_generation(seed=1), make_generation(seed=2), mode="slider").data
    assert three.count('type="range"') == 2 and "seed 1" in three
    with pytest.raises(ValueError):
        W.compare(saved, control, mode="mosaic")


def test_compare_default_labels_name_the_difference():
    html = W.compare(make_generation(seed=1), make_generation(seed=2), display=False).data
    assert "seed 1</div>" in html and "seed 2</div>" in html


# Plots -----------------------------------------------------------------------------------------------------


def test_frame_strip_sizes(saved):
    strip = W.frame_strip(saved, n=4, height=None)
    assert strip.size == (4 * WIDTH + 3 * 4, H + 16)
    small = W.frame_strip(saved, n=8, height=48, labels=False)
    assert small.size == (8 * 80 + 7 * 4, 48)
    assert W.frame_strip(make_generation(image=True), n=8).size == (WIDTH, H + 16)


def test_sound_plot_figure(saved):
    from matplotlib.figure import Figure

    fig = W.sound_plot(saved)
    assert isinstance(fig, Figure)
    assert tuple(fig.get_size_inches() * fig.dpi) == (1000, 500)
    assert len(fig.axes) == 3  # waveform, spectrogram, colorbar
    assert len(fig.axes[0].lines) == 2
    assert W.sound_plot(saved.paths["media"]) is not None, "sound is read back from the file"
    assert W.sound_plot(make_generation(sound=False)) is None


# Context detection -----------------------------------------------------------------------------------------


def test_static_detection(monkeypatch):
    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "0")
    assert context.is_static() is False
    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "yes")
    assert context.is_static() is True
    monkeypatch.delenv("COSMOS_HELPERS_STATIC")
    assert context.is_static() is True, "no kernel: static"


def test_viewers_display_once_and_return_nothing_in_ipython():
    """A viewer as a cell's last line shows once: it displays and returns None (no second display by the
    displayhook); ``display=False`` hands the object back undisplayed."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shown = []
        shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
        assert W.show(np.zeros((1, 16, 16, 3), np.uint8)) is None
        assert len(shown) == 1 and "text/html" in shown[0]
        held = W.show(np.zeros((1, 16, 16, 3), np.uint8), display=False)
        assert held is not None and len(shown) == 1
    finally:
        InteractiveShell.clear_instance()


# Live widgets ----------------------------------------------------------------------------------------------


def test_live_widgets(saved, monkeypatch):
    import ipywidgets as widgets

    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "0")
    box = W.show(saved)
    assert isinstance(box, widgets.VBox)
    video, caption = box.children
    assert isinstance(video, widgets.Video) and video.format == "mp4" and not video.autoplay
    assert video.value == saved.paths["media"].with_name("clip.preview.mp4").read_bytes()
    assert "a yellow robot" in caption.value
    picture = W.show(make_generation(image=True))
    assert isinstance(picture.children[0], widgets.Image)
    sheet = W.grid([saved, make_generation(seed=3)], columns=2)
    assert isinstance(sheet, widgets.GridBox) and len(sheet.children) == 2
    row = W.compare(saved, make_generation(seed=3))
    assert isinstance(row, widgets.HBox) and len(row.children) == 2
    assert "type=\"range\"" in W.compare(saved, make_generation(seed=3), mode="slider").data


# GenerateForm ----------------------------------------------------------------------------------------------


def test_form_builds_and_reports_validation_errors_in_place():
    import ipywidgets as widgets

    class NeverCalled:
        name = "never"

        def generate(self, request, progress=None):  # pragma: no cover - must not be reached
            raise AssertionError("an invalid request reached the backend")

    form = W.GenerateForm(NeverCalled(), defaults={"num_frames": 10, "tier": "128"})
    assert isinstance(form.widget, widgets.VBox) and form.button.description == "Generate"
    assert isinstance(form.progress, widgets.IntProgress)
    assert form.generate() is None
    assert "num_frames" in form.status.value and "Fix:" in form.status.value
    assert form.num_frames.layout.border and form.progress.bar_style == "danger"
    bundle = form._repr_mimebundle_()
    assert "cosmos-helpers-form" in bundle["text/html"] and "Generate" in bundle["text/html"]
    form.num_frames.value = 9
    form.mode.value = "image2video"
    assert form.image.layout.display is None and form.generate() is None
    assert "<b>image</b>" in form.status.value and form.image.layout.border and not form.num_frames.layout.border
    form.mode.value = "text2image"
    assert form.num_frames.disabled and form.image.layout.display == "none"
    form.mode.value = "image2image"  # an edit keeps its input's shape unless a tier is picked
    assert form.tier.value == "input" and form.aspect_ratio.disabled
    form.image.value = str(ASSETS / "images/rolling_ball.png")
    assert form.request().resolve().keeps_image_size
    form.tier.value = "128"
    assert not form.aspect_ratio.disabled and form.request().tier == "128"


def test_a_form_given_a_size_sends_no_aspect_ratio_of_its_own():
    """The size sets the ratio; the dropdown's value would contradict a square size (and be refused)."""
    form = W.GenerateForm(object(), defaults={"profile": "tiny", "width": 64, "height": 64})
    request = form.request().resolve()
    assert (request.width, request.height, request.aspect_ratio) == (64, 64, "1,1")
    form.mode.value = "forward_dynamics"  # an action mode with a size: refused as a ValidationError, not a crash
    form.image.value = str(ASSETS / "images/rolling_ball.png")
    with pytest.raises(ValidationError):
        form.request()


def test_the_form_chooses_the_step_cache():
    """Backend default, off, or SeaCache with the backend's settings or a threshold typed in; a bad threshold is a
    validation error in place, never a request."""
    from cosmos_helpers import SeaCache

    form = W.GenerateForm(object(), defaults={"profile": "tiny"})
    assert form.request().step_cache is None and form.cache_threshold.layout.display == "none"
    form.step_cache.value = "off"
    assert form.request().step_cache == "off"
    form.step_cache.value = "sea"
    assert form.cache_threshold.layout.display is None and form.request().step_cache == SeaCache()
    form.cache_threshold.value = "0.4"
    assert form.request().step_cache == SeaCache(threshold=0.4)
    form.cache_threshold.value = "much"
    with pytest.raises(ValidationError, match="step-cache"):
        form.request()
    again = W.GenerateForm(object(), defaults={"step_cache": SeaCache(threshold=0.3)})
    assert again.step_cache.value == "sea" and again.cache_threshold.value == "0.3"


def test_form_generate_button_runs_tiny_generation(tmp_path):
    import torch

    from cosmos_helpers import DiffusersBackend

    torch.set_num_threads(1)
    form = W.GenerateForm(DiffusersBackend(progress=False), output_dir=tmp_path / "form",
                          defaults={"profile": "tiny", "tier": "128", "aspect_ratio": "16,9", "num_frames": 9,
                                    "num_inference_steps": 2, "seed": 7, "sound": True})
    seen = []
    form.progress.observe(lambda change: seen.append(change["new"]), names="value")
    form.button.click()
    assert form.last_error is None, form.status.value
    generation = form.last
    assert generation is not None and generation.frames.shape == (9, 96, 160, 3) and generation.sound is not None
    assert form.progress.value == form.progress.max == 2 and 1 in seen
    assert "done in" in form.status.value and form.history == [generation]
    media = generation.paths["media"]
    assert media.parent == tmp_path / "form" and media.with_suffix(".json").is_file()
    assert media.with_name(media.stem + ".preview.mp4").is_file(), "the form shows the result"


def test_compare_shows_cached_passes_and_psnr(tiny_backend):
    from cosmos_helpers.views.viewers import _add_psnr, _items

    request = GenerationRequest(mode="t2v", prompt="a red ball", num_inference_steps=12)
    plain, cached = tiny_backend.generate(request), tiny_backend.generate(request.replace(step_cache="sea"))
    items = _items([plain, cached], ["uncached", "SeaCache"])
    _add_psnr(items)
    computed = cached.provenance["step_cache"]["passes_computed"]
    assert f"{computed} of 24 passes computed (step cache)" in items[1].caption_text()
    assert "passes computed" not in items[0].caption_text()  # no cache: nothing to say
    assert "dB vs uncached" in items[1].caption_text()
    html = W.compare(plain, cached, labels=["uncached", "SeaCache"], psnr=True, display=False)
    assert "dB vs uncached" in str(getattr(html, "data", html))
