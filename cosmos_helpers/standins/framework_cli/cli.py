"""The framework CLI stand-in's program (see the package docstring). Heavy imports (torch, diffusers) happen per
run, so ``--help``, a bad flag and a bad cache setting answer at once.

The diffusion cache: the real inference CLI caches **by default** (``scripts/inference.py``:
``OmniSetupOverrides.model_construct(diffusion_cache=True)``) with ``DiffusionCache.Config``'s values
(``protocol.step_cache.FRAMEWORK_DEFAULTS``); the stand-in does the same with diffusers' own ``SeaCacheConfig`` hooks
at those values, the closest diffusers comes. It differs:

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

Calls with no noisy vision (action-only and sound-only packs: inverse dynamics) run in full in both, as the framework's
``_batch_supports_diffusion_cache`` and diffusers' hook decide; this package's audio_image2video loop has no cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from ... import media
from ...backends.framework_run import TINY_MODELS
from ...errors import ValidationError
from ...models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ...protocol import framework as fw
from ...protocol import step_cache as facts
from ...protocol import variants
from ...specs import Sample
from ...specs.runs import SampleRun, given_fields
from ...step_cache import OFF, SeaCache, StepCache
from .. import STANDIN_FILE
from . import MODULE

BANNER = ("[framework stand-in] cosmos_helpers.standins.framework_cli, NOT the NVIDIA Cosmos Framework: it runs the "
          "embedded tiny weights whatever --checkpoint-path says")
_ORDER_FLAG = facts.FIELDS["residual_order"][2]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framework_standin", description=BANNER, allow_abbrev=False)
    parser.add_argument("-i", "--input-files", nargs="+", required=True, type=Path)
    parser.add_argument("-o", "--output-dir", required=True, type=Path)
    parser.add_argument("--checkpoint-path", default=fw.DEFAULT_CHECKPOINT)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--resolution", default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--parallelism-preset", choices=("throughput", "latency"), default=None)
    parser.add_argument("--guardrails", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--diffusion-cache", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--diffusion-cache-thresh", type=float, default=None)
    parser.add_argument("--diffusion-cache-residual-order", type=int, default=None)
    return parser


def read_inputs(paths: list[Path]) -> list[tuple[dict, Path, str]]:
    """``(sample, input file, name)`` as the framework's ``from_files`` reads them."""
    import jsonschema

    schema = fw.sample_overrides_schema()
    samples = []
    for path in sorted(set(paths)):
        text = path.read_text(encoding="utf-8")
        items = [json.loads(row) for row in text.splitlines() if row] if path.suffix == ".jsonl" else [json.loads(text)]
        for line, item in enumerate(items):
            jsonschema.validate(item, schema)
            name = item.get("name") or fw.default_name(path, line)
            samples.append((item, path, name))
    return samples


def model_run(checkpoint: str) -> tuple[str, str]:
    """``(model the run is resolved for, embedded weights that run)`` for ``--checkpoint-path``: a framework checkpoint
    runs the tiny weights with its defaults (a distilled one, in the distilled format)."""
    if checkpoint in TINY_MODELS:
        return checkpoint, checkpoint
    hub = {v: k for k, v in fw.CHECKPOINTS.items()}.get(checkpoint, checkpoint)
    return hub, TINY_DISTILLED if hub in variants.DISTILLED_CHECKPOINTS else "tiny"


