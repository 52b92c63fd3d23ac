"""The stand-in server's step cache: vLLM-Omni's ``--cache-backend`` / ``--cache-config``, picked at start for every
request and run as a :class:`~cosmos_helpers.SeaCache` by diffusers' hooks; logged at start as vLLM-Omni does and
recorded in the ``/v1/models`` card. Where it differs (README, "Where the stand-in differs") is refused at start,
before the model loads: a misspelt ``--cache-config`` key, which vLLM-Omni would keep and ignore, included.
"""

from __future__ import annotations

import json
from typing import Any

from ...backends.vllm_serve import cache_config
from ...errors import ValidationError
from ...protocol import step_cache as facts
from ...step_cache import SeaCache, StepCache

_KEYS = {names[1]: ours for ours, names in facts.FIELDS.items() if names[1]}  # --cache-config key -> our field
_ALIASES = ("stepcache", "step_cache_dit")  # other names vLLM-Omni's selector accepts for step_cache


def server_cache(backend: str | None, config: str | None) -> StepCache:
    """The cache every request of this server runs (``None``: none, vLLM-Omni's default), from the two flags."""
    name = (backend or "none").strip().lower()
    if name not in (*facts.VLLM_CACHE_BACKENDS, *_ALIASES):
        raise ValidationError(facts.VLLM_CACHE_BACKEND_FLAG, f"unsupported cache backend {backend!r}.",
                              f"use {facts.VLLM_SEA_CACHE} or none (vLLM-Omni {facts.VLLM_OMNI_VERSION} also knows "
                              f"{', '.join(n for n in facts.VLLM_CACHE_BACKENDS if n not in ('none', 'sea_cache'))}).")
    if name not in ("none", facts.VLLM_SEA_CACHE):
        raise ValidationError(facts.VLLM_CACHE_BACKEND_FLAG, f"{name}: the stand-in runs SeaCache only (diffusers' "
                              "hooks), and none.", f"use --cache-backend {facts.VLLM_SEA_CACHE}, or real vLLM-Omni.")
    values = _config(config)
    if name == "none":
        if values:
            raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, "settings without a cache backend would be unused.",
                                  f"add --cache-backend {facts.VLLM_SEA_CACHE}, or drop --cache-config.")
        return None
    try:
        cache = SeaCache(**{_KEYS[key]: value for key, value in values.items()})
    except ValidationError as error:  # named by the key the flag took
        key = facts.FIELDS[error.field.rsplit(".", 1)[-1]][1]
        raise ValidationError(f"{facts.VLLM_CACHE_CONFIG_FLAG} {key}", error.problem, error.fix) from None
    runs = facts.RESIDUAL_ORDERS["diffusers"]
    if cache.residual_order is not None and cache.residual_order not in runs:
        raise ValidationError(f"{facts.VLLM_CACHE_CONFIG_FLAG} {facts.FIELDS['residual_order'][1]}",
                              f"{cache.residual_order}: the stand-in runs diffusers' SeaCache, which extrapolates with "
                              f"order {' or '.join(map(str, runs))} (vLLM-Omni takes any order).",
                              f"use {' or '.join(map(str, runs))}, or real vLLM-Omni.")
    return cache


def _config(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"not JSON ({exc.msg}).",
                              'pass a JSON object, e.g. \'{"sea_threshold": 0.3}\'.') from None
    if not isinstance(values, dict):
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"expected a JSON object, got {type(values).__name__}.",
                              'pass e.g. \'{"sea_threshold": 0.3}\'.')
    unknown = sorted(set(values) - set(_KEYS))
    if unknown:
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"unknown key(s) {', '.join(unknown)} for sea_cache "
                              "(vLLM-Omni would keep and ignore them).", f"use only {', '.join(sorted(_KEYS))}.")
    return values


def describe_server(cache: StepCache) -> dict[str, Any]:
    """The setting as the server reports it: the two flags' values and every SeaCache value it runs."""
    if cache is None:
        return {"cache_backend": "none"}
    return {"cache_backend": facts.VLLM_SEA_CACHE, "cache_config": cache_config(cache),
            "values": cache.values_for("vllm-omni")}


def log_line(cache: StepCache) -> str:
    """What the server prints at start, as vLLM-Omni logs it when it enables SeaCache (seacache/backend.py)."""
    if cache is None:
        return "cache backend: none (every step computed)"
    v = cache.values_for("vllm-omni")
    return (f"SeaCache enabled (threshold={v['threshold']}, residual_order={v['residual_order']}, "
            f"max_consecutive_cached={v['max_consecutive']}, power_exp={v['power_exp']})")
