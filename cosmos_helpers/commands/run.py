"""``cosmos-helpers run --input FILE``: run a Cosmos Framework input file, unchanged, on any backend.

Every sample of the file (a ``.json`` object or list, or ``.jsonl``) runs in order: text2image, text2video,
image2video, video2video (with or without sound), transfer, and audio_image2video (experimental, diffusers).
Outputs go where the framework writes them, ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame), with a
manifest ``vision.json``; a rerun skips finished samples. Values: ``--resolution`` / ``--steps`` / ``--seed`` >
the file's fields > the profile's defaults for fields the file leaves out (``tiny``: CPU tier 128, 9 frames,
4 steps) > the backend's own. ``transfer`` is an alias of this command. No heavy imports at module level.
"""

from __future__ import annotations

import argparse
import sys

from ..backends import NAMES

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "--spec", "-i", dest="input", required=True,
                        help="framework input file: .json (one sample or a list) or .jsonl; paths relative to it")
    parser.add_argument("--backend", choices=NAMES, default="diffusers", help="where to run (default diffusers)")
    parser.add_argument("--profile", default="tiny", help="tiny (default, CPU) | nano | super | edge: fills what the "
                        "file leaves out, and the model")
    parser.add_argument("--model", default=None, help="another model than the profile's: tiny, a hub id or a folder")
    parser.add_argument("--out", default="outputs", help="output folder (default ./outputs): <out>/<name>/vision.*")
    parser.add_argument("--resolution", default=None, help="override every sample's resolution tier (e.g. 480)")
    parser.add_argument("--steps", type=int, default=None, help="override every sample's num_steps")
    parser.add_argument("--seed", type=int, default=None, help="override every sample's seed")
    parser.add_argument("--url", default=None, help="vLLM-Omni server URL (--backend vllm-omni)")
    parser.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (--backend framework)")
    parser.add_argument("--gpus", type=int, default=1, help="framework: GPUs per run (torchrun when > 1)")
    parser.add_argument("--dry-run", action="store_true",
                        help="framework: write each run folder (input + command) and print it, without launching")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs of other runs")


def run(args: argparse.Namespace) -> int:
    from ..backends import backend_by_name
    from ..errors import ValidationError
    from ..specs.load import load_inputs
    from ..transfer.runner import run_spec

    samples = load_inputs(args.input)
    overrides = {"resolution": args.resolution, "num_steps": args.steps, "seed": args.seed}
    if args.dry_run and args.backend != "framework":
        raise ValidationError("--dry-run", "only the framework backend has a run folder to write.",
                              "add --backend framework --checkout PATH, or drop --dry-run.")
    backend = backend_by_name(args.backend, url=args.url, checkout=args.checkout, gpus=args.gpus)
    if args.dry_run:
        return _dry_run(backend, samples, args, overrides)
    for sample in samples:
        generation = run_spec(sample, backend=backend, profile=args.profile, model=args.model, out=args.out,
                              overrides=overrides, overwrite=args.overwrite)
        if generation.provenance.get("skipped"):
            print(f"{sample.name}: already done", file=sys.stderr)
        print(generation.paths["media"])
    return 0


def _dry_run(backend, samples, args: argparse.Namespace, overrides: dict) -> int:
    from ..presets import get_profile
    from ..specs.runs import check_backend, given_fields

    model = args.model or get_profile(args.profile).model
    for sample in samples:
        resolved = sample.resolved(model=model, overrides=overrides)  # the framework's defaults, not the profile's
        check_backend(sample, resolved, "framework", given_fields(sample, overrides))
        run = backend.prepare(sample.payload(), name=sample.name, model=resolved.model, overrides=overrides)
        print(run.folder)
        print("  " + " ".join(run.command), file=sys.stderr)
    return 0
