"""Issue 13 on H200s: Diffusers on one vs two GPUs, and the memory presets (random bf16 weights, Nano/Super shapes).

Two commands, each planned for at most ~9 minutes on ``nvidia-h200-x2`` (diffusers 0.42.1 carried in ``.whl``):

  # 1. scaling: t2i 256p and t2v 480p 189f on 1 GPU (fast path) vs 2 GPUs (CFG-parallel; then Ulysses if time)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit; \
      python3 benchmarks/gpu_scaling.py scaling --out $OUT 2>&1 | tee $OUT/scaling.log

  # 2. memory: Nano t2v 720p 189f under 44 and 24 GiB caps vs the unconstrained fast path; Super t2v with offload
  (same install line); python3 benchmarks/gpu_scaling.py memory --out $OUT 2>&1 | tee $OUT/memory.log

Settings (issue 13): 35 steps (``scaling``; ``memory`` runs ``--memory-steps`` 4 by default to fit the command,
and reports seconds per step and the decode apart), guidance 6, 200-token prompt and negative prompt. Each case is
its own try/except; ``gpu_scaling_<command>.json`` is rewritten after every case, so a stop keeps what ran. A
``--budget-s`` (default 480) stops starting new cases. Multi-GPU rows report rank 0's peak memory; the
pixel difference is against the one-GPU fast path's frames of the same case (uint8; same seed). Every worker
process gets NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 (set here too).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

for _name, _value in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                      "NVSHMEM_DISABLE_NVLS": "1", "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_name] = _value
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cosmos_helpers.bench import Case, _diffusers_backends, build_request  # noqa: E402

TEXT_TOKENS, GUIDANCE, STEPS = 200, 6.0, 35
MODEL = "nvidia/Cosmos3-Nano"  # the profile's model id: the random backends ignore it and build random weights


class Run:
    """Results of one command, written after every case."""

    def __init__(self, command: str, out: Path, budget_s: float) -> None:
        self.path = out / f"gpu_scaling_{command}.json"
        self.start, self.budget_s = time.perf_counter(), budget_s
        self.data: dict = {"command": command, "cases": {}, "skipped": [],
                           "environment": {"torch": torch.__version__, "gpus": torch.cuda.device_count(),
                                           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available()
                                           else "cpu"}}
        out.mkdir(parents=True, exist_ok=True)

    def over_budget(self, name: str) -> bool:
        elapsed = time.perf_counter() - self.start
        if elapsed > self.budget_s:
            self.data["skipped"].append(f"{name}: time budget ({elapsed:.0f} s > {self.budget_s:.0f} s)")
            self.save()
            return True
        return False

    def record(self, name: str, result: dict) -> None:
        result["elapsed_total_s"] = round(time.perf_counter() - self.start, 1)
        self.data["cases"][name] = result
        print(f"[{result['elapsed_total_s']:7.1f} s] {name}: "
              + json.dumps({k: v for k, v in result.items() if k != "traceback"}, default=str), flush=True)
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1, default=str))


def request_for(case: str, steps: int):
    return build_request(Case.parse(case, 189), profile="nano", steps=steps, guidance=GUIDANCE,
                         text_tokens=TEXT_TOKENS, seed=0)


def timed(backend, request) -> tuple[np.ndarray, dict]:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    generation = backend.generate(request)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = generation.provenance.get("peak_gib", torch.cuda.max_memory_allocated() / 2**30)
    info = {"seconds": round(seconds, 3), "peak_gib": round(peak, 2),
            **{k: round(v, 3) for k, v in generation.timings.items() if k in ("step_s", "decode_s", "load_s")}}
    for key in ("parallel", "memory", "cfg_parallel_stats"):
        if key in generation.provenance:
            info[key] = generation.provenance[key]
    return np.asarray(generation.frames), info


def attempt(run: Run, name: str, fn) -> None:
    if run.over_budget(name):
        return
    try:
        run.record(name, fn())
    except Exception as exc:  # noqa: BLE001 - recorded; the next case still runs
        run.record(name, {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()})


def release(*backends) -> None:
    from cosmos_helpers.backends.diffusers import free_pipeline

    for backend in backends:
        backend.close()
        getattr(backend, "built", {}).clear()  # the bench's random pipeline, held for its backends
    free_pipeline()
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(1.0)


def cold_warm(backend, case: str, steps: int, reference: dict, warm: bool = True) -> dict:
    request = request_for(case, steps)
    frames, cold = timed(backend, request)
    result = {"case": case, "steps": steps, "cold": cold}
    if warm:
        frames, result["warm"] = timed(backend, request)
    if case in reference:
        result["max_abs_pixel_diff_vs_1gpu_fast"] = int(np.abs(frames.astype(int) - reference[case]).max())
    else:
        reference[case] = frames.astype(np.int16)
    return result


def scaling(run: Run, args) -> None:
    reference: dict = {}
    cases = ["t2i:256", "t2v:480:189"]
    made = _diffusers_backends("nano", "cuda", None, False, None, gpus=["2", "2:ulysses"])
    fast = made["fast"]
    attempt(run, "load_1gpu", lambda: {"load_s": round(timed(fast, request_for("t2i:256", 1))[1]["seconds"], 1)})
    for case in cases:
        attempt(run, f"1gpu_fast {case}", lambda case=case: cold_warm(fast, case, STEPS, reference))
    release(made["stock"], fast)
    for label, key in (("2gpu_cfg", "fast-2gpu"), ("2gpu_ulysses", "fast-2gpu-ulysses")):
        backend = made[key]
        attempt(run, f"load_{label}", lambda b=backend: timed(b, request_for("t2i:256", 1))[1])
        for case in (cases if label == "2gpu_cfg" else cases[::-1]):
            attempt(run, f"{label} {case}", lambda b=backend, c=case: cold_warm(b, c, STEPS, reference,
                                                                              warm=label == "2gpu_cfg"))
        release(backend)
    rows = run.data["cases"]
    for case in cases:
        one = rows.get(f"1gpu_fast {case}", {}).get("warm", {}).get("seconds")
        for label in ("2gpu_cfg", "2gpu_ulysses"):
            row = rows.get(f"{label} {case}", {})
            two = (row.get("warm") or row.get("cold") or {}).get("seconds")
            if one and two:
                run.data.setdefault("ratios_vs_1gpu_fast", {})[f"{label} {case}"] = round(two / one, 3)
    run.save()


def fp8_layer_error(tokens: int = 18720, text: int = 200, repeats: int = 10) -> dict:
    """One Nano-shaped decoder layer (random weights) on t2v-480p-sized inputs: bf16 weights vs FP8 storage
    (diffusers' layerwise casting, bf16 compute): relative output error per pathway and time per call."""
    from diffusers import Cosmos3OmniTransformer

    from cosmos_helpers.models.random_nano import _randomize
    from cosmos_helpers.models.shapes import transformer_shape

    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = Cosmos3OmniTransformer(**{**transformer_shape("nano"), "num_hidden_layers": 1})
    finally:
        torch.set_default_dtype(default)
    _randomize(model, torch.Generator("cuda").manual_seed(0))
    layer, gen = model.layers[0], torch.Generator("cuda").manual_seed(1)
    hidden, head_dim = model.config.hidden_size, model.config.head_dim
    und_seq = torch.randn(text, hidden, device="cuda", dtype=torch.bfloat16, generator=gen)
    gen_seq = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=gen)
    ones = [torch.ones(n, head_dim, device="cuda", dtype=torch.bfloat16) for n in (text, tokens)]
    rotary = (ones[0], torch.zeros_like(ones[0]), ones[1], torch.zeros_like(ones[1]))

    def call():
        with torch.inference_mode():
            out = layer(und_seq, gen_seq, rotary)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            for _ in range(repeats):
                layer(und_seq, gen_seq, rotary)
        torch.cuda.synchronize()
        return [o.float() for o in out], (time.perf_counter() - start) / repeats * 1e3

    reference, bf16_ms = call()
    model.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.bfloat16)
    cast, fp8_ms = call()
    errors = {name: {"rel_l2": float((c - r).norm() / r.norm()), "max_abs_over_max": float((c - r).abs().max()
                                                                                            / r.abs().max())}
              for name, c, r in zip(("text", "generation"), cast, reference)}
    return {"tokens": {"text": text, "generation": tokens}, "ms_per_layer": {"bf16": round(bf16_ms, 3),
            "fp8_storage": round(fp8_ms, 3)}, "relative_error": errors,
            "weight_bytes_per_layer": {"bf16": sum(p.numel() * 2 for p in layer.parameters())}}


