"""``cosmos-helpers batch REQUESTS.jsonl --out DIR``: requests or framework input samples, one a line, run here, as
Ray tasks on one actor per GPU (``--ray``) or on a server (``--url``); a rerun skips finished items."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import add_model_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("requests", type=Path, help="a .jsonl file: one request (with 'mode') or framework sample "
                        "per line")
    parser.add_argument("--out", type=Path, required=True, help="output folder: <out>/<name>/vision.*, summary.csv, "
                        "batch.json, index.html")
    parser.add_argument("--backend", choices=("diffusers", "framework-serve", "vllm-omni"), default="diffusers",
                        help="where the items run (default diffusers: here, or on Ray workers with --ray)")
    parser.add_argument("--url", default=None, help="the server of --backend framework-serve / vllm-omni")
    parser.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                        help="run each item as a Ray task: a cluster address (auto, ray://head:10001, head:6379), or "
                             "nothing for a local Ray instance")
    parser.add_argument("--workers", type=int, default=None,
                        help="Ray workers on CPUs (default one per CPU; with GPUs always one per GPU)")
    parser.add_argument("--num-cpus", type=float, default=1, help="CPUs per Ray worker (default 1)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="requests in flight to the server (default 2)")
    add_model_arguments(parser, "fills what framework samples leave unset; request lines carry their own", model=False)
    parser.add_argument("--item-timeout", type=float, default=1800.0,
                        help="seconds an item may run on a Ray worker before the worker is restarted")
    parser.add_argument("--no-gallery", action="store_true", help="skip index.html")


def run(args: argparse.Namespace) -> int:
    from ..batch import run_batch

    result = run_batch(args.requests, args.out, backend=args.backend, url=args.url, ray=args.ray,
                       workers=args.workers, num_cpus=args.num_cpus, concurrency=args.concurrency,
                       profile=args.profile, item_timeout=args.item_timeout, gallery=not args.no_gallery)
    print(result._repr_markdown_())
    for name, path in result.files.items():
        print(f"{name}: {path}")
    for record in result.failed:
        print(f"{record.name} failed: {record.error}", file=sys.stderr)
    return 1 if result.failed else 0
