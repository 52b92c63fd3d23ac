"""``cosmos-helpers transfer --spec SPEC.json``: run a Cosmos Framework transfer (or audio_image2video) spec as it is.

Backends: ``diffusers`` (in process; profile ``tiny`` by default, which uses the CPU tier 128 and caps the steps),
``framework`` (an NVIDIA/cosmos-framework checkout, ``--checkout``), ``vllm-omni`` (a server at ``--url``; the
spec becomes a multipart ``/v1/videos/sync`` request). The output is written as the framework does,
``<out>/<name>/vision.mp4`` (+ ``control_<hint>.mp4`` on diffusers), and its path is printed.
No heavy imports at module level: ``--help`` answers instantly.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

BACKENDS = ("diffusers", "framework", "vllm-omni")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", required=True, help="framework spec JSON (paths relative to its folder)")
    parser.add_argument("--backend", choices=BACKENDS, default="diffusers", help="where to run it (default diffusers)")
    parser.add_argument("--profile", default="tiny", help="tiny (default, CPU tier 128), nano or super")
    parser.add_argument("--model", default=None, help="diffusers model: tiny, a hub id or a folder (default: profile's)")
    parser.add_argument("--resolution", default=None, help="override the spec's resolution tier (e.g. 480)")
    parser.add_argument("--steps", type=int, default=None, help="override the spec's num_steps")
    parser.add_argument("--seed", type=int, default=None, help="override the spec's seed")
    parser.add_argument("--out", default="outputs/transfer", help="output folder (default outputs/transfer)")
    parser.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (framework backend)")
    parser.add_argument("--checkpoint", default="Cosmos3-Nano", help="framework --checkpoint-path")
    parser.add_argument("--gpus", type=int, default=1, help="framework: GPUs (torchrun when > 1)")
    parser.add_argument("--url", default=None, help="vLLM-Omni server URL (vllm-omni backend)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")


def run(args: argparse.Namespace) -> int:
    from cosmos_helpers.errors import OutputExistsError, ValidationError
    from cosmos_helpers.transfer.spec import load_spec

    spec = load_spec(args.spec, validate=False)
    spec.validate(tiers=("128", "256", "480", "720", "768"))
    name = spec.name or Path(args.spec).stem
    folder = Path(args.out) / name
    target = folder / "vision.mp4"
    if target.exists() and not args.overwrite:
        raise OutputExistsError(f"{target} exists; pass --overwrite or another --out.")
    if args.resolution is not None:
        spec.resolution = str(args.resolution)
    if args.steps is not None:
        spec.num_steps = int(args.steps)
    if args.seed is not None:
        spec.seed = int(args.seed)

    if args.backend == "diffusers":
        from cosmos_helpers import media
        from cosmos_helpers.transfer.diffusers_transfer import TransferGeneration, run_spec

        generation = run_spec(spec, model=args.model, profile=args.profile, num_steps=args.steps)
        if isinstance(generation, TransferGeneration):
            target = generation.save_framework_layout(args.out, name, quality=spec.resolved().video_save_quality,
                                                      overwrite=True)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            media.write_mp4(target, generation.frames, generation.fps, sound=generation.sound,
                            sample_rate=generation.sample_rate, overwrite=True)
    elif args.backend == "framework":
        if not args.checkout:
            raise ValidationError("--checkout", "the framework backend needs the cosmos-framework checkout.",
                                  "pass --checkout /path/to/cosmos-framework.")
        from cosmos_helpers.backends.framework import FrameworkBackend

        backend = FrameworkBackend(args.checkout, checkpoint=args.checkpoint, gpus=args.gpus)
        generation = backend.transfer(spec, name=name)
        folder.mkdir(parents=True, exist_ok=True)
        produced = Path(generation.provenance["output"])
        for path in produced.parent.glob("*.mp4"):
            shutil.copyfile(path, folder / path.name)
        target = folder / produced.name
    else:
        if not args.url:
            raise ValidationError("--url", "the vllm-omni backend needs a server URL.",
                                  "pass --url http://host:8000 (start one with `cosmos-helpers serve`).")
        from cosmos_helpers import media
        from cosmos_helpers.backends.vllm_omni import VllmOmniBackend

        with VllmOmniBackend(args.url) as client:
            generation = client.transfer(spec, profile=args.profile)
        media.write_mp4(target, generation.frames, generation.fps, overwrite=args.overwrite)
    print(target)
    return 0
