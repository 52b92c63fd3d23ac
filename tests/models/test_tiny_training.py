"""The training step sees what inference sees: the batched forward equals the transformer's own ``forward``."""

from __future__ import annotations

import pytest
import torch

from cosmos_helpers.models.tiny import build_tiny_pipeline
from cosmos_helpers.models.tiny_training import (
    CONDITION_FRAMES, batched_velocity, flow_loss, latent_grid, layout, motion_weights, patchify, shifted_sigmas,
)


@pytest.fixture(scope="module")
def pipe():
    return build_tiny_pipeline(0)


def _forward_one(pipe, ids, latents, timestep, mode, fps):
    """One sample through ``Cosmos3OmniTransformer.forward``, packed by the pipeline's own helpers."""
    text = pipe._prepare_text_segment(ids, device="cpu")
    condition = list(CONDITION_FRAMES[mode])
    vision = pipe._prepare_vision_segment(latents, bool(condition), text["vision_start_temporal_offset"], fps,
                                          text["und_len"], "cpu", condition_frame_indexes=condition)
    preds, _, _ = pipe.transformer(
        input_ids=text["input_ids"], text_indexes=text["text_indexes"],
        position_ids=torch.cat([text["text_mrope_ids"], vision["vision_mrope_ids"]], dim=1),
        und_len=text["und_len"], sequence_length=text["und_len"] + vision["num_vision_tokens"],
        vision_tokens=[latents], vision_token_shapes=vision["vision_token_shapes"],
        vision_sequence_indexes=vision["vision_sequence_indexes"],
        vision_mse_loss_indexes=vision["vision_mse_loss_indexes"],
        vision_timesteps=torch.full((vision["num_noisy_vision_tokens"],), float(timestep)),
        vision_noisy_frame_indexes=vision["vision_noisy_frame_indexes"], return_dict=False)
    return preds[0]


@pytest.mark.parametrize("mode,size", [("text2video", (96, 160, 9)), ("image2video", (96, 160, 9)),
                                       ("video2video", (128, 128, 9)), ("text2image", (128, 128, 1))])
def test_batched_velocity_equals_forward(pipe, mode, size):
    height, width, frames = size
    prompts = ["A red ball rolls left.", "A blue box goes up!!!"]  # same byte length: one batch
    ids = [pipe.tokenize_prompt(p, None, num_frames=frames, height=height, width=width, fps=24.0)[0]
           for p in prompts]
    assert len(ids[0]) == len(ids[1])
    grid = latent_grid(height, width, frames)
    g = torch.Generator().manual_seed(1)
    latents = torch.randn((2, 48, *grid), generator=g)
    timesteps = torch.tensor([937.0, 412.0])
    lay = layout(pipe, ids[0], latents.shape[1:], mode, 24.0)
    with torch.no_grad():
        batched = batched_velocity(pipe.transformer, torch.tensor(ids), latents, timesteps, lay)
        for i in range(2):
            one = _forward_one(pipe, ids[i], latents[i:i + 1], timesteps[i], mode, 24.0)
            expected = patchify(one, 2)[0][lay.noisy_token_mask]
            torch.testing.assert_close(batched[i], expected, rtol=1e-4, atol=1e-5)
    assert lay.noisy_frames_of_video == tuple(i for i in range(grid[0]) if i not in CONDITION_FRAMES[mode])


def test_flow_loss_trains_and_ignores_clean_frames(pipe):
    """The loss has a gradient, and conditioned frames are inputs, never targets."""
    ids = pipe.tokenize_prompt("A red ball rolls left.", None, num_frames=9, height=96, width=160, fps=24.0)[0]
    x0 = torch.randn((1, 48, *latent_grid(96, 160, 9)), generator=torch.Generator().manual_seed(2))
    lay = layout(pipe, ids, x0.shape[1:], "image2video", 24.0)
    sig = torch.tensor([0.9])
    loss = flow_loss(pipe.transformer, torch.tensor([ids]), x0, sig, lay, torch.Generator().manual_seed(3))
    loss.backward()
    assert pipe.transformer.proj_out.weight.grad.abs().sum() > 0
    pipe.transformer.zero_grad()
    assert lay.noisy_frames_of_video == (1, 2)


