"""Video transfer on diffusers: the framework's algorithm on the modular ``Cosmos3OmniBlocks`` (``control_videos=``).

Used as it is, diffusers 0.42.1's modular transfer differs from the Cosmos Framework in ways that change the picture
(reference ``cosmos3-transfer.md`` §12); each is closed here or in the modules this one calls (stock -> here):

a. ``set_timesteps(N)``: sigmas from 1 -> the native sigmas ``linspace(0.999, 0, N+1)[:-1]`` at ``shift`` (schedules)
b. the prompt tokenised verbatim -> JSON metadata / templates, negative metadata mode, control directive
   (``specs.transfer``)
c. all controls in one joint attention, no weights -> :class:`WeightedMultiControlAttnProcessor` for N > 1
d. controls *stretched* to ``height x width`` -> fitted (cover + centre-crop) first
e. chunk = whole video, ``num_frames`` caps, fps 24 -> chunk, fps and size always passed; the length is the first
   control's (as the framework)
f. one generator for all chunks -> chunk ``c`` reseeded with ``seed + c`` (the chunk loop)
g. intervals inclusive, text CFG iff ``g > 1`` -> strict ``lo < t < hi``, text CFG iff ``g != 1``, ``normalize_cfg``
   (the denoiser)
h. safety checker required -> the sample's ``guardrails`` (decided once, in ``specs.resolve``)

The replaced blocks read one call's :class:`CallSettings`. Blocks, pipeline and scheduler are made per call (a few
milliseconds) on the backend's shared weights; the one shared thing a call changes, the attention processors, is
changed only under the pipeline's lock (``DiffusersBackend.borrowed``) and restored before it is released.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator

import numpy as np

from ... import media
from ...errors import BackendUnavailableError
from ...result import Generation
from ...schedules import native_flow_scheduler
from ...specs.resolve import ResolvedSample
from ...specs.transfer import PreparedTransfer, mirror_pad, prepare_transfer
from ...step_cache import StepCache, check_for_backend
from ..base import ProgressCallback
from .runner import GUARDRAIL_HELP, StepClock, call_cache, guardrail_errors


@dataclass(repr=False)
class TransferGeneration(Generation):
    """A transfer result: the output video plus the control videos (and RGB input) it was conditioned on."""

    controls: dict[str, np.ndarray] = field(default_factory=dict)
    input_frames: np.ndarray | None = None


def run_transfer(spec: ResolvedSample | PreparedTransfer, *, backend: Any,
                 progress: bool | ProgressCallback = True, step_cache: StepCache = None) -> TransferGeneration:
    """A resolved (or prepared) transfer sample on ``backend``'s shared weights: uint8 frames with the controls they
    followed. The model and the guardrails are the sample's; ``progress`` a bar (``True``) or ``callback(step,
    total)`` over all chunks; ``step_cache`` diffusers' SeaCache for this call (a cache context per pass, reset per
    chunk), recorded with the passes computed."""
    import torch

    started = time.perf_counter()
    prepared = spec if isinstance(spec, PreparedTransfer) else prepare_transfer(spec)
    r = prepared.spec
    clock = StepClock(r.num_steps * len(prepared.chunks), "transfer", bar=progress is True,
                      callback=progress if callable(progress) else None, started=started)
    settings = CallSettings(r, prepared.seed, on_step=lambda *_: clock.step(),
                            on_chunk=lambda chunk, n: clock.bar.set_description(f"transfer chunk {chunk + 1}/{n}"))
    processor = (WeightedMultiControlAttnProcessor(r.normalized_weights, _tokens_per_item(prepared))
                 if len(prepared.controls) > 1 else None)
    check_for_backend(step_cache, "diffusers")
    load_start = time.perf_counter()
    with clock, backend.borrowed(r.model) as base:
        clock.load_s = time.perf_counter() - load_start
        pipe = transfer_pipeline(base, settings, r.shift)
        if r.guardrails:
            try:
                pipe.enable_safety_checker()
            except Exception as exc:  # cosmos_guardrail missing
                raise BackendUnavailableError(GUARDRAIL_HELP) from exc
        clock.call_start = time.perf_counter()
        with guardrail_errors(), torch.inference_mode(), installed_processor(pipe.transformer, processor), \
                call_cache(pipe.transformer, step_cache) as cache:
            video = pipe(**_call_kwargs(prepared))
        device = str(pipe.transformer.device)
    frames = media.to_uint8(video.permute(0, 2, 3, 1).float().cpu().numpy())[: prepared.total_frames]
    generation = _result(prepared, frames, clock.timings, settings, device)
    generation.provenance.update(cache.provenance)
    return generation


def _tokens_per_item(prepared: PreparedTransfer, patch: int = 2, spatial: int = 16, temporal: int = 4) -> int:
    """Vision tokens of one item (control or target) of a chunk."""
    latent_t = (prepared.chunk_frames - 1) // temporal + 1
    return latent_t * math.ceil(prepared.height / spatial / patch) * math.ceil(prepared.width / spatial / patch)


def _call_kwargs(prepared: PreparedTransfer) -> dict[str, Any]:
    """The modular pipeline's inputs: size, chunking and fps always given (none of its defaults applies)."""
    import torch
    from PIL import Image

    def pil(frames: np.ndarray) -> list:
        return [Image.fromarray(np.ascontiguousarray(frame)) for frame in frames]

    r = prepared.spec
    kwargs: dict[str, Any] = dict(
        prompt=prepared.prompt, negative_prompt=prepared.negative or "",
        control_videos={kind: pil(frames) for kind, frames in prepared.controls.items()},
        height=prepared.height, width=prepared.width, num_frames=prepared.total_frames,
        num_video_frames_per_chunk=prepared.chunk_frames, num_conditional_frames=int(r.num_conditional_frames or 0),
        num_inference_steps=r.num_steps, fps=float(prepared.fps), guidance_scale=r.guidance,
        control_guidance=r.control_guidance, use_system_prompt=True,
        generator=torch.Generator("cpu").manual_seed(prepared.seed), output_type="pt", output="videos")
    if (r.num_first_chunk_conditional_frames or 0) > 0 and prepared.rgb is not None:
        kwargs["video"] = pil(prepared.rgb)
        kwargs["num_first_chunk_conditional_frames"] = int(r.num_first_chunk_conditional_frames)
    return kwargs


