"""NVIDIA's ModelOpt FP8 revision on one H200: bf16 against the official W8A16/W8A8 schedule and W8A8 throughout.

Nano shapes with random bf16 weights (``models/random_nano.py``), quantized in this process the way the hub revision is
(``models/tiny_fp8.py``: ModelOpt FP8 E4M3 per-tensor weights *and* static per-tensor activation scales on the 36
decoder layers' linears of both towers, ModelOpt's ``FP8_DEFAULT_CFG`` recipe, max calibration from one short call;
projections in/out, embeddings, norms and adapters stay bf16), saved with ``save_pretrained`` under ModelOpt's
checkpointing with the published ``diffusion_step_policy`` in ``transformer/config.json``, and loaded back through
``DiffusersBackend`` with ``GenerationRequest(precision="fp8")``: the same restore and call as ``revision="fp8"``.
Why per-tensor static: it is what the policy's consumers require (diffusers refuses anything but one tensorwise
weight scale, ``mixed_precision.py:274-276``; the framework's loader reads one ``weight_scale`` and one
``input_scale`` per linear, ``utils/generator/quantization.py:356-363``). Random weights make the pictures noise; the
kernels and bytes are the real ones.

Rows (t2v 189 frames, 200-token prompts, guidance 6, ``--steps`` steps; 480p then 720p), each through
``DiffusersBackend.generate``: ``bf16``, ``fp8`` (the checkpoint's policy: W8A16 first/last 3, W8A8 between) and
``fp8-w8a8`` (``FP8(mixed=False)``). Per row: seconds per step (W8A16 and W8A8 steps apart, by diffusers' trace),
decode, peak GiB. ``kernels``: the CUDA kernels of a 1-step call of each precision at the first case
(``torch.profiler``), top by time, and which look like FP8 GEMMs. ``modelopt_without_gemm``: what one restored layer
does when ModelOpt's FP8 GEMM is not registered (ModelOpt 0.47.0 does not import it itself).

``--cap24``: Nano t2v 720p under ``DiffusersBackend(memory="24GB")`` and a 24 GiB cap
(``torch.cuda.set_per_process_memory_fraction``): the FP8 revision for 35 steps, then today's 24GB preset in bf16 and
with FP8 weight storage (``--cap24-baselines`` steps, 35 derived as ``GPU_RESULTS.md``'s run 7 did: 432 s and 362 s
on an H200), so the rows compare on one machine. Run it as its own command (it reuses ``--work`` when an earlier run
left the checkpoint there).

    python3 benchmarks/gpu_fp8.py --out $OUT                          # main rows, ~6 min on an H200
    python3 benchmarks/gpu_fp8.py --cap24 --out $OUT                  # the 24 GiB rows, ~9 min: split it with
    python3 benchmarks/gpu_fp8.py --cap24 --cap24-rows fp8-24GB ...   # --cap24-rows into two commands
    python3 benchmarks/gpu_fp8.py --cap24 --cap24-steps 8 --out $OUT  # shorter: 35 steps derived, as run 7 did
    python3 benchmarks/gpu_fp8.py --smoke --out /tmp/fp8              # the same code on the tiny model, CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_k] = _v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NEEDED = ("diffusers", "transformers", "modelopt", "pulp", "omegaconf", "pynvml", "pydantic", "rich", "scipy", "yaml")
FP8_KERNEL = re.compile(r"e4m3|fp8|f8f8|_f8|scaled_mm|float8", re.IGNORECASE)
GEMM_KERNEL = re.compile(r"gemm|cutlass|xmma|matmul|mm_|sm90|nvjet", re.IGNORECASE)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def missing_modules() -> list[str]:
    import importlib.util

    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def row_of(name: str, timed, steps: int) -> dict:
    """Seconds per step split by diffusers' trace (W8A16 / W8A8 / bf16), the decode, the peak."""
    provenance = timed.generation.provenance
    precision = provenance.get("precision", {})
    w8a16 = set(precision.get("steps_w8a16", []))
    kinds: dict[str, list[float]] = {}
    for index, seconds in enumerate(timed.step_s[:steps]):
        kind = "bf16" if precision.get("choice") != "fp8" else ("W8A16" if index in w8a16 else "W8A8")
        kinds.setdefault(kind, []).append(seconds)
    later = timed.step_s[1:steps] or timed.step_s[:1]  # the first step carries one-time work (compile, tuning)
    return {"row": name, "seconds": round(timed.seconds, 2), "peak_gib": timed.peak and round(timed.peak, 2),
            "step_s": [round(s, 3) for s in timed.step_s[:steps]],
            "mean_step_s_after_first": round(sum(later) / len(later), 3),
            "by_kind_s": {k: round(sum(v[1:] or v) / len(v[1:] or v), 3) for k, v in kinds.items()},
            "decode_s": round(timed.generation.timings.get("decode_s", 0.0), 2),
            "trace": precision.get("steps"), "w8a8_gemm": precision.get("w8a8_gemm")}


