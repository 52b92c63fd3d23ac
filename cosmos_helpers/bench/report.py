"""The benchmark's files: a mode x tier table in markdown, and the warm times (and GPU scaling) as charts."""

from __future__ import annotations

from pathlib import Path

from ..views.plots import new_figure
from .cases import BACKEND_TITLES, Row, mode_title


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
    """The charts' common end: the seconds axis, title and legend, then the PNG written."""
    ax.set_ylabel("seconds per generation (warm)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.savefig(path)
    return path


def render_png(rows: list[Row], path: Path, *, title: str = "") -> Path:
    """Grouped bars of the warm seconds per case, one colour per backend, speed-ups over the bars."""
    by_key = {(r.case, r.backend): r for r in reversed(rows)}  # the first row of each (case, backend)
    cases = list(dict.fromkeys(r.case for r in rows))
    backends = list(dict.fromkeys(r.backend for r in rows))
    width = 0.8 / max(len(backends), 1)
    fig = new_figure((max(6.0, 1.6 * len(cases) + 2), 4.2), 120)
    ax = fig.add_subplot()
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
    fig = new_figure((6.4, 4.2), 120)
    ax = fig.add_subplot()
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
