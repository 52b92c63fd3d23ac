"""DiffusersBackend runs every mode on the real tiny pipeline, reproducibly, with the request's settings."""

import os

import numpy as np
import pytest

from cosmos_helpers import DiffusersBackend, GenerationRequest, ValidationError
from cosmos_helpers.errors import BackendUnavailableError, GuardrailError
from cosmos_helpers.schedules import configure_scheduler

SMALL = dict(num_inference_steps=2)


@pytest.mark.parametrize(("mode", "sound"), [("text2image", False), ("text2video", False), ("text2video", True),
                                             ("image2video", False), ("image2video", True), ("video2video", False),
                                             ("video2video", True)])
def test_every_mode_runs_on_the_tiny_model(tiny_backend, rgb_image, rgb_video, mode, sound):
    media = {"image2video": {"image": rgb_image}, "video2video": {"video": rgb_video}}.get(mode, {})
    request = GenerationRequest(mode=mode, prompt="a robot", sound=sound, **media, **SMALL)
    steps = []
    generation = tiny_backend.generate(request, progress=lambda step, total: steps.append((step, total)))
    expected = (1, 128, 128, 3) if mode == "text2image" else (9, 96, 160, 3)  # tiny: t2i at 1:1, video at 16:9
    assert generation.frames.shape == expected and generation.frames.dtype == np.uint8
    assert steps == [(1, 2), (2, 2)]
    assert generation.seed == 0 and generation.backend == "diffusers" and generation.model == "tiny"
    assert {"load_s", "total_s", "denoise_s", "decode_s"} <= set(generation.timings)
    if sound:
        # 9 frames @ 24 fps -> ceil(18000 / 1920) = 10 sound latents -> 19,200 samples, stereo
        assert generation.sound.shape == (2, 19200) and generation.sample_rate == 48000
        assert np.isfinite(generation.sound).all()
    else:
        assert generation.sound is None


def test_conditioning_image_shapes_the_first_frame(tiny_backend, rgb_image):
    base = GenerationRequest(mode="i2v", prompt="a robot", image=rgb_image, **SMALL)
    other = base.replace(image=255 - rgb_image)
    assert not np.array_equal(tiny_backend.generate(base).frames[0], tiny_backend.generate(other).frames[0])


def test_same_seed_same_output_other_seed_different(tiny_backend):
    request = GenerationRequest(mode="t2v", prompt="a robot", sound=True, **SMALL)
    first, again = tiny_backend.generate(request), tiny_backend.generate(request)
    assert np.array_equal(first.frames, again.frames) and np.array_equal(first.sound, again.sound)
    other = tiny_backend.generate(request.replace(seed=1))
    assert not np.array_equal(first.frames, other.frames)


def test_flow_shift_reaches_the_scheduler(tiny_backend):
    request = GenerationRequest(mode="t2v", prompt="a robot", flow_shift=3.0, **SMALL)
    low = tiny_backend.generate(request)
    expected = configure_scheduler(tiny_backend.pipeline("tiny").scheduler.config, None, 3.0)
    expected.set_timesteps(2)
    assert low.provenance["timesteps"] == [round(float(t), 3) for t in expected.timesteps]
    shifted = tiny_backend.generate(request.replace(flow_shift=10.0))
    assert shifted.provenance["timesteps"] != low.provenance["timesteps"]
    assert not np.array_equal(low.frames, shifted.frames)


def test_karras_config_is_overridden_so_the_shift_takes_effect():
    karras = {"num_train_timesteps": 1000, "prediction_type": "flow_prediction", "use_flow_sigmas": True,
              "use_karras_sigmas": True, "sigma_max": 200.0, "sigma_min": 0.147}
    low, high = configure_scheduler(karras, None, 1.0), configure_scheduler(karras, None, 10.0)
    low.set_timesteps(8)
    high.set_timesteps(8)
    assert not np.array_equal(low.timesteps.numpy(), high.timesteps.numpy())


