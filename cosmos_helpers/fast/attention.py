"""Attention kernels for the generation pathway (as costly as all the matrix products at 480p/720p video), and how
the fast path picks one: ``native`` is exactly what stock runs; ``cudnn`` and ``efficient`` expand the K/V heads
first (cuDNN's SDPA does not take ``enable_gqa`` on every torch version); ``flash3`` is diffusers' ``_flash_3`` where
``flash_attn_interface`` is installed (Dao-AILab/flash-attention ``hopper/``; t2v 480p/720p: 14-17% less time than
cuDNN on an H200, run 17, GPU_RESULTS.md). ``"auto"`` times every candidate once per shape on the first pass's
tensors, drops any that fails or disagrees with ``native`` beyond bf16 rounding, and keeps the fastest.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..errors import ValidationError
from ..models.cosmos3_attention import project_qkv

# candidate -> (the one SDPA kernel allowed, or None for PyTorch's default choice; K/V heads expanded first)
_KERNELS: dict[str, tuple[SDPBackend | None, bool]] = {
    "native": (None, False),
    "flash": (SDPBackend.FLASH_ATTENTION, False),
    "cudnn": (SDPBackend.CUDNN_ATTENTION, True),
    "cudnn_gqa": (SDPBackend.CUDNN_ATTENTION, False),
    "efficient": (SDPBackend.EFFICIENT_ATTENTION, True),
}
FLASH3 = "flash3"


def flash3_available() -> bool:
    """diffusers' ``_flash_3`` backend can run: its package is installed and ``flash_attn_interface`` imported."""
    from diffusers.models import attention_dispatch

    return bool(getattr(attention_dispatch, "_CAN_USE_FLASH_ATTN_3", False)
                and getattr(attention_dispatch, "flash_attn_3_func", None) is not None)


CANDIDATES: tuple[str, ...] = tuple(_KERNELS) + ((FLASH3,) if flash3_available() else ())
ALL: tuple[str, ...] = tuple(_KERNELS) + (FLASH3,)


def check_backend(name: str) -> None:
    """Refuse an attention choice this host cannot run, naming the fix (before any model loads)."""
    if name != "auto" and name not in ALL:
        raise ValidationError("fast.attention", f"unknown attention backend {name!r}.",
                              f"use 'auto' or one of {', '.join(ALL)}.")
    if name == FLASH3 and not flash3_available():
        raise ValidationError("fast.attention", "'flash3' needs FlashAttention-3 (module flash_attn_interface), "
                              "which is not installed.", "build it from github.com/Dao-AILab/flash-attention "
                              "(hopper/, an H100/H200), or use attention='auto'.")


# (q shape, k shape, dtype, device index) -> chosen candidate
_CHOICE: dict[tuple, str] = {}
# record of every tuning: shape key -> {candidate: milliseconds or error string}
TUNING_LOG: dict[tuple, dict[str, object]] = {}


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, backend: str = "native",
         is_causal: bool = False) -> torch.Tensor:
    """``q [Nq, H, D]``, ``k``/``v`` ``[Nk, KVH, D]`` -> ``[Nq, H, D]``; ``"native"`` is diffusers' native call
    exactly (same permutes and SDPA call: bit-identical to the stock processor on CPU)."""
    if backend == FLASH3:
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        return dispatch_attention_fn(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=is_causal,
                                     backend="_flash_3").squeeze(0)
    if backend not in _KERNELS:
        raise ValueError(f"unknown attention backend {backend!r}; use one of {', '.join(ALL)} or 'auto'.")
    kernel, expand = _KERNELS[backend]
    qb, kb, vb = (x.unsqueeze(0).permute(0, 2, 1, 3) for x in (q, k, v))
    groups = qb.shape[1] // kb.shape[1]
    if expand and groups > 1:  # query head h uses kv head h // groups (torch's GQA rule)
        kb, vb = kb.repeat_interleave(groups, dim=1), vb.repeat_interleave(groups, dim=1)
    with contextlib.nullcontext() if kernel is None else sdpa_kernel([kernel]):
        out = F.scaled_dot_product_attention(qb, kb, vb, is_causal=is_causal, enable_gqa=not expand)
    return out.permute(0, 2, 1, 3).squeeze(0)


def cuda_ms(fn, repeats: int = 1) -> float:
    """Milliseconds per call of ``fn()``: ``repeats`` calls between two CUDA events on the current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def _shape_key(q: torch.Tensor, k: torch.Tensor) -> tuple:
    return (tuple(q.shape), tuple(k.shape), str(q.dtype), q.device.index)


def choose(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, candidates=CANDIDATES, repeats: int = 3) -> str:
    """Time each candidate on these tensors (CUDA only) and return the fastest correct one (cached per shape)."""
    key = _shape_key(q, k)
    if key in _CHOICE:
        return _CHOICE[key]
    if not q.is_cuda or torch.cuda.is_current_stream_capturing():
        return "native"
    log: dict[str, object] = {}
    reference = sdpa(q, k, v, backend="native")
    scale = reference.float().abs().max().clamp_min(1e-6)
    best, best_ms = "native", float("inf")
    for name in candidates:
        try:
            out = sdpa(q, k, v, backend=name)  # warm-up (kernel selection, workspace)
            err = float((out.float() - reference.float()).abs().max() / scale)
            if not err < 2e-2:  # bf16 rounding of attention is ~1e-3 relative; NaN fails too
                log[name] = f"rejected: max rel diff {err:.2e}"
                continue
            torch.cuda.synchronize()
            ms = cuda_ms(lambda: sdpa(q, k, v, backend=name), repeats)
            log[name] = round(ms, 3)
            if ms < best_ms:
                best, best_ms = name, ms
        except Exception as exc:  # a kernel that does not support these shapes/dtypes
            log[name] = f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    log["chosen"] = best
    TUNING_LOG[key] = log
    _CHOICE[key] = best
    return best


def resolve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str) -> str:
    """The backend to use for this call under ``mode`` ("auto" or a candidate name)."""
    if not q.is_cuda:
        return "native"
    return choose(q, k, v) if mode == "auto" else mode


def time_candidates(q, k, v, repeats: int = 5) -> dict[str, object]:
    """Milliseconds per candidate for a shape (a report helper for the GPU benchmark)."""
    _CHOICE.pop(_shape_key(q, k), None)
    choose(q, k, v, repeats=repeats)
    return dict(TUNING_LOG[_shape_key(q, k)])


class StockProcessorWithKernel:
    """Stock ``Cosmos3AttnProcessor`` maths with only the kernel swapped: against plain stock, how far outputs move
    from the kernel choice alone (the bf16 yardstick the fast path's differences are judged against)."""

    _attention_backend = None
    _parallel_config = None

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __call__(self, attn, und_seq, gen_seq, rotary_emb):
        q_und, k_und, v_und, k_und_for_gen, q_gen, k_gen, v_gen = project_qkv(attn, und_seq, gen_seq, rotary_emb)
        causal_out = sdpa(q_und, k_und, v_und, backend="native", is_causal=True).flatten(-2, -1)
        all_k, all_v = torch.cat([k_und_for_gen, k_gen]), torch.cat([v_und, v_gen])
        backend = resolve(q_gen, all_k, all_v, self.backend)
        full_out = sdpa(q_gen, all_k, all_v, backend=backend).flatten(-2, -1)
        return attn.to_out(causal_out), attn.to_add_out(full_out)
