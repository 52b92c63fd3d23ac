"""SeaCache on one H200: stock + SeaCache against the fast path + SeaCache, in one process on the same weights.

Nano shapes with random bf16 weights (latency does not depend on weight values; random weights make the skip
decisions meaningless for quality, but a skipped pass costs what it costs), t2v 189 frames, 35 steps, guidance 6,
200-token prompts. Per case, through ``DiffusersBackend.generate`` with ``step_cache=``:

* ``stock+sea``   stock diffusers with diffusers' SeaCache defaults (the issue's yardstick);
* ``fast+sea``    the fast path with the same cache, after an untimed short call of the same shape (compile,
  attention timing: the warm figure a notebook sees from its second call on);
* ``fast+dense``  the densest schedule the defaults allow: an unreachable threshold, so only the first and last steps
  and the step after every two cached ones compute (the best case).

Each row: seconds, passes computed of 70 (from the manifest), the pass schedule, the seconds of a computed and of a
cached pass (``bench.pass_costs``), peak GiB; the fast rows also their ratio to ``stock+sea`` and the PSNR
of their frames against it. ``step_cache.json`` is rewritten after every row, so a run cut short keeps what it had.

    python3 benchmarks/gpu_step_cache.py --out $OUT                 # on the device, after GPU_RESULTS' install line
    python3 benchmarks/gpu_step_cache.py --smoke --out /tmp/sc      # the same code on the tiny model, CPU, seconds
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

import numpy as np  # noqa: E402


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR of two uint8 clips in dB (frame by frame would repeat the same number here: one over the clip)."""
    err = np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2)
    return float("inf") if err == 0 else round(float(10 * np.log10(255.0 ** 2 / err)), 2)


def measure(name: str, backend, request, cuda: bool, reference=None) -> tuple[dict, np.ndarray]:
    from cosmos_helpers.bench import _timed
    from cosmos_helpers.bench import pass_costs

    timed = _timed(name, backend, request, cuda)
    cache = timed.generation.provenance["step_cache"]
    row = {"row": name, "seconds": round(timed.seconds, 3), "peak_gib": None if timed.peak is None else
           round(timed.peak, 2), "schedule": cache["schedule"], **pass_costs(timed.step_s, cache["schedule"]),
           "steps_s": [round(s, 3) for s in timed.step_s],
           "fast_fallbacks": timed.generation.provenance.get("fast_fallbacks")}
    if reference is not None:
        row["psnr_vs_stock_db"] = psnr(timed.frames, reference)
    return row, timed.frames


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/step_cache"))
    ap.add_argument("--cases", default=None, help="default: t2v:720:189,t2v:480:189 (smoke: t2v:128:9)")
    ap.add_argument("--steps", type=int, default=None, help="default 35 (smoke 12)")
    ap.add_argument("--warm-steps", type=int, default=1)
    ap.add_argument("--text-tokens", type=int, default=200)
    ap.add_argument("--rows", default="stock+sea,fast+sea,fast+dense")
    ap.add_argument("--smoke", action="store_true", help="the tiny model on CPU: checks the script, times nothing")
    a = ap.parse_args()
    import torch

    from cosmos_helpers import SeaCache
    from cosmos_helpers.bench import Case, _diffusers_backends, _environment, build_request
    from cosmos_helpers.fast import fast_path_stats

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = a.steps or (12 if a.smoke else 35)
    cases = [Case.parse(c, 189) for c in (a.cases or ("t2v:128:9" if a.smoke else "t2v:720:189,t2v:480:189"))
             .split(",")]
    backends = _diffusers_backends(not a.smoke, "cpu" if a.smoke else None, None, False, None)
    stock, fast = backends["stock"], backends["fast"]
    cuda = stock.device.startswith("cuda")
    profile = "tiny" if a.smoke else "nano"
    request_for = dict(profile=profile, guidance=6.0, text_tokens=None if a.smoke else a.text_tokens, seed=0)
    caches = {"stock+sea": (stock, SeaCache()), "fast+sea": (fast, SeaCache()),
              "fast+dense": (fast, SeaCache(threshold=1e9))}
    report = {"environment": _environment(stock), "steps": steps, "rows": []}
    started = time.perf_counter()
    # process start-up (CUDA context, cuBLAS handles) lands on no row
    stock.generate(build_request(cases[0], steps=1, **request_for))
    references: dict[str, np.ndarray] = {}
    rows = a.rows.split(",")
    # the dense (best-case) rows last: if the run is cut short, the yardstick comparisons are already written
    plan = [(case, name) for case in cases for name in rows if name != "fast+dense"]
    plan += [(case, name) for case in cases for name in rows if name == "fast+dense"]
    warmed: set[str] = set()
    for case, name in plan:
        backend, cache = caches[name]
        if backend is fast and case.label not in warmed:  # compile + tune at this shape: the warm figure
            fast.generate(build_request(case, steps=a.warm_steps, **request_for))
            warmed.add(case.label)
        request = build_request(case, steps=steps, step_cache=cache, **request_for)
        row, frames = measure(name, backend, request, cuda, references.get(case.label))
        if name == "stock+sea":
            references[case.label] = frames
        row.update(case=case.label, elapsed_s=round(time.perf_counter() - started, 1))
        report["rows"].append(row)
        yardstick = next((r for r in report["rows"] if r["case"] == case.label and r["row"] == "stock+sea"), None)
        if yardstick is not None and name != "stock+sea":
            row["ratio_vs_stock_sea"] = round(row["seconds"] / yardstick["seconds"], 3)
        print(f"{case.label:<14} {name:<11} {row['seconds']:8.2f} s  {row['passes_computed']}/{row['passes']} "
              f"passes  computed {row['computed_pass_s']} s  cached {row['cached_pass_s']} s  "
              f"ratio {row.get('ratio_vs_stock_sea', '-')}  psnr {row.get('psnr_vs_stock_db', '-')}  "
              f"[{row['elapsed_s']} s]", flush=True)
        (out / "step_cache.json").write_text(json.dumps(report, indent=1, default=str))
        del frames
        if cuda:
            torch.cuda.empty_cache()
    model = build_request(cases[0], steps=1, **request_for).model
    stats = fast_path_stats(fast.pipeline(model))
    report["fast_stats"] = {k: stats.get(k) for k in ("attention_tuning", "graph_captures", "stock_fallbacks",
                                                      "fallback_reasons", "compile_error")}
    report["model"] = model
    (out / "step_cache.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
