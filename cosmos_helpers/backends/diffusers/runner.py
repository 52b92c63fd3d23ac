"""One in-process call, whatever its loop (the pipeline's own call, the distilled blocks, the edit loop): the shared
pipeline borrowed, with what this backend lends it for the call (scheduler, guidance interval, fast path, step cache)
taken back however the call ends; progress reported, time taken, a Generation. The step clock, guardrails and step
cache serve the other in-process workflows too (transfer, audio, several GPUs).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ...errors import BackendUnavailableError, GuardrailError, ValidationError
from ...fast import FastOptions, enable_fast_path, fast_path_active, installed_forward
from ...precision import diffusers_call_kwargs
from ...presets import SOUND_SAMPLE_RATE
from ...progress import progress_bar
from ...protocol import step_cache as facts
from ...request import GenerationRequest
from ...result import Generation
from ...schedules import configure_scheduler
from ...step_cache import SeaCache, StepCache, describe
from . import distilled, edit, modelopt_fp8
from .arguments import action_kwargs, call_kwargs, predicted_actions

GUARDRAIL_HELP = (
    "Guardrails were requested but `cosmos_guardrail` is not usable here. To run them: "
    "`pip install cosmos_guardrail` on a GPU host that can download nvidia/Cosmos-1.0-Guardrail and "
    "Qwen/Qwen3Guard-Gen-0.6B (it pulls a CUDA torch; never install it into a CPU environment). "
    "To go without: pass guardrails=False in the request (profile 'tiny' does by default)."
)


@dataclass
class Guardrails:
    """One backend's checker: ``cosmos_guardrail.CosmosSafetyChecker`` (loaded on first use) or the caller's own
    (an object with ``check_text_safety(str) -> bool`` and ``check_video_safety(frames) -> frames | None``)."""

    checker: Any = None

    def check_prompt(self, wanted: bool, prompt: str):
        """The checker for a call whose prompt has passed (``None`` without guardrails)."""
        if not wanted:
            return None
        if self.checker is None:
            from diffusers.utils import is_cosmos_guardrail_available

            if not is_cosmos_guardrail_available():
                raise BackendUnavailableError(GUARDRAIL_HELP)
            from cosmos_guardrail import CosmosSafetyChecker

            self.checker = CosmosSafetyChecker()
        if not self.checker.check_text_safety(prompt):
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        return self.checker

    @staticmethod
    def check_frames(checker, frames: np.ndarray) -> np.ndarray:
        if checker is None:
            return frames
        checked = checker.check_video_safety(frames)
        if checked is None:
            raise GuardrailError("the Cosmos guardrails blocked the generated video.")
        return np.asarray(checked, dtype=np.uint8)


class StepClock(contextlib.AbstractContextManager):
    """``with StepClock(total, desc, bar=True) as clock:`` set ``clock.load_s`` and ``clock.call_start``, call
    ``clock.step()`` after each step; leaving the block closes the bar and sets ``clock.timings``."""

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
        """One step taken; ``done``: the caller's count (default: the steps counted here)."""
        self.marks.append(time.perf_counter())
        self.bar.update(1)
        if self.callback is not None:
            self.callback(len(self.marks) if done is None else done, self.total)

    def __exit__(self, *exc: Any) -> None:
        end, marks = time.perf_counter(), self.marks
        self.timings = {"load_s": self.load_s, "total_s": end - self.started, "pipeline_s": end - self.call_start}
        if marks:
            self.timings.update(first_step_s=marks[0] - self.call_start, denoise_s=marks[-1] - self.call_start,
                                decode_s=end - marks[-1])
            if len(marks) > 1:
                self.timings["step_s"] = (marks[-1] - marks[0]) / (len(marks) - 1)
        self.bar.close()


