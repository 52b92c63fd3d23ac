"""Image editing on diffusers (``backends.diffusers.edit``) against the framework's own edit rules
(``tests/contracts/fixtures/image_edit-*.json``: its literals, and its resize, position and clean-item functions run
on example inputs by ``scripts/refresh_contracts.py --only image-edit``), and end to end on the tiny model."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest
import torch

from cosmos_helpers import DiffusersBackend, GenerationRequest
from cosmos_helpers.backends.diffusers import edit as diffusers_edit
from cosmos_helpers.backends.framework import request_payload
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.protocol import variants

from ..contracts.conftest import load

EDIT = load("image_edit")
IMAGE = (np.random.RandomState(0).rand(48, 64, 3) * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def pipe():
    return DiffusersBackend(progress=False).pipeline("tiny")


def test_the_edit_facts_are_the_frameworks():
    assert variants.EDIT_SYSTEM_PROMPT == EDIT["system_prompt"] and "system_prompt" in EDIT["system_prompt_set_in"]
    assert EDIT["resize_keywords"] == {"max_size": variants.EDIT_MAX_SIZE,
                                       "padding_constant": variants.EDIT_SIZE_MULTIPLE}
    assert EDIT["vision_items_per_sample"] == 2 and EDIT["clean_frames"] == [[0], []]  # input clean, output made
    assert EDIT["share_temporal_positions"] is False
    for width, height, *expected in EDIT["resized"]:
        assert list(variants.edit_size(width, height)) == expected, (width, height)


def test_a_request_without_a_size_keeps_the_inputs_shape_as_the_framework():
    edit = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, profile="nano").resolve()
    assert edit.keeps_image_size and edit.tier is None and (edit.width, edit.height) == (512, 384)
    bucket = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, profile="nano", tier="480").resolve()
    assert not bucket.keeps_image_size and (bucket.tier, bucket.aspect_ratio) == ("480", "4,3")


@pytest.mark.parametrize("case", EDIT["positions"], ids=lambda c: f"offset{c['offset']}")
def test_the_packed_positions_are_the_frameworks(pipe, case):
    t, h, w = case["grid"]
    p = pipe.transformer.config.latent_patch_size
    latent = torch.zeros(1, pipe.transformer.config.latent_channel, t, h * p, w * p)
    n = 5
    text = {"input_ids": torch.zeros(n, dtype=torch.long), "text_indexes": torch.arange(n), "und_len": n,
            "text_mrope_ids": torch.zeros(3, n, dtype=torch.long), "vision_start_temporal_offset": case["offset"]}
    packed = diffusers_edit.pack(pipe, text, latent, latent, "cpu")
    expected = torch.cat([torch.tensor(case["first"]), torch.tensor(case["second"])], dim=1)
    assert torch.equal(packed["position_ids"][:, n:], expected)
    tokens = t * h * w
    assert [f.tolist() for f in packed["vision_noisy_frame_indexes"]] == [[], list(range(t))]  # the input is clean
    assert packed["vision_mse_loss_indexes"].tolist() == list(range(n + tokens, n + 2 * tokens))
    assert packed["num_noisy"] == tokens and packed["sequence_length"] == n + 2 * tokens


def test_both_prompts_are_chats_under_the_edit_system_prompt_with_the_frameworks_sentences(pipe):
    defaults = load("variants")["framework"]["image2image_defaults"]
    # negative_metadata_mode "none" + negative_prompt_keep_metadata: the framework's "same" mode (args.py:373-374)
    assert (defaults["negative_metadata_mode"], defaults["negative_prompt_keep_metadata"]) == ("none", True)
    sentence = defaults["resolution_template"].format(height=384, width=512)
    request = GenerationRequest(mode="i2i", prompt="make the ball red.", image=IMAGE).resolve()
    cond, uncond = diffusers_edit.token_ids(pipe, request)
    text, negative = pipe.text_tokenizer.decode(cond), pipe.text_tokenizer.decode(uncond)
    assert variants.EDIT_SYSTEM_PROMPT in text and f"make the ball red. {sentence}" in text
    assert variants.EDIT_SYSTEM_PROMPT in negative and f"user\n{sentence}" in negative  # the same sentence, alone
    assert cond[-1] == pipe.llm_special_tokens["start_of_generation"]
    given = pipe.text_tokenizer.decode(diffusers_edit.token_ids(pipe, request.replace(negative_prompt="blurry"))[1])
    assert f"blurry. {sentence}" in given
    bare, _ = diffusers_edit.token_ids(pipe, request.replace(use_system_prompt=False))
    assert variants.EDIT_SYSTEM_PROMPT not in pipe.text_tokenizer.decode(bare)


def test_a_json_caption_gets_metadata_without_an_aspect_ratio_and_the_negative_the_sentence(pipe):
    caption = {"comprehensive_t2i_caption": "The ball is red."}
    request = GenerationRequest(mode="i2i", prompt=caption, image=IMAGE).resolve()
    assert request.aspect_ratio is None and '"aspect_ratio"' not in request.prompt_text()  # none for a native edit
    cond, uncond = diffusers_edit.token_ids(pipe, request)
    assert '"resolution": {"H": 384, "W": 512}' in pipe.text_tokenizer.decode(cond)
    assert "This image is of 384x512 resolution." in pipe.text_tokenizer.decode(uncond)


@pytest.mark.slow
def test_an_edit_runs_on_the_tiny_model_and_follows_its_input():
    backend = DiffusersBackend(progress=False)
    request = GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, num_inference_steps=3)
    steps = []
    first = backend.generate(request, progress=lambda done, total: steps.append((done, total)))
    assert first.frames.shape == (1, 384, 512, 3) and first.frames.dtype == np.uint8
    assert steps == [(1, 3), (2, 3), (3, 3)] and first.provenance["edit"] is True
    assert np.array_equal(backend.generate(request).frames, first.frames)  # seeded
    other = backend.generate(request.replace(image=255 - IMAGE))
    assert np.abs(other.frames.astype(int) - first.frames).mean() > 1  # the input image conditions the output
    bucket = backend.generate(request.replace(tier="128"))
    assert bucket.frames.shape[1:3] == (bucket.request.height, bucket.request.width)
    # the guidance interval is honoured: outside it every step takes the conditional prediction alone
    unguided = backend.generate(request.replace(guidance_scale=1.0)).frames
    assert not np.array_equal(unguided, first.frames)
    assert np.array_equal(backend.generate(request.replace(guidance_interval=(0.0, 1.0))).frames, unguided)


def test_each_step_goes_through_the_transformers_hooks_as_in_the_pipelines_own_loop(pipe, monkeypatch):
    """The checkpoint's per-step precision policy and a cache context per branch, recorded on diffusers' own
    text-to-image loop and on the edit loop: the same calls, step by step."""
    from diffusers.pipelines.cosmos import mixed_precision, pipeline_cosmos3_omni

    calls: list[tuple] = []
    real_context, real_step = pipe.transformer.cache_context, mixed_precision.apply_cosmos3_mixed_precision_step

    def context(name, **kwargs):
        calls.append(("context", name, kwargs["step_index"], kwargs["num_inference_steps"]))
        return real_context(name, **kwargs)

    def precision_step(module, config, index, steps, trace=None):
        calls.append(("precision", index, steps))
        return real_step(module, config, index, steps, trace=trace)

    monkeypatch.setattr(pipe.transformer, "cache_context", context)
    monkeypatch.setattr(mixed_precision, "apply_cosmos3_mixed_precision_step", precision_step)
    monkeypatch.setattr(pipeline_cosmos3_omni, "apply_cosmos3_mixed_precision_step", precision_step)
    backend = DiffusersBackend(progress=False)
    backend.generate(GenerationRequest(mode="t2i", prompt="a red cube", tier="128", num_inference_steps=3))
    pipelines_own, calls[:] = list(calls), []
    backend.generate(GenerationRequest(mode="i2i", prompt="make it red", image=IMAGE, num_inference_steps=3))
    assert calls == pipelines_own and len(calls) == 9  # per step: precision, "cond", "uncond"


def test_what_the_edit_loop_cannot_honour_is_refused_before_loading():
    request = GenerationRequest(mode="i2i", prompt="p", image=IMAGE)
    with pytest.raises(ValidationError) as caught:
        DiffusersBackend(progress=False, fast=True).generate(request)
    assert caught.value.field == "fast" and "fast=False" in caught.value.fix


def test_the_framework_gets_no_size_for_an_edit_that_keeps_its_inputs_shape(tmp_path):
    schema = fw.sample_overrides_schema()
    native = request_payload(GenerationRequest(mode="i2i", prompt="p", image=IMAGE, profile="nano"), name="e",
                             image_dir=tmp_path)
    jsonschema.validate(native, schema)
    assert "resolution" not in native and "aspect_ratio" not in native
    bucket = request_payload(GenerationRequest(mode="i2i", prompt="p", image=IMAGE, profile="nano", tier="480"),
                             name="e", image_dir=tmp_path)
    assert (bucket["resolution"], bucket["aspect_ratio"]) == ("480", "4,3")
