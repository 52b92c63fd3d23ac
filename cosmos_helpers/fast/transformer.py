"""A drop-in ``forward`` for ``Cosmos3OmniTransformer``: the prompt's per-layer text keys/values from
:class:`~.text_cache.TextKVCache`, then only the generation tower, with stock's layer maths operation for operation
(bit-identical on CPU in fp32). ``batch_cfg`` computes both guidance branches of a step at the conditional call and
hands the negative result to the next call only if its arguments are the very same objects. Under Ulysses each rank
runs its slice of the generation tokens (not batched, not graphed); under SeaCache the skip decisions are diffusers'
(:mod:`.sea_cache`). What :meth:`FastForward._unsupported` names goes to stock with a warning, counted by reason.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, NamedTuple

import torch
from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformerOutput

from ..models.cosmos3_attention import rope
from . import attention as attention_mod
from .graphs import GraphCache
from .kernels import KERNELS, fusable
from .projections import FusedProjections
from .sea_cache import SeaCacheGate, hooked_modules, sea_cache_root
from .text_cache import TextKVCache


# The noisy inputs that change every step; the rest of a call's arguments stays the same through its steps.
DYNAMIC = ("vision_tokens", "vision_timesteps", "sound_tokens", "sound_timesteps", "action_tokens",
           "action_timesteps")


def same(a: Any, b: Any) -> bool:
    """Whether two calls got the very same input: identity for tensors (equal values are not enough to reuse a
    prediction; the pipeline passes the same tensors to both branches of a step), element-wise for sequences."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def same_kwargs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)


def static(kw: dict) -> dict:
    return {k: v for k, v in kw.items() if k not in DYNAMIC}


def _has(kw: dict, modality: str) -> bool:
    """The pass carries ``modality`` ("sound", "action") tokens, as stock decides it."""
    return kw.get(f"{modality}_tokens") is not None and kw.get(f"{modality}_sequence_indexes") is not None


