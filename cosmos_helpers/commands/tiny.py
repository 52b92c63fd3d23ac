"""``cosmos-helpers tiny``: build (or find) the embedded tiny Cosmos3 and print where it is."""

from __future__ import annotations

import argparse

from ..models.tiny import tiny_model_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="weights seed (default 0; same seed, same bytes)")
    parser.add_argument("--out", default=None,
                        help="cache folder (default $COSMOS_HELPERS_CACHE or ~/.cache/cosmos_helpers)")


def run(args: argparse.Namespace) -> int:
    print(tiny_model_path(args.seed, args.out))
    return 0
