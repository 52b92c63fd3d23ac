"""``cosmos-helpers sweep NOTEBOOK --grid params.yaml``: run a notebook once per parameter set (papermill)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import add_notebook_arguments, parameters


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", type=Path, help="the notebook to run (it needs a cell tagged 'parameters')")
    parser.add_argument("--grid", required=True, type=Path,
                        help="YAML ({name: [values]} for every combination, or a list of {name: value} sets) "
                             "or CSV (a header of names, one row per run)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the sweep's folder (default outputs/sweeps/<notebook name>)")
    workers = parser.add_mutually_exclusive_group()
    workers.add_argument("--servers", metavar="URL1,URL2",
                         help="vLLM-Omni servers, one worker each; the URL goes into --server-parameter")
    workers.add_argument("--gpus", metavar="0,1", help="GPUs, one worker each (CUDA_VISIBLE_DEVICES per run)")
    workers.add_argument("--jobs", type=int, default=None, help="local workers (default 1)")
    parser.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                        help="run each notebook as a Ray task, one worker per GPU of the cluster at ADDRESS (auto, "
                             "ray://head:10001), or of a local Ray instance without ADDRESS (--jobs workers on CPUs)")
    parser.add_argument("--server-parameter", default="server_url",
                        help="the notebook parameter that receives a worker's server URL (default server_url)")
    parser.add_argument("--output-parameter", default="output_dir",
                        help="the notebook parameter that receives each run's output folder (default output_dir)")
    parser.add_argument("--no-output-parameter", action="store_true",
                        help="run a notebook that has no output folder parameter")
    add_notebook_arguments(parser, parameter_help="a fixed parameter for every run")
    parser.add_argument("--no-report", action="store_true",
                        help="skip the summary CSV, contact sheet, time plot and HTML page")


def run(args: argparse.Namespace) -> int:
    from ..sweeps import sweep

    result = sweep(args.notebook, args.grid, out=args.out, servers=args.servers, gpus=args.gpus, jobs=args.jobs,
                   ray=args.ray, parameters=parameters(args.parameter), server_parameter=args.server_parameter,
                   output_parameter=None if args.no_output_parameter else args.output_parameter,
                   kernel=args.kernel, log_output=args.log_output, write_report=not args.no_report)
    print("\n" + result.markdown())
    for name, path in result.files.items():
        print(f"{name}: {path}")
    for run in result.failed:
        print(f"\n{run.name} failed:\n{run.error}", file=sys.stderr)
    return 1 if result.failed else 0