class FastForward:
    """Bound as ``transformer.forward``; see the module docstring."""

    def __init__(self, transformer, *, attention: str = "auto", cuda_graphs: bool = True,
                 graph_max_tokens: int | None = None, batch_cfg: bool = True, batch_max_tokens: int | None = None,
                 compile: bool | str = False, fuse_projections: bool = False) -> None:
        self.transformer = transformer
        self.compiled = None
        if compile and fusable(transformer):
            self.compiled = dict(KERNELS) if compile == "eager" else {
                name: torch.compile(fn, dynamic=True, fullgraph=True) for name, fn in KERNELS.items()}
        self._compiled_ok = False
        self.projections = FusedProjections(transformer) if fuse_projections else None
        self.stock_forward = transformer.forward
        # callers that pick their keyword arguments from forward's signature (diffusers' modular denoise loop,
        # e.g. a distilled pipeline sharing this transformer) see stock's, not (*args, **kwargs)
        self.__signature__ = inspect.signature(self.stock_forward)
        self.attention, self.batch_cfg, self.batch_max_tokens = attention, batch_cfg, batch_max_tokens
        self.text = TextKVCache(transformer)
        self.graphs = GraphCache(max_tokens=graph_max_tokens) if cuda_graphs else None
        if self.graphs is not None:
            self.text.on_buffer_dropped = self.graphs.forget_buffer
        self._rotary: dict[int, tuple] = {}
        self._history: list[tuple[dict, str | None]] = []  # the last two calls' kwargs and cache contexts
        self._stash: _Stash | None = None
        self.stats = {"calls": 0, "stock_fallbacks": 0, "batched_pairs": 0, "stash_hits": 0, "stash_misses": 0,
                      "computed_passes": 0, "cached_passes": 0, "fallback_reasons": {}}
        self.compile_error: str | None = None
        self.active = True  # False: every call goes to the stock forward (a stock backend's turn)

    def report(self) -> dict:
        """The counters :func:`cosmos_helpers.fast.fast_path_stats` reports."""
        out = dict(self.stats, text_tower_runs=self.text.computed, fused_kernels=self.compiled is not None,
                   compile_error=self.compile_error,
                   attention_tuning={str(k): v for k, v in attention_mod.TUNING_LOG.items()})
        if self.projections is not None:
            out["projection_choices"] = {str(k[0]): v for k, v in self.projections.choices.items()}
        if self.graphs is not None:
            out.update(graph_captures=self.graphs.captures, graph_replays=self.graphs.replays,
                       graph_failures=dict(self.graphs.failed))
        return out

    def reset(self) -> None:
        """Drop cached keys/values, graphs and CFG state (frees their memory)."""
        self.text.clear()
        if self.graphs is not None:
            self.graphs.clear()
        self._rotary.clear()
        self.forget_pairs()

    def forget_pairs(self) -> None:
        """Drop the guidance-pair bookkeeping (and the stashed branch it may hold)."""
        self._history.clear()
        self._stash = None

    def _unsupported(self, args: tuple, kwargs: dict) -> str | None:
        """Why this call must run stock code, or ``None``."""
        t = self.transformer
        if args or torch.is_grad_enabled():
            return "positional arguments or gradients"
        if (t._cp_shard_fn is not None or t._cp_gather_fn is not None) and self._ulysses() is None:
            return "another context-parallel plan"
        if "input_ids" not in kwargs or "vision_tokens" not in kwargs:
            return "a call without text or vision inputs"
        hooks = hooked_modules(t)
        if hooks:  # FirstBlockCache, group offloading, ...: they expect the stock block calls
            return f"diffusers hooks {', '.join(sorted(set(hooks)))}"
        if sea_cache_root(t) is not None and self._ulysses() is not None:
            return "SeaCache under Ulysses"
        text_indexes = kwargs["text_indexes"]
        if not (text_indexes.ndim == 1 and text_indexes.shape[0] == kwargs["und_len"]):
            return "a text index layout other than the pipeline's"
        return None

    def _ulysses(self):
        """This transformer's Ulysses state when its seams are ours (``install_ulysses``), else ``None``."""
        t = self.transformer
        sp = getattr(t, "_cosmos_ulysses", None)
        return sp if sp is not None and t._cp_shard_fn == sp.shard and t._cp_gather_fn == sp.gather else None

    def __call__(self, *args, **kwargs):
        if not self.active:
            return self.stock_forward(*args, **kwargs)
        reason = self._unsupported(args, kwargs)
        if reason is not None:
            reasons = self.stats["fallback_reasons"]
            if reason not in reasons:
                warnings.warn(f"fast path: {reason}; these passes run stock diffusers code.", stacklevel=2)
            reasons[reason] = reasons.get(reason, 0) + 1
            self.stats["stock_fallbacks"] += 1
            return self.stock_forward(*args, **kwargs)
        self.stats["calls"] += 1
        return_dict = kwargs.pop("return_dict", True)
        sample, sound, action = result = self._forward(kwargs)
        return Cosmos3OmniTransformerOutput(sample=sample, sound=sound, action=action) if return_dict else result

    def _forward(self, kw: dict):
        root = sea_cache_root(self.transformer)
        gate = SeaCacheGate(self.transformer, root) if root is not None else None
        context = gate.context() if gate is not None else None
        stashed = self._take_stash(kw)
        partner = self._partner(kw) if stashed is None and self.batch_cfg and self._ulysses() is None else None
        partner_context = self._history[-1][1] if partner is not None else None
        self._history = (self._history + [(kw, context)])[-2:]
        branch = stashed.branch if stashed is not None else self._embed_branch(kw)
        rows = gate.decide(branch.gen) if gate is not None else None
        if rows is not None:  # skipped: the generation rows plus diffusers' extrapolated residual
            self.stats["cached_passes"] += 1
            return self._decode(kw, rows, branch.shapes)
        self.stats["computed_passes"] += 1
        if stashed is not None:  # computed with the last call, as its batch partner
            normed, result = stashed.normed, stashed.result
        elif partner is not None and (gate is None or gate.predict(partner_context)):
            normed, result = self._run_pair(kw, branch, partner, keep=gate is not None and self.graphs is not None)
        else:
            normed = self._stack([branch])[0]
            result = self._decode(kw, normed, branch.shapes)
        if gate is not None:
            gate.record(normed)
        return result

    def _take_stash(self, kw: dict) -> "_Stash | None":
        """The other branch computed with the last call, if this is that very call."""
        stashed, self._stash = self._stash, None
        if stashed is None:
            return None
        hit = same_kwargs(stashed.kwargs, kw)
        self.stats["stash_hits" if hit else "stash_misses"] += 1
        return stashed if hit else None

    def _run_pair(self, kw: dict, branch: "_Branch", partner: dict, *, keep: bool):
        """Both guidance branches in one batch: this one's rows and result now, the other's stashed for its call
        (its rows copied when ``keep``: a graph's output is overwritten by the next replay)."""
        other = self._embed_branch(partner)
        rows = self._stack([branch, other])
        self.stats["batched_pairs"] += 1
        self._stash = _Stash(partner, self._decode(partner, rows[1], other.shapes), other,
                             rows[1].clone() if keep else rows[1])
        return rows[0], self._decode(kw, rows[0], branch.shapes)

    def _partner(self, kw: dict) -> dict | None:
        """The other branch's arguments for this step, if the last two calls were a CFG pair (A, B) and this is A."""
        if len(self._history) < 2:
            return None
        (a, _), (b, _) = self._history
        n_gen = kw["sequence_length"] - kw["und_len"]
        if (a["input_ids"] is not kw["input_ids"] or b["input_ids"] is kw["input_ids"]
                or not all(same(a.get(name), b.get(name)) for name in DYNAMIC)  # A and B shared their noisy inputs
                or not same_kwargs(static(a), static(kw)) or b["sequence_length"] - b["und_len"] != n_gen):
            return None
        if self.batch_max_tokens is not None and 2 * n_gen > self.batch_max_tokens:
            return None  # large passes: one branch at a time (same speed, less memory)
        partner = static(b)
        partner.update({name: kw.get(name) for name in DYNAMIC if name in kw})
        return partner if partner.keys() == kw.keys() else None

    def _rotary_for(self, position_ids: torch.Tensor, und_len: int, dtype: torch.dtype, device) -> tuple:
        """Rotary cos/sin of the text rows and of the generation rows, the latter own tensors: a view's storage
        offset is part of what ``torch.compile`` specialises on, so a later pass would compile again."""
        cached = self._rotary.get(id(position_ids))
        if cached is not None and cached[0] is position_ids and cached[1] == und_len and cached[2][0].dtype == dtype:
            return cached[2]
        cos, sin = self.transformer.rotary_emb(
            position_ids=position_ids.unsqueeze(0) if position_ids.ndim == 1 else position_ids.unsqueeze(1),
            device=device, dtype=dtype)
        cos, sin = cos.squeeze(0), sin.squeeze(0)
        parts = (cos[:und_len], sin[:und_len], cos[und_len:].clone(), sin[und_len:].clone())
        if len(self._rotary) >= 4:
            self._rotary.pop(next(iter(self._rotary)))
        self._rotary[id(position_ids)] = (position_ids, und_len, parts)
        return parts

    def _embed_branch(self, kw: dict) -> "_Branch":
        """The generation part of stock's packed ``hidden_states`` (rows ``und_len:``), built the same way, their
        rotary, and the prompt's text keys/values."""
        t = self.transformer
        dtype, device = t.embed_tokens.weight.dtype, t.embed_tokens.weight.device
        und_len = kw["und_len"]
        n_gen = kw["sequence_length"] - und_len
        gen = torch.zeros((n_gen, t.config.hidden_size), dtype=dtype, device=device)
        time_dtype = next(t.time_embedder.parameters()).dtype

        def with_timesteps(packed, modality: str):  # the timestep embedding on the noisy tokens of one modality
            embeds = t.time_embedder(t.time_proj(kw[f"{modality}_timesteps"] * t.config.timestep_scale).to(time_dtype))
            return t._apply_timestep_embeds_to_noisy_tokens(
                packed_tokens=packed, packed_timestep_embeds=embeds.to(dtype),
                noisy_frame_indexes=kw[f"{modality}_noisy_frame_indexes"], token_shapes=kw[f"{modality}_token_shapes"])

        packed, original_shapes = t._patchify_and_pack_latents(kw["vision_tokens"])
        gen[kw["vision_sequence_indexes"] - und_len] = with_timesteps(t.proj_in(packed), "vision")

        if _has(kw, "sound"):
            packed = t._pack_sound_latents(kw["sound_tokens"], kw["sound_token_shapes"]).to(dtype)
            packed = t.audio_proj_in(packed) + t.audio_modality_embed
            gen[kw["sound_sequence_indexes"] - und_len] = with_timesteps(packed, "sound")

        if _has(kw, "action"):
            packed, domain_ids = t._pack_action_latents(kw["action_tokens"], kw["action_token_shapes"],
                                                        kw["action_domain_ids"])
            packed = t.action_proj_in(packed.to(dtype), domain_ids.to(device=packed.device)) + t.action_modality_embed
            if kw["action_mse_loss_indexes"].numel() > 0:
                packed = with_timesteps(packed, "action")
            gen[kw["action_sequence_indexes"] - und_len] = packed
        cos_und, sin_und, cos, sin = self._rotary_for(kw["position_ids"], und_len, dtype, device)
        buf = self.text.get(kw["input_ids"], kw["text_indexes"], und_len, n_gen, cos_und, sin_und)
        return _Branch(gen, cos, sin, buf, original_shapes, n_gen)

    def _decode(self, kw: dict, gen_out: torch.Tensor, original_shapes):
        """Stock's prediction heads, reading the generation rows (indexes shifted by ``und_len``)."""
        t = self.transformer
        und_len = kw["und_len"]
        preds_vision = t._unpatchify_and_unpack_latents(
            t.proj_out(gen_out[kw["vision_mse_loss_indexes"] - und_len]), token_shapes_vision=kw["vision_token_shapes"],
            noisy_frame_indexes_vision=kw["vision_noisy_frame_indexes"], original_latent_shapes=original_shapes)
        preds_sound = preds_action = None
        if _has(kw, "sound"):
            preds_sound = t._unpack_sound_latents(t.audio_proj_out(gen_out[kw["sound_mse_loss_indexes"] - und_len]),
                                                  kw["sound_token_shapes"], kw["sound_noisy_frame_indexes"])
        if _has(kw, "action"):
            domain_ids = torch.cat([d.reshape(1).expand(len(n)) for d, n in
                                    zip(kw["action_domain_ids"], kw["action_noisy_frame_indexes"])], dim=0)
            packed = t.action_proj_out(gen_out[kw["action_mse_loss_indexes"] - und_len],
                                       domain_ids.to(device=gen_out.device))
            preds_action = t._unpack_action_latents(packed, kw["action_token_shapes"], kw["action_noisy_frame_indexes"])
        return preds_vision, preds_sound, preds_action

    def _stack(self, branches: list["_Branch"]) -> list[torch.Tensor]:
        """The generation stack over the branches' rows (one batch), each branch's post-norm rows back."""
        t = self.transformer
        dtype = t.embed_tokens.weight.dtype
        bufs, sizes = [b.buf for b in branches], [b.n_gen for b in branches]
        inputs = tuple(parts[0] if len(branches) == 1 else torch.cat(parts)
                       for parts in ([b.gen for b in branches], [b.cos for b in branches], [b.sin for b in branches]))
        sp = self._ulysses()
        if sp is not None:  # one branch (never batched here): this rank's slice of its generation rows
            inputs = tuple(sp.split_rows(t) for t in inputs)
        proj = self.projections if self.projections is not None and self.projections.refresh() else None
        use = proj.choice(inputs[0]) if proj is not None else None

        def stack(x, cos, sin):
            return self._generation_stack(x, cos, sin, bufs, sizes, use, sp)

        if sp is not None:
            out = sp.join_rows(stack(*inputs), sizes[0])
        elif self.graphs is not None:
            key = (tuple(id(b) for b in bufs), tuple((b.und_len, b.n_gen) for b in bufs), str(dtype), self.attention,
                   torch.is_inference_mode_enabled(), proj.refreshes if proj else None,
                   tuple(sorted(use.items())) if use else None, self.compiled is not None)
            out = self.graphs.run(key, stack, inputs, bufs, n_tokens=sum(sizes))
        else:
            out = stack(*inputs)
        return list(out.split(sizes))

    def _generation_stack(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bufs, sizes,
                          use: dict[str, bool] | None = None, sp=None) -> torch.Tensor:
        """Stock's generation pathway through every layer, reading the cached text keys/values; ``use`` says which
        products run stacked (``None``: stock's modules). Fused kernels first; if compiling fails, without them."""
        capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
        if self.compiled is not None and not self._compiled_ok and not capturing:
            try:
                out = self._layers(x, cos, sin, bufs, sizes, use, self.compiled, sp)
                self._compiled_ok = True
                return out
            except Exception as exc:  # no Triton / compiler on this host: keep going without fused kernels
                if sp is not None and not isinstance(exc, torch._dynamo.exc.TorchDynamoException):
                    raise  # a failed collective must not be retried (the ranks would fall out of step)
                self.compile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                warnings.warn(f"fast path: torch.compile failed ({self.compile_error}); continuing without fused "
                              "element-wise kernels (FastOptions(compile=False) silences this).", stacklevel=2)
                self.compiled = None
        return self._layers(x, cos, sin, bufs, sizes, use, self.compiled, sp)

    def _layers(self, x, cos, sin, bufs, sizes, use, fused: dict | None, sp=None) -> torch.Tensor:
        """The layers, each norm computed where the next step needs it. ``fused=None``: stock's own modules,
        operation for operation; else :mod:`.kernels` (results match to bf16 rounding: they keep fp32 inside)."""
        t = self.transformer
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

        def norm_rope(h, norm):
            return rope(norm(h), cos, sin) if fused is None else fused["rms_rope"](h, norm.weight, norm.eps, cos, sin)

        def add_norm(a, b, norm):  # (a + b, norm(a + b))
            if fused is not None:
                return fused["add_rms"](a, b, norm.weight, norm.eps)
            total = a + b
            return total, norm(total)

        layers = list(t.layers)
        first = layers[0].input_layernorm_moe_gen
        normed = first(x) if fused is None else fused["rms"](x, first.weight, first.eps)
        for index, layer in enumerate(layers):
            attn, mlp, post = layer.self_attn, layer.mlp_moe_gen, layer.post_attention_layernorm_moe_gen
            q, k, v = self._qkv(index, attn, normed, use)
            full = self._attend(index, norm_rope(q, attn.norm_added_q), norm_rope(k, attn.norm_added_k), v, bufs,
                                sizes, sp)
            residual, normed = add_norm(x, attn.to_add_out(full.flatten(-2, -1)), post)
            stacked = use is not None and self.projections.gate_up[index] is not None
            if fused is None and not stacked:
                mlp_out = mlp(normed)
            else:
                gate, up = self.projections.gate_up[index](normed, use["gate_up"]) if stacked else (
                    mlp.gate_proj(normed), mlp.up_proj(normed))
                mlp_out = mlp.down_proj(mlp.act_fn(gate) * up if fused is None else fused["silu_mul"](gate, up))
            nxt = layers[index + 1].input_layernorm_moe_gen if index + 1 < len(layers) else t.norm_moe_gen
            x, normed = add_norm(residual, mlp_out, nxt)
        return normed

    def _qkv(self, index: int, attn, normed: torch.Tensor, use: dict[str, bool] | None):
        q, k, v = ((attn.add_q_proj(normed), attn.add_k_proj(normed), attn.add_v_proj(normed)) if use is None
                   else self.projections.qkv[index](normed, use["qkv"]))
        heads, kv_heads, dim = attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim
        return q.view(-1, heads, dim), k.view(-1, kv_heads, dim), v.view(-1, kv_heads, dim)

    def _attend(self, index, q, k, v, bufs, sizes, sp=None):
        if sp is not None:
            buf = bufs[0]

            def attend(q_all, k_all, v_all):
                return attention_mod.sdpa(q_all, k_all, v_all,
                                          backend=attention_mod.resolve(q_all, k_all, v_all, self.attention))

            return sp.fast_attention(q, k, v, buf.k[index], buf.v[index], buf.n_gen, attend)
        outs = []
        for buf, q_part, k_part, v_part in zip(bufs, q.split(sizes), k.split(sizes), v.split(sizes)):
            keys, values = buf.layer(index, k_part, v_part)
            backend = attention_mod.resolve(q_part, keys, values, self.attention)
            outs.append(attention_mod.sdpa(q_part, keys, values, backend=backend))
        return outs[0] if len(outs) == 1 else torch.cat(outs)


class _Branch(NamedTuple):
    """One guidance branch of a pass, embedded: its generation rows, their rotary, its text keys/values."""

    gen: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    buf: Any
    shapes: Any
    n_gen: int


class _Stash(NamedTuple):
    """The other branch of a batched step, kept for its own call: its arguments, result, inputs and output rows."""

    kwargs: dict
    result: Any
    branch: _Branch
    normed: torch.Tensor
