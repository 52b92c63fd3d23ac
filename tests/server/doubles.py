"""Test doubles of the model behind the stand-in (they live here, not in the package).

``InstantBackend`` is model-free: it honours the request's size, frames, fps and sound, reports every step (so
progress, cancellation and the serial worker behave as with a model) and records what it ran, when. ``Guarded``
wraps it with a word the guardrail blocks (``GuardrailError``, as the Cosmos guardrails raise it), and
``WordChecker`` is the same guardrail as a ``DiffusersBackend(safety_checker=...)``, so the server's real
guardrail path (400 with vLLM's message) is exercised. ``SlowLoading`` makes ``pipeline()`` (the warm-up the
server runs before it binds its port) take a while. ``Holding`` never finishes the first request that names its
word (it marks a file first), so a test can act while a generation is surely running.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from cosmos_helpers.errors import GuardrailError
from cosmos_helpers.presets import SOUND_SAMPLE_RATE
from cosmos_helpers.result import Generation


@dataclass
class Run:
    request: Any
    started: float
    finished: float


class InstantBackend:
    name = "instant"

    def __init__(self, step_seconds: float = 0.0) -> None:
        self.step_seconds = step_seconds
        self.runs: list[Run] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.runs)

    @property
    def last(self) -> Any:
        return self.runs[-1].request

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None, **_: Any) -> Generation:
        request, started = request.resolve(), time.monotonic()  # a backend resolves on entry
        steps = int(request.num_inference_steps)
        for step in range(1, steps + 1):
            if self.step_seconds:
                time.sleep(self.step_seconds)
            if progress is not None:
                progress(step, steps)
        frames = 1 if request.is_image else int(request.num_frames)
        ramp = np.linspace(0, 255, request.width, dtype=np.float32)[None, None, :, None]
        video = np.broadcast_to(ramp, (frames, request.height, request.width, 3)).astype(np.uint8)
        sound = None
        if request.sound:
            sound = np.zeros((2, max(1, int(frames / request.fps * SOUND_SAMPLE_RATE))), dtype=np.float32)
        with self._lock:
            self.runs.append(Run(request, started, time.monotonic()))
        return Generation(frames=video, fps=request.fps, seed=request.seed, request=request, sound=sound,
                          backend=self.name, model=request.model,
                          timings={"denoise_s": time.monotonic() - started, "decode_s": 0.0})


class Guarded:
    """A backend whose guardrail blocks prompts containing ``word`` (when the request runs guardrails)."""

    def __init__(self, inner: Any, word: str) -> None:
        self.inner = inner
        self.word = word

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None) -> Generation:
        if request.resolve().guardrails and self.word in request.resolve().prompt_text():
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        return self.inner.generate(request, progress=progress)


class WordChecker:
    """A safety checker for ``DiffusersBackend``: the text check fails on ``word``; videos pass."""

    def __init__(self, word: str) -> None:
        self.word = word

    def check_text_safety(self, text: str) -> bool:
        return self.word not in text

    def check_video_safety(self, frames: Any) -> Any:
        return frames


class SlowLoading:
    """A backend whose model load (``pipeline``) takes ``seconds``."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def pipeline(self, model: str) -> Any:
        time.sleep(self.seconds)
        loader = getattr(self.inner, "pipeline", None)
        return loader(model) if loader is not None else None

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None) -> Generation:
        return self.inner.generate(request, progress=progress)


class Holding:
    """The first request whose prompt contains ``word`` touches ``marker`` and then never finishes (until the process
    dies). Once ``marker`` exists such requests run, so a server restarted with the same options serves a rerun."""

    def __init__(self, inner: Any, word: str, marker: str) -> None:
        self.inner = inner
        self.word = word
        self.marker = marker

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None) -> Generation:
        if self.word in request.resolve().prompt_text() and not os.path.exists(self.marker):
            with open(self.marker, "w") as handle:
                handle.write("running")
            threading.Event().wait()
        return self.inner.generate(request, progress=progress)