@dataclass
class CallCache:
    """One call's step cache and its passes (``schedule``: a character a pass, ``C`` computed, ``.`` cached), and the
    passes the fast path sent to stock code, by reason; once the call's block is left, ``provenance`` records them."""

    record: dict[str, Any]
    fast: Any = None  # the installed fast forward, which counts its own computed passes and fallbacks
    passes: int = 0
    stack_runs: int = 0  # stock passes that ran the first layer
    schedule: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    handles: list = field(default_factory=list, repr=False)
    _at_pass_start: int = 0

    def __post_init__(self) -> None:
        stats = self.fast.stats if self.fast is not None else {"computed_passes": 0, "fallback_reasons": {}}
        self._fast_start = (stats["computed_passes"], dict(stats["fallback_reasons"]))

    @property
    def computed(self) -> int:
        fast = self.fast.stats["computed_passes"] - self._fast_start[0] if self.fast is not None else 0
        return self.stack_runs + fast

    def watch(self, transformer) -> None:
        """Count ``transformer``'s passes, and its stock passes that run the decoder stack (SeaCache decides per
        branch whether it runs; its state is not read)."""

        def count_pass(*_: Any) -> None:
            self._close_pass()
            self.passes += 1
            self._at_pass_start = self.computed

        def count_stack(*_: Any) -> None:
            self.stack_runs += 1

        self.handles = [transformer.register_forward_pre_hook(count_pass),
                        transformer.layers[0].register_forward_pre_hook(count_stack)]

    def _close_pass(self) -> None:
        if self.passes > len(self.schedule):
            self.schedule += "C" if self.computed > self._at_pass_start else "."

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self._close_pass()
        self.provenance = {"step_cache": {**self.record, "passes": self.passes, "passes_computed": self.computed,
                                          "schedule": self.schedule}}
        if self.fast is not None:
            fallbacks = Counter(self.fast.stats["fallback_reasons"]) - Counter(self._fast_start[1])
            if fallbacks:
                self.provenance["fast_fallbacks"] = dict(fallbacks)


@contextlib.contextmanager
def call_cache(transformer, value: StepCache, fast=None) -> Iterator[CallCache]:
    """The request's cache on ``transformer`` for the block, counted (``fast``: the installed fast forward), removed
    after. A cache the caller enabled on the transformer is left in place and recorded; a request that sets one as
    well is refused (diffusers runs one cache at a time)."""
    enabled = getattr(transformer, "_cache_config", None)
    if value is not None and enabled is not None:
        raise ValidationError("step_cache", f"the pipeline's transformer already has a {type(enabled).__name__} "
                              "enabled (transformer.enable_cache), and diffusers runs one cache at a time.",
                              "call pipe.transformer.disable_cache() first, or leave step_cache out to run with the "
                              "cache you enabled.")
    config = None
    if isinstance(value, SeaCache):  # its fields given, diffusers' defaults for the rest
        from diffusers import SeaCacheConfig

        config = SeaCacheConfig(**{facts.FIELDS[name][0]: given for name, given in value.given().items()})
    record = describe(value, "diffusers") if enabled is None else {  # the caller's own, left in place
        "choice": "default", "source": "enabled on the pipeline by the caller", "method": type(enabled).__name__}
    call = CallCache(record, fast)
    call.watch(transformer)
    if config is not None:
        transformer.enable_cache(config)
    try:
        yield call
    finally:
        call.close()
        if config is not None:
            transformer.disable_cache()


OnStep = Callable[[int], None]  # called after every denoising step with its 0-based index


@dataclass
class Denoised:
    """Frames ``(T, H, W, 3)`` (floats in [0, 1] or uint8), and the sound and predicted actions where made."""

    frames: np.ndarray
    sound: np.ndarray | None = None
    sample_rate: int = SOUND_SAMPLE_RATE
    actions: np.ndarray | None = None


