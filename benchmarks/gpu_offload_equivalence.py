"""Do offloaded latents agree with the one-GPU paths? (issue 13; run 14 in GPU_RESULTS.md)

Nano shapes, random bf16 weights, t2v 256p 189 frames, 35 steps, guidance 6, 200-token prompts, final latents
(``output_type="latent"``), seed 0, one pipeline:

* ``stock`` twice (determinism), ``fast`` (the fast path's defaults);
* the yardstick: stock with only the attention kernel swapped (FlashAttention-2 instead of PyTorch's default
  choice), i.e. how far bf16 rounding of an equally valid kernel moves the latents;
* ``24GB``: the memory preset (its plan for these weights: group offload on a CUDA stream, VAE tiling).

Each distance is max |a - b| / max |b| and the relative L2 error. ``--out``: offload_equivalence.json.

    python3 benchmarks/gpu_offload_equivalence.py --out $OUT    # after the install line of GPU_RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_k] = _v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def distance(a: torch.Tensor, b: torch.Tensor) -> dict:
    a, b = a.double(), b.double()
    return {"max_rel": float((a - b).abs().max() / b.abs().max()), "rel_l2": float((a - b).norm() / b.norm())}


def call_kwargs(frames: int = 189, steps: int = 35) -> dict:
    """The pipeline call of these comparisons: t2v 256p (320x192), guidance 6, 200-token prompts, final latents."""
    from cosmos_helpers.bench import BASE_NEGATIVE, prompt_of

    return dict(prompt=prompt_of(200), negative_prompt=prompt_of(200, BASE_NEGATIVE), num_frames=frames, height=192,
                width=320, fps=24, num_inference_steps=steps, guidance_scale=6.0, add_resolution_template=False,
                add_duration_template=False, output_type="latent")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/offload"))
    ap.add_argument("--steps", type=int, default=35)
    a = ap.parse_args()
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    from cosmos_helpers.backends.memory import apply_memory, plan_memory, resolve_memory
    from cosmos_helpers.fast import disable_fast_path, enable_fast_path
    from cosmos_helpers.fast.attention import StockProcessorWithKernel
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline

    pipe = build_random_nano_pipeline("cuda", torch.bfloat16)
    kw = call_kwargs(steps=a.steps)
    seconds: dict[str, float] = {}

    def call(label: str) -> torch.Tensor:
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            latents = pipe(**kw, generator=torch.Generator("cpu").manual_seed(0)).video.float().cpu()
        torch.cuda.synchronize()
        seconds[label] = round(time.perf_counter() - start, 2)
        print(f"{label}: {seconds[label]} s", flush=True)
        return latents

    stock, stock_again = call("stock"), call("stock again")
    pipe.transformer.set_attn_processor(StockProcessorWithKernel("flash"))
    yardstick = call("stock, flash kernel")
    pipe.transformer.set_attn_processor(Cosmos3AttnProcessor())
    enable_fast_path(pipe)
    call("fast (cold)")
    fast = call("fast")
    disable_fast_path(pipe)
    weights = sum(p.numel() * p.element_size() for p in pipe.transformer.parameters())
    settings = plan_memory(resolve_memory("24GB", device="cuda"), weights)
    done = apply_memory(pipe, settings, "cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    offloaded = call("24GB preset")
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": a.steps, "preset": done,
              "preset_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "seconds": seconds,
              "stock_vs_stock_again": distance(stock_again, stock),
              "yardstick_flash_kernel_vs_stock": distance(yardstick, stock),
              "fast_vs_stock": distance(fast, stock),
              "preset_24GB_vs_stock": distance(offloaded, stock),
              "preset_24GB_vs_fast": distance(offloaded, fast)}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "offload_equivalence.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
