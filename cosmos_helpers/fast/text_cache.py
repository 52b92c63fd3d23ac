"""The text (understanding) pathway, computed once per prompt and kept as per-layer keys/values.

Why this is exact: in ``Cosmos3OmniTransformer`` the text tokens attend causally to text only, have their
own weights and get no timestep embedding (diffusers 0.42.1 ``transformer_cosmos3.py:93-102, 498-515``).
Their hidden states, and so the text keys/values every generation token attends to, are the same at every
denoising step. Stock diffusers recomputes them in both guidance passes of all steps (70 times at 35
steps); here each prompt (the conditional and the negative prompt differ, so each has its own entry) runs
the text tower once, with the same operations in the same order as stock, and its keys (q/k-normed, rotary
applied: ``k_und_for_gen``) and values go into the first ``und_len`` rows of per-layer buffers. The rows
after them receive each pass's generation keys/values, so attention reads one contiguous buffer, the same
values stock builds with ``torch.cat([k_und_for_gen, k_gen])``.

Entries are keyed by the identity of the pipeline's ``input_ids`` tensor (packed once per pipeline call),
so a new call never reuses an old prompt's keys/values even if the weights changed in between. Buffers
are recycled between calls of the same shape, which keeps CUDA graphs that read them valid.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from .attention import sdpa


@dataclass(eq=False)
class KVBuffer:
    """Per-layer keys and values ``[layers, und_len + n_gen, kv_heads, head_dim]`` of one prompt."""

    und_len: int
    n_gen: int
    k: torch.Tensor
    v: torch.Tensor

    @property
    def shape_key(self) -> tuple[int, int]:
        return (self.und_len, self.n_gen)


@dataclass(eq=False)
class TextEntry:
    input_ids: torch.Tensor  # strong reference: keeps the identity key unique while cached
    buf: KVBuffer
    extras: dict = field(default_factory=dict)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TextKVCache:
    """LRU of prompts (by ``input_ids`` identity) -> their text keys/values, plus a pool of spare buffers."""

    def __init__(self, transformer, capacity: int = 2, spare_buffers: int = 2) -> None:
        self.transformer = transformer
        self.capacity = capacity
        self.spare_buffers = spare_buffers
        self.entries: "OrderedDict[int, TextEntry]" = OrderedDict()
        self.spare: list[KVBuffer] = []
        self.on_buffer_dropped = None  # callback(KVBuffer): lets the graph cache forget graphs using it
        self.computed = 0  # how many times the text tower ran (tests check: once per prompt)

    def clear(self) -> None:
        for entry in self.entries.values():
            self._drop(entry.buf)
        for buf in self.spare:
            self._drop(buf)
        self.entries.clear()
        self.spare.clear()

    def _drop(self, buf: KVBuffer) -> None:
        if self.on_buffer_dropped is not None:
            self.on_buffer_dropped(buf)

    def lookup(self, input_ids: torch.Tensor, n_gen: int) -> TextEntry | None:
        entry = self.entries.get(id(input_ids))
        if (entry is None or entry.input_ids is not input_ids or entry.buf.n_gen != n_gen
                or (entry.buf.k.is_inference() and not torch.is_inference_mode_enabled())):
            return None
        self.entries.move_to_end(id(input_ids))
        return entry

    def _buffer(self, und_len: int, n_gen: int, like: torch.Tensor) -> KVBuffer:
        inference = torch.is_inference_mode_enabled()
        for i, buf in enumerate(self.spare):
            # an inference-mode tensor cannot be written outside inference mode: match the mode too
            if (buf.shape_key == (und_len, n_gen) and buf.k.dtype == like.dtype and buf.k.device == like.device
                    and buf.k.is_inference() == inference):
                return self.spare.pop(i)
        cfg = self.transformer.config
        shape = (cfg.num_hidden_layers, und_len + n_gen, cfg.num_key_value_heads, cfg.head_dim)
        k = torch.empty(shape, dtype=like.dtype, device=like.device)
        v = torch.empty(shape, dtype=like.dtype, device=like.device)
        return KVBuffer(und_len, n_gen, k, v)

    def get(self, input_ids: torch.Tensor, text_indexes: torch.Tensor, und_len: int, n_gen: int,
            cos_und: torch.Tensor, sin_und: torch.Tensor) -> TextEntry:
        entry = self.lookup(input_ids, n_gen)
        if entry is not None:
            return entry
        while len(self.entries) >= self.capacity:
            _, old = self.entries.popitem(last=False)
            self.spare.append(old.buf)
        while len(self.spare) > self.spare_buffers:
            self._drop(self.spare.pop(0))
        weight = self.transformer.embed_tokens.weight
        buf = self._buffer(und_len, n_gen, weight)
        self._compute(buf, input_ids, text_indexes, und_len, cos_und, sin_und)
        entry = TextEntry(input_ids=input_ids, buf=buf)
        self.entries[id(input_ids)] = entry
        return entry

    @torch.no_grad()
    def _compute(self, buf: KVBuffer, input_ids, text_indexes, und_len, cos_und, sin_und) -> None:
        """The text tower, operation for operation as in stock (``Cosmos3AttnProcessor``/decoder layer)."""
        t = self.transformer
        embedding = t.embed_tokens(input_ids)
        und = embedding.new_zeros((und_len, t.config.hidden_size))
        und[text_indexes] = embedding
        cos = cos_und.unsqueeze(1)
        sin = sin_und.unsqueeze(1)
        last = len(t.layers) - 1
        for index, layer in enumerate(t.layers):
            attn = layer.self_attn
            normed = layer.input_layernorm(und)
            k = attn.to_k(normed).view(-1, attn.num_key_value_heads, attn.head_dim)
            v = attn.to_v(normed).view(-1, attn.num_key_value_heads, attn.head_dim)
            k = attn.norm_k(k)
            k_for_gen = attn.k_norm_und_for_gen(k) if attn.k_norm_und_for_gen is not None else k
            k_for_gen = k_for_gen * cos + rotate_half(k_for_gen) * sin
            buf.k[index, :und_len] = k_for_gen
            buf.v[index, :und_len] = v
            if index == last:
                break  # the text hidden states after the last layer feed nothing the generator reads
            q = attn.to_q(normed).view(-1, attn.num_attention_heads, attn.head_dim)
            q = attn.norm_q(q)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            causal = sdpa(q, k, v, backend="native", is_causal=True).flatten(-2, -1)
            residual = und + attn.to_out(causal)
            und = residual + layer.mlp(layer.post_attention_layernorm(residual))
        self.computed += 1
