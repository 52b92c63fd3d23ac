"""The fast Diffusers path for ``Cosmos3OmniPipeline``: same outputs, less work per step.

``enable_fast_path(pipe)`` patches one loaded pipeline in place (``disable_fast_path`` undoes it); most people use
``DiffusersBackend(..., fast=True)``. The parts are :class:`FastOptions`' switches; each module says why its part keeps
outputs. Step caching (approximate) composes with it: under diffusers' SeaCache, diffusers decides which passes run
and the fast path runs those (:mod:`.sea_cache`); a pass it cannot run goes to stock code with a warning and is
counted in the manifest. On CPU the CUDA-only parts are off; fp32 results match stock within 1e-5 (measured 0).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

__all__ = ["FastOptions", "SMALL_PASS_TOKENS", "enable_fast_path", "disable_fast_path", "is_fast", "fast_path_stats",
           "installed_forward", "set_fast_path_active"]


@dataclass
class FastOptions:
    """Switches of the fast path (defaults: everything that keeps outputs). ``None``: on with CUDA, off on CPU.

    Args:
        text_cache: the text pathway's keys/values once per prompt (:mod:`.text_cache`: causal over text, no
            timestep, so the same every step); the generation tower alone per pass (off = stock transformer).
        cuda_graphs, batch_cfg: replay each pass as a CUDA graph (:mod:`.graphs`); batch the two guidance branches of
            a step (one read of the weights; the larger products may round differently in bf16).
        graph_max_tokens, batch_max_tokens: only up to this many generation tokens per pass (both branches together)
            (``None``: no limit if the switch is ``True``, else :data:`SMALL_PASS_TOKENS`).
        attention: ``"auto"`` (time the candidates per shape on CUDA), or one of :data:`.attention.ALL`
            (``flash3``: FlashAttention-3, where installed). CPU always uses ``native``.
        skip_blank_encode: skip the VAE encode of the all-zero clip text-to-image/video multiplies by zero.
        vae_cudnn_benchmark, vae_channels_last: cuDNN's timed algorithms, channels-last videos (:mod:`.vae`).
        compile: fuse element-wise steps with ``torch.compile`` (:mod:`.kernels`; the first call in a process pays a
            few seconds); ``"eager"`` runs the same fused layer code uncompiled (any device).
        fuse_projections: stacked q/k/v and gate/up products where faster (:mod:`.projections`).
    """

    text_cache: bool = True
    cuda_graphs: bool | None = None
    graph_max_tokens: int | None = None
    attention: str = "auto"
    batch_cfg: bool | None = None
    batch_max_tokens: int | None = None
    skip_blank_encode: bool = True
    vae_cudnn_benchmark: bool | None = None
    compile: bool | str | None = None
    fuse_projections: bool | None = None
    vae_channels_last: bool | None = None


# Above this many generation tokens per pass the products are large enough alone: batched guidance and CUDA graphs
# then only hold memory. One H200, Nano (benchmarks/GPU_RESULTS.md, runs 11-12), one branch at a time without graphs
# against batched with: t2v 480p 1.612 against 1.646 s/step (34.6 against 36.9 GiB), 720p 6.204 against 6.241 s
# (40.8 against 46.5 GiB); t2v 256p (5,760 tokens batched) gains from both.
SMALL_PASS_TOKENS = 16_384


_STATES: "weakref.WeakKeyDictionary[Any, _FastState]" = weakref.WeakKeyDictionary()  # not hung on diffusers' object


@dataclass(eq=False)
class _FastState:
    options: FastOptions
    resolved: FastOptions  # every ``None`` decided for the pipeline's device
    forward: Any = None
    decode: Any = None
    originals: list[tuple[Any, str, Any]] = field(default_factory=list)  # (object, attribute, its instance's) to undo
    blank_encode: bool = False
    blank_encodes_skipped: int = 0
    active: bool = True

    def set_active(self, active: bool) -> None:
        """Route calls through the fast path or straight to stock code; nothing is re-patched."""
        self.active = active
        for part in (self.forward, self.decode):
            if part is not None:
                part.active = active
        if not active and self.forward is not None:
            self.forward.forget_pairs()


def enable_fast_path(pipe, options: FastOptions | None = None, *, active: bool = True, **overrides):
    """Patch ``pipe`` in place (idempotent; other options re-apply the patch); returns it. ``**overrides`` set single
    options. ``active=False`` installs it switched off: a pipeline shared by stock and fast callers runs stock code at
    rest, and :func:`fast_path_active` switches it on for one call."""
    state = _STATES.get(pipe)
    if overrides:
        options = replace(options or FastOptions(), **overrides)
    if state is not None:
        if options is None or state.options == options:
            state.set_active(active)
            return pipe
        disable_fast_path(pipe)
    options = options or FastOptions()
    cuda = next(pipe.transformer.parameters()).is_cuda
    state = _FastState(options, _resolve(options, cuda))
    resolved = state.resolved
    if resolved.text_cache:
        from .transformer import FastForward

        state.forward = FastForward(pipe.transformer, attention=resolved.attention,
                                    cuda_graphs=bool(resolved.cuda_graphs and cuda),
                                    graph_max_tokens=resolved.graph_max_tokens, batch_cfg=bool(resolved.batch_cfg),
                                    batch_max_tokens=resolved.batch_max_tokens,
                                    compile=resolved.compile, fuse_projections=bool(resolved.fuse_projections))
        _patch(state, pipe.transformer, "forward", state.forward)
    if resolved.skip_blank_encode:
        _skip_blank_encode(pipe, state)
    if cuda and (resolved.vae_cudnn_benchmark or resolved.vae_channels_last):
        from .vae import FastDecode

        state.decode = FastDecode(pipe.vae, cudnn_benchmark=bool(resolved.vae_cudnn_benchmark),
                                  channels_last=bool(resolved.vae_channels_last))
        _patch(state, pipe.vae, "decode", state.decode)
    _STATES[pipe] = state
    state.set_active(active)
    return pipe


def _resolve(options: FastOptions, cuda: bool) -> FastOptions:
    """The options with every ``None`` decided for this device (GPU-only switches off on CPU)."""
    gpu = ("cuda_graphs", "batch_cfg", "vae_cudnn_benchmark", "compile", "fuse_projections", "vae_channels_last")
    resolved = replace(options, **{name: cuda for name in gpu if getattr(options, name) is None})
    if cuda:  # limits only where the switch was left to us: an explicit True means every size
        for switch, limit in (("cuda_graphs", "graph_max_tokens"), ("batch_cfg", "batch_max_tokens")):
            if getattr(options, switch) is None and getattr(options, limit) is None:
                setattr(resolved, limit, SMALL_PASS_TOKENS)
    if resolved.compile != "eager":  # "eager": the fused layer code uncompiled (CPU checks, debugging)
        resolved.compile = bool(resolved.compile and cuda)
    resolved.vae_channels_last = bool(resolved.vae_channels_last and cuda)
    return resolved


def _patch(state: _FastState, obj, attr: str, value) -> None:
    state.originals.append((obj, attr, obj.__dict__.get(attr)))
    setattr(obj, attr, value)


def _skip_blank_encode(pipe, state: _FastState) -> None:
    """Text-to-video/image encodes a blank video only to multiply it by zero: answer with zeros instead."""
    prepare_latents, encode_video = pipe.prepare_latents, pipe._encode_video

    @functools.wraps(prepare_latents)
    def fast_prepare_latents(*args, **kwargs):
        state.blank_encode = state.active and not args and all(
            kwargs.get(name) is None for name in ("image", "video", "action", "latents"))
        try:
            return prepare_latents(*args, **kwargs)
        finally:
            state.blank_encode = False

    @functools.wraps(encode_video)
    def fast_encode_video(x):
        if not state.blank_encode:
            return encode_video(x)
        import torch  # stock: latents = 0 * encode(zeros) + noise, so any finite x0 gives the same latents

        vae = pipe.vae.config
        shape = (x.shape[0], vae.z_dim, (x.shape[2] - 1) // vae.scale_factor_temporal + 1,
                 x.shape[3] // vae.scale_factor_spatial, x.shape[4] // vae.scale_factor_spatial)
        state.blank_encodes_skipped += 1
        return torch.zeros(shape, dtype=x.dtype, device=x.device)

    _patch(state, pipe, "prepare_latents", fast_prepare_latents)
    _patch(state, pipe, "_encode_video", fast_encode_video)


def disable_fast_path(pipe):
    """Undo :func:`enable_fast_path` (frees cached keys/values and graphs). Returns ``pipe``."""
    state = _STATES.pop(pipe, None)
    if state is None:
        return pipe
    if state.forward is not None:
        state.forward.reset()
        if state.forward.projections is not None:
            state.forward.projections.unfuse()
    if state.decode is not None:
        state.decode.restore()
    for obj, attr, original in state.originals:
        if original is None:
            obj.__dict__.pop(attr, None)
        else:
            setattr(obj, attr, original)
    return pipe


@contextlib.contextmanager
def fast_path_active(pipe, active: bool) -> Iterator[None]:
    """The block with the installed fast path on or off (without one installed, only ``False`` is valid)."""
    state = _STATES.get(pipe)
    if state is None:
        if active:
            raise RuntimeError("the fast path is not installed on this pipeline; call enable_fast_path first")
        yield
        return
    previous = state.active
    state.set_active(active)
    try:
        yield
    finally:
        state.set_active(previous)


def is_fast(pipe) -> bool:
    return pipe in _STATES


def installed_forward(pipe):
    """The fast forward installed on ``pipe``'s transformer (it counts its own passes), or ``None``."""
    return getattr(_STATES.get(pipe), "forward", None)


def set_fast_path_active(pipe, active: bool) -> None:
    """Switch the installed fast path on or off outside a call (worker ranks, rehearsals)."""
    _STATES[pipe].set_active(active)


def fast_path_stats(pipe) -> dict[str, Any]:
    """Counters for tests and reports: text-tower runs, graph captures/replays, batched pairs, fallbacks."""
    state = _STATES.get(pipe)
    if state is None:
        return {"enabled": False}
    return {"enabled": True, "active": state.active, "options": asdict(state.resolved),
            "blank_encodes_skipped": state.blank_encodes_skipped,
            **(state.forward.report() if state.forward is not None else {})}
