"""Step caching (SeaCache) in the real stack: each backend's default, its knobs and their names.

Read from diffusers 0.42.1 (``hooks/sea_cache.py:38-114``), vLLM-Omni 0.30.0 (``diffusion/data.py:602-606``,
``diffusion/cache/seacache/hook.py:140-160``, ``entrypoints/cli/serve.py:771-787``) and cosmos-framework 5eee9ed
(``scripts/inference.py:30``, ``model/generator/mot/diffusion_cache.py:415-431``,
``inference/common/args.py:922-936``); checked against ``tests/contracts/fixtures/step_cache-*.json``
(``scripts/refresh_contracts.py --only step-cache``).

Every backend runs the same rule (accumulate the relative L1 change of a Wiener-filtered vision indicator; skip the
decoder stack and add the extrapolated residual while it stays under the threshold), with its own defaults and knobs.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

DIFFUSERS_VERSION = "0.42.1"
VLLM_OMNI_VERSION = "0.30.0"
FRAMEWORK_COMMIT = "5eee9ed"

# Our field -> (diffusers SeaCacheConfig, vLLM-Omni --cache-config key, framework CLI flag); None: built in there.
FIELDS: Mapping[str, tuple[str | None, str | None, str | None]] = MappingProxyType({
    "threshold": ("threshold", "sea_threshold", "--diffusion-cache-thresh"),
    "residual_order": ("residual_order", "sea_residual_order", "--diffusion-cache-residual-order"),
    "max_consecutive": ("max_consecutive_cached", "sea_max_consecutive_cached", None),
    "retention_steps": ("retention_steps", None, None),
    "cache_end_steps": ("cache_end_steps", None, None),
    "power_exp": ("power_exp", "sea_power_exp", None),
})

# Each backend's own SeaCache values (what a field left None means there).
DIFFUSERS_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "threshold": 0.25, "residual_order": 1, "max_consecutive": 2, "retention_steps": 1, "cache_end_steps": 1,
    "power_exp": 3.0})
# vLLM-Omni's are the same; its first and last step are always full (seacache/hook.py:153-155), not configurable.
VLLM_OMNI_DEFAULTS: Mapping[str, Any] = DIFFUSERS_DEFAULTS
# The framework's: ret_steps 1, cutoff_from_end 1, no limit on consecutive skips (0 = no limit, as diffusers counts it).
FRAMEWORK_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {**DIFFUSERS_DEFAULTS, "threshold": 0.35, "max_consecutive": 0})

# Residual orders each backend runs: diffusers checks for 0 or 1; vLLM-Omni and the framework take any order >= 0
# (a Newton polynomial through the last order + 1 residuals; the framework documents 0, 1, 2), and a SeaCache here
# goes up to 2, quadratic. The stand-ins run diffusers' hooks, so they run 0 and 1 only.
RESIDUAL_ORDERS: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "diffusers": (0, 1), "vllm-omni": (0, 1, 2), "framework": (0, 1, 2)})

# The framework's DiffusionCache.Config name of each field (its Config has no limit on skips in a row: None).
FRAMEWORK_CONFIG_NAMES: Mapping[str, str | None] = MappingProxyType({
    "threshold": "diffusion_cache_thresh", "residual_order": "residual_order", "max_consecutive": None,
    "retention_steps": "ret_steps", "cache_end_steps": "cutoff_from_end", "power_exp": "power_exp"})

# What each backend does when the request leaves step_cache out.
BACKEND_DEFAULT: Mapping[str, str] = MappingProxyType({
    "diffusers": "off",  # SeaCache only after transformer.enable_cache(SeaCacheConfig())
    "vllm-omni": "the server's --cache-backend (vLLM-Omni's default: none)",
    "framework": "on: SeaCache 0.35",  # InferenceArgs.setup = OmniSetupOverrides(diffusion_cache=True)
    # the Ray Serve app builds its setup from the serve config, which leaves diffusion_cache at False
    "framework-serve": "the served setup's diffusion_cache (off unless the serve config turns it on)",
})

# vLLM-Omni's server flags: the cache is chosen when the server starts, for every request it serves.
VLLM_CACHE_BACKEND_FLAG = "--cache-backend"
VLLM_CACHE_CONFIG_FLAG = "--cache-config"
VLLM_SEA_CACHE = "sea_cache"
VLLM_CACHE_BACKENDS = ("none", "tea_cache", "cache_dit", "mag_cache", "sea_cache", "step_cache")

# The framework's switches (tyro booleans: --diffusion-cache / --no-diffusion-cache).
FRAMEWORK_ON_FLAG = "--diffusion-cache"
FRAMEWORK_OFF_FLAG = "--no-diffusion-cache"


def backend_defaults(backend: str) -> Mapping[str, Any]:
    return {"diffusers": DIFFUSERS_DEFAULTS, "vllm-omni": VLLM_OMNI_DEFAULTS,
            "framework": FRAMEWORK_DEFAULTS}[backend]