def run_one(item: dict, path: Path, name: str, args: argparse.Namespace, cache: Any) -> Path:
    from ...backends.diffusers import DiffusersBackend

    sample = Sample.from_dict(item, base_dir=path.parent, name=name, source=path)
    overrides = {"seed": args.seed, "resolution": args.resolution, "num_steps": args.num_steps}
    folder = args.output_dir / name
    model, weights = model_run(args.checkpoint_path)
    # guardrails: the flag given, else the framework's default (on): the tiny diffusers run honours them too
    resolved = sample.resolved(model=model, overrides=overrides, output_dir=folder, guardrails=args.guardrails)
    backend, given = DiffusersBackend(progress=False), given_fields(sample, overrides)
    backend.check_sample(sample, resolved, given)
    if isinstance(cache, SeaCache) and resolved.model_mode in fw.SOUND_CONDITION_MODES:  # before any model loads
        raise ValidationError(facts.FRAMEWORK_ON_FLAG, f"the stand-in's experimental {resolved.model_mode} loop has "
                              "no step cache (the framework caches this mode; its cache is on by default).",
                              f"pass {facts.FRAMEWORK_OFF_FLAG} for this sample, or run the real framework.")
    resolved = backend.localize(resolved, given, progress=False)
    if weights == TINY_DISTILLED:  # the framework samples a distilled checkpoint on its fixed schedule with
        # guidance 1, whatever the sample says (inference.py:1575-1580)
        resolved = dataclasses.replace(resolved, num_steps=len(variants.DISTILLED_T_LIST),
                                       guidance=variants.DISTILLED_GUIDANCE, shift=variants.DISTILLED_SHIFT)
    resolved = dataclasses.replace(resolved, model=weights, profile=weights)
    run = SampleRun.create(sample, resolved, overrides, step_cache=cache)
    generation = backend.run_sample(run, progress=lambda done, total: print(f"step {done}/{total}", flush=True))
    target = save_outputs(generation, item, folder)
    ran = cache_summary(cache, generation.provenance.get("step_cache") or {})
    print(f"[framework stand-in] {name}: diffusion cache {ran['text']}", flush=True)
    # standin.json beside the output: what made it and what its cache computed (the real framework writes none)
    record = {"of": "framework", "version": fw.VERSION, "program": MODULE, "checkpoint": args.checkpoint_path,
              "model_run": weights, "step_cache": ran["record"]}
    (folder / STANDIN_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return target


def save_outputs(generation: Any, item: dict, folder: Path) -> Path:
    """The framework's files for one sample: ``vision.*``, an action sample's ``sample_outputs.json``, controls."""
    target = folder / fw.vision_file(generation.num_frames)
    if generation.finished is not None:
        generation.finished.publish(target, overwrite=True)
    else:
        media.write_mp4(target, generation.frames, generation.fps, sound=generation.sound,
                        sample_rate=generation.sample_rate, crf=generation.crf, overwrite=True)
    if generation.actions is not None:  # inference.py:1796-1806: the predicted actions, cut to the raw width
        record = {"args": item, "outputs": [{"content": {"action": generation.actions.tolist()},
                                             "files": [str(target)]}]}
        (folder / fw.SAMPLE_OUTPUTS).write_text(json.dumps(record), encoding="utf-8")
    for kind, frames in (getattr(generation, "controls", None) or {}).items():
        media.write_mp4(folder / fw.CONTROL_FILE.format(hint=kind, suffix=".mp4"), frames, generation.fps,
                        overwrite=True)
    return target


def standin_cache(args: argparse.Namespace) -> StepCache:
    """``"off"`` for ``--no-diffusion-cache``, else SeaCache with the framework's values and the flags' (a residual
    order diffusers cannot run is refused before any input is read)."""
    if args.diffusion_cache is False:
        return OFF
    order = args.diffusion_cache_residual_order
    runs = facts.RESIDUAL_ORDERS["diffusers"]
    if order is not None and order not in runs:
        raise ValidationError(_ORDER_FLAG, f"{order}: the stand-in runs diffusers' SeaCache, which "
                              f"extrapolates with order {' or '.join(map(str, runs))} only (the framework takes "
                              f"{order}; the stand-in does not model it).",
                              f"pass {_ORDER_FLAG} {runs[-1]} (or leave it out: "
                              f"{facts.FRAMEWORK_DEFAULTS['residual_order']}), or run the real framework.")
    given = {"threshold": args.diffusion_cache_thresh, "residual_order": order}
    return SeaCache(**{**facts.FRAMEWORK_DEFAULTS, **{k: v for k, v in given.items() if v is not None}})


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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # unknown flags are an error (exit code 2), as in the real CLI
    print(BANNER, flush=True)
    os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")
    try:
        cache = standin_cache(args)  # a setting the stand-in cannot run fails before any input is read
        if os.environ.get("OMP_NUM_THREADS"):
            import torch

            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        for item, path, name in read_inputs(args.input_files):
            print(f"saved {run_one(item, path, name, args, cache)}", flush=True)
    except Exception as exc:  # the framework logs the error and exits non-zero
        traceback.print_exc(file=sys.stdout)
        message = getattr(exc, "message", None) or str(exc)
        print(f"ERROR: {type(exc).__name__}: {message.splitlines()[0] if message else ''}", flush=True)
        return 1
    return 0
