"""The stock ``Cosmos3AttnProcessor`` projections, q/k norms and rotary embedding: one copy for every custom
attention processor here and the fast path's layer code, which must stay bit-identical to diffusers."""

from __future__ import annotations

from typing import Any

from diffusers.models.transformers.transformer_cosmos3 import _rotate_half


def rope(x: Any, cos: Any, sin: Any) -> Any:
    """Stock's rotary embedding (``cos``/``sin`` already broadcastable over the heads)."""
    return x * cos + _rotate_half(x) * sin


def project_qkv(attn: Any, und_seq: Any, gen_seq: Any, rotary_emb: Any) -> tuple[Any, ...]:
    """Queries, keys and values of the text (und) and generation (gen) pathways, normed and rotated:
    ``(q_und, k_und, v_und, k_und_for_gen, q_gen, k_gen, v_gen)``."""
    heads, kv_heads, dim = attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim
    q_und = attn.norm_q(attn.to_q(und_seq).view(-1, heads, dim))
    k_und = attn.norm_k(attn.to_k(und_seq).view(-1, kv_heads, dim))
    v_und = attn.to_v(und_seq).view(-1, kv_heads, dim)
    q_gen = attn.norm_added_q(attn.add_q_proj(gen_seq).view(-1, heads, dim))
    k_gen = attn.norm_added_k(attn.add_k_proj(gen_seq).view(-1, kv_heads, dim))
    v_gen = attn.add_v_proj(gen_seq).view(-1, kv_heads, dim)
    k_und_for_gen = attn.k_norm_und_for_gen(k_und) if attn.k_norm_und_for_gen is not None else k_und
    cos_und, sin_und, cos_gen, sin_gen = (c.unsqueeze(1) for c in rotary_emb)
    q_und, k_und, k_und_for_gen = (rope(x, cos_und, sin_und) for x in (q_und, k_und, k_und_for_gen))
    q_gen, k_gen = rope(q_gen, cos_gen, sin_gen), rope(k_gen, cos_gen, sin_gen)
    return q_und, k_und, v_und, k_und_for_gen, q_gen, k_gen, v_gen
