"""Command-line commands: each module has ``add_arguments(parser)`` and ``run(args)``; shared options are here."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Any, Sequence

from ..backends import NAMES, backend_by_name
from ..presets import DEFAULT_PROFILE, PROFILES
from ..step_cache import step_cache_argument

# option dest -> GenerationRequest field, for the settings generate and long-video share
SETTINGS = {"profile": "profile", "model": "model", "tier": "tier", "aspect_ratio": "aspect_ratio",
            "frames": "num_frames", "fps": "fps", "steps": "num_inference_steps", "guidance": "guidance_scale",
            "step_cache": "step_cache"}


def add_backend_arguments(parser: Any) -> None:
    parser.add_argument("--backend", choices=NAMES, default="diffusers", help="where to run (default diffusers)")
    parser.add_argument("--url", default=None, help="server URL (--backend vllm-omni, or framework-serve: the Cosmos "
                        "Framework's Ray Serve app)")
    parser.add_argument("--checkout", default=None, help="NVIDIA/cosmos-framework checkout (--backend framework)")
    parser.add_argument("--gpus", type=int, default=1,
                        help="GPUs per run: diffusers workers (one per GPU), framework torchrun; 1 for vllm-omni")


def backend(args: argparse.Namespace) -> Any:
    return backend_by_name(args.backend, url=args.url, checkout=args.checkout, gpus=args.gpus)


def add_model_arguments(parser: Any, profile_help: str, *, model: bool = True) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, choices=tuple(PROFILES),
                        help=f"{profile_help} (default {DEFAULT_PROFILE})")
    if model:
        parser.add_argument("--model", default=None, help="override the profile's model: tiny, a hub id or a folder")


def add_settings(parser: Any, title: str, *, frames_help: str) -> Any:
    group = parser.add_argument_group(title)
    add_model_arguments(group, "model and per-mode defaults")
    group.add_argument("--tier", default=None, help="resolution tier: 256, 480, 720, ...")
    group.add_argument("--aspect-ratio", default=None, help="16,9 | 4,3 | 1,1 | 3,4 | 9,16")
    group.add_argument("--frames", type=int, default=None, help=frames_help)
    group.add_argument("--fps", type=float, default=None)
    group.add_argument("--steps", type=int, default=None)
    group.add_argument("--guidance", type=float, default=None)
    add_step_cache_argument(group)
    return group


def add_where(parser: Any, *, name_default: str | None, name_help: str, overwrite_help: str) -> None:
    where = parser.add_argument_group("where")
    add_backend_arguments(where)
    where.add_argument("--out", type=Path, default=Path("outputs"), help="output folder (default ./outputs)")
    where.add_argument("--name", default=name_default, help=name_help)
    where.add_argument("--overwrite", action="store_true", help=overwrite_help)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {field: getattr(args, name) for name, field in SETTINGS.items()}


def add_step_cache_argument(group: Any) -> None:
    group.add_argument("--step-cache", type=step_cache_argument, default=None, metavar="off|sea|sea:THRESHOLD",
                       help="step caching (SeaCache): default the backend's own (off in diffusers and vLLM-Omni, "
                            "on in the Cosmos Framework)")


def add_notebook_arguments(parser: argparse.ArgumentParser, *, parameter_help: str) -> None:
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help=f"{parameter_help} (VALUE as a Python literal or plain text); repeatable")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument("--log-output", action="store_true", help="stream the notebooks' output while they run")


def parameters(pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``-p`` pairs as notebook parameters: a Python literal is that literal, anything else stays text, so
    ``-p prompt 'a red ball'`` needs no extra quotes."""
    values = {}
    for name, text in pairs:
        try:
            values[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            values[name] = text
    return values
