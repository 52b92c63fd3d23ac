"""Video transfer on diffusers: the framework's algorithm on the modular ``Cosmos3OmniBlocks`` (``control_videos=``).

diffusers 0.42.1 ships transfer in its modular pipeline. Used as it is, it differs from the Cosmos Framework in
ways that change the picture (reference ``cosmos3-transfer.md`` §12); each is closed here:

=====  =====================================================  ==============================================
#      stock modular pipeline                                 here
=====  =====================================================  ==============================================
a      ``set_timesteps(N)``: sigmas start at 1                :class:`NativeFlowUniPCScheduler` defaults to the
                                                              native sigmas ``linspace(0.999, 0, N+1)[:-1]``
                                                              with the spec's ``shift``
b      prompt tokenised verbatim                              :func:`format_transfer_prompt` (JSON metadata /
                                                              templates, negative metadata mode, directive)
c      all controls in one joint attention, no weights        :class:`WeightedMultiControlAttnProcessor` for
                                                              N > 1, installed for the call, then restored
d      controls *stretched* to ``height x width``             controls resized + centre-cropped to the bucket
                                                              first (the processor's resize is then a no-op)
e      chunk = whole video, ``num_frames`` caps, fps 24       chunk, fps, size always passed; length = first
                                                              control (as the framework)
f      one generator for all chunks                           chunk ``c`` reseeded with ``seed + c``
g      intervals inclusive, text CFG iff ``g > 1``            strict ``lo < t < hi``, text CFG iff ``g != 1``,
                                                              ``normalize_cfg`` supported
h      safety checker required                                off unless ``guardrails=True``
=====  =====================================================  ==============================================

The loop itself (per-chunk VAE encode, ``[ctrl_1 .. ctrl_N | target]`` packing with shared temporal mRoPE, the
three guidance passes, re-pinning of clean frames, decode and stitch) is diffusers' own; three of its blocks are
replaced by thin subclasses (chunk loop, denoiser, scheduler step) that add the behaviour above.

Entry points: :func:`prepare_transfer` (geometry, controls, prompts; no model) and :func:`run_transfer`
(returns a :class:`TransferGeneration`, a :class:`~cosmos_helpers.result.Generation` that also carries the
control videos it used, for previews).
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cosmos_helpers import media
from cosmos_helpers.errors import BackendUnavailableError, ValidationError
from cosmos_helpers.presets import TIERS, VIDEO_SIZES, get_profile, normalize_tier
from cosmos_helpers.result import Generation
from cosmos_helpers.transfer.controls import (
    bucket_for,
    compute_control,
    fit_to_bucket,
    load_control,
    mirror_pad,
    read_video,
    write_video,
)
from cosmos_helpers.transfer.spec import (
    ResolvedSpec,
    TransferSpec,
    check_control_consistency,
    chunk_length,
    format_transfer_prompt,
    load_spec,
    plan_chunks,
)

ProgressCallback = Callable[[int, int], None]
NATIVE_SIGMA_MAX_OFFSET = 1.0  # sigma_max = 1 - 1/num_train_timesteps (0.999), as the framework's flow UniPC
FRAMEWORK_SEED_RANGE = (0, 10000)


# ---------------------------------------------------------------------------------------------- preparation


@dataclass
class PreparedTransfer:
    """Everything a transfer run needs, resolved from a spec without loading a model.

    ``controls`` maps hint -> uint8 ``(T_i, H, W, 3)`` fitted to the bucket (not yet padded); ``rgb`` is the fitted
    RGB input (or ``None``); ``prompt``/``negative`` are the exact texts that are tokenised.
    """

    spec: ResolvedSpec
    source: TransferSpec
    width: int
    height: int
    fps: float
    total_frames: int
    chunk_frames: int
    chunks: list[tuple[int, int]]
    controls: dict[str, np.ndarray]
    rgb: np.ndarray | None
    prompt: str
    negative: str | None
    seed: int
    num_steps: int
    tier: str
    weights: tuple[float, ...]
    notes: list[str] = field(default_factory=list)

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        return tuple(self.controls)

    def tokens_per_item(self, patch: int = 2, spatial: int = 16, temporal: int = 4) -> int:
        """Vision tokens of one item (control or target) of a chunk: ``latent_t * ceil(H/32) * ceil(W/32)``."""
        latent_t = (self.chunk_frames - 1) // temporal + 1
        return latent_t * math.ceil(self.height / spatial / patch) * math.ceil(self.width / spatial / patch)

    def summary(self) -> str:
        hints = ", ".join(f"{k} ({w:.2f})" for k, w in zip(self.hint_kinds, self.weights))
        return (
            f"transfer {self.width}x{self.height}, {self.total_frames} frames @ {self.fps:g} fps in {len(self.chunks)} "
            f"chunk(s) of {self.chunk_frames}, hints {hints}, {self.num_steps} steps, guidance {self.spec.guidance:g}, "
            f"control_guidance {self.spec.control_guidance:g}, shift {self.spec.shift:g}, seed {self.seed}"
        )


def _coerce_spec(spec: TransferSpec | str | os.PathLike[str] | dict) -> TransferSpec:
    if isinstance(spec, TransferSpec):
        return spec
    if isinstance(spec, dict):
        return TransferSpec.from_dict(spec)
    return load_spec(spec, validate=False)


def profile_overrides(profile: str | None, resolution: str | None, num_steps: int | None
                      ) -> tuple[str | None, int | None, int | None]:
    """``(resolution, num_steps, step_cap)`` for a profile.

    ``tiny`` runs on CPU: its tier (128) replaces the spec's resolution and the spec's ``num_steps`` is capped at
    the profile's few steps; explicit ``resolution`` / ``num_steps`` always win. Other profiles keep the spec.
    """
    if profile is None:
        return resolution, num_steps, None
    prof = get_profile(profile)
    if prof.name == "tiny":
        return resolution or prof.tier, num_steps, prof.num_inference_steps
    return resolution, num_steps, None


def prepare_transfer(
    spec: TransferSpec | str | os.PathLike[str] | dict,
    *,
    resolution: str | int | None = None,
    num_steps: int | None = None,
    seed: int | None = None,
    step_cap: int | None = None,
    emit_warnings: bool = True,
) -> PreparedTransfer:
    """Resolve a transfer spec the way the framework does: geometry, control videos, length, fps, chunks, prompts.

    ``resolution`` overrides the spec's tier (this project's CPU tier ``"128"`` is accepted); ``num_steps`` and
    ``seed`` override the spec's. Warnings (control length/fps/aspect versus the spec) are returned in ``notes``
    and, with ``emit_warnings``, also issued.
    """
    source = _coerce_spec(spec)
    source.validate(tiers=TIERS)
    r = source.resolved()
    if not r.is_transfer:
        raise ValidationError("spec", "this spec has no control hint, so it is not a transfer spec.",
                              "add edge/blur/depth/seg/wsm, or run it with run_spec (audio_image2video) / generate.")
    tier = normalize_tier(resolution) if resolution is not None else r.resolution
    if tier not in VIDEO_SIZES:
        raise ValidationError("resolution", f"unknown tier {resolution!r}.", f"use one of {', '.join(TIERS)}.")
    notes: list[str] = []
    if r.share_vision_temporal_positions is False:
        notes.append("share_vision_temporal_positions=false is not reproduced on diffusers (positions are always "
                     "shared, as the model was trained); the framework documents drift with false.")
    if r.show_input and r.vision_path is None:
        notes.append("show_input needs vision_path; ignored.")

    rgb, rgb_fps = None, None
    if r.vision_path is not None:
        if "://" in r.vision_path:
            raise ValidationError("vision_path", "URLs are not fetched by the diffusers path.", "download the file first.")
        raw, rgb_fps = read_video(r.vision_path, max_frames=r.max_frames)
        width, height = VIDEO_SIZES[tier][r.aspect_ratio]
        rgb = fit_to_bucket(raw, width, height)
    controls: dict[str, np.ndarray] = {}
    control_fps: dict[str, float] = {}
    for hint in r.hints:
        if hint.control_path is not None and Path(hint.control_path).is_file():
            if not controls and rgb is None:
                probe, _ = read_video(hint.control_path, max_frames=1)
                width, height = bucket_for(probe, tier)  # framework: aspect auto-detected from the first control
            frames, fps_c = load_control(hint.control_path, width, height, max_frames=r.max_frames)
            if not controls:
                raw_first, _ = read_video(hint.control_path, max_frames=r.max_frames)
                notes += check_control_consistency(r, raw_first, fps_c, input_fps=rgb_fps, hint=hint.kind, emit=False)
        else:
            if rgb is None:  # validation guarantees vision_path for computed hints
                raise ValidationError(f"{hint.kind}.control_path", "nothing to compute the control from.",
                                      "set vision_path or control_path.")
            frames, fps_c = compute_control(hint.kind, rgb, hint.preset), rgb_fps
        controls[hint.kind] = frames
        control_fps[hint.kind] = float(fps_c or 0)
    first = next(iter(controls.values()))
    total = int(first.shape[0])
    fps = float(rgb_fps) if (r.vision_path is not None and rgb_fps) else float(r.fps)
    chunk = chunk_length(total, r.chunk_frames or 93)
    n_cond = int(r.num_conditional_frames or 0)
    chunks = plan_chunks(total, chunk, n_cond)
    for kind, frames in controls.items():
        if frames.shape[0] < total:
            notes.append(f"{kind} control has {frames.shape[0]} frames, fewer than the first control's {total}: "
                         "it is mirror-padded, as the framework does.")
    prompt, negative = format_transfer_prompt(r.prompt, r.negative_prompt, r, width, height, chunk, fps)
    if seed is None:
        seed = r.seed if r.seed is not None else random.randint(*FRAMEWORK_SEED_RANGE)
    if emit_warnings:
        for note in notes:
            warnings.warn(note, stacklevel=2)
    return PreparedTransfer(
        spec=r, source=source, width=width, height=height, fps=fps, total_frames=total, chunk_frames=chunk,
        chunks=chunks, controls=controls, rgb=rgb, prompt=prompt, negative=negative, seed=int(seed),
        num_steps=int(num_steps or (min(r.num_steps, step_cap) if step_cap else r.num_steps)), tier=tier, weights=r.normalized_weights, notes=notes,
    )


# ---------------------------------------------------------------------------------------------- result


@dataclass(repr=False)
class TransferGeneration(Generation):
    """A transfer result: the output video plus the control videos (and RGB input) it was conditioned on."""

    controls: dict[str, np.ndarray] = field(default_factory=dict)
    input_frames: np.ndarray | None = None
    prompt_text: str = ""

    def save_framework_layout(self, out_dir: str | os.PathLike[str], name: str | None = None, *,
                              quality: int = 10, overwrite: bool = False) -> Path:
        """Write ``<out>/<name>/vision.mp4`` and ``control_<hint>.mp4`` like the framework; returns vision.mp4."""
        folder = Path(out_dir) / (name or "transfer")
        folder.mkdir(parents=True, exist_ok=True)
        crf = _crf_for_quality(quality)
        target = folder / "vision.mp4"
        media.write_mp4(target, self.frames, self.fps, sound=self.sound, sample_rate=self.sample_rate, crf=crf,
                        overwrite=overwrite)
        for kind, frames in self.controls.items():
            write_video(folder / f"control_{kind}.mp4", frames, self.fps, crf=crf, overwrite=overwrite)
        return target


def _crf_for_quality(quality: int) -> int:
    """The framework's ``video_save_quality`` 0-10 as an x264 CRF (10 -> 18, each step down +3)."""
    return int(18 + 3 * (10 - max(0, min(10, int(quality)))))