def test_another_flow_matching_scheduler_can_be_swapped_in():
    from diffusers import FlowMatchEulerDiscreteScheduler

    backend = DiffusersBackend(progress=False, scheduler=FlowMatchEulerDiscreteScheduler)
    generation = backend.generate(GenerationRequest(mode="t2v", prompt="a robot", **SMALL))
    assert generation.provenance["scheduler"] == "FlowMatchEulerDiscreteScheduler"
    euler = configure_scheduler(backend.pipeline("tiny").scheduler.config, FlowMatchEulerDiscreteScheduler, 10.0)
    euler.set_timesteps(2)
    assert generation.provenance["timesteps"] == [round(float(t), 3) for t in euler.timesteps]


def test_a_scheduler_instance_keeps_its_own_settings_or_is_refused_before_loading():
    """An instance is the user's explicit choice: its shift is used unless the request sets flow_shift, and what
    would have to be overridden (a different shift, Karras sigmas) is refused before any model loads."""
    from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

    mine = UniPCMultistepScheduler(use_flow_sigmas=True, prediction_type="flow_prediction", flow_shift=3.0)
    assert configure_scheduler({}, mine, 10.0, shift_given=False).config.flow_shift == 3.0  # the profile's 10: unset
    assert configure_scheduler({}, mine, 3.0, shift_given=True).config.flow_shift == 3.0
    with pytest.raises(ValidationError, match="built with flow_shift=3") as conflict:
        configure_scheduler({}, mine, 10.0, shift_given=True)
    assert conflict.value.field == "flow_shift"
    euler = FlowMatchEulerDiscreteScheduler(shift=5.0)
    assert configure_scheduler({}, euler, 10.0, shift_given=False).config.shift == 5.0
    plain = configure_scheduler({}, UniPCMultistepScheduler(), 10.0, shift_given=True).config  # built with defaults
    assert (plain.use_flow_sigmas, plain.prediction_type, plain.flow_shift) == (True, "flow_prediction", 10.0)
    karras = UniPCMultistepScheduler(use_flow_sigmas=True, use_karras_sigmas=True, flow_shift=3.0)
    backend = DiffusersBackend(progress=False, scheduler=karras)
    backend._loaded = lambda model: pytest.fail("the model was loaded before the refusal")
    with pytest.raises(ValidationError, match="Karras") as refused:
        backend.generate(GenerationRequest(mode="t2v", prompt="a robot", **SMALL))
    assert refused.value.field == "scheduler"


@pytest.mark.slow
def test_a_scheduler_instances_settings_read_the_same_in_every_process():
    """Recorded in manifests and compared by reruns in new processes: no set order (hash seed) may leak in."""
    import subprocess
    import sys

    code = ("import json; from diffusers import FlowMatchEulerDiscreteScheduler as E; from cosmos_helpers import "
            "DiffusersBackend; from cosmos_helpers.result import json_safe; print(json.dumps(json_safe("
            "DiffusersBackend(scheduler=E(shift=5.0)).output_settings())))")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(seen) == 1


def test_a_non_flow_scheduler_is_refused():
    from diffusers import DDIMScheduler

    with pytest.raises(ValidationError, match="scheduler"):
        configure_scheduler({}, DDIMScheduler, 10.0)


def test_guardrails_without_cosmos_guardrail_explain_both_ways_out(tiny_backend):
    request = GenerationRequest(mode="t2v", prompt="a robot", guardrails=True, **SMALL)
    with pytest.raises(BackendUnavailableError) as caught:
        tiny_backend.generate(request)
    assert "pip install cosmos_guardrail" in str(caught.value) and "guardrails=False" in str(caught.value)


class StandInChecker:
    """Implements the CosmosSafetyChecker contract the pipeline relies on."""

    def __init__(self, blocked_word=None, block_video=False):
        self.blocked_word, self.block_video, self.seen_frames = blocked_word, block_video, None

    def check_text_safety(self, prompt):
        return self.blocked_word not in prompt if self.blocked_word else True

    def check_video_safety(self, frames):
        self.seen_frames = frames
        return None if self.block_video else frames


