"""The variant profiles and image editing: what a request resolves, and every refusal (before any model loads)."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, presets
from cosmos_helpers.backends.framework import checkpoint_for, request_payload
from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import framework as fw


IMAGE = np.full((96, 160, 3), 128, dtype=np.uint8)  # 16:9
SCHEMA = fw.sample_overrides_schema()


def refused(field: str, **kwargs) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        GenerationRequest(**kwargs)
    assert caught.value.field == field and caught.value.fix, caught.value
    return caught.value


def test_distilled_profiles_resolve_the_fixed_schedule():
    t2i = GenerationRequest(mode="t2i", prompt="a cube", profile="super-t2i-4step").resolve()
    assert (t2i.num_inference_steps, t2i.guidance_scale, t2i.flow_shift) == (4, 1.0, 1.0)
    assert (t2i.width, t2i.height, t2i.model) == (1024, 1024, "nvidia/Cosmos3-Super-Text2Image-4Step")
    i2v = GenerationRequest(mode="i2v", prompt="a cube", profile="super-i2v-4step", image=IMAGE).resolve()
    assert (i2v.tier, i2v.num_inference_steps) == ("480", 4)
    # the values the checkpoint uses anyway may be said explicitly
    assert GenerationRequest(mode="t2i", prompt="p", profile="tiny-distilled", num_inference_steps=4,
                             guidance_scale=1.0, flow_shift=1.0).resolve().num_inference_steps == 4


@pytest.mark.parametrize("field, value", [("guidance_scale", 4.0), ("num_inference_steps", 8),
                                          ("num_inference_steps", 1), ("flow_shift", 5.0),
                                          ("negative_prompt", "blurry"), ("guidance_interval", (400, 1000))])
def test_distilled_profiles_refuse_what_no_backend_would_honour(field, value):
    error = refused(field, mode="t2i", prompt="a cube", profile="tiny-distilled", **{field: value})
    assert "tiny-distilled" in str(error) and "distilled" in str(error)


def test_a_distilled_profile_runs_only_its_checkpoints_modes():
    error = refused("mode", mode="t2v", prompt="a cube", profile="super-t2i-4step")
    assert "text2image" in str(error) and "super-i2v-4step" not in error.fix  # no distilled t2v exists
    assert "super-i2v-4step" in refused("mode", mode="i2v", prompt="p", profile="super-t2i-4step", image=IMAGE).fix
    refused("mode", mode="v2v", prompt="p", profile="tiny-distilled", video=np.zeros((9, 96, 160, 3), np.uint8))


@pytest.mark.parametrize("profile", ["edge", "tiny-edge", "tiny-distilled", "super-i2v-4step"])
def test_checkpoints_without_a_sound_pathway_refuse_sound(profile):
    error = refused("sound", mode="i2v", prompt="p", profile=profile, image=IMAGE, sound=True)
    assert "no sound pathway" in str(error)


def test_tiny_edge_has_edges_defaults_at_the_cpu_tier():
    edge = GenerationRequest(mode="t2v", prompt="p", profile="edge").resolve()
    tiny = GenerationRequest(mode="t2v", prompt="p", profile="tiny-edge").resolve()
    assert (edge.tier, edge.num_frames, edge.model) == ("480", 121, "nvidia/Cosmos3-Edge")
    assert (tiny.tier, tiny.num_frames, tiny.model) == ("128", 9, "tiny-edge")
    assert (tiny.guidance_scale, tiny.flow_shift) == (edge.guidance_scale, edge.flow_shift)


@pytest.mark.parametrize("profile", ["tiny", "tiny-edge"])
def test_cpu_stand_ins_size_action_modes_by_the_action_tier(profile):
    clip = np.zeros((17, 32, 32, 3), np.uint8)
    resolved = GenerationRequest(mode="inverse_dynamics", prompt="p", profile=profile, embodiment="av",
                                 video=clip).resolve()
    assert (resolved.tier, resolved.num_frames) == (presets.ACTION_TIER, 9)


def test_image2image_is_one_frame_from_an_image_at_the_images_aspect():
    edit = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, profile="nano").resolve()
    assert (edit.mode, edit.num_frames, edit.aspect_ratio, edit.tier) == ("image2image", 1, None, None)
    assert (edit.width, edit.height) == (512, 288)  # the framework's default: the input's shape, longer side 512
    given = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, profile="nano", tier="720").resolve()
    assert (given.aspect_ratio, given.tier, given.width) == ("16,9", "720", 1280)  # a tier: the bucket
    d = fw.MODE_DEFAULTS["image2image"]
    assert (edit.num_inference_steps, edit.guidance_scale, edit.flow_shift) == (d["num_steps"], d["guidance"],
                                                                               d["shift"])
    assert GenerationRequest(mode="i2i", prompt="p", image=IMAGE, aspect_ratio="1:1").resolve().aspect_ratio == "1,1"
    refused("image", mode="image2image", prompt="make it red")
    refused("sound", mode="image2image", prompt="p", image=IMAGE, sound=True)
    refused("num_frames", mode="image2image", prompt="p", image=IMAGE, num_frames=9)


def test_image2image_runs_on_the_framework_and_diffusers_not_vllm_omni(tmp_path):
    edit = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, profile="nano", tier="256").resolve()
    payload = request_payload(edit, name="edit", image_dir=tmp_path)
    jsonschema.validate(payload, SCHEMA)  # the real framework's sample schema
    assert payload["model_mode"] == "image2image" and "num_frames" not in payload
    assert payload["vision_path"].endswith(".png") and (tmp_path / payload["vision_path"].split("/")[-1]).is_file()
    with pytest.raises(ValidationError, match="vLLM-Omni 0.30.0") as caught:
        VllmOmniBackend("http://127.0.0.1:9").generate(edit)  # refused before any connection
    assert caught.value.field == "mode" and "DiffusersBackend" in caught.value.fix
    # diffusers runs it: tests/backends/test_diffusers_edit.py


def test_distilled_requests_reach_the_framework_as_its_checkpoints(tmp_path):
    request = GenerationRequest(mode="t2i", prompt="a cube", profile="super-t2i-4step", tier="256").resolve()
    payload = request_payload(request, name="cube", image_dir=tmp_path)
    jsonschema.validate(payload, SCHEMA)
    assert (payload["num_steps"], payload["guidance"]) == (4, 1.0)  # what the framework uses anyway
    assert checkpoint_for(request.model) == "Cosmos3-Super-Text2Image-4Step"
    for stand_in in ("tiny-distilled", "tiny-edge"):
        with pytest.raises(ValidationError, match=stand_in) as caught:
            checkpoint_for(stand_in)
        assert caught.value.field == "model"


def test_distilled_stand_in_is_a_relocatable_distilled_checkpoint(tmp_path):
    from cosmos_helpers.backends.diffusers.distilled import is_distilled_model
    from cosmos_helpers.models.tiny_distilled import INDEX_FILE, tiny_distilled_path
    from cosmos_helpers.protocol import variants

    folder = tiny_distilled_path()
    index = json.loads((folder / INDEX_FILE).read_text())
    assert index["distilled_sigmas"] == list(variants.DISTILLED_T_LIST)
    assert index["_blocks_class_name"] == variants.DISTILLED_BLOCKS
    components = [v for v in index.values() if isinstance(v, list) and len(v) == 3 and isinstance(v[2], dict)]
    assert len(components) == 4 and all(v[2]["pretrained_model_name_or_path"] is None for v in components)
    assert is_distilled_model(str(folder)) and is_distilled_model("tiny-distilled")
    assert not is_distilled_model("tiny") and not is_distilled_model(str(tmp_path))


def test_a_distilled_pipeline_runs_on_a_transformer_the_fast_path_is_installed_on():
    """diffusers' modular denoise loop picks the transformer's keyword arguments from ``forward``'s signature; the
    fast path's forward shows stock's, so a distilled pipeline sharing those weights (gpu_variants) still runs."""
    import inspect

    from cosmos_helpers.backends.diffusers import distilled
    from cosmos_helpers.fast import enable_fast_path
    from cosmos_helpers.models.tiny import build_tiny_pipeline
    from cosmos_helpers.models.tiny_distilled import as_distilled

    base = build_tiny_pipeline(0)
    stock = set(inspect.signature(base.transformer.forward).parameters)
    enable_fast_path(base, active=False)
    assert set(inspect.signature(base.transformer.forward).parameters) == stock
    request = GenerationRequest(mode="text2image", profile="tiny-distilled", prompt="a red ball", seed=0,
                                guardrails=False).resolve()
    frames, timesteps = distilled.denoise(as_distilled(base), request, distilled.call_kwargs(request),
                                          lambda _step: None)
    assert np.asarray(frames).shape[-1] == 3 and np.isfinite(np.asarray(frames)).all() and len(timesteps) == 4