def _result(prepared: PreparedTransfer, frames: np.ndarray, timings: dict[str, float], settings: CallSettings,
            device: str) -> TransferGeneration:
    r, total = prepared.spec, prepared.total_frames
    controls = {kind: mirror_pad(c, total)[:total] for kind, c in prepared.controls.items()}
    output = frames
    if r.show_control_condition:
        output = np.concatenate([*controls.values(), output], axis=2)
    if r.show_input and prepared.rgb is not None:
        output = np.concatenate([mirror_pad(prepared.rgb, total)[:total], output], axis=2)
    provenance = {
        "workflow": "transfer", "hints": list(prepared.controls), "weights": list(r.normalized_weights),
        "tier": r.resolution, "chunks": [list(c) for c in prepared.chunks], "chunk_frames": prepared.chunk_frames,
        "num_steps": r.num_steps, "guidance": r.guidance, "control_guidance": r.control_guidance,
        "shift": r.shift, "prompt": prepared.prompt, "negative_prompt": prepared.negative,
        "transformer_passes_per_step": sorted(set(settings.passes)), "scheduler": "NativeFlowUniPCScheduler",
        "device": device, "notes": prepared.notes}
    return TransferGeneration(
        frames=output, fps=prepared.fps, seed=prepared.seed, backend="diffusers", model=r.model, timings=timings,
        provenance=provenance, controls=controls,
        input_frames=None if prepared.rgb is None else prepared.rgb[:total])


