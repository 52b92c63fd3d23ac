"""``cosmos-helpers upsample``: a sentence to a checked Cosmos3 caption through an OpenAI-compatible endpoint (which,
like the model and key, defaults to the framework upsampler's environment variables: one setup serves both)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sentence", help="the plain-text prompt to upsample")
    parser.add_argument("--endpoint", default=os.environ.get("PROMPT_UPSAMPLER_ENDPOINT_URL"),
                        help="the chat server's URL, e.g. http://127.0.0.1:8000 (vLLM) "
                             "(default $PROMPT_UPSAMPLER_ENDPOINT_URL)")
    parser.add_argument("--model", default=os.environ.get("PROMPT_UPSAMPLER_MODEL"),
                        help="the served model (default $PROMPT_UPSAMPLER_MODEL, else the server's only one)")
    parser.add_argument("--kind", choices=("image", "video"), default="video")
    parser.add_argument("--resolution", default="480", help="the framework's tier: 256, 480, 720 or 768")
    parser.add_argument("--aspect-ratio", default="16,9")
    parser.add_argument("--duration", default="5s", help="video: 2s ... 10s")
    parser.add_argument("--fps", type=int, default=24, help="video: 10, 12, ... 30")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per call")
    parser.add_argument("--unconstrained", action="store_true",
                        help="do not send the caption's JSON Schema as response_format (for servers without "
                             "structured outputs)")
    parser.add_argument("--out", type=Path, help="write the caption here (a .json file; never overwritten)")


def run(args: argparse.Namespace) -> int:
    from ..errors import OutputExistsError, ValidationError
    from ..media import write_bytes_atomic
    from ..prompting import upsample_prompt

    if not args.endpoint:
        raise ValidationError("--endpoint", "no chat endpoint given.",
                              "pass --endpoint http://HOST:PORT or set PROMPT_UPSAMPLER_ENDPOINT_URL.")
    if args.out is not None and args.out.exists():
        raise OutputExistsError(f"{args.out} exists; choose another --out or remove it.")
    video = {"duration": args.duration, "fps": args.fps} if args.kind == "video" else {}
    caption = upsample_prompt(args.sentence, endpoint=args.endpoint, model=args.model, kind=args.kind,
                              resolution=args.resolution, aspect_ratio=args.aspect_ratio,
                              temperature=args.temperature, seed=args.seed, timeout=args.timeout,
                              constrained=not args.unconstrained,
                              api_key=os.environ.get("PROMPT_UPSAMPLER_API_TOKEN"), **video)
    text = json.dumps(caption, indent=2)
    if args.out is None:
        print(text)
    else:
        write_bytes_atomic(args.out, (text + "\n").encode("utf-8"))
        print(f"wrote {args.out}")
    return 0
