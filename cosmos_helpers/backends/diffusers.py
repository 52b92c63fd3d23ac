"""``DiffusersBackend``: Cosmos3 in the notebook's own process through ``diffusers.Cosmos3OmniPipeline``.

Loads ``"tiny"`` (the embedded model), a hub id such as ``nvidia/Cosmos3-Nano`` or a local folder; picks
bf16 on CUDA and fp32 on CPU; installs a flow-matching scheduler with the request's shift on every call
(the published scheduler uses Karras sigmas, under which ``flow_shift`` silently does nothing); shows
denoising progress; keeps one pipeline loaded and frees it when the model changes.
"""

from __future__ import annotations

import gc
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import BackendUnavailableError, GuardrailError, ValidationError

if TYPE_CHECKING:
    from ..fast import FastOptions
from ..request import GenerationRequest
from ..result import Generation

ProgressCallback = Callable[[int, int], None]

GUARDRAIL_HELP = (
    "Guardrails were requested but `cosmos_guardrail` is not usable here. To run them: "
    "`pip install cosmos_guardrail` on a GPU host that can download nvidia/Cosmos-1.0-Guardrail and "
    "Qwen/Qwen3Guard-Gen-0.6B (it pulls a CUDA torch; never install it into a CPU environment). "
    "To go without: pass guardrails=False in the request (profile 'tiny' does by default)."
)


@dataclass
class _Loaded:
    key: tuple
    pipe: Any
    load_s: float


_CACHE: dict[str, _Loaded] = {}
_CACHE_LOCK = threading.Lock()


