"""``cosmos-helpers generate``: one request from the command line, saved with its manifest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..backends import NAMES, backend_by_name
from ..errors import ValidationError
from ..presets import DEFAULT_PROFILE, PROFILES
from ..request import GenerationRequest
from ..result import Generation
from ..step_cache import step_cache_argument
from ..trajectories import load_trajectory, save_trajectory
from ..workflow import generate_and_save


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
    model = parser.add_argument_group("model and settings (default: the profile's)")
    model.add_argument("--profile", default=DEFAULT_PROFILE, choices=tuple(PROFILES),
                       help=f"model and per-mode defaults (default {DEFAULT_PROFILE})")
    model.add_argument("--model", default=None, help="override the profile's model: tiny, a hub id or a folder")
    model.add_argument("--tier", default=None, help="resolution tier: 256, 480, 720, ...")
    model.add_argument("--aspect-ratio", default=None, help="16,9 | 4,3 | 1,1 | 3,4 | 9,16")
    model.add_argument("--width", type=int, default=None)
    model.add_argument("--height", type=int, default=None)
    model.add_argument("--frames", type=int, default=None, help="number of frames (4k+1)")
    model.add_argument("--fps", type=float, default=None)
    model.add_argument("--steps", type=int, default=None)
    model.add_argument("--guidance", type=float, default=None)
    model.add_argument("--flow-shift", type=float, default=None)
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--guardrails", choices=["on", "off"], default=None, help="default: the profile's")
    add_step_cache_argument(model)
    where = parser.add_argument_group("where")
    where.add_argument("--backend", choices=NAMES, default="diffusers")
    where.add_argument("--url", default=None, help="server URL (with --backend vllm-omni, or framework-serve: the "
                       "Cosmos Framework's Ray Serve app)")
    where.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (with --backend framework)")
    where.add_argument("--gpus", type=int, default=1,
                       help="GPUs per run: diffusers workers (one per GPU), framework torchrun; 1 for vllm-omni")
    where.add_argument("--out", type=Path, default=Path("outputs"), help="output folder (default ./outputs)")
    where.add_argument("--name", default=None, help="output file stem (default: the mode)")
    where.add_argument("--overwrite", action="store_true", help="replace an existing output of another request")
    check = parser.add_argument_group("blocklist pre-check, before anything is sent (the prompt is never changed)")
    check.add_argument("--precheck", choices=("off", "warn", "refuse"), default="off",
                       help="find words the Cosmos blocklist guardrail rejects: warn, or refuse a flagged prompt")
    check.add_argument("--blocklist", default=None, help="the 'blocklist' folder of an nvidia/Cosmos-Guardrail1 "
                                                         "download (default: the Hugging Face cache's, else the "
                                                         "publicly known entries)")


def add_step_cache_argument(group) -> None:
    """``--step-cache off|sea|sea:THRESHOLD`` (generate, long-video, run, bench share it)."""
    group.add_argument("--step-cache", type=step_cache_argument, default=None, metavar="off|sea|sea:THRESHOLD",
                       help="step caching (SeaCache): default the backend's own (off in diffusers and vLLM-Omni, "
                            "on in the Cosmos Framework)")


def run(args: argparse.Namespace) -> int:
    request = GenerationRequest(
        mode=args.mode, prompt=args.prompt_file or args.prompt, negative_prompt=args.negative_prompt_file or
        args.negative_prompt, profile=args.profile, model=args.model, tier=args.tier, aspect_ratio=args.aspect_ratio,
        width=args.width, height=args.height, num_frames=args.frames, fps=args.fps, num_inference_steps=args.steps,
        guidance_scale=args.guidance, flow_shift=args.flow_shift, seed=args.seed, sound=args.sound, image=args.image,
        video=args.video, guardrails=None if args.guardrails is None else args.guardrails == "on",
        actions=args.actions, embodiment=args.embodiment, view_point=args.view_point, step_cache=args.step_cache)
    print(request.summary(), file=sys.stderr)
    backend = backend_by_name(args.backend, url=args.url, checkout=args.checkout, gpus=args.gpus)
    if args.precheck != "off":
        from ..prompting import with_precheck

        backend = with_precheck(backend, args.blocklist, on_flag="raise" if args.precheck == "refuse" else "warn")
    generation = generate_and_save(backend, request, args.out / (args.name or request.resolve().mode),
                                   overwrite=args.overwrite)
    if generation.actions is not None:  # the predicted trajectory, beside the video
        target = generation.paths["media"].with_suffix(".actions.json")
        _save_actions(target, generation, overwrite=args.overwrite)
        print(target, file=sys.stderr)
    print(generation.paths["media"])
    return 0


def _save_actions(target: Path, generation: Generation, *, overwrite: bool) -> None:
    """Write the trajectory; a rerun's is already there, unless the file is not the one the video's manifest
    records (an overwrite cut short between the two): it is then written again from the manifest."""
    if generation.provenance.get("skipped") and target.is_file():
        try:
            same = np.array_equal(load_trajectory(target), generation.actions)
        except (ValidationError, ValueError):
            same = False
        if same:
            return
        overwrite = True  # the manifest vouches for the video; the file beside it is restored to match
    save_trajectory(target, generation.actions, overwrite=overwrite)
