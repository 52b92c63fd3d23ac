"""Where the fast path's time goes at t2v 256p, 189 frames (Nano shapes, random bf16 weights, one H200).

Written when the fast path stood at 7.47 s against the issue's 6.0 s target (see GPU_RESULTS.md for where
it stands now and the kernel-rate floor that puts that target out of reach). This profiles a few warm denoising
steps of stock, fast and fast+compile with torch.profiler, groups CUDA kernel time into matrix products,
attention, element-wise/norm/rope, VAE convolutions and other, and reports the per-step GPU time against the
wall time (the difference is launch/host overhead). Output: JSON + a markdown table under --out.

Run on the device (diffusers carried as a wheel):
  pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
  python benchmarks/gpu_profile.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

CATEGORIES = (
    ("attention", ("flash", "fmha", "attention", "cudnn_generated", "sdpa")),
    ("matmul", ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas", "matmul")),
    ("conv (VAE)", ("conv", "implicit_convolve", "winograd", "cudnn::", "xmma_fprop", "dgrad", "fprop")),
    ("elementwise/norm/rope", ("elementwise", "vectorized", "reduce", "norm", "triton", "fused", "silu", "mul",
                               "add", "cat", "copy", "index")),
)


def category(name: str) -> str:
    low = name.lower()
    for label, keys in CATEGORIES:
        if any(key in low for key in keys):
            return label
    return "other"


def profile_backend(backend, request, label: str, steps: int) -> dict:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    backend.generate(request)  # warm: graphs captured, kernels chosen, compile done
    torch.cuda.synchronize()
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        backend.generate(request)
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    by_cat: dict[str, float] = defaultdict(float)
    kernels = []
    for event in prof.key_averages():
        if event.device_type != DeviceType.CUDA:  # kernels only: CPU-side ops would count them twice
            continue
        cuda_us = getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)
        if not cuda_us:
            continue
        by_cat[category(event.key)] += cuda_us / 1e6
        kernels.append((event.key[:110], round(cuda_us / 1e3, 2), event.count))
    kernels.sort(key=lambda item: -item[1])
    gpu_total = sum(by_cat.values())
    return {"label": label, "steps": steps, "wall_s": round(wall, 3), "gpu_s": round(gpu_total, 3),
            "host_gap_s": round(wall - gpu_total, 3),
            "by_category_s": {k: round(v, 3) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])},
            "top_kernels_ms": kernels[:25]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/profile"))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--case", default="t2v:256:189")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from cosmos_helpers.bench import Case, _diffusers_backends, build_request
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline

    mode, tier, frames = (a.case.split(":") + ["1"])[:3]
    mode = {"t2i": "text2image", "t2v": "text2video", "i2v": "image2video"}[mode]
    case = Case(mode=mode, tier=tier, frames=int(frames))
    pipe = build_random_nano_pipeline("cuda", torch.bfloat16)
    stock, fast = _diffusers_backends(True, None, None, False, None, pipeline=pipe)
    _, compiled = _diffusers_backends(True, None, None, False, {"compile": True}, pipeline=pipe)
    request = build_request(case, profile="nano", steps=a.steps, guidance=6.0, text_tokens=2000, seed=0)
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "case": a.case, "rows": []}

    def save():
        (out / "profile.json").write_text(json.dumps(results, indent=1))

    for label, backend in (("stock", stock), ("fast", fast), ("fast+compile", compiled)):
        try:
            row = profile_backend(backend, request, label, a.steps)
        except Exception as exc:  # keep the other rows
            row = {"label": label, "error": f"{type(exc).__name__}: {exc}"}
        results["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "top_kernels_ms"}), flush=True)
        save()
    lines = [f"# Profile: {a.case}, {a.steps} steps, {results['gpu']}, torch {results['torch']}", "",
             "| backend | wall s | GPU kernel s | host gap s | "
             + " | ".join(label for label, _ in CATEGORIES) + " | other |",
             "| --- | ---: | ---: | ---: |" + " ---: |" * (len(CATEGORIES) + 1)]
    for row in results["rows"]:
        if "error" in row:
            lines.append(f"| {row['label']} | error: {row['error'][:80]} |")
            continue
        cats = row["by_category_s"]
        lines.append(f"| {row['label']} | {row['wall_s']} | {row['gpu_s']} | {row['host_gap_s']} | "
                     + " | ".join(str(cats.get(label, 0.0)) for label, _ in CATEGORIES)
                     + f" | {cats.get('other', 0.0)} |")
    for row in results["rows"]:
        if "top_kernels_ms" in row:
            lines += ["", f"## Top kernels, {row['label']} (ms, calls)", ""]
            lines += [f"- {name}: {ms} ms x{count}" for name, ms, count in row["top_kernels_ms"][:15]]
    (out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