def test_guardrails_check_the_prompt_before_and_the_frames_after():
    checker = StandInChecker(blocked_word="forbidden")
    backend = DiffusersBackend(progress=False, safety_checker=checker)
    with pytest.raises(GuardrailError, match="prompt"):
        backend.generate(GenerationRequest(mode="t2v", prompt="a forbidden scene", guardrails=True, **SMALL))
    assert checker.seen_frames is None  # blocked before any denoising
    backend.generate(GenerationRequest(mode="t2v", prompt="a robot", guardrails=True, **SMALL))
    assert checker.seen_frames.dtype == np.uint8 and checker.seen_frames.shape == (9, 96, 160, 3)
    checker.block_video = True
    with pytest.raises(GuardrailError, match="video"):
        backend.generate(GenerationRequest(mode="t2v", prompt="a robot", guardrails=True, **SMALL))


def test_structured_prompts_reach_the_pipeline_with_metadata_and_no_templates(tiny_backend, assets):
    request = GenerationRequest(mode="t2v", prompt=assets / "prompts/text2video/warehouse_robot.json",
                                **SMALL).resolve()
    kwargs = tiny_backend.pipeline_kwargs(request)
    assert kwargs["prompt"] == request.prompt_text()
    assert kwargs["add_resolution_template"] is False and kwargs["add_duration_template"] is False


def test_options_left_out_keep_the_pipelines_own_defaults(tiny_backend):
    """use_system_prompt, the templates and the negative prompt are only passed when the request sets them."""
    plain = tiny_backend.pipeline_kwargs(GenerationRequest(mode="t2v", prompt="a robot", **SMALL))
    assert "use_system_prompt" not in plain and "add_resolution_template" not in plain
    assert "add_duration_template" not in plain and plain["negative_prompt"] is None
    explicit = tiny_backend.pipeline_kwargs(GenerationRequest(
        mode="t2v", prompt="a robot", use_system_prompt=False, add_duration_template=False, negative_prompt="",
        **SMALL))
    assert explicit["use_system_prompt"] is False and explicit["add_duration_template"] is False
    assert explicit["negative_prompt"] == "" and "add_resolution_template" not in explicit
    clip = np.zeros((9, 96, 160, 3), np.uint8)
    v2v = tiny_backend.pipeline_kwargs(GenerationRequest(mode="v2v", prompt="a robot", video=clip, **SMALL))
    assert "condition_frame_indexes_vision" not in v2v and "condition_video_keep" not in v2v
    v2v = tiny_backend.pipeline_kwargs(GenerationRequest(mode="v2v", prompt="a robot", video=clip,
                                                         condition_frames=(0,), condition_video_keep="last", **SMALL))
    assert v2v["condition_frame_indexes_vision"] == [0] and v2v["condition_video_keep"] == "last"
    request = GenerationRequest(mode="t2v", prompt="a robot", **SMALL)
    assert not np.array_equal(tiny_backend.generate(request).frames,
                              tiny_backend.generate(request.replace(use_system_prompt=False)).frames)


def _count_transformer_calls(backend, request):
    pipe = backend.pipeline("tiny")
    calls = []
    original = pipe.transformer.forward

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    pipe.transformer.forward = counting
    try:
        generation = backend.generate(request)
    finally:
        pipe.transformer.forward = original
    return len(calls), generation


def test_guidance_interval_skips_the_negative_pass_outside_it(tiny_backend):
    request = GenerationRequest(mode="t2i", prompt="a robot", guidance_scale=4.0, **SMALL)  # timesteps 999, ~600
    full, _ = _count_transformer_calls(tiny_backend, request)
    assert full == 4  # two steps, conditional + negative each
    gated, generation = _count_transformer_calls(tiny_backend, request.replace(guidance_interval=(800, 1000)))
    assert generation.provenance["timesteps"][1] < 800 <= generation.provenance["timesteps"][0]
    assert gated == 3  # the second step is outside: no negative pass
    inside, _ = _count_transformer_calls(tiny_backend, request.replace(guidance_interval=(0, 1000)))
    assert inside == 4


