"""``cosmos-helpers caption``: check a structured caption, print its schema or a blank form, pre-check words."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", metavar="FILE", type=Path,
                      help="check a .json caption against the framework's template; exit 1 with every problem")
    what.add_argument("--schema", metavar="KIND", choices=("image", "video"),
                      help="print the JSON Schema of a complete image or video caption")
    what.add_argument("--blank", metavar="KIND", choices=("image", "video"),
                      help="print an empty caption form to fill in")
    what.add_argument("--precheck", metavar="FILE_OR_TEXT",
                      help="list the words of a prompt (a .json/.txt file, or the text) the Cosmos blocklist "
                           "guardrail rejects; exit 1 if any")
    parser.add_argument("--kind", choices=("image", "video"), help="with --check: the caption kind (default: "
                                                                   "told from its fields)")
    parser.add_argument("--require-metadata", action="store_true",
                        help="with --check: also require resolution/aspect_ratio (and duration/fps for video)")
    parser.add_argument("--blocklist", metavar="DIR",
                        help="with --precheck: the 'blocklist' folder of an nvidia/Cosmos-Guardrail1 download "
                             "(default: the Hugging Face cache's, else only the publicly known entries)")


def run(args: argparse.Namespace) -> int:
    from ..prompting import blank_caption, caption_schema, check_caption, precheck
    from ..prompts import load_caption

    if args.schema or args.blank:
        print(json.dumps(caption_schema(args.schema) if args.schema else blank_caption(args.blank), indent=2))
        return 0
    if args.check:
        result = check_caption(args.check, args.kind, require_metadata=args.require_metadata)
    else:
        source = Path(args.precheck)
        text = load_caption(source, field="precheck") if source.suffix in (".json", ".txt") else args.precheck
        result = precheck(text, blocklist=args.blocklist)
    print(result.explain())
    return 0 if result.ok else 1
