"""``cosmos-helpers run-cookbooks``: execute every cookbook with papermill into one output folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..notebooks import run_cookbooks, summary_table
from . import add_model_arguments, add_notebook_arguments, parameters


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("outputs"), help="output folder (default ./outputs)")
    add_model_arguments(parser, "model and defaults every cookbook uses (tiny: the embedded model, on a CPU)",
                        model=False)
    add_notebook_arguments(parser, parameter_help="inject a parameter into every notebook that declares it")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only notebooks whose path contains TEXT; repeatable")
    parser.add_argument("--no-gallery", action="store_true", help="skip writing index.html")


def run(args: argparse.Namespace) -> int:
    runs = run_cookbooks(args.out, profile=args.profile, parameters=parameters(args.parameter), only=args.only,
                         kernel=args.kernel, gallery=not args.no_gallery, log_output=args.log_output)
    print("\n" + summary_table(runs))
    failed = [run for run in runs if not run.ok]
    for run in failed:
        print(f"\n{run.notebook} failed:\n{run.error}", file=sys.stderr)
    if not runs:
        print("no notebooks matched", file=sys.stderr)
    return 1 if failed or not runs else 0