@pytest.mark.slow
def test_high_step_counts_with_a_large_shift_run_to_the_end(tiny_backend):
    """At 200 steps and shift 10 neighbouring timesteps round to the same integer; diffusers' UniPC then started
    one step late and failed on the last one (``assert self.this_order > 0``)."""
    steps = []
    request = GenerationRequest(mode="t2v", prompt="a robot", num_inference_steps=200, flow_shift=10.0)
    generation = tiny_backend.generate(request, progress=lambda step, total: steps.append(step))
    assert steps[-1] == 200 and generation.frames.shape == (9, 96, 160, 3)


def test_the_model_is_the_requests_and_never_swapped_for_another(monkeypatch):
    """A Nano request on a machine without the checkpoint fails; it does not quietly run the tiny model."""
    with pytest.raises(TypeError, match="'model'"):  # the backend takes no model: the request names it
        DiffusersBackend(model="tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = DiffusersBackend(progress=False)
    nano = GenerationRequest(mode="t2v", prompt="a robot", profile="nano", tier="256", num_frames=9,
                             num_inference_steps=1, guardrails=False)
    with pytest.raises(BackendUnavailableError, match="nvidia/Cosmos3-Nano"):
        backend.generate(nano)


def test_two_backends_share_the_weights_without_stepping_on_each_other():
    """Interleaved calls of backends with different schedulers and fast settings give each its own result."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    unipc = DiffusersBackend(progress=False)
    euler = DiffusersBackend(progress=False, scheduler=FlowMatchEulerDiscreteScheduler)
    fast = DiffusersBackend(progress=False, fast=True)
    request = GenerationRequest(mode="t2v", prompt="a robot", **SMALL)
    alone = unipc.generate(request).frames
    euler_alone = euler.generate(request).frames
    assert unipc.pipeline("tiny") is euler.pipeline("tiny") is fast.pipeline("tiny")
    fast.generate(request)
    assert np.array_equal(unipc.generate(request).frames, alone)
    assert np.array_equal(euler.generate(request).frames, euler_alone)
    assert not np.array_equal(alone, euler_alone)


def test_v2v_input_is_cropped_to_the_target_aspect_not_stretched(tiny_backend):
    wide = np.zeros((9, 100, 400, 3), np.uint8)
    wide[:, :, 150:250] = 255  # a white centre band; a stretch would keep the black sides in view
    kwargs = tiny_backend.pipeline_kwargs(GenerationRequest(mode="v2v", prompt="x", video=wide, **SMALL))
    first = np.asarray(kwargs["video"][0])
    assert first.shape == (96, 160, 3)
    assert first[:, 40:120].mean() > 200 and first[:, :10].mean() < 60


def test_unknown_local_model_is_a_validation_error(tmp_path):
    with pytest.raises(ValidationError, match="model_index.json"):
        DiffusersBackend(progress=False).pipeline(str(tmp_path))


@pytest.mark.parametrize("device_map", [None, {}, "balanced"])
def test_a_given_device_map_reaches_from_pretrained_as_given(monkeypatch, device_map):
    """``device_map`` decides whether the pipeline is moved afterwards, so any value given, even empty, is passed."""
    from cosmos_helpers.backends.diffusers import loading as backend_module

    seen = {}

    class Loaded(Exception):
        pass

    class FakeClass:
        @staticmethod
        def from_pretrained(source, **kwargs):
            seen.update(kwargs)
            raise Loaded

    monkeypatch.setattr(backend_module, "pipeline_class", lambda: FakeClass)
    with pytest.raises(Loaded):
        DiffusersBackend(device="cpu", device_map=device_map, progress=False)._load("tiny").pipe
    assert seen.get("device_map", "absent") == ("absent" if device_map is None else device_map)