class DiffusersBackend:
    """Generate with diffusers in-process.

    Args:
        model: ``"tiny"``, a hub id (needs the hub and, for Cosmos3, accepted license + token) or a folder.
            ``None`` takes each request's model (its profile's).
        device: ``"cuda"``, ``"cpu"``, ...; default CUDA when available.
        dtype: ``"bfloat16"``/``"float32"``/a torch dtype; default bf16 on CUDA, fp32 on CPU.
        device_map: passed to ``from_pretrained`` for multi-GPU hosts (then the pipeline is not moved).
        progress: show a denoising progress bar (tqdm.auto: a widget in Jupyter, text under papermill).
        scheduler: a diffusers flow-matching scheduler class or instance to use instead of flow UniPC.
        safety_checker: an object with ``check_text_safety(str) -> bool`` and ``check_video_safety(frames)
            -> frames | None``; default: ``cosmos_guardrail.CosmosSafetyChecker`` when requested and installed.
        fast: patch the pipeline with ``cosmos_helpers.fast.enable_fast_path`` (same outputs, less work per
            step: text keys/values once per prompt, CUDA graphs, tuned kernels and fused steps on GPU). ``True``
            uses the defaults; a ``cosmos_helpers.fast.FastOptions`` picks switches, e.g.
            ``FastOptions(compile=False)`` to skip the first call's kernel compilation.
    """

    name = "diffusers"

    def __init__(
        self,
        model: str | Path | None = "tiny",
        *,
        device: str | None = None,
        dtype: Any = None,
        device_map: str | dict | None = None,
        progress: bool = True,
        scheduler: Any = None,
        safety_checker: Any = None,
        token: str | None = None,
        fast: bool | FastOptions = False,
    ) -> None:
        self.model = None if model is None else str(model)
        self.device = device
        self.dtype = dtype
        self.device_map = device_map
        self.progress = progress
        self.scheduler = scheduler
        self.safety_checker = safety_checker
        self.token = token
        self.fast = fast  # cosmos_helpers.fast: text K/V once per prompt, CUDA graphs, attention kernel choice

    def __repr__(self) -> str:
        return f"DiffusersBackend(model={self.model!r}, device={self._device()!r})"

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

    def model_for(self, request: GenerationRequest | None = None) -> str:
        if self.model is not None:
            return self.model
        return request.model if request is not None else "tiny"

    def pipeline(self, model: str | None = None):
        """The loaded ``Cosmos3OmniPipeline`` for ``model`` (loading it, and freeing any other, if needed)."""
        model = model or self.model_for()
        key = (model, self._device(), str(self._dtype()), repr(self.device_map))
        with _CACHE_LOCK:
            loaded = _CACHE.get("pipe")
            if loaded is not None and loaded.key == key:
                return _fast_switch(loaded.pipe, self.fast)
            if loaded is not None:
                free_pipeline()
            start = time.perf_counter()
            pipe = self._load(model)
            _CACHE["pipe"] = _Loaded(key, pipe, time.perf_counter() - start)
            return _fast_switch(pipe, self.fast)

    def last_load_seconds(self) -> float:
        loaded = _CACHE.get("pipe")
        return loaded.load_s if loaded else 0.0

    def _load(self, model: str):
        try:
            import torch  # noqa: F401
            from diffusers import Cosmos3OmniPipeline
        except ImportError as exc:
            raise BackendUnavailableError(
                f"the Diffusers backend needs torch and diffusers>=0.42.1 ({exc}); "
                "install with `pip install -e .` from the repository.") from exc
        from diffusers.utils import logging as diffusers_logging

        diffusers_logging.set_verbosity_error()
        diffusers_logging.disable_progress_bar()
        source = _resolve_source(model)
        kwargs: dict[str, Any] = {"dtype": self._dtype(), "enable_safety_checker": False}
        if self.device_map is not None:
            kwargs["device_map"] = self.device_map
        if self.token:
            kwargs["token"] = self.token
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
                pipe = Cosmos3OmniPipeline.from_pretrained(source, **kwargs)
        except OSError as exc:
            raise BackendUnavailableError(
                f"could not load {model!r} ({exc}). A hub id needs network access to the Hugging Face hub and, "
                "for nvidia/Cosmos3-*, an accepted license and HF_TOKEN; on an offline machine use model='tiny' "
                "or a local folder holding the checkpoint.") from exc
        if self.device_map is None:
            pipe = pipe.to(self._device())
        pipe.set_progress_bar_config(disable=True)
        return pipe

    # Generation -------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Run one request. ``progress(step, total)`` is called after every denoising step."""
        import torch

        model = self.model_for(request)
        started = time.perf_counter()
        checker = self._safety_checker(request)
        if checker is not None and not checker.check_text_safety(request.prompt_text()):
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        load_start = time.perf_counter()
        pipe = self.pipeline(model)
        load_s = time.perf_counter() - load_start
        pipe.scheduler = self._scheduler_for(pipe, request.flow_shift)
        kwargs = self.pipeline_kwargs(request)
        marks: list[float] = []
        bar = _progress_bar(request.num_inference_steps, request, enabled=self.progress)

        def on_step(_pipe, step, _timestep, callback_kwargs):
            marks.append(time.perf_counter())
            if bar is not None:
                bar.update(1)
            if progress is not None:
                progress(step + 1, request.num_inference_steps)
            return callback_kwargs  # diffusers pops "latents" from what we return

        # the fast path converts to uint8 on the GPU (same values; a quarter of the bytes to copy)
        frames_on_device = getattr(pipe, "_cosmos_fast", None) is not None and pipe.device.type == "cuda"
        call_start = time.perf_counter()
        try:
            with torch.inference_mode():
                output = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed),
                              callback_on_step_end=on_step, output_type="pt" if frames_on_device else "np",
                              return_dict=True)
                if frames_on_device:
                    from ..fast.frames import video_to_host_uint8

                    output.video = video_to_host_uint8(output.video)
        except ValueError as exc:
            if "Guardrail" in str(exc):
                raise GuardrailError(str(exc)) from exc
            raise
        finally:
            if bar is not None:
                bar.close()
        end = time.perf_counter()
        frames = np.asarray(output.video)
        if frames.ndim == 5:
            frames = frames[0]
        sound = None
        if request.sound and output.sound is not None:
            sound = output.sound.float().cpu().numpy()
            sound = sound[0] if sound.ndim == 3 else sound
        generation = Generation(
            frames=frames, fps=request.fps, seed=request.seed, request=request, sound=sound,
            sample_rate=int(getattr(getattr(pipe, "sound_tokenizer", None), "config", {}).get("sampling_rate", 48000))
            if getattr(pipe, "sound_tokenizer", None) is not None else 48000,
            backend=self.name, model=model,
            timings=_timings(started, load_s, call_start, marks, end),
            provenance={"device": str(pipe.device), "dtype": str(pipe.transformer.dtype),
                        "scheduler": type(pipe.scheduler).__name__},
        )
        if checker is not None:
            checked = checker.check_video_safety(generation.frames)
            if checked is None:
                raise GuardrailError("the Cosmos guardrails blocked the generated video.")
            generation.frames = np.asarray(checked, dtype=np.uint8)
        return generation

    def pipeline_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        """The exact ``Cosmos3OmniPipeline.__call__`` arguments for a request (no generator/callback)."""
        templates = request.templates_apply
        kwargs: dict[str, Any] = dict(
            prompt=request.prompt_text(),
            negative_prompt=request.negative_prompt_text(),
            num_frames=request.num_frames,
            height=request.height,
            width=request.width,
            fps=request.fps,
            num_inference_steps=request.num_inference_steps,
            guidance_scale=request.guidance_scale,
            enable_sound=bool(request.sound),
            use_system_prompt=request.use_system_prompt,
            add_resolution_template=request.add_resolution_template and templates,
            add_duration_template=request.add_duration_template and templates,
            enable_safety_check=False,
        )
        if request.mode == "image2video":
            kwargs["image"] = request.conditioning_image()
        elif request.mode == "video2video":
            from .. import media

            frames = media.cover_crop(request.conditioning_video(), request.width, request.height)
            kwargs["video"] = [media.load_image(frame) for frame in frames]
            kwargs["condition_frame_indexes_vision"] = request.condition_frames
            kwargs["condition_video_keep"] = request.condition_video_keep
        return kwargs

    def _scheduler_for(self, pipe, shift: float):
        return configure_scheduler(pipe.scheduler.config, self.scheduler, shift)

    def _safety_checker(self, request: GenerationRequest):
        if not request.guardrails:
            return None
        if self.safety_checker is not None:
            return self.safety_checker
        try:
            from diffusers.utils import is_cosmos_guardrail_available
        except ImportError:
            is_cosmos_guardrail_available = lambda: False  # noqa: E731
        if not is_cosmos_guardrail_available():
            raise BackendUnavailableError(GUARDRAIL_HELP)
        from cosmos_guardrail import CosmosSafetyChecker

        self.safety_checker = CosmosSafetyChecker()
        return self.safety_checker


