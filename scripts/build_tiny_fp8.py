"""Build the ``tiny`` model's ModelOpt FP8 revision into a folder (the recipe is ``cosmos_helpers/models/tiny_fp8.py``).

The package builds the same folder into its model cache on first use (``GenerationRequest(profile="tiny",
precision="fp8")``); this script writes it where you say, e.g. to inspect it or to load it by path::

    python scripts/build_tiny_fp8.py --out outputs/tiny-fp8
    python scripts/build_tiny_fp8.py --out outputs/tiny-fp8-2-2 --first-steps 2 --last-steps 2

Needs ``nvidia-modelopt`` (``pip install -e '.[fp8]'``); runs on a CPU in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    from cosmos_helpers.models import tiny_fp8
    from cosmos_helpers.protocol import fp8 as facts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a folder that does not exist yet")
    parser.add_argument("--first-steps", type=int, default=None, help="the policy's W8A16 steps at the start")
    parser.add_argument("--last-steps", type=int, default=None, help="the policy's W8A16 steps at the end")
    parser.add_argument("--reasoner", choices=facts.REASONER_MODES, default=None)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists; choose a new folder (nothing is overwritten)")
    policy = json.loads(json.dumps(dict(facts.OFFICIAL_POLICY)))
    for name in ("first_steps", "last_steps"):
        if getattr(args, name) is not None:
            policy[name]["count"] = getattr(args, name)
    if args.reasoner:
        policy["reasoner"] = args.reasoner
    out = tiny_fp8.build(args.out, policy=policy)
    print(f"wrote {out} (policy: {json.dumps(policy['first_steps'])} / {json.dumps(policy['last_steps'])}, "
          f"reasoner {policy['reasoner']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
