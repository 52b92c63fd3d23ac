"""``InstantBackend``: a model-free backend for fuzzing and load tests of the server's HTTP layer.

It honours the request's size, frame count, fps and sound flag and reports every denoising step (so job
progress, cancellation and the serial worker behave as with a model), optionally sleeping per step to
simulate work; frames are a cheap gradient. Not for anything that looks at the pictures.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np


class InstantBackend:
    name = "instant"
    model = "tiny"

    def __init__(self, step_seconds: float = 0.0) -> None:
        self.step_seconds = step_seconds
        self.calls = 0

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None, **_: Any):
        from ..presets import SOUND_SAMPLE_RATE
        from ..result import Generation

        self.calls += 1
        started = time.perf_counter()
        steps = int(request.num_inference_steps or 1)
        for step in range(1, steps + 1):
            if self.step_seconds:
                time.sleep(self.step_seconds)
            if progress is not None:
                progress(step, steps)
        frames_n = 1 if request.is_image else int(request.num_frames)
        height, width = int(request.height), int(request.width)
        ramp = np.linspace(0, 255, width, dtype=np.float32)[None, None, :, None]
        frames = np.broadcast_to(ramp, (frames_n, height, width, 3)).astype(np.uint8)
        sound = None
        if getattr(request, "sound", False) and frames_n > 1:
            samples = max(1, int(frames_n / float(request.fps) * SOUND_SAMPLE_RATE))
            sound = np.zeros((2, samples), dtype=np.float32)
        elapsed = time.perf_counter() - started
        return Generation(frames=frames, fps=float(request.fps or 24.0), seed=int(request.seed), request=request,
                          sound=sound, backend=self.name, model=self.model,
                          timings={"denoise_s": elapsed, "decode_s": 0.0, "total_s": elapsed})
