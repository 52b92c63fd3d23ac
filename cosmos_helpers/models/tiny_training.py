"""One training step of the embedded tiny Cosmos3, packed exactly as ``Cosmos3OmniPipeline`` packs inference.

A trained model only does at inference what it saw in training, so nothing here re-derives the joint sequence: token
ids, position ids and noisy frames come from the pipeline's own ``tokenize_prompt``, ``_prepare_text_segment`` and
``_prepare_vision_segment``, the clean latent frames from ``prepare_latents`` (image-to-video frame 0, video-to-video
frames 0 and 1). The flow convention is UniPC's ``flow_prediction``: ``x_t = (1 - s) x0 + s noise``, the model
predicts ``noise - x0`` at timestep ``1000 s``. Only batching differs: ``forward`` takes one packed sample, so
:func:`batched_velocity` runs the same modules over samples of one layout (checked against ``forward`` by
``tests/models/test_tiny_training.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .cosmos3_attention import project_qkv

# Latent frames kept clean per mode, as Cosmos3OmniPipeline.prepare_latents marks them.
CONDITION_FRAMES: dict[str, tuple[int, ...]] = {
    "text2image": (), "text2video": (), "image2video": (0,), "video2video": (0, 1), "transfer": (),
}
NUM_TRAIN_TIMESTEPS = 1000


@dataclass(frozen=True)
class Layout:
    """Where each token sits in one packed sample, shared by a batch. The vision items are the transfer controls (all
    frames clean), then the generated video, as the modular transfer blocks order them."""
    und_len: int
    position_ids: torch.Tensor  # [3, und_len + vision tokens of all items]
    token_shapes: tuple[tuple[int, int, int], ...]  # (T, h, w) patches per item
    noisy_frames: tuple[tuple[int, ...], ...]  # per item

    @property
    def noisy_frames_of_video(self) -> tuple[int, ...]:
        return self.noisy_frames[-1]

    @property
    def noisy_token_mask(self) -> torch.Tensor:
        return torch.cat([torch.isin(torch.arange(t), torch.tensor(noisy, dtype=torch.long)).repeat_interleave(h * w)
                          for (t, h, w), noisy in zip(self.token_shapes, self.noisy_frames)])


def layout(pipe: Any, input_ids: list[int], latent_shape: tuple[int, ...], mode: str, fps: float,
           controls: int = 0) -> Layout:
    """The layout the pipeline builds for ``input_ids``, ``controls`` control items and the video, each of latent
    shape ``(C, T, H, W)``."""
    text = pipe._prepare_text_segment(input_ids, device="cpu")
    clean = [list(range(latent_shape[1]))] * controls + [[i for i in CONDITION_FRAMES[mode] if i < latent_shape[1]]]
    curr, shapes, noisy, mrope = text["und_len"], [], [], [text["text_mrope_ids"]]
    for condition in clean:
        vision = pipe._prepare_vision_segment(
            input_vision_tokens=torch.empty((1, *latent_shape), device="meta"), has_image_condition=bool(condition),
            mrope_offset=text["vision_start_temporal_offset"], vision_fps=fps, curr=curr, device="cpu",
            condition_frame_indexes=condition)
        shapes.append(tuple(vision["vision_token_shapes"][0]))
        noisy.append(tuple(vision["vision_noisy_frame_indexes"][0].tolist()))
        mrope.append(vision["vision_mrope_ids"])
        curr += vision["num_vision_tokens"]
    return Layout(und_len=text["und_len"], position_ids=torch.cat(mrope, dim=1), token_shapes=tuple(shapes),
                  noisy_frames=tuple(noisy))


def transfer_token_ids(pipe: Any, text: str) -> list[int]:
    """Token ids of an already formatted transfer prompt, as the modular transfer text step makes them: the
    transfer system prompt, no sentence templates, then end-of-turn and start-of-vision."""
    from diffusers.modular_pipelines.cosmos.encoders import _SYSTEM_PROMPT_TRANSFER
    tok = pipe.text_tokenizer
    ids = tok.apply_chat_template([{"role": "system", "content": _SYSTEM_PROMPT_TRANSFER},
                                   {"role": "user", "content": text}],
                                  tokenize=True, add_generation_prompt=True, add_vision_id=False,
                                  return_dict=True).input_ids
    return list(ids) + [tok.eos_token_id, tok.convert_tokens_to_ids("<|vision_start|>")]


def encode_latents(pipe: Any, pixels: torch.Tensor) -> torch.Tensor:
    """``[B, 3, T, H, W]`` pixels in [-1, 1] to normalised latents, with the very ``_vae_latents_mean`` /
    ``_vae_latents_inv_std`` the pipeline un-normalises with (the VAE's mode, not a sample: the targets are fixed)."""
    shape = (1, -1, 1, 1, 1)
    mean = pipe._vae_latents_mean.to(pixels.device).view(shape)
    inv_std = pipe._vae_latents_inv_std.to(pixels.device).view(shape)
    return (pipe.vae.encode(pixels).latent_dist.mode() - mean) * inv_std


def patchify(latents: torch.Tensor, p: int) -> torch.Tensor:
    """``[B, C, T, H, W]`` latents to ``[B, T*h*w, p*p*C]`` tokens, in the transformer's own order."""
    b, c, t, h, w = latents.shape
    if h % p or w % p:
        raise ValueError(f"latent height and width must be multiples of the patch size {p}, got {h}x{w}.")
    x = latents.reshape(b, c, t, h // p, p, w // p, p)
    return torch.einsum("bcthpwq->bthwpqc", x).reshape(b, t * (h // p) * (w // p), p * p * c)


def _attention(attn: Any, und: torch.Tensor, gen: torch.Tensor, rotary: tuple[torch.Tensor, ...]):
    """``Cosmos3AttnProcessor`` over a batch: causal text pathway, generation pathway attending to everything."""
    b = und.shape[0]
    projected = project_qkv(attn, und.flatten(0, 1), gen.flatten(0, 1), tuple(r.repeat(b, 1) for r in rotary))
    q_u, k_u, v_u, k_u_gen, q_g, k_g, v_g = (x.unflatten(0, (b, -1)).transpose(1, 2) for x in projected)
    causal = F.scaled_dot_product_attention(q_u, k_u, v_u, is_causal=True, enable_gqa=True)
    full = F.scaled_dot_product_attention(q_g, torch.cat([k_u_gen, k_g], 2), torch.cat([v_u, v_g], 2), enable_gqa=True)
    return (attn.to_out(causal.transpose(1, 2).flatten(2)), attn.to_add_out(full.transpose(1, 2).flatten(2)))


def batched_velocity(transformer: Any, input_ids: torch.Tensor, latents: torch.Tensor, timesteps: torch.Tensor,
                     lay: Layout, controls: tuple[torch.Tensor, ...] = ()) -> torch.Tensor:
    """Velocity tokens ``[B, noisy tokens, p*p*C]`` for a batch sharing ``lay`` (``forward`` for each sample), from
    ``[B, und_len]`` ``input_ids``, ``[B, C, T, H, W]`` normalised ``latents``, ``[B]`` ``timesteps`` (``1000 * sigma``)
    and transfer ``controls`` (latents like ``latents``, placed before the video)."""
    config = transformer.config
    device = latents.device
    und = transformer.embed_tokens(input_ids)
    tokens = torch.cat([patchify(x, config.latent_patch_size) for x in (*controls, latents)], dim=1)
    gen = transformer.proj_in(tokens.to(und.dtype))
    t_dtype = next(transformer.time_embedder.parameters()).dtype
    temb = transformer.time_embedder(transformer.time_proj(timesteps * config.timestep_scale).to(t_dtype))
    noisy = lay.noisy_token_mask.to(device)
    gen = gen + noisy[None, :, None].to(gen.dtype) * temb.to(gen.dtype)[:, None, :]
    cos, sin = transformer.rotary_emb(position_ids=lay.position_ids.to(device).unsqueeze(1), device=device,
                                      dtype=und.dtype)
    cos, sin = cos.squeeze(0), sin.squeeze(0)
    n = lay.und_len
    rotary = (cos[:n], sin[:n], cos[n:], sin[n:])
    for layer in transformer.layers:
        und_attn, gen_attn = _attention(layer.self_attn, layer.input_layernorm(und),
                                        layer.input_layernorm_moe_gen(gen), rotary)
        und, gen = und + und_attn, gen + gen_attn
        und = und + layer.mlp(layer.post_attention_layernorm(und))
        gen = gen + layer.mlp_moe_gen(layer.post_attention_layernorm_moe_gen(gen))
    gen = transformer.norm_moe_gen(gen)
    return transformer.proj_out(gen[:, noisy])


def shifted_sigmas(n: int, shift: float, generator: torch.Generator | None = None,
                   uniform_share: float = 0.2) -> torch.Tensor:
    """Training noise levels: uniform draws with the inference schedule's shift (with 4 steps at shift 10 sampling
    visits only sigmas above 0.76), plus a plain uniform share so low noise levels (more steps) are learned too."""
    u = torch.rand(n, generator=generator).clamp(1e-3, 1 - 1e-3)
    shifted = shift * u / (1 + (shift - 1) * u)
    plain = torch.rand(n, generator=generator) < uniform_share
    return torch.where(plain, u, shifted)


def motion_weights(x0: torch.Tensor, p: int) -> torch.Tensor:
    """Per-token loss weights ``[B, tokens, 1]``: each token's deviation from its temporal mean, relative to the clip's
    average (static tokens about 1, tokens the object crosses several times more; a still: 1 everywhere). The moving
    object covers about a twentieth of the frame, so in a plain mean the static floor (about 40% of the latents'
    variance) drowns out the motion the caption describes (about 0.5%)."""
    if x0.shape[2] < 2:
        return torch.ones((x0.shape[0], patchify(x0[:, :1], p).shape[1], 1), device=x0.device, dtype=x0.dtype)
    change = (x0 - x0.mean(2, keepdim=True)).pow(2).mean(1, keepdim=True)
    change = change / change.mean(dim=(2, 3, 4), keepdim=True).clamp_min(1e-6)
    return patchify(change, p).mean(-1, keepdim=True)


def flow_loss(transformer: Any, input_ids: torch.Tensor, x0: torch.Tensor, sigmas: torch.Tensor, lay: Layout,
              generator: torch.Generator | None = None, controls: tuple[torch.Tensor, ...] = (),
              motion_weight: float = 0.0) -> torch.Tensor:
    """Flow-matching loss of one batch: noise the noisy frames of ``x0`` to ``sigmas``, regress ``noise - x0``;
    ``motion_weight`` > 0 weighs each token by ``1 + motion_weight * motion_weights(x0)`` (normalised to the plain
    loss's scale)."""
    noise = torch.randn(x0.shape, generator=generator, device="cpu").to(x0.device) if generator is not None \
        else torch.randn_like(x0)
    frames = torch.zeros(x0.shape[2], device=x0.device, dtype=x0.dtype)
    frames[list(lay.noisy_frames_of_video)] = 1.0
    s = sigmas.to(x0.device, x0.dtype).view(-1, 1, 1, 1, 1) * frames.view(1, 1, -1, 1, 1)
    x_t = (1 - s) * x0 + s * noise
    pred = batched_velocity(transformer, input_ids, x_t, sigmas.to(x0.device) * NUM_TRAIN_TIMESTEPS, lay, controls)
    p = transformer.config.latent_patch_size
    video_mask = lay.noisy_token_mask[-math.prod(lay.token_shapes[-1]):].to(x0.device)
    target = patchify(noise - x0, p)[:, video_mask]
    if not motion_weight:
        return F.mse_loss(pred.float(), target.float())
    weight = 1 + motion_weight * motion_weights(x0, p)[:, video_mask].float()
    return (weight * (pred.float() - target.float()).pow(2)).mean() / weight.mean()


def latent_grid(height: int, width: int, num_frames: int, spatial: int = 16, temporal: int = 4) -> tuple[int, ...]:
    """``(T, H, W)`` of the latents for a clip, as the Wan VAE compresses it."""
    return (1 + (num_frames - 1) // temporal, math.ceil(height / spatial), math.ceil(width / spatial))
