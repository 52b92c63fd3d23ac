"""Warm-call steadiness of the fast path (runs 10-12 in GPU_RESULTS.md): t2v 256p, 189 frames.

    python3 benchmarks/gpu_steadiness.py                 # run 10: one fast backend alone, four calls
    python3 benchmarks/gpu_steadiness.py --after-stock   # runs 11, 12: the bench's order (stock calls first)

Each call prints its time split (first step, per step, decode), the fast path's counters, and what else ran
inside it: Dynamo frames compiled, Inductor graphs compiled, cuDNN attention/projection timings, CUDA
graph captures, and the caching allocator's cudaMalloc calls; so a slow warm call names its one-time work.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

for k, v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ[k] = v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from cosmos_helpers.bench import Case, _diffusers_backends, build_request  # noqa: E402
from cosmos_helpers.fast import attention, fast_path_stats  # noqa: E402


def snapshot(pipe) -> dict:
    st = fast_path_stats(pipe)
    mem = torch.cuda.memory_stats()
    return {"graph_captures": st.get("graph_captures"), "graph_replays": st.get("graph_replays"),
            "text_tower_runs": st.get("text_tower_runs"), "batched_pairs": st.get("batched_pairs"),
            "attention_tunings": len(attention.TUNING_LOG),
            "projection_choices": len(st.get("projection_choices") or {}),
            "dynamo_frames": sum(counters["stats"].values()) if "stats" in counters else 0,
            "inductor": sum(counters["inductor"].values()) if "inductor" in counters else 0,
            "cuda_mallocs": mem.get("num_device_alloc", 0), "alloc_retries": mem.get("num_alloc_retries", 0)}


def call(name: str, backend, request, pipe, index: int) -> None:
    before = snapshot(pipe)
    torch.cuda.synchronize()
    start = time.perf_counter()
    g = backend.generate(request)
    torch.cuda.synchronize()
    total = time.perf_counter() - start
    after = snapshot(pipe)
    delta = {k: after[k] - before[k] for k in after if isinstance(after[k], int) and isinstance(before[k], int)}
    tm = {k: round(v, 3) for k, v in g.timings.items() if k in ("first_step_s", "step_s", "decode_s")}
    print(json.dumps({"backend": name, "call": index, "total": round(total, 3), **tm, "delta": delta}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--after-stock", action="store_true", help="one untimed 1-step stock call, then 3 stock calls")
    ap.add_argument("--calls", type=int, default=4)
    a = ap.parse_args()
    made = _diffusers_backends("nano", "cuda", None, False, None)
    stock, fast = made["stock"], made["fast"]
    req = build_request(Case("text2video", "256", 189), profile="nano", steps=35, guidance=6.0, text_tokens=200, seed=0)
    pipe = fast.pipeline(req.model)
    if a.after_stock:
        one = build_request(Case("text2video", "256", 189), profile="nano", steps=1, guidance=6.0, text_tokens=200,
                            seed=0)
        call("stock", stock, one, pipe, -1)
        for i in range(3):
            call("stock", stock, req, pipe, i)
    for i in range(a.calls):
        call("fast", fast, req, pipe, i)
    return 0


if __name__ == "__main__":
    sys.exit(main())
