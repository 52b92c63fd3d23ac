"""Transformer shapes of the published Cosmos3 sizes, as the Cosmos Framework configures them.

Each generator is a mixture-of-transformers (MoT) over one Qwen3-VL text tower: an understanding tower and a
generation tower of the same shape per layer. The framework reads the tower's shape from the Qwen3-VL JSON its
model config names; the numbers below are that JSON's ``text_config`` (cosmos-framework @ 5eee9ed):

* **Nano**: ``cosmos_framework/configs/base/experiment/sft/models/nano_model_config.py:130-133`` builds
  ``Qwen3VLMoTConfig.from_json_file("cosmos_framework/model/generator/reasoner/qwen3_vl/configs/
  Qwen3-VL-8B-Instruct.json")``; that JSON, lines 13-35: head_dim 128, hidden 4096, intermediate 12288,
  32 heads, 36 layers, 8 key/value heads, mrope_section [24, 20, 20], rope_theta 5e6, vocab 151936. These are
  ``Cosmos3OmniTransformer``'s constructor defaults in diffusers 0.42.1 (15.16 B parameters).
* **Super**: ``.../sft/models/super_model_config.py:147-151`` names ``Qwen3-VL-32B-Instruct.json``
  (``inference/configs/model/Cosmos3-Super.yaml:164-166`` the same file, experiment ``cosmos3_ga_64bm32b``: a
  64 B MoT of 32 B towers); that JSON, lines 13-35: head_dim 128, hidden 5120, intermediate 25600, 64 heads,
  64 layers, 8 key/value heads, mrope_section [24, 20, 20], rope_theta 5e6, vocab 151936 (64.0 B parameters in
  diffusers' layout, "64bm"). Cosmos3-Super.yaml:112-113 turns sound on with ``sound_dim: 64`` as for Nano.
"""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError

_QWEN3_VL_COMMON: dict[str, Any] = dict(head_dim=128, num_key_value_heads=8, rope_axes_dim=[24, 20, 20],
                                        rope_theta=5_000_000.0, vocab_size=151936)
TRANSFORMER_SHAPES: dict[str, dict[str, Any]] = {
    "nano": dict(_QWEN3_VL_COMMON, hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                 num_hidden_layers=36),
    "super": dict(_QWEN3_VL_COMMON, hidden_size=5120, intermediate_size=25600, num_attention_heads=64,
                  num_hidden_layers=64),
}


def transformer_shape(size: str) -> dict[str, Any]:
    """``Cosmos3OmniTransformer`` keyword arguments for ``size`` (``"nano"`` or ``"super"``)."""
    try:
        return dict(TRANSFORMER_SHAPES[size.lower()])
    except KeyError:
        raise ValidationError("size", f"{size!r} has no recorded shape.",
                              f"use one of {sorted(TRANSFORMER_SHAPES)}.") from None


def parameter_count(size: str, *, sound: bool = False) -> int:
    """Parameters of the transformer at ``size``, counted on the meta device (nothing allocated)."""
    import torch
    from diffusers import Cosmos3OmniTransformer
    with torch.device("meta"):
        model = Cosmos3OmniTransformer(sound_gen=sound, sound_dim=64 if sound else None, **transformer_shape(size))
    return sum(p.numel() for p in model.parameters())
