"""``cosmos-helpers bench``: the same requests through stock Diffusers, the fast path and vLLM-Omni, in one run.

Per case (mode x tier) and backend: the cold time (kernel selection, graph capture, tuning included), the warm time
(median of the next calls), peak GPU memory and the pixel distance from stock; written under ``--out`` as
``benchmark.md`` (a mode x tier table, the shape of NVIDIA's ``inference_benchmarks.md``), ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse

from ..presets import DEFAULT_PROFILE
from ..step_cache import step_cache_argument
from .cases import (BACKEND_TITLES, BASE_NEGATIVE, BASE_PROMPT, DEFAULT_CASES, DEFAULT_STEPS, FAST_STATS, BenchResult,
                    Case, Row, build_request, mode_title, prompt_of)
from .report import gpu_count, render_markdown, render_png, render_scaling_png
# the benchmark scripts (benchmarks/gpu_*.py) time their own variants with these
from .timing import Timed, _diffusers_backends, _environment, _timed, pass_costs, run_benchmark

__all__ = ["BACKEND_TITLES", "BASE_NEGATIVE", "BASE_PROMPT", "DEFAULT_CASES", "DEFAULT_STEPS", "FAST_STATS",
           "BenchResult", "Case", "Row", "Timed", "add_arguments", "build_request", "gpu_count", "mode_title",
           "pass_costs", "prompt_of", "render_markdown", "render_png", "render_scaling_png", "run", "run_benchmark",
           "_diffusers_backends", "_environment", "_timed"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(DEFAULT_CASES),
                        help="model and defaults (tiny: embedded model, CPU in seconds)")
    parser.add_argument("--random-nano", action="store_true",
                        help="Nano-shaped random weights instead of a checkpoint (for GPUs without the download)")
    parser.add_argument("--cases", default=None,
                        help="comma list of mode:tier[:frames], e.g. t2i:256,t2v:480:189,t2v+sound:256:121,fd:256:17 "
                             "(fd, id, wam: the action modes, on the rendered drive)")
    parser.add_argument("--steps", type=int, default=None, help="denoising steps (default: tiny 2, else 35)")
    parser.add_argument("--frames", type=int, default=None, help="frames for video cases without :frames")
    parser.add_argument("--guidance", type=float, default=6.0)
    parser.add_argument("--text-tokens", type=int, default=None,
                        help="prompt and negative prompt length in bytes (= tokens with the byte tokenizer)")
    parser.add_argument("--repeats", type=int, default=1, help="warm calls after the cold one")
    parser.add_argument("--backends", default="stock,fast", help="comma list of stock, fast (vllm: --vllm-url)")
    parser.add_argument("--vllm-url", default=None, help="a running vLLM-Omni server to include")
    parser.add_argument("--out", default="outputs/benchmarks", help="folder for benchmark.md/.png/.json")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, help="bfloat16 or float32 (default: bf16 on CUDA, fp32 on CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus", default="", help="add the fast path on N GPUs: comma list of N, N:cfg or N:ulysses "
                        "(e.g. 2,2:ulysses); N alone = CFG-parallel with Ulysses over the rest")
    parser.add_argument("--memory", default=None, help="memory preset for the Diffusers backends (24GB/48GB/80GB); "
                        "also caps this process's GPU memory at that size")
    parser.add_argument("--random-super", action="store_true", help="Cosmos3-Super-shaped random weights")
    parser.add_argument("--step-cache", type=step_cache_argument, default=None, metavar="off|sea|sea:THRESHOLD",
                        help="step cache for every request (default: each backend's own); rows then report passes "
                             "computed and the time of a computed and of a cached pass")


def run(args: argparse.Namespace) -> int:
    result = run_benchmark(profile=args.profile, cases=args.cases, steps=args.steps, frames=args.frames,
                           guidance=args.guidance, text_tokens=args.text_tokens, repeats=args.repeats,
                           backends=[b.strip() for b in args.backends.split(",") if b.strip()],
                           vllm_url=args.vllm_url, out_dir=args.out,
                           random_nano="super" if args.random_super else args.random_nano,
                           device=args.device, dtype=args.dtype, seed=args.seed,
                           gpus=[g.strip() for g in args.gpus.split(",") if g.strip()], memory=args.memory,
                           step_cache=args.step_cache)
    print(result.markdown)
    print(f"wrote {result.markdown_path}, {result.png_path}, {result.json_path}")
    return 1 if any(r.error for r in result.rows) else 0
