"""Multi-GPU plans rehearsed on one GPU: do the sharded CUDA passes give the one-GPU fast path's latents? (issue 13)

No two-GPU machine has been lent to this project, so the plans' sharding code has run on CPU processes (the gloo
tests) but never on CUDA kernels. This script runs it on one H200: the plan's two ranks are two processes that
share GPU 0 and exchange tensors through gloo (NCCL refuses two ranks on one GPU). Each rank builds the same
random-weight Nano pipeline, installs the fast path with the options a real worker would use on that plan
(:func:`~cosmos_helpers.backends.diffusers.parallel.worker.rank_fast_options`) and then the plan
(:func:`~cosmos_helpers.backends.diffusers.parallel.worker.install_plan`, the worker's own code), and generates
final latents.

Compared, per case (t2v 256p, guidance 6, 200-token prompts, seed 0, final latents), against one process on the
same GPU: stock; the kernel-swap yardstick (stock with FlashAttention-2 instead of the default kernel); the fast
path as one GPU runs it (branches batched, CUDA graphs); and the fast path with the ranks' options (no batched
branches; for Ulysses no CUDA graphs). All fast runs take this run's kernel options (:func:`fast_options`).
Distances: max |a - b| / max |b| and relative L2.

What it cannot show: speed (both ranks share one GPU and gloo copies through host memory), NCCL, and the start,
crash and stop of the worker processes on CUDA (their CPU tests stand). Seconds are recorded only to size runs.

    python3 benchmarks/gpu_parallel_rehearsal.py --out $OUT    # after the install line of GPU_RESULTS.md

``--out``: parallel_rehearsal.json, rewritten after every phase. ``--smoke`` runs the same steps with the tiny model
on CPU (3 steps, 96x64) to check this script's plumbing before GPU time is spent on it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_k] = _v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from gpu_offload_equivalence import call_kwargs, distance  # noqa: E402

from cosmos_helpers.backends.diffusers.parallel.plan import ParallelPlan  # noqa: E402

PLANS = {"cfg": ParallelPlan.build(2, cfg_parallel=2), "ulysses": ParallelPlan.build(2, ulysses=2)}


def build(smoke: bool):
    """The pipeline every process builds alike: random-weight Nano in bf16 on GPU 0 (the tiny model on CPU)."""
    if smoke:
        from cosmos_helpers.models.tiny import build_tiny_pipeline

        torch.set_num_threads(1)
        pipe = build_tiny_pipeline(0)
        pipe.set_progress_bar_config(disable=True)
        return pipe
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline

    return build_random_nano_pipeline("cuda:0", torch.bfloat16)


def call(frames: int, args) -> dict:
    kw = call_kwargs(frames, 3 if args.smoke else args.steps)
    return dict(kw, height=64, width=96) if args.smoke else kw


def fast_options(args):
    """The fast path's options of every run. By default nothing is chosen by timing in each process (one attention
    kernel, separate q/k/v and gate/up products, the fused layer code uncompiled: Inductor times its reduction
    kernels' configurations on first use), so that two processes run the same kernels and only sharding differs.
    ``--projections timed --compile on`` are the fast path's own defaults."""
    from cosmos_helpers.fast import FastOptions

    return FastOptions(attention=args.attention, fuse_projections=None if args.projections == "timed" else False,
                       compile=None if args.compile == "on" else "eager")


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def generate(pipe, kw: dict, state=None) -> tuple[torch.Tensor, float]:
    """Final latents of one seeded call and its seconds (``state``: a CFG-parallel forward to reset first)."""
    if state is not None:
        state.reset()
    _sync()
    start = time.perf_counter()
    with torch.inference_mode():
        latents = pipe(**kw, generator=torch.Generator("cpu").manual_seed(0)).video.float().cpu()
    _sync()
    return latents, round(time.perf_counter() - start, 2)


