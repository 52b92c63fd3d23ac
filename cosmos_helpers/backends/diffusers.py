"""``DiffusersBackend``: Cosmos3 in the notebook's own process through ``diffusers.Cosmos3OmniPipeline``.

The model comes from the request (its profile, or ``model=``): ``"tiny"`` (the embedded model), a hub id such as
``nvidia/Cosmos3-Nano`` or a local folder. Weights are loaded once per model, device and dtype and shared by
every backend in the process; what differs between backends (scheduler, fast path on or off, guidance
interval) is lent to the pipeline for the length of one call, under that pipeline's lock, and taken back after,
so two backends in one notebook cannot step on each other. bf16 on CUDA, fp32 on CPU; denoising progress is
shown; loading another model frees the previous one.

``gpus=N`` (with ``cfg_parallel=`` / ``ulysses=``, ``serve_command``'s names) runs each call on N worker processes,
one per GPU, that the backend starts on its first call and stops on :meth:`DiffusersBackend.close`, at exit or when
a worker fails (:mod:`cosmos_helpers.parallel`). ``memory="24GB"|"48GB"|"80GB"`` fits the pipeline on a card of that
size (:mod:`.memory`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .. import media
from ..errors import BackendUnavailableError, GuardrailError, ValidationError
from ..limits import check_backend_mode
from ..fast import FastOptions, enable_fast_path, fast_path_active
from ..models.tiny_trained import trained_tiny_path
from ..models.tiny_distilled import INDEX_FILE as DISTILLED_INDEX
from ..models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ..models.tiny_distilled import tiny_distilled_path
from ..models.tiny_edge import MODEL_NAME as TINY_EDGE
from ..models.tiny_edge import tiny_edge_path
from ..parallel.plan import ParallelPlan
from ..presets import SOUND_SAMPLE_RATE, model_for
from ..progress import progress_bar
from ..request import GenerationRequest
from ..result import Generation
from ..schedules import configure_scheduler
from . import diffusers_action, diffusers_edit, distilled
from .diffusers_cache import call_cache, check_request_cache
from .memory import MemorySettings, apply_memory, plan_memory, resolve_memory

ProgressCallback = Callable[[int, int], None]
NAME = "diffusers"

GUARDRAIL_HELP = (
    "Guardrails were requested but `cosmos_guardrail` is not usable here. To run them: "
    "`pip install cosmos_guardrail` on a GPU host that can download nvidia/Cosmos-1.0-Guardrail and "
    "Qwen/Qwen3Guard-Gen-0.6B (it pulls a CUDA torch; never install it into a CPU environment). "
    "To go without: pass guardrails=False in the request (profile 'tiny' does by default)."
)


@dataclass
class _Loaded:
    """One loaded pipeline and the lock a call holds while it borrows it."""

    pipe: Any
    lock: threading.RLock = field(default_factory=threading.RLock)


_PIPELINES: dict[tuple, _Loaded] = {}
_PIPELINES_LOCK = threading.Lock()


class DiffusersBackend:
    """Generate with diffusers in-process.

    Args:
        device: ``"cuda"``, ``"cpu"``, ...; default CUDA when available.
        dtype: ``"bfloat16"``/``"float32"``/a torch dtype; default bf16 on CUDA, fp32 on CPU.
        device_map: passed to ``from_pretrained`` for multi-GPU hosts (then the pipeline is not moved).
        progress: show a denoising progress bar (tqdm.auto: a widget in Jupyter, text under papermill).
        scheduler: a diffusers flow-matching scheduler class or instance to use instead of flow UniPC.
        safety_checker: an object with ``check_text_safety(str) -> bool`` and ``check_video_safety(frames)
            -> frames | None``; default: ``cosmos_guardrail.CosmosSafetyChecker`` when requested and installed.
        token: a Hugging Face token for gated hub checkpoints.
        fast: run through ``cosmos_helpers.fast`` (same outputs, less work per step: text keys/values once per
            prompt, CUDA graphs, tuned kernels and fused steps on GPU). ``True`` uses the defaults; a
            ``FastOptions`` picks switches, e.g. ``FastOptions(compile=False)`` to skip kernel compilation.
        gpus: GPUs per call (default 1: in this process). More start one worker process per GPU.
        cfg_parallel: 2 runs the two guidance branches of each step on two GPU groups at once (as vLLM-Omni's
            ``--cfg-parallel-size``); needs ``guidance_scale != 1``.
        ulysses: splits each pass's tokens over this many GPUs (as ``--ulysses-degree``); must divide the heads.
            Without degrees, ``gpus=2`` is CFG-parallel and ``gpus=4`` is 2 x 2.
        memory: the card size to fit, ``"24GB"``, ``"48GB"`` or ``"80GB"`` (offloading and VAE tiling, chosen for
            the model's size; see :mod:`cosmos_helpers.backends.memory`).
        offload: ``"group"``, ``"model"`` or ``False``; vae_tiling, fp8 (FP8 weight storage): explicit settings,
            which win over ``memory``.
        worker_timeout: seconds a multi-GPU call may go without a word from its workers (model load included).

    The model is not an argument: it is the request's (``GenerationRequest(profile=..., model=...)``).
    """

    name = NAME

    def __init__(self, *, device: str | None = None, dtype: Any = None, device_map: str | dict | None = None,
                 progress: bool = True, scheduler: Any = None, safety_checker: Any = None, token: str | None = None,
                 fast: bool | FastOptions = False, model: Any = None, gpus: int | None = None,
                 cfg_parallel: int | None = None, ulysses: int | None = None, memory: str | None = None,
                 offload: str | bool | None = None, vae_tiling: bool | None = None, fp8: bool | None = None,
                 worker_timeout: float = 1800.0) -> None:
        if model is not None:
            raise ValidationError("model", "DiffusersBackend runs the model each request names, so it takes none.",
                                  "choose it in the request: GenerationRequest(profile='nano') or "
                                  f"GenerationRequest(..., model={model!r}).")
        self.device, self.dtype, self.device_map, self.token = device, dtype, device_map, token
        self.progress, self.scheduler, self.safety_checker, self.fast = progress, scheduler, safety_checker, fast
        self.memory_kwargs = {k: v for k, v in dict(memory=memory, offload=offload, vae_tiling=vae_tiling,
                                                    fp8=fp8).items() if v is not None}
        self.memory: MemorySettings | None = resolve_memory(
            **self.memory_kwargs, device_map=device_map, fast=fast,
            device=device if device or not self.memory_kwargs.get("memory") else self._device())
        self.plan = ParallelPlan.build(gpus, cfg_parallel=cfg_parallel, ulysses=ulysses)
        self.worker_timeout = worker_timeout
        self._workers = None
        if self.plan.parallel:
            self.plan.check_placement(device, device_map)
        if isinstance(fast, FastOptions):
            from ..fast.attention import check_backend  # imports torch: only when options are given

            check_backend(fast.attention)
        if self.plan.ulysses > 1 and isinstance(fast, FastOptions) and (fast.batch_cfg or fast.cuda_graphs):
            name = "batch_cfg" if fast.batch_cfg else "cuda_graphs"
            raise ValidationError("fast", f"FastOptions({name}=True) cannot run under ulysses={self.plan.ulysses}: "
                                  "each worker holds a share of the tokens and exchanges them every layer, so branches "
                                  "are not batched and passes are not graphed there.",
                                  f"leave {name} unset, or use ulysses=1.")
        if self.plan.cfg_parallel > 1 and isinstance(fast, FastOptions) and fast.batch_cfg:
            raise ValidationError("fast", "FastOptions(batch_cfg=True) runs both guidance branches on one GPU, and "
                                  "cfg_parallel=2 runs them on two.", "leave batch_cfg unset, or use cfg_parallel=1.")

    def __repr__(self) -> str:
        extra = f", gpus={self.plan.gpus}" if self.plan.parallel else ""
        extra += f", memory={self.memory.preset!r}" if self.memory and self.memory.preset else ""
        return f"DiffusersBackend(device={self._device()!r}, fast={bool(self.fast)}{extra})"

    # Loading ----------------------------------------------------------------------------------------

    def _device(self) -> str:
        if self.device:
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _dtype(self):
        import torch

        if self.dtype is None:
            return torch.bfloat16 if self._device().startswith("cuda") else torch.float32
        return getattr(torch, self.dtype) if isinstance(self.dtype, str) else self.dtype

    def pipeline(self, model: str | None = None):
        """The loaded ``Cosmos3OmniPipeline`` for ``model`` (default: the default profile's), shared by every
        backend of this device and dtype."""
        return self._loaded(model_for(model=model)).pipe

    @contextlib.contextmanager
    def borrowed(self, model: str | None = None) -> Iterator[Any]:
        """The shared pipeline for ``model``, held under its lock for a caller that changes state on it for one call
        (transfer's attention processors): no other call runs on it meanwhile."""
        loaded = self._loaded(model_for(model=model))
        with loaded.lock:
            yield loaded.pipe

    def _loaded(self, model: str) -> _Loaded:
        key = (str(model), self._device(), str(self._dtype()), repr(self.device_map), type(self)._load,
               self.memory.key() if self.memory else None)
        with _PIPELINES_LOCK:
            loaded = _PIPELINES.get(key)
            if loaded is None:
                for other in [k for k in _PIPELINES if k[0] != key[0]]:
                    del _PIPELINES[other]  # one model at a time: a second one would not fit next to Nano
                _collect_garbage()
                loaded = _PIPELINES[key] = _Loaded(_guided(self._fitted(self._load(str(model)))))
        return loaded

    def _load(self, model: str):
        try:
            import torch  # noqa: F401
            from diffusers.utils import logging as diffusers_logging
        except ImportError as exc:
            raise BackendUnavailableError(
                f"the Diffusers backend needs torch and diffusers>=0.42.1 ({exc}); "
                "install with `pip install -e .` from the repository.") from exc
        diffusers_logging.set_verbosity_error()
        diffusers_logging.disable_progress_bar()
        kwargs: dict[str, Any] = {"dtype": self._dtype(), "enable_safety_checker": False}
        if self.device_map is not None:  # whatever the user gave, even empty: then the pipeline is not moved
            kwargs["device_map"] = self.device_map
        if self.token:
            kwargs["token"] = self.token
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
                if distilled.is_distilled_model(model):
                    kwargs.pop("enable_safety_checker")
                    pipe = distilled.load(_resolve_source(model), **kwargs)
                else:
                    pipe = pipeline_class().from_pretrained(_resolve_source(model), **kwargs)
        except OSError as exc:
            raise BackendUnavailableError(
                f"could not load {model!r} ({exc}). A hub id needs network access to the Hugging Face hub and, "
                "for nvidia/Cosmos3-*, an accepted license and HF_TOKEN; on an offline machine use profile 'tiny' "
                "or a local folder holding the checkpoint.") from exc
        if self.device_map is None and self.memory is None:  # with memory settings, _fitted places it
            pipe = pipe.to(self._device())
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def _fitted(self, pipe):
        """Install the memory settings (planned for this transformer's size) on a freshly loaded pipeline."""
        if self.memory is None:
            return pipe
        weights = sum(p.numel() * p.element_size() for p in pipe.transformer.parameters())
        pipe._cosmos_memory = apply_memory(pipe, plan_memory(self.memory, weights, fast=self.fast), self._device())
        return pipe

    # Multi-GPU --------------------------------------------------------------------------------------

    worker_builder: str | None = None  # "module:function" building the pipeline in each worker (benchmarks)
    worker_builder_kwargs: dict[str, Any] = {}

    def _worker_group(self):
        """The running worker group of this backend, started on first use (or again after a failure)."""
        from ..parallel.workers import WorkerGroup

        if self._workers is not None and self._workers.alive:
            return self._workers
        dtype = self._dtype()
        spec = {"device": "cuda" if self._device().startswith("cuda") else "cpu",
                "dtype": str(dtype).replace("torch.", ""), "fast": self.fast, "memory_kwargs": self.memory_kwargs,
                "scheduler": self.scheduler, "token": self.token,
                "builder": self.worker_builder, "builder_kwargs": dict(self.worker_builder_kwargs)}
        self._workers = WorkerGroup(self.plan, spec, step_timeout=self.worker_timeout).start()
        return self._workers

    def close(self) -> None:
        """Stop this backend's worker processes (multi-GPU); a later call starts them again."""
        if self._workers is not None:
            self._workers.stop()
            self._workers = None

    def _check_heads(self, model: str) -> None:
        """Refuse a Ulysses degree that the model's heads cannot be split by before starting any worker, when the
        model's config is on disk (tiny, a local folder); otherwise each worker checks it after loading."""
        import json

        if self.plan.ulysses == 1 or self.worker_builder is not None:
            return
        source = Path(_resolve_source(model))
        config = source / "transformer" / "config.json"
        if config.is_file():
            self.plan.check_model(json.loads(config.read_text()))

    def _generate_parallel(self, request: GenerationRequest, progress: ProgressCallback | None) -> Generation:
        self.plan.check_request(request)
        self._check_heads(request.model)
        started = time.perf_counter()
        checker = self._prompt_checked(request)
        bar = progress_bar(request.num_inference_steps, f"{request.mode} denoising on {self.plan.gpus} GPUs", "step",
                           enabled=self.progress)

        def on_step(step: int, total: int) -> None:
            if bar is not None:
                bar.update(step - bar.n)
            if progress is not None:
                progress(step, total)

        try:
            group = self._worker_group()
            start_s = time.perf_counter() - started
            generation = group.generate(request.replace(guardrails=False), on_step)
        finally:
            if bar is not None:
                bar.close()
        generation.request = request
        generation.timings.update(workers_start_s=start_s, total_s=time.perf_counter() - started)
        return self._checked_video(generation, checker)

    # Generation -------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Run one request. ``progress(step, total)`` is called after every denoising step."""
        check_backend_mode(request, self.name)
        check_request_cache(request.step_cache, gpus=self.plan.gpus)
        if distilled.is_distilled_model(request.model):
            if self.plan.parallel:
                raise ValidationError("gpus", f"the distilled few-step path runs in this process, on one GPU "
                                      f"(gpus={self.plan.gpus} was given).",
                                      "use DiffusersBackend(gpus=1) for a distilled model.")
            distilled.check_request(request, scheduler=self.scheduler, fast=self.fast)
            return self._generate_distilled(request, progress)
        distilled.check_base_request(request)
        if self.scheduler is not None:  # a scheduler the request cannot go with is refused before loading
            configure_scheduler({}, self.scheduler, request.flow_shift, shift_given=request.explicit("flow_shift"))
        if request.mode == "image2image":
            return self._generate_edit(request, progress)
        if self.plan.parallel:
            return self._generate_parallel(request, progress)
        started = time.perf_counter()
        checker = self._prompt_checked(request)
        load_start = time.perf_counter()
        loaded = self._loaded(request.model)
        load_s = time.perf_counter() - load_start
        kwargs = self.pipeline_kwargs(request)
        with loaded.lock, self._lease(loaded.pipe, request) as pipe:
            with call_cache(pipe.transformer, request.step_cache, _fast_forward(pipe, self.fast)) as cache:
                output, marks, call_start = self._denoise(pipe, request, kwargs, progress)
            provenance = {"device": str(pipe.device), "dtype": str(pipe.transformer.dtype),
                          **({"memory": pipe._cosmos_memory} if hasattr(pipe, "_cosmos_memory") else {}),
                          "scheduler": type(pipe.scheduler).__name__, "fast": bool(self.fast),
                          "timesteps": [round(float(t), 3) for t in pipe.scheduler.timesteps],
                          **cache.provenance()}
            sample_rate = _sample_rate(pipe)
        end = time.perf_counter()
        generation = Generation(
            frames=_frames(output.video), fps=request.fps, seed=request.seed, request=request,
            sound=_sound(output, request), sample_rate=sample_rate, backend=self.name, model=request.model,
            timings=_timings(started, load_s, call_start, marks, end), provenance=provenance,
            actions=diffusers_action.predicted_actions(output, request))
        return self._checked_video(generation, checker)

    def _generate_distilled(self, request: GenerationRequest, progress: ProgressCallback | None) -> Generation:
        """A few-step checkpoint: its own fixed schedule, no guidance, no sound (``backends.distilled``)."""
        return self._own_loop(request, progress, "distilled", distilled.denoise, lent=False,
                              provenance={"fast": False, "distilled": True})

    def _generate_edit(self, request: GenerationRequest, progress: ProgressCallback | None) -> Generation:
        """Image editing: the framework's edit batch on the pipeline's transformer (``backends.diffusers_edit``)."""
        if self.plan.parallel:
            raise ValidationError("gpus", f"image2image runs in this process, on one GPU (gpus={self.plan.gpus} was "
                                  "given).", "use DiffusersBackend(gpus=1) for image editing.")
        if self.fast:
            raise ValidationError("fast", "the fast path is built for the pipeline's own loop, not the edit loop.",
                                  "use DiffusersBackend(fast=False) for image editing.")
        return self._own_loop(request, progress, "edit", diffusers_edit.edit, lent=True,
                              provenance={"fast": False, "edit": True})

    def _own_loop(self, request: GenerationRequest, progress: ProgressCallback | None, what: str, run, *,
                  lent: bool, provenance: dict[str, Any]) -> Generation:
        """Run ``run(pipe, request, on_step) -> (frames, timesteps)`` under the pipeline's lock (with this backend's
        scheduler and guidance interval lent when ``lent``), with the guardrails, bar, callback and timings of
        :meth:`generate`."""
        started = time.perf_counter()
        checker = self._prompt_checked(request)
        loaded = self._loaded(request.model)
        load_s = time.perf_counter() - started
        total, marks = request.num_inference_steps, []
        bar = progress_bar(total, f"{request.mode} denoising ({what})", "step", enabled=self.progress)

        def on_step(_index: int) -> None:
            marks.append(time.perf_counter())
            if bar is not None:
                bar.update(1)
            if progress is not None:
                progress(len(marks), total)

        call_start = time.perf_counter()
        try:
            with loaded.lock, guardrail_errors():
                with self._lease(loaded.pipe, request) if lent else contextlib.nullcontext(loaded.pipe) as pipe:
                    with call_cache(pipe.transformer, request.step_cache) as cache:
                        frames, timesteps = run(pipe, request, on_step)
                    provenance = {"device": str(pipe.device), "dtype": str(pipe.transformer.dtype),
                                  "scheduler": type(pipe.scheduler).__name__, **provenance, "timesteps": timesteps,
                                  **cache.provenance()}
        finally:
            if bar is not None:
                bar.close()
        generation = Generation(
            frames=_frames(frames), fps=request.fps, seed=request.seed, request=request, sound=None,
            sample_rate=SOUND_SAMPLE_RATE, backend=self.name, model=request.model,
            timings=_timings(started, load_s, call_start, marks, time.perf_counter()), provenance=provenance)
        return self._checked_video(generation, checker)

    def _prompt_checked(self, request: GenerationRequest):
        """The guardrail checker for ``request`` (``None`` without guardrails), once its prompt has passed."""
        checker = self.guardrail_checker(bool(request.guardrails))
        if checker is not None and not checker.check_text_safety(request.prompt_text()):
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        return checker

    def output_settings(self) -> dict[str, Any]:
        """What, besides the request, shapes this backend's outputs, so that a rerun with other settings is not
        taken for finished work: the dtype, a scheduler of the user's, and the memory settings that change the
        numbers (FP8 weights, VAE tiling; offloading only moves them)."""
        scheduler = self.scheduler
        if scheduler is not None and not isinstance(scheduler, type):
            scheduler = {type(scheduler).__name__: {k: v for k, v in scheduler.config.items() if not k.startswith("_")}}
        return {"dtype": str(self._dtype()).replace("torch.", ""),
                "scheduler": scheduler.__name__ if isinstance(scheduler, type) else scheduler,
                **{k: v for k, v in self.memory_kwargs.items() if k != "offload"}}

    def _checked_video(self, generation: Generation, checker) -> Generation:
        generation.settings = self.output_settings()
        if checker is not None:
            checked = checker.check_video_safety(generation.frames)
            if checked is None:
                raise GuardrailError("the Cosmos guardrails blocked the generated video.")
            generation.frames = np.asarray(checked, dtype=np.uint8)
        return generation

    def pipeline_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        """The exact ``Cosmos3OmniPipeline.__call__`` arguments for a request (no generator/callback).

        Options left to the backend's default are not passed. A structured caption already carries its
        metadata (``request.prompt_text()``), so the sentence templates are off for it, as on the other backends.
        """
        if request.is_action:
            return diffusers_action.call_kwargs(request)
        kwargs: dict[str, Any] = dict(
            prompt=request.prompt_text(), negative_prompt=request.negative_prompt_text(),
            num_frames=request.num_frames, height=request.height, width=request.width, fps=request.fps,
            num_inference_steps=request.num_inference_steps, guidance_scale=request.guidance_scale,
            enable_sound=bool(request.sound), enable_safety_check=False)
        if request.use_system_prompt is not None:
            kwargs["use_system_prompt"] = request.use_system_prompt
        for name in ("add_resolution_template", "add_duration_template"):
            if request.is_structured:
                kwargs[name] = False
            elif getattr(request, name) is not None:
                kwargs[name] = getattr(request, name)
        if request.mode == "image2video":
            kwargs["image"] = request.conditioning_image()
        elif request.mode == "video2video":
            frames = media.fit_to_bucket(request.conditioning_video(), request.width, request.height)
            kwargs["video"] = [media.load_image(frame) for frame in frames]
            if request.condition_frames is not None:  # else the pipeline's own default
                kwargs["condition_frame_indexes_vision"] = list(request.condition_frames)
            if request.condition_video_keep is not None:
                kwargs["condition_video_keep"] = request.condition_video_keep
        return kwargs

    @contextlib.contextmanager
    def _lease(self, pipe, request: GenerationRequest) -> Iterator[Any]:
        """Lend the shared pipeline this backend's scheduler, fast-path switch and guidance interval for one call."""
        scheduler, interval = pipe.scheduler, getattr(pipe, "guidance_interval", None)
        pipe.scheduler = configure_scheduler(scheduler.config, self.scheduler, request.flow_shift,
                                             shift_given=request.explicit("flow_shift"))
        pipe.guidance_interval = request.guidance_interval
        if self.fast:  # installed once, at rest switched off: the shared pipeline runs stock code for the others
            enable_fast_path(pipe, self.fast if isinstance(self.fast, FastOptions) else None, active=False)
        try:
            with fast_path_active(pipe, bool(self.fast)):  # without a fast path installed: nothing to switch
                yield pipe
        finally:
            pipe.scheduler, pipe.guidance_interval = scheduler, interval

    def _denoise(self, pipe, request: GenerationRequest, kwargs: dict, progress: ProgressCallback | None):
        import torch

        marks: list[float] = []
        bar = progress_bar(request.num_inference_steps, f"{request.mode} denoising", "step", enabled=self.progress)

        def on_step(_pipe, step, _timestep, callback_kwargs):
            marks.append(time.perf_counter())
            if bar is not None:
                bar.update(1)
            if progress is not None:
                progress(step + 1, request.num_inference_steps)
            return callback_kwargs  # diffusers pops "latents" from what we return

        # the fast path converts to uint8 on the GPU (same values; a quarter of the bytes to copy)
        on_device = bool(self.fast) and pipe.device.type == "cuda"
        call_start = time.perf_counter()
        try:
            with guardrail_errors(), torch.inference_mode():
                output = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed),
                              callback_on_step_end=on_step, output_type="pt" if on_device else "np",
                              return_dict=True)
                if on_device:
                    from ..fast.frames import video_to_host_uint8

                    output.video = video_to_host_uint8(output.video)
        finally:
            if bar is not None:
                bar.close()
        return output, marks, call_start

    def guardrail_checker(self, guardrails: bool = True):
        """The Cosmos guardrail checker this backend's generations use (loaded once), or ``None`` when
        ``guardrails`` is off; other in-process workflows (audio) check their prompt and video with the same one."""
        if not guardrails:
            return None
        if self.safety_checker is not None:
            return self.safety_checker
        from diffusers.utils import is_cosmos_guardrail_available

        if not is_cosmos_guardrail_available():
            raise BackendUnavailableError(GUARDRAIL_HELP)
        from cosmos_guardrail import CosmosSafetyChecker

        self.safety_checker = CosmosSafetyChecker()
        return self.safety_checker


@contextlib.contextmanager
def guardrail_errors() -> Iterator[None]:
    """diffusers reports a guardrail block as a ``ValueError``; callers get a :class:`GuardrailError`."""
    try:
        yield
    except ValueError as exc:
        if "Guardrail" in str(exc):
            raise GuardrailError(str(exc)) from exc
        raise


@functools.lru_cache(maxsize=None)
def pipeline_class() -> type:
    """``Cosmos3OmniPipeline`` with a guidance interval: classifier-free guidance only while ``lo <= t <= hi``.

    diffusers 0.42.1 has no interval (vLLM-Omni applies ``[400, 1000]`` to images by default). The pipeline
    asks ``do_classifier_free_guidance`` before each step's negative pass, after setting ``_current_timestep``;
    answering "no" outside the interval skips that pass and uses the conditional prediction, as vLLM-Omni does.
    """
    from diffusers import Cosmos3OmniPipeline

    class Cosmos3GuidedPipeline(Cosmos3OmniPipeline):
        guidance_interval: tuple[float, float] | None = None

        @property
        def do_classifier_free_guidance(self) -> bool:
            interval, t = self.guidance_interval, self._current_timestep
            inside = interval is None or t is None or interval[0] <= float(t) <= interval[1]
            return self._guidance_scale != 1.0 and inside

    return Cosmos3GuidedPipeline


def _guided(pipe):
    """Give a pipeline built elsewhere (a test's or a benchmark's) the guidance interval too."""
    cls = pipeline_class()
    if not isinstance(pipe, cls) and isinstance(pipe, cls.__mro__[1]):
        pipe.__class__ = cls
    return pipe


def free_pipeline() -> None:
    """Drop every loaded pipeline and return its memory (GPU included) before loading another model."""
    with _PIPELINES_LOCK:
        _PIPELINES.clear()
    _collect_garbage()


def _collect_garbage() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _resolve_source(model: str) -> str:
    if model == "tiny":
        return str(trained_tiny_path())
    if model == TINY_DISTILLED:
        return str(tiny_distilled_path())
    if model == TINY_EDGE:
        return str(tiny_edge_path())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "model_index.json").is_file() and not (path / DISTILLED_INDEX).is_file():
            raise ValidationError("model", f"{path} has no model_index.json, so it is not a diffusers checkpoint.",
                                  "point at the folder that holds model_index.json, or use a hub id / 'tiny'.")
        return str(path)
    if "/" not in model:
        raise ValidationError("model", f"{model!r} is neither 'tiny', an existing folder, nor a hub id (owner/name).",
                              "use 'tiny', e.g. 'nvidia/Cosmos3-Nano', or a local checkpoint folder.")
    return model


