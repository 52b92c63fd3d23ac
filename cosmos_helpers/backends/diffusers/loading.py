"""Loaded pipelines: where a model name is read from, how it becomes a pipeline, and the one cache that keeps them
(:data:`SHARED`: a checkpoint is tens of gigabytes, so one model at a time, which every ``DiffusersBackend`` of the
process borrows under the entry's lock; a second would not fit beside Nano).
"""

from __future__ import annotations

import functools
import gc
import inspect
import pkgutil
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ...errors import BackendUnavailableError, ValidationError
from ...models.tiny_distilled import INDEX_FILE as DISTILLED_INDEX, MODEL_NAME as TINY_DISTILLED, tiny_distilled_path
from ...models.tiny_edge import MODEL_NAME as TINY_EDGE, tiny_edge_path
from ...models.tiny_fp8 import tiny_fp8_path
from ...models.tiny_trained import trained_tiny_path
from ...precision import FP8
from ...protocol.fp8 import REVISION
from . import distilled, modelopt_fp8


TINY_PATHS = {"tiny": trained_tiny_path, TINY_DISTILLED: tiny_distilled_path, TINY_EDGE: tiny_edge_path}


@dataclass
class Loaded:
    """One loaded pipeline, the lock a call holds while it borrows it, and what its memory settings installed."""

    pipe: Any
    memory: dict[str, Any] | None = None
    w8a8_gemm: str | None = None  # a ModelOpt FP8 checkpoint: what runs its W8A8 products (modelopt_fp8.place)
    lock: threading.RLock = field(default_factory=threading.RLock)


class PipelineCache:
    """The pipelines of one process by (model, device, dtype, placement, builder, memory): one model at a time."""

    def __init__(self) -> None:
        self._entries: dict[tuple, Loaded] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple, load: Callable[[], Loaded]) -> Loaded:
        """The entry for ``key`` (``key[0]`` the model), loading it with ``load()`` after freeing any other model."""
        with self._lock:
            loaded = self._entries.get(key)
            if loaded is None:
                for other in [k for k in self._entries if k[0] != key[0]]:
                    del self._entries[other]
                collect_garbage()
                loaded = self._entries[key] = load()
            return loaded

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
        collect_garbage()


SHARED = PipelineCache()


def free_pipeline() -> None:
    """Drop every loaded pipeline and return its memory (GPU included) before loading another model."""
    SHARED.clear()


def collect_garbage() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def load_pipeline(model: str, *, dtype: Any, device_map: Any = None, token: str | None = None, precision: Any = None):
    """``model`` from disk or the hub as this package's pipeline class (a distilled checkpoint: diffusers' modular
    blocks), on the CPU until placed; ``precision`` an ``FP8``: its ModelOpt FP8 revision (:mod:`.modelopt_fp8`)."""
    try:
        import torch  # noqa: F401
        from diffusers.utils import logging as diffusers_logging
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the Diffusers backend needs torch and diffusers>=0.42.1 ({exc}); "
            "install with `pip install -e .` from the repository.") from exc
    diffusers_logging.set_verbosity_error()
    diffusers_logging.disable_progress_bar()
    kwargs: dict[str, Any] = {"dtype": dtype}
    if device_map is not None:  # whatever the user gave, even empty: then the pipeline is not moved
        kwargs["device_map"] = device_map
    if token:
        kwargs["token"] = token
    source = None
    if isinstance(precision, FP8):  # the embedded tiny model's FP8 build, a local FP8 folder as it is, or a hub id
        modelopt_fp8.enable_modelopt()
        if model == "tiny":
            source = str(tiny_fp8_path())
        elif not Path(model).expanduser().is_dir():
            kwargs["revision"] = REVISION
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
            if distilled.is_distilled_model(model):
                return distilled.load(resolve_source(model), **kwargs)
            return pipeline_class().from_pretrained(source or resolve_source(model), enable_safety_checker=False,
                                                    **kwargs)
    except OSError as exc:
        raise BackendUnavailableError(
            f"could not load {model!r} ({exc}). A hub id needs network access to the Hugging Face hub and, "
            "for nvidia/Cosmos3-*, an accepted license and HF_TOKEN; on an offline machine use profile 'tiny' "
            "or a local folder holding the checkpoint.") from exc


@dataclass(frozen=True)
class Builder:
    """A pipeline made by ``target(device, dtype, **kwargs)`` instead of loaded (benchmarks: random weights at real
    shapes); as a ``"module:function"`` string it travels to worker processes, which build the same."""

    target: str | Callable
    kwargs: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, target: str | Callable, **kwargs: Any) -> "Builder":
        return cls(target, tuple(sorted(kwargs.items())))

    def __call__(self, device: str, dtype: Any):
        fn = pkgutil.resolve_name(self.target) if isinstance(self.target, str) else self.target
        return as_guided(fn(device, dtype, **dict(self.kwargs)))


def resolve_source(model: str) -> str:
    """Where ``model`` is read from: the embedded tiny models' folders, a local checkpoint folder, or a hub id."""
    if model in TINY_PATHS:
        return str(TINY_PATHS[model]())
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


@functools.lru_cache(maxsize=None)
def pipeline_class() -> type:
    """``Cosmos3OmniPipeline`` with a guidance interval (diffusers 0.42.1 has none; vLLM-Omni applies ``[400, 1000]``
    to images): ``do_classifier_free_guidance``, asked before each step's negative pass, answers "no" outside it."""
    from diffusers import Cosmos3OmniPipeline

    class Cosmos3GuidedPipeline(Cosmos3OmniPipeline):
        guidance_interval: tuple[float, float] | None = None

        @property
        def do_classifier_free_guidance(self) -> bool:
            interval, t = self.guidance_interval, self._current_timestep
            inside = interval is None or t is None or interval[0] <= float(t) <= interval[1]
            return self._guidance_scale != 1.0 and inside

    return Cosmos3GuidedPipeline


def as_guided(pipe):
    """A builder's plain ``Cosmos3OmniPipeline`` as this package's class, on the same components (no weight copied)."""
    cls = pipeline_class()
    if isinstance(pipe, cls) or not isinstance(pipe, cls.__mro__[1]):
        return pipe
    # Not ``cls.from_pipe``: it casts every component to its ``dtype`` argument (float32 when none is given).
    accepted = inspect.signature(cls.__init__).parameters
    options = {k: v for k, v in pipe.config.items() if k in accepted and k not in pipe.components}
    guided = cls(**pipe.components, **options)
    guided.set_progress_bar_config(disable=True)
    return guided
