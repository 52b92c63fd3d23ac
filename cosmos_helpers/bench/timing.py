"""Timing the cases: each backend built once, a cold call and warm calls per case, device synchronised."""

from __future__ import annotations

import functools
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..backends.diffusers import Builder, DiffusersBackend
from ..backends.memory import PRESETS, normalize_preset
from ..fast import FastOptions, fast_path_stats
from ..presets import DEFAULT_PROFILE, get_profile
from ..request import GenerationRequest
from ..step_cache import check_step_cache, step_cache_record
from .cases import DEFAULT_CASES, DEFAULT_STEPS, FAST_STATS, BenchResult, Case, Row, build_request
from .report import _fmt, _title, render_markdown, render_png, render_scaling_png


class Timed(NamedTuple):
    """One timed call: frames (uint8), seconds (device synchronised), peak GPU GiB of this process, the generation
    and the seconds of each denoising step as the backend reported them (exact in process; a server's or the
    framework's come late, so only the diffusers rows read them)."""

    frames: np.ndarray
    seconds: float
    peak: float | None
    generation: Any
    step_s: list[float]


def _timed(name: str, backend: Any, request: GenerationRequest, cuda: bool) -> Timed:
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    ends: list[float] = []

    def on_step(_done: int, _total: int) -> None:
        if cuda:
            torch.cuda.synchronize()
        ends.append(time.perf_counter())

    start = time.perf_counter()
    generation = backend.generate(request, progress=on_step)  # each backend reports steps as it can tell them
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda and name != "vllm" else None
    peak = generation.provenance.get("peak_gib", peak)  # multi-GPU: the workers' own (rank 0)
    step_s = [b - a for a, b in zip([start] + ends, ends)]
    return Timed(np.asarray(generation.frames), seconds, peak, generation, step_s)


def _diffusers_backends(random_nano: bool | str, device: str | None, dtype: Any, sound: bool,
                        fast_options: dict | None, pipeline: Any = None, gpus: Sequence[str] = (),
                        memory: str | None = None) -> dict[str, DiffusersBackend]:
    """stock, fast and ``fast-<plan>`` backends; with ``random_nano`` ("nano"/"super"/True) or ``pipeline`` the
    in-process ones run that one pipeline and the workers build the same random shapes."""
    builder = None
    if pipeline is not None:  # a pipeline built by the caller: its own device and dtype
        builder = Builder.of(lambda _device, _dtype: pipeline)
        device = device or str(next(pipeline.transformer.parameters()).device)
        dtype = dtype or pipeline.transformer.dtype
    elif random_nano:  # built once per process (the backends share it), and the same in every worker
        size = random_nano if isinstance(random_nano, str) else "nano"
        builder = Builder.of("cosmos_helpers.models.random_nano:build_random_nano_pipeline", sound=sound, size=size)
    fast = FastOptions(**fast_options) if fast_options else True
    common = dict(device=device, dtype=dtype, progress=False, memory=memory, builder=builder)
    backends = {"stock": DiffusersBackend(**common), "fast": DiffusersBackend(**common, fast=fast)}
    for spec in gpus:
        count, _, kind = str(spec).partition(":")
        degrees = {"ulysses": int(count)} if kind == "ulysses" else {"cfg_parallel": 2} if kind == "cfg" else {}
        name = f"fast-{count}gpu" + (f"-{kind}" if kind else "")
        backends[name] = DiffusersBackend(**{**common, "memory": None}, fast=fast, gpus=int(count), **degrees)
    return backends


def _cap_memory(backend: DiffusersBackend, model: str, memory: str, log: Callable[[str], None]) -> None:
    """Place the model under the preset first (built uncapped), then cap this process at the card size."""
    import torch

    backend.pipeline(model)
    torch.cuda.empty_cache()
    cap = PRESETS[normalize_preset(memory)] * 2**30
    torch.cuda.set_per_process_memory_fraction(min(cap / torch.cuda.get_device_properties(0).total_memory, 1.0))
    log(f"bench: memory capped at {cap / 2**30:.0f} GiB; in use now "
        f"{torch.cuda.memory_allocated() / 2**30:.1f} GiB")


