"""Step caching as one request option: ``GenerationRequest(step_cache=None | "off" | SeaCache(...))``.

Every backend ships SeaCache for Cosmos 3: off in diffusers and vLLM-Omni, **on** in the framework's CLI. ``None``
keeps that backend's default (the manifest records which), ``"off"`` runs every step in full, a :class:`SeaCache`
turns it on (:mod:`cosmos_helpers.protocol.step_cache`). A backend refuses before any work what it cannot honour.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import Any, Union

from .errors import ValidationError
from .protocol import step_cache as facts

OFF = "off"
_BACKENDS = ("diffusers", "vllm-omni", "framework")  # the order of facts.FIELDS' columns


@dataclass(frozen=True)
class SeaCache:
    """SeaCache settings; a field left ``None`` takes the backend's own value.

    Args:
        threshold: accumulated relative-L1 budget of the vision indicator before a step runs in full again (larger:
            more steps skipped, faster, further from the uncached result). diffusers / vLLM-Omni 0.25, framework 0.35.
        residual_order: 0 reuses the last residual, 1 extrapolates linearly (2, quadratic: framework, vLLM-Omni).
        max_consecutive: at most this many skipped steps in a row per guidance branch (0: no limit, the framework's
            only setting); diffusers / vLLM-Omni 2.
        retention_steps / cache_end_steps: steps at the start / end always run in full (1; diffusers lets you change).
        power_exp: exponent of the clean-signal power prior of the indicator's filter (3.0 everywhere).
    """

    threshold: float | None = None
    residual_order: int | None = None
    max_consecutive: int | None = None
    retention_steps: int | None = None
    cache_end_steps: int | None = None
    power_exp: float | None = None

    def __post_init__(self) -> None:
        if self.threshold is not None and not (_number(self.threshold) and self.threshold >= 0):
            raise ValidationError("step_cache.threshold", f"{self.threshold!r} is not a number of at least 0.",
                                  "pass e.g. SeaCache(threshold=0.25); larger values skip more steps.")
        if self.power_exp is not None and not (_number(self.power_exp) and self.power_exp > 0):
            raise ValidationError("step_cache.power_exp", f"{self.power_exp!r} is not a number above 0.",
                                  "leave it out (3.0 on every backend).")
        for name in ("residual_order", "max_consecutive", "retention_steps", "cache_end_steps"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                raise ValidationError(f"step_cache.{name}", f"{value!r} is not a whole number of at least 0.",
                                      f"pass an int, or leave {name} out for the backend's own value.")
        if self.residual_order is not None and self.residual_order > 2:
            raise ValidationError("step_cache.residual_order", f"{self.residual_order} is not 0, 1 or 2.",
                                  "use 0 (reuse the last residual) or 1 (extrapolate linearly).")

    def __repr__(self) -> str:  # the fields given, as a user would write them (it goes into fixes and captions)
        return f"SeaCache({', '.join(f'{k}={v!r}' for k, v in self.given().items())})"

    def given(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    def values_for(self, backend: str) -> dict[str, Any]:
        return {**facts.backend_defaults(backend), **self.given()}


StepCache = Union[None, str, SeaCache]


def check_step_cache(value: Any) -> StepCache:
    """The request's ``step_cache`` as stored: ``None``, ``"off"`` or a :class:`SeaCache` (``"sea"``: the default)."""
    if value is None or isinstance(value, SeaCache):
        return value
    if isinstance(value, str) and value.strip().lower() in (OFF, "sea", "sea_cache", "seacache"):
        return OFF if value.strip().lower() == OFF else SeaCache()
    raise ValidationError("step_cache", f"{value!r} is not a step-cache choice.",
                          "pass None (the backend's default), 'off', or SeaCache(threshold=...) "
                          "(from cosmos_helpers import SeaCache).")


def parse_step_cache(text: str) -> StepCache:
    """The command-line form ``off | sea | sea:THRESHOLD``."""
    head, _, threshold = text.strip().partition(":")
    if not threshold:
        return check_step_cache(head)
    if head.strip().lower() != "sea":
        raise ValidationError("--step-cache", f"{text!r} is not off, sea or sea:THRESHOLD.",
                              "e.g. --step-cache sea:0.3")
    try:
        number = float(threshold)
    except ValueError as exc:
        raise ValidationError("--step-cache", f"{threshold!r} is not a number.", "e.g. --step-cache sea:0.3") from exc
    return SeaCache(threshold=number)


def step_cache_argument(text: str) -> StepCache:
    """:func:`parse_step_cache` as an ``argparse`` type: a bad value is a usage error with our message."""
    try:
        return parse_step_cache(text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def step_cache_record(value: StepCache) -> Any:
    """The JSON form in a request's record (and fingerprint): ``"off"`` or ``{"sea_cache": {given}}``."""
    return value if not isinstance(value, SeaCache) else {"sea_cache": value.given()}


def describe(value: StepCache, backend: str) -> dict[str, Any]:
    """What ``backend`` runs for ``value``, for the manifest: the choice, where it came from, and the values."""
    if value is None:
        out: dict[str, Any] = {"choice": "default", "source": f"{backend} default: {facts.BACKEND_DEFAULT[backend]}"}
        if backend == "framework":
            out.update(method="sea_cache", values=dict(facts.FRAMEWORK_DEFAULTS))
        elif backend == "diffusers":
            out["method"] = OFF
        return out
    if value == OFF:
        return {"choice": OFF, "source": "request", "method": OFF}
    return {"choice": "sea_cache", "source": "request", "method": "sea_cache", "values": value.values_for(backend)}


def check_for_backend(value: StepCache, backend: str) -> None:
    """Refuse, before any work, a SeaCache field ``backend`` has no knob for (unless it asks for the value that
    backend has built in), or a residual order it does not run."""
    if not isinstance(value, SeaCache):
        return
    defaults = facts.backend_defaults(backend)
    for name, given in value.given().items():
        knobs = dict(zip(_BACKENDS, facts.FIELDS[name]))  # backend -> its setting's name, or None
        if knobs[backend] is None and given != defaults[name]:
            takers = ", ".join(other for other, knob in knobs.items() if knob is not None)
            raise ValidationError(f"step_cache.{name}", f"the {backend} backend has no setting for it: its SeaCache "
                                  f"always uses {defaults[name]!r} (you asked for {given!r}).",
                                  f"leave {name} out (or set it to {defaults[name]!r}), or run on a backend that "
                                  f"takes it ({takers}).")
    order, orders = value.residual_order, facts.RESIDUAL_ORDERS[backend]
    if order is not None and order not in orders:
        takers = ", ".join(other for other, runs in facts.RESIDUAL_ORDERS.items() if order in runs)
        raise ValidationError("step_cache.residual_order", f"the {backend} backend extrapolates with order "
                              f"{' or '.join(map(str, orders))}, not {order}.",
                              f"use residual_order={orders[-1]}, or a backend that runs order {order} ({takers}).")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
