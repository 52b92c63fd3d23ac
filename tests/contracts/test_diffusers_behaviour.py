"""Our diffusers facts against what ``Cosmos3OmniPipeline.__call__`` did when run with the options left out.

``fixtures/diffusers_behaviour-0.42.1.json`` was measured by ``scripts/refresh_contracts.py --only
diffusers-behaviour`` (``scripts/diffusers_behaviour.py``): the real pipeline on the tiny model, recording the
values its own methods received. The signature fixture cannot say these: ``num_frames=None`` there is not "required".
"""

from __future__ import annotations

import pytest

from cosmos_helpers.protocol import diffusers as dif
from cosmos_helpers.protocol.table import defaults_table

from .conftest import load

SIZE = ("num_frames", "height", "width")


@pytest.fixture(scope="module")
def behaviour() -> dict:
    data = load("diffusers_behaviour")
    assert data["version"] == dif.VERSION
    return data["left_out"]


def test_the_signature_says_none_but_the_call_fills_in_the_size(behaviour, diffusers_contract):
    signature = diffusers_contract["Cosmos3OmniPipeline.__call__"]
    assert {k: signature[k] for k in SIZE} == {k: dif.CALL_DEFAULTS[k] for k in SIZE} == dict.fromkeys(SIZE)
    size = behaviour["size"]
    expected = {k: dif.LEFT_OUT[k] for k in SIZE}
    # check_inputs accepted them (it raises without them), the prompt and the latents were made for them
    assert {k: size["check_inputs"][k] for k in SIZE} == expected
    assert {k: size["tokenize_prompt"][k] for k in SIZE} == expected
    assert {k: size["prepare_latents"][k] for k in SIZE} == expected
    assert size["vae_encode_input_shape"] == [1, 3, dif.LEFT_OUT["num_frames"], dif.LEFT_OUT["height"],
                                              dif.LEFT_OUT["width"]]


def test_fps_and_the_duration_sentence(behaviour):
    size = behaviour["size"]
    assert size["tokenize_prompt"]["fps"] == size["prepare_latents"]["fps"] == dif.LEFT_OUT["fps"]
    assert dif.LEFT_OUT["fps"] == dif.CALL_DEFAULTS["fps"]
    seconds = dif.LEFT_OUT["num_frames"] / dif.LEFT_OUT["fps"]
    assert f"is {seconds:.1f} seconds long and is of {dif.LEFT_OUT['fps']:g} FPS" in size["cond_user_text"]
    assert f"{dif.LEFT_OUT['height']}x{dif.LEFT_OUT['width']} resolution" in size["cond_user_text"]
    assert dif.CALL_DEFAULTS["add_duration_template"] and dif.CALL_DEFAULTS["add_resolution_template"]


def test_negative_prompt_and_system_prompt_left_out(behaviour):
    size = behaviour["size"]
    assert size["tokenize_prompt"]["negative_prompt"] is dif.CALL_DEFAULTS["negative_prompt"] is None
    assert dif.LEFT_OUT["negative_prompt"] == ""
    # an empty negative caption: the unconditional text is the inverse templates alone
    assert size["uncond_user_text"].startswith("The video is not ")
    assert size["tokenize_prompt"]["use_system_prompt"] is dif.CALL_DEFAULTS["use_system_prompt"] is None
    assert size["system_prompt_used"] is dif.CONFIG_DEFAULTS["default_use_system_prompt"]


def test_steps_and_guidance_left_out(behaviour):
    sampling = behaviour["sampling"]
    steps = dif.LEFT_OUT["num_inference_steps"]
    assert steps == dif.CALL_DEFAULTS["num_inference_steps"]
    assert sampling["set_timesteps"]["num_inference_steps"] == sampling["timesteps"] == steps
    assert sampling["callback_steps"] == steps
    assert sampling["guidance_scale"] == dif.LEFT_OUT["guidance_scale"] == dif.CALL_DEFAULTS["guidance_scale"]
    assert sampling["classifier_free_guidance"] and sampling["transformer_passes_per_step"] == 2
    assert sampling["use_native_flow_schedule"] is dif.CONFIG_DEFAULTS["use_native_flow_schedule"]
    assert sampling["set_timesteps"]["sigmas_given"] is dif.CONFIG_DEFAULTS["use_native_flow_schedule"]


def test_the_defaults_table_states_the_measured_diffusers_cells():
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in defaults_table().splitlines()[2:]}
    left = dif.LEFT_OUT
    assert rows["`num_frames` (video)"].startswith(f"{left['num_frames']} at {left['width']}x{left['height']} ")
    for row in ("text2image steps / guidance / shift", "video steps / guidance / shift"):
        assert rows[row].startswith(f"{left['num_inference_steps']} steps, guidance {left['guidance_scale']:g},")
    assert "required" not in rows["`num_frames` (video)"]
