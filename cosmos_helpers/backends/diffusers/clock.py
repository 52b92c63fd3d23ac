"""The step clock of one in-process call (generation, transfer, audio): each denoising step moves a bar (or not) and
tells a ``callback(done, total)``, and is timed, so a manifest's ``timings`` split the pipeline call into load,
first step, denoise and decode."""

from __future__ import annotations

import time
from typing import Any, Callable

from ...progress import progress_bar


class StepClock:
    """``with StepClock(total, desc, bar=True) as clock:`` set ``clock.load_s`` (the model's load) and
    ``clock.call_start`` (the pipeline call starts), call ``clock.step()`` after each step; leaving the block stops
    the clock, closes the bar and sets ``clock.timings``."""

    def __init__(self, total: int, desc: str, *, bar: bool, callback: Callable[[int, int], None] | None = None,
                 started: float | None = None) -> None:
        self.total, self.callback = total, callback
        self.started = time.perf_counter() if started is None else started
        self.bar = progress_bar(total, desc, "step", enabled=bar)
        self.marks: list[float] = []
        self.call_start = self.started
        self.load_s = 0.0
        self.timings: dict[str, float] = {}

    def step(self, done: int | None = None) -> None:
        """One step taken; ``done`` is the caller's count (default: the steps counted here)."""
        self.marks.append(time.perf_counter())
        self.bar.update(1)
        if self.callback is not None:
            self.callback(len(self.marks) if done is None else done, self.total)

    def __enter__(self) -> StepClock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.timings = self._timings()
        self.bar.close()

    def _timings(self) -> dict[str, float]:
        end, marks = time.perf_counter(), self.marks
        timings = {"load_s": self.load_s, "total_s": end - self.started, "pipeline_s": end - self.call_start}
        if marks:
            timings.update(first_step_s=marks[0] - self.call_start, denoise_s=marks[-1] - self.call_start,
                           decode_s=end - marks[-1])
            if len(marks) > 1:
                timings["step_s"] = (marks[-1] - marks[0]) / (len(marks) - 1)
        return timings
