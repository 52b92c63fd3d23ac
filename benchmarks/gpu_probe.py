"""Kernel-level probes behind the fast path's remaining choices (one H200, Nano shapes, bf16).

Answers, on random tensors at the exact shapes of a Nano generation layer, in one process:
  1. matrix products: q/k/v and gate/up as separate products vs one fused product (per-layer ms, TFLOP/s)
     at the generation-token counts of t2v 256p / 480p, one branch and both guidance branches batched;
  2. whether the card holds its matrix-product rate over a sustained minute-long workload (clock/power);
  3. attention at 480p: the packed (strided) layout the fast path passes vs contiguous head-major tensors;
  4. the Wan2.2 VAE decode (random Nano-shaped weights): default vs channels-last 3-D memory format;
  5. the host copy of a decoded 480p video: float32 pageable (stock) vs uint8 converted on the GPU, pinned;
  6. the fast path's attention candidates (FlashAttention-3 among them where it is installed) at the
     generation-attention shapes of t2v 256p / 480p / 720p, 189 frames: milliseconds, TFLOP/s and
     agreement with PyTorch's default kernel, through the fast path's own timing (``--only kernels``).
Writes probe.json to $OUT (or --out). Run: python benchmarks/gpu_probe.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

H, KV, D, MLP = 4096, 1024, 128, 12288  # hidden, key/value width (8 heads x 128), head dim, MLP width


def bench(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median milliseconds of ``fn`` with CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def gemms(out: dict) -> None:
    dev, dt = "cuda", torch.bfloat16
    shapes = {"q": (H, H), "k": (KV, H), "v": (KV, H), "o": (H, H), "gate": (MLP, H), "up": (MLP, H), "down": (H, MLP)}
    w = {name: torch.randn(n, k, device=dev, dtype=dt) * 0.02 for name, (n, k) in shapes.items()}
    qkv = torch.cat([w["q"], w["k"], w["v"]])
    gate_up = torch.cat([w["gate"], w["up"]])
    res = {}
    for m in (2880, 5760, 18720, 37440):
        x = torch.randn(m, H, device=dev, dtype=dt)
        hmid = torch.randn(m, MLP, device=dev, dtype=dt)
        row = {}
        row["qkv_separate"] = bench(lambda: (F.linear(x, w["q"]), F.linear(x, w["k"]), F.linear(x, w["v"])))
        row["qkv_fused"] = bench(lambda: F.linear(x, qkv))
        row["o"] = bench(lambda: F.linear(x, w["o"]))
        row["gate_up_separate"] = bench(lambda: (F.linear(x, w["gate"]), F.linear(x, w["up"])))
        row["gate_up_fused"] = bench(lambda: F.linear(x, gate_up))
        row["down"] = bench(lambda: F.linear(hmid, w["down"]))
        flops = {"qkv": 2 * m * H * (H + 2 * KV), "o": 2 * m * H * H,
                 "gate_up": 2 * m * H * 2 * MLP, "down": 2 * m * MLP * H}
        tf = {}
        for key, ms in row.items():
            base = key.split("_separate")[0].split("_fused")[0]
            tf[key] = round(flops[base] / (ms * 1e-3) / 1e12)
        sep = row["qkv_separate"] + row["o"] + row["gate_up_separate"] + row["down"]
        fused = row["qkv_fused"] + row["o"] + row["gate_up_fused"] + row["down"]
        total = sum(flops.values())
        res[m] = {"ms": {k: round(v, 3) for k, v in row.items()}, "tflops": tf,
                  "layer_ms_separate": round(sep, 3), "layer_ms_fused": round(fused, 3),
                  "layer_tflops_separate": round(total / (sep * 1e-3) / 1e12),
                  "layer_tflops_fused": round(total / (fused * 1e-3) / 1e12)}
        print(f"gemm M={m}: {json.dumps(res[m])}", flush=True)
        del x, hmid
    out["gemm"] = res

    # sustained: the fused layer's products back to back for ~40 s at M = 37440 (480p, both branches)
    m = 37440
    x = torch.randn(m, H, device=dev, dtype=dt)
    hmid = torch.randn(m, MLP, device=dev, dtype=dt)
    o_w, down_w = w["o"], w["down"]
    flops_layer = 2 * m * H * (H + 2 * KV) + 2 * m * H * H + 2 * m * H * 2 * MLP + 2 * m * MLP * H
    windows = []
    t_end = time.perf_counter() + 40
    while time.perf_counter() < t_end:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(36):
            F.linear(x, qkv)
            F.linear(x, o_w)
            F.linear(x, gate_up)
            F.linear(hmid, down_w)
        end.record()
        end.synchronize()
        windows.append(round(36 * flops_layer / (start.elapsed_time(end) * 1e-3) / 1e12))
    out["sustained_tflops"] = {"first": windows[:3], "last": windows[-3:], "min": min(windows), "max": max(windows),
                               "n": len(windows)}
    print(f"sustained: {out['sustained_tflops']}", flush=True)


def attention(out: dict) -> None:
    from torch.nn.attention import SDPBackend

    nq, nk = 18720, 18720 + 2150
    flops = 4 * nq * nk * 128 * 32
    q = torch.randn(nq, 32, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(nk, 8, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(nk, 8, D, device="cuda", dtype=torch.bfloat16)
    qs, ks, vs = (t.unsqueeze(0).transpose(1, 2) for t in (q, k, v))  # packed layout, head-major view
    qc, kc, vc = (t.contiguous() for t in (qs, ks, vs))
    ke, ve = ks.repeat_interleave(4, dim=1), vs.repeat_interleave(4, dim=1)
    res = {}
    variants = {
        "packed_native_gqa": lambda: F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True),
        "contiguous_native_gqa": lambda: F.scaled_dot_product_attention(qc, kc, vc, enable_gqa=True),
        "packed_cudnn_expanded": lambda: _with(SDPBackend.CUDNN_ATTENTION, qs, ke, ve),
        "contiguous_cudnn_expanded": lambda: _with(SDPBackend.CUDNN_ATTENTION, qc, ke, ve),
        "packed_flash_gqa": lambda: _with(SDPBackend.FLASH_ATTENTION, qs, ks, vs, gqa=True),
    }
    for name, fn in variants.items():
        try:
            ms = bench(fn, repeats=10)
            res[name] = {"ms": round(ms, 3), "tflops": round(flops / (ms * 1e-3) / 1e12)}
        except Exception as exc:
            res[name] = f"{type(exc).__name__}: {str(exc)[:160]}"
        print(f"attention {name}: {res[name]}", flush=True)
    out["attention_480p"] = res


# generation queries, keys (200-token prompt: 303 text keys) of t2v 189 frames, as the fast path logs them
ATTENTION_SHAPES = {"t2v 256p": (2880, 3183), "t2v 480p": (18720, 19023), "t2v 720p": (44160, 44463)}


def attention_candidates(out: dict) -> None:
    from cosmos_helpers.fast import attention as fa

    res = {"candidates": list(fa.CANDIDATES)}
    for case, (nq, nk) in ATTENTION_SHAPES.items():
        q = torch.randn(nq, 32, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(nk, 8, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        log = fa.time_candidates(q, k, v, repeats=10)
        flops = 4 * nq * nk * 32 * D
        reference = fa.sdpa(q, k, v, backend="native").float()
        res[case] = {}
        for name, ms in log.items():
            if not isinstance(ms, float):
                res[case][name] = ms
                continue
            err = (fa.sdpa(q, k, v, backend=name).float() - reference).abs().max() / reference.abs().max()
            res[case][name] = {"ms": ms, "tflops": round(flops / (ms * 1e-3) / 1e12), "max_rel_vs_native": float(err)}
        print(f"attention candidates {case}: {res[case]}", flush=True)
        del q, k, v
    out["attention_candidates"] = res


def _with(backend, q, k, v, gqa: bool = False):
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)


def vae(out: dict) -> None:
    from diffusers import AutoencoderKLWan

    from cosmos_helpers.models.random_nano import NANO_VAE_CONFIG

    with torch.device("cuda"):
        model = AutoencoderKLWan(**NANO_VAE_CONFIG)
    model = model.to(torch.bfloat16).eval()
    torch.backends.cudnn.benchmark = True
    res = {}
    for tier, (h, w) in {"256p": (192, 320), "480p": (480, 832)}.items():
        z = torch.randn(1, 48, 48, h // 16, w // 16, device="cuda", dtype=torch.bfloat16)
        row = {}
        with torch.inference_mode():
            model.to(memory_format=torch.contiguous_format)
            ref = None
            for label in ("default", "channels_last_3d"):
                if label == "channels_last_3d":
                    model.to(memory_format=torch.channels_last_3d)
                    zin = z.contiguous(memory_format=torch.channels_last_3d)
                else:
                    zin = z
                times = []
                for _ in range(2):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    video = model.decode(zin).sample
                    torch.cuda.synchronize()
                    times.append(round(time.perf_counter() - t0, 3))
                if ref is None:
                    ref = video.float()
                    row[label] = {"s": times}
                else:
                    d = (video.float() - ref)
                    row[label] = {"s": times, "max_abs_diff": float(d.abs().max()),
                                  "rel_l2": float(d.norm() / ref.norm())}
                del video
            model.to(memory_format=torch.contiguous_format)
        res[tier] = row
        print(f"vae {tier}: {row}", flush=True)
        del ref
        torch.cuda.empty_cache()
    torch.backends.cudnn.benchmark = False
    out["vae_decode"] = res


def host_copy(out: dict) -> None:
    video = torch.rand(189, 3, 480, 832, device="cuda", dtype=torch.float32)
    res = {}

    def stock():
        return video.cpu().permute(0, 2, 3, 1).float().numpy()

    pinned = torch.empty((189, 480, 832, 3), dtype=torch.uint8, pin_memory=True)

    def fast():
        frames = video.mul(255.0).round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
        pinned.copy_(frames)
        return pinned.numpy()

    for name, fn in (("float32_pageable_then_permute", stock), ("uint8_on_gpu_pinned", fast)):
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            times.append(round(time.perf_counter() - t0, 4))
        res[name] = times
    print(f"host copy 480p video: {res}", flush=True)
    out["host_copy_480p"] = res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu"))
    ap.add_argument("--only", default="gemm,attention,vae,host,kernels")
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d %H:%M")}
    steps = {"gemm": gemms, "attention": attention, "vae": vae, "host": host_copy, "kernels": attention_candidates}
    for name in a.only.split(","):
        try:
            steps[name](out)
        except Exception as exc:
            out.setdefault("errors", []).append(f"{name}: {type(exc).__name__}: {exc}")
            print(f"{name} failed: {exc!r}", flush=True)
        (out_dir / "probe.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