# ---------------------------------------------------------------------------------------------- scheduler


def native_sigmas(num_steps: int, num_train_timesteps: int = 1000) -> np.ndarray:
    """The framework's native flow sigmas before the shift: ``linspace(1 - 1/1000, 0, S + 1)[:-1]``."""
    return np.linspace(NATIVE_SIGMA_MAX_OFFSET - 1.0 / num_train_timesteps, 0.0, num_steps + 1)[:-1]


_SCHEDULER_CLASS: Any = None


def native_flow_scheduler_class():
    """``UniPCMultistepScheduler`` whose ``set_timesteps(N)`` uses the native sigmas (fix a)."""
    global _SCHEDULER_CLASS
    if _SCHEDULER_CLASS is None:
        from diffusers import UniPCMultistepScheduler

        class NativeFlowUniPCScheduler(UniPCMultistepScheduler):
            """Flow UniPC with the Cosmos Framework's native schedule: ``set_timesteps(N)`` defaults ``sigmas``."""

            def set_timesteps(self, num_inference_steps=None, device=None, sigmas=None, mu=None):
                if sigmas is None and num_inference_steps is not None:
                    sigmas = native_sigmas(int(num_inference_steps), self.config.num_train_timesteps)
                return super().set_timesteps(num_inference_steps, device=device, sigmas=sigmas, mu=mu)

        _SCHEDULER_CLASS = NativeFlowUniPCScheduler
    return _SCHEDULER_CLASS


