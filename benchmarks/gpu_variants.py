"""Issues 13/14 on one H200: forward dynamics vs image2video, distilled 4-step vs 35 steps (Nano shapes, random
bf16 weights), and Super text2video with FP8 weight storage on one GPU.

One command, planned for at most ~8.5 minutes on ``nvidia-h200`` (diffusers 0.42.1 carried in ``.whl``):

  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; \
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit; \
      python3 benchmarks/gpu_variants.py --out $OUT 2>&1 | tee $OUT/variants.log

CPU check of the whole flow (tiny shapes, 1-2 steps, float32; a few minutes):
``OMP_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/gpu_variants.py --dry-run --out /tmp/variants``.

Cases, in this order, each in its own try/except (error and traceback recorded); ``gpu_variants.json`` and
``gpu_variants.md`` are rewritten after every case, so a stop keeps what ran. *Cold* = the first call of that
request in the process, *warm* = the next one; peak = ``torch.cuda.max_memory_allocated`` over the call.

1. **Forward dynamics vs image2video** (issue 14): one Nano-shaped pipeline with Nano's action heads
   (``models.tiny.ACTION_CONFIG``: cosmos-framework ``nano_model_config.py:32-34`` max_action_dim 64, 32
   embodiment domains), the ``av`` embodiment with our sample trajectory and a start frame rendered along it, at the
   nano profile's forward-dynamics defaults (tier, chunk, steps, guidance); image2video from the same frame at the
   same size, frames and steps, at the nano image2video guidance and at the action run's guidance. Stock and fast
   path for both (a refusal is recorded as the row's error).
2. **Distilled 4-step vs standard**: the same weights as a ``Cosmos3DistilledBlocks`` modular pipeline in memory
   (``models.tiny_distilled.as_distilled``: the published fixed schedule; the ``tiny-distilled`` profile supplies
   only that schedule and its mode rules), text2image and image2video 256p, against the nano profile's 35-step
   guidance-6 calls, stock and fast.
3. **Super text2video 480p on one GPU, FP8 weights**: Super's transformer built on the ``meta`` device and
   materialised one layer at a time on the GPU, each stored in ``float8_e4m3fn`` through diffusers' layerwise
   casting (bf16 compute; the modules ``enable_layerwise_casting`` would skip stay bf16) before the next exists, so
   about 65 GB is ever resident. ``--super-steps`` (2) steps, so the row reports seconds per step and the decode
   apart. Not started with less than ``--super-need-s`` (150) of the ``--budget-s`` (480) left.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

for _name, _value in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                      "NVSHMEM_DISABLE_NVLS": "1", "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_name] = _value
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpu_run import DRY  # noqa: E402
from gpu_scaling import Run, attempt  # noqa: E402

from cosmos_helpers.bench import Case, _diffusers_backends, build_request, prompt_of  # noqa: E402
from cosmos_helpers.presets import get_profile, size_for  # noqa: E402
from cosmos_helpers.request import GenerationRequest  # noqa: E402

TEXT_TOKENS, GUIDANCE = 200, 6.0
FD_PROMPT = "The ego car drives ahead along a road lined with coloured posts, turning gently to the left."
EMBODIMENT = "av"


@dataclass
class Plan:
    """What runs: the H200 plan, or ``--dry-run``'s tiny shapes on the CPU."""

    device: str = "cuda"
    dtype: str = "bfloat16"
    transformer_overrides: dict = field(default_factory=dict)
    vae_overrides: dict = field(default_factory=dict)
    fd_steps: int | None = None  # None: the nano profile's forward-dynamics default
    base_steps: int = 35
    i2v_frames: int = 189
    super_case: str = "t2v:480:189"
    super_steps: int = 2
    super_overrides: dict = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def dry_plan() -> Plan:
    return Plan(device="cpu", dtype="float32", transformer_overrides=DRY["transformer_overrides"],
                vae_overrides=DRY["vae_overrides"], fd_steps=1, base_steps=2, i2v_frames=9, super_case="t2v:256:9",
                super_steps=2, super_overrides=DRY["transformer_overrides"])


class VariantsRun(Run):
    """gpu_scaling's Run, written as gpu_variants.json plus a markdown table."""

    def __init__(self, out: Path, budget_s: float) -> None:
        super().__init__("variants", out, budget_s)
        self.path = out / "gpu_variants.json"

    def remaining_s(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)

    def save(self) -> None:
        super().save()
        self.path.with_suffix(".md").write_text(render_markdown(self.data))