def test_motion_weights_single_out_what_moves():
    """Static tokens weigh nothing extra, a token whose content changes over the clip weighs most, and a still
    (one latent frame) is weighed evenly."""
    x0 = torch.randn((2, 48, 1, 6, 10), generator=torch.Generator().manual_seed(4)).repeat(1, 1, 3, 1, 1)
    assert motion_weights(x0, 2).abs().max() < 1e-5
    x0[1, :, 2, 4:6, 6:8] += 3.0  # the token at row 2, column 3 of the 3 x 5 patch grid changes in the last frame
    w = motion_weights(x0, 2)
    assert w.shape == (2, 45, 1) and int(w[1, :, 0].argmax()) == 2 * 15 + 2 * 5 + 3
    assert torch.allclose(w[1].mean(), torch.tensor(1.0))  # relative to the clip's own average change
    assert torch.equal(motion_weights(x0[:, :, :1], 2), torch.ones((2, 15, 1)))


def test_motion_weighted_loss_is_the_plain_loss_when_nothing_moves(pipe):
    ids = pipe.tokenize_prompt("A red ball rolls left.", None, num_frames=9, height=96, width=160, fps=24.0)[0]
    still = torch.randn((1, 48, 1, 6, 10), generator=torch.Generator().manual_seed(5)).repeat(1, 1, 3, 1, 1)
    lay = layout(pipe, ids, still.shape[1:], "text2video", 24.0)
    args = (pipe.transformer, torch.tensor([ids]), still, torch.tensor([0.7]), lay)
    with torch.no_grad():
        plain = flow_loss(*args, torch.Generator().manual_seed(6))
        weighted = flow_loss(*args, torch.Generator().manual_seed(6), motion_weight=4.0)
        moving = still.clone()
        moving[:, :, 2] += torch.randn(moving[:, :, 2].shape, generator=torch.Generator().manual_seed(7))
        differs = flow_loss(pipe.transformer, torch.tensor([ids]), moving, torch.tensor([0.7]), lay,
                            torch.Generator().manual_seed(6), motion_weight=4.0)
        unweighted = flow_loss(pipe.transformer, torch.tensor([ids]), moving, torch.tensor([0.7]), lay,
                               torch.Generator().manual_seed(6))
    assert torch.allclose(plain, weighted, rtol=1e-4)
    assert not torch.allclose(differs, unweighted, rtol=1e-3)


def test_shifted_sigmas_follow_the_inference_shift():
    s = shifted_sigmas(20000, 10.0, torch.Generator().manual_seed(0), uniform_share=0.0)
    assert 0 < float(s.min()) and float(s.max()) < 1
    assert float((s > 0.76).float().mean()) > 0.65  # where 4 steps at shift 10 sample


