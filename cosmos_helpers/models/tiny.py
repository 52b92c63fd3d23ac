"""The random-weight tiny Cosmos3: real diffusers classes, real structure, random weights, ~1.4 MB on disk.

The ``tiny`` profile runs the *trained* model of the same classes (``models.tiny_trained``); this builder serves
what needs a specific structure or seed (tests, the distilled and Edge stand-ins) and is where training starts.
Only widths and depths shrink: the Wan2.2 VAE layout (z_dim 48, 16x spatial, 4x temporal), GQA, q/k norms,
interleaved 3-D mRoPE, the sound pathway and the 48 kHz stereo audio tokenizer stay, so every latent shape equals
the real model's and every code path runs. Built on first use into a cache folder, byte-identical for a seed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

TINY_FORMAT_VERSION = 2  # 2: the action heads (action_gen, action_dim 64)
CACHE_ENV = "COSMOS_HELPERS_CACHE"

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]

# Qwen-VL style; every literal goes through {{- '...' -}} so whitespace control keeps the newlines.
CHAT_TEMPLATE = (
    "{%- set image_count = namespace(value=0) -%}{%- set video_count = namespace(value=0) -%}"
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{%- set image_count.value = image_count.value + 1 -%}"
    "{%- if add_vision_id -%}{{- 'Picture ' + image_count.value|string + ': ' -}}{%- endif -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' -%}{%- set video_count.value = video_count.value + 1 -%}"
    "{%- if add_vision_id -%}{{- 'Video ' + video_count.value|string + ': ' -}}{%- endif -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in part -%}{{- part['text'] -}}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

TRANSFORMER_CONFIG: dict[str, Any] = dict(
    hidden_size=32, intermediate_size=64, head_dim=16, num_attention_heads=2, num_key_value_heads=1,
    num_hidden_layers=2, rope_axes_dim=[4, 2, 2], vocab_size=264, latent_channel=48, latent_patch_size=2,
    patch_latent_dim=192, sound_gen=True, sound_dim=8, sound_latent_fps=25.0, hidden_act="silu",
    qk_norm_for_text=True, use_und_k_norm_for_gen=False, attention_bias=False, rms_norm_eps=1e-6,
    rope_theta=5_000_000.0, base_fps=24, enable_fps_modulation=True, unified_3d_mrope_reset_spatial_ids=True,
    unified_3d_mrope_temporal_modality_margin=15000, timestep_scale=0.001,
)
# Nano's action heads (the framework's posttrain configs: "action_gen=True, max_action_dim=64"), so the three
# action modes run; built after the rest from their own seed, so every other weight stays as it was.
ACTION_CONFIG: dict[str, Any] = dict(action_gen=True, action_dim=64, num_embodiment_domains=32)
VAE_CONFIG: dict[str, Any] = dict(
    base_dim=4, decoder_base_dim=4, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1, attn_scales=[],
    temperal_downsample=[False, True, True], is_residual=True, in_channels=12, out_channels=12, patch_size=2,
    scale_factor_spatial=16, scale_factor_temporal=4,
)
SOUND_CONFIG: dict[str, Any] = dict(
    sampling_rate=48000, vocoder_input_dim=8, dec_dim=4, dec_c_mults=(1, 1, 1, 1, 1), dec_strides=(2, 4, 5, 6, 8),
    dec_out_channels=2, stereo=True, input_channels=1, normalize_volume=True, enc_dim=4, enc_num_blocks=1,
    enc_latent_dim=16, enc_n_fft=64, enc_hop_length=16, enc_c_mults=(1, 1, 1), enc_strides=(4, 5, 6),
)
SCHEDULER_CONFIG: dict[str, Any] = dict(
    num_train_timesteps=1000, prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=10.0,
    use_karras_sigmas=False, solver_order=2, solver_type="bh2", predict_x0=True, lower_order_final=True,
    final_sigmas_type="zero", timestep_spacing="linspace",
)


def cache_root(root: str | Path | None = None) -> Path:
    """Where built models live: ``root`` if given, else ``$COSMOS_HELPERS_CACHE`` or ``~/.cache/cosmos_helpers``."""
    if root is not None:
        return Path(root)
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cosmos_helpers"


def tiny_model_path(seed: int = 0, root: str | Path | None = None) -> Path:
    """The folder of the random-weight tiny model for ``seed``, built on first use."""
    target = cache_root(root) / f"tiny-cosmos3-v{TINY_FORMAT_VERSION}-seed{seed}"
    return cached_build(target, "model_index.json", lambda staging: build_tiny_pipeline(seed).save_pretrained(staging))


def cached_build(target: Path, marker: str, write: Callable[[Path], Any]) -> Path:
    """``target``, or ``write(staging)`` into a fresh folder beside it, made deterministic and renamed into place:
    a half-written model is never found, and of two concurrent builders the loser's identical copy is thrown away."""
    if (target / marker).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(staging)
        for path in staging.rglob("*.json"):  # sorted keys: byte-identical across builds and machines
            path.write_text(json.dumps(json.loads(path.read_text()), indent=2, sort_keys=True) + "\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / marker).is_file():  # lost a race with another builder: theirs is identical
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def build_tokenizer():
    """A byte-level ``Qwen2Tokenizer``: one token per UTF-8 byte, then the Qwen-VL specials in Qwen order."""
    from tokenizers import pre_tokenizers
    from transformers import Qwen2Tokenizer
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    for token in SPECIAL_TOKENS:
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=[], eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None, bos_token=None,
        extra_special_tokens=SPECIAL_TOKENS, model_max_length=32768,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_pipeline(seed: int = 0, transformer_config: dict[str, Any] | None = None,
                        vae_config: dict[str, Any] | None = None):
    """The tiny ``Cosmos3OmniPipeline`` in memory (fp32, eval mode, no guardrails); ``transformer_config`` /
    ``vae_config`` replace the widths (``models.tiny_trained``), ``vae_config`` may carry the latent statistics."""
    import torch
    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline, Cosmos3OmniTransformer, UniPCMultistepScheduler
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer
    transformer_config = transformer_config or TRANSFORMER_CONFIG
    torch.manual_seed(seed)
    base = Cosmos3OmniTransformer(**transformer_config)
    torch.manual_seed(seed + 3)
    transformer = Cosmos3OmniTransformer(**transformer_config, **ACTION_CONFIG)
    missing, unexpected = transformer.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("action_") for name in missing), (missing, unexpected)
    stats = torch.Generator().manual_seed(1234)
    vae_config = {"latents_mean": [round(float(v), 4) for v in 0.2 * torch.randn(48, generator=stats)],
                  "latents_std": [round(float(v), 4) for v in 0.5 + torch.rand(48, generator=stats)],
                  **(vae_config or VAE_CONFIG)}
    torch.manual_seed(seed + 1)
    vae = AutoencoderKLWan(**vae_config)
    torch.manual_seed(seed + 2)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
        sound_tokenizer = Cosmos3AVAEAudioTokenizer(**SOUND_CONFIG)
    return Cosmos3OmniPipeline(
        transformer=transformer.eval(), text_tokenizer=build_tokenizer(), vae=vae.eval(),
        scheduler=UniPCMultistepScheduler(**SCHEDULER_CONFIG), sound_tokenizer=sound_tokenizer.eval(),
        safety_checker=None, enable_safety_checker=False,
    )
