"""The fast path under diffusers' SeaCache: the root hook's own decisions (``prepare_decoder_stack``, and
``record_decoder_stack`` for the history), called around the fast stack as stock calls them around
``_run_decoder_stack``, with empty "understanding" rows (the fast path never computes them per pass; nothing reads
them). Batched guidance asks at the conditional call whether the negative branch will compute
(:meth:`SeaCacheGate.predict`); were its real decision to differ, the batch is dropped (time, never results).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

ROOT_HOOK = "sea_cache_root"


def sea_cache_root(transformer) -> Any:
    """diffusers' SeaCache root hook on ``transformer``, or ``None`` when it has none."""
    registry = getattr(transformer, "_diffusers_hook", None)
    return registry.get_hook(ROOT_HOOK) if registry is not None else None


def hooked_modules(transformer) -> list[str]:
    """The hooks on the transformer and its layers other than SeaCache's root: any means a stock pass."""
    names = []
    for module in (transformer, *transformer.layers):
        registry = getattr(module, "_diffusers_hook", None)
        names += [name for name in getattr(registry, "hooks", {}) if name != ROOT_HOOK]
    return names


class SeaCacheGate:
    """diffusers' SeaCache decisions for the fast path's passes of one transformer (see the module docstring)."""

    def __init__(self, transformer, root) -> None:
        self.transformer, self.root = transformer, root

    def context(self) -> str | None:
        """The ``cache_context`` this pass runs in (the pipeline's "cond" / "uncond"), if any."""
        return getattr(self.root.state_manager._context, "name", None)

    def decide(self, gen: torch.Tensor) -> torch.Tensor | None:
        """``None``: run the stack for this branch (then :meth:`record` its output); else the generation rows to
        use instead (``gen`` plus the extrapolated residual, as stock's skipped stack returns them)."""
        _, rows, compute = self.root.prepare_decoder_stack(self.transformer, self._und(gen), gen)
        return None if compute else rows

    def record(self, normed: torch.Tensor) -> None:
        """The stack's (post-norm) output of a computed pass; ``post_forward`` turns it into the residual."""
        self.root.record_decoder_stack(self.transformer, self._und(normed), normed)

    def predict(self, context: str | None) -> bool:
        """Whether the branch of ``context`` will compute at this step, from diffusers' gate on a copy of its state."""
        from diffusers.hooks.sea_cache import _build_indicator

        metadata = self.root.shared_state.forward_metadata
        state = self.root.state_manager._state_cache.get(context) if context is not None else None
        if metadata is None or state is None:
            return True  # no metadata: the pass runs in full; no state yet: its first pass always computes
        trial = copy.copy(state)
        indicator = _build_indicator(self.root.config, metadata)
        return self.root.shared_state.resolve_gate(trial, metadata, indicator, self.root.config) or not trial.history

    @staticmethod
    def _und(like: torch.Tensor) -> torch.Tensor:
        return like.new_zeros((0, like.shape[-1]))
