"""``cosmos-helpers generate``: one request from the command line, saved with its manifest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ..request import GenerationRequest
from ..trajectories import load_trajectory, save_trajectory
from ..workflow import generate_and_save
from . import add_settings, add_where, backend, settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_argument_group("what to generate")
    what.add_argument("--mode", default="text2video", help="text2image | text2video | image2video | video2video | "
                      "image2image (diffusers, framework) | forward_dynamics | inverse_dynamics | policy")
    prompt = what.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text")
    prompt.add_argument("--prompt-file", type=Path, help="prompt .json caption or .txt file")
    negative = what.add_mutually_exclusive_group()
    negative.add_argument("--negative-prompt", default=None, help="negative prompt text (default: the backend's)")
    negative.add_argument("--negative-prompt-file", type=Path, help="negative prompt .json caption or .txt file")
    what.add_argument("--image", type=Path, help="conditioning image (image2video, image2image; the start frame "
                      "of forward_dynamics / policy)")
    what.add_argument("--video", type=Path, help="conditioning video (video2video, inverse_dynamics)")
    what.add_argument("--actions", type=Path, help="trajectory .json/.npz to play (forward_dynamics)")
    what.add_argument("--embodiment", default=None, help="whose actions (action modes): av, bridge_orig_lerobot, ...")
    what.add_argument("--view-point", default=None, help="action caption viewpoint: ego_view, wrist_view, ...")
    what.add_argument("--sound", action="store_true", help="also generate a 48 kHz stereo soundtrack")
    model = add_settings(parser, "model and settings (default: the profile's)", frames_help="number of frames (4k+1)")
    model.add_argument("--width", type=int, default=None)
    model.add_argument("--height", type=int, default=None)
    model.add_argument("--flow-shift", type=float, default=None)
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--guardrails", choices=["on", "off"], default=None, help="default: the profile's")
    add_where(parser, name_default=None, name_help="output file stem (default: the mode)",
              overwrite_help="replace an existing output of another request")
    check = parser.add_argument_group("blocklist pre-check, before anything is sent (the prompt is never changed)")
    check.add_argument("--precheck", choices=("off", "warn", "refuse"), default="off",
                       help="find words the Cosmos blocklist guardrail rejects: warn, or refuse a flagged prompt")
    check.add_argument("--blocklist", default=None, help="the 'blocklist' folder of an nvidia/Cosmos-Guardrail1 "
                                                         "download (default: the Hugging Face cache's, else the "
                                                         "publicly known entries)")


def run(args: argparse.Namespace) -> int:
    request = GenerationRequest(
        mode=args.mode, prompt=args.prompt_file or args.prompt, negative_prompt=args.negative_prompt_file or
        args.negative_prompt, width=args.width, height=args.height, flow_shift=args.flow_shift, seed=args.seed,
        sound=args.sound, image=args.image, video=args.video, actions=args.actions, embodiment=args.embodiment,
        guardrails=None if args.guardrails is None else args.guardrails == "on", view_point=args.view_point,
        **settings(args))
    print(request.summary(), file=sys.stderr)
    where = backend(args)
    if args.precheck != "off":
        from ..prompting import with_precheck

        where = with_precheck(where, args.blocklist, on_flag="raise" if args.precheck == "refuse" else "warn")
    generation = generate_and_save(where, request, args.out / (args.name or request.resolve().mode),
                                   overwrite=args.overwrite)
    if generation.actions is not None:  # the predicted trajectory, beside the video
        target = generation.paths["media"].with_suffix(".actions.json")
        rerun = bool(generation.provenance.get("skipped")) and target.is_file()
        # A rerun's file is already there, unless it is not the one the video's manifest records (an overwrite cut
        # short between the two): the manifest vouches for the video, so the file is written again to match it.
        if not (rerun and _same_trajectory(target, generation.actions)):
            save_trajectory(target, generation.actions, overwrite=args.overwrite or rerun)
        print(target, file=sys.stderr)
    print(generation.paths["media"])
    return 0


def _same_trajectory(path: Path, actions: np.ndarray) -> bool:
    try:
        return np.array_equal(load_trajectory(path), actions)
    except (ValidationError, ValueError):
        return False
