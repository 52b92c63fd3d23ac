"""CFG-parallel: the conditional and the negative pass of a denoising step on two groups of GPUs at once.

The pipeline calls its transformer twice per step (``cond``, ``uncond``) with the same noisy tensors and per-prompt
packed inputs. From the second guided step on, at the ``cond`` call group 0 computes the conditional pass and group 1
the negative one (step 1's negative inputs with this step's noisy tensors), exchanged by one all-gather. The
``uncond`` call gets the kept prediction only if its arguments are the very objects expected, else it is computed
(slower, never wrong). Step 1 and steps outside the guidance interval run both passes on every GPU.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformerOutput

from ....fast.transformer import DYNAMIC, same_kwargs, static


def _flatten(result) -> torch.Tensor:
    """One flat float tensor of a ``(vision, sound, action)`` tuple of tensor lists or ``None``."""
    return torch.cat([t.reshape(-1).float() for part in result if part is not None for t in part])


def _unflatten(flat: torch.Tensor, like: tuple) -> tuple:
    """``flat`` back into the shapes and dtypes of ``like``."""
    parts = iter(flat.split([t.numel() for part in like if part is not None for t in part]))
    return tuple(None if part is None else [next(parts).reshape(t.shape).to(t.dtype) for t in part] for part in like)


class CfgParallelForward:
    """Bound as ``transformer.forward`` on every rank of a CFG-parallel plan; see the module docstring."""

    def __init__(self, pipe, group, branch: int) -> None:
        self.pipe, self.group, self.branch = pipe, group, branch
        transformer = pipe.transformer
        self.inner = transformer.forward
        self.context: str | None = None
        self.uncond_static: dict | None = None
        self.expected: tuple[dict, tuple] | None = None
        self.stats = {"parallel_steps": 0, "serial_calls": 0, "kept_hits": 0, "kept_misses": 0}
        original_context = transformer.cache_context

        @contextlib.contextmanager
        def recording_context(name: str, **kwargs):
            self.context = name
            try:
                with original_context(name, **kwargs):
                    yield
            finally:
                self.context = None

        transformer.cache_context = recording_context
        transformer.forward = self

    def reset(self) -> None:
        """Forget the negative pass's inputs (call between generations: new prompts, new tensors)."""
        self.uncond_static, self.expected = None, None

    def __call__(self, *args, **kwargs):
        return_dict = kwargs.pop("return_dict", True)
        sample, sound, action = result = self._forward(args, kwargs)
        return Cosmos3OmniTransformerOutput(sample=sample, sound=sound, action=action) if return_dict else result

    def _compute(self, args, kwargs) -> tuple:
        self.stats["serial_calls"] += 1
        return tuple(self.inner(*args, **kwargs, return_dict=False))

    def _forward(self, args, kwargs) -> tuple:
        if args:
            return self._compute(args, kwargs)
        if self.context == "uncond":
            kept, self.expected = self.expected, None
            if kept is not None and same_kwargs(kept[0], kwargs):
                self.stats["kept_hits"] += 1
                return kept[1]
            if kept is not None:
                self.stats["kept_misses"] += 1
            self.uncond_static = static(kwargs)
            return self._compute(args, kwargs)
        self.expected = None
        if self.context != "cond" or self.uncond_static is None or not self.pipe.do_classifier_free_guidance:
            return self._compute(args, kwargs)
        negative = dict(self.uncond_static, **{k: kwargs[k] for k in DYNAMIC if k in kwargs})
        if negative.keys() != kwargs.keys():
            return self._compute(args, kwargs)
        mine = self._compute((), kwargs if self.branch == 0 else negative)
        self.stats["serial_calls"] -= 1
        self.stats["parallel_steps"] += 1
        flat = _flatten(mine)
        parts = [torch.empty_like(flat) for _ in range(dist.get_world_size(self.group))]
        dist.all_gather(parts, flat, group=self.group)
        cond, uncond = (_unflatten(part, mine) for part in parts[:2])
        self.expected = (negative, uncond)
        return cond
