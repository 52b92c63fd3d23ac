"""Ulysses sequence parallelism for ``Cosmos3OmniTransformer``, through the seams diffusers 0.42.1 leaves.

Between ``_cp_shard_fn`` and ``_cp_gather_fn`` (around the decoder layers) each GPU of a group holds one slice of each
pathway's tokens, zero-padded at the end to even slices (never attended to). Attention swaps token slices for heads
with one all-to-all (key/value heads N does not divide repeated to the query heads first, as grouped attention
computes anyway), attends as stock does and swaps back.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from diffusers.models.attention_dispatch import dispatch_attention_fn
from diffusers.models.transformers.transformer_cosmos3 import Cosmos3PackedMoTAttention

from ....models.cosmos3_attention import project_qkv


class Ulysses:
    """Shard seam, gather seam and attention processor of one transformer, over one process group."""

    def __init__(self, group, size: int, rank: int) -> None:
        self.group, self.size, self.rank = group, size, rank
        self.lengths = (0, 0)  # the real (unpadded) text and generation lengths of the pass in flight
        self.passes = 0  # transformer passes sharded so far (tests and reports)

    def split_rows(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's slice of ``x`` (tokens on dim 0), zero-padded so every rank's slice is the same length."""
        per = -(-x.shape[0] // self.size)
        pad = per * self.size - x.shape[0]
        if pad:
            x = torch.cat([x, x.new_zeros((pad, *x.shape[1:]))], dim=0)
        return x[self.rank * per:(self.rank + 1) * per]

    def shard(self, und_seq, gen_seq, rotary):
        self.lengths = (und_seq.shape[0], gen_seq.shape[0])
        self.passes += 1
        return self.split_rows(und_seq), self.split_rows(gen_seq), tuple(self.split_rows(t) for t in rotary)

    def gather(self, und_out, gen_out):
        return self.join_rows(und_out, self.lengths[0]), self.join_rows(gen_out, self.lengths[1])

    def join_rows(self, x: torch.Tensor, length: int) -> torch.Tensor:
        """Every rank's rows of ``x``, in rank order, padding dropped (an all-gather)."""
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x.contiguous(), group=self.group)
        return torch.cat(parts, dim=0)[:length]

    def tokens_to_heads(self, x: torch.Tensor, length: int) -> torch.Tensor:
        """[tokens/N, heads, d] on each rank -> [tokens, heads/N, d] (padding dropped)."""
        local, heads, dim = x.shape
        send = x.reshape(local, self.size, heads // self.size, dim).transpose(0, 1).contiguous()
        received = torch.empty_like(send)
        dist.all_to_all_single(received, send, group=self.group)
        return received.reshape(self.size * local, heads // self.size, dim)[:length]

    def heads_to_tokens(self, x: torch.Tensor, local: int) -> torch.Tensor:
        """[tokens, heads/N, d] -> [tokens/N, heads, d] (padding restored, then dropped by the gather)."""
        length, part, dim = x.shape
        pad = local * self.size - length
        if pad:
            x = torch.cat([x, x.new_zeros((pad, part, dim))], dim=0)
        send = x.reshape(self.size, local, part, dim).contiguous()
        received = torch.empty_like(send)
        dist.all_to_all_single(received, send, group=self.group)
        return received.permute(1, 0, 2, 3).reshape(local, self.size * part, dim)

    def fast_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, text_k: torch.Tensor,
                       text_v: torch.Tensor, gen_len: int, attend) -> torch.Tensor:
        """The fast path's attention for this rank's rows ``[gen/N, heads, d]``; the text keys/values are whole on
        every rank, so each takes the heads it attends without an exchange. ``attend(q, k, v)``: the kernel."""
        heads, kv_heads = q.shape[1], k.shape[1]
        if kv_heads % self.size:  # as the processor does: repeat key/value heads to the query heads
            k, v, text_k, text_v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v, text_k, text_v))
        local = q.shape[0]
        q, k, v = (self.tokens_to_heads(t, gen_len) for t in (q, k, v))
        text_k, text_v = (t.chunk(self.size, dim=1)[self.rank] for t in (text_k, text_v))
        return self.heads_to_tokens(attend(q, torch.cat([text_k, k]), torch.cat([text_v, v])), local)


class UlyssesAttnProcessor:
    """Stock ``Cosmos3AttnProcessor`` maths, with the token/head swap around both attentions."""

    _attention_backend = None
    _parallel_config = None

    def __init__(self, ulysses: Ulysses) -> None:
        self.ulysses = ulysses

    def __call__(self, attn: Cosmos3PackedMoTAttention, und_seq, gen_seq, rotary_emb):
        sp = self.ulysses
        heads, kv_heads = attn.num_attention_heads, attn.num_key_value_heads
        q_und, k_und, v_und, k_und_for_gen, q_gen, k_gen, v_gen = project_qkv(attn, und_seq, gen_seq, rotary_emb)
        if kv_heads % sp.size:  # repeat key/value heads to the query heads so they split evenly
            k_und, v_und, k_und_for_gen, k_gen, v_gen = (
                t.repeat_interleave(heads // kv_heads, dim=1) for t in (k_und, v_und, k_und_for_gen, k_gen, v_gen))
        und_len, gen_len = sp.lengths
        local_und, local_gen = und_seq.shape[0], gen_seq.shape[0]
        q_und, k_und, v_und, k_und_for_gen = (sp.tokens_to_heads(t, und_len)
                                              for t in (q_und, k_und, v_und, k_und_for_gen))
        q_gen, k_gen, v_gen = (sp.tokens_to_heads(t, gen_len) for t in (q_gen, k_gen, v_gen))

        causal = dispatch_attention_fn(q_und.unsqueeze(0), k_und.unsqueeze(0), v_und.unsqueeze(0), is_causal=True,
                                       enable_gqa=True, backend=self._attention_backend)
        full = dispatch_attention_fn(q_gen.unsqueeze(0), torch.cat([k_und_for_gen, k_gen]).unsqueeze(0),
                                     torch.cat([v_und, v_gen]).unsqueeze(0), is_causal=False, enable_gqa=True,
                                     backend=self._attention_backend)
        causal = sp.heads_to_tokens(causal.squeeze(0), local_und).flatten(-2, -1)
        full = sp.heads_to_tokens(full.squeeze(0), local_gen).flatten(-2, -1)
        return attn.to_out(causal), attn.to_add_out(full)


def install_ulysses(transformer, group, size: int, rank: int) -> Ulysses:
    """Set the seams and the processor on every attention layer of ``transformer``; returns the state object."""
    ulysses = Ulysses(group, size, rank)
    transformer._cp_shard_fn = ulysses.shard
    transformer._cp_gather_fn = ulysses.gather
    transformer._cosmos_ulysses = ulysses  # the fast path finds its seams here
    for module in transformer.modules():
        if isinstance(module, Cosmos3PackedMoTAttention):
            module.set_processor(UlyssesAttnProcessor(ulysses))
    return ulysses
