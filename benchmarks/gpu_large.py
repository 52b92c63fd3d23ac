"""Large shapes (t2v 480p/720p, 189 frames): which fast-path switches pay off there, per step and in memory.

At 720p a pass is 44k generation tokens per guidance branch: the matrix products are large already, so
batching the two branches and replaying CUDA graphs can only hold memory, unless they still save time.
This measures it, on Nano shapes with random bf16 weights, one process, one pipeline:

* ``stock``      diffusers as shipped;
* ``fast``       the fast path with its defaults;
* ``batched``    the fast path with both branches in one pass and CUDA graphs at every size;
* ``unbatched``  the fast path with the branches one after the other and no graphs.

Per variant: a ``--warm-steps`` warm-up call (compile, attention timing), then a timed call of ``--steps`` steps
with a device sync after every step; seconds per step = median over steps 3.. (graph captures land in steps 1-2),
decode seconds, peak allocated and reserved GiB of the timed call. A 35-step call is derived as the timed call's
whole time plus the missing steps at the median step (the first step carries the call's own work: prompt
encoding, latent set-up), or is the timed call itself with ``--steps 35``. Output: ``large.json`` and ``large.md``.

    python3 benchmarks/gpu_large.py --out $OUT      # on the device, after the install line of GPU_RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_k] = _v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

VARIANTS = {"stock": None, "fast": {}, "batched": {"batch_cfg": True, "cuda_graphs": True},
            "unbatched": {"batch_cfg": False, "cuda_graphs": False}}


def timed_call(backend, request) -> dict:
    """One call with a sync after each step: per-step seconds, decode seconds, peak GiB."""
    ends: list[float] = []

    def on_step(_done, _total):
        torch.cuda.synchronize()
        ends.append(time.perf_counter())

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    generation = backend.generate(request, progress=on_step)
    torch.cuda.synchronize()
    total = time.perf_counter() - start
    steps = [b - a for a, b in zip([start] + ends, ends)]
    steady = steps[2:] or steps
    return {"total_s": round(total, 3), "steps_s": [round(s, 3) for s in steps],
            "step_s": round(statistics.median(steady), 4), "decode_s": round(total - (ends[-1] - start), 3),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
            "frames": generation.frames}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/large"))
    ap.add_argument("--cases", default="t2v:720:189,t2v:480:189")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warm-steps", type=int, default=2)
    ap.add_argument("--variants", default="stock,batched,unbatched")
    ap.add_argument("--text-tokens", type=int, default=200)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from cosmos_helpers.bench import Case, _diffusers_backends, build_request
    from cosmos_helpers.fast import fast_path_stats
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline

    pipe = build_random_nano_pipeline("cuda", torch.bfloat16)
    rows = []
    for spec in a.cases.split(","):
        mode, tier, frames = spec.split(":")
        case = Case(mode={"t2v": "text2video", "i2v": "image2video"}[mode], tier=tier, frames=int(frames))
        request = build_request(case, profile="nano", steps=a.steps, guidance=6.0, text_tokens=a.text_tokens, seed=0)
        warm = build_request(case, profile="nano", steps=a.warm_steps, guidance=6.0, text_tokens=a.text_tokens, seed=0)
        reference = None
        for name in a.variants.split(","):
            backends = _diffusers_backends(True, None, None, False, VARIANTS[name], pipeline=pipe)
            backend = backends["stock" if VARIANTS[name] is None else "fast"]
            backend.generate(warm)
            row = timed_call(backend, request)
            frames_out = row.pop("frames")
            if reference is None:
                reference = frames_out
            row["max_abs_diff_vs_first"] = float(abs(frames_out.astype(int) - reference.astype(int)).max())
            if VARIANTS[name] is not None:
                stats = fast_path_stats(pipe)
                row["stats"] = {k: stats.get(k) for k in ("graph_captures", "graph_replays", "batched_pairs",
                                                          "stock_fallbacks", "attention_tuning")}
            row.update(case=spec, variant=name, steps=a.steps)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "stats"}), flush=True)
            (out / "large.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                                        "torch": torch.__version__, "rows": rows}, indent=1))
            del backends, backend
            torch.cuda.empty_cache()
    lines = [f"# Large shapes, {torch.cuda.get_device_name()}, torch {torch.__version__}, {a.steps} steps", "",
             f"| case | variant | s/step | decode s | call s | 35 steps{' (derived)' if a.steps != 35 else ''} s "
             "| peak GiB | reserved GiB |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['variant']} | {r['step_s']} | {r['decode_s']} | {r['total_s']} | "
                     f"{r['total_s'] + (35 - a.steps) * r['step_s']:.1f} | {r['peak_gib']} | {r['reserved_gib']} |")
    (out / "large.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
