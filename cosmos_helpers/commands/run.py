"""``cosmos-helpers run --input FILE``: run a Cosmos Framework input file, unchanged, on any backend.

Every sample of the file (a ``.json`` object or list, or ``.jsonl``) runs in order: text2image, text2video,
image2video, video2video (with or without sound), transfer, and audio_image2video (experimental, diffusers).
Outputs go where the framework writes them, ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame), with a
manifest ``vision.json``; a rerun skips finished samples. Values on diffusers and vLLM-Omni: ``--resolution`` /
``--steps`` / ``--seed`` > the file's fields > the profile's defaults for fields the file leaves out (``tiny``: CPU
tier 128, 9 frames, 4 steps) > the backend's own. On the framework the profile only picks the model (and the
guardrails): the framework applies its own defaults to what the file leaves out. ``transfer`` is an alias of this
command. ``--compute-controls depth=MODEL,seg=MODEL`` computes those controls from the clip first (written as
``<out>/<name>/estimated_<kind>.mp4``). ``--dry-run`` prints what would run (on the framework: writes each run
folder) without running it. No heavy imports at module level.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..backends import NAMES, backend_by_name
from ..presets import DEFAULT_PROFILE, PROFILES
from ..specs.load import load_inputs
from ..transfer.estimated import parse_compute_controls
from ..transfer.runner import plan_spec, run_spec
from .generate import add_step_cache_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "--spec", "-i", dest="input", required=True,
                        help="framework input file: .json (one sample or a list) or .jsonl; paths relative to it")
    parser.add_argument("--backend", choices=NAMES, default="diffusers", help="where to run (default diffusers)")
    parser.add_argument("--profile", choices=tuple(PROFILES), default=DEFAULT_PROFILE,
                        help=f"picks the model and guardrails (default {DEFAULT_PROFILE}); on diffusers and vLLM-Omni "
                        "it also fills what the file leaves out (on the framework, the framework's own defaults do)")
    parser.add_argument("--model", default=None, help="another model than the profile's: tiny, a hub id or a folder")
    parser.add_argument("--out", default="outputs", help="output folder (default ./outputs): <out>/<name>/vision.*")
    parser.add_argument("--resolution", default=None, help="override every sample's resolution tier (e.g. 480)")
    parser.add_argument("--steps", type=int, default=None, help="override every sample's num_steps")
    parser.add_argument("--seed", type=int, default=None, help="override every sample's seed")
    parser.add_argument("--guardrails", action=argparse.BooleanOptionalAction, default=None,
                        help="run the Cosmos guardrails (default: the profile's choice)")
    parser.add_argument("--url", default=None, help="server URL (--backend vllm-omni, or framework-serve: the Cosmos "
                        "Framework's Ray Serve app)")
    parser.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (--backend framework)")
    parser.add_argument("--gpus", type=int, default=1,
                        help="GPUs per run: diffusers workers (one per GPU), framework torchrun; 1 for vllm-omni")
    parser.add_argument("--dry-run", action="store_true",
                        help="run nothing: print what would run (framework: write each run folder, input + command)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs of other runs")
    parser.add_argument("--compute-controls", default=None, metavar="KIND=MODEL,...",
                        help="compute depth/seg controls from each sample's vision_path with the transformers models "
                        "named (e.g. depth=depth-anything/Depth-Anything-V2-Small-hf,seg=nvidia/segformer-b0-"
                        "finetuned-ade-512-512; tiny: offline stand-ins) and transfer with them")
    parser.add_argument("--control-device", default=None, help="where the control models run (default: CUDA if any)")
    add_step_cache_argument(parser)


def run(args: argparse.Namespace) -> int:
    compute = parse_compute_controls(args.compute_controls)
    samples = load_inputs(args.input, computed=tuple(compute or ()))
    overrides = {"resolution": args.resolution, "num_steps": args.steps, "seed": args.seed}
    backend = backend_by_name(args.backend, url=args.url, checkout=args.checkout, gpus=args.gpus)
    for sample in samples:
        how = dict(backend=backend, profile=args.profile, model=args.model, out=args.out, overrides=overrides,
                   guardrails=args.guardrails, compute_controls=compute, step_cache=args.step_cache)
        if args.dry_run:
            planned = plan_spec(sample, **how)
            if planned.folder is not None:  # a framework run folder; command on stderr
                print(planned.folder)
                print("  " + " ".join(planned.command or ()), file=sys.stderr)
            else:  # the resolved values of a run elsewhere, one JSON line
                print(json.dumps(planned.to_dict(), default=str))
            continue
        result = run_spec(sample, **how, overwrite=args.overwrite, control_device=args.control_device)
        if result.provenance.get("skipped"):
            print(f"{sample.name}: already done", file=sys.stderr)
        print(result.paths["media"])
    return 0
