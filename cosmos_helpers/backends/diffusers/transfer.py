"""Video transfer on diffusers: the framework's algorithm on the modular ``Cosmos3OmniBlocks`` (``control_videos=``).

Used as it is, diffusers 0.42.1's modular transfer differs from the Cosmos Framework in ways that change the
picture (reference ``cosmos3-transfer.md`` §12); each is closed here or in the modules this one calls:

=====  =====================================================  ==============================================
#      stock modular pipeline                                 here
=====  =====================================================  ==============================================
a      ``set_timesteps(N)``: sigmas start at 1                the native sigmas ``linspace(0.999, 0, N+1)[:-1]``
                                                              with the sample's ``shift`` (``schedules``)
b      prompt tokenised verbatim                              JSON metadata / templates, negative metadata mode,
                                                              control directive (``specs.transfer``)
c      all controls in one joint attention, no weights        weighted attention for N > 1
d      controls *stretched* to ``height x width``             controls fitted (cover + centre-crop) first
e      chunk = whole video, ``num_frames`` caps, fps 24       chunk, fps and size always passed; the length is
                                                              the first control's (as the framework)
f      one generator for all chunks                           chunk ``c`` reseeded with ``seed + c``
g      intervals inclusive, text CFG iff ``g > 1``            strict ``lo < t < hi``, text CFG iff ``g != 1``,
                                                              ``normalize_cfg``
h      safety checker required                                the sample's ``guardrails`` (decided once, in
                                                              ``specs.resolve``)
=====  =====================================================  ==============================================

(c) is :class:`WeightedMultiControlAttnProcessor`; (f) and (g) are the chunk loop and denoiser of
:mod:`.transfer_blocks`. The blocks, the pipeline object and its scheduler are made per call (a few milliseconds);
only the weights are shared, borrowed from the backend's pipeline for the model. The one shared thing a call changes,
the transformer's attention processors, is changed only under that pipeline's lock (``DiffusersBackend.borrowed``)
and restored before it is released. Importing this module does not import diffusers.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ... import media
from ...errors import BackendUnavailableError
from ...result import Generation
from ...specs.resolve import ResolvedSample
from ...specs.transfer import PreparedTransfer, mirror_pad, prepare_transfer
from ...step_cache import StepCache, check_for_backend
from .cache import call_cache
from .clock import StepClock
from .guardrails import GUARDRAIL_HELP
from .runner import guardrail_errors
from .transfer_blocks import CallSettings, transfer_pipeline

ProgressCallback = Callable[[int, int], None]


@dataclass(repr=False)
class TransferGeneration(Generation):
    """A transfer result: the output video plus the control videos (and RGB input) it was conditioned on."""

    controls: dict[str, np.ndarray] = field(default_factory=dict)
    input_frames: np.ndarray | None = None


def run_transfer(spec: ResolvedSample | PreparedTransfer, *, backend: Any,
                 progress: bool | ProgressCallback = True, step_cache: StepCache = None) -> TransferGeneration:
    """Run a resolved transfer sample on diffusers; returns uint8 frames with the controls they followed.

    Args:
        spec: a :class:`ResolvedSample` (local paths) or an already :class:`PreparedTransfer`.
        backend: the :class:`~cosmos_helpers.backends.diffusers.DiffusersBackend` whose shared weights to use
            (device, dtype; required: its loaded pipelines are what a transfer reuses). The model is the sample's
            (``spec.model``), and so is whether the Cosmos guardrails run (``spec.guardrails``; they need
            ``cosmos_guardrail``).
        progress: a tqdm bar (``True``), nothing (``False``), or ``callback(step, total)`` over all chunks.
        step_cache: ``None`` (diffusers' default: off), ``"off"`` or a :class:`~cosmos_helpers.SeaCache`: diffusers'
            SeaCache on the transformer for this call (the modular denoiser enters a cache context per pass and
            resets it per chunk); the manifest records it with the passes computed.
    """
    import torch

    started = time.perf_counter()
    prepared = spec if isinstance(spec, PreparedTransfer) else prepare_transfer(spec)
    r = prepared.spec
    clock = StepClock(r.num_steps * len(prepared.chunks), "transfer", bar=progress is True,
                      callback=progress if callable(progress) else None, started=started)

    def on_chunk(chunk_id: int, num_chunks: int) -> None:
        clock.bar.set_description(f"transfer chunk {chunk_id + 1}/{num_chunks}")

    settings = CallSettings(seed=prepared.seed, guidance=r.guidance, control_guidance=r.control_guidance,
                            guidance_interval=r.guidance_interval,
                            control_guidance_interval=r.control_guidance_interval, normalize_cfg=r.normalize_cfg,
                            on_step=lambda *_: clock.step(), on_chunk=on_chunk)
    processor = None
    if len(prepared.controls) > 1:
        processor = WeightedMultiControlAttnProcessor(r.normalized_weights, _tokens_per_item(prepared))
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
    """Vision tokens of one item (control or target) of a chunk: ``latent_t * ceil(H/32) * ceil(W/32)``."""
    latent_t = (prepared.chunk_frames - 1) // temporal + 1
    return latent_t * math.ceil(prepared.height / spatial / patch) * math.ceil(prepared.width / spatial / patch)


def _call_kwargs(prepared: PreparedTransfer) -> dict[str, Any]:
    """The modular pipeline's inputs: size, chunking and fps always given, so none of its own defaults apply."""
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
    """Weighted multi-control attention, for ``N > 1`` controls.

    The generation sequence of a full pass is ``[ctrl_1 | ... | ctrl_N | target]``, ``L`` tokens each. For every
    control ``i`` one maskless attention runs with keys/values ``[text | ctrl_i | target]``, queried by ``ctrl_i``
    (its output is kept) and by the target; the target's output is ``sum_i w_i * out_i`` (normalised weights,
    before the output projection). Controls never attend to each other. Any other sequence (the no-control pass,
    length ``L``) goes to the stock processor. Text keys use ``k_und_for_gen`` exactly as the stock processor.
    """

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


@contextmanager
def installed_processor(transformer, processor) -> Iterator[None]:
    """Install an attention processor on every layer (``None``: leave them), restore the previous ones after."""
    if processor is None:
        yield
        return
    saved = dict(transformer.attn_processors)
    transformer.set_attn_processor(processor)
    try:
        yield
    finally:
        transformer.set_attn_processor(saved)
