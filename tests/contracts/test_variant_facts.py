"""``protocol.variants`` and the variant profiles against the facts read from the three real stacks
(``tests/contracts/fixtures/variants-*.json``, written by ``scripts/refresh_contracts.py --only variants``)."""

from __future__ import annotations

import ast
import re

import pytest

from cosmos_helpers.presets import get_profile
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.protocol import variants as v

from .conftest import load

FACTS = load("variants")


def _overrides(checkpoint: str) -> dict[str, str]:
    items = FACTS["framework"]["checkpoints"][checkpoint]["experiment_overrides"]
    return dict(item.split("=", 1) for item in items)


def test_the_fixture_is_of_the_versions_this_package_speaks():
    assert FACTS["versions"] == {"cosmos-framework": fw.VERSION, "vllm-omni": "0.30.0", "diffusers": "0.42.1"}


@pytest.mark.parametrize("hub", list(v.DISTILLED_CHECKPOINTS))
def test_distilled_checkpoints_schedule_resolution_and_no_sound_are_the_frameworks(hub):
    name, tier, _ = v.DISTILLED_CHECKPOINTS[hub]
    assert FACTS["framework"]["checkpoints"][name]["repository"] == hub and fw.CHECKPOINTS[hub] == name
    overrides = _overrides(name)
    assert tuple(ast.literal_eval(overrides["model.config.fixed_step_sampler_config.t_list"])) == v.DISTILLED_T_LIST
    assert overrides["model.config.fixed_step_sampler_config.sample_type"] == v.DISTILLED_SAMPLE_TYPE
    assert ast.literal_eval(overrides["model.config.resolution"]) == tier
    assert overrides["model.config.sound_gen"] == "false"


@pytest.mark.parametrize("name", ["super-t2i-4step", "super-i2v-4step", "tiny-distilled"])
def test_distilled_profiles_follow_the_published_schedule(name):
    profile = get_profile(name)
    assert profile.distilled_sigmas == v.DISTILLED_T_LIST and not profile.sound
    for mode, d in profile.modes.items():
        assert (d.num_inference_steps, d.guidance_scale, d.flow_shift) == (len(v.DISTILLED_T_LIST), 1.0, 1.0)
        assert mode in v.DISTILLED_MODES["vllm-omni"]  # every backend runs every mode of a distilled profile
    if name != "tiny-distilled":
        assert profile.defaults(v.DISTILLED_CHECKPOINTS[profile.model][2]).tier == v.DISTILLED_CHECKPOINTS[
            profile.model][1]


def test_diffusers_distilled_blocks_fix_steps_and_guidance_and_have_no_sound():
    facts = FACTS["diffusers"]
    assert tuple(facts["distilled_workflows"]) == tuple(sorted(v.DISTILLED_MODES["diffusers"]))
    assert facts["distilled_components"]["scheduler"] == v.DISTILLED_SCHEDULER
    assert set(facts["distilled_configs"]) == {"is_distilled", "distilled_sigmas"}
    messages = " ".join(facts["set_timesteps_messages"])
    assert "`num_inference_steps` must be {} or left unset" in messages
    assert "`guidance_scale` must be 1.0 or left unset" in messages
    assert not any("sound" in name for name in facts["distilled_block_names"] + facts["distilled_workflows"])


def test_vllm_omni_silently_overrides_what_our_request_refuses():
    facts = FACTS["vllm_omni"]
    assert "overridden to 1.0" in facts["_resolve_guidance_scale"][0]  # a warning, not an error
    assert "num_inference_steps" not in facts["_set_timesteps_keywords"][0]  # the distilled branch ignores it
    refused = " ".join(facts["_validate_distilled_generation_mode"])
    for kind in ("text-to-video", "video-to-video", "sound generation", "image-conditioned image"):
        assert kind in refused
    assert "only text-to-image and image-to-video" in facts["_distilled_unsupported_error"][0]
    assert set(v.DISTILLED_MODES["vllm-omni"]) == {"text2image", "image2video"}


def test_edge_facts_and_profile():
    framework, vllm = FACTS["framework"], load("vllm_omni")["cosmos3"]["pipeline_constants"]
    assert framework["edge_config"]["resolution"] == fw.MODEL_CONFIGS["Cosmos3-Edge"]["resolution"]
    assert framework["edge_config"]["sound_gen"] is v.EDGE_SOUND is False
    assert framework["num_frames_defaults"][framework["edge_config"]["vlm_model_name"]] == 121
    assert v.EDGE_VLLM_DEFAULTS["guidance_scale"] == vllm["COSMOS3_EDGE_T2V_DEFAULT_GUIDANCE_SCALE"]
    assert v.EDGE_VLLM_DEFAULTS["flow_shift"] == vllm["COSMOS3_EDGE_VIDEO_DEFAULT_FLOW_SHIFT"]
    assert v.EDGE_VLLM_DEFAULTS["video_size"] == (vllm["COSMOS3_EDGE_T2V_DEFAULT_WIDTH"],
                                                  vllm["COSMOS3_EDGE_T2V_DEFAULT_HEIGHT"])
    assert any("sound" in m for m in FACTS["vllm_omni"]["_validate_edge_generation_mode"])
    for name in ("edge", "tiny-edge"):
        profile = get_profile(name)
        assert not profile.sound and profile.defaults("text2video").num_frames == (121 if name == "edge" else 9)
    assert get_profile("edge").defaults("text2video").tier == "480"


def test_image2image_is_a_framework_mode_that_neither_other_stack_ships():
    facts = FACTS["framework"]
    assert "image2image" in facts["model_modes"].values()
    assert {k: facts["image2image_defaults"][k] for k in ("num_steps", "guidance", "shift")} == {
        k: fw.MODE_DEFAULTS["image2image"][k] for k in ("num_steps", "guidance", "shift")}
    assert any("image-edit" in s for s in facts["image_edit_batch"])
    assert not any(re.search("image2image|edit", w) for w in FACTS["diffusers"]["omni_workflows"])
    assert "image-conditioned image generation is unsupported." in FACTS["vllm_omni"][
        "_validate_distilled_generation_mode"]
    # diffusers runs it through our packing of the framework's edit batch (tests/backends/test_diffusers_edit.py)
    assert v.IMAGE2IMAGE_BACKENDS == ("framework", "diffusers") and set(v.IMAGE2IMAGE_REFUSAL) == {"vllm-omni"}
