"""The GPU measurement behind benchmarks/GPU_RESULTS.md (one H200, Nano shapes, random bf16 weights).

One process builds the Nano-shaped pipeline once and, on the same weights and kernels:
  1. times PyTorch's SDPA kernels at the generation-attention shapes (what ``attention="auto"`` chooses from);
  2. measures bf16 equivalence on final latents (``output_type="latent"``):
       stock vs stock (same call twice: determinism), stock vs stock with only the attention kernel swapped to
       the fast path's choice (the yardstick: how far bf16 rounding of an equally valid kernel moves the result),
       fast vs stock, fast vs that kernel-swapped stock, fast without batched guidance vs stock;
  3. times the VAE decode with and without cuDNN autotuning;
  4. runs ``cosmos_helpers.bench.run_benchmark`` (stock and fast, cold + warm, peak memory) on the cases.
Writes JSON/markdown/PNG to $OUT (or --out).

Run on the device (diffusers carried as a wheel):
  pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
  python benchmarks/gpu_run.py --phase 1  # kernels, equivalence (t2i/t2v 256p), VAE decode, t2i 256/720, t2v/i2v 256
  python benchmarks/gpu_run.py --phase 2  # one-pass equivalence at 480p, VAE decode 480p, t2v 480p 189 frames
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

TEXT_TOKENS = 2000
STEPS = 35
DEVICE = "cuda"
DRY = dict(transformer_overrides=dict(hidden_size=64, intermediate_size=128, head_dim=16, num_attention_heads=4,
                                      num_key_value_heads=2, num_hidden_layers=2, rope_axes_dim=[4, 2, 2],
                                      vocab_size=264),
           vae_overrides=dict(base_dim=4, decoder_base_dim=4, num_res_blocks=1))
GUIDANCE = 6.0
PHASE_CASES = {
    "1": "t2i:256,t2i:720,t2v:256:189,i2v:256:189",
    "2": "t2v:480:189",
}


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def log(msg: str) -> None:
    print(msg, flush=True)


def rel(a: torch.Tensor, b: torch.Tensor) -> dict:
    a, b = a.double(), b.double()
    d = (a - b)
    return {"max_rel": float(d.abs().max() / b.abs().max()), "rel_l2": float(d.norm() / b.norm()),
            "max_abs": float(d.abs().max()), "bitwise_equal": bool(torch.equal(a, b))}


def attention_microbench(out: dict) -> None:
    from cosmos_helpers.fast import attention

    shapes = {"t2v 256p (2880 gen tokens)": (2880, 2880 + 2150), "t2v 480p (18720 gen tokens)": (18720, 18720 + 2150),
              "t2i 720p (920 gen tokens)": (920, 920 + 2150)}
    res = {}
    for name, (nq, nk) in shapes.items():
        q = torch.randn(nq, 32, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(nk, 8, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(nk, 8, 128, device="cuda", dtype=torch.bfloat16)
        timings = attention.time_candidates(q, k, v, repeats=5)
        flops = 4 * nq * nk * 128 * 32
        res[name] = {c: (f"{t} ms = {flops / (t * 1e-3) / 1e12:.0f} TFLOP/s" if isinstance(t, float) else t)
                     for c, t in timings.items()}
        log(f"attention {name}: {res[name]}")
        del q, k, v
    attention._CHOICE.clear()
    out["attention_microbench"] = res


def equivalence(pipe, case: str, out: dict, yardstick_kernels=()) -> None:
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    from cosmos_helpers.bench import prompt_of, BASE_NEGATIVE
    from cosmos_helpers.fast import disable_fast_path, enable_fast_path, fast_path_stats
    from cosmos_helpers.fast.attention import StockProcessorWithKernel

    mode, tier, frames = case.split(":")
    h, w = {"256": (192, 320), "480": (480, 832), "720": (720, 1280)}[tier]
    kw = dict(prompt=prompt_of(TEXT_TOKENS), negative_prompt=prompt_of(TEXT_TOKENS, BASE_NEGATIVE),
              num_frames=int(frames), height=h, width=w, fps=24, num_inference_steps=STEPS,
              guidance_scale=GUIDANCE, add_resolution_template=False, add_duration_template=False,
              output_type="latent")

    def call():
        sync()
        t0 = time.perf_counter()
        lat = pipe(**kw, generator=torch.Generator(DEVICE).manual_seed(0)).video.float()
        sync()
        return lat, time.perf_counter() - t0

    res: dict = {}
    stock_a, ta = call()
    stock_b, tb = call()
    enable_fast_path(pipe)
    fast, tf1 = call()
    fast, tf2 = call()
    stats = fast_path_stats(pipe)
    disable_fast_path(pipe)
    enable_fast_path(pipe, batch_cfg=False)
    fast_seq, _ = call()
    disable_fast_path(pipe)
    pipe.transformer.set_attn_processor(StockProcessorWithKernel("auto"))
    stock_k, _ = call()
    for kernel in yardstick_kernels:
        pipe.transformer.set_attn_processor(StockProcessorWithKernel(kernel))
        other, _ = call()
        res[f"yardstick_stock_{kernel}_kernel_vs_stock"] = rel(other, stock_a)
        res[f"fast_vs_stock_{kernel}_kernel"] = rel(fast, other)
    pipe.transformer.set_attn_processor(Cosmos3AttnProcessor())
    res["stock_vs_stock_repeat"] = rel(stock_b, stock_a)
    res["yardstick_stock_kernel_swapped_vs_stock"] = rel(stock_k, stock_a)
    res["fast_vs_stock"] = rel(fast, stock_a)
    res["fast_vs_stock_kernel_swapped"] = rel(fast, stock_k)
    res["fast_sequential_cfg_vs_stock"] = rel(fast_seq, stock_a)
    res["fast_sequential_cfg_vs_stock_kernel_swapped"] = rel(fast_seq, stock_k)
    res["latent_abs_max"] = float(stock_a.abs().max())
    res["seconds"] = {"stock": [round(ta, 3), round(tb, 3)], "fast": [round(tf1, 3), round(tf2, 3)]}
    res["fast_stats"] = {k: v for k, v in stats.items() if k != "attention_tuning"}
    res["attention_choices"] = stats.get("attention_tuning")
    out.setdefault("equivalence", {})[case] = res
    log(f"equivalence {case}: " + json.dumps({k: v for k, v in res.items() if k not in ("attention_choices",)},
                                             default=str))


def single_pass(pipe, case: str, out: dict) -> None:
    """One transformer pass on identical inputs: how far each variant moves the velocity (bf16 rounding level)."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    from cosmos_helpers.bench import prompt_of, BASE_NEGATIVE
    from cosmos_helpers.fast.attention import StockProcessorWithKernel
    from cosmos_helpers.fast.transformer import FastForward

    mode, tier, frames = case.split(":")
    h, w = {"256": (192, 320), "480": (480, 832), "720": (720, 1280)}[tier]
    t = pipe.transformer
    stock_forward = t.forward
    recorded = []

    def recorder(**kw):
        recorded.append(dict(kw))
        return stock_forward(**kw)

    t.forward = recorder
    try:
        pipe(prompt=prompt_of(TEXT_TOKENS), negative_prompt=prompt_of(TEXT_TOKENS, BASE_NEGATIVE),
             num_frames=int(frames), height=h, width=w, num_inference_steps=1, guidance_scale=GUIDANCE,
             add_resolution_template=False, add_duration_template=False, output_type="latent",
             generator=torch.Generator(DEVICE).manual_seed(0))
    finally:
        del t.forward
    cond, uncond = ({k: v for k, v in r.items() if k != "return_dict"} for r in recorded[:2])
    res = {}
    with torch.no_grad():
        ref_c = stock_forward(**cond, return_dict=False)[0][0].float()
        ref_u = stock_forward(**uncond, return_dict=False)[0][0].float()
        rep_c = stock_forward(**cond, return_dict=False)[0][0].float()
        res["stock_repeat"] = rel(rep_c, ref_c)
        for kernel in ("flash", "cudnn", "efficient"):
            t.set_attn_processor(StockProcessorWithKernel(kernel))
            try:
                res[f"stock_{kernel}_kernel_vs_stock"] = rel(
                    stock_forward(**cond, return_dict=False)[0][0].float(), ref_c)
            except Exception as exc:
                res[f"stock_{kernel}_kernel_vs_stock"] = {"max_rel": None, "rel_l2": None, "error": repr(exc)[:200]}
        t.set_attn_processor(Cosmos3AttnProcessor())
        for label, options in (("fast_plain", {}), ("fast_default", dict(compile=True, fuse_projections=True))):
            fast = FastForward(t, cuda_graphs=False, batch_cfg=False, **options)
            res[f"{label}_single_vs_stock"] = rel(fast._run([cond])[0][0][0].float(), ref_c)
            pair = fast._run([cond, uncond])
            res[f"{label}_batched_cond_vs_stock"] = rel(pair[0][0][0].float(), ref_c)
            res[f"{label}_batched_uncond_vs_stock"] = rel(pair[1][0][0].float(), ref_u)
            if fast.projections is not None:
                fast.projections.unfuse()
            fast.reset()
    out.setdefault("single_pass", {})[case] = res
    log(f"single pass {case}: " + json.dumps({k: (v["max_rel"], v["rel_l2"]) for k, v in res.items()}))


