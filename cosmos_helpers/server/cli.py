"""``cosmos-helpers serve``: the local vLLM-Omni 0.30.0 stand-in for Cosmos3 (FastAPI + uvicorn).

Like ``vllm serve`` it loads the model *before* binding the port, so while it loads connections are refused;
``Application startup complete.`` means ready. Heavy imports (torch, fastapi, uvicorn) happen in ``serve``, so
``--help`` stays fast. The limit flags (defaults in :class:`~.limits.ServerLimits`) are stand-in hardening:
vLLM-Omni has no queue bound (``--max-queue 0`` behaves like it) and opens server-local paths unchecked.
Binding anywhere but loopback without an API key prints a loud warning.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..backends.vllm_wire import API_KEY_ENV
from ..errors import ValidationError
from ..presets import PROFILES, get_profile, model_for
from .limits import MiB, ServerLimits, binding_warning, describe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="what to serve: 'tiny' (embedded random-weight model), a hub id or a checkpoint folder "
                             "(default: the --profile's model, else tiny)")
    parser.add_argument("--profile", default=None, choices=tuple(PROFILES),
                        help="serve this profile's model (tiny, nvidia/Cosmos3-Nano, -Super, -Edge); requests get "
                             "vLLM-Omni's defaults for it either way")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default: 8000)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                        help=f"require 'Authorization: Bearer KEY' on /v1/* (default: ${API_KEY_ENV})")
    parser.add_argument("--served-model-name", default=None, help="name clients send as 'model' (default: --model)")
    parser.add_argument("--storage-dir", default=None, help="job files and uploads (default: a temporary folder)")
    parser.add_argument("--sync-timeout", type=float,
                        default=float(os.environ.get("VLLM_OMNI_VIDEO_SYNC_TIMEOUT", "600")),
                        help="seconds before /v1/videos/sync answers 504, queueing included (default: 600)")
    guard = parser.add_mutually_exclusive_group()
    guard.add_argument("--guardrails", action="store_true",
                       help="run the Cosmos guardrails (needs the cosmos_guardrail package and a GPU host); a "
                            "blocked prompt gets vLLM's 400. Off by default here (vLLM-Omni: on)")
    guard.add_argument("--no-guardrails", action="store_true", help="no guardrails (the default; vLLM's flag)")
    parser.add_argument("--step-progress", action="store_true",
                        help="report per-step job progress (vLLM-Omni jumps from 0 to 100)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    _limit_arguments(parser.add_argument_group(
        "limits (stand-in hardening: requests over a limit are refused before any generation work)"))
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def _limit_arguments(group: argparse._ArgumentGroup) -> None:
    d = ServerLimits()
    group.add_argument("--max-upload-mb", type=float, default=d.max_request_bytes / MiB, metavar="MB",
                       help=f"largest request body, uploads included -> 413 (default: {d.max_request_bytes // MiB})")
    group.add_argument("--max-field-kb", type=float, default=d.max_field_bytes / 1024, metavar="KB",
                       help="largest text form field -> 400, and image JSON body -> 413 (default: "
                            f"{d.max_field_bytes // 1024}, Starlette's and vLLM's)")
    group.add_argument("--max-image-pixels", type=int, default=d.max_image_pixels, metavar="N",
                       help=f"largest decoded reference image / video frame, WxH -> 400 (default: "
                            f"$VLLM_MAX_IMAGE_PIXELS or {7680 * 4320})")
    group.add_argument("--max-video-frames", type=int, default=d.max_video_frames, metavar="N",
                       help=f"most frames in a reference or control video -> 400 (default: {d.max_video_frames})")
    group.add_argument("--max-video-seconds", type=float, default=d.max_video_seconds, metavar="S",
                       help=f"longest reference or control video -> 400 (default: {d.max_video_seconds:g})")
    group.add_argument("--max-prompt-chars", type=int, default=d.max_prompt_chars, metavar="N",
                       help=f"longest prompt / negative prompt -> 400 (default: {d.max_prompt_chars})")
    group.add_argument("--max-output-pixels", type=int, default=d.max_output_pixels, metavar="N",
                       help=f"largest requested output WxH -> 400 (default: {d.max_output_pixels}, 7680x4320)")
    group.add_argument("--max-output-frames", type=int, default=d.max_output_frames, metavar="N",
                       help=f"most requested output frames -> 400 (default: {d.max_output_frames})")
    group.add_argument("--max-queue", type=int, default=d.max_queue, metavar="N",
                       help=f"generations that may wait behind the running one; beyond it 429 with Retry-After, "
                            f"which vLLM-Omni never sends (default: {d.max_queue}; 0 = unbounded, as vLLM-Omni)")
    group.add_argument("--job-ttl", type=float, default=d.job_ttl, metavar="S",
                       help=f"seconds a finished job and its file are kept (expires_at); 0 keeps them until "
                            f"DELETE (default: {d.job_ttl:g})")
    group.add_argument("--allowed-local-media-path", action="append", default=[], metavar="DIR",
                       help="a folder whose files requests may name by server-local path (control_path, file:// "
                            "references); resolved with realpath, so '..' and symlinks cannot escape; repeatable "
                            "(default: none, every local path is refused)")
    group.add_argument("--allow-url-fetch", action="store_true",
                       help="fetch http(s):// image_reference/video_reference URLs as vLLM-Omni does (default: off, "
                            "so the server cannot be used to reach other hosts)")


def limits_from_args(args: argparse.Namespace) -> ServerLimits:
    return ServerLimits(
        max_request_bytes=int(args.max_upload_mb * MiB), max_field_bytes=int(args.max_field_kb * 1024),
        max_image_pixels=args.max_image_pixels, max_video_frames=args.max_video_frames,
        max_video_seconds=args.max_video_seconds, max_prompt_chars=args.max_prompt_chars,
        max_output_pixels=args.max_output_pixels, max_output_frames=args.max_output_frames,
        max_queue=args.max_queue, job_ttl=args.job_ttl,
        allowed_local_media_paths=tuple(args.allowed_local_media_path), allow_url_fetch=args.allow_url_fetch)


def served_model(args: argparse.Namespace) -> str:
    """``--model``, else the ``--profile``'s model, else the default profile's; both given must agree."""
    profile_model = get_profile(args.profile).model if args.profile else None
    if args.model and profile_model and args.model != profile_model:
        raise ValidationError("--model", f"{args.model!r} is not the --profile {args.profile}'s model "
                              f"({profile_model}).", "give --model or --profile, not both.")
    return model_for(args.profile, args.model)


def run(args: argparse.Namespace) -> int:
    return serve(args)


def serve(args: argparse.Namespace, backend: Any = None) -> int:
    """Build the app for ``args`` and run it under uvicorn until stopped (``backend``: default diffusers)."""
    import time

    limits = limits_from_args(args)  # a bad value fails before anything loads
    model = served_model(args)
    warning = binding_warning(args.host, args.api_key)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import uvicorn

    from .app import create_app

    if backend is None:
        from ..backends.diffusers import DiffusersBackend

        backend = DiffusersBackend(progress=False)
    print(f"loading {model!r} ...", flush=True)
    app = create_app(backend, api_key=args.api_key or None, served_model_name=args.served_model_name, model=model,
                     storage_dir=args.storage_dir, sync_timeout=args.sync_timeout, guardrails=args.guardrails,
                     step_progress=args.step_progress, transfer_runner=_transfer_runner(model, args.guardrails),
                     limits=limits)
    state = app.state.server
    print(f"serving {state.served_model_name!r} on http://{args.host}:{args.port} (storage {state.storage}; "
          f"guardrails {'on' if args.guardrails else 'off'}; imports took {time.perf_counter() - started:.1f} s)",
          flush=True)
    for line in describe(limits):
        print(line, flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=2, access_log=args.log_level == "debug")
    uvicorn.Server(config).run()
    return 0


def _transfer_runner(model: str, guardrails: bool):
    """Transfer on diffusers (:mod:`cosmos_helpers.transfer.vllm`); without its optional dependencies, none."""
    try:
        from ..transfer.vllm import make_transfer_runner
    except ImportError as exc:
        print(f"transfer disabled: {exc}", file=sys.stderr, flush=True)
        return None
    return make_transfer_runner(model=model, guardrails=guardrails)
