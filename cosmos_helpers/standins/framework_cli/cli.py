"""The framework CLI stand-in's program (see the package docstring). Heavy imports (torch, diffusers) happen per
run, so ``--help``, a bad flag and a bad cache setting answer at once."""

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
from ...models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ...models.tiny_edge import MODEL_NAME as TINY_EDGE
from ...protocol import framework as fw
from ...protocol import variants
from ...specs import Sample
from ...specs.runs import SampleRun, given_fields
from .. import STANDIN_FILE
from . import MODULE
from .cache import cache_summary, check_cache_for, standin_cache

BANNER = ("[framework stand-in] cosmos_helpers.standins.framework_cli, NOT the NVIDIA Cosmos Framework: it runs the "
          "embedded tiny weights whatever --checkpoint-path says")
TINY_MODELS = ("tiny", TINY_DISTILLED, TINY_EDGE)  # the embedded weights, named as themselves


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framework_standin", description=BANNER, allow_abbrev=False)
    parser.add_argument("-i", "--input-files", nargs="+", required=True, type=Path)
    parser.add_argument("-o", "--output-dir", required=True, type=Path)
    parser.add_argument("--checkpoint-path", default=fw.DEFAULT_CHECKPOINT)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--resolution", default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--parallelism-preset", choices=("throughput", "latency"), default=None)
    for flag in ("guardrails", "diffusion-cache"):
        parser.add_argument(f"--{flag}", dest=flag.replace("-", "_"), action="store_true", default=None)
        parser.add_argument(f"--no-{flag}", dest=flag.replace("-", "_"), action="store_false")
    parser.add_argument("--diffusion-cache-thresh", type=float, default=None)
    parser.add_argument("--diffusion-cache-residual-order", type=int, default=None)
    return parser


def read_inputs(paths: list[Path]) -> list[tuple[dict, Path, str]]:
    """``(sample, input file, name)`` as the framework's ``from_files`` reads them."""
    import jsonschema

    schema = fw.sample_overrides_schema()
    samples = []
    for path in sorted(set(paths)):
        if path.suffix == ".jsonl":
            items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        else:
            items = [json.loads(path.read_text(encoding="utf-8"))]
        for line, item in enumerate(items):
            jsonschema.validate(item, schema)
            name = item.get("name") or fw.default_name(path, line)
            samples.append((item, path, name))
    return samples


def model_run(checkpoint: str) -> tuple[str, str]:
    """``(model the run is resolved for, embedded weights that run)`` for ``--checkpoint-path``: the tiny weights
    under their own names, a distilled checkpoint as the tiny weights in the distilled format, anything else as
    the tiny weights with that checkpoint's defaults."""
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
    check_cache_for(cache, resolved.model_mode)
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
