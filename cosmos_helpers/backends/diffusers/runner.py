"""One in-process call, whatever its loop: the shared pipeline borrowed, progress reported, time taken, a Generation.

The pipeline is shared by every backend of the process, so what a backend changes on it for one call (its scheduler,
its guidance interval, the fast path switched on, a step cache) is lent under the pipeline's lock and taken back
after, however the call ends. The step clock and the Cosmos guardrails (the prompt checked before a call, the frames
after it) serve the other in-process workflows too (transfer, audio).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator

import numpy as np

from ...errors import BackendUnavailableError, GuardrailError
from ...fast import FastOptions, enable_fast_path, fast_path_active, installed_forward
from ...progress import progress_bar
from ...request import GenerationRequest
from ...result import Generation
from ...schedules import configure_scheduler
from .cache import call_cache
from . import modelopt_fp8
from .loading import Loaded
from .loops import Denoised, StockLoop, loop_for

GUARDRAIL_HELP = (
    "Guardrails were requested but `cosmos_guardrail` is not usable here. To run them: "
    "`pip install cosmos_guardrail` on a GPU host that can download nvidia/Cosmos-1.0-Guardrail and "
    "Qwen/Qwen3Guard-Gen-0.6B (it pulls a CUDA torch; never install it into a CPU environment). "
    "To go without: pass guardrails=False in the request (profile 'tiny' does by default)."
)


class Guardrails:
    """One backend's checker: ``cosmos_guardrail.CosmosSafetyChecker`` (loaded on first use) or the caller's own
    (an object with ``check_text_safety(str) -> bool`` and ``check_video_safety(frames) -> frames | None``)."""

    def __init__(self, checker: Any = None) -> None:
        self.checker = checker

    def get(self, wanted: bool = True):
        """The checker, or ``None`` when ``wanted`` is off."""
        if not wanted:
            return None
        if self.checker is None:
            from diffusers.utils import is_cosmos_guardrail_available

            if not is_cosmos_guardrail_available():
                raise BackendUnavailableError(GUARDRAIL_HELP)
            from cosmos_guardrail import CosmosSafetyChecker

            self.checker = CosmosSafetyChecker()
        return self.checker

    def check_prompt(self, wanted: bool, prompt: str):
        """The checker for a call whose prompt has passed (``None`` without guardrails)."""
        checker = self.get(wanted)
        if checker is not None and not checker.check_text_safety(prompt):
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        return checker

    @staticmethod
    def check_frames(checker, frames: np.ndarray) -> np.ndarray:
        if checker is None:
            return frames
        checked = checker.check_video_safety(frames)
        if checked is None:
            raise GuardrailError("the Cosmos guardrails blocked the generated video.")
        return np.asarray(checked, dtype=np.uint8)


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


class CallRun:
    """One call of ``backend`` for ``request``, as numbered steps (:meth:`run`): its bar and callback, its timings
    (load, first step, denoise, decode), the pipeline lent for it."""

    def __init__(self, backend: Any, request: GenerationRequest, progress: Callable[[int, int], None] | None) -> None:
        self.started = time.perf_counter()
        self.backend, self.request, self.callback = backend, request, progress
        self.loop = loop_for(request)
        self.kwargs = self.loop.call_kwargs(request)  # what the pipeline call is sent (its media decoded)
        self.fast = backend.fast if self.loop.lends else False
        self.load_s = 0.0
        self.clock: StepClock | None = None

    def run(self) -> Generation:
        """1. the prompt through the guardrails, 2. the shared pipeline, 3. denoise on the lent pipeline with the
        call's arguments (built with the run), 4. the Generation (frames through the guardrails)."""
        request, backend = self.request, self.backend
        checker = backend.guardrails.check_prompt(bool(request.guardrails), request.prompt_text())  # 1
        start = time.perf_counter()
        loaded = backend._loaded(request.model, request.precision)  # 2
        self.load_s = time.perf_counter() - start
        denoised, provenance = self._denoise(loaded, self.kwargs)  # 3
        generation = Generation(  # 4
            frames=denoised.frames, fps=request.fps, seed=request.seed, request=request, sound=denoised.sound,
            sample_rate=denoised.sample_rate, backend=backend.name, model=request.model,
            timings=self.clock.timings, provenance=provenance, actions=denoised.actions)
        generation.frames = backend.guardrails.check_frames(checker, generation.frames)  # uint8 by now
        return generation

    def on_step(self, index: int) -> None:
        """After each denoising step (0-based ``index``)."""
        self.clock.step(index + 1)

    def _denoise(self, loaded: Loaded, kwargs: dict[str, Any]) -> tuple[Denoised, dict[str, Any]]:
        """The loop's denoise on the lent pipeline; what ran, for the manifest."""
        request, loop = self.request, self.loop
        label = f"{request.mode} denoising" + (f" ({loop.what})" if loop.what else "")
        with StepClock(request.num_inference_steps, label, bar=self.backend.progress, callback=self.callback,
                       started=self.started) as clock:
            self.clock, clock.load_s = clock, self.load_s
            with loaded.lock, guardrail_errors(), self._lent(loaded.pipe) as pipe:
                fast = installed_forward(pipe) if self.fast else None
                with call_cache(pipe.transformer, request.step_cache, fast) as cache:
                    clock.call_start = time.perf_counter()
                    on_device = bool(fast) and isinstance(loop, StockLoop) and pipe.device.type == "cuda"
                    denoised = loop.denoise(pipe, request, kwargs, self.on_step, on_device=on_device)
                provenance = {"device": str(pipe.device), "dtype": str(pipe.transformer.dtype),
                              **({"memory": loaded.memory} if loaded.memory else {}),
                              "scheduler": type(pipe.scheduler).__name__, "fast": bool(self.fast),
                              **loop.provenance, "timesteps": [round(float(t), 3) for t in pipe.scheduler.timesteps],
                              **cache.provenance, **modelopt_fp8.provenance(pipe, request, loaded.w8a8_gemm)}
        return denoised, provenance

    @contextlib.contextmanager
    def _lent(self, pipe) -> Iterator[Any]:
        """The shared pipeline with this call's scheduler, fast-path switch and guidance interval (a loop that runs
        the checkpoint's own schedule borrows it as it is)."""
        if not self.loop.lends:
            yield pipe
            return
        request = self.request
        scheduler, interval = pipe.scheduler, getattr(pipe, "guidance_interval", None)
        pipe.scheduler = configure_scheduler(scheduler.config, self.backend.scheduler, request.flow_shift,
                                             shift_given="flow_shift" in request.given)
        pipe.guidance_interval = request.guidance_interval
        if self.fast:  # installed once, at rest switched off: the shared pipeline runs stock code for the others
            enable_fast_path(pipe, self.fast if isinstance(self.fast, FastOptions) else None, active=False)
        try:
            with fast_path_active(pipe, bool(self.fast)):  # without a fast path installed: nothing to switch
                yield pipe
        finally:
            pipe.scheduler, pipe.guidance_interval = scheduler, interval


@contextlib.contextmanager
def guardrail_errors() -> Iterator[None]:
    """diffusers reports a guardrail block as a ``ValueError``; callers get a :class:`GuardrailError`."""
    try:
        yield
    except ValueError as exc:
        if "Guardrail" in str(exc):
            raise GuardrailError(str(exc)) from exc
        raise
