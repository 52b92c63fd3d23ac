"""Helpers that make NVIDIA Cosmos 3 generation easy to learn, run and trust from notebooks.

Describe a generation once with :class:`GenerationRequest`, run it on any backend
(:class:`DiffusersBackend` in-process, :class:`VllmOmniBackend` over HTTP, :class:`FrameworkBackend` through
the Cosmos Framework CLI, :class:`FrameworkServeBackend` on the framework's Ray Serve app), and get a
:class:`Generation` back that saves atomically with a manifest.

Importing this package is cheap: torch, diffusers and the HTTP stack load only when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {name: module for module, names in {
    "request": "GenerationRequest",
    "step_cache": "SeaCache",
    "precision": "FP8",
    "presets": "MODES PROFILES Profile get_profile size_for VIDEO_SIZES ASPECT_RATIOS",
    "result": "Generation find_saved",
    "workflow": "generate_and_save generate_and_save_all",
    "chaining": "extend",
    "longvideo": "long_video",
    "views.joins": "join_plot",
    "prompts": "load_caption compact caption_summary",
    "prompting": "build_caption check_caption caption_schema upsample precheck_request with_precheck Blocklist",
    "standins.chat": "ChatStandin",
    "backends.diffusers": "DiffusersBackend free_pipeline",
    "fast": "FastOptions",
    "backends.diffusers.parallel": "ParallelPlan WorkerError",
    "backends.vllm_omni": "VllmOmniBackend AsyncVllmOmniBackend",
    "backends.vllm_serve": "serve_command",
    "standins.vllm_omni.local": "LocalServer connect_vllm_omni",
    "backends.framework": "FrameworkBackend",
    "backends.framework_serve": "FrameworkServeBackend",
    "standins.ray_serve": "LocalRayServe",
    "batch": "run_batch BatchResult",
    "views.timeline": "batch_timeline",
    "models.tiny": "tiny_model_path",
    "models.tiny_trained": "trained_tiny_path",
    "controls.estimation": "estimate_controls",
    "controls.videos": "write_control_videos",
    "widgets": "show grid compare frame_strip sound_plot GenerateForm",
    "environment": "environment_report",
    "gallery": "list_outputs",
    "sweeps": "sweep SweepResult",
    "trajectories": "load_trajectory save_trajectory",
    "action_samples": "sample_trajectory render_drive",
    "views.trajectory": "trajectory_plot trajectory_error_plot",
    "errors": "CosmosHelpersError ValidationError OutputExistsError BackendUnavailableError GuardrailError ServerError "
              "GenerationTimeoutError",
}.items() for name in names.split()}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmos_helpers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for editors and type checkers only; the same names as _EXPORTS
    from .backends.diffusers import DiffusersBackend, free_pipeline
    from .backends.framework import FrameworkBackend
    from .backends.framework_serve import FrameworkServeBackend
    from .batch import BatchResult, run_batch
    from .backends.vllm_omni import AsyncVllmOmniBackend, VllmOmniBackend
    from .backends.vllm_serve import serve_command
    from .chaining import extend
    from .controls.estimation import estimate_controls
    from .controls.videos import write_control_videos
    from .environment import environment_report
    from .errors import (BackendUnavailableError, CosmosHelpersError, GenerationTimeoutError, GuardrailError,
                         OutputExistsError, ServerError, ValidationError)
    from .fast import FastOptions
    from .action_samples import render_drive, sample_trajectory
    from .gallery import list_outputs
    from .longvideo import long_video
    from .models.tiny import tiny_model_path
    from .models.tiny_trained import trained_tiny_path
    from .backends.diffusers.parallel import ParallelPlan, WorkerError
    from .presets import ASPECT_RATIOS, MODES, PROFILES, VIDEO_SIZES, Profile, get_profile, size_for
    from .prompting import (Blocklist, build_caption, caption_schema, check_caption, precheck_request, upsample,
                            with_precheck)
    from .standins.chat import ChatStandin
    from .prompts import caption_summary, compact, load_caption
    from .request import GenerationRequest
    from .step_cache import SeaCache
    from .precision import FP8
    from .result import Generation, find_saved
    from .standins.vllm_omni.local import LocalServer, connect_vllm_omni
    from .standins.ray_serve import LocalRayServe
    from .sweeps import SweepResult, sweep
    from .views.joins import join_plot
    from .views.timeline import batch_timeline
    from .trajectories import load_trajectory, save_trajectory
    from .views.trajectory import trajectory_error_plot, trajectory_plot
    from .widgets import GenerateForm, compare, frame_strip, grid, show, sound_plot
    from .workflow import generate_and_save, generate_and_save_all