class StockLoop:
    """The pipeline's own ``__call__``."""

    what = ""
    lends = True  # the backend's scheduler, guidance interval and fast path are lent for the call
    provenance: dict[str, Any] = {}

    def call_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        """The exact ``Cosmos3OmniPipeline.__call__`` arguments for a request (no generator/callback), with the FP8
        schedule's overrides (none: the checkpoint's)."""
        if request.is_action:
            return {**action_kwargs(request), **diffusers_call_kwargs(request.precision)}
        return {"negative_prompt": request.negative_prompt_text(), "guidance_scale": request.guidance_scale,
                "enable_sound": bool(request.sound), "enable_safety_check": False, **call_kwargs(request),
                **diffusers_call_kwargs(request.precision)}

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, *, on_device: bool = False
                ) -> Denoised:
        """``on_device``: the fast path's conversion of the decoded video to uint8 on the GPU (same values)."""
        import torch

        def callback(_pipe, step, _timestep, callback_kwargs):
            on_step(step)
            return callback_kwargs  # diffusers pops "latents" from what we return

        with torch.inference_mode():
            output = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed),
                          callback_on_step_end=callback, output_type="pt" if on_device else "np", return_dict=True)
            if on_device:
                from ...fast.vae import video_to_host_uint8

                output.video = video_to_host_uint8(output.video)
        sound = _squeeze(output.sound.float().cpu().numpy(), 3) if request.sound and output.sound is not None else None
        tokenizer_config = getattr(getattr(pipe, "sound_tokenizer", None), "config", {})
        rate = int(tokenizer_config.get("sampling_rate", SOUND_SAMPLE_RATE))
        return Denoised(_squeeze(output.video), sound, rate, predicted_actions(output, request))


class DistilledLoop:
    """A few-step checkpoint: its own fixed schedule, no guidance, no sound (:mod:`.distilled`)."""

    what = "distilled"
    lends = False  # the checkpoint's own scheduler; no fast path
    provenance = {"distilled": True}

    call_kwargs = staticmethod(call_kwargs)

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, **_: Any) -> Denoised:
        frames, _timesteps = distilled.denoise(pipe, request, kwargs, on_step)  # the runner reads the scheduler's
        return Denoised(_squeeze(frames))


class EditLoop:
    """Image editing: the framework's edit batch on the pipeline's transformer (:mod:`.edit`)."""

    what = "edit"
    lends = True
    provenance = {"edit": True}

    def call_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        return {}

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, **_: Any) -> Denoised:
        return Denoised(_squeeze(edit.edit(pipe, request, on_step)))


def loop_for(request: GenerationRequest):
    """The distilled blocks for a distilled checkpoint, the edit loop for image2image, else the pipeline's call."""
    if distilled.is_distilled_model(request.model):
        return DistilledLoop()
    return EditLoop() if request.mode == "image2image" else StockLoop()


def _squeeze(array: Any, batched: int = 5) -> np.ndarray:  # a batch's first item (frames: 5-D, sound: 3-D)
    array = np.asarray(array)
    return array[0] if array.ndim == batched else array


class CallRun:
    """One call of ``backend`` for ``request``, as numbered steps (:meth:`run`)."""

    def __init__(self, backend: Any, request: GenerationRequest, progress: Callable[[int, int], None] | None) -> None:
        self.started = time.perf_counter()
        self.backend, self.request, self.callback = backend, request, progress
        self.loop = loop_for(request)
        self.kwargs = self.loop.call_kwargs(request)  # what the pipeline call is sent (its media decoded)
        self.fast = backend.fast if self.loop.lends else False
        self.load_s = 0.0
        self.clock: StepClock | None = None

    def run(self) -> Generation:
        """1. the prompt through the guardrails, 2. the shared pipeline, 3. denoise on the lent pipeline, 4. the
        Generation (frames through the guardrails)."""
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

    def _denoise(self, loaded: Any, kwargs: dict[str, Any]) -> tuple[Denoised, dict[str, Any]]:
        """The loop's denoise on ``loaded`` (a :class:`~.loading.Loaded`) lent; what ran, for the manifest."""
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
                    denoised = loop.denoise(pipe, request, kwargs, lambda index: clock.step(index + 1),
                                            on_device=on_device)
                provenance = {"device": str(pipe.device), "dtype": str(pipe.transformer.dtype),
                              **({"memory": loaded.memory} if loaded.memory else {}),
                              "scheduler": type(pipe.scheduler).__name__, "fast": bool(self.fast),
                              **loop.provenance, "timesteps": [round(float(t), 3) for t in pipe.scheduler.timesteps],
                              **cache.provenance, **modelopt_fp8.provenance(pipe, request, loaded.w8a8_gemm)}
        return denoised, provenance

    @contextlib.contextmanager
    def _lent(self, pipe) -> Iterator[Any]:
        """The shared pipeline with this call's scheduler, fast-path switch and guidance interval (a loop on the
        checkpoint's own schedule borrows it as it is)."""
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