def native_flow_scheduler(base_config: Any, shift: float):
    """A fresh native-schedule flow UniPC (order 2, bh2, predict-x0, final sigma 0) with ``shift``."""
    from cosmos_helpers.backends.diffusers import configure_scheduler

    config = dict(base_config)
    config.update(solver_order=2, solver_type="bh2", predict_x0=True, lower_order_final=True,
                  final_sigmas_type="zero", num_train_timesteps=1000)
    return configure_scheduler(config, native_flow_scheduler_class(), shift)


# ---------------------------------------------------------------------------------------------- attention


class WeightedMultiControlAttnProcessor:
    """Weighted multi-control attention (fix c), for ``N > 1`` controls.

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

        from cosmos_helpers.models.cosmos3_attention import project_qkv

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


class _installed_processor:
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


# ---------------------------------------------------------------------------------------------- blocks


@dataclass
class _RunHooks:
    """Per-call settings the replaced blocks read from the pipeline (``pipe._cosmos_helpers_hooks``)."""

    seed: int | None = None
    generator_device: str = "cpu"
    guidance: float | None = None
    control_guidance: float | None = None
    guidance_interval: tuple[float, float] | None = None
    control_guidance_interval: tuple[float, float] | None = None
    normalize_cfg: bool = False
    on_step: Callable[[int, int], None] | None = None
    on_chunk: Callable[[int, int], None] | None = None
    passes: list[int] = field(default_factory=list)


_BLOCK_CLASSES: dict[str, Any] = {}


def _block_classes() -> dict[str, Any]:
    """Subclasses of three modular blocks (built lazily: importing this module must not import diffusers)."""
    if _BLOCK_CLASSES:
        return _BLOCK_CLASSES
    import torch
    from diffusers.modular_pipelines.cosmos.denoise import (
        Cosmos3TransferLoopDenoiser,
        Cosmos3TransferLoopSchedulerStep,
    )
    from diffusers.modular_pipelines.cosmos.modular_blocks_cosmos3 import Cosmos3TransferChunkDenoiseStep

    class ChunkLoop(Cosmos3TransferChunkDenoiseStep):
        """The stock chunk loop, reseeding chunk ``c`` with ``seed + c`` (fix f) and reporting chunk progress."""

        @torch.no_grad()
        def __call__(self, components, state):
            hooks = getattr(components, "_cosmos_helpers_hooks", None)
            num_chunks = state.get("num_chunks")
            state.set("output_chunks", [])
            state.set("previous_output", None)
            for chunk_id in range(num_chunks):
                if chunk_id > 0:
                    components.transformer._reset_stateful_cache()
                state.set("chunk_id", chunk_id)
                if hooks is not None and hooks.seed is not None:
                    state.set("generator", torch.Generator(hooks.generator_device).manual_seed(hooks.seed + chunk_id))
                if hooks is not None and hooks.on_chunk is not None:
                    hooks.on_chunk(chunk_id, num_chunks)
                for _, block in self.sub_blocks.items():
                    components, state = block(components, state)
            return components, state

    class Denoiser(Cosmos3TransferLoopDenoiser):
        """Nested control/text guidance with the framework's gating (fix g): strict intervals, ``g != 1``."""

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            hooks = getattr(components, "_cosmos_helpers_hooks", None)
            if hooks is None:
                return super().__call__(components, block_state, i, t)
            timestep = float(t.item())

            def active(interval):
                return interval is None or (interval[0] < timestep < interval[1])

            g = hooks.guidance if active(hooks.guidance_interval) else 1.0
            cg = hooks.control_guidance if active(hooks.control_guidance_interval) else 1.0
            fields = block_state.denoiser_input_fields
            kwargs = dict(step=i, sigma=float(components.scheduler.sigmas[i]),
                          num_inference_steps=components.scheduler.num_inference_steps)
            v_full = self._forward(components, fields["cond_full_static"], block_state.vision_tokens_full,
                                   block_state.vision_timesteps, "cond", **kwargs).float()
            passes = 1
            v_c = v_full
            if cg != 1.0:
                v_nc = self._forward(components, fields["cond_no_control_static"], block_state.vision_tokens_target,
                                     block_state.vision_timesteps, "cond_no_control", **kwargs).float()
                v_c = v_nc + cg * (v_full - v_nc)
                passes += 1
            velocity = v_c
            if g != 1.0:
                v_u = self._forward(components, fields["uncond_full_static"], block_state.vision_tokens_full,
                                    block_state.vision_timesteps, "uncond", **kwargs).float()
                velocity = v_u + g * (v_c - v_u)
                passes += 1
                if hooks.normalize_cfg:
                    ratio = (v_c.norm() / (velocity.norm() + 1e-8)).clamp(0.0, 1.0)
                    velocity = velocity * ratio
            hooks.passes.append(passes)
            block_state.velocity = velocity * block_state.velocity_mask
            return components, block_state

    class SchedulerStep(Cosmos3TransferLoopSchedulerStep):
        """The stock step + clean-frame re-pin, then a progress report."""

        @torch.no_grad()
        def __call__(self, components, block_state, i, t):
            components, block_state = super().__call__(components, block_state, i, t)
            hooks = getattr(components, "_cosmos_helpers_hooks", None)
            if hooks is not None and hooks.on_step is not None:
                hooks.on_step(i + 1, len(components.scheduler.timesteps))
            return components, block_state

    _BLOCK_CLASSES.update(ChunkLoop=ChunkLoop, Denoiser=Denoiser, SchedulerStep=SchedulerStep)
    return _BLOCK_CLASSES


