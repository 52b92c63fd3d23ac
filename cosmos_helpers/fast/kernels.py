"""The element-wise steps the fast path fuses with ``torch.compile`` (residual add + RMSNorm, q/k RMSNorm + rotary,
the SiLU gate) as plain functions of stock's maths, fp32 inside as diffusers' ``RMSNorm``."""

from __future__ import annotations

import torch
from diffusers.models.normalization import RMSNorm

from ..models.cosmos3_attention import rope


def _rms(x, weight, eps: float):
    """diffusers ``RMSNorm`` (affine, no bias), same steps."""
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    if weight.dtype in (torch.float16, torch.bfloat16):
        h = h.to(weight.dtype)
    return h * weight


def _rms_rope(x, weight, eps: float, cos, sin):
    return rope(_rms(x, weight, eps), cos, sin)


def _add_rms(x, y, weight, eps: float):
    s = x + y
    return s, _rms(s, weight, eps)


def _silu_mul(gate, up):
    return torch.nn.functional.silu(gate) * up


def fusable(transformer) -> bool:
    """The fused path covers the Nano/Super layout: diffusers RMSNorm everywhere, SiLU MLPs."""
    layer = transformer.layers[0]
    norms = [layer.input_layernorm_moe_gen, layer.post_attention_layernorm_moe_gen, layer.self_attn.norm_added_q,
             layer.self_attn.norm_added_k, transformer.norm_moe_gen]
    return (all(type(n) is RMSNorm and n.weight is not None and getattr(n, "bias", None) is None for n in norms)
            and layer.mlp_moe_gen.hidden_act == "silu")


KERNELS = {"rms": _rms, "rms_rope": _rms_rope, "add_rms": _add_rms, "silu_mul": _silu_mul}