def run_benchmark(*, profile: str = DEFAULT_PROFILE, cases: str | Sequence[str] | None = None, steps: int | None = None,
                  frames: int | None = None, guidance: float = 6.0, text_tokens: int | None = None,
                  repeats: int = 1, backends: Sequence[str] = ("stock", "fast"), vllm_url: str | None = None,
                  out_dir: str | Path = "outputs/benchmarks", random_nano: bool = False, device: str | None = None,
                  dtype: Any = None, seed: int = 0, fast_options: dict | None = None, pipeline: Any = None,
                  gpus: Sequence[str] = (), memory: str | None = None, step_cache: Any = None,
                  log: Callable[[str], None] | None = print) -> BenchResult:
    """Run every case through every backend and write the table, the chart and the JSON under ``out_dir``;
    ``pipeline``: a built ``Cosmos3OmniPipeline`` to time (e.g. ``build_random_nano_pipeline``'s), not the profile's."""
    import torch

    log = log or (lambda _msg: None)
    profile = profile.lower()
    step_cache = check_step_cache(step_cache)
    steps = steps or DEFAULT_STEPS.get(profile, 35)
    default_frames = frames or get_profile(profile).defaults("text2video").num_frames
    case_list = [Case.parse(c, default_frames) for c in
                 (cases.split(",") if isinstance(cases, str) else cases or DEFAULT_CASES[profile].split(","))]
    made = _diffusers_backends(random_nano, device, dtype, any(c.sound for c in case_list), fast_options, pipeline,
                               gpus, memory)
    stock = made["stock"]
    # the backends asked for (the multi-GPU ones always), and a vLLM-Omni server's client with ``vllm_url``
    runners: dict[str, Any] = {name: b for name, b in made.items() if name in backends or "gpu" in name}
    if vllm_url:
        from ..backends.vllm_omni import VllmOmniBackend

        runners["vllm"] = VllmOmniBackend(vllm_url)
    cuda = stock.device.startswith("cuda")
    if memory and cuda:
        _cap_memory(stock, get_profile(profile).model, memory, log)
    settings = dict(profile=profile, random_nano=random_nano or pipeline is not None, steps=steps, guidance=guidance,
                    gpus=list(gpus), memory=memory, text_tokens=text_tokens, repeats=repeats, seed=seed,
                    backends=list(runners), vllm_url=vllm_url, fast_options=fast_options or {},
                    environment=_environment(stock), step_cache=step_cache_record(step_cache))
    log(f"bench: {len(case_list)} cases x {list(runners)}; {steps} steps, guidance {guidance}, "
        f"{settings['environment'].get('device')}")
    request_for = functools.partial(build_request, profile=profile, guidance=guidance, text_tokens=text_tokens,
                                    seed=seed, step_cache=step_cache)
    # One untimed call first, so the process's one-time CUDA/library start-up lands on no row.
    first = "stock" if "stock" in runners else next(iter(runners))
    _timed(first, runners[first], request_for(case_list[0], steps=1), cuda)

    rows: list[Row] = []
    for case in case_list:
        rows += _time_case(case, request_for(case, steps=steps), runners, repeats, cuda, log)
        if cuda:
            torch.cuda.empty_cache()
    # with a memory preset the one-GPU row is offloaded and the workers are not: no like-for-like line to draw
    return _write(Path(out_dir), rows, settings, scaling=bool(gpus) and not memory)


def _write(out: Path, rows: list[Row], settings: dict[str, Any], *, scaling: bool) -> BenchResult:
    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(rows, settings)
    md_path, json_path = out / "benchmark.md", out / "benchmark.json"
    md_path.write_text(markdown)
    json_path.write_text(json.dumps({"settings": settings, "rows": [asdict(r) for r in rows]}, indent=1, default=str))
    png_path = render_png(rows, out / "benchmark.png", title=_title(settings))
    scaling_path = render_scaling_png(rows, out / "scaling.png", title=_title(settings)) if scaling else None
    return BenchResult(rows, markdown, md_path, png_path, json_path, settings, scaling_path)


