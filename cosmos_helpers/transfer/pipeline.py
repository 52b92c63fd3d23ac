"""diffusers' modular transfer pipeline with the framework's behaviour restored, built fresh for every call.

``Cosmos3OmniBlocks`` runs transfer when given ``control_videos=``. Three of its blocks are replaced by thin
subclasses that carry one call's settings (:class:`CallSettings`): the chunk loop reseeds chunk ``c`` with
``seed + c`` and reports chunks; the denoiser applies the framework's nested guidance with its gating (strict
``lo < t < hi`` intervals, guidance iff ``!= 1``, ``normalize_cfg``); the scheduler step reports steps. With more
than one control, :class:`WeightedMultiControlAttnProcessor` mixes one attention pass per control by the
normalised weights.

The blocks, the pipeline object and its scheduler are made per call (a few milliseconds); only the weights are
shared, taken from :class:`~cosmos_helpers.backends.diffusers.DiffusersBackend`'s pipeline for the model. The one
shared thing a call changes, the transformer's attention processors, is changed only while the caller holds that
pipeline's lock (``DiffusersBackend.borrowed``) and restored before it is released.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable


@dataclass
class CallSettings:
    """One call's settings, read by the replaced blocks; ``passes`` records transformer passes per step."""

    seed: int
    guidance: float
    control_guidance: float
    guidance_interval: tuple[float, float] | None = None
    control_guidance_interval: tuple[float, float] | None = None
    normalize_cfg: bool = False
    on_step: Callable[[int, int], None] | None = None
    on_chunk: Callable[[int, int], None] | None = None
    generator_device: str = "cpu"
    passes: list[int] = field(default_factory=list)

    def __deepcopy__(self, memo: dict) -> CallSettings:
        """Blocks are deep-copied into their pipeline; the call's settings (and what they record) stay one object."""
        return self


class WeightedMultiControlAttnProcessor:
    """Weighted multi-control attention, for ``N > 1`` controls.

    The generation sequence of a full pass is ``[ctrl_1 | ... | ctrl_N | target]``, ``L`` tokens each. For every
    control ``i`` one maskless attention runs with keys/values ``[text | ctrl_i | target]``, queried by ``ctrl_i``
    (its output is kept) and by the target; the target's output is ``sum_i w_i * out_i`` (normalised weights,
    before the output projection). Controls never attend to each other. Any other sequence (the no-control pass,
    length ``L``) goes to the stock processor. Text keys use ``k_und_for_gen`` exactly as the stock processor.
    """

    def __init__(self, weights: tuple[float, ...] | list[float], tokens_per_item: int, fallback: Any = None) -> None:
        from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

        self.weights = tuple(float(w) for w in weights)
        self.tokens_per_item = int(tokens_per_item)
        self.fallback = fallback or Cosmos3AttnProcessor()
        self._attention_backend = getattr(self.fallback, "_attention_backend", None)
        self._parallel_config = getattr(self.fallback, "_parallel_config", None)

    def __call__(self, attn, und_seq, gen_seq, rotary_emb):
        import torch
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        from ..models.cosmos3_attention import project_qkv

        n, length = len(self.weights), self.tokens_per_item
        if n < 2 or gen_seq.shape[0] != (n + 1) * length:
            return self.fallback(attn, und_seq, gen_seq, rotary_emb)
        q_und, k_und, v_und, k_und_for_gen, q_gen, k_gen, v_gen = project_qkv(attn, und_seq, gen_seq, rotary_emb)

        def sdpa(q, k, v, causal):
            out = dispatch_attention_fn(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=causal,
                                        enable_gqa=True, backend=self._attention_backend,
                                        parallel_config=self._parallel_config)
            return out.squeeze(0).flatten(-2, -1)

        causal_out = sdpa(q_und, k_und, v_und, True)
        target = slice(n * length, (n + 1) * length)
        control_outs, target_out = [], None
        for i, weight in enumerate(self.weights):
            ctrl = slice(i * length, (i + 1) * length)
            out = sdpa(torch.cat([q_gen[ctrl], q_gen[target]]),
                       torch.cat([k_und_for_gen, k_gen[ctrl], k_gen[target]]),
                       torch.cat([v_und, v_gen[ctrl], v_gen[target]]), False)
            control_outs.append(out[:length])
            part = out[length:] * weight
            target_out = part if target_out is None else target_out + part
        full_out = torch.cat([*control_outs, target_out], dim=0)
        return attn.to_out(causal_out), attn.to_add_out(full_out)


class installed_processor:
    """Context manager: install an attention processor on every layer, restore the previous ones afterwards."""

    def __init__(self, transformer, processor) -> None:
        self.transformer, self.processor, self.saved = transformer, processor, None

    def __enter__(self):
        if self.processor is not None:
            self.saved = dict(self.transformer.attn_processors)
            self.transformer.set_attn_processor(self.processor)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.transformer.set_attn_processor(self.saved)
        return False


