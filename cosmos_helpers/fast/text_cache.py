"""The text (understanding) pathway once per prompt, kept as per-layer keys/values.

Exact: text attends causally to text only, with its own weights and no timestep (diffusers 0.42.1
``transformer_cosmos3.py:93-102, 498-515``), so stock recomputes the same keys/values every pass. One scratch buffer
per prompt holds a layer's text then generation keys/values (a copy per layer would hold 6.5 GB at t2v 720p).
Entries are keyed by the identity of the pipeline's ``input_ids`` (packed once per call); buffers are recycled by
shape, which keeps CUDA graphs valid.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from ..models.cosmos3_attention import rope
from .attention import sdpa


@dataclass(eq=False)
class KVBuffer:
    """One prompt's text keys/values per layer (``[layers, und_len, kv_heads, head_dim]``) and the scratch a layer's
    attention reads (``[und_len + n_gen, kv_heads, head_dim]``)."""

    und_len: int
    n_gen: int
    k: torch.Tensor
    v: torch.Tensor
    k_all: torch.Tensor | None = None  # made on first use (a Ulysses rank never uses it)
    v_all: torch.Tensor | None = None

    def layer(self, index: int, k_gen: torch.Tensor, v_gen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``index``'s keys/values over text + generation, in the scratch (valid until the next layer)."""
        if self.k_all is None:
            shape = (self.und_len + self.n_gen, *self.k.shape[2:])
            self.k_all, self.v_all = (self.k.new_empty(shape) for _ in "kv")
        torch.cat([self.k[index], k_gen], out=self.k_all)
        torch.cat([self.v[index], v_gen], out=self.v_all)
        return self.k_all, self.v_all


class TextKVCache:
    """LRU of prompts (by ``input_ids`` identity) -> their text keys/values, plus a pool of spare buffers."""

    def __init__(self, transformer, capacity: int = 2, spare_buffers: int = 2) -> None:
        self.transformer, self.capacity, self.spare_buffers = transformer, capacity, spare_buffers
        # id(input_ids) -> (input_ids, its buffer); the strong reference keeps the identity key unique while cached
        self.entries: "OrderedDict[int, tuple[torch.Tensor, KVBuffer]]" = OrderedDict()
        self.spare: list[KVBuffer] = []
        self.on_buffer_dropped = lambda buf: None  # the graph cache sets it to forget graphs using ``buf``
        self.computed = 0  # how many times the text tower ran (tests check: once per prompt)

    def clear(self) -> None:
        for buf in [buf for _, buf in self.entries.values()] + self.spare:
            self.on_buffer_dropped(buf)
        self.entries.clear()
        self.spare.clear()

    def _buffer(self, und_len: int, n_gen: int, like: torch.Tensor) -> KVBuffer:
        inference = torch.is_inference_mode_enabled()
        for i, buf in enumerate(self.spare):
            # an inference-mode tensor cannot be written outside inference mode: match the mode too
            if (buf.und_len == und_len and buf.n_gen == n_gen and buf.k.dtype == like.dtype
                    and buf.k.device == like.device and buf.k.is_inference() == inference):
                return self.spare.pop(i)
        cfg = self.transformer.config
        shape = (cfg.num_hidden_layers, und_len, cfg.num_key_value_heads, cfg.head_dim)
        return KVBuffer(und_len, n_gen, *(torch.empty(shape, dtype=like.dtype, device=like.device) for _ in "kv"))

    def get(self, input_ids: torch.Tensor, text_indexes: torch.Tensor, und_len: int, n_gen: int,
            cos_und: torch.Tensor, sin_und: torch.Tensor) -> KVBuffer:
        """The prompt's keys/values buffer: cached, or the text tower run once into a (recycled) buffer."""
        ids, buf = self.entries.get(id(input_ids), (None, None))
        if (ids is input_ids and buf.n_gen == n_gen
                and not (buf.k.is_inference() and not torch.is_inference_mode_enabled())):
            self.entries.move_to_end(id(input_ids))
            return buf
        while len(self.entries) >= self.capacity:
            self.spare.append(self.entries.popitem(last=False)[1][1])
        while len(self.spare) > self.spare_buffers:
            self.on_buffer_dropped(self.spare.pop(0))
        buf = self._buffer(und_len, n_gen, self.transformer.embed_tokens.weight)
        self._compute(buf, input_ids, text_indexes, und_len, cos_und, sin_und)
        self.entries[id(input_ids)] = (input_ids, buf)
        return buf

    @torch.no_grad()
    def _compute(self, buf: KVBuffer, input_ids, text_indexes, und_len, cos_und, sin_und) -> None:
        """The text tower, operation for operation as in stock (``Cosmos3AttnProcessor``/decoder layer)."""
        t = self.transformer
        embedding = t.embed_tokens(input_ids)
        und = embedding.new_zeros((und_len, t.config.hidden_size))
        und[text_indexes] = embedding
        cos, sin = cos_und.unsqueeze(1), sin_und.unsqueeze(1)
        last = len(t.layers) - 1
        for index, layer in enumerate(t.layers):
            attn = layer.self_attn
            normed = layer.input_layernorm(und)
            k = attn.norm_k(attn.to_k(normed).view(-1, attn.num_key_value_heads, attn.head_dim))
            v = attn.to_v(normed).view(-1, attn.num_key_value_heads, attn.head_dim)
            k_for_gen = attn.k_norm_und_for_gen(k) if attn.k_norm_und_for_gen is not None else k
            buf.k[index] = rope(k_for_gen, cos, sin)
            buf.v[index] = v
            if index == last:
                break  # the text hidden states after the last layer feed nothing the generator reads
            q = rope(attn.norm_q(attn.to_q(normed).view(-1, attn.num_attention_heads, attn.head_dim)), cos, sin)
            causal = sdpa(q, rope(k, cos, sin), v, backend="native", is_causal=True).flatten(-2, -1)
            residual = und + attn.to_out(causal)
            und = residual + layer.mlp(layer.post_attention_layernorm(residual))
        self.computed += 1