def kernels(backend, request, cuda: bool, top: int = 12) -> dict:
    """The kernels one call runs, by device time: the top ``top`` and every one that looks like an FP8 GEMM."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        backend.generate(request)
        if cuda:
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == cuda]
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    events.sort(key=lambda e: getattr(e, attr), reverse=True)
    pick = [{"name": e.key[:160], "ms": round(getattr(e, attr) / 1000, 2), "calls": e.count} for e in events]
    return {"top": pick[:top], "fp8_like": [k for k in pick if FP8_KERNEL.search(k["name"])][:top],
            "gemm_like": [k for k in pick if GEMM_KERNEL.search(k["name"])][:top]}


def probe_without_gemm(pipe) -> dict:
    """One restored FP8 linear's forward with ModelOpt's FP8 GEMM taken out of its registry (as ModelOpt 0.47.0
    leaves it): does the fallback run, and what does it say."""
    import torch
    from modelopt.torch.quantization.backends.gemm_registry import gemm_registry
    from modelopt.torch.quantization.backends.fp8_per_tensor_gemm import Fp8PerTensorLinear

    from cosmos_helpers.backends.diffusers.modelopt_fp8 import fp8_linears

    layer = fp8_linears(pipe.transformer)[0]
    saved = list(gemm_registry._registry)
    cached = layer.__dict__.pop("_real_quant_gemm_impl", None)
    forward = layer.__dict__.pop("forward", None)  # diffusers' W8A16 wrapper or the emulation: the class forward
    gemm_registry.unregister(Fp8PerTensorLinear.apply)
    x = torch.randn(4, layer.in_features, device=layer.weight.device, dtype=torch.bfloat16)
    try:
        with torch.inference_mode():
            out = layer(x)
        result = {"ran": True, "out_dtype": str(out.dtype)}
    except Exception as exc:  # what a user would see
        result = {"ran": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    finally:
        gemm_registry._registry[:] = saved
        layer.__dict__.pop("_real_quant_gemm_impl", None)
        if cached is not None:
            layer._real_quant_gemm_impl = cached
        if forward is not None:
            layer.forward = forward
    return result


def build_fp8(bf16, request_for, case, work: Path, smoke: bool) -> Path:
    """Quantize the bf16 pipeline in place the way the revision is, and save it at ``work``."""
    from cosmos_helpers.bench import build_request
    from cosmos_helpers.models import tiny_fp8

    pipe = bf16.pipeline(request_for["model"])
    calibration = [build_request(case, steps=1, **{k: v for k, v in request_for.items() if k != "model"})]
    if smoke:
        calibration = tiny_fp8.calibration_requests()[:2]
    started = time.perf_counter()
    tiny_fp8.quantize(pipe, lambda: tiny_fp8.calibrate(pipe, calibration))
    log(f"quantized in {time.perf_counter() - started:.1f} s; saving to {work}")
    started = time.perf_counter()
    tiny_fp8.save(pipe, work)
    log(f"saved in {time.perf_counter() - started:.1f} s")
    return work


def nano_bf16(smoke: bool):
    """The bf16 backend and the request settings: random Nano on CUDA, or the tiny trained model on CPU."""
    from cosmos_helpers import DiffusersBackend
    from cosmos_helpers.bench import _diffusers_backends

    if smoke:
        return DiffusersBackend(device="cpu", progress=False), dict(profile="tiny", guidance=6.0, text_tokens=None,
                                                                    seed=0, model="tiny")
    stock = _diffusers_backends(True, None, None, False, None)["stock"]
    return stock, dict(profile="nano", guidance=6.0, text_tokens=200, seed=0, model="nvidia/Cosmos3-Nano")


def request(case, steps, request_for, **changes):
    from cosmos_helpers.bench import build_request

    base = build_request(case, steps=steps, **{k: v for k, v in request_for.items() if k != "model"})
    return base.replace(**changes)


def main_rows(a, out: Path, report: dict) -> None:
    from cosmos_helpers import FP8, DiffusersBackend
    from cosmos_helpers.backends.diffusers import free_pipeline
    from cosmos_helpers.backends.diffusers.loading import collect_garbage
    from cosmos_helpers.bench import Case, _timed

    cases = [Case.parse(c, 189) for c in (a.cases or ("t2v:128:9" if a.smoke else "t2v:480:189,t2v:720:189"))
             .split(",")]
    steps = a.steps or 8
    bf16, request_for = nano_bf16(a.smoke)
    cuda = bf16.device.startswith("cuda")
    save = lambda: (out / "fp8.json").write_text(json.dumps(report, indent=1, default=str))  # noqa: E731
    log("bf16: process warm-up (1 step)")
    bf16.generate(request(cases[0], 1, request_for))
    report["kernels"] = {"bf16": kernels(bf16, request(cases[0], 1, request_for), cuda)}
    for case in cases:
        timed = _timed("bf16", bf16, request(case, steps, request_for), cuda)
        report["rows"].append({**row_of("bf16", timed, steps), "case": case.label})
        log(f"{case.label} bf16: {report['rows'][-1]}")
        save()
    work = Path(a.work) / ("tiny-fp8" if a.smoke else "nano-fp8")
    if not (work / "model_index.json").is_file():
        build_fp8(bf16, request_for, cases[0], work, a.smoke)
    bf16.close()
    free_pipeline()
    collect_garbage()  # without it run 24's FP8 peaks held the quantized random pipeline (16.7 GiB) in cycles
    fp8_backend = DiffusersBackend(device=bf16.device, progress=False)
    fp8_for = {**request_for, "model": str(work)}
    started = time.perf_counter()
    fp8_backend.generate(request(cases[0], 1, fp8_for, model=str(work), precision=FP8(mixed=False)))
    log(f"fp8 load + first W8A8 step (compile) {time.perf_counter() - started:.1f} s")
    report["kernels"]["fp8-w8a8"] = kernels(fp8_backend, request(cases[0], 1, fp8_for, model=str(work),
                                                                 precision=FP8(mixed=False)), cuda)
    report["kernels"]["fp8-w8a16"] = kernels(fp8_backend, request(cases[0], 2, fp8_for, model=str(work),
                                                                  precision="fp8"), cuda)
    save()
    for case in cases:
        for name, precision in (("fp8", "fp8"), ("fp8-w8a8", FP8(mixed=False))):
            timed = _timed(name, fp8_backend, request(case, steps, fp8_for, model=str(work), precision=precision),
                           cuda)
            report["rows"].append({**row_of(name, timed, steps), "case": case.label})
            log(f"{case.label} {name}: {report['rows'][-1]}")
            save()
    pipe = fp8_backend._loaded(str(work), FP8()).pipe
    report["modelopt_without_gemm"] = ("skipped (--skip-probe)" if a.skip_probe else
                                       probe_without_gemm(pipe) if cuda else "not probed on CPU")
    report["fp8_weights_gib"] = round(sum(p.numel() * p.element_size() for p in pipe.transformer.parameters())
                                      / 2**30, 3)
    save()


def derived_35(row: dict) -> float:
    """35 steps at the measured per-kind step times (the policy's 3 W8A16 first and last), plus the decode: how
    run 7 derived its 24GB rows."""
    from cosmos_helpers.protocol.fp8 import policy_schedule

    kinds = row["by_kind_s"]
    schedule = policy_schedule(3, 3, 35) if "W8A8" in kinds or "W8A16" in kinds else ["bf16"] * 35
    return round(sum(kinds.get(k, row["mean_step_s_after_first"]) for k in schedule) + row["decode_s"], 1)


def capped_row(name: str, backend, req, place, cuda: bool, steps: int) -> dict:
    """Place the model under the backend's preset (uncapped, as bench does), cap the process at 24 GiB, time one
    call, lift the cap and free everything for the next row."""
    import dataclasses

    import torch

    from cosmos_helpers.backends.diffusers import free_pipeline
    from cosmos_helpers.backends.diffusers.loading import collect_garbage
    from cosmos_helpers.bench import _timed

    try:
        memory = place()
        memory = dataclasses.asdict(memory) if dataclasses.is_dataclass(memory) else memory
        if cuda:
            torch.cuda.empty_cache()
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(24 * 2**30 / total, 1.0))
            log(f"{name}: capped at 24 GiB; in use {torch.cuda.memory_allocated() / 2**30:.1f} GiB; {memory}")
        timed = _timed(name, backend, req, cuda)
        row = {**row_of(name, timed, steps), "memory": memory}
        row["derived_35_steps_s"] = row["seconds"] if steps == 35 else derived_35(row)
        return row
    finally:
        backend.close()
        getattr(backend, "built", {}).clear()
        free_pipeline()
        collect_garbage()
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0)


def cap24(a, out: Path, report: dict) -> None:
    """Nano t2v 720p under a 24 GiB cap and the 24GB preset, in one process: the FP8 revision (``--cap24-steps``,
    35 by default) first, then today's ``24GB`` preset in bf16 and with FP8 weight storage (``--cap24-baselines``
    steps each, 35 derived as run 7 did), so the three compare on one machine."""
    from cosmos_helpers import DiffusersBackend
    from cosmos_helpers.backends.diffusers import free_pipeline
    from cosmos_helpers.bench import Case

    case = Case.parse("t2v:128:9" if a.smoke else "t2v:720:189", 189)
    bf16, request_for = nano_bf16(a.smoke)
    cuda, device, builder = bf16.device.startswith("cuda"), bf16.device, bf16.builder  # the baselines' weights
    work = Path(a.work) / ("tiny-fp8" if a.smoke else "nano-fp8")
    if "fp8-24GB" in a.cap24_rows.split(",") and not (work / "model_index.json").is_file():
        log("no FP8 checkpoint in --work yet: building it (bf16 random Nano, quantize, save)")
        build_fp8(bf16, request_for, case, work, a.smoke)
    bf16.close()
    free_pipeline()
    del bf16
    memory = dict(memory="24GB") if cuda else dict(offload="group")
    save = lambda: (out / "fp8_cap24.json").write_text(json.dumps(report, indent=1, default=str))  # noqa: E731
    report["cap24"] = {"case": case.label, "compare_s (H200, GPU_RESULTS run 7)": {"24GB bf16": 432,
                                                                                  "24GB + fp8 storage": 362}}
    rows = a.cap24_rows.split(",")
    if "fp8-24GB" in rows:
        steps = a.cap24_steps or (4 if a.smoke else 35)
        backend = DiffusersBackend(device=device, progress=False, **memory)
        req = request(case, steps, {**request_for, "model": str(work)}, model=str(work), precision="fp8")
        report["cap24"]["fp8-24GB"] = capped_row("fp8-24GB", backend, req,
                                                 lambda: backend._loaded(str(work), req.precision).memory, cuda, steps)
        log(f"cap24 fp8: {report['cap24']['fp8-24GB']}")
        save()
    steps = a.cap24_baselines or (2 if a.smoke else 4)
    for name, storage in (("bf16-24GB", None), ("bf16-24GB-fp8-storage", "fp8")):
        if name not in rows:
            continue
        backend = DiffusersBackend(device=device, progress=False, weight_storage=storage, builder=builder, **memory)
        req = request(case, steps, request_for)
        placed = lambda b=backend: (b.pipeline(request_for["model"]), b.memory)[1]  # noqa: E731
        report["cap24"][name] = capped_row(name, backend, req, placed, cuda, steps)
        log(f"cap24 {name}: {report['cap24'][name]}")
        save()


def pick_attention(choice: str, cuda: bool) -> str | None:
    """The diffusers attention backend every row runs with (the same for bf16 and FP8, so the rows compare).

    ``auto``: the first of diffusers' native backends whose scaled-dot-product kernel takes a Nano-sized
    grouped-query attention (32 query heads over 8 key/value heads) without materialising the score matrix; on some
    machines torch's default dispatch falls back to the math kernel there, which needs tens of GiB at 480p.
    """
    if choice != "auto" or not cuda:
        return None if choice in ("auto", "default") else choice
    import torch
    from diffusers.models.attention_dispatch import attention_backend, dispatch_attention_fn

    q = torch.randn(1, 18720, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 19023, 8, 128, device="cuda", dtype=torch.bfloat16)
    for name in ("native", "_native_cudnn", "_native_efficient"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        try:
            with attention_backend(name):
                dispatch_attention_fn(q, k, k, enable_gqa=True)
            torch.cuda.synchronize()
        except Exception as exc:  # a kernel that refuses the shape: the next candidate
            log(f"attention {name}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        extra = (torch.cuda.max_memory_allocated() - base) / 2**30
        log(f"attention {name}: {extra:.2f} GiB beyond its inputs")
        if extra < 2:
            return None if name == "native" else name
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/fp8"))
    ap.add_argument("--work", default="/tmp/cosmos-fp8-work", help="where the quantized checkpoint is saved (reused)")
    ap.add_argument("--cases", default=None, help="default t2v:480:189,t2v:720:189 (smoke t2v:128:9)")
    ap.add_argument("--steps", type=int, default=None, help="steps per row (default 8: 3 W8A16, 2 W8A8, 3 W8A16)")
    ap.add_argument("--cap24", action="store_true", help="only the 24 GiB, 720p run (its own command)")
    ap.add_argument("--cap24-steps", type=int, default=None, help="default 35 (smoke 4)")
    ap.add_argument("--cap24-baselines", type=int, default=None, help="steps of the bf16 24GB rows (default 4)")
    ap.add_argument("--cap24-rows", default="fp8-24GB,bf16-24GB,bf16-24GB-fp8-storage",
                    help="which --cap24 rows to run (a long command can be split in two)")
    ap.add_argument("--skip-probe", action="store_true", help="leave out the FP8 layer without ModelOpt's GEMM "
                    "(it compiles ModelOpt's CUDA extension: about a minute; run 23 recorded it)")
    ap.add_argument("--smoke", action="store_true", help="the tiny model on CPU: checks the script, times nothing")
    ap.add_argument("--attention", default="default", help="diffusers attention backend for every row: default "
                    "(torch's own dispatch), auto (the first native one that takes Nano's GQA without the math "
                    "kernel), or a diffusers backend name")
    a = ap.parse_args()
    log(f"python {sys.version.split()[0]} ({sys.version})")
    missing = missing_modules()
    if missing:
        print(f"missing modules: {missing}; install the wheels of benchmarks/gpu_fp8.py's docstring", flush=True)
        return 2
    import diffusers
    import modelopt
    import torch

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"environment": {"python": sys.version.split()[0], "torch": torch.__version__,
                              "diffusers": diffusers.__version__, "modelopt": modelopt.__version__,
                              "device": torch.cuda.get_device_name() if torch.cuda.is_available() and not a.smoke
                              else "cpu", "date": time.strftime("%Y-%m-%d")},
              "quantization": "ModelOpt FP8 E4M3 per-tensor weights + static per-tensor inputs, decoder layers",
              "rows": []}
    started = time.perf_counter()
    attention = pick_attention(a.attention, torch.cuda.is_available() and not a.smoke)
    report["environment"]["attention_backend"] = attention or "default"
    from diffusers.models.attention_dispatch import attention_backend

    with attention_backend(attention) if attention else contextlib.nullcontext():
        if a.cap24:
            cap24(a, out, report)
        else:
            main_rows(a, out, report)
    log(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
