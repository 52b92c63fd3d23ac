"""``cosmos-helpers serve-ray``: the stand-in of the Cosmos Framework's Ray Serve app, on a local Ray instance, until
Ctrl-C. For the real app, ``cosmos_helpers.protocol.ray_serve.cluster_commands`` prints the commands.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("outputs/ray_serve"),
                        help="the app's output folder (default outputs/ray_serve, the framework configs')")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000, as serve run)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--replicas", type=int, default=2, help="model replicas (default 2)")
    parser.add_argument("--num-cpus", type=float, default=1, help="CPUs per replica (default 1)")
    parser.add_argument("--num-gpus", type=float, default=0, help="GPUs per replica (default 0: CPU)")
    parser.add_argument("--address", default=None, help="an existing Ray cluster instead of a local instance")
    parser.add_argument("--profile", default="tiny", help="the embedded model to serve (default tiny)")
    parser.add_argument("--keep-going", action="store_true",
                        help="answer a failed sample with status 'error' (the framework's setup.keep_going)")
    parser.add_argument("--skip-invalid-samples", action="store_true",
                        help="answer a refused sample with status 'skip' (setup.skip_invalid_samples)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the replicas to load")


def run(args: argparse.Namespace) -> int:
    from .local import LocalRayServe

    server = LocalRayServe(args.out, profile=args.profile, replicas=args.replicas, num_cpus=args.num_cpus,
                           num_gpus=args.num_gpus, port=args.port, host=args.host, address=args.address,
                           keep_going=args.keep_going, skip_invalid_samples=args.skip_invalid_samples,
                           timeout=args.timeout)
    with server:
        print(f"stand-in Ray Serve app (tiny model, {args.replicas} replicas) at {server.url}; Ctrl-C stops it",
              flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0
