"""Image editing (``mode="image2image"``) on diffusers: the Cosmos Framework's edit batch, packed for the loaded
pipeline's transformer (diffusers 0.42.1 ships no Cosmos3 edit workflow; ``protocol.variants`` cites each rule).

The input image goes clean (no timestep, no prediction read), then the output noised, whose temporal positions start
at ``max(position) + 1`` of the input's (integer: the edit batch sets no fps); prompts as :func:`token_ids` makes
them, sizes as :func:`input_pixels` fits them. The tokenizer, VAE, scheduler (lent for the call), guidance interval
and the loop's arithmetic are the pipeline's.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ... import media
from ...prompts import with_templates
from ...protocol import framework as fw, variants
from ...request import GenerationRequest


def edit(pipe, request: GenerationRequest, on_step: Callable[[int], None]) -> np.ndarray:
    """One edit, as ``(1, H, W, 3)`` floats in ``[0, 1]``."""
    import torch

    device = pipe._get_execution_device()
    with torch.inference_mode():
        pixels = torch.tensor(input_pixels(request)).permute(2, 0, 1).float() / 127.5 - 1.0
        source = pipe._encode_video(pixels[None, :, None].to(device)).float()  # normalised (1, C, 1, H/16, W/16)
        generator = torch.Generator("cpu").manual_seed(request.seed)  # the output's noise, seeded as the pipeline's
        latents = torch.randn(source.shape, generator=generator, dtype=torch.float32).to(device)
        cond, uncond = (pack(pipe, pipe._prepare_text_segment(ids, device=device), source, latents, device)
                        for ids in token_ids(pipe, request))  # the packed sequences, the same every step
        timesteps = set_timesteps(pipe, request.num_inference_steps, device)
        image = decode(pipe, denoise(pipe, request, cond, uncond, source, latents, timesteps, on_step))
    pipe.maybe_free_model_hooks()  # as the pipeline ends a call: offloaded models go back to the CPU
    return image


def input_pixels(request: GenerationRequest) -> np.ndarray:
    """The input image as uint8 ``(H, W, 3)`` at the output size (``GenerationRequest.keeps_image_size``: the input's
    shape, longer side 512; else the bucket, covered and centre-cropped), resized as the framework does."""
    from PIL import Image

    image = request.conditioning_image()
    if request.keeps_image_size:  # inference/vision.py resize_pil_image: LANCZOS to the size, no crop
        return np.asarray(image.resize((request.width, request.height), Image.LANCZOS), dtype=np.uint8)
    return media.fit_to_bucket(np.asarray(image, dtype=np.uint8), request.width, request.height)


def token_ids(pipe, request: GenerationRequest) -> tuple[list[int], list[int]]:
    """``(cond, uncond)`` token ids as the framework makes them for an edit: each text a chat under the edit system
    prompt, then end-of-text and start of vision. Its image2image defaults (the *same* negative metadata mode,
    ``args.py:373-374``) give a plain prompt and the negative the same resolution sentence (``inference.py:542-555``);
    a JSON prompt carries its metadata instead. ``add_resolution_template=False`` drops both sentences."""
    template = None if request.add_resolution_template is False else fw.RESOLUTION_TEMPLATES["image"]
    size = dict(width=request.width, height=request.height, num_frames=1, fps=request.fps, duration_template=None,
                resolution_template=template)
    prompt = request.prompt_text() if request.is_structured else with_templates(request.prompt_text(), **size)
    negative = with_templates(request.negative_prompt_text() or "", **size).lstrip(".").strip()
    system = [] if request.use_system_prompt is False else [
        {"role": "system", "content": variants.EDIT_SYSTEM_PROMPT}]
    tail = [pipe.llm_special_tokens["eos_token_id"], pipe.llm_special_tokens["start_of_generation"]]

    def ids(text: str) -> list[int]:
        chat = pipe.text_tokenizer.apply_chat_template(system + [{"role": "user", "content": text}], tokenize=True,
                                                       add_generation_prompt=True, add_vision_id=False,
                                                       return_dict=True)
        return list(chat.input_ids) + tail

    return ids(prompt), ids(negative)


def pack(pipe, text: dict, source, target, device: Any) -> dict:
    """The transformer's static inputs for ``[text, input (clean), output (noised)]``."""
    import torch

    first = pipe._prepare_vision_segment(
        input_vision_tokens=source, has_image_condition=False, mrope_offset=text["vision_start_temporal_offset"],
        vision_fps=None, curr=text["und_len"], device=device, condition_frame_indexes=list(range(source.shape[2])))
    offset = math.ceil(float(first["vision_mrope_ids"].max())) + 1  # Qwen3-VL's rule (sequence_packing/mrope.py)
    second = pipe._prepare_vision_segment(
        input_vision_tokens=target, has_image_condition=False, mrope_offset=offset, vision_fps=None,
        curr=text["und_len"] + first["num_vision_tokens"], device=device, condition_frame_indexes=[])
    items = (first, second)
    return {
        "input_ids": text["input_ids"], "text_indexes": text["text_indexes"], "und_len": text["und_len"],
        "position_ids": torch.cat([text["text_mrope_ids"], *(s["vision_mrope_ids"] for s in items)], dim=1),
        "sequence_length": text["und_len"] + sum(s["num_vision_tokens"] for s in items),
        "vision_token_shapes": [shape for s in items for shape in s["vision_token_shapes"]],
        "vision_sequence_indexes": torch.cat([s["vision_sequence_indexes"] for s in items]),
        "vision_mse_loss_indexes": torch.cat([s["vision_mse_loss_indexes"] for s in items]),
        "vision_noisy_frame_indexes": [f for s in items for f in s["vision_noisy_frame_indexes"]],
        "num_noisy": second["num_noisy_vision_tokens"]}


