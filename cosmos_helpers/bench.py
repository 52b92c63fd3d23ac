"""``cosmos-helpers bench``: the same requests through stock Diffusers, the fast path and vLLM-Omni, in one run.

For every case (mode x resolution tier) and backend it records the cold time (first call: kernel
selection, CUDA-graph capture and attention tuning included), the warm time (median of the following
calls), peak GPU memory and how far the output's pixels are from stock's. It writes, under ``--out``:

* ``benchmark.md``: a mode x tier table in seconds (the shape of NVIDIA's ``inference_benchmarks.md``)
  with a speed-up row, then the per-case details;
* ``benchmark.png``: the warm times as grouped bars, speed-ups written over the fast bars;
* ``benchmark.json``: every number, the settings and the environment.

``--profile tiny`` (default) runs the embedded tiny model (CPU in seconds: this is what CI runs);
``--profile nano`` the real checkpoint; ``--random-nano`` builds Nano-shaped random weights instead of
loading a checkpoint (latency does not depend on weight values), for GPUs without the download.
``--vllm-url http://host:port`` adds a running vLLM-Omni server as a third backend.
``--gpus 2`` adds the fast path on two GPUs (worker processes; ``2:ulysses`` for Ulysses instead of CFG-parallel,
a comma list for several). ``--memory 24GB`` runs the Diffusers backends with that memory preset and caps this
process's GPU memory at that size (``torch.cuda.set_per_process_memory_fraction``) once the model is placed, so
the peak column proves the fit. ``--random-super`` builds Cosmos3-Super-shaped random weights.
``--step-cache sea`` (or ``off``, ``sea:THRESHOLD``) runs every request with that step cache and adds, per row, the
passes computed and the seconds of a computed and of a cached pass (:mod:`cosmos_helpers.bench_passes`).

Example (one H200)::

    cosmos-helpers bench --random-nano --cases t2i:256,t2v:256:189 --steps 35 --text-tokens 2000 --out out/
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from .backends.diffusers import Builder, DiffusersBackend
from .bench_passes import pass_costs
from .fast import FastOptions, fast_path_stats
from .action_samples import render_drive, sample_trajectory
from .presets import ACTION_MODES, DEFAULT_PROFILE, MODES, get_profile, size_for
from .request import MODE_ALIASES, GenerationRequest
from .samples import rolling_ball_clip
from .step_cache import check_step_cache, step_cache_argument, step_cache_record

BACKEND_TITLES = {"stock": "Diffusers (stock)", "fast": "Diffusers (fast path)", "vllm": "vLLM-Omni"}
DEFAULT_CASES = {
    "tiny": "t2i:128,t2v:128:9,i2v:128:9",
    "nano": "t2i:256,t2i:480,t2i:720,t2v:256:189,i2v:256:189,t2v:480:189,t2v:720:189",
    "super": "t2i:256,t2i:720,t2v:256:189,t2v:480:189",
}
DEFAULT_STEPS = {"tiny": 2, "nano": 35, "super": 35}
BASE_PROMPT = ("A mobile robot navigates a warehouse aisle, stops at a shelf, lifts a blue box with its gripper "
               "and turns toward the loading dock while overhead lights flicker. ")
BASE_NEGATIVE = ("Blurry, low quality, distorted geometry, flickering, watermark, text overlays, oversaturated "
                 "colors, jerky motion, duplicated objects. ")
# the fast path's counters kept on each fast row (``Row.extra``)
FAST_STATS = ("text_tower_runs", "graph_captures", "graph_replays", "batched_pairs", "stock_fallbacks",
              "graph_failures", "fused_kernels", "compile_error", "projection_choices")


def mode_title(mode: str) -> str:
    """``text2video`` -> ``Text2Video``, ``forward_dynamics`` -> ``Forward dynamics``."""
    if "2" not in mode:
        return mode.replace("_", " ").capitalize()
    return "2".join(word.capitalize() for word in mode.split("2"))


@dataclass(frozen=True)
class Case:
    mode: str  # text2image / text2video / image2video / video2video, or an action mode
    tier: str
    frames: int
    sound: bool = False

    @property
    def label(self) -> str:
        short = min((k for k, v in MODE_ALIASES.items() if v == self.mode), key=len)  # t2v, fd, wam
        frames = "" if self.frames == 1 else f" {self.frames}f"
        return f"{short}{'+sound' if self.sound else ''} {self.tier}p{frames}"

    @classmethod
    def parse(cls, text: str, default_frames: int) -> "Case":
        """``t2i:256``, ``t2v:480:189``, ``t2v+sound:256:121``, ``fd:256:17`` (frames default to
        ``default_frames``)."""
        parts = text.strip().split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"case {text!r}: expected mode:tier[:frames], e.g. t2v:256:189")
        name = parts[0].strip().lower()
        sound, name = name.endswith("+sound"), name.removesuffix("+sound")
        mode = MODE_ALIASES.get(name, name)
        if mode not in MODES:
            raise ValueError(f"case {text!r}: unknown mode; use t2i, t2v, i2v or v2v (optionally +sound), or fd, "
                             "id or wam (the action modes)")
        tier = parts[1].strip().lower().removesuffix("p")
        frames = 1 if mode == "text2image" else int(parts[2]) if len(parts) == 3 else default_frames
        return cls(mode, tier, frames, sound)


@dataclass
class Row:
    case: str
    mode: str
    tier: str
    frames: int
    backend: str
    cold_s: float | None = None
    warm_s: float | None = None
    warm_all: list[float] = field(default_factory=list)
    peak_gib: float | None = None
    max_abs_diff_vs_stock: float | None = None
    speedup: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchResult:
    rows: list[Row]
    markdown: str
    markdown_path: Path
    png_path: Path | None
    json_path: Path
    settings: dict[str, Any]
    scaling_png_path: Path | None = None  # with ``gpus``: warm seconds against the GPU count


def prompt_of(n_bytes: int, base: str = BASE_PROMPT) -> str:
    """``n_bytes`` of English text (``n_bytes`` tokens with the byte-level tokenizer of tiny/random Nano)."""
    return (base * (n_bytes // len(base) + 1))[:n_bytes]


def build_request(case: Case, *, profile: str, steps: int, guidance: float, text_tokens: int | None,
                  seed: int, step_cache: Any = None) -> GenerationRequest:
    """The case as a request; image/video modes condition on the package's sample clip at the case's size, action
    modes on its rendered drive and the AV trajectory that films it (one row per step between frames)."""
    width, height = size_for(case.tier, "16,9")
    media: dict[str, Any] = {}
    if case.mode in ACTION_MODES:
        trajectory = sample_trajectory("av", case.frames - 1)
        drive = render_drive(trajectory, width, height)
        media.update(embodiment="av", **({"video": drive} if case.mode == "inverse_dynamics" else {"image": drive[0]}))
        if case.mode == "forward_dynamics":
            media["actions"] = trajectory
    else:  # the action modes size the video from their start image or video, not from an aspect ratio
        media["aspect_ratio"] = "16,9"
    if case.mode == "image2video":
        media["image"] = rolling_ball_clip(1, width, height)[0]
    elif case.mode == "video2video":
        media["video"] = rolling_ball_clip(case.frames, width, height)
    return GenerationRequest(
        mode=case.mode, prompt=prompt_of(text_tokens) if text_tokens else BASE_PROMPT.strip(),
        negative_prompt=prompt_of(text_tokens, BASE_NEGATIVE) if text_tokens else BASE_NEGATIVE.strip(),
        profile=profile, tier=case.tier, num_frames=case.frames, num_inference_steps=steps,
        guidance_scale=guidance, seed=seed, sound=case.sound, guardrails=False, add_resolution_template=False,
        add_duration_template=False, step_cache=step_cache, **media)


class Timed(NamedTuple):
    """One timed call: frames (uint8), seconds (device synchronised), peak GPU GiB of this process, the generation
    and the seconds of each denoising step (in-process backends)."""

    frames: np.ndarray
    seconds: float
    peak: float | None
    generation: Any
    step_s: list[float]


def _timed(name: str, backend: Any, request: GenerationRequest, cuda: bool) -> Timed:
    """``backend.generate(request)``, timed (see :class:`Timed`)."""
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
    generation = backend.generate(request, progress=on_step) if isinstance(backend, DiffusersBackend) \
        else backend.generate(request)
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

    from .backends.memory import PRESETS, normalize_preset

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
    """Run every case through every backend and write the table, the chart and the JSON under ``out_dir``.

    ``pipeline``: an already built ``Cosmos3OmniPipeline`` to time (e.g. from
    :func:`cosmos_helpers.models.random_nano.build_random_nano_pipeline`) instead of loading the profile's.
    """
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
    runners: dict[str, Any] = {name: b for name, b in made.items() if name in backends or "gpu" in name}
    if vllm_url:
        from .backends.vllm_omni import VllmOmniBackend

        runners["vllm"] = VllmOmniBackend(vllm_url)
    cuda = stock.device.startswith("cuda")
    if memory and cuda:
        _cap_memory(stock, get_profile(profile).model, memory, log)
    settings = dict(profile=profile, random_nano=random_nano or pipeline is not None, steps=steps, guidance=guidance,
                    gpus=list(gpus), memory=memory,
                    text_tokens=text_tokens, repeats=repeats, seed=seed, backends=list(runners),
                    vllm_url=vllm_url, fast_options=fast_options or {}, environment=_environment(stock),
                    step_cache=step_cache_record(step_cache))
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

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(rows, settings)
    md_path, json_path = out / "benchmark.md", out / "benchmark.json"
    md_path.write_text(markdown)
    json_path.write_text(json.dumps({"settings": settings, "rows": [asdict(r) for r in rows]}, indent=1, default=str))
    png_path = render_png(rows, out / "benchmark.png", title=_title(settings))
    # with a memory preset the one-GPU row is offloaded and the workers are not: no like-for-like line to draw
    scaling = render_scaling_png(rows, out / "scaling.png", title=_title(settings)) if gpus and not memory else None
    return BenchResult(rows, markdown, md_path, png_path, json_path, settings, scaling)


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
                stats = fast_path_stats(backend.pipeline(request.model))
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


def _fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _title(settings: dict) -> str:
    env = settings["environment"]
    size = settings["random_nano"] if isinstance(settings["random_nano"], str) else "Nano"
    model = (f"random {size.capitalize()}-shaped weights" if settings["random_nano"]
             else f"profile {settings['profile']}")
    return f"Cosmos3 latency, {model}, {env.get('device')} ({env.get('dtype')}), {settings['steps']} steps"


def render_markdown(rows: list[Row], settings: dict) -> str:
    """Mode x tier table (seconds, warm) per backend with a speed-up row, then the details."""
    env = settings["environment"]
    tiers = sorted({r.tier for r in rows}, key=lambda t: int(t) if t.isdigit() else 0)
    lines = [f"# {_title(settings)}", "",
             f"{env.get('date')} · torch {env.get('torch')} · diffusers {env.get('diffusers')} · "
             f"guidance {settings['guidance']} · prompt/negative {settings['text_tokens'] or 'short'} tokens · "
             f"warm = median of {settings['repeats']} call(s) after the cold one · seconds per generation", "",
             "| Mode | Frames | Backend | " + " | ".join(f"{t}p" for t in tiers) + " |",
             "| --- | ---: | --- | " + " | ".join("---:" for _ in tiers) + " |"]
    groups: dict[tuple, dict] = {}
    for r in rows:
        groups.setdefault((r.mode, r.frames, "+sound" in r.case), {}).setdefault(r.backend, {})[r.tier] = r
    for (mode, frames, sound), by_backend in groups.items():
        title = mode_title(mode) + (" + sound" if sound else "")
        for backend, by_tier in by_backend.items():
            cells = [_fmt(by_tier[t].warm_s) if t in by_tier and not by_tier[t].error else
                     ("error" if t in by_tier else "") for t in tiers]
            lines.append(f"| {title} | {frames} | {BACKEND_TITLES.get(backend, backend)} | " + " | ".join(cells) + " |")
        for backend, by_tier in by_backend.items():
            if backend == "stock" or "stock" not in by_backend:
                continue
            cells = [f"{by_tier[t].speedup:.2f}x" if t in by_tier and by_tier[t].speedup else "" for t in tiers]
            lines.append(f"| {title} | {frames} | speed-up, {BACKEND_TITLES.get(backend, backend)} vs stock | "
                         + " | ".join(cells) + " |")
    lines += ["", "## Details", "",
              "| Case | Backend | Cold s | Warm s | Speed-up (warm) | Peak GPU GiB | Max abs pixel diff vs stock |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.case} | {BACKEND_TITLES.get(r.backend, r.backend)} | {_fmt(r.cold_s)} | {_fmt(r.warm_s)} | "
                     f"{'' if r.speedup is None else f'{r.speedup:.2f}x'} | {_fmt(r.peak_gib)} | "
                     f"{'' if r.max_abs_diff_vs_stock is None else f'{r.max_abs_diff_vs_stock:.0f}'} |"
                     + (f" error: {r.error}" if r.error else ""))
    lines += _step_cache_lines(rows)
    lines.append("")
    return "\n".join(lines)


def _step_cache_lines(rows: list[Row]) -> list[str]:
    """The step-cache table (``--step-cache``): passes computed, and what a computed and a cached pass cost."""
    cached = [(r, r.extra["step_cache"]) for r in rows if "step_cache" in r.extra]
    if not cached:
        return []
    lines = ["", "## Step cache", "", "| Case | Backend | Passes computed | Computed pass s | Cached pass s | "
             "Cached / computed |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r, c in cached:
        ratio = c.get("cached_to_computed")
        lines.append(f"| {r.case} | {BACKEND_TITLES.get(r.backend, r.backend)} | {c['passes_computed']} of "
                     f"{c['passes']} | {_fmt(c['computed_pass_s'], 3)} | {_fmt(c['cached_pass_s'], 3)} | "
                     f"{'' if ratio is None else f'{ratio:.1%}'} |")
    return lines


def _finish(fig, ax, path: Path, title: str) -> Path:
    """The charts' common end: the seconds axis, title and legend, then the PNG written and the figure closed."""
    import matplotlib.pyplot as plt

    ax.set_ylabel("seconds per generation (warm)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render_png(rows: list[Row], path: Path, *, title: str = "") -> Path:
    """Grouped bars of the warm seconds per case, one colour per backend, speed-ups over the bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_key = {(r.case, r.backend): r for r in reversed(rows)}  # the first row of each (case, backend)
    cases = list(dict.fromkeys(r.case for r in rows))
    backends = list(dict.fromkeys(r.backend for r in rows))
    width = 0.8 / max(len(backends), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cases) + 2), 4.2))
    colors = {"stock": "#8c8c8c", "fast": "#76b900", "vllm": "#1f77b4"}
    for i, backend in enumerate(backends):
        found = [by_key.get((case, backend)) for case in cases]
        values = [row.warm_s if row is not None and row.warm_s is not None else 0.0 for row in found]
        xs = [c + (i - (len(backends) - 1) / 2) * width for c in range(len(cases))]
        bars = ax.bar(xs, values, width, label=BACKEND_TITLES.get(backend, backend), color=colors.get(backend))
        for bar, row in zip(bars, found):
            if row is not None and row.speedup and backend != "stock":
                ax.annotate(f"{row.speedup:.1f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(cases)), cases, rotation=20, ha="right", fontsize=8)
    return _finish(fig, ax, path, title)


def gpu_count(backend: str) -> int | None:
    """GPUs behind a bench backend name: ``fast`` 1, ``fast-2gpu``/``fast-2gpu-ulysses`` 2, others ``None``."""
    if backend == "fast":
        return 1
    head, _, count = backend.partition("-")
    return int(count.split("gpu")[0]) if head == "fast" and "gpu" in count else None


def render_scaling_png(rows: list[Row], path: Path, *, title: str = "") -> Path:
    """Warm seconds against the number of GPUs, a line per case and parallel plan (the ideal 1/N dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    counts: set[int] = set()
    for case in dict.fromkeys(r.case for r in rows):
        found = {r.backend: r for r in rows if r.case == case and r.warm_s and gpu_count(r.backend)}
        one = found.get("fast")
        for plan in dict.fromkeys(b.split("gpu", 1)[1] for b in found if b != "fast"):
            points = sorted((gpu_count(b), r.warm_s) for b, r in found.items()
                            if b == "fast" or b.split("gpu", 1)[1] == plan)
            counts.update(n for n, _ in points)
            line, = ax.plot(*zip(*points), marker="o", label=f"{case}, {plan.strip('-') or 'default plan'}")
        if one is not None and len(found) > 1:
            ideal = sorted({gpu_count(b) for b in found})
            ax.plot(ideal, [one.warm_s / n for n in ideal], ls=":", color=line.get_color(), label=f"{case}, ideal 1/N")
    ax.set_xticks(sorted(counts))
    ax.set_xlabel("GPUs (one worker process each)")
    return _finish(fig, ax, path, title)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(DEFAULT_CASES),
                        help="model and defaults (tiny: embedded model, CPU in seconds)")
    parser.add_argument("--random-nano", action="store_true",
                        help="Nano-shaped random weights instead of a checkpoint (for GPUs without the download)")
    parser.add_argument("--cases", default=None,
                        help="comma list of mode:tier[:frames], e.g. t2i:256,t2v:480:189,t2v+sound:256:121,fd:256:17 "
                             "(fd, id, wam: the action modes, on the rendered drive)")
    parser.add_argument("--steps", type=int, default=None, help="denoising steps (default: tiny 2, else 35)")
    parser.add_argument("--frames", type=int, default=None, help="frames for video cases without :frames")
    parser.add_argument("--guidance", type=float, default=6.0)
    parser.add_argument("--text-tokens", type=int, default=None,
                        help="prompt and negative prompt length in bytes (= tokens with the byte tokenizer)")
    parser.add_argument("--repeats", type=int, default=1, help="warm calls after the cold one")
    parser.add_argument("--backends", default="stock,fast", help="comma list of stock, fast (vllm: --vllm-url)")
    parser.add_argument("--vllm-url", default=None, help="a running vLLM-Omni server to include")
    parser.add_argument("--out", default="outputs/benchmarks", help="folder for benchmark.md/.png/.json")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, help="bfloat16 or float32 (default: bf16 on CUDA, fp32 on CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus", default="", help="add the fast path on N GPUs: comma list of N, N:cfg or N:ulysses "
                        "(e.g. 2,2:ulysses); N alone = CFG-parallel with Ulysses over the rest")
    parser.add_argument("--memory", default=None, help="memory preset for the Diffusers backends (24GB/48GB/80GB); "
                        "also caps this process's GPU memory at that size")
    parser.add_argument("--random-super", action="store_true", help="Cosmos3-Super-shaped random weights")
    parser.add_argument("--step-cache", type=step_cache_argument, default=None, metavar="off|sea|sea:THRESHOLD",
                        help="step cache for every request (default: each backend's own); rows then report passes "
                             "computed and the time of a computed and of a cached pass")


def run(args: argparse.Namespace) -> int:
    result = run_benchmark(profile=args.profile, cases=args.cases, steps=args.steps, frames=args.frames,
                           guidance=args.guidance, text_tokens=args.text_tokens, repeats=args.repeats,
                           backends=[b.strip() for b in args.backends.split(",") if b.strip()],
                           vllm_url=args.vllm_url, out_dir=args.out,
                           random_nano="super" if args.random_super else args.random_nano,
                           device=args.device, dtype=args.dtype, seed=args.seed,
                           gpus=[g.strip() for g in args.gpus.split(",") if g.strip()], memory=args.memory,
                           step_cache=args.step_cache)
    print(result.markdown)
    print(f"wrote {result.markdown_path}, {result.png_path}, {result.json_path}")
    return 1 if any(r.error for r in result.rows) else 0


if __name__ == "__main__":  # pragma: no cover - ``python -m cosmos_helpers.bench`` = ``cosmos-helpers bench``
    import sys

    from .cli import main

    raise SystemExit(main(["bench", *sys.argv[1:]]))