def _fast_switch(pipe, fast: bool | FastOptions):
    """Patch the shared pipeline for fast backends (with their options), restore stock for the others."""
    if fast or getattr(pipe, "_cosmos_fast", None) is not None:
        from ..fast import FastOptions, disable_fast_path, enable_fast_path

        if not fast:
            disable_fast_path(pipe)
        else:
            enable_fast_path(pipe, fast if isinstance(fast, FastOptions) else None)
    return pipe


def free_pipeline() -> None:
    """Drop the cached pipeline and return its memory (GPU included) before loading another model."""
    _CACHE.pop("pipe", None)
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def configure_scheduler(base_config: Any, scheduler: Any, shift: float):
    """A fresh flow-matching scheduler with ``shift``; Karras sigmas off, or the shift would be ignored.

    ``scheduler`` is a diffusers scheduler class, an instance (its config wins), or ``None`` for flow UniPC.
    Config keys the class does not know are dropped instead of warned about.
    """
    import inspect

    from diffusers import UniPCMultistepScheduler

    if scheduler is None or isinstance(scheduler, type):
        cls, config = scheduler or UniPCMultistepScheduler, dict(base_config)
    else:
        cls, config = type(scheduler), dict(scheduler.config)
    accepted = set(inspect.signature(cls.__init__).parameters)
    config = {key: value for key, value in config.items() if key in accepted or key.startswith("_")}
    if "flow_shift" in accepted:
        config.update(flow_shift=shift, use_flow_sigmas=True, prediction_type="flow_prediction")
    elif "shift" in accepted:
        config["shift"] = shift
    else:
        raise ValidationError("scheduler", f"{cls.__name__} has no flow shift setting.",
                              "use a flow-matching scheduler (UniPCMultistepScheduler, FlowMatchEulerDiscreteScheduler, ...).")
    if "use_karras_sigmas" in accepted:
        config["use_karras_sigmas"] = False
    return cls.from_config(config)


def _resolve_source(model: str) -> str:
    if model == "tiny":
        from ..models.tiny import tiny_model_path

        return str(tiny_model_path())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "model_index.json").is_file():
            raise ValidationError("model", f"{path} has no model_index.json, so it is not a diffusers checkpoint.",
                                  "point at the folder that holds model_index.json, or use a hub id / 'tiny'.")
        return str(path)
    if "/" not in model:
        raise ValidationError("model", f"{model!r} is neither 'tiny', an existing folder, nor a hub id (owner/name).",
                              "use 'tiny', e.g. 'nvidia/Cosmos3-Nano', or a local checkpoint folder.")
    return model


def _timings(started: float, load_s: float, call_start: float, marks: list[float], end: float) -> dict[str, float]:
    timings = {"load_s": load_s, "total_s": end - started, "pipeline_s": end - call_start}
    if marks:
        timings["first_step_s"] = marks[0] - call_start
        timings["denoise_s"] = marks[-1] - call_start
        timings["decode_s"] = end - marks[-1]
        if len(marks) > 1:
            timings["step_s"] = (marks[-1] - marks[0]) / (len(marks) - 1)
    return timings


def _progress_bar(total: int, request: GenerationRequest, *, enabled: bool):
    from ..progress import progress_bar

    return progress_bar(total, f"{request.mode} denoising", "step", enabled=enabled)
