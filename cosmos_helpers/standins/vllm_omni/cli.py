"""``cosmos-helpers serve``: the local vLLM-Omni 0.30.0 stand-in for Cosmos3 (FastAPI + uvicorn). Like ``vllm serve``
it loads the model *before* binding the port, so while it loads connections are refused; ``Application startup
complete.`` means ready. Heavy imports (torch, fastapi, uvicorn) happen in ``run``, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ...backends.vllm_wire import API_KEY_ENV
from ...errors import ValidationError
from ...presets import PROFILES, get_profile, model_for
from ...protocol.vllm_omni import SYNC_TIMEOUT_S
from .settings import FLAGGED, ServerLimits, binding_warning, log_line, server_cache


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
                        default=float(os.environ.get("VLLM_OMNI_VIDEO_SYNC_TIMEOUT", SYNC_TIMEOUT_S)),
                        help="seconds before /v1/videos/sync answers 504, queueing included (default: %(default)g)")
    guard = parser.add_mutually_exclusive_group()
    guard.add_argument("--guardrails", action="store_true",
                       help="run the Cosmos guardrails (needs the cosmos_guardrail package and a GPU host); a "
                            "blocked prompt gets vLLM's 400. Off by default here (vLLM-Omni: on)")
    guard.add_argument("--no-guardrails", action="store_true", help="no guardrails (the default; vLLM's flag)")
    parser.add_argument("--cache-backend", default="none", metavar="none|sea_cache",
                        help="vLLM-Omni's step cache for every request: sea_cache runs SeaCache through diffusers' "
                             "hooks (default: none, every step computed, as vLLM-Omni)")
    parser.add_argument("--cache-config", default=None, metavar="JSON",
                        help="SeaCache settings under vLLM-Omni's keys, e.g. '{\"sea_threshold\": 0.3}' "
                             "(sea_threshold, sea_residual_order 0 or 1, sea_max_consecutive_cached, sea_power_exp); "
                             "unknown keys are refused (vLLM-Omni ignores them)")
    parser.add_argument("--step-progress", action="store_true",
                        help="report per-step job progress (vLLM-Omni jumps from 0 to 100)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    group = parser.add_argument_group(
        "limits (stand-in hardening: requests over a limit are refused before any generation work)")
    defaults = ServerLimits()
    for limit in FLAGGED:
        default, unit, text = getattr(defaults, limit.name), limit.metadata["unit"], limit.metadata["help"]
        default = default / unit if unit != 1 else default
        text += "" if "(default:" in text else " (default: %(default)d)"
        group.add_argument(limit.metadata["flag"], type=type(default), default=default,
                           metavar=limit.metadata["metavar"], help=text)
    group.add_argument("--allowed-local-media-path", action="append", default=[], metavar="DIR",
                       help="a folder whose files requests may name by server-local path (control_path, file:// "
                            "references); resolved with realpath, so '..' and symlinks cannot escape; repeatable "
                            "(default: none, every local path is refused)")
    group.add_argument("--allow-url-fetch", action="store_true",
                       help="fetch http(s):// image_reference/video_reference URLs as vLLM-Omni does (default: off, "
                            "so the server cannot be used to reach other hosts)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def limits_from_args(args: argparse.Namespace) -> ServerLimits:
    values = {}
    for limit in FLAGGED:
        value, unit = getattr(args, limit.metadata["flag"][2:].replace("-", "_")), limit.metadata["unit"]
        values[limit.name] = int(value * unit) if unit != 1 else value
    return ServerLimits(**values, allowed_local_media_paths=tuple(args.allowed_local_media_path),
                        allow_url_fetch=args.allow_url_fetch)


def served_model(args: argparse.Namespace) -> str:
    """``--model``, else the ``--profile``'s model, else the default profile's; both given must agree."""
    profile_model = get_profile(args.profile).model if args.profile else None
    if args.model and profile_model and args.model != profile_model:
        raise ValidationError("--model", f"{args.model!r} is not the --profile {args.profile}'s model "
                              f"({profile_model}).", "give --model or --profile, not both.")
    return model_for(args.profile, args.model)


def run(args: argparse.Namespace, backend: Any = None) -> int:
    """Build the app for ``args`` and run it under uvicorn until stopped (``backend``: default diffusers)."""
    limits = limits_from_args(args)  # a bad value fails before anything loads
    step_cache = server_cache(args.cache_backend, args.cache_config)
    model = served_model(args)
    if warning := binding_warning(args.host, args.api_key):
        print(warning, file=sys.stderr, flush=True)
    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import uvicorn

    from .app import create_app
    from .transfer import make_transfer_runner  # transfer runs on diffusers

    print(f"loading {model!r} ...", flush=True)
    transfer_runner = make_transfer_runner(model=model, guardrails=args.guardrails, step_cache=step_cache)
    app = create_app(backend, api_key=args.api_key or None, served_model_name=args.served_model_name, model=model,
                     storage_dir=args.storage_dir, sync_timeout=args.sync_timeout, guardrails=args.guardrails,
                     step_progress=args.step_progress, limits=limits, step_cache=step_cache,
                     transfer_runner=transfer_runner)
    state = app.state.server
    print(f"serving {state.served_model_name!r} on http://{args.host}:{args.port} (storage {state.storage}; "
          f"guardrails {'on' if args.guardrails else 'off'}; imports took {time.perf_counter() - started:.1f} s)",
          flush=True)
    print(limits, log_line(step_cache), sep="\n", flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=2, access_log=args.log_level == "debug")
    uvicorn.Server(config).run()
    return 0