def _fast_forward(pipe, fast) -> Any:
    """The installed fast forward when this call runs the fast path (it counts its own computed passes)."""
    state = getattr(pipe, "_cosmos_fast", None)
    return state.forward if fast and state is not None else None


def _frames(video: Any) -> np.ndarray:
    frames = np.asarray(video)
    return frames[0] if frames.ndim == 5 else frames


def _sound(output: Any, request: GenerationRequest) -> np.ndarray | None:
    if not request.sound or output.sound is None:
        return None
    sound = output.sound.float().cpu().numpy()
    return sound[0] if sound.ndim == 3 else sound


def _sample_rate(pipe) -> int:
    tokenizer = getattr(pipe, "sound_tokenizer", None)
    return int(tokenizer.config.get("sampling_rate", SOUND_SAMPLE_RATE)) if tokenizer is not None else SOUND_SAMPLE_RATE


def _timings(started: float, load_s: float, call_start: float, marks: list[float], end: float) -> dict[str, float]:
    timings = {"load_s": load_s, "total_s": end - started, "pipeline_s": end - call_start}
    if marks:
        timings.update(first_step_s=marks[0] - call_start, denoise_s=marks[-1] - call_start, decode_s=end - marks[-1])
        if len(marks) > 1:
            timings["step_s"] = (marks[-1] - marks[0]) / (len(marks) - 1)
    return timings