def vae_decode_timing(pipe, case: str, out: dict) -> None:
    """Stock decode (PyTorch's default cuDNN heuristics) vs the fast path's (autotuned, and channels-last)."""
    from cosmos_helpers.fast.vae import FastDecode

    mode, tier, frames = case.split(":")
    h, w = {"256": (192, 320), "480": (480, 832), "720": (720, 1280)}[tier]
    z = torch.randn(1, 48, (int(frames) - 1) // 4 + 1, h // 16, w // 16, device=DEVICE,
                    dtype=pipe.vae.dtype)
    res, reference = {}, None
    variants = {"stock": pipe.vae.decode, "cudnn_benchmark": FastDecode(pipe.vae, cudnn_benchmark=True),
                "cudnn_benchmark+channels_last": FastDecode(pipe.vae, cudnn_benchmark=True, channels_last=True)}
    for name, decode in variants.items():
        times = []
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            with torch.no_grad():
                video = decode(z).sample
            sync()
            times.append(round(time.perf_counter() - t0, 3))
        entry = {"s": times}
        if reference is None:
            reference = video.float()
        else:
            entry["max_abs_diff_vs_stock"] = float((video.float() - reference).abs().max())
        res[name] = entry
        if hasattr(decode, "restore"):
            decode.restore()
        del video
    out.setdefault("vae_decode_s", {})[case] = res
    log(f"vae decode {case}: {res}")


