"""The stand-in's diffusion cache: the framework CLI's ``--[no-]diffusion-cache`` modelled with diffusers' SeaCache.

The real inference CLI caches **by default** (``scripts/inference.py``: ``OmniSetupOverrides.model_construct(
diffusion_cache=True)``) with ``DiffusionCache.Config``'s values (``model/generator/mot/diffusion_cache.py``):
threshold 0.35, residual order 1, the first and the last step always computed, power prior 3.0 and no limit on skips
in a row; ``--diffusion-cache-thresh`` and ``--diffusion-cache-residual-order`` replace the first two and
``--no-diffusion-cache`` turns it off. The stand-in does the same with diffusers' own ``SeaCacheConfig`` hooks (a
request ``step_cache`` on ``DiffusersBackend``), at those values and ``max_consecutive_cached=0`` (no limit): the
closest diffusers comes. Where it differs from the framework's ``diffusion_cache.py``:

* the boundary: diffusers skips the decoder stack and the final norms (``_run_decoder_stack``) and adds back their
  extrapolated residual; the framework skips the whole ``net.language_model`` forward, reuses its understanding
  (text) output as it was and extrapolates only the generation residual, so the decode heads run on every step;
* the bookkeeping: diffusers keeps one state per guidance branch through the pipeline's ``cache_context`` and the
  scheduler's sigma; the framework tracks steps and samples from the vision timesteps of successive ``denoise``
  calls, numbers the guidance passes by position and maps a timestep to sigma by ``t / 1000``;
* residual order 2 (quadratic): the framework takes it, diffusers runs 0 or 1, so the stand-in refuses 2 with an
  ``ERROR`` line rather than running 1;
* counting: the framework logs ``full=`` / ``skipped=`` per sample; the stand-in counts the guidance passes that ran
  the decoder stack and writes them to its log and to ``standin.json`` (``step_cache``).

Calls with no noisy vision (action-only and sound-only packs: inverse dynamics) run in full in both, as the
framework's ``_batch_supports_diffusion_cache`` and diffusers' hook decide. The experimental audio_image2video loop
of this package has no cache, so such a sample needs ``--no-diffusion-cache`` here.
"""

from __future__ import annotations

import argparse
from typing import Any

from ...errors import ValidationError
from ...protocol import framework as fw
from ...protocol import step_cache as facts
from ...step_cache import OFF, SeaCache, StepCache

_FLAGS = {name: names[2] for name, names in facts.FIELDS.items()}


def standin_cache(args: argparse.Namespace) -> StepCache:
    """``"off"`` for ``--no-diffusion-cache``, else SeaCache with the framework's values and the flags' (a residual
    order diffusers cannot run is refused before any input is read)."""
    if args.diffusion_cache is False:
        return OFF
    order = args.diffusion_cache_residual_order
    runs = facts.RESIDUAL_ORDERS["diffusers"]
    if order is not None and order not in runs:
        raise ValidationError(_FLAGS["residual_order"], f"{order}: the stand-in runs diffusers' SeaCache, which "
                              f"extrapolates with order {' or '.join(map(str, runs))} only (the framework takes "
                              f"{order}; the stand-in does not model it).",
                              f"pass {_FLAGS['residual_order']} {runs[-1]} (or leave it out: "
                              f"{facts.FRAMEWORK_DEFAULTS['residual_order']}), or run the real framework.")
    given = {"threshold": args.diffusion_cache_thresh, "residual_order": order}
    return SeaCache(**{**facts.FRAMEWORK_DEFAULTS, **{k: v for k, v in given.items() if v is not None}})


def check_cache_for(cache: StepCache, mode: str) -> None:
    """Refuse, before any model loads, a cached run of a sample the stand-in's loops cannot cache."""
    if isinstance(cache, SeaCache) and mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError(facts.FRAMEWORK_ON_FLAG, f"the stand-in's experimental {mode} loop has no step cache "
                              "(the framework caches this mode; its cache is on by default).",
                              f"pass {facts.FRAMEWORK_OFF_FLAG} for this sample, or run the real framework.")


def cache_summary(cache: StepCache, provenance: dict[str, Any]) -> dict[str, Any]:
    """What ran (the cache and the guidance passes the run computed), for the log (``text``) and ``standin.json``."""
    passes, computed = provenance.get("passes"), provenance.get("passes_computed")
    values = cache.given() if isinstance(cache, SeaCache) else None
    record = {"ran": "sea_cache" if values else OFF, "values": values, "passes": passes, "passes_computed": computed,
              "schedule": provenance.get("schedule")}
    setting = (f"on (threshold {values['threshold']:g}, residual order {values['residual_order']}, no limit on skips "
               "in a row)" if values else "off")
    counted = f": computed {computed} of {passes} guidance passes" if passes is not None else ""
    return {"record": record, "text": setting + counted}