def build_transfer_blocks():
    """``Cosmos3OmniBlocks`` with the chunk loop, denoiser and scheduler step replaced (see module docstring)."""
    from diffusers.modular_pipelines import Cosmos3OmniBlocks

    classes = _block_classes()
    blocks = Cosmos3OmniBlocks()
    transfer = blocks.sub_blocks["denoise"].sub_blocks["transfer"]
    chunk = classes["ChunkLoop"]()
    loop = chunk.sub_blocks["denoise"]
    loop.sub_blocks["denoiser"] = classes["Denoiser"]()
    loop.sub_blocks["update_transfer"] = classes["SchedulerStep"]()
    loop._progress_bar_config = {"disable": True}
    transfer.sub_blocks["chunk_denoise"] = chunk
    return blocks


_PIPES: dict[str, Any] = {}
_PIPES_LOCK = threading.Lock()


def transfer_pipeline(model: str = "tiny", *, device: str | None = None, dtype: Any = None):
    """The modular transfer pipeline sharing the components of ``DiffusersBackend(model).pipeline()``.

    Sharing means one copy of the weights serves generation and transfer (and the tiny model's cache is reused).
    """
    try:
        from cosmos_helpers.backends.diffusers import DiffusersBackend
    except ImportError as exc:  # pragma: no cover
        raise BackendUnavailableError(f"the diffusers transfer needs torch and diffusers ({exc}).") from exc
    base = DiffusersBackend(model, device=device, dtype=dtype, progress=False).pipeline()
    with _PIPES_LOCK:
        cached = _PIPES.get("pipe")
        if cached is not None and cached[0] is base:
            return cached[1]
        pipe = build_transfer_blocks().init_pipeline()
        pipe.update_components(transformer=base.transformer, vae=base.vae, text_tokenizer=base.text_tokenizer,
                               scheduler=base.scheduler, sound_tokenizer=base.sound_tokenizer)
        pipe.disable_safety_checker()
        _PIPES["pipe"] = (base, pipe)
        return pipe