@lru_cache(maxsize=None)
def _block_classes() -> dict[str, type]:
    """Subclasses of three modular blocks (built on first use: importing this module must not import diffusers)."""
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import Cosmos3TransferLoopDenoiser, Cosmos3TransferLoopSchedulerStep
    from diffusers.modular_pipelines.cosmos.modular_blocks_cosmos3 import Cosmos3TransferChunkDenoiseStep

    class ChunkLoop(Cosmos3TransferChunkDenoiseStep):
        """The stock chunk loop, reseeding chunk ``c`` with ``seed + c`` and reporting chunk progress."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, state):
            s = self.settings
            num_chunks = state.get("num_chunks")
            state.set("output_chunks", [])
            state.set("previous_output", None)
            for chunk_id in range(num_chunks):
                if chunk_id > 0:
                    components.transformer._reset_stateful_cache()
                state.set("chunk_id", chunk_id)
                state.set("generator", torch.Generator(s.generator_device).manual_seed(s.seed + chunk_id))
                if s.on_chunk is not None:
                    s.on_chunk(chunk_id, num_chunks)
                for _, block in self.sub_blocks.items():
                    components, state = block(components, state)
            return components, state

    class Denoiser(Cosmos3TransferLoopDenoiser):
        """Nested control/text guidance with the framework's gating: strict intervals, guidance iff ``!= 1``."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            s, timestep = self.settings, float(t.item())

            def active(interval):
                return interval is None or (interval[0] < timestep < interval[1])

            g = s.guidance if active(s.guidance_interval) else 1.0
            cg = s.control_guidance if active(s.control_guidance_interval) else 1.0
            fields = block_state.denoiser_input_fields
            kwargs = dict(step=i, sigma=float(components.scheduler.sigmas[i]),
                          num_inference_steps=components.scheduler.num_inference_steps)
            v_full = self._forward(components, fields["cond_full_static"], block_state.vision_tokens_full,
                                   block_state.vision_timesteps, "cond", **kwargs).float()
            passes, v_c = 1, v_full
            if cg != 1.0:
                v_nc = self._forward(components, fields["cond_no_control_static"], block_state.vision_tokens_target,
                                     block_state.vision_timesteps, "cond_no_control", **kwargs).float()
                v_c, passes = v_nc + cg * (v_full - v_nc), passes + 1
            velocity = v_c
            if g != 1.0:
                v_u = self._forward(components, fields["uncond_full_static"], block_state.vision_tokens_full,
                                    block_state.vision_timesteps, "uncond", **kwargs).float()
                velocity, passes = v_u + g * (v_c - v_u), passes + 1
                if s.normalize_cfg:
                    velocity = velocity * (v_c.norm() / (velocity.norm() + 1e-8)).clamp(0.0, 1.0)
            s.passes.append(passes)
            block_state.velocity = velocity * block_state.velocity_mask
            return components, block_state

    class SchedulerStep(Cosmos3TransferLoopSchedulerStep):
        """The stock step and clean-frame re-pin, then a progress report."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            components, block_state = super().__call__(components, block_state, i, t)
            if self.settings.on_step is not None:
                self.settings.on_step(i + 1, len(components.scheduler.timesteps))
            return components, block_state

    return {"ChunkLoop": ChunkLoop, "Denoiser": Denoiser, "SchedulerStep": SchedulerStep}


def build_transfer_blocks(settings: CallSettings):
    """``Cosmos3OmniBlocks`` with the chunk loop, denoiser and scheduler step replaced, bound to one call."""
    from diffusers.modular_pipelines import Cosmos3OmniBlocks

    classes = _block_classes()
    blocks = Cosmos3OmniBlocks()
    transfer = blocks.sub_blocks["denoise"].sub_blocks["transfer"]
    chunk, denoiser, step = classes["ChunkLoop"](), classes["Denoiser"](), classes["SchedulerStep"]()
    for block in (chunk, denoiser, step):
        block.settings = settings
    loop = chunk.sub_blocks["denoise"]
    loop.sub_blocks["denoiser"] = denoiser
    loop.sub_blocks["update_transfer"] = step
    loop._progress_bar_config = {"disable": True}
    transfer.sub_blocks["chunk_denoise"] = chunk
    return blocks


def transfer_pipeline(base: Any, settings: CallSettings, shift: float):
    """A modular transfer pipeline for one call, sharing ``base``'s weights, with the native schedule at ``shift``."""
    from ..schedules import native_flow_scheduler

    pipe = build_transfer_blocks(settings).init_pipeline()
    pipe.update_components(transformer=base.transformer, vae=base.vae, text_tokenizer=base.text_tokenizer,
                           sound_tokenizer=base.sound_tokenizer,
                           scheduler=native_flow_scheduler(base.scheduler.config, shift))
    pipe.disable_safety_checker()
    return pipe


__all__ = ["CallSettings", "WeightedMultiControlAttnProcessor", "build_transfer_blocks", "installed_processor",
           "transfer_pipeline"]
