"""``cosmos-helpers controls CLIP --compute depth=MODEL,seg=MODEL``: depth / seg control videos for a run elsewhere,
as ``<out>/estimated_<kind>.mp4`` in the framework's supplied-control format (a sample's ``control_path``)."""

from __future__ import annotations

import argparse

from ..controls.estimation import DEFAULT_BATCH
from ..controls.videos import write_control_videos
from ..transfer.runner import parse_compute_controls


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("clip", help="the RGB video (or image) to compute the controls from")
    parser.add_argument("--compute", required=True, metavar="KIND=MODEL,...",
                        help="e.g. depth=depth-anything/Depth-Anything-V2-Small-hf,seg=nvidia/segformer-b0-finetuned-"
                        "ade-512-512 (tiny: offline random-weight stand-ins)")
    parser.add_argument("--out", default="outputs/controls", help="folder of the control videos")
    parser.add_argument("--max-frames", type=int, default=None, help="only the first N frames of the clip")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: CUDA if any)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="frames per forward pass")
    parser.add_argument("--overwrite", action="store_true", help="replace control videos made from something else")


def run(args: argparse.Namespace) -> int:
    models = parse_compute_controls(args.compute, flag="--compute")
    paths = write_control_videos(args.clip, models, args.out, max_frames=args.max_frames, device=args.device,
                                 batch_size=args.batch_size, overwrite=args.overwrite)
    for kind, path in paths.items():
        print(f"{kind}\t{path}")
    return 0
