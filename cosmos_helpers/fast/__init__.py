"""The fast Diffusers path for ``Cosmos3OmniPipeline``: same outputs, less work per step.

``enable_fast_path(pipe)`` patches one loaded pipeline in place (``disable_fast_path`` undoes it); the
switch most people use is ``DiffusersBackend(..., fast=True)``. What changes, and why it keeps outputs:

* **Text keys/values once per prompt** (:mod:`.text_cache`). The text pathway is causal over text only and
  gets no timestep, so its keys/values are the same at every step; each prompt (conditional and negative
  separately) runs the text tower once per call instead of 70 times. Exact: same operations, same order.
* **Generation tower only, per pass** (:mod:`.transformer`): stock's layer maths on the vision/sound/action
  tokens, reading those keys/values.
* **CUDA graphs** (:mod:`.graphs`, CUDA only): each pass's 36-layer stack is one graph replay, removing the
  launch overhead that dominates small (text-to-image) shapes. No recompiles: one graph per shape. By
  default only passes up to ``SMALL_PASS_TOKENS`` generation tokens: above it graphs only hold memory.
* **Attention kernel** (:mod:`.attention`): on CUDA the fastest of PyTorch's SDPA kernels (flash, cuDNN,
  memory-efficient, default) and, where installed, FlashAttention-3 is timed per shape and used when it agrees
  with the default one.
* **Stacked projections** (:mod:`.projections`, on with CUDA): q/k/v and gate/up as one matrix product each
  where that is faster for the token count (timed once per size); the weights are stored once.
* **Fused element-wise steps** (``compile``, on with CUDA): residual add + RMSNorm, q/k norm + rotary and
  the SiLU gate as ``torch.compile`` kernels; if compiling fails the path continues without them.
* **Batched guidance** (``batch_cfg``): the conditional and negative passes of a step share one pass
  through the weights (attention stays per branch), by default up to ``SMALL_PASS_TOKENS`` tokens. Same
  maths; on GPU the larger matrix products may round differently in bf16 (rows are independent, kernels are
  chosen by size).
* **VAE decode** (:mod:`.vae`, CUDA): cuDNN picks convolution algorithms by timing them, and video decodes
  run channels-last (pixels may differ at bf16 rounding; latents are unaffected).
* **No VAE encode of a blank video** for text-to-image/video: stock encodes an all-zero clip and then
  multiplies it by a zero mask; the fast path hands back zeros of the same shape (identical latents).

``DiffusersBackend(fast=True)`` also converts the decoded video to uint8 on the GPU before copying it to
the host (a quarter of the bytes, same values as the host-side conversion).

Nothing here is approximate. Step caching, which is, composes with it: under diffusers' SeaCache
(``GenerationRequest(step_cache=SeaCache())``) diffusers decides which passes run and the fast path runs those
(:mod:`.sea_cache`); a pass it cannot run (another diffusers hook on the transformer) goes to stock code with a
warning and is counted in the manifest.
On CPU: graphs, kernel timing, compilation and stacked products are off by default, the rest applies (fp32
results match stock within 1e-5, measured 0; the tests switch stacked products and the uncompiled fused layer
code on as well).
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
    """Switches of the fast path (defaults: everything that keeps outputs; CUDA-only parts off on CPU).

    Args:
        text_cache: compute the text pathway once per prompt (the transformer patch; off = stock transformer).
        cuda_graphs: replay each pass as a CUDA graph (``None``: on when the model is on CUDA).
        graph_max_tokens: no graphs above this many generation tokens per pass (``None``: no limit if
            ``cuda_graphs=True`` is given, else :data:`SMALL_PASS_TOKENS`).
        attention: ``"auto"`` (time the candidates per shape on CUDA), or one of
            ``native``/``flash``/``cudnn``/``cudnn_gqa``/``efficient``/``flash3`` (FlashAttention-3, where
            installed; ``"auto"`` includes it then). CPU always uses ``native``.
        batch_cfg: batch the two guidance branches of a step (``None``: on with CUDA, off on CPU).
        batch_max_tokens: batch only steps whose two branches have at most this many generation tokens together
            (``None``: no limit if ``batch_cfg=True`` is given, else :data:`SMALL_PASS_TOKENS`).
        skip_blank_encode: skip the VAE encode of the all-zero clip in text-to-image/video.
        vae_cudnn_benchmark: let cuDNN time convolution algorithms for the VAE decode (``None``: on with CUDA;
            first call slower; see :mod:`.vae`).
        compile: fuse the generation tower's element-wise steps with ``torch.compile`` (``None``: on with CUDA;
            one compile per function, shapes dynamic, the first call in a process pays a few seconds).
            ``"eager"`` runs the same fused layer code without compiling it (any device).
        fuse_projections: stacked q/k/v and gate/up products where faster (``None``: on with CUDA).
        vae_channels_last: decode videos with channels-last 3-D convolutions (``None``: on with CUDA; see
            :mod:`.vae`). Images are decoded as stock.
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


