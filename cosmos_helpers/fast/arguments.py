"""A transformer call's arguments as the fast path and CFG-parallel see them: the noisy inputs that change every
step (``DYNAMIC``), the rest (``static``), and whether two calls got the very same inputs (``same``), the test that
lets one call's work stand in for another's. Tensors compare by identity: equal values are not enough to reuse a
prediction, the same objects are (the pipeline passes the same tensors to both guidance branches of a step)."""

from __future__ import annotations

from typing import Any

import torch

DYNAMIC = ("vision_tokens", "vision_timesteps", "sound_tokens", "sound_timesteps", "action_tokens",
           "action_timesteps")


def same(a: Any, b: Any) -> bool:
    """Identity for tensors, element-wise for lists/tuples, equality otherwise."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def same_kwargs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)


def static(kw: dict) -> dict:
    """The arguments that stay the same through a call's steps (everything but the noisy inputs)."""
    return {k: v for k, v in kw.items() if k not in DYNAMIC}
