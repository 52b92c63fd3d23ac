"""``cosmos-helpers run --input FILE`` (alias ``transfer``): run a Cosmos Framework input file, unchanged, anywhere.

Samples run in order into ``<out>/<name>/vision.mp4`` (``.jpg`` for one frame) with a manifest; a rerun skips
finished ones. On diffusers and vLLM-Omni a value comes from the command line, else the file, else the profile, else
the backend; on the framework the profile only picks the model and guardrails.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..specs.load import load_inputs
from ..transfer.runner import parse_compute_controls, plan_spec, run_spec
from . import add_backend_arguments, add_model_arguments, add_step_cache_argument, backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "--spec", "-i", dest="input", required=True,
                        help="framework input file: .json (one sample or a list) or .jsonl; paths relative to it")
    add_backend_arguments(parser)
    add_model_arguments(parser, "picks the model and guardrails; on diffusers and vLLM-Omni it also fills what the "
                        "file leaves out (on the framework, the framework's own defaults do)")
    parser.add_argument("--out", default="outputs", help="output folder (default ./outputs): <out>/<name>/vision.*")
    parser.add_argument("--resolution", default=None, help="override every sample's resolution tier (e.g. 480)")
    parser.add_argument("--steps", type=int, default=None, help="override every sample's num_steps")
    parser.add_argument("--seed", type=int, default=None, help="override every sample's seed")
    parser.add_argument("--guardrails", action=argparse.BooleanOptionalAction, default=None,
                        help="run the Cosmos guardrails (default: the profile's choice)")
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
    how = dict(backend=backend(args), profile=args.profile, model=args.model, out=args.out, overrides=overrides,
               guardrails=args.guardrails, compute_controls=compute, step_cache=args.step_cache)
    for sample in samples:
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
