"""Warm-call steadiness of the fast path alone (run 10 in GPU_RESULTS.md): one fast backend, four t2v 256p calls.

    python3 benchmarks/gpu_steadiness.py    # on the device, after the install line of GPU_RESULTS.md
"""
import json
import os
import sys
import time
from pathlib import Path
for k, v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ[k] = v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402
from cosmos_helpers.bench import Case, _diffusers_backends, build_request  # noqa: E402
from cosmos_helpers.fast import fast_path_stats  # noqa: E402
made = _diffusers_backends("nano", "cuda", None, False, None)
fast = made["fast"]
req = build_request(Case("text2video", "256", 189), profile="nano", steps=35, guidance=6.0, text_tokens=200, seed=0)
pipe = fast.pipeline(req.model)
for i in range(4):
    torch.cuda.synchronize()
    t = time.perf_counter()
    g = fast.generate(req)
    torch.cuda.synchronize()
    total = time.perf_counter() - t
    st = fast_path_stats(pipe)
    keep = {k: st.get(k) for k in ("graph_captures", "graph_replays", "text_tower_runs", "batched_pairs")}
    tm = {k: round(v, 3) for k, v in g.timings.items()}
    print(json.dumps({"call": i, "total": round(total, 3), "timings": tm, **keep}), flush=True)