class WeightedMultiControlAttnProcessor:
    """Weighted multi-control attention (``N > 1`` controls) on a pass ``[ctrl_1 | ... | ctrl_N | target]``:
    per control ``i`` one maskless attention over ``[text | ctrl_i | target]``, queried by ``ctrl_i`` (kept) and the
    target, whose output is ``sum_i w_i * out_i``; controls never attend to each other. Any other sequence (the
    no-control pass) goes to the stock processor."""

    def __init__(self, weights: tuple[float, ...] | list[float], tokens_per_item: int) -> None:
        from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

        self.weights = tuple(float(w) for w in weights)
        self.tokens_per_item = int(tokens_per_item)
        self.fallback = Cosmos3AttnProcessor()
        self._attention_backend = getattr(self.fallback, "_attention_backend", None)
        self._parallel_config = getattr(self.fallback, "_parallel_config", None)

    def __call__(self, attn, und_seq, gen_seq, rotary_emb):
        import torch
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        from ...models.cosmos3_attention import project_qkv

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
        control_outs, target_outs = [], []
        for i, weight in enumerate(self.weights):
            ctrl = slice(i * length, (i + 1) * length)
            out = sdpa(torch.cat([q_gen[ctrl], q_gen[target]]),
                       torch.cat([k_und_for_gen, k_gen[ctrl], k_gen[target]]),
                       torch.cat([v_und, v_gen[ctrl], v_gen[target]]), False)
            control_outs.append(out[:length])
            target_outs.append(out[length:] * weight)
        full_out = torch.cat([*control_outs, sum(target_outs)], dim=0)
        return attn.to_out(causal_out), attn.to_add_out(full_out)


@contextmanager
def installed_processor(transformer, processor) -> Iterator[None]:
    """``processor`` on every layer for the block (``None``: leave them)."""
    if processor is None:
        yield
        return
    saved = dict(transformer.attn_processors)
    transformer.set_attn_processor(processor)
    try:
        yield
    finally:
        transformer.set_attn_processor(saved)


@dataclass
class CallSettings:
    """One call's sample (its guidances, their intervals, ``normalize_cfg``) and seed, read by the replaced blocks;
    ``passes`` records transformer passes per step."""

    spec: ResolvedSample
    seed: int
    on_step: Callable[[int, int], None] | None = None
    on_chunk: Callable[[int, int], None] | None = None
    passes: list[int] = field(default_factory=list)

    def __deepcopy__(self, memo: dict) -> CallSettings:
        """Blocks are deep-copied into their pipeline; the call's settings (and what they record) stay one object."""
        return self


@lru_cache(maxsize=None)
def _loop_blocks() -> tuple[type, type]:
    """The chunk loop and scheduler step that replace the stock ones, reading ``settings``."""
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import Cosmos3TransferLoopSchedulerStep
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

    class SchedulerStep(Cosmos3TransferLoopSchedulerStep):
        """The stock step and clean-frame re-pin, then a progress report."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            components, block_state = super().__call__(components, block_state, i, t)
            if self.settings.on_step is not None:
                self.settings.on_step(i + 1, len(components.scheduler.timesteps))
            return components, block_state

    return ChunkLoop, SchedulerStep


@lru_cache(maxsize=None)
def _denoiser() -> type:
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import Cosmos3TransferLoopDenoiser

    class Denoiser(Cosmos3TransferLoopDenoiser):
        """Nested control/text guidance with the framework's gating: strict intervals, guidance iff ``!= 1``."""

        settings: CallSettings

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            s, r, timestep = self.settings, self.settings.spec, float(t.item())

            def active(interval):
                return interval is None or (interval[0] < timestep < interval[1])

            g = r.guidance if active(r.guidance_interval) else 1.0
            cg = r.control_guidance if active(r.control_guidance_interval) else 1.0
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
                if r.normalize_cfg:
                    velocity = velocity * (v_c.norm() / (velocity.norm() + 1e-8)).clamp(0.0, 1.0)
            s.passes.append(passes)
            block_state.velocity = velocity * block_state.velocity_mask
            return components, block_state

    return Denoiser


def transfer_pipeline(base: Any, settings: CallSettings, shift: float):
    """``Cosmos3OmniBlocks`` for one call on ``base``'s weights, the native schedule at ``shift``, with the chunk
    loop, denoiser and scheduler step replaced and bound to ``settings``."""
    from diffusers.modular_pipelines import Cosmos3OmniBlocks

    blocks = Cosmos3OmniBlocks()
    chunk, step = (cls() for cls in _loop_blocks())
    denoiser = _denoiser()()
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
