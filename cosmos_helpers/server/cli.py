"""``cosmos-helpers serve``: a local vLLM-Omni-compatible server for Cosmos3 (FastAPI + uvicorn).

Like the real server it loads the model *before* binding the port, so while it loads (and during
``--startup-delay``) connections are refused; ``Application startup complete.`` means ready.
Heavy imports (torch, fastapi, uvicorn) happen in ``run``, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import os

API_KEY_ENV = "COSMOS3_VLLM_API_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="'tiny' (embedded random-weight model), a hub id or a checkpoint folder "
                             "(default: the profile's model)")
    parser.add_argument("--profile", default="tiny", choices=("tiny", "nano", "super"),
                        help="defaults for omitted fields and the default model (default: tiny)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default: 8000)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                        help=f"require 'Authorization: Bearer KEY' on /v1/* (default: ${API_KEY_ENV})")
    parser.add_argument("--served-model-name", default=None, help="name clients send as 'model' (default: --model)")
    parser.add_argument("--storage-dir", default=None, help="job files and uploads (default: a temporary folder)")
    parser.add_argument("--startup-delay", type=float, default=0.0,
                        help="seconds of simulated model loading before the port is bound (default: 0)")
    parser.add_argument("--sync-timeout", type=float,
                        default=float(os.environ.get("VLLM_OMNI_VIDEO_SYNC_TIMEOUT", "600")),
                        help="seconds before /v1/videos/sync answers 504, queueing included (default: 600)")
    parser.add_argument("--block-word", action="append", default=[], metavar="WORD",
                        help="stand-in guardrail: prompts containing WORD get 400 'Input was blocked by Cosmos3 "
                             "guardrails.' (repeatable)")
    parser.add_argument("--no-guardrails", action="store_true", help="disable the stand-in guardrail server-wide")
    parser.add_argument("--step-progress", action="store_true",
                        help="report per-step job progress (vLLM-Omni jumps from 0 to 100)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def run(args: argparse.Namespace) -> int:
    import time

    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import uvicorn

    from ..backends.diffusers import DiffusersBackend
    from ..presets import get_profile
    from .app import create_app

    model = args.model or get_profile(args.profile).model
    backend = DiffusersBackend(model, progress=False)
    print(f"loading {model!r} (profile {args.profile}) ...", flush=True)
    from ..transfer.vllm import make_transfer_runner

    app = create_app(backend, api_key=args.api_key or None, served_model_name=args.served_model_name, model=model,
                     profile=args.profile, storage_dir=args.storage_dir, sync_timeout=args.sync_timeout,
                     startup_delay=args.startup_delay, guardrails=not args.no_guardrails,
                     block_words=tuple(args.block_word), step_progress=args.step_progress,
                     transfer_runner=make_transfer_runner(args.profile, model))
    print(f"serving {app.state.settings.served_model_name!r} on http://{args.host}:{args.port} "
          f"(storage {app.state.jobs.storage_dir}; imports took {time.perf_counter() - started:.1f} s)", flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=2, access_log=args.log_level == "debug")
    uvicorn.Server(config).run()
    return 0
