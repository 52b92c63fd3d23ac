"""``cosmos-helpers``: generate, serve, transfer, benchmark, run or open the cookbooks, build the tiny model.

Each command's options live beside the code it drives (``add_arguments(parser)`` + ``run(args)``); this module only
routes, so ``--help`` answers instantly. Errors are one readable line and a non-zero exit (``--debug``: traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import CosmosHelpersError

# command -> (module with add_arguments/run, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("cosmos_helpers.commands.generate", "generate one image or video and save it with a manifest"),
    "long-video": ("cosmos_helpers.commands.long_video", "a video longer than one generation: chained chunks, joined"),
    "run-cookbooks": ("cosmos_helpers.commands.cookbooks", "execute every cookbook with papermill into one folder"),
    "sweep": ("cosmos_helpers.commands.sweep", "run a notebook once per parameter set (papermill), in parallel"),
    "lab": ("cosmos_helpers.commands.lab", "open the cookbooks in JupyterLab with this environment as the kernel"),
    "tiny": ("cosmos_helpers.commands.tiny", "build (or locate) the embedded tiny Cosmos3 model"),
    "serve": ("cosmos_helpers.standins.vllm_omni.cli", "start a local vLLM-Omni-compatible server"),
    "serve-ray": ("cosmos_helpers.standins.ray_serve.local",
                  "start a stand-in of the Cosmos Framework's Ray Serve app on a local Ray instance"),
    "batch": ("cosmos_helpers.commands.batch", "run many requests or framework samples: here, on a server, or on Ray"),
    "run": ("cosmos_helpers.commands.run", "run a Cosmos Framework input file (any mode) on any backend"),
    "transfer": ("cosmos_helpers.commands.run", "alias of `run` (framework input files, transfer included)"),
    "controls": ("cosmos_helpers.commands.controls", "compute depth / seg control videos of a clip with a named model"),
    "bench": ("cosmos_helpers.bench", "compare backends' latency in one run"),
    "caption": ("cosmos_helpers.commands.caption", "check a structured caption, print its schema, pre-check words"),
    "upsample": ("cosmos_helpers.commands.upsample", "turn a sentence into a structured caption via a chat endpoint"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cosmos-helpers", description="Cosmos 3 cookbooks helper: generation, serving, transfer and benchmarks.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(command)  # command modules import nothing heavy at top level
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one readable line unless --debug
        if args.debug:
            raise
        kind = "error" if isinstance(exc, CosmosHelpersError) else type(exc).__name__
        print(f"cosmos-helpers {args.command}: {kind}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