# ---------------------------------------------------------------------------------------------- run


def _to_pil(frames: np.ndarray) -> list:
    from PIL import Image

    return [Image.fromarray(np.ascontiguousarray(frame)) for frame in frames]


def _progress_bar(total: int, desc: str, enabled: bool):
    from cosmos_helpers.progress import progress_bar

    return progress_bar(total, desc, "step", enabled=enabled)


def run_transfer(
    spec: TransferSpec | PreparedTransfer | str | os.PathLike[str] | dict,
    *,
    model: str | None = None,
    profile: str | None = "tiny",
    resolution: str | int | None = None,
    num_steps: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    dtype: Any = None,
    guardrails: bool = False,
    progress: bool | ProgressCallback = True,
) -> TransferGeneration:
    """Run a framework transfer spec on diffusers and return the output (uint8 frames) with its controls.

    Args:
        spec: a :class:`TransferSpec`, a spec file, a dict, or a :class:`PreparedTransfer`.
        model: ``"tiny"``, a hub id or a checkpoint folder; default: the profile's model.
        profile: ``"tiny"`` (default: tier 128 and the profile's few steps unless given) or ``"nano"``/``"super"``
            (the spec's own resolution and steps); ``None`` uses the spec unchanged with ``model``.
        resolution, num_steps, seed: overrides of the spec's values.
        guardrails: run the Cosmos guardrails (needs ``cosmos_guardrail``).
        progress: show a tqdm bar (``True``), nothing (``False``), or a ``callback(step, total)`` over all chunks.
    """
    import torch

    started = time.perf_counter()
    model = model or (get_profile(profile).model if profile else "tiny")
    if isinstance(spec, PreparedTransfer):
        prepared = spec
    else:
        resolution, num_steps, cap = profile_overrides(profile, resolution, num_steps)
        prepared = prepare_transfer(spec, resolution=resolution, num_steps=num_steps, seed=seed, step_cap=cap)
    r = prepared.spec
    load_start = time.perf_counter()
    pipe = transfer_pipeline(model, device=device, dtype=dtype)
    load_s = time.perf_counter() - load_start
    if guardrails:
        try:
            pipe.enable_safety_checker()
        except Exception as exc:  # cosmos_guardrail missing
            from cosmos_helpers.backends.diffusers import GUARDRAIL_HELP

            raise BackendUnavailableError(GUARDRAIL_HELP) from exc
    else:
        pipe.disable_safety_checker()
    pipe.update_components(scheduler=native_flow_scheduler(pipe.scheduler.config, r.shift))
    exec_device = str(pipe.transformer.device)
    total_steps = prepared.num_steps * len(prepared.chunks)
    bar = _progress_bar(total_steps, "transfer", progress is True)
    marks: list[float] = []
    done = {"steps": 0}

    def on_step(step: int, steps: int) -> None:
        done["steps"] += 1
        marks.append(time.perf_counter())
        if bar is not None:
            bar.update(1)
        if callable(progress):
            progress(done["steps"], total_steps)

    def on_chunk(chunk_id: int, num_chunks: int) -> None:
        if bar is not None:
            bar.set_description(f"transfer chunk {chunk_id + 1}/{num_chunks}")

    hooks = _RunHooks(
        seed=prepared.seed, generator_device="cpu", guidance=r.guidance, control_guidance=r.control_guidance,
        guidance_interval=r.guidance_interval, control_guidance_interval=r.control_guidance_interval,
        normalize_cfg=r.normalize_cfg, on_step=on_step, on_chunk=on_chunk,
    )
    processor = None
    if len(prepared.controls) > 1:
        processor = WeightedMultiControlAttnProcessor(prepared.weights, prepared.tokens_per_item())
    kwargs: dict[str, Any] = dict(
        prompt=prepared.prompt,
        negative_prompt=prepared.negative or "",
        control_videos={kind: _to_pil(frames) for kind, frames in prepared.controls.items()},
        height=prepared.height,
        width=prepared.width,
        num_frames=prepared.total_frames,
        num_video_frames_per_chunk=prepared.chunk_frames,
        num_conditional_frames=int(r.num_conditional_frames or 0),
        num_inference_steps=prepared.num_steps,
        fps=float(prepared.fps),
        guidance_scale=r.guidance,
        control_guidance=r.control_guidance,
        use_system_prompt=True,
        generator=torch.Generator("cpu").manual_seed(prepared.seed),
        output_type="pt",
        output="videos",
    )
    if (r.num_first_chunk_conditional_frames or 0) > 0 and prepared.rgb is not None:
        kwargs["video"] = _to_pil(prepared.rgb)
        kwargs["num_first_chunk_conditional_frames"] = int(r.num_first_chunk_conditional_frames)
    call_start = time.perf_counter()
    pipe._cosmos_helpers_hooks = hooks
    try:
        with torch.inference_mode(), _installed_processor(pipe.transformer, processor):
            video = pipe(**kwargs)
    except ValueError as exc:
        if "Guardrail" in str(exc):
            from cosmos_helpers.errors import GuardrailError

            raise GuardrailError(str(exc)) from exc
        raise
    finally:
        pipe._cosmos_helpers_hooks = None
        if bar is not None:
            bar.close()
    end = time.perf_counter()
    frames = media.to_uint8(video.permute(0, 2, 3, 1).float().cpu().numpy())
    frames = frames[: prepared.total_frames]
    controls = {kind: mirror_pad(c, prepared.total_frames)[: prepared.total_frames]
                for kind, c in prepared.controls.items()}
    output = frames
    if r.show_control_condition:
        output = np.concatenate([*controls.values(), output], axis=2)
    if r.show_input and prepared.rgb is not None:
        output = np.concatenate([mirror_pad(prepared.rgb, prepared.total_frames)[: prepared.total_frames], output],
                                axis=2)
    timings = {"load_s": load_s, "total_s": end - started, "pipeline_s": end - call_start}
    if marks:
        timings["denoise_s"] = marks[-1] - call_start
        timings["decode_s"] = end - marks[-1]
    return TransferGeneration(
        frames=output, fps=prepared.fps, seed=prepared.seed, backend="diffusers", model=str(model),
        timings=timings,
        provenance={
            "workflow": "transfer",
            "spec": prepared.source.to_dict(),
            "hints": list(prepared.hint_kinds),
            "weights": list(prepared.weights),
            "tier": prepared.tier,
            "chunks": [list(c) for c in prepared.chunks],
            "chunk_frames": prepared.chunk_frames,
            "num_steps": prepared.num_steps,
            "guidance": r.guidance,
            "control_guidance": r.control_guidance,
            "shift": r.shift,
            "prompt": prepared.prompt,
            "negative_prompt": prepared.negative,
            "transformer_passes_per_step": sorted(set(hooks.passes)),
            "scheduler": "NativeFlowUniPCScheduler",
            "device": exec_device,
            "notes": prepared.notes,
        },
        controls=controls,
        input_frames=None if prepared.rgb is None else prepared.rgb[: prepared.total_frames],
        prompt_text=prepared.prompt,
    )


def run_spec(spec: TransferSpec | str | os.PathLike[str] | dict, **kwargs: Any) -> Generation:
    """Run any spec this module understands: transfer (a hint present) or ``audio_image2video``."""
    source = _coerce_spec(spec)
    if source.hints:
        return run_transfer(source, **kwargs)
    if source.effective_model_mode() == "audio_image2video":
        from cosmos_helpers.transfer.audio import run_audio_spec

        kwargs.pop("guardrails", None)
        return run_audio_spec(source, **kwargs)
    raise ValidationError("model_mode", f"{source.effective_model_mode()} specs are not transfer specs.",
                          "use GenerationRequest + DiffusersBackend.generate for plain generation, or add a hint.")


__all__ = [
    "PreparedTransfer",
    "TransferGeneration",
    "WeightedMultiControlAttnProcessor",
    "build_transfer_blocks",
    "native_flow_scheduler",
    "native_flow_scheduler_class",
    "native_sigmas",
    "prepare_transfer",
    "profile_overrides",
    "run_spec",
    "run_transfer",
    "transfer_pipeline",
]