def _time_case(case: Case, request: GenerationRequest, runners: dict[str, Any], repeats: int, cuda: bool,
               log: Callable[[str], None]) -> list[Row]:
    """One case through every backend: cold call, ``repeats`` warm calls, pixel distance and speed-up vs stock."""
    rows: list[Row] = []
    reference = None
    for name, backend in runners.items():
        row = Row(case=case.label, mode=case.mode, tier=case.tier, frames=case.frames, backend=name)
        try:
            frames_out, row.cold_s, peak, *_ = timed = _timed(name, backend, request, cuda)
            peaks = [peak]  # all None off CUDA and for a server
            for _ in range(repeats):
                frames_out, seconds, peak, *_ = timed = _timed(name, backend, request, cuda)
                row.warm_all.append(round(seconds, 4))
                peaks.append(peak)
            row.warm_s = statistics.median(row.warm_all) if row.warm_all else row.cold_s
            row.peak_gib = None if peak is None else round(max(peaks), 2)
            if name == "stock":
                reference = frames_out
            elif reference is not None and frames_out.shape == reference.shape:
                row.max_abs_diff_vs_stock = float(abs(frames_out.astype(int) - reference.astype(int)).max())
            if name == "fast":
                stats = fast_path_stats(backend.pipeline(request.resolve().model))
                row.extra = {k: stats.get(k) for k in FAST_STATS}
            cache = timed.generation.provenance.get("step_cache")
            if request.step_cache is not None and cache:
                row.extra["step_cache"] = {"choice": cache.get("choice"), "schedule": cache.get("schedule"),
                                           **pass_costs(timed.step_s, cache.get("schedule", ""))}
        except Exception as exc:  # keep the other rows
            row.error = f"{type(exc).__name__}: {exc}"
        rows.append(row)
        log(f"  {case.label:<18} {name:<6} cold {_fmt(row.cold_s)} s  warm {_fmt(row.warm_s)} s"
            f"  peak {_fmt(row.peak_gib)} GiB" + (f"  ERROR {row.error}" if row.error else ""))
    stock_row = next((r for r in rows if r.backend == "stock" and r.warm_s), None)
    for row in rows:
        if stock_row is not None and row.warm_s:
            row.speedup = round(stock_row.warm_s / row.warm_s, 2)
    return rows


def _environment(backend: DiffusersBackend) -> dict[str, Any]:
    import diffusers
    import torch

    return {"torch": torch.__version__, "diffusers": diffusers.__version__,
            "device": torch.cuda.get_device_name() if backend.device.startswith("cuda") else "cpu",
            "dtype": str(backend.dtype).replace("torch.", ""), "date": time.strftime("%Y-%m-%d")}


def pass_costs(step_s: Sequence[float], schedule: str) -> dict[str, float | int | None]:
    """The cost of a computed and of a cached guidance pass: a step computes 0, 1 or 2 decoder stacks (one per
    guidance branch), so a least-squares line through (computed passes, step seconds) has a computed pass as slope
    and an all-cached step (scheduler step, embedding and prediction heads) as intercept.

    ``step_s``: seconds of each denoising step (device synchronised); ``schedule``: the manifest's pass schedule
    (``C`` computed, ``.`` cached, in call order). Step 1 is left out (it also packs the prompts). Needs the same
    number of passes in every step (no guidance interval); otherwise only the counts are returned."""
    steps = len(step_s)
    out: dict[str, float | int | None] = {"passes": len(schedule), "passes_computed": schedule.count("C"),
                                          "computed_pass_s": None, "cached_pass_s": None}
    if not steps or len(schedule) % steps:
        return out
    per_step = len(schedule) // steps
    points = [(schedule[i * per_step:(i + 1) * per_step].count("C"), t) for i, t in enumerate(step_s)][1:]
    if len({x for x, _ in points}) < 2:
        return out
    slope, intercept = statistics.linear_regression(*zip(*points))
    out.update(computed_pass_s=round(slope, 4), cached_pass_s=round(intercept / per_step, 4),
               cached_to_computed=round(intercept / per_step / slope, 4) if slope > 0 else None)
    return out
