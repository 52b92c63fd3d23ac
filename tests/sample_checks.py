"""What a backend refuses of a framework sample, asked of the backend itself by its name (tests name backends)."""

from __future__ import annotations

from typing import Any

from cosmos_helpers.backends.diffusers import DiffusersBackend
from cosmos_helpers.backends.framework import FrameworkBackend
from cosmos_helpers.backends.vllm_omni import VllmOmniBackend

_BACKENDS = {"diffusers": lambda: DiffusersBackend(progress=False),
             "vllm-omni": lambda: VllmOmniBackend("http://127.0.0.1:9", progress=False),
             "framework": lambda: FrameworkBackend.standin(progress=False)}


def check_backend(sample: Any, resolved: Any, backend: str, given: set[str], step_cache: Any = None) -> None:
    """``backend``'s ``check_sample`` (nothing is sent, loaded or written)."""
    _BACKENDS[backend]().check_sample(sample, resolved, given, step_cache)
