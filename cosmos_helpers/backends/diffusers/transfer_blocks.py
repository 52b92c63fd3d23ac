"""The three modular blocks a diffusers transfer call replaces (the chunk loop, the denoiser and the scheduler step)
and the per-call pipeline built from them. Each subclass reads one call's :class:`CallSettings`. The classes are
built on first use, so importing this module does not import diffusers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from ...schedules import native_flow_scheduler


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
    passes: list[int] = field(default_factory=list)

    def __deepcopy__(self, memo: dict) -> CallSettings:
        """Blocks are deep-copied into their pipeline; the call's settings (and what they record) stay one object."""
        return self


@lru_cache(maxsize=None)
def _chunk_loop() -> type:
    import torch
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
                state.set("generator", torch.Generator("cpu").manual_seed(s.seed + chunk_id))
                if s.on_chunk is not None:
                    s.on_chunk(chunk_id, num_chunks)
                for _, block in self.sub_blocks.items():
                    components, state = block(components, state)
            return components, state

    return ChunkLoop


@lru_cache(maxsize=None)
def _denoiser() -> type:
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import Cosmos3TransferLoopDenoiser

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

    return Denoiser


@lru_cache(maxsize=None)
def _scheduler_step() -> type:
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import Cosmos3TransferLoopSchedulerStep

    class SchedulerStep(Cosmos3TransferLoopSchedulerStep):
        """The stock step and clean-frame re-pin, then a progress report."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            components, block_state = super().__call__(components, block_state, i, t)
            if self.settings.on_step is not None:
                self.settings.on_step(i + 1, len(components.scheduler.timesteps))
            return components, block_state

    return SchedulerStep


def transfer_pipeline(base: Any, settings: CallSettings, shift: float):
    """A modular transfer pipeline for one call, sharing ``base``'s weights, with the native schedule at ``shift``:
    ``Cosmos3OmniBlocks`` with the chunk loop, denoiser and scheduler step replaced, bound to ``settings``."""
    from diffusers.modular_pipelines import Cosmos3OmniBlocks

    blocks = Cosmos3OmniBlocks()
    chunk, denoiser, step = _chunk_loop()(), _denoiser()(), _scheduler_step()()
    for block in (chunk, denoiser, step):
        block.settings = settings
    loop = chunk.sub_blocks["denoise"]
    loop.sub_blocks["denoiser"] = denoiser
    loop.sub_blocks["update_transfer"] = step
    loop._progress_bar_config = {"disable": True}
    blocks.sub_blocks["denoise"].sub_blocks["transfer"].sub_blocks["chunk_denoise"] = chunk
    pipe = blocks.init_pipeline()
    pipe.update_components(transformer=base.transformer, vae=base.vae, text_tokenizer=base.text_tokenizer,
                           sound_tokenizer=base.sound_tokenizer,
                           scheduler=native_flow_scheduler(base.scheduler.config, shift))
    pipe.disable_safety_checker()
    return pipe
