"""``cosmos-helpers long-video``: a video longer than one generation, chunk after chunk, resumable.

``--prompt`` once (with ``--chunks N``) for the same prompt on every chunk, or several times for one prompt per
chunk. A rerun with the same arguments skips the chunks already saved, and finishes the joined video.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..backends import NAMES, backend_by_name
from ..presets import DEFAULT_PROFILE, DEFAULT_SEED, PROFILES
from .generate import add_step_cache_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_argument_group("what to generate")
    what.add_argument("--prompt", action="append", required=True,
                      help="prompt of every chunk; repeat it for one prompt per chunk")
    what.add_argument("--chunks", type=int, default=None, help="number of chunks (default: one per --prompt)")
    what.add_argument("--conditioning-frames", type=int, default=None,
                      help="last frames of a chunk the next continues from (1 + 4k; default Cosmos3's v2v default, 5)")
    what.add_argument("--image", type=Path, help="start from this image (the first chunk is image2video)")
    what.add_argument("--sound", action="store_true", help="also generate a soundtrack, continuous across chunks")
    model = parser.add_argument_group("model and settings (default: the profile's, the same for every chunk)")
    model.add_argument("--profile", default=DEFAULT_PROFILE, choices=tuple(PROFILES))
    model.add_argument("--model", default=None, help="override the profile's model: tiny, a hub id or a folder")
    model.add_argument("--tier", default=None, help="resolution tier: 256, 480, 720, ...")
    model.add_argument("--aspect-ratio", default=None, help="16,9 | 4,3 | 1,1 | 3,4 | 9,16")
    model.add_argument("--frames", type=int, default=None, help="frames per chunk (4k+1)")
    model.add_argument("--fps", type=float, default=None)
    model.add_argument("--steps", type=int, default=None)
    model.add_argument("--guidance", type=float, default=None)
    model.add_argument("--seed", type=int, default=DEFAULT_SEED, help="chunk i uses seed + i (unless --seeds)")
    model.add_argument("--seeds", type=int, nargs="+", default=None, help="one seed per chunk")
    add_step_cache_argument(model)
    where = parser.add_argument_group("where")
    where.add_argument("--backend", choices=NAMES, default="diffusers")
    where.add_argument("--url", default=None, help="vLLM-Omni server URL (with --backend vllm-omni)")
    where.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (with --backend framework)")
    where.add_argument("--out", type=Path, default=Path("outputs"), help="output folder (default ./outputs)")
    where.add_argument("--name", default="long_video", help="output stem; chunks go to <name>_chunks/")
    where.add_argument("--overwrite", action="store_true", help="replace files another run left at these names")


def run(args: argparse.Namespace) -> int:
    from ..longvideo import long_video

    prompts = args.prompt[0] if len(args.prompt) == 1 else args.prompt
    options = {name: value for name, value in (
        ("profile", args.profile), ("model", args.model), ("tier", args.tier), ("aspect_ratio", args.aspect_ratio),
        ("num_frames", args.frames), ("fps", args.fps), ("num_inference_steps", args.steps),
        ("guidance_scale", args.guidance), ("image", args.image), ("step_cache", args.step_cache))
        if value is not None}
    backend = backend_by_name(args.backend, url=args.url, checkout=args.checkout)
    joined = long_video(prompts, backend, chunks=args.chunks, out=args.out, name=args.name, seed=args.seed,
                        seeds=args.seeds, conditioning_frames=args.conditioning_frames, sound=args.sound,
                        overwrite=args.overwrite, **options)
    report = joined.provenance.get("continuity")
    if report:
        print(json.dumps({"join_steps": [round(s, 2) for s in report["join_steps"]],
                          "within_chunks_mean": round(report["within_mean"], 2),
                          "within_chunks_max": round(report["within_max"], 2)}), file=sys.stderr)
    print(joined.paths["media"])
    return 0
