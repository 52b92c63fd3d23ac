"""What ``cosmos-helpers bench`` times: the cases (mode x tier x frames), their requests, and the rows it fills."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..presets import ACTION_MODES, MODES, size_for
from ..request import MODE_ALIASES, GenerationRequest
from ..samples import render_drive, rolling_ball_clip, sample_trajectory


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
        """``t2i:256``, ``t2v:480:189``, ``t2v+sound:256:121``, ``fd:256:17`` (frames default: ``default_frames``)."""
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
