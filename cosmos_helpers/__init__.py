"""Helpers that make NVIDIA Cosmos 3 generation easy to learn, run and trust from notebooks.

Describe a generation once with :class:`GenerationRequest`, run it on any backend
(:class:`DiffusersBackend` in-process, :class:`VllmOmniBackend` over HTTP, :class:`FrameworkBackend` through
the Cosmos Framework CLI), and get a :class:`Generation` back that saves atomically with a manifest.

Importing this package is cheap: torch, diffusers and the HTTP stack load only when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # describing and saving generations
    "GenerationRequest": "request",
    "MODES": "presets",
    "Generation": "result",
    "find_saved": "result",
    "generate_and_save": "workflow",
    "PROFILES": "presets",
    "Profile": "presets",
    "get_profile": "presets",
    "size_for": "presets",
    "VIDEO_SIZES": "presets",
    "ASPECT_RATIOS": "presets",
    "load_caption": "prompts",
    "compact": "prompts",
    "caption_summary": "prompts",
    # backends
    "DiffusersBackend": "backends.diffusers",
    "free_pipeline": "backends.diffusers",
    "FastOptions": "fast",
    "VllmOmniBackend": "backends.vllm_omni",
    "AsyncVllmOmniBackend": "backends.vllm_omni",
    "serve_command": "backends.vllm_serve",
    "LocalServer": "server.local",
    "connect_vllm_omni": "server.local",
    "FrameworkBackend": "backends.framework",
    # models
    "tiny_model_path": "models.tiny",
    # looking at results
    "show": "widgets",
    "grid": "widgets",
    "compare": "widgets",
    "frame_strip": "widgets",
    "sound_plot": "widgets",
    "GenerateForm": "widgets",
    "environment_report": "environment",
    "list_outputs": "gallery",
    # errors
    "CosmosHelpersError": "errors",
    "ValidationError": "errors",
    "OutputExistsError": "errors",
    "BackendUnavailableError": "errors",
    "GuardrailError": "errors",
    "ServerError": "errors",
    "GenerationTimeoutError": "errors",
}

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


if TYPE_CHECKING:  # pragma: no cover - for editors and type checkers only
    from .backends.diffusers import DiffusersBackend, free_pipeline
    from .fast import FastOptions
    from .errors import (BackendUnavailableError, CosmosHelpersError, GenerationTimeoutError, GuardrailError,
                         OutputExistsError, ServerError, ValidationError)
    from .presets import ASPECT_RATIOS, PROFILES, VIDEO_SIZES, Profile, get_profile, size_for
    from .prompts import caption_summary, compact, load_caption
    from .presets import MODES
    from .request import GenerationRequest
    from .result import Generation, find_saved
    from .workflow import generate_and_save
