"""Helpers that make NVIDIA Cosmos 3 generation easy to learn, run and trust from notebooks.

Describe a generation once with :class:`GenerationRequest`, run it on any backend (diffusers in-process, vLLM-Omni
over HTTP, the Cosmos Framework's CLI or Ray Serve app), and get a :class:`Generation` that saves with a manifest.

Here are the names a cookbook's first cell needs; the rest live in named modules (``presets``, ``errors``,
``prompting``, ``actions``, ``transfer``, ``controls``, ``batch``, ``sweeps``, ``fast``, ``backends``, ``standins``,
``media``). Importing this package is cheap: torch, diffusers and the HTTP stack load only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    ".request": "GenerationRequest",
    ".step_cache": "SeaCache",
    ".precision": "FP8",
    ".result": "Generation",
    ".backends.diffusers": "DiffusersBackend",
    ".backends.vllm_omni": "VllmOmniBackend",
    ".backends.framework": "FrameworkBackend",
    ".backends.framework_serve": "FrameworkServeBackend",
    ".workflow": "generate_and_save generate_and_save_all",
    ".longvideo": "generate_long_video=long_video",
    ".chaining": "continue_video=extend",
    ".transfer.runner": "run_spec",
    ".specs": "load_spec",
    ".batch": "run_batch",
    ".sweeps": "sweep",
    ".standins.vllm_omni.local": "connect_vllm_omni",
    ".backends.vllm_serve": "serve_command",
    ".presets": "get_profile",
    ".widgets": "show grid compare frame_strip sound_plot GenerateForm",
    ".views.plots": "join_plot",
    ".gallery": "list_outputs",
    ".environment": "environment_report",
    ".errors": "CosmosHelpersError ValidationError",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, extra=("__version__",))

if TYPE_CHECKING:  # pragma: no cover - for editors and type checkers only; the same names as _EXPORTS
    from .backends.diffusers import DiffusersBackend
    from .backends.framework import FrameworkBackend
    from .backends.framework_serve import FrameworkServeBackend
    from .backends.vllm_omni import VllmOmniBackend
    from .backends.vllm_serve import serve_command
    from .batch import run_batch
    from .chaining import extend as continue_video
    from .environment import environment_report
    from .errors import CosmosHelpersError, ValidationError
    from .gallery import list_outputs
    from .longvideo import long_video as generate_long_video
    from .precision import FP8
    from .presets import get_profile
    from .request import GenerationRequest
    from .result import Generation
    from .specs import load_spec
    from .standins.vllm_omni.local import connect_vllm_omni
    from .step_cache import SeaCache
    from .sweeps import sweep
    from .transfer.runner import run_spec
    from .views.plots import join_plot
    from .widgets import GenerateForm, compare, frame_strip, grid, show, sound_plot
    from .workflow import generate_and_save, generate_and_save_all