def timed(backend, request: GenerationRequest, cuda: bool) -> dict:
    """One ``backend.generate``: seconds (device synchronised), peak GPU GiB, the backend's own step timings."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    generation = backend.generate(request)
    if cuda:
        torch.cuda.synchronize()
    info = {"seconds": round(time.perf_counter() - start, 3), "frames": list(np.asarray(generation.frames).shape)}
    if cuda:
        info["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    info.update({k: round(v, 3) for k, v in generation.timings.items()
                 if k in ("load_s", "first_step_s", "step_s", "decode_s")})
    return info


def cold_warm(backend, request: GenerationRequest, cuda: bool, warm: bool = True) -> dict:
    result = {"mode": request.mode, "steps": request.num_inference_steps, "guidance": request.guidance_scale,
              "size": [request.width, request.height], "num_frames": request.num_frames,
              "cold": timed(backend, request, cuda)}
    if warm:
        result["warm"] = timed(backend, request, cuda)
    return result


def run_on(state: dict, backend: str, request: GenerationRequest, cuda: bool) -> dict:
    """Cold and warm on ``state[backend]``; a fast row also gets the fast path's counters after its calls (a
    ``stock_fallbacks`` that grew means the request ran stock code)."""
    from cosmos_helpers.bench import FAST_STATS
    from cosmos_helpers.fast import fast_path_stats

    before = fast_path_stats(state[backend].pipeline(request.model)) if backend == "fast" else {}
    result = cold_warm(state[backend], request, cuda)
    if backend == "fast":
        after = fast_path_stats(state[backend].pipeline(request.model))
        result["fast_stats"] = {k: after.get(k) for k in FAST_STATS if after.get(k) is not None}
        result["fast_stock_fallbacks_in_these_calls"] = ((after.get("stock_fallbacks") or 0)
                                                         - (before.get("stock_fallbacks") or 0))
    return result


def resident_gib(cuda: bool) -> float | None:
    return round(torch.cuda.memory_allocated() / 2**30, 2) if cuda else None


def release(state: dict, cuda: bool) -> None:
    """Drop every backend and pipeline of ``state`` and give the memory back."""
    from cosmos_helpers.backends.diffusers import free_pipeline

    for value in state.values():
        if hasattr(value, "close"):
            value.close()
            getattr(value, "built", {}).clear()  # the bench's prebuilt pipeline, held for its backends
    state.clear()
    free_pipeline()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- Nano pipeline


def build_nano(plan: Plan, state: dict) -> dict:
    """The Nano-shaped random pipeline with the action heads, its stock/fast backends and a distilled backend."""
    from cosmos_helpers.backends.diffusers import distilled
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline
    from cosmos_helpers.models.tiny import ACTION_CONFIG
    from cosmos_helpers.models.tiny_distilled import as_distilled

    start = time.perf_counter()
    pipe = build_random_nano_pipeline(plan.device, plan.dtype, vae_overrides=plan.vae_overrides,
                                      transformer_overrides={**plan.transformer_overrides, **ACTION_CONFIG})
    if plan.cuda:
        torch.cuda.synchronize()
    made = _diffusers_backends("nano", plan.device, plan.dtype, False, None, pipeline=pipe)
    four_step = as_distilled(pipe)
    distilled._quiet(four_step._blocks)

    class DistilledRandomBackend(type(made["stock"])):
        """The same weights as a distilled checkpoint: a distilled model id loads the in-memory modular pipeline."""

        def _load(self, model):
            from cosmos_helpers.backends.diffusers.loading import Loaded

            return Loaded(four_step) if distilled.is_distilled_model(model) else super()._load(model)

    state.update(made, distilled=DistilledRandomBackend(device=plan.device, dtype=plan.dtype, progress=False))
    return {"build_s": round(time.perf_counter() - start, 1), "resident_gib": resident_gib(plan.cuda),
            "parameters_b": round(sum(p.numel() for p in pipe.transformer.parameters()) / 1e9, 3),
            "action_config": ACTION_CONFIG}


def fd_requests(plan: Plan) -> dict[str, GenerationRequest]:
    """Forward dynamics at the nano defaults, and image2video from the same start frame at its size and length."""
    from cosmos_helpers.samples import render_drive, sample_trajectory

    defaults = get_profile("nano").defaults("forward_dynamics")
    actions = sample_trajectory(EMBODIMENT, defaults.num_frames - 1)
    width, height = size_for(defaults.tier, "16,9")
    start = render_drive(actions, width, height)[0]
    fd = GenerationRequest(mode="forward_dynamics", profile="nano", prompt=FD_PROMPT, image=start,
                           embodiment=EMBODIMENT, actions=actions, num_inference_steps=plan.fd_steps, seed=0,
                           guardrails=False)
    i2v_guidance = get_profile("nano").defaults("image2video").guidance_scale

    def i2v(guidance: float) -> GenerationRequest:
        request = GenerationRequest(mode="image2video", profile="nano", prompt=FD_PROMPT, image=start,
                                    tier=fd.tier, aspect_ratio="16,9", num_frames=fd.num_frames,
                                    num_inference_steps=fd.num_inference_steps, guidance_scale=guidance, seed=0,
                                    guardrails=False)
        if (request.width, request.height) != (fd.width, fd.height):
            raise AssertionError(f"i2v {request.width}x{request.height} != fd {fd.width}x{fd.height}")
        return request

    return {"fd": fd, f"i2v g{i2v_guidance:g}": i2v(i2v_guidance), f"i2v g{fd.guidance_scale:g}":
            i2v(fd.guidance_scale)}


def forward_dynamics(run: VariantsRun, plan: Plan, state: dict) -> None:
    requests: dict = {}

    def made_requests() -> dict:
        requests.update(fd_requests(plan))
        return {name: r.mode + f" {r.width}x{r.height} {r.num_frames}f {r.num_inference_steps} steps guidance "
                f"{r.guidance_scale:g}" for name, r in requests.items()}

    attempt(run, "1 requests", made_requests)
    names = list(requests)
    for name in names:
        for backend in ("stock", "fast"):
            if backend == "fast" and name == names[-1]:
                continue  # the action-guidance i2v row is there to separate guidance from action cost: stock only
            attempt(run, f"1 {name} {backend}", lambda n=name, b=backend: run_on(state, b, requests[n], plan.cuda))
    rows = run.data["cases"]
    warm = {key: rows.get(key, {}).get("warm", {}).get("seconds") for key in rows}
    for name in names[1:]:
        for backend in ("stock", "fast"):
            fd, i2v = warm.get(f"1 fd {backend}"), warm.get(f"1 {name} {backend}")
            if fd and i2v:
                run.data.setdefault("ratios", {})[f"fd / {name}, {backend}, warm"] = round(fd / i2v, 3)
    run.save()


def few_step(run: VariantsRun, plan: Plan, state: dict) -> None:
    from cosmos_helpers.samples import rolling_ball_clip

    def distilled_request(mode: str, frames: int) -> GenerationRequest:
        width, height = size_for("256", "16,9")
        media = {"image": rolling_ball_clip(1, width, height)[0]} if mode == "image2video" else {}
        return GenerationRequest(mode=mode, profile="tiny-distilled", prompt=prompt_of(TEXT_TOKENS), tier="256",
                                 aspect_ratio="16,9", num_frames=frames, seed=0, guardrails=False,
                                 add_resolution_template=False, add_duration_template=False, **media)

    for short, mode, frames in (("t2i", "text2image", 1), ("i2v", "image2video", plan.i2v_frames)):
        case = Case(mode, "256", frames)
        standard = build_request(case, profile="nano", steps=plan.base_steps, guidance=GUIDANCE,
                                 text_tokens=TEXT_TOKENS, seed=0)
        attempt(run, f"2 {short} distilled 4-step", lambda m=mode, f=frames: cold_warm(
            state["distilled"], distilled_request(m, f), plan.cuda))
        for backend in ("stock", "fast"):
            attempt(run, f"2 {short} standard {backend}", lambda b=backend, r=standard: run_on(
                state, b, r, plan.cuda))
        rows = run.data["cases"]
        few = rows.get(f"2 {short} distilled 4-step", {}).get("warm", {}).get("seconds")
        for backend in ("stock", "fast"):
            full = rows.get(f"2 {short} standard {backend}", {}).get("warm", {}).get("seconds")
            if few and full:
                run.data.setdefault("ratios", {})[f"{short} distilled / standard {backend}, warm"] = round(few / full,
                                                                                                         3)
        run.save()


# ---------------------------------------------------------------------------------------------- Super in FP8


def _casting_skips(model) -> tuple[str, ...]:
    """The module-name patterns ``ModelMixin.enable_layerwise_casting`` keeps out of FP8 (diffusers 0.42.1:
    the hook's defaults, the model's fp32 modules and its own skip patterns)."""
    from diffusers.hooks.layerwise_casting import DEFAULT_SKIP_MODULES_PATTERN

    return (tuple(DEFAULT_SKIP_MODULES_PATTERN) + tuple(model._keep_in_fp32_modules or ())
            + tuple(model._skip_layerwise_casting_patterns or ()))


def cast_modules(model) -> set[str]:
    """Names of the modules that carry a layerwise-casting hook."""
    return {name for name, module in model.named_modules()
            if getattr(module, "_diffusers_hook", None) is not None
            and module._diffusers_hook.get_hook("layerwise_casting") is not None}


def build_fp8_transformer(shape: dict, device: str, compute, seed: int = 0):
    """``Cosmos3OmniTransformer(**shape)`` with random weights, never whole in ``compute`` dtype: built on ``meta``,
    then each top-level module and each decoder layer is allocated on ``device``, filled, and (unless a skip
    pattern names it) stored in float8_e4m3fn before the next one exists. Buffers come from a small model of the
    same rotary settings."""
    from diffusers import Cosmos3OmniTransformer
    from diffusers.hooks import apply_layerwise_casting

    from cosmos_helpers.models.random_nano import _randomize

    generator = torch.Generator(device).manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(compute)
    try:
        with torch.device("meta"):
            model = Cosmos3OmniTransformer(**shape)
        small = Cosmos3OmniTransformer(**{**shape, "hidden_size": 2 * shape.get("head_dim", 128),
                                          "intermediate_size": 32, "num_attention_heads": 2,
                                          "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 16})
    finally:
        torch.set_default_dtype(default)
    skips = _casting_skips(model)
    units = [(name, child) for name, child in model.named_children() if name != "layers"]
    units += [(f"layers.{i}", layer) for i, layer in enumerate(model.layers)]
    for name, unit in units:
        unit.to_empty(device=device)
        _randomize(torch.nn.ModuleDict({name.replace(".", "_"): unit}), generator)
        if name == "time_embedder":  # diffusers keeps it in fp32 when loading (_keep_in_fp32_modules)
            unit.to(torch.float32)
        if not any(re.search(pattern, name) for pattern in skips):
            apply_layerwise_casting(unit, storage_dtype=torch.float8_e4m3fn, compute_dtype=compute,
                                    skip_modules_pattern=skips)
    references = dict(small.named_buffers())
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(references[name])
    return model.eval()


def casting_matches_diffusers(plan: Plan) -> dict:
    """On a small model: the layer-by-layer build hooks exactly the modules ``enable_layerwise_casting`` does."""
    from diffusers import Cosmos3OmniTransformer

    shape = {**DRY["transformer_overrides"]}
    ours = build_fp8_transformer(shape, "cpu", torch.float32)
    theirs = Cosmos3OmniTransformer(**shape)
    theirs.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32)
    mine, reference = cast_modules(ours), cast_modules(theirs)
    if mine != reference:
        raise AssertionError(f"cast modules differ: only ours {sorted(mine - reference)[:8]}, only diffusers' "
                             f"{sorted(reference - mine)[:8]}")
    return {"cast_modules": len(mine), "same_as_enable_layerwise_casting": True}


def super_fp8(run: VariantsRun, plan: Plan) -> dict:
    from diffusers import Cosmos3OmniPipeline

    from cosmos_helpers.models.random_nano import build_random_nano_pipeline
    from cosmos_helpers.models.shapes import transformer_shape

    compute = getattr(torch, plan.dtype)
    start = time.perf_counter()
    if plan.cuda:
        torch.cuda.reset_peak_memory_stats()
    transformer = build_fp8_transformer({**transformer_shape("super"), **plan.super_overrides}, plan.device, compute)
    # the Wan2.2 VAE, tokenizer and scheduler of the Nano-shaped pipeline (its 2-layer transformer is dropped)
    small = build_random_nano_pipeline(plan.device, plan.dtype, transformer_overrides=DRY["transformer_overrides"],
                                       vae_overrides=plan.vae_overrides)
    pipe = Cosmos3OmniPipeline(transformer=transformer, text_tokenizer=small.text_tokenizer, vae=small.vae,
                               scheduler=small.scheduler, sound_tokenizer=None, safety_checker=None,
                               enable_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    del small
    state = _diffusers_backends("super", plan.device, plan.dtype, False, None, pipeline=pipe)
    weights = sum(p.numel() * p.element_size() for p in transformer.parameters())
    result = {"build_s": round(time.perf_counter() - start, 1), "weights_gb": round(weights / 1e9, 2),
              "fp8_parameters_b": round(sum(p.numel() for p in transformer.parameters()
                                            if p.dtype == torch.float8_e4m3fn) / 1e9, 3),
              "build_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if plan.cuda else None,
              "resident_gib": resident_gib(plan.cuda)}
    del pipe, transformer
    run.data["super_build"] = dict(result)  # kept should the command be stopped during the calls
    run.save()
    try:
        case = Case.parse(plan.super_case, 189)
        request = build_request(case, profile="super", steps=plan.super_steps, guidance=GUIDANCE,
                                text_tokens=TEXT_TOKENS, seed=0)
        result.update(cold_warm(state["stock"], request, plan.cuda, warm=False))
        if run.remaining_s() > 1.3 * result["cold"]["seconds"]:
            result["warm"] = timed(state["stock"], request, plan.cuda)
        else:
            result["warm_skipped"] = f"{run.remaining_s():.0f} s of budget left"
        return result
    finally:
        release(state, plan.cuda)


# ---------------------------------------------------------------------------------------------- report


def render_markdown(data: dict) -> str:
    env = data["environment"]
    lines = [f"# gpu_variants: {env.get('device')}, torch {env.get('torch')}", "",
             "| case | cold s | warm s | step s (warm) | decode s (warm) | peak GiB | note |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, row in data["cases"].items():
        cold, warm = row.get("cold") or {}, row.get("warm") or {}
        last = warm or cold
        if "error" in row:
            note = row["error"][:160]
        elif "steps" in row:
            note = (f"{row.get('steps')} steps, guidance {row.get('guidance')}, {row.get('num_frames')}f, "
                    f"{row.get('size')}")
            if "fast_stock_fallbacks_in_these_calls" in row:
                note += f", stock fallbacks {row['fast_stock_fallbacks_in_these_calls']}"
        else:
            note = json.dumps({k: v for k, v in row.items() if k not in ("traceback", "elapsed_total_s")},
                              default=str)[:200]
        lines.append(f"| {name} | {cold.get('seconds', '')} | {warm.get('seconds', '')} | {last.get('step_s', '')} | "
                     f"{last.get('decode_s', '')} | {max(cold.get('peak_gib') or 0, warm.get('peak_gib') or 0) or ''}"
                     f" | {note} |")
    lines += ["", "ratios (warm seconds): " + ", ".join(f"{k} = {v}" for k, v in data.get("ratios", {}).items()),
              "", "skipped: " + ("; ".join(data["skipped"]) or "none"), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu_variants"))
    parser.add_argument("--budget-s", type=float, default=480.0, help="start no new case after this many seconds")
    parser.add_argument("--super-need-s", type=float, default=150.0,
                        help="start the Super case only with this much of the budget left")
    parser.add_argument("--super-steps", type=int, default=None, help="denoising steps of the Super case (2)")
    parser.add_argument("--super-case", default=None, help="the Super case, mode:tier:frames (t2v:480:189)")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU, 1-2 steps, float32")
    args = parser.parse_args()
    plan = dry_plan() if args.dry_run else Plan()
    plan.super_steps = args.super_steps or plan.super_steps
    plan.super_case = args.super_case or plan.super_case
    run = VariantsRun(Path(args.out), args.budget_s)
    run.data["plan"] = {"dry_run": args.dry_run, **plan.__dict__}
    state: dict = {}
    attempt(run, "0 build nano-shaped pipeline (action heads)", lambda: build_nano(plan, state))
    if state:
        forward_dynamics(run, plan, state)
        few_step(run, plan, state)
    release(state, plan.cuda)
    run.data["resident_gib_after_release"] = resident_gib(plan.cuda)
    attempt(run, "3 fp8 casting: layer-by-layer build hooks what enable_layerwise_casting hooks",
            lambda: casting_matches_diffusers(plan))
    name = f"3 super fp8 storage {plan.super_case} {plan.super_steps} steps"
    if run.remaining_s() < args.super_need_s:
        run.data["skipped"].append(f"{name}: {run.remaining_s():.0f} s of budget left < {args.super_need_s:.0f} s")
    else:
        attempt(run, name, lambda: super_fp8(run, plan))
    run.data["total_s"] = round(time.perf_counter() - run.start, 1)
    run.save()
    print(f"wrote {run.path} and {run.path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