# Above this many generation tokens per pass the matrix products are large enough on their own: batching the
# guidance branches and replaying CUDA graphs then only hold memory. Measured on one H200 at Nano shapes
# (benchmarks/GPU_RESULTS.md, runs 11-12): t2v 480p 1.612 s/step one branch at a time without graphs against
# 1.646 s batched with graphs (34.6 against 36.9 GiB); 720p 6.204 against 6.241 s (40.8 against 46.5 GiB);
# t2v 256p (5,760 tokens batched) gains from both.
SMALL_PASS_TOKENS = 16_384


# Each patched pipeline's state, kept here rather than as an attribute hung on the diffusers object.
_STATES: "weakref.WeakKeyDictionary[Any, _FastState]" = weakref.WeakKeyDictionary()


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
        """Route calls through the fast path (``True``) or straight to stock code; nothing is re-patched."""
        self.active = active
        for part in (self.forward, self.decode):
            if part is not None:
                part.active = active
        if not active and self.forward is not None:
            self.forward.forget_pairs()


def enable_fast_path(pipe, options: FastOptions | None = None, *, active: bool = True, **overrides):
    """Patch ``pipe`` (a ``Cosmos3OmniPipeline``) in place; idempotent. Returns ``pipe``.

    ``enable_fast_path(pipe, attention="flash")`` overrides single options. Called again without options
    it keeps the current ones; with other options it re-applies the patch with those. ``active=False`` installs
    it switched off: a pipeline shared by stock and fast callers runs stock code at rest, and
    :func:`fast_path_active` switches it on for one call.
    """
    state = _STATES.get(pipe)
    if overrides:
        options = replace(options or FastOptions(), **overrides)
    if state is not None:
        if options is None or state.options == options:  # already fast with these options (or none given)
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
    prepare_latents = pipe.prepare_latents
    encode_video = pipe._encode_video

    @functools.wraps(prepare_latents)
    def fast_prepare_latents(*args, **kwargs):
        state.blank_encode = (state.active and not args and kwargs.get("image") is None
                              and kwargs.get("video") is None and kwargs.get("action") is None
                              and kwargs.get("latents") is None)
        try:
            return prepare_latents(*args, **kwargs)
        finally:
            state.blank_encode = False

    @functools.wraps(encode_video)
    def fast_encode_video(x):
        if not state.blank_encode:
            return encode_video(x)
        # Stock: x0 = encode(zeros); latents = 0 * x0 + 1 * noise. Any finite x0 gives the same latents.
        import torch

        vae = pipe.vae.config
        shape = (x.shape[0], vae.z_dim, (x.shape[2] - 1) // vae.scale_factor_temporal + 1,
                 x.shape[3] // vae.scale_factor_spatial, x.shape[4] // vae.scale_factor_spatial)
        state.blank_encodes_skipped += 1
        return torch.zeros(shape, dtype=x.dtype, device=x.device)

    _patch(state, pipe, "prepare_latents", fast_prepare_latents)
    _patch(state, pipe, "_encode_video", fast_encode_video)


def disable_fast_path(pipe):
    """Undo :func:`enable_fast_path` (frees cached keys/values and graphs). Returns ``pipe``."""
    state = _STATES.get(pipe)
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
    del _STATES[pipe]
    return pipe


@contextlib.contextmanager
def fast_path_active(pipe, active: bool) -> Iterator[None]:
    """Run the block with the installed fast path on or off: one loaded pipeline serves stock and fast backends
    without patching or unpatching anything per call. Without a fast path installed, only ``False`` is valid."""
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
    state = _STATES.get(pipe)
    return state.forward if state is not None else None


def set_fast_path_active(pipe, active: bool) -> None:
    """Switch the installed fast path on or off outside a call (worker ranks, rehearsals)."""
    _STATES[pipe].set_active(active)


def fast_path_stats(pipe) -> dict[str, Any]:
    """Counters for tests and reports: text-tower runs, graph captures/replays, batched pairs, fallbacks."""
    state = _STATES.get(pipe)
    if state is None:
        return {"enabled": False}
    out: dict[str, Any] = {"enabled": True, "active": state.active, "options": asdict(state.resolved),
                           "blank_encodes_skipped": state.blank_encodes_skipped}
    forward = state.forward
    if forward is not None:
        out.update(forward.stats, text_tower_runs=forward.text.computed, fused_kernels=forward.compiled is not None,
                   compile_error=forward.compile_error)
        if forward.projections is not None:
            out["projection_choices"] = {str(k[0]): v for k, v in forward.projections.choices.items()}
        if forward.graphs is not None:
            out.update(graph_captures=forward.graphs.captures, graph_replays=forward.graphs.replays,
                       graph_failures=dict(forward.graphs.failed))
        from .attention import TUNING_LOG

        out["attention_tuning"] = {str(k): v for k, v in TUNING_LOG.items()}
    return out