def test_transfer_batch_equals_forward_with_the_control_first(pipe):
    """Transfer packs [control (all clean), video (all noisy)] at one temporal offset, with the transfer prompt."""
    from cosmos_helpers.models.tiny_training import transfer_token_ids

    ids = transfer_token_ids(pipe, "A red ball rolls left. Follow the edge control video precisely.")
    assert pipe.text_tokenizer.decode(ids).count("control signals") == 1  # the transfer system prompt
    grid = latent_grid(96, 160, 9)
    g = torch.Generator().manual_seed(4)
    control, latents = torch.randn((1, 48, *grid), generator=g), torch.randn((1, 48, *grid), generator=g)
    lay = layout(pipe, ids, latents.shape[1:], "transfer", 24.0, controls=1)
    text = pipe._prepare_text_segment(ids, device="cpu")
    segs, curr = [], text["und_len"]
    for item, clean in ((control, [0, 1, 2]), (latents, [])):
        segs.append(pipe._prepare_vision_segment(item, False, text["vision_start_temporal_offset"], 24.0, curr, "cpu",
                                                 condition_frame_indexes=clean))
        curr += segs[-1]["num_vision_tokens"]
    with torch.no_grad():
        preds, _, _ = pipe.transformer(
            input_ids=text["input_ids"], text_indexes=text["text_indexes"],
            position_ids=torch.cat([text["text_mrope_ids"]] + [s["vision_mrope_ids"] for s in segs], dim=1),
            und_len=text["und_len"], sequence_length=curr, vision_tokens=[control, latents],
            vision_token_shapes=[s["vision_token_shapes"][0] for s in segs],
            vision_sequence_indexes=torch.cat([s["vision_sequence_indexes"] for s in segs]),
            vision_mse_loss_indexes=torch.cat([s["vision_mse_loss_indexes"] for s in segs]),
            vision_timesteps=torch.full((segs[1]["num_noisy_vision_tokens"],), 768.0),
            vision_noisy_frame_indexes=[s["vision_noisy_frame_indexes"][0] for s in segs], return_dict=False)
        batched = batched_velocity(pipe.transformer, torch.tensor([ids]), latents, torch.tensor([768.0]), lay,
                                   (control,))
    torch.testing.assert_close(batched[0], patchify(preds[-1], 2)[0], rtol=1e-4, atol=1e-5)
    assert lay.noisy_frames == ((), (0, 1, 2))


def test_trained_weights_round_trip(tmp_path):
    """What training saves is what the default model would load: every trained tensor, the VAE's latent statistics,
    and nothing of the untrained action heads."""
    from cosmos_helpers.models import tiny_trained

    pipe = tiny_trained.build_untrained(0)
    pipe.vae.register_to_config(latents_mean=[0.5] * 48, latents_std=[2.0] * 48)
    with torch.no_grad():
        pipe.transformer.proj_out.weight.add_(1.0)  # a change the seed alone would not reproduce
    path = tiny_trained.save_weights(pipe, tmp_path / "w.safetensors", {"seed": 0})
    loaded = tiny_trained.build_trained_pipeline(path, seed=1)
    assert list(loaded.vae.config.latents_std) == [2.0] * 48
    saved, again = tiny_trained.trained_state(pipe), tiny_trained.trained_state(loaded)
    assert saved.keys() == again.keys() and not any(k.startswith("transformer.action_") for k in saved)
    assert all(torch.equal(saved[k], again[k]) for k in saved)
    with pytest.raises(ValueError, match="does not match"):
        tiny_trained.build_trained_pipeline(tiny_trained.save_weights(build_tiny_pipeline(0), tmp_path / "x", {}))


@pytest.mark.slow
def test_the_training_script_runs_and_records_its_recipe(tmp_path):
    """A two-step smoke run of ``scripts/train_tiny.py`` (on the CPU): it writes weights the default loader takes,
    a model card with the command that made them, and the recipe (mix, motion weight) in the file itself."""
    import json

    from safetensors import safe_open

    from cosmos_helpers.models import tiny_trained
    from tests.conftest import load_script

    load_script("scripts/train_tiny.py").main([
        "--out", str(tmp_path), "--device", "cpu", "--vae-steps", "1", "--transformer-steps", "2", "--vae-batch", "2",
        "--batch", "2", "--pool", "2", "--mix", "text2video", "--motion-weight", "4"])
    weights = tmp_path / tiny_trained.WEIGHTS.name
    with safe_open(str(weights), framework="pt") as f:
        recipe = json.loads(f.metadata()["recipe"])
    assert recipe == {"seed": 0, "steps": {"vae": 1, "transformer": 2}, "mix": "text2video", "motion_weight": 4.0}
    assert "--mix text2video --motion-weight 4.0" in (tmp_path / "MODEL_CARD.md").read_text()
    tiny_trained.build_trained_pipeline(weights)  # loads without a shape mismatch