def references(frames_by_plan: dict[str, int], args) -> tuple[dict, dict]:
    """One process, one pipeline: every latent the plans are compared with, keyed ``(frames, label)``."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    from cosmos_helpers.fast import disable_fast_path, enable_fast_path, fast_path_stats
    from cosmos_helpers.fast.attention import StockProcessorWithKernel
    from cosmos_helpers.backends.diffusers.parallel.worker import rank_fast_options

    pipe = build(args.smoke)
    latents, info = {}, {}
    for frames in sorted(set(frames_by_plan.values())):
        kw = call(frames, args)
        latents[frames, "stock"], info[f"{frames}f stock s"] = generate(pipe, kw)
        pipe.transformer.set_attn_processor(StockProcessorWithKernel("flash"))
        latents[frames, "yardstick"], info[f"{frames}f yardstick s"] = generate(pipe, kw)
        pipe.transformer.set_attn_processor(Cosmos3AttnProcessor())
        variants = {"fast": fast_options(args)}
        variants.update({f"fast as {name} ranks": rank_fast_options(fast_options(args), PLANS[name])
                         for name, f in frames_by_plan.items() if f == frames})
        for label, options in variants.items():
            enable_fast_path(pipe, options)
            cold, info[f"{frames}f {label} cold s"] = generate(pipe, kw)
            latents[frames, label], info[f"{frames}f {label} warm s"] = generate(pipe, kw)
            info[f"{frames}f {label}: cold vs warm"] = distance(cold, latents[frames, label])
            stats = fast_path_stats(pipe)
            info[f"{frames}f {label} stats"] = {k: stats.get(k) for k in ("calls", "batched_pairs", "graph_replays",
                                                                          "stock_fallbacks", "projection_choices")}
            disable_fast_path(pipe)
        print(json.dumps({k: v for k, v in info.items() if k.startswith(f"{frames}f")}, default=str), flush=True)
    del pipe
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        info["parent_reserved_gib_after_release"] = round(torch.cuda.memory_reserved() / 2**30, 2)
    return latents, info


def rank_main(rank: int, name: str, frames: int, args, port: int) -> None:
    """One rank: join the gloo group on GPU 0, build, install the fast path and the plan, generate ``calls`` times."""
    from cosmos_helpers.fast import fast_path_stats, set_fast_path_active
    from cosmos_helpers.backends.diffusers.parallel.worker import install_plan, join_group, rank_fast_options

    if not args.smoke:
        torch.cuda.set_device(0)
    plan = PLANS[name]
    spec = {"device": "cpu", "port": port, "collective_timeout": 600, "plan": plan.__dict__}  # "cpu": gloo
    _, groups = join_group(spec, rank, plan.gpus)
    pipe = build(args.smoke)
    state = install_plan(pipe, plan, groups, rank, rank_fast_options(fast_options(args), plan))
    set_fast_path_active(pipe, True)
    kw, results = call(frames, args), []
    for _ in range(args.ulysses_calls if name == "ulysses" else args.calls):
        results.append(generate(pipe, kw, state))
    stats = fast_path_stats(pipe)
    torch.save({"latents": [r[0] for r in results], "seconds": [r[1] for r in results],
                "cfg": dict(state.stats) if state else None,
                "stock_seam_passes": pipe._cosmos_ulysses.passes if plan.ulysses > 1 else 0,
                "fast": {k: stats.get(k) for k in ("calls", "batched_pairs", "graph_replays", "stock_fallbacks",
                                                   "projection_choices")},
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if not args.smoke else None},
               args.out / f"{name}-rank{rank}.pt")
    torch.distributed.barrier()  # leave together: a rank that exits holding its gloo group can abort
    torch.distributed.destroy_process_group()


def rehearse(name: str, frames: int, args, latents: dict) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.perf_counter()
    mp.spawn(rank_main, args=(name, frames, args, port), nprocs=PLANS[name].gpus, join=True)
    result: dict = {"plan": PLANS[name].serve_kwargs(), "frames": frames,
                    "wall_s": round(time.perf_counter() - start, 1)}
    ranks = [torch.load(args.out / f"{name}-rank{r}.pt") for r in range(PLANS[name].gpus)]
    for rank, data in enumerate(ranks):
        result[f"rank{rank}"] = {k: v for k, v in data.items() if k != "latents"}
    mine = ranks[0]["latents"]
    result["rank1 vs rank0"] = distance(ranks[1]["latents"][-1], mine[-1])
    if len(mine) > 1:
        result["second call vs first"] = distance(mine[-1], mine[0])
    for label in ("stock", "yardstick", "fast", f"fast as {name} ranks"):
        result[f"{name} vs {label}"] = distance(mine[-1], latents[frames, label])
    result["yardstick vs stock"] = distance(latents[frames, "yardstick"], latents[frames, "stock"])
    result["fast vs stock"] = distance(latents[frames, "fast"], latents[frames, "stock"])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "outputs/parallel_rehearsal")))
    ap.add_argument("--plans", default="cfg,ulysses", help="comma-separated: cfg, ulysses")
    ap.add_argument("--cfg-frames", type=int, default=189)
    ap.add_argument("--ulysses-frames", type=int, default=189)
    ap.add_argument("--ulysses-calls", type=int, default=1,
                    help="generations per Ulysses rank (few: gloo moves every layer's tokens through host memory)")
    ap.add_argument("--steps", type=int, default=35)
    ap.add_argument("--calls", type=int, default=2, help="generations per rank (the last is compared)")
    ap.add_argument("--attention", default="cudnn", help="one kernel for every run, so that only sharding differs")
    ap.add_argument("--projections", choices=["off", "timed"], default="off",
                    help="stacked q/k/v and gate/up products: off, or timed in each process (the fast default)")
    ap.add_argument("--compile", choices=["eager", "on"], default="eager",
                    help="the fused layer code uncompiled, or compiled (the fast default; tuned in each process)")
    ap.add_argument("--smoke", action="store_true", help="the tiny model on CPU, 3 steps: check the plumbing")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "parallel_rehearsal.json"
    frames = {n: 9 if args.smoke else getattr(args, f"{n}_frames") for n in args.plans.split(",")}
    report: dict = {"gpu": "cpu (smoke)" if args.smoke else torch.cuda.get_device_name(), "torch": torch.__version__,
                    "attention": args.attention, "projections": args.projections,
                    "compile": args.compile, "steps": 3 if args.smoke else args.steps}
    latents, report["references"] = references(frames, args)
    path.write_text(json.dumps(report, indent=1, default=str))
    for name, n in frames.items():
        try:
            report[name] = rehearse(name, n, args, latents)
        except Exception:  # noqa: BLE001 - recorded; the next plan still runs
            report[name] = {"error": traceback.format_exc()[-3000:]}
        print(json.dumps({name: report[name]}, indent=1, default=str), flush=True)
        path.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