def memory(run: Run, args) -> None:
    """Nano t2v 720p: the fast path uncapped (cold + warm) vs the presets under caps; Super with offload / 2 GPUs.

    Every case builds its own random pipeline on the GPU (uncapped), lets the backend place it (the preset's
    offloading moves the transformer to CPU memory), empties the cache, and only then sets the cap."""
    steps, case = args.memory_steps, "t2v:720:189"
    reference: dict = {}

    def placed(backend, cap_gib: float | None) -> float:
        start = time.perf_counter()
        backend.pipeline(MODEL)
        torch.cuda.empty_cache()
        if cap_gib:
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(cap_gib * 2**30 / total, 1.0))
        return round(time.perf_counter() - start, 1)

    def unconstrained():
        made = _diffusers_backends("nano", "cuda", None, False, None)
        try:
            build_s = placed(made["fast"], None)
            return dict(cold_warm(made["fast"], case, steps, reference), build_and_place_s=build_s)
        finally:
            release(*made.values())

    def preset(memory: str, cap_gib: int, fp8: bool = False, size: str = "nano", run_case: str = case):
        def go():
            made = _diffusers_backends(size, "cuda", None, False, None, memory=memory)
            stock = made["stock"]
            if fp8:  # the same random weights, stored in FP8 (layerwise casting), computed in bf16
                stock = type(stock)(device="cuda", progress=False, memory=memory, weight_storage="fp8")
            try:
                build_s = placed(stock, cap_gib)
                result = cold_warm(stock, run_case, steps, reference if size == "nano" else {}, warm=False)
                result.update(cap_gib=cap_gib, preset=memory, fp8=fp8, build_and_place_s=build_s)
                return result
            finally:
                release(*made.values(), stock)
        return go

    def super_two():
        made = _diffusers_backends("super", "cuda", None, False, None, gpus=["2"])
        backend = made["fast-2gpu"]
        try:
            load = timed(backend, request_for("t2i:256", 1))[1]
            return dict(cold_warm(backend, "t2v:480:189", steps, {}, warm=False), load=load)
        finally:
            release(*made.values())

    attempt(run, "fp8 storage: one Nano decoder layer vs bf16", fp8_layer_error)
    attempt(run, f"nano 1gpu_fast uncapped {case}", unconstrained)
    attempt(run, f"nano preset 48GB cap 44 GiB {case}", preset("48GB", 44))
    attempt(run, f"nano preset 24GB cap 24 GiB {case}", preset("24GB", 24))
    attempt(run, f"nano preset 24GB fp8 cap 24 GiB {case}", preset("24GB", 24, fp8=True))
    # Super last: its offloaded weights need ~119 GiB of host memory, which a 128 GiB host may not give
    attempt(run, "super 1gpu offload (preset 80GB) t2v:480:189", preset("80GB", 139, size="super",
                                                                         run_case="t2v:480:189"))
    attempt(run, "super 2gpu cfg t2v:480:189", super_two)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["scaling", "memory"])
    parser.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu_scaling"))
    parser.add_argument("--budget-s", type=float, default=480.0, help="start no new case after this many seconds")
    parser.add_argument("--memory-steps", type=int, default=4, help="denoising steps of the memory cases")
    args = parser.parse_args()
    run = Run(args.command, Path(args.out), args.budget_s)
    (scaling if args.command == "scaling" else memory)(run, args)
    run.data["total_s"] = round(time.perf_counter() - run.start, 1)
    run.save()
    print(f"wrote {run.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
