"""``cosmos-helpers tiny``: build (or find) the embedded tiny Cosmos3 and print where it is."""

from __future__ import annotations

import argparse

from ..models.tiny import tiny_model_path
from ..models.tiny_trained import trained_tiny_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--random-seed", type=int, default=None, metavar="SEED",
                        help="the random-weight model of the same classes for this seed (same seed, same bytes) "
                             "instead of the trained default")
    parser.add_argument("--out", default=None,
                        help="cache folder (default $COSMOS_HELPERS_CACHE or ~/.cache/cosmos_helpers)")


def run(args: argparse.Namespace) -> int:
    print(trained_tiny_path(args.out) if args.random_seed is None else tiny_model_path(args.random_seed, args.out))
    return 0
