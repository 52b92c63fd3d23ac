"""A Cosmos3-Nano-shaped pipeline with random weights, for timing on hosts without the checkpoint.

Latency depends on shapes, not weight values: the transformer at its constructor defaults (Nano's 15.16 B
parameters) or, with ``size="super"``, Super's 64.0 B (:mod:`.shapes`), created in the target dtype so Super's 128 GB
of bf16 never exist in fp32; the Wan2.2 VAE (base 160, decoder base 256, z 48); on request the 48 kHz AVAE sound
tokenizer; the tiny byte-level tokenizer (an N-byte prompt is N tokens). Weights are drawn on the device in seconds.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline, Cosmos3OmniTransformer, UniPCMultistepScheduler
from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer

from .shapes import transformer_shape
from .tiny import SCHEDULER_CONFIG, VAE_CONFIG, build_tokenizer

# The tiny model's VAE layout at Nano's widths (the transformer's constructor defaults are Nano's).
NANO_VAE_CONFIG: dict[str, Any] = {**VAE_CONFIG, "base_dim": 160, "decoder_base_dim": 256, "num_res_blocks": 2,
                                   "latents_mean": [0.0] * 48, "latents_std": [1.0] * 48}
NANO_SOUND_DIM = 64


def build_random_nano_pipeline(device: str = "cuda", dtype: Any = "bfloat16", *, sound: bool = False,
                               seed: int = 0, transformer_overrides: dict[str, Any] | None = None,
                               vae_overrides: dict[str, Any] | None = None, size: str = "nano"):
    """A ``Cosmos3OmniPipeline`` at Nano shapes with random weights on ``device`` (eval mode, no guardrails);
    ``transformer_overrides`` / ``vae_overrides`` shrink it for tests (e.g. ``num_hidden_layers=1``)."""
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    dev = torch.device(device)
    generator = torch.Generator(dev if dev.type == "cuda" else torch.device("cpu")).manual_seed(seed)
    shape = {**transformer_shape(size), **(transformer_overrides or {})}
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with dev:
            transformer = Cosmos3OmniTransformer(sound_gen=sound, sound_dim=NANO_SOUND_DIM if sound else None, **shape)
    finally:
        torch.set_default_dtype(default_dtype)
    _randomize(transformer, generator)
    transformer = transformer.to(dtype).eval()
    # diffusers keeps the timestep embedder in fp32 when loading (``_keep_in_fp32_modules``); do the same
    transformer.time_embedder.to(torch.float32)

    def seeded(offset: int, build: Any) -> Any:
        # the VAE and sound tokenizer keep their own initialisation (its scale keeps activations stable), drawn
        # from a seeded RNG so that every process (multi-GPU workers) builds the same one
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.manual_seed(seed + offset)
            with dev:
                return build().to(dtype).eval()

    vae = seeded(0, lambda: AutoencoderKLWan(**{**NANO_VAE_CONFIG, **(vae_overrides or {})}))
    sound_tokenizer = seeded(1, lambda: Cosmos3AVAEAudioTokenizer(vocoder_input_dim=NANO_SOUND_DIM)) if sound else None
    pipe = Cosmos3OmniPipeline(
        transformer=transformer, text_tokenizer=build_tokenizer(), vae=vae,
        scheduler=UniPCMultistepScheduler(**SCHEDULER_CONFIG), sound_tokenizer=sound_tokenizer,
        safety_checker=None, enable_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _randomize(module, generator, std: float = 0.02) -> None:
    """Fill weights in place: linear/embedding weights ~ N(0, std), norm scales 1, biases 0."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "norm" in name and leaf == "weight":
                param.fill_(1.0)
            elif leaf == "bias":
                param.zero_()
            else:
                param.normal_(0.0, std, generator=generator)


def parameter_count(pipe) -> int:
    return sum(p.numel() for p in pipe.transformer.parameters())
