"""Video transfer on diffusers: the framework's algorithm on the modular ``Cosmos3OmniBlocks`` (``control_videos=``).

Used as it is, diffusers 0.42.1's modular transfer differs from the Cosmos Framework in ways that change the
picture (reference ``cosmos3-transfer.md`` §12); each is closed here or in the modules this one calls:

=====  =====================================================  ==============================================
#      stock modular pipeline                                 here
=====  =====================================================  ==============================================
a      ``set_timesteps(N)``: sigmas start at 1                the native sigmas ``linspace(0.999, 0, N+1)[:-1]``
                                                              with the sample's ``shift`` (``schedules``)
b      prompt tokenised verbatim                              JSON metadata / templates, negative metadata mode,
                                                              control directive (``plan.format_transfer_prompt``)
c      all controls in one joint attention, no weights        weighted attention for N > 1 (``pipeline``)
d      controls *stretched* to ``height x width``             controls fitted (cover + centre-crop) first
e      chunk = whole video, ``num_frames`` caps, fps 24       chunk, fps and size always passed; the length is
                                                              the first control's (as the framework)
f      one generator for all chunks                           chunk ``c`` reseeded with ``seed + c``
g      intervals inclusive, text CFG iff ``g > 1``            strict ``lo < t < hi``, text CFG iff ``g != 1``,
                                                              ``normalize_cfg``
h      safety checker required                                the sample's ``guardrails`` (decided once, in
                                                              ``specs.resolve``)
=====  =====================================================  ==============================================
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import media
from ..backends.diffusers import GUARDRAIL_HELP, DiffusersBackend, guardrail_errors
from ..errors import BackendUnavailableError
from ..progress import progress_bar
from ..result import Generation
from ..specs.resolve import ResolvedSample
from .controls import mirror_pad
from .pipeline import CallSettings, WeightedMultiControlAttnProcessor, installed_processor, transfer_pipeline
from .prepare import PreparedTransfer, prepare_transfer

ProgressCallback = Callable[[int, int], None]


@dataclass(repr=False)
class TransferGeneration(Generation):
    """A transfer result: the output video plus the control videos (and RGB input) it was conditioned on."""

    controls: dict[str, np.ndarray] = field(default_factory=dict)
    input_frames: np.ndarray | None = None


def run_transfer(spec: ResolvedSample | PreparedTransfer, *, backend: Any = None,
                 progress: bool | ProgressCallback = True) -> TransferGeneration:
    """Run a resolved transfer sample on diffusers; returns uint8 frames with the controls they followed.

    Args:
        spec: a :class:`ResolvedSample` (local paths) or an already :class:`PreparedTransfer`.
        backend: the :class:`~cosmos_helpers.backends.diffusers.DiffusersBackend` whose shared weights to use
            (device, dtype); default ``DiffusersBackend()``. The model is the sample's (``spec.model``), and so is
            whether the Cosmos guardrails run (``spec.guardrails``; they need ``cosmos_guardrail``).
        progress: a tqdm bar (``True``), nothing (``False``), or ``callback(step, total)`` over all chunks.
    """
    import torch

    started = time.perf_counter()
    prepared = spec if isinstance(spec, PreparedTransfer) else prepare_transfer(spec)
    r = prepared.spec
    backend = backend or DiffusersBackend(progress=False)
    bar, settings, marks = _progress(prepared, progress)
    processor = None
    if len(prepared.controls) > 1:
        processor = WeightedMultiControlAttnProcessor(prepared.weights, prepared.tokens_per_item())
    load_start = time.perf_counter()
    try:
        with backend.borrowed(r.model) as base:
            load_s = time.perf_counter() - load_start
            pipe = transfer_pipeline(base, settings, r.shift)
            if r.guardrails:
                try:
                    pipe.enable_safety_checker()
                except Exception as exc:  # cosmos_guardrail missing
                    raise BackendUnavailableError(GUARDRAIL_HELP) from exc
            call_start = time.perf_counter()
            with guardrail_errors(), torch.inference_mode(), installed_processor(pipe.transformer, processor):
                video = pipe(**_call_kwargs(prepared))
            device = str(pipe.transformer.device)
    finally:
        if bar is not None:
            bar.close()
    end = time.perf_counter()
    frames = media.to_uint8(video.permute(0, 2, 3, 1).float().cpu().numpy())[: prepared.total_frames]
    timings = {"load_s": load_s, "total_s": end - started, "pipeline_s": end - call_start}
    if marks:
        timings.update(denoise_s=marks[-1] - call_start, decode_s=end - marks[-1])
    return _result(prepared, frames, timings, settings, device)


def _progress(prepared: PreparedTransfer, progress: bool | ProgressCallback):
    total = prepared.num_steps * len(prepared.chunks)
    bar = progress_bar(total, "transfer", "step", enabled=progress is True)
    marks: list[float] = []

    def on_step(step: int, steps: int) -> None:
        marks.append(time.perf_counter())
        if bar is not None:
            bar.update(1)
        if callable(progress):
            progress(len(marks), total)

    def on_chunk(chunk_id: int, num_chunks: int) -> None:
        if bar is not None:
            bar.set_description(f"transfer chunk {chunk_id + 1}/{num_chunks}")

    r = prepared.spec
    settings = CallSettings(seed=prepared.seed, guidance=r.guidance, control_guidance=r.control_guidance,
                            guidance_interval=r.guidance_interval,
                            control_guidance_interval=r.control_guidance_interval, normalize_cfg=r.normalize_cfg,
                            on_step=on_step, on_chunk=on_chunk)
    return bar, settings, marks


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
        num_inference_steps=prepared.num_steps, fps=float(prepared.fps), guidance_scale=r.guidance,
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
        "workflow": "transfer", "hints": list(prepared.hint_kinds), "weights": list(prepared.weights),
        "tier": r.resolution, "chunks": [list(c) for c in prepared.chunks], "chunk_frames": prepared.chunk_frames,
        "num_steps": prepared.num_steps, "guidance": r.guidance, "control_guidance": r.control_guidance,
        "shift": r.shift, "prompt": prepared.prompt, "negative_prompt": prepared.negative,
        "transformer_passes_per_step": sorted(set(settings.passes)), "scheduler": "NativeFlowUniPCScheduler",
        "device": device, "notes": prepared.notes}
    return TransferGeneration(
        frames=output, fps=prepared.fps, seed=prepared.seed, backend="diffusers", model=r.model, timings=timings,
        provenance=provenance, controls=controls,
        input_frames=None if prepared.rgb is None else prepared.rgb[:total])


__all__ = ["TransferGeneration", "run_transfer"]
