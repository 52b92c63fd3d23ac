"""``cosmos-helpers long-video``: a video longer than one generation, chunk after chunk; a rerun with the same
arguments skips the chunks already saved and finishes the joined video."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..presets import DEFAULT_SEED
from . import add_settings, add_where, backend, settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_argument_group("what to generate")
    what.add_argument("--prompt", action="append", required=True,
                      help="prompt of every chunk; repeat it for one prompt per chunk")
    what.add_argument("--chunks", type=int, default=None, help="number of chunks (default: one per --prompt)")
    what.add_argument("--conditioning-frames", type=int, default=None,
                      help="last frames of a chunk the next continues from (1 + 4k; default Cosmos3's v2v default, 5)")
    what.add_argument("--image", type=Path, help="start from this image (the first chunk is image2video)")
    what.add_argument("--sound", action="store_true", help="also generate a soundtrack, continuous across chunks")
    model = add_settings(parser, "model and settings (default: the profile's, the same for every chunk)",
                         frames_help="frames per chunk (4k+1)")
    model.add_argument("--seed", type=int, default=DEFAULT_SEED, help="chunk i uses seed + i (unless --seeds)")
    model.add_argument("--seeds", type=int, nargs="+", default=None, help="one seed per chunk")
    add_where(parser, name_default="long_video", name_help="output stem; chunks go to <name>_chunks/",
              overwrite_help="replace files another run left at these names")


def run(args: argparse.Namespace) -> int:
    from ..longvideo import long_video

    prompts = args.prompt[0] if len(args.prompt) == 1 else args.prompt
    options = {name: value for name, value in {**settings(args), "image": args.image}.items() if value is not None}
    joined = long_video(prompts, backend(args), chunks=args.chunks, out=args.out, name=args.name, seed=args.seed,
                        seeds=args.seeds, conditioning_frames=args.conditioning_frames, sound=args.sound,
                        overwrite=args.overwrite, **options)
    report = joined.provenance.get("continuity")
    if report:
        print(json.dumps({"join_steps": [round(s, 2) for s in report["join_steps"]],
                          "within_chunks_mean": round(report["within_mean"], 2),
                          "within_chunks_max": round(report["within_max"], 2)}), file=sys.stderr)
    print(joined.paths["media"])
    return 0