def anatomy(pipe, case: str, out: dict) -> None:
    """Where a warm fast-path call spends its time: per-step wall time vs the captured pass alone, and decode."""
    from cosmos_helpers.backends.diffusers import DiffusersBackend
    from cosmos_helpers.bench import Case, build_request

    backend = DiffusersBackend("tiny", device=DEVICE, fast=True, progress=False)
    request = build_request(Case.parse(case, 189), profile="nano", steps=STEPS, guidance=GUIDANCE,
                            text_tokens=TEXT_TOKENS, seed=0)
    from cosmos_helpers.fast import enable_fast_path

    enable_fast_path(pipe)
    kwargs = backend.pipeline_kwargs(request)
    marks: list[float] = []
    decode_s: list[float] = []
    decode = pipe.vae.decode

    def timed_decode(*args, **kw):
        sync()
        t0 = time.perf_counter()
        result = decode(*args, **kw)
        sync()
        decode_s.append(time.perf_counter() - t0)
        return result

    def on_step(_pipe, step, _t, cb):
        sync()
        marks.append(time.perf_counter())
        return cb

    pipe.vae.decode = timed_decode
    try:
        for _ in range(2):  # the second call is the warm one
            marks.clear()
            decode_s.clear()
            sync()
            t0 = time.perf_counter()
            with torch.inference_mode():
                pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(0), callback_on_step_end=on_step,
                     output_type="pt")
            sync()
            total = time.perf_counter() - t0
    finally:
        pipe.vae.decode = decode
    steps = [b - a for a, b in zip(marks, marks[1:])]
    steps.sort()
    graphs = pipe.transformer.forward.graphs
    replay_ms = {}
    for key, captured in (graphs.graphs.items() if graphs is not None else ()):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            captured.graph.replay()
        end.record()
        end.synchronize()
        replay_ms[str(key[1])] = round(start.elapsed_time(end) / 5, 2)
    res = {"total_s": round(total, 3), "first_step_s": round(marks[0] - t0, 3) if marks else None,
           "step_ms_median": round(steps[len(steps) // 2] * 1e3, 2) if steps else None,
           "steps_s": round(marks[-1] - marks[0], 3) if marks else None,
           "decode_s": [round(x, 3) for x in decode_s], "graph_replay_ms": replay_ms}
    out.setdefault("anatomy", {})[case] = res
    log(f"anatomy {case}: {res}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", default="1")
    ap.add_argument("--cases", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu"))
    ap.add_argument("--skip-equivalence", action="store_true")
    ap.add_argument("--anatomy", default="", help="cases to break down after the benchmark, e.g. t2v:256:189")
    ap.add_argument("--dry-run", action="store_true", help="CPU, shrunken model, 2 steps: checks the script only")
    a = ap.parse_args()
    global STEPS, DEVICE, TEXT_TOKENS
    if a.dry_run:
        STEPS, DEVICE, TEXT_TOKENS = 2, "cpu", 300
        torch.set_num_threads(4)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"phase": a.phase, "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
                    "torch": torch.__version__,
                    "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d %H:%M"),
                    "settings": {"steps": STEPS, "guidance": GUIDANCE, "text_tokens_each": TEXT_TOKENS,
                                 "dtype": "bfloat16", "weights": "random, Nano shapes"}}
    import diffusers

    result["diffusers"] = diffusers.__version__
    log(json.dumps(result))

    def save():
        (out_dir / f"gpu_phase{a.phase}.json").write_text(json.dumps(result, indent=1, default=str))

    def attempt(label: str, step, *args) -> None:
        """Run one measurement; a failure is recorded and the remaining measurements still run."""
        try:
            step(*args)
        except Exception as exc:
            result.setdefault("errors", []).append(f"{label}: {type(exc).__name__}: {exc}")
            log(f"{label} failed: {exc!r}")
        save()

    if a.phase == "1" and not a.dry_run:
        attention_microbench(result)
        save()
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline, parameter_count

    t0 = time.perf_counter()
    pipe = build_random_nano_pipeline(DEVICE, torch.bfloat16 if DEVICE == "cuda" else torch.float32,
                                      **(DRY if a.dry_run else {}))
    result["build_s"] = round(time.perf_counter() - t0, 1)
    result["transformer_params_b"] = round(parameter_count(pipe) / 1e9, 2)
    log(f"built in {result['build_s']} s, {result['transformer_params_b']} B params")

    small = "t2v:256:189" if not a.dry_run else "t2v:256:9"
    if not a.skip_equivalence and a.phase == "1":
        for case in ("t2i:256:1", small):
            attempt(f"equivalence {case}", lambda c=case: equivalence(pipe, c, result, yardstick_kernels=("flash",)))
        if not a.dry_run:
            vae_decode_timing(pipe, small, result)
        save()
    if a.phase == "2":
        for case in ("t2v:480:189",) if not a.dry_run else (small,):
            attempt(f"single pass {case}", single_pass, pipe, case, result)
        if not a.dry_run:
            vae_decode_timing(pipe, "t2v:480:189", result)
        save()

    from cosmos_helpers.bench import run_benchmark

    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    cases = a.cases or (PHASE_CASES[a.phase] if not a.dry_run else "t2i:256,i2v:256:9")
    bench = run_benchmark(profile="nano", pipeline=pipe, cases=cases, steps=STEPS,
                          guidance=GUIDANCE, text_tokens=TEXT_TOKENS, repeats=1, out_dir=out_dir / f"bench{a.phase}",
                          log=log)
    result["bench_rows"] = [r.__dict__ for r in bench.rows]
    save()
    if a.anatomy:
        for case in a.anatomy.split(","):
            attempt(f"anatomy {case}", anatomy, pipe, case, result)
    print(bench.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
