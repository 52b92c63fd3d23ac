"""What each backend can honour of a framework sample (refused before any work, naming the field and the backend),
the generation request a sample becomes (backend options left to each backend unless the sample sets them), and
the fingerprint a rerun compares."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cosmos_helpers import media
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.samples import chime_sound, rolling_ball_clip
from cosmos_helpers.specs import Sample, SampleRun, generation_request, given_fields
from tests.sample_checks import check_backend


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    media.write_png(tmp_path / "still.png", rolling_ball_clip(1, 64, 48)[0])
    media.write_mp4(tmp_path / "clip.mp4", rolling_ball_clip(9, 64, 48), 24)
    media.write_wav(tmp_path / "chime.wav", chime_sound(0.5), 48000)
    return tmp_path


def check(folder: Path, backend: str, *, model: str | None = None, **data) -> None:
    sample = Sample.from_dict({"prompt": "a robot", **data}, base_dir=folder, name="s")
    profile = "nano" if backend == "framework" else "tiny"
    check_backend(sample, sample.resolved(profile=profile, model=model), backend, given_fields(sample))


REFUSED = [
    # (action modes run on diffusers now: tests/contracts/test_framework_contract.py runs the framework's examples)
    (dict(num_outputs=2), "num_outputs"),
    (dict(prompt_upsampling=True), "prompt_upsampling"),
    (dict(tensors_file="still.png"), "tensors_file"),
    (dict(duration_template="{duration}s"), "duration_template"),
    (dict(negative_metadata_mode="inverse"), "negative_metadata_mode"),
    (dict(normalize_cfg=True), "normalize_cfg"),
    (dict(enable_sound=True, sound_path="chime.wav"), "sound_path"),
    (dict(model_mode="text2image", enable_sound=True), "enable_sound"),
    (dict(model_mode="text2video", vision_path="still.png"), "vision_path"),
    (dict(model_mode="image2video", vision_path="still.png", condition_frame_indexes_vision=[0, 1]),
     "condition_frame_indexes_vision"),
    (dict(vision_path="clip.mp4", edge={}, share_vision_temporal_positions=False), "share_vision_temporal_positions"),
    (dict(model_mode="audio_image2video", vision_path="still.png", sound_path="chime.wav", guidance_interval=[0, 9]),
     "guidance_interval"),
]


@pytest.mark.parametrize(("data", "field"), REFUSED, ids=[f for _, f in REFUSED])
def test_what_diffusers_cannot_honour_is_refused_and_the_framework_runs_it(folder, data, field):
    with pytest.raises(ValidationError) as refused:
        check(folder, "diffusers", **data)
    assert refused.value.field == field and "diffusers cannot run this" in str(refused.value) and refused.value.fix
    check(folder, "framework", model="nvidia/Cosmos3-Nano", **data)  # the framework takes every valid sample


def test_a_defaults_files_own_choices_are_sent_or_refused_like_the_samples_own(folder):
    """The framework runs a sample with its defaults_file: where that file departs from the framework's defaults,
    another backend sends the value or refuses it, as for a field written in the sample."""
    import json

    from cosmos_helpers.specs.resolve import builtin_defaults

    framework_defaults = builtin_defaults("text2video")
    files = {"plain.json": framework_defaults,
             "chosen.json": {**framework_defaults, "negative_prompt": "blurry", "guidance_interval": [400, 1000]},
             "cfg.json": {**framework_defaults, "normalize_cfg": True}}
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))

    def request(name: str, backend: str = "diffusers"):
        sample = Sample.from_dict({"prompt": "a robot", "model_mode": "text2video", "defaults_file": name, "seed": 1},
                                  base_dir=folder, name="s")
        resolved = sample.resolved(profile="tiny")
        given = given_fields(sample, None, resolved)
        check_backend(sample, resolved, backend, given)
        return generation_request(resolved, given)

    plain = request("plain.json")  # the framework's own defaults: each backend keeps its own
    assert plain.negative_prompt is None and plain.guidance_interval is None
    chosen = request("chosen.json")
    assert chosen.negative_prompt == "blurry" and chosen.guidance_interval == pytest.approx((400, 1000))
    for backend in ("diffusers", "vllm-omni"):
        with pytest.raises(ValidationError, match="set by its defaults_file cfg.json") as refused:
            request("cfg.json", backend)
        assert refused.value.field == "normalize_cfg"


def test_an_edit_sample_runs_on_diffusers_and_the_framework_not_vllm_omni(folder):
    edit = dict(model_mode="image2image", vision_path="still.png")
    check(folder, "diffusers", **edit)
    check(folder, "framework", model="nvidia/Cosmos3-Nano", **edit)
    with pytest.raises(ValidationError, match="no image-edit path") as refused:
        check(folder, "vllm-omni", **edit)
    assert refused.value.field == "model_mode" and "diffusers" in refused.value.fix
    check(folder, "diffusers", resolution="480", aspect_ratio="4,3", **edit)  # a bucket: both given
    for backend in ("diffusers", "framework"):  # one alone the framework would drop without a word
        for name, value in (("resolution", "480"), ("aspect_ratio", "4,3")):
            with pytest.raises(ValidationError, match="only given both") as refused:
                check(folder, backend, model="nvidia/Cosmos3-Nano" if backend == "framework" else None,
                      **{name: value}, **edit)
            assert refused.value.field == name


def test_vllm_omni_has_no_audio_conditioning_and_encodes_itself(folder):
    audio = dict(model_mode="audio_image2video", vision_path="still.png", sound_path="chime.wav")
    check(folder, "diffusers", **audio)  # experimental there
    with pytest.raises(ValidationError, match="no audio conditioning") as refused:
        check(folder, "vllm-omni", **audio)
    assert "diffusers" in refused.value.fix
    check(folder, "diffusers", model_mode="text2image", image_save_quality=80)
    with pytest.raises(ValidationError) as quality:
        check(folder, "vllm-omni", model_mode="text2image", image_save_quality=80)
    assert quality.value.field == "image_save_quality"


def test_fields_the_framework_itself_ignores_are_accepted(folder):
    check(folder, "diffusers", sigma_max=70.0, extra={"note": 1}, output_dir="elsewhere", domain_name="av",
          prompt_upsampler_temperature=0.3, duration_template="The video is {duration:.1f} seconds long and is of "
          "{fps:.0f} FPS.")


def test_a_model_named_in_the_sample_must_be_the_one_that_runs(folder):
    check(folder, "diffusers", model="nvidia/Cosmos3-Nano", model_mode="text2image")
    sample = Sample.from_dict({"prompt": "p", "model": "Cosmos3-Nano"}, base_dir=folder)
    check_backend(sample, sample.resolved(model="nvidia/Cosmos3-Nano"), "framework", given_fields(sample))
    with pytest.raises(ValidationError, match="names 'Cosmos3-Nano' but the run uses 'tiny'") as refused:
        check_backend(sample, sample.resolved(profile="tiny"), "diffusers", given_fields(sample))
    assert refused.value.field == "model"


# ---------------------------------------------------------------------------------------------- requests


def request_of(folder: Path, **data):
    sample = Sample.from_dict({"prompt": "a robot", "seed": 1, **data}, base_dir=folder, name="s")
    return generation_request(sample.resolved(profile="tiny"), given_fields(sample)).resolve()


def test_a_sample_becomes_a_request_with_the_backends_own_defaults_left_alone(folder):
    request = request_of(folder, model_mode="text2video")
    assert (request.width, request.height, request.num_frames, request.num_inference_steps) == (160, 96, 9, 4)
    assert (request.guidance_scale, request.flow_shift, request.fps, request.seed) == (6.0, 10.0, 24.0, 1)
    for option in ("negative_prompt", "use_system_prompt", "add_resolution_template", "add_duration_template",
                   "guidance_interval"):
        assert getattr(request, option) is None, option
    explicit = request_of(folder, model_mode="text2video", negative_prompt="blurry",
                          resolution_template="This video is of {height}x{width} resolution.")
    assert explicit.negative_prompt_text() == "blurry" and explicit.add_resolution_template is True
    structured = request_of(folder, prompt='{"subject": "a robot"}',
                            resolution_template="This video is of {height}x{width} resolution.")
    assert structured.is_structured and structured.add_resolution_template is None  # metadata instead


def test_the_frameworks_strict_interval_becomes_the_same_inclusive_one(folder):
    lo, hi = request_of(folder, guidance_interval=[400, 1000]).guidance_interval
    assert (lo, hi) == (math.nextafter(400.0, math.inf), math.nextafter(1000.0, 0))
    assert not lo <= 400 and lo <= 400.0001 and hi < 1000


def test_conditioning_inputs_reach_the_request(folder):
    i2v = request_of(folder, model_mode="image2video", vision_path="still.png")
    assert i2v.mode == "image2video" and Path(i2v.image) == folder / "still.png"
    v2v = request_of(folder, vision_path="clip.mp4", condition_frame_indexes_vision=[0], condition_video_keep="last")
    assert v2v.mode == "video2video" and (v2v.condition_frames, v2v.condition_video_keep) == ((0,), "last")


def test_the_fingerprint_follows_the_input_overrides_and_file_contents(folder):
    def fingerprint(data, overrides=None):
        sample = Sample.from_dict({"prompt": "p", "vision_path": "clip.mp4", "edge": {}, **data}, base_dir=folder)
        return SampleRun.create(sample, sample.resolved(profile="tiny", overrides=overrides), overrides).fingerprint()

    base = fingerprint({})
    assert fingerprint({}) == base
    assert fingerprint({"seed": 5}) != base and fingerprint({}, {"num_steps": 2}) != base
    media.write_mp4(folder / "clip.mp4", rolling_ball_clip(9, 64, 48, seed=3), 24, overwrite=True)
    assert fingerprint({}) != base  # same path, other content


def test_a_url_input_is_downloaded_once_into_the_frameworks_cache(folder, tmp_path, monkeypatch):
    """Real HTTP on loopback: the file lands where the framework looks for it, with its ``.done`` marker."""
    import functools
    import http.server
    import threading

    from cosmos_helpers.specs.runs import localize

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/clip.mp4"
        monkeypatch.setenv(fw.DOWNLOAD_CACHE_ENV, str(tmp_path / "cache"))
        sample = Sample.from_dict({"prompt": "p", "vision_path": url, "edge": {}, "seed": 1}, base_dir=folder)
        local = localize(sample.resolved(profile="tiny"), progress=False)
        cached = fw.download_cache_path(url, "vision.mp4", tmp_path / "cache")
        assert local.vision_path == str(cached) and cached.read_bytes() == (folder / "clip.mp4").read_bytes()
        assert Path(f"{cached}.done").read_text() == url
        (folder / "clip.mp4").unlink()  # the cached copy is used from now on
        assert localize(sample.resolved(profile="tiny"), progress=False).vision_path == str(cached)
        missing = Sample.from_dict({"prompt": "p", "vision_path": url.replace("clip", "nope")}, base_dir=folder)
        with pytest.raises(ValidationError, match="cannot download .*404") as offline:
            localize(missing.resolved(profile="tiny"), progress=False)
        assert fw.DOWNLOAD_CACHE_ENV in offline.value.fix
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_guardrails_are_decided_once_when_resolving(folder):
    """An explicit choice wins, else the profile's, else the framework's default; the request carries it as is."""
    sample = Sample.from_dict({"prompt": "a robot", "model_mode": "text2image", "seed": 1}, base_dir=folder)
    assert sample.resolved(profile="tiny").guardrails is False and sample.resolved(profile="nano").guardrails is True
    assert sample.resolved(profile="tiny", guardrails=True).guardrails is True
    assert sample.resolved(profile="nano", guardrails=False).sources["guardrails"] == "given"
    assert sample.resolved().guardrails is fw.GUARDRAILS_DEFAULT is True  # the framework's own default: on
    r = sample.resolved(profile="tiny", guardrails=True)
    assert generation_request(r, given_fields(sample)).guardrails is True  # not re-decided from the tiny profile
    with pytest.raises(ValidationError) as bad:
        sample.resolved(guardrails="no")
    assert bad.value.field == "guardrails"
    run = SampleRun.create(sample, sample.resolved(profile="tiny"))  # they let an output through or not, as in
    assert run.fingerprint() == SampleRun.create(sample, r).fingerprint()  # GenerationRequest's fingerprint


def test_a_backend_scheduler_the_sample_cannot_use_is_refused_before_any_work(folder, tmp_path):
    """A spec run sends the sample's shift (the framework's default where it sets none); a scheduler instance built
    with another is refused naming the sample's shift, and a transfer sample, whose sampler is the framework's own,
    refuses any scheduler instead of leaving it unused."""
    from diffusers import UniPCMultistepScheduler

    from cosmos_helpers import DiffusersBackend
    from cosmos_helpers.transfer.runner import plan_spec, run_spec

    mine = UniPCMultistepScheduler(flow_shift=3.0, use_flow_sigmas=True, prediction_type="flow_prediction")
    backend = DiffusersBackend(progress=False, scheduler=mine)
    out = tmp_path / "out"
    sample = {"prompt": "a robot", "model_mode": "text2video"}
    with pytest.raises(ValidationError) as refused:
        run_spec(sample, backend=backend, profile="tiny", out=out, progress=False)
    assert refused.value.field == "shift" and "framework's default shift" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        run_spec({**sample, "shift": 5.0}, backend=backend, profile="tiny", out=out, progress=False)
    assert refused.value.field == "shift" and "the sample's shift is 5" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        run_spec({"prompt": "a robot", "vision_path": str(folder / "clip.mp4"), "edge": {}}, backend=backend,
                 profile="tiny", out=out, progress=False)
    assert refused.value.field == "scheduler"
    assert not out.exists()  # refused before the output folder (or a model) was touched
    dry = plan_spec({**sample, "shift": 3.0}, backend=backend, profile="tiny", out=out, progress=False).run
    assert generation_request(dry.resolved, dry.given).flow_shift == 3.0  # the same shift: accepted
