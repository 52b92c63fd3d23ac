"""``DiffusersBackend``: Cosmos3 in the notebook's own process through ``diffusers.Cosmos3OmniPipeline``, on weights
loaded once per model, device and dtype and shared by every backend (:mod:`.loading`); what differs between backends
is lent to the pipeline for one call (:mod:`.runner`). ``gpus=N`` runs each call on N worker processes.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any, Iterator

from ... import media
from ...errors import ValidationError
from ...fast import FastOptions
from ...limits import check_backend_mode
from .parallel.plan import ParallelPlan
from ...precision import FP8
from ...presets import model_for
from ...protocol import action as ap, framework as fw
from ...protocol.fp8 import REVISION
from ...request import GenerationRequest
from ...result import FinishedFile, Generation
from ...schedules import configure_scheduler
from ...specs.resolve import ResolvedSample
from ...specs.runs import SampleRun, SampleSupport, generation_request
from ...step_cache import SeaCache, check_for_backend
from ..base import Backend, ProgressCallback
from ..memory import MemorySettings, apply_memory, plan_memory, resolve_memory
from . import distilled, modelopt_fp8
from .loading import SHARED, Builder, Loaded, load_pipeline, resolve_source
from .runner import CallRun, Guardrails, StepClock, loop_for

NAME = "diffusers"


class DiffusersBackend(Backend):
    """Generate with diffusers in-process; the model is the request's (``GenerationRequest(profile=..., model=...)``).

    Args:
        device: ``"cuda"``, ``"cpu"``, ...; default CUDA when available.
        dtype: ``"bfloat16"``/``"float32"``/a torch dtype; default bf16 on CUDA, fp32 on CPU.
        fast: run through ``cosmos_helpers.fast`` (same outputs, less work per step). ``True`` uses the defaults; a
            ``FastOptions`` picks switches, e.g. ``FastOptions(compile=False)`` to skip kernel compilation.
        gpus, cfg_parallel, ulysses: GPUs per call (default 1: in this process), a worker process each:
            ``cfg_parallel=2`` runs the two guidance branches on two GPU groups (vLLM-Omni's ``--cfg-parallel-size``),
            ``ulysses`` splits each pass's tokens over that many (``--ulysses-degree``); ``gpus=4`` alone is 2 x 2.
        memory: the card size to fit, ``"24GB"``, ``"48GB"`` or ``"80GB"`` (offloading and VAE tiling, chosen for the
            model's size); ``offload`` (``"group"``, ``"model"``, ``False``), ``vae_tiling`` and ``weight_storage``
            (``"fp8"``: weights stored in FP8, computed in bf16) are explicit settings, which win over ``memory``.
            NVIDIA's FP8 checkpoint is the request's ``precision="fp8"``; ``fp8=`` is refused (renamed).
        scheduler: a diffusers flow-matching scheduler class or instance to use instead of flow UniPC.
        progress: show a denoising progress bar (tqdm.auto: a widget in Jupyter, text under papermill).
        safety_checker: as :class:`~.runner.Guardrails` takes; default ``CosmosSafetyChecker`` (when requested).
        token: a Hugging Face token for gated hub checkpoints.
        device_map: passed to ``from_pretrained`` for multi-GPU hosts (then the pipeline is not moved).
        builder: a :class:`~.loading.Builder` that makes the pipeline instead of loading the request's model
            (random weights at real shapes, for benchmarks).
        worker_timeout: seconds a multi-GPU call may go without a word from its workers (model load included).
    """

    name = NAME

    def __init__(self, *, device: str | None = None, dtype: Any = None, fast: bool | FastOptions = False,
                 gpus: int | None = None, cfg_parallel: int | None = None, ulysses: int | None = None,
                 memory: str | None = None, offload: str | bool | None = None, vae_tiling: bool | None = None,
                 weight_storage: str | None = None, scheduler: Any = None, progress: bool = True,
                 safety_checker: Any = None, token: str | None = None, device_map: str | dict | None = None,
                 builder: Builder | None = None, worker_timeout: float = 1800.0, fp8: Any = None) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self.fast, self.scheduler, self.progress, self.token = fast, scheduler, progress, token
        self.device_map, self.builder, self.worker_timeout = device_map, builder, worker_timeout
        self.guardrails = Guardrails(safety_checker)
        self.memory_kwargs = {k: v for k, v in dict(memory=memory, offload=offload, vae_tiling=vae_tiling,
                                                    weight_storage=weight_storage).items() if v is not None}
        self.memory: MemorySettings | None = resolve_memory(**self.memory_kwargs, device_map=device_map, fast=fast,
                                                            device=self.device, fp8=fp8)
        self.plan = ParallelPlan.build(gpus, cfg_parallel=cfg_parallel, ulysses=ulysses)
        self._workers = None
        _check_options(self.plan, fast, device, device_map)

    def __repr__(self) -> str:
        extra = f", gpus={self.plan.gpus}" if self.plan.parallel else ""
        extra += f", memory={self.memory.preset!r}" if self.memory and self.memory.preset else ""
        return f"DiffusersBackend(device={self.device!r}, fast={bool(self.fast)}{extra})"

    # 1. What this backend refuses, before any work ----------------------------------------------------------------

    def check(self, request: GenerationRequest) -> None:
        request = request.resolve()
        check_backend_mode(request, self.name)
        check_for_backend(request.step_cache, self.name)
        if isinstance(request.step_cache, SeaCache) and self.plan.parallel:  # neither plan is wired to its gate
            raise ValidationError("step_cache", f"DiffusersBackend(gpus={self.plan.gpus}) does not run SeaCache: its "
                                  "workers compute guidance branches and token shares outside the per-branch cache "
                                  "state SeaCache keeps.", "use DiffusersBackend(gpus=1) with step_cache, or leave "
                                  "step_cache out on several GPUs.")
        is_distilled = distilled.check_request(request, scheduler=self.scheduler, fast=self.fast, gpus=self.plan.gpus)
        modelopt_fp8.check_request(request, fast=self.fast, weight_storage=self.memory and self.memory.weight_storage,
                                   gpus=self.plan.gpus, distilled=is_distilled)
        if is_distilled:
            return
        if self.scheduler is not None:  # a scheduler the request cannot go with is refused before loading
            configure_scheduler({}, self.scheduler, request.flow_shift, shift_given="flow_shift" in request.given)
        if request.mode == "image2image":
            if self.plan.parallel:
                raise ValidationError("gpus", f"image2image runs in this process, on one GPU (gpus={self.plan.gpus} "
                                      "was given).", "use DiffusersBackend(gpus=1) for image editing.")
            if self.fast:
                raise ValidationError("fast", "the fast path is built for the pipeline's own loop, not the edit loop.",
                                      "use DiffusersBackend(fast=False) for image editing.")
        if self.plan.parallel:
            self.plan.check_request(request)
            self._check_heads(request.model)

    # 2. Generation --------------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Run one request. ``progress(step, total)`` is called after every denoising step."""
        request = request.resolve()
        self.check(request)  # 1. every refusal, before any work
        if self.plan.parallel:  # 2. the call: on the worker processes, or the call's steps here (CallRun.run)
            generation = self._generate_on_workers(request, progress)
        else:
            generation = CallRun(self, request, progress).run()
        generation.settings = self.output_settings()  # 3. what else shaped the outputs
        return generation

    def pipeline_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        """The exact arguments the call for ``request`` passes to the pipeline (no generator or callback)."""
        request = request.resolve()
        return loop_for(request).call_kwargs(request)

    def output_settings(self) -> dict[str, Any]:
        """What besides the request shapes the outputs (a rerun with other settings is not taken for finished work):
        the dtype, a user's scheduler, the memory settings that change numbers (offloading only moves them)."""
        scheduler = self.scheduler
        if scheduler is not None and not isinstance(scheduler, type):
            scheduler = {type(scheduler).__name__: {k: v for k, v in scheduler.config.items() if not k.startswith("_")}}
        return {"dtype": str(self.dtype).replace("torch.", ""),
                "scheduler": scheduler.__name__ if isinstance(scheduler, type) else scheduler,
                **{k: v for k, v in self.memory_kwargs.items() if k != "offload"}}

    # 3. The shared pipeline ---------------------------------------------------------------------------------------

    def pipeline(self, model: str | None = None):
        """The loaded pipeline for ``model`` (default: the default profile's), shared by every backend alike."""
        return self._loaded(model_for(model=model)).pipe

    @contextlib.contextmanager
    def borrowed(self, model: str | None = None) -> Iterator[Any]:
        """The shared pipeline for ``model`` under its lock, for a caller that changes its state for one call."""
        loaded = self._loaded(model_for(model=model))
        with loaded.lock:
            yield loaded.pipe

    def _loaded(self, model: str, precision: Any = None) -> Loaded:
        """The shared entry of ``model`` (at the revision ``precision`` names: the FP8 weights are another model)."""
        name = f"{model}@{REVISION}" if isinstance(precision, FP8) else str(model)
        key = (name, self.device, str(self.dtype), repr(self.device_map), repr(self.builder),
               self.memory.key() if self.memory else None)
        return SHARED.get(key, lambda: self._load(str(model), precision))

    def _load(self, model: str, precision: Any = None) -> Loaded:
        """Load (or build) the pipeline and place it: moved to the device, or fitted by the memory settings."""
        pipe = self.builder(self.device, self.dtype) if self.builder is not None else load_pipeline(
            model, dtype=self.dtype, device_map=self.device_map, token=self.token, precision=precision)
        pipe.set_progress_bar_config(disable=True)
        gemm = modelopt_fp8.place(pipe, self.device) if isinstance(precision, FP8) else None
        if self.memory is not None:
            weights = sum(p.numel() * p.element_size() for p in pipe.transformer.parameters())
            return Loaded(pipe, apply_memory(pipe, plan_memory(self.memory, weights, fast=self.fast), self.device),
                          w8a8_gemm=gemm)
        if self.device_map is None:
            pipe = pipe.to(self.device)
        return Loaded(pipe, w8a8_gemm=gemm)

    # 4. Several GPUs: the same request on worker processes --------------------------------------------------------

    def _worker_group(self):
        """The running worker group, started on first use (or again after a failure)."""
        from .parallel.workers import WorkerGroup

        if self._workers is not None and self._workers.alive:
            return self._workers
        spec = {"device": "cuda" if self.device.startswith("cuda") else "cpu",
                "dtype": str(self.dtype).replace("torch.", ""), "fast": self.fast, "memory_kwargs": self.memory_kwargs,
                "scheduler": self.scheduler, "token": self.token, "builder": self.builder}
        self._workers = WorkerGroup(self.plan, spec, step_timeout=self.worker_timeout).start()
        return self._workers

    # 5. Framework input samples (run_spec): a request, or a transfer or audio_image2video sample's own loop ---------

    sample_support = SampleSupport(transfer=True, sound_conditioning=True, action_domains=ap.DIFFUSERS_RAW_DIM,
                                   always_shares_positions=True)

    def check_sample(self, sample: Any, r: Any, given: set[str], step_cache: Any = None) -> None:
        """As a request, with the run's step cache and the backend's scheduler checked against it."""
        super().check_sample(sample, r, given)
        check_for_backend(step_cache, self.name)  # not the gpus check: transfer samples run in this process
        if step_cache is not None and r.model_mode in fw.SOUND_CONDITION_MODES:
            raise ValidationError("step_cache", f"the experimental {r.model_mode} loop on diffusers runs every step: "
                                  "it has no step cache.", "leave step_cache out (--step-cache), or run the sample "
                                  "on the framework.")
        _check_sample_scheduler(self.scheduler, r, given)

    def run_sample(self, run: SampleRun, *, progress: Any = True, server_paths: bool = False) -> Generation:
        """The output of a checked sample run (a callable ``progress`` gets the steps), as the framework saves it."""
        r = run.resolved
        if r.is_transfer:
            from .transfer import run_transfer  # OpenCV and the modular blocks load on first use

            generation = run_transfer(r, backend=self, progress=progress, step_cache=run.step_cache)
        elif r.model_mode in fw.SOUND_CONDITION_MODES:
            from .audio import run_audio_sample  # scipy and the sound tokenizer load on first use

            generation = run_audio_sample(r, backend=self, progress=progress)
        else:
            request = generation_request(r, run.given, run.step_cache)
            generation = self.generate(request, progress=progress if callable(progress) else None)
        return framework_file(generation, r)

    def close(self) -> None:
        """Stop this backend's worker processes (multi-GPU); a later call starts them again."""
        if self._workers is not None:
            self._workers.stop()
            self._workers = None

    def _check_heads(self, model: str) -> None:
        """A Ulysses degree the model's heads cannot be split by, refused here when its config is on disk (tiny, a
        local folder); otherwise each worker checks it after loading."""
        if self.plan.ulysses == 1 or self.builder is not None:
            return
        config = Path(resolve_source(model)) / "transformer" / "config.json"
        if config.is_file():
            self.plan.check_model(json.loads(config.read_text()))

    def _generate_on_workers(self, request: GenerationRequest, progress: ProgressCallback | None) -> Generation:
        started = time.perf_counter()
        checker = self.guardrails.check_prompt(bool(request.guardrails), request.prompt_text())
        with StepClock(request.num_inference_steps, f"{request.mode} denoising on {self.plan.gpus} GPUs",
                       bar=self.progress, callback=progress) as clock:
            group = self._worker_group()
            start_s = time.perf_counter() - started
            generation = group.generate(request.replace(guardrails=False), lambda step, _total: clock.step(step))
        generation.request = request
        generation.timings.update(workers_start_s=start_s, total_s=time.perf_counter() - started)
        generation.frames = self.guardrails.check_frames(checker, generation.frames)
        return generation


def _check_options(plan: ParallelPlan, fast: Any, device: str | None, device_map: Any) -> None:
    """The backend's own options that cannot go together, refused when it is made."""
    if plan.parallel:
        plan.check_placement(device, device_map)
    if not isinstance(fast, FastOptions):
        return
    from ...fast.attention import check_backend  # imports torch: only when options are given

    check_backend(fast.attention)
    if plan.ulysses > 1 and (fast.batch_cfg or fast.cuda_graphs):
        name = "batch_cfg" if fast.batch_cfg else "cuda_graphs"
        raise ValidationError("fast", f"FastOptions({name}=True) cannot run under ulysses={plan.ulysses}: each worker "
                              "holds a share of the tokens and exchanges them every layer, so branches are not batched "
                              "and passes are not graphed there.", f"leave {name} unset, or use ulysses=1.")
    if plan.cfg_parallel > 1 and fast.batch_cfg:
        raise ValidationError("fast", "FastOptions(batch_cfg=True) runs both guidance branches on one GPU, and "
                              "cfg_parallel=2 runs them on two.", "leave batch_cfg unset, or use cfg_parallel=1.")


def _check_sample_scheduler(scheduler: Any, r: ResolvedSample, given: set[str]) -> None:
    """The backend's scheduler against the sample: transfer and audio samples run the framework's own sampler (it
    would be left unused while the manifest named it); a scheduler instance must share a generation sample's shift
    (the framework's default where it sets none)."""
    if scheduler is None:
        return
    if r.is_transfer or r.model_mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError("scheduler", f"a {r.model_mode} sample runs the framework's own sampler (flow UniPC "
                              "at the sample's shift) on diffusers; the backend's scheduler would not be used.",
                              "run it on a DiffusersBackend made without scheduler=.")
    if isinstance(scheduler, type) or distilled.is_distilled_model(r.model):
        return  # a class takes the sample's shift; the distilled path refuses any scheduler itself
    try:
        configure_scheduler({}, scheduler, r.shift, shift_given=True)
    except ValidationError as error:
        if error.field != "flow_shift":
            raise
        whose = "the sample's shift" if "shift" in given else "the framework's default shift for this sample"
        raise ValidationError("shift", f"{whose} is {r.shift:g}, and the backend's scheduler instance was built "
                              "with another.", "set shift in the sample to the scheduler's, or build the "
                              "scheduler with this shift.") from None


def framework_file(generation: Generation, r: ResolvedSample) -> Generation:
    """Save an in-process result as the framework saves it: ``vision.jpg`` at ``image_save_quality``, ``vision.mp4``
    at the CRF its ``video_save_quality`` gives (``protocol.framework.video_crf``)."""
    if generation.is_image:
        data = media.image_bytes(generation.frames[0], "JPEG", quality=r.image_save_quality)
        generation.finished = FinishedFile(".jpg", data=data)
    else:
        generation.crf = fw.video_crf(r.video_save_quality)
    return generation
