"""``python -m tests.server.serve_doubles [serve options] [--load-delay S] [--block-word W] [--hold-word W
--hold-marker FILE] [--instant]``: ``cosmos-helpers serve`` with the model behind test doubles, for the subprocess
(``LocalServer``) tests."""

from __future__ import annotations

import argparse
import sys

from cosmos_helpers.standins.vllm_omni import cli

from .doubles import Guarded, Holding, InstantBackend, SlowLoading, WordChecker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="serve_doubles")
    cli.add_arguments(parser)
    parser.add_argument("--load-delay", type=float, default=0.0, help="seconds the model load takes")
    parser.add_argument("--block-word", default=None, help="the guardrail blocks prompts containing it")
    parser.add_argument("--hold-word", default=None, help="requests naming it never finish ...")
    parser.add_argument("--hold-marker", default=None, help="... after writing this file")
    parser.add_argument("--instant", action="store_true", help="a model-free backend instead of diffusers")
    args = parser.parse_args(argv)
    if args.instant:
        backend = InstantBackend()
        if args.block_word:
            backend = Guarded(backend, args.block_word)
    else:
        from cosmos_helpers.backends.diffusers import DiffusersBackend

        checker = WordChecker(args.block_word) if args.block_word else None
        backend = DiffusersBackend(progress=False, safety_checker=checker)
    if args.hold_word:
        backend = Holding(backend, args.hold_word, args.hold_marker)
    if args.load_delay:
        backend = SlowLoading(backend, args.load_delay)
    return cli.run(args, backend=backend)


if __name__ == "__main__":
    sys.exit(main())