def set_timesteps(pipe, steps: int, device: Any):
    """The pipeline's schedule: its native sigmas when its config asks for them, else the scheduler's own."""
    scheduler = pipe.scheduler
    if getattr(pipe.config, "use_native_flow_schedule", False):
        sigmas = np.linspace(1.0 - 1.0 / scheduler.config.num_train_timesteps, 0.0, steps + 1)[:-1]
        scheduler.set_timesteps(steps, device=device, sigmas=sigmas)
    else:
        scheduler.set_timesteps(steps, device=device)
    return scheduler.timesteps


def denoise(pipe, request: GenerationRequest, cond: dict, uncond: dict, source, latents, timesteps,
            on_step: Callable[[int], None]):
    """The guided flow loop on the output item (the pipeline's guidance interval decides each negative pass), each
    step through the transformer's hooks as in the pipeline's own loop: the checkpoint's per-step precision policy,
    and a ``cache_context`` per branch, so a user's cache keeps its "cond" and "uncond" states apart."""
    import torch
    from diffusers.pipelines.cosmos.mixed_precision import (Cosmos3MixedPrecisionConfig,
                                                            apply_cosmos3_mixed_precision_step,
                                                            reset_cosmos3_mixed_precision)

    dtype, steps = pipe.transformer.dtype, len(timesteps)
    precision = Cosmos3MixedPrecisionConfig.resolve(pipe.transformer)

    def velocity(packed: dict, t, branch: str, index: int):
        inputs = {k: v for k, v in packed.items() if k != "num_noisy"}
        sigma = float(pipe.scheduler.sigmas[index])
        with pipe.transformer.cache_context(branch, step_index=index, sigma=sigma, num_inference_steps=steps):
            preds = pipe.transformer(**inputs, vision_tokens=[source.to(dtype), latents.to(dtype)],
                                     vision_timesteps=torch.full((packed["num_noisy"],), t.item(),
                                                                 device=latents.device),
                                     return_dict=False)[0]
        return preds[-1].float()

    pipe._guidance_scale = request.guidance_scale
    try:
        for index, t in enumerate(timesteps):
            apply_cosmos3_mixed_precision_step(pipe.transformer, precision, index, steps)
            pipe._current_timestep = t
            v = velocity(cond, t, "cond", index)
            if pipe.do_classifier_free_guidance:
                v_uncond = velocity(uncond, t, "uncond", index)
                v = v_uncond + request.guidance_scale * (v - v_uncond)
            latents = pipe.scheduler.step(v.unsqueeze(0), t, latents.unsqueeze(0), return_dict=False)[0].squeeze(0)
            on_step(index)
    finally:
        pipe._current_timestep = None
        reset_cosmos3_mixed_precision(pipe.transformer, precision)
    return latents


def decode(pipe, latents) -> np.ndarray:
    """The output latent through the VAE, as ``(1, H, W, 3)`` floats in ``[0, 1]``."""
    vae = pipe.vae
    mean = pipe._vae_latents_mean.to(device=latents.device, dtype=vae.dtype).view(1, -1, 1, 1, 1)
    inv_std = pipe._vae_latents_inv_std.to(device=latents.device, dtype=vae.dtype).view(1, -1, 1, 1, 1)
    decoded = vae.decode(latents.to(vae.dtype) / inv_std + mean).sample.float()
    return pipe.video_processor.postprocess_video(decoded, output_type="np")[0]
