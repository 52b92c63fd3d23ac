"""SeaCache in process: diffusers' own hooks, on the shared transformer for one call and off again after it.

diffusers 0.42.1 ships SeaCache for Cosmos 3 (``SeaCacheConfig`` + ``transformer.enable_cache``): for Cosmos 3 it
wraps ``_run_decoder_stack`` and decides per guidance branch (each pass runs in its own ``cache_context``) whether to
run the 36 layers or to add the extrapolated residual of the last full runs. Only one cache config can be active on a
transformer, and a loaded pipeline is shared by every backend of the process, so a request's cache is installed for
its call and removed after, under the pipeline's lock. A cache the caller enabled on the pipeline themselves is left
alone and recorded; a request that asks for another one is refused (two caches cannot stack).

What ran is counted without reaching into diffusers' state: every pass enters the transformer (a forward pre-hook
counts it), and a pass that computes runs the first decoder layer as a module (a second pre-hook). The fast path
runs the layers' maths itself and counts its own computed passes (:mod:`cosmos_helpers.fast.sea_cache`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from ...errors import ValidationError
from ...protocol import step_cache as facts
from ...step_cache import SeaCache, StepCache, describe

_DIFFUSERS_NAMES = {ours: names[0] for ours, names in facts.FIELDS.items()}


@dataclass
class CallCache:
    """One call's step cache and its count of guidance passes: which of them ran the decoder stack (``schedule``: one
    character a pass in call order, ``C`` computed, ``.`` cached) and the passes the fast path sent to stock code, by
    reason. Once the call's block is left, ``provenance`` is the manifest's record of it."""

    record: dict[str, Any]
    fast: Any = None  # the installed fast forward, which counts its own computed passes and fallbacks
    passes: int = 0
    stack_runs: int = 0  # stock passes that ran the first layer
    schedule: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    handles: list = field(default_factory=list, repr=False)
    _at_pass_start: int = 0

    def __post_init__(self) -> None:
        stats = self.fast.stats if self.fast is not None else {"computed_passes": 0, "fallback_reasons": {}}
        self._fast_start = (stats["computed_passes"], dict(stats["fallback_reasons"]))

    @property
    def computed(self) -> int:
        fast = self.fast.stats["computed_passes"] - self._fast_start[0] if self.fast is not None else 0
        return self.stack_runs + fast

    def watch(self, transformer) -> None:
        """Count ``transformer``'s passes, and its stock passes that run the decoder stack."""

        def count_pass(*_: Any) -> None:
            self._close_pass()
            self.passes += 1
            self._at_pass_start = self.computed

        def count_stack(*_: Any) -> None:
            self.stack_runs += 1

        self.handles = [transformer.register_forward_pre_hook(count_pass),
                        transformer.layers[0].register_forward_pre_hook(count_stack)]

    def _close_pass(self) -> None:
        if self.passes > len(self.schedule):
            self.schedule += "C" if self.computed > self._at_pass_start else "."

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self._close_pass()
        self.provenance = {"step_cache": {**self.record, "passes": self.passes, "passes_computed": self.computed,
                                          "schedule": self.schedule}}
        if self.fast is not None:
            start = self._fast_start[1]
            fallbacks = {reason: n - start.get(reason, 0) for reason, n in self.fast.stats["fallback_reasons"].items()
                         if n > start.get(reason, 0)}
            if fallbacks:
                self.provenance["fast_fallbacks"] = fallbacks


@contextlib.contextmanager
def call_cache(transformer, value: StepCache, fast=None) -> Iterator[CallCache]:
    """The request's cache (checked before any work by the backend) on ``transformer`` for the block, counted
    (``fast``: the fast forward if one is installed), removed after, whatever happens. A cache the caller enabled on
    the transformer is left in place and recorded; a request that sets one as well is refused (diffusers runs one
    cache at a time)."""
    enabled = getattr(transformer, "_cache_config", None)
    if value is not None and enabled is not None:
        raise ValidationError("step_cache", f"the pipeline's transformer already has a {type(enabled).__name__} "
                              "enabled (transformer.enable_cache), and diffusers runs one cache at a time.",
                              "call pipe.transformer.disable_cache() first, or leave step_cache out to run with the "
                              "cache you enabled.")
    config = None
    if isinstance(value, SeaCache):  # its fields given, diffusers' defaults for the rest
        from diffusers import SeaCacheConfig

        config = SeaCacheConfig(**{_DIFFUSERS_NAMES[name]: given for name, given in value.given().items()})
    if enabled is not None:  # the caller's own, left in place
        record = {"choice": "default", "source": "enabled on the pipeline by the caller",
                  "method": type(enabled).__name__}
    else:
        record = describe(value, "diffusers")
    call = CallCache(record, fast)
    call.watch(transformer)
    if config is not None:
        transformer.enable_cache(config)
    try:
        yield call
    finally:
        call.close()
        if config is not None:
            transformer.disable_cache()
